"""What a client tells brokers about itself, one definition for the client that writes it and the broker that
reads it: Java's ``HeartbeatData``, ``ConsumerData``, ``ProducerData``, ``SubscriptionData``
(``remoting/protocol/heartbeat``), the consumer enums, and ``FilterAPI``'s reading of a tag expression
(remoting-protocol §6.5, §8.6, §11.7).

A tag expression is ``*`` (everything) or tags joined by ``||`` (``TagA || TagB``); each tag is trimmed and
its Java ``String.hashCode`` goes into ``codeSet``. Brokers filter on the hash, so a client checks the tag
string again (``SubscriptionData.matches``).

The bodies are written with :func:`rocketq.common.json_compat.dumps` (members sorted, ``None`` left out) and
read with ``json_compat.from_json`` (fastjson's leniency). The enum members of ``ConsumerData`` take the
client's enums, or whatever a peer sent when it is not one of them (a C++ client sends ordinals, a newer
client may send a name this module does not know): a heartbeat never fails on them. ``HeartbeatData`` as a
4.9.4 Java client writes it (the golden capture)::

    {"clientID":"192.0.2.2@wire-consumer","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",
     "consumeType":"CONSUME_PASSIVELY","groupName":"G","messageModel":"CLUSTERING","subscriptionDataSet":[
     {"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1795307277930,
      "tagsSet":[],"topic":"%RETRY%G"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}

5.x adds ``heartbeatFingerprint`` and ``withoutSub``; they are read when present and never written.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Final

from rocketq.common import json_compat
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import MessageExt

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "SUB_ALL",
    "CheckClientRequestBody",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "HeartbeatData",
    "MessageModel",
    "ProducerData",
    "SubscriptionData",
    "build_subscription_data",
    "is_tag_type",
]

SUB_ALL: Final = "*"
EXPRESSION_TYPE_TAG: Final = "TAG"
EXPRESSION_TYPE_SQL92: Final = "SQL92"


class ConsumeType(enum.Enum):
    """How a consumer gets messages: by pulling itself (pull/lite pull) or pushed by the client (push)."""

    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1
    CONSUME_POP = 2


class MessageModel(enum.Enum):
    """BROADCASTING: every consumer of the group gets every message; CLUSTERING: each message goes to one."""

    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.Enum):
    """Where a consumer group with no committed offset for a queue starts."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class SubscriptionData:
    """``SubscriptionData``; ``tags_set``/``code_set`` as the client built them (a C++ client sends no codes).
    ``sub_version`` defaults to now, as Java's does."""

    topic: str = ""
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = field(default_factory=_now_ms)
    expression_type: str | None = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False

    @property
    def is_tag_type(self) -> bool:
        """``ExpressionType.isTagType``: no type or ``TAG``."""
        return is_tag_type(self.expression_type)

    def matches(self, msg: MessageExt) -> bool:
        """Client-side re-check of a pulled message against the tags (``PullAPIWrapper.processPullResult``)."""
        if not self.tags_set or not self.is_tag_type:
            return True
        tags = msg.properties.get("TAGS")
        return tags is not None and tags in self.tags_set


def is_tag_type(expression_type: str | None) -> bool:
    """``ExpressionType.isTagType``: no type, or ``TAG``."""
    return not expression_type or expression_type == EXPRESSION_TYPE_TAG


def build_subscription_data(topic: str, sub_string: str | None, expression_type: str | None = None,
                            sub_version: int | None = None) -> SubscriptionData:  # fmt: skip
    """``FilterAPI.build``: ``*`` or empty means everything; for a tag expression the tags are split on
    ``||``, trimmed and kept once each, with their hash codes (as in Java, an expression such as ``" * "`` is the
    tag ``*``, and a blank one names no tag: neither is everything). Any other expression type keeps its text as
    it is (a broker reads it; a client validates before, see ``rocketq.client.heartbeat.build_subscription``)."""
    sub = SubscriptionData(topic=topic, expression_type=expression_type or EXPRESSION_TYPE_TAG)
    if sub_version is not None:
        sub.sub_version = sub_version
    text = (sub_string or "").strip()
    if not sub_string or sub_string == SUB_ALL or (not text and not sub.is_tag_type):
        sub.sub_string = SUB_ALL
        return sub
    sub.sub_string = sub_string
    if sub.is_tag_type:
        for part in text.split("||"):
            tag = part.strip()
            if tag and tag not in sub.tags_set:
                sub.tags_set.append(tag)
                sub.code_set.append(java_string_hash(tag))
    return sub


@dataclass(slots=True)
class ConsumerData:
    group_name: str = ""
    consume_type: ConsumeType | str | None = None
    message_model: MessageModel | str | None = None
    consume_from_where: ConsumeFromWhere | str | None = None
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False


@dataclass(slots=True)
class ProducerData:
    group_name: str = ""


@dataclass(slots=True)
class CheckClientRequestBody:
    """CHECK_CLIENT_CONFIG's body (``CheckClientRequestBody``): a consumer's subscription for the broker to
    check before the consumer starts (SQL92 subscriptions)."""

    client_id: str = ""
    group: str = ""
    subscription_data: SubscriptionData | None = None

    def encode(self) -> bytes:
        return json_compat.dumps_bytes(self)


@dataclass(slots=True)
class HeartbeatData:
    client_id: str = field(default="", metadata={"json": "clientID"})
    consumer_data_set: list[ConsumerData] = field(default_factory=list)
    producer_data_set: list[ProducerData] = field(default_factory=list)
    heartbeat_fingerprint: int | None = None
    without_sub: bool | None = None

    def encode(self) -> bytes:
        return json_compat.dumps_bytes(self)
