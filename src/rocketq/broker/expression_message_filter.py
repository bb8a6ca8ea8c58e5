"""Filtering of pulls: RocketMQ's ``broker/filter/ExpressionMessageFilter``, for TAG and SQL92 subscriptions
(spec §11.7).

A pull asks the filter twice per consume-queue unit, as the store's ``MessageFilter`` protocol says: first
with the unit's tag code (Java's ``String.hashCode`` of the ``TAGS`` value, 0 when absent), then, for units
that pass, with the record bytes.

- TAG: Java stops after the tag code and leaves hash collisions to the client; this filter also compares the
  tag string read from the record, so a colliding tag never reaches the client. The tag codes come from the
  subscription string, never from the ``codeSet`` a client sent (C++ clients send zeros).
- SQL92: every unit passes the first question (rocketq keeps no bloom-filter bit maps in the consume queue, so
  Java's ``isMatchedByConsumeQueue`` says yes too); the record's properties are then evaluated with the group's
  compiled selector (:mod:`rocketq.common.sql92`), and only a TRUE evaluation selects the message.
- Retries with ``filterSupportRetry`` (Java's ``ExpressionForRetryMessageFilter``): a pull of ``%RETRY%<group>``
  evaluates each record with the group's selector of the topic it came from (its ``RETRY_TOPIC`` property); a
  record of a topic the group does not filter by SQL92 passes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

from rocketq.common.codec import MESSAGE_MAGIC_CODE_V2, SYSFLAG_POS, header_struct
from rocketq.common.heartbeat import SUB_ALL, SubscriptionData
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import PROPERTY_RETRY_TOPIC, PROPERTY_TAGS, string_to_properties
from rocketq.common.sql92 import Selector

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_TAGS_FIRST = PROPERTY_TAGS.encode() + b"\x01"
_TAGS_LATER = b"\x02" + _TAGS_FIRST


def record_property_bytes(record: bytes | bytearray | memoryview) -> bytes | None:
    """The property string of a stored record, found without decoding the rest; None when the record is short."""
    try:
        (sys_flag,) = _I32.unpack_from(record, SYSFLAG_POS)
        hdr = header_struct(sys_flag)
        (body_len,) = _I32.unpack_from(record, hdr.size - 4)
        p = hdr.size + max(body_len, 0)
        (magic,) = _I32.unpack_from(record, 4)
        if magic == MESSAGE_MAGIC_CODE_V2:
            (topic_len,) = _I16.unpack_from(record, p)
            p += 2 + topic_len
        else:
            p += 1 + record[p]
        (props_len,) = _I16.unpack_from(record, p)
        return bytes(record[p + 2 : p + 2 + props_len])
    except (struct.error, IndexError):
        return None


def record_properties(record: bytes | bytearray | memoryview) -> dict[str, str] | None:
    """The properties of a stored record (``MessageDecoder.decodeProperties``); None when the record is short."""
    raw = record_property_bytes(record)
    return None if raw is None else string_to_properties(raw.decode("utf-8", "replace"))


def record_tags(record: bytes | bytearray | memoryview) -> str | None:
    """The ``TAGS`` property of a stored record, read without decoding the rest; None when absent."""
    props = record_property_bytes(record)
    if props is None:
        return None
    if props.startswith(_TAGS_FIRST):
        start = len(_TAGS_FIRST)
    else:
        i = props.find(_TAGS_LATER)
        if i < 0:
            return None
        start = i + len(_TAGS_LATER)
    end = props.find(b"\x02", start)
    value = props[start:] if end < 0 else props[start:end]
    return value.decode("utf-8", "replace") if value else None


class ExpressionMessageFilter:
    """The filter of one pull: everything for ``*``, else the listed tags; or, for an SQL92 subscription, the
    group's compiled *selector* (None: nothing to evaluate, everything passes, as Java's filter without
    filter data)."""

    __slots__ = ("codes", "retry_selector_of", "selector", "subscription", "tags")

    def __init__(self, subscription: SubscriptionData | None, selector: Selector | None = None,
                 retry_selector_of: Callable[[str], Selector | None] | None = None) -> None:  # fmt: skip
        """*retry_selector_of* (a pull of a retry topic with ``filterSupportRetry``): the group's selector of a
        topic, or None."""
        self.subscription = subscription
        self.selector = selector
        self.retry_selector_of = retry_selector_of
        text = (subscription.sub_string if subscription is not None else SUB_ALL) or SUB_ALL
        if subscription is None or subscription.class_filter_mode or not subscription.is_tag_type or \
                text.strip() in ("", SUB_ALL):  # fmt: skip
            self.tags: frozenset[str] | None = None
            self.codes: frozenset[int] | None = None
        else:
            self.tags = frozenset(t.strip() for t in text.split("||") if t.strip())
            self.codes = frozenset(java_string_hash(t) for t in self.tags)

    @property
    def matches_all(self) -> bool:
        return self.codes is None and self.selector is None and self.retry_selector_of is None

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return self.codes is None or tags_code is None or tags_code in self.codes

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        if self.retry_selector_of is not None:
            return self.is_matched_by_properties(record_properties(record) or {})
        if self.selector is not None:
            return self.selector.matches(record_properties(record))
        return self.tags is None or record_tags(record) in self.tags

    def is_matched_by_properties(self, properties: Mapping[str, str] | None) -> bool:
        """The long-polling wake-up check on a newly dispatched message's properties (None: not at hand, the
        pull decides when it reads the record)."""
        if properties is None:
            return True
        if self.retry_selector_of is not None:
            real_topic = properties.get(PROPERTY_RETRY_TOPIC)
            selector = self.retry_selector_of(real_topic) if real_topic else None
            return selector is None or selector.matches(properties)
        if self.selector is not None:
            return self.selector.matches(properties)
        return self.tags is None or properties.get(PROPERTY_TAGS) in self.tags

    def __repr__(self) -> str:
        if self.selector is not None:
            return f"ExpressionMessageFilter(SQL92 {self.selector.expression!r})"
        return f"ExpressionMessageFilter({sorted(self.tags) if self.tags is not None else '*'})"
