"""Messages as JSON objects: what ``rocketq store dump --json`` writes and ``rocketq store import`` reads.

One stored message is one JSON object whose field names are those of the golden
manifests' ``finalRead.messages`` (RocketMQ's ``MessageExt`` getters)::

    topic queueId queueOffset commitLogOffset storeSize msgId uniqKey tags keys
    sysFlag flag bodyCRC reconsumeTimes preparedTransactionOffset
    bornTimestamp bornHost storeTimestamp storeHost properties
    bodyLength bodyCrc32 body

- integers are the stored (signed, Java ``int``/``long``) values;
- ``msgId`` is the offset message id (upper-case hex), ``uniqKey`` the
  ``UNIQ_KEY`` property, ``tags``/``keys`` the ``TAGS``/``KEYS`` properties
  (``null`` when absent);
- hosts are ``"ip:port"`` (``"[v6]:port"`` for IPv6);
- ``body`` is base64 of the body **as stored**: a compressed body (sysFlag
  bit 0) stays compressed, and ``bodyLength``/``bodyCrc32`` (plain CRC-32)
  describe those stored bytes, while ``bodyCRC`` is the record's own field.

For import, :func:`dict_to_message` takes such an object (only ``topic`` and
``body`` are required) and returns an :class:`ImportedMessage`: the message as
a producer would have sent it, plus the record fields a restore keeps. Two
broker rewrites are undone or kept so a dump re-imports to the same records:

- a ``SCHEDULE_TOPIC_XXXX`` record (a delayed message waiting for delivery)
  is turned back into its send, to ``REAL_TOPIC``/``REAL_QID``; the store's
  delay rewrite puts it back into the schedule topic;
- a record already delivered after its delay (``DELAY`` and ``REAL_TOPIC``
  outside the schedule topic) keeps ``DELAY`` in its stored property string
  but is not delayed again, as a RocketMQ broker stores such a delivery.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rocketq.common.compression import CodecMissingError, CompressionError, decompress
from rocketq.common.errors import RocketqError
from rocketq.common.javacompat import encode_utf8_java
from rocketq.common.message import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    HostPort,
    Message,
    MessageExt,
    properties_to_string,
)
from rocketq.common.message_json import host_to_string, message_to_dict  # noqa: F401  (re-exported)
from rocketq.common.mixall import RMQ_SYS_SCHEDULE_TOPIC

if TYPE_CHECKING:
    from rocketq.store.message_store import MessageStore


# Field names in the order a dump writes them.
FIELDS: tuple[str, ...] = (
    "topic",
    "queueId",
    "queueOffset",
    "commitLogOffset",
    "storeSize",
    "msgId",
    "uniqKey",
    "tags",
    "keys",
    "sysFlag",
    "flag",
    "bodyCRC",
    "reconsumeTimes",
    "preparedTransactionOffset",
    "bornTimestamp",
    "bornHost",
    "storeTimestamp",
    "storeHost",
    "properties",
    "bodyLength",
    "bodyCrc32",
    "body",
)

# Properties a pull client adds to what it returns; never part of a stored record.
PULL_ADDED_PROPERTIES = frozenset({PROPERTY_MIN_OFFSET, PROPERTY_MAX_OFFSET})

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


class MessageDictError(RocketqError):
    """A JSON object that cannot be turned into a message (missing topic, bad base64, ...)."""


# --- export -------------------------------------------------------------------------------


# host_to_string and message_to_dict live in rocketq.common.message_json (shared with the client's
# ``rocketq consume --json``); re-exported here for the store's callers.


# --- import -------------------------------------------------------------------------------


@dataclass(slots=True)
class ImportedMessage:
    """A message read from a JSON object, ready to be wrapped for ``MessageStore.put_message``.

    ``born_timestamp``/``born_host`` are None when the object did not give them
    (the store then uses now and its own address). ``delay_as_stored`` marks a
    delivered delayed message: its ``DELAY`` property is stored but not acted on.
    """

    message: Message
    queue_id: int = 0
    sys_flag: int = 0
    born_timestamp: int | None = None
    born_host: HostPort | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    delay_as_stored: bool = False
    notes: list[str] = field(default_factory=list)

    def to_message_ext(self, store: MessageStore) -> MessageExt:
        """Wrap as the broker would (``store.to_message_ext``: ``UNIQ_KEY`` kept or made, ``CLUSTER`` set)."""
        ext = store.to_message_ext(
            self.message,
            self.queue_id,
            born_host=self.born_host,
            born_timestamp=self.born_timestamp,
            sys_flag=self.sys_flag,
            keep_wait=True,
        )
        ext.reconsume_times = self.reconsume_times
        ext.prepared_transaction_offset = self.prepared_transaction_offset
        if self.delay_as_stored and PROPERTY_DELAY_TIME_LEVEL in ext.properties:
            ext.properties_bytes = encode_utf8_java(properties_to_string(ext.properties))
            ext.properties = {k: v for k, v in ext.properties.items() if k != PROPERTY_DELAY_TIME_LEVEL}
        return ext


def parse_host(value: Any, name: str) -> HostPort:
    """``"ip:port"``, ``"[v6]:port"`` or ``"/ip:port"`` → (ip, port)."""
    if not isinstance(value, str) or ":" not in value:
        raise MessageDictError(f'{name} must be "ip:port", got {value!r}')
    ip, _, port_s = value.strip().lstrip("/").rpartition(":")
    ip = ip.strip("[]")
    try:
        port = int(port_s)
    except ValueError:
        raise MessageDictError(f"{name}: bad port in {value!r}") from None
    if not ip or not 0 <= port <= 65535:
        raise MessageDictError(f"{name}: bad address {value!r}")
    from rocketq.common.message_id import MessageIdError, host_to_bytes

    try:
        host_to_bytes(ip)
    except MessageIdError:
        raise MessageDictError(f"{name}: {ip!r} is not an IP address") from None
    return ip, port


def _int_field(d: dict[str, Any], name: str, default: int, bounds: tuple[int, int] = _INT32) -> int:
    value = d.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise MessageDictError(f"{name} must be an integer, got {value!r}")
    lo, hi = bounds
    if name in ("sysFlag", "flag", "bodyCRC") and hi < value <= 2 * hi + 1:
        value -= 2 * hi + 2  # an unsigned 32-bit rendering of a Java int
    if not lo <= value <= hi:
        raise MessageDictError(f"{name} {value} is out of range")
    return value


def _check_text(value: str, what: str) -> None:
    if NAME_VALUE_SEPARATOR in value or PROPERTY_SEPARATOR in value:
        raise MessageDictError(f"{what} holds a property separator character (\\u0001 or \\u0002)")


def _properties(d: dict[str, Any]) -> dict[str, str]:
    raw = d.get("properties")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise MessageDictError(f"properties must be an object, got {type(raw).__name__}")
    props: dict[str, str] = {}
    for k, v in raw.items():
        if k in PULL_ADDED_PROPERTIES:
            continue
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise MessageDictError(f"property {k!r} must be a string, got {type(v).__name__}")
        if not k:
            raise MessageDictError("a property has an empty name")
        v = str(v)
        _check_text(k, f"property name {k!r}")
        _check_text(v, f"property {k!r}")
        props[k] = v
    return props


def _decode_body(value: Any) -> bytes:
    if not isinstance(value, str):
        raise MessageDictError("body must be a base64 string" if value is not None else "body is missing")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise MessageDictError("body is not valid base64") from None


def dict_to_message(d: Any) -> ImportedMessage:
    """Read one JSON object of the dump's shape; raise :class:`MessageDictError` when it is unusable.

    Required: ``topic``, ``body`` (base64). Optional: ``queueId`` (0),
    ``properties``, ``tags``, ``keys`` (a string or a list; both go to the
    ``TAGS``/``KEYS`` properties), ``uniqKey``, ``flag``, ``sysFlag``,
    ``bornTimestamp``, ``bornHost``, ``reconsumeTimes``,
    ``preparedTransactionOffset``. Record fields the store assigns (offsets,
    store time and host, sizes, CRCs, ids) are ignored; so are the
    pull-added ``MIN_OFFSET``/``MAX_OFFSET`` and ``CLUSTER``, which the store sets.
    """
    if not isinstance(d, dict):
        raise MessageDictError(f"expected a JSON object, got {type(d).__name__}")
    topic = d.get("topic")
    if not isinstance(topic, str) or not topic:
        raise MessageDictError(
            "topic is missing" if topic in (None, "") else f"topic must be a string, got {topic!r}"
        )
    body = _decode_body(d.get("body"))
    queue_id = _int_field(d, "queueId", 0)
    if queue_id < 0:
        raise MessageDictError(f"queueId {queue_id} is negative")
    props = _properties(d)
    props.pop(PROPERTY_CLUSTER, None)
    tags = d.get("tags")
    if tags not in (None, ""):
        if not isinstance(tags, str):
            raise MessageDictError(f"tags must be a string, got {tags!r}")
        _check_text(tags, "tags")
        props[PROPERTY_TAGS] = tags
    keys = d.get("keys")
    if isinstance(keys, list):
        if not all(isinstance(k, str) for k in keys):
            raise MessageDictError("keys must be strings")
        keys = KEY_SEPARATOR.join(k for k in keys if k)
    if keys not in (None, ""):
        if not isinstance(keys, str):
            raise MessageDictError(f"keys must be a string or a list of strings, got {keys!r}")
        _check_text(keys, "keys")
        props[PROPERTY_KEYS] = keys
    uniq = d.get("uniqKey")
    if uniq not in (None, ""):
        if not isinstance(uniq, str):
            raise MessageDictError(f"uniqKey must be a string, got {uniq!r}")
        _check_text(uniq, "uniqKey")
        props.setdefault(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq)
    sys_flag = _int_field(d, "sysFlag", 0)
    notes: list[str] = []
    if sys_flag & COMPRESSED_FLAG:
        try:
            decompress(body, sys_flag)
        except CodecMissingError:
            pass  # cannot be checked here: stored as given
        except CompressionError as exc:
            # A body already inflated (a pull client's view): store it as plain bytes.
            sys_flag &= ~(COMPRESSED_FLAG | COMPRESSION_TYPE_MASK)
            notes.append(f"sysFlag says compressed but {exc}: stored uncompressed")
    born_host = parse_host(d["bornHost"], "bornHost") if d.get("bornHost") not in (None, "") else None
    born_ts = d.get("bornTimestamp")
    result = ImportedMessage(
        Message(topic, body, _int_field(d, "flag", 0), props),
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=None if born_ts is None else _int_field(d, "bornTimestamp", 0, _INT64),
        born_host=born_host,
        reconsume_times=_int_field(d, "reconsumeTimes", 0),
        prepared_transaction_offset=_int_field(d, "preparedTransactionOffset", 0, _INT64),
        notes=notes,
    )
    real_topic = props.get(PROPERTY_REAL_TOPIC)
    if props.get(PROPERTY_DELAY_TIME_LEVEL) and real_topic:
        if topic == RMQ_SYS_SCHEDULE_TOPIC:
            try:
                real_qid = int(props.get(PROPERTY_REAL_QUEUE_ID, ""))
            except ValueError:
                raise MessageDictError(f"{RMQ_SYS_SCHEDULE_TOPIC} message without a numeric REAL_QID") from None
            result.message.topic = real_topic
            result.queue_id = real_qid
            del props[PROPERTY_REAL_TOPIC]
            props.pop(PROPERTY_REAL_QUEUE_ID, None)
        else:
            result.delay_as_stored = True
    return result
