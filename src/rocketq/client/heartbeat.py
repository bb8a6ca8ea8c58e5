"""What a client tells brokers about itself: Java's ``HeartbeatData``, ``ConsumerData``, ``ProducerData``,
``SubscriptionData`` (``common/protocol/heartbeat``), the consumer enums, and ``FilterAPI``'s parsing of a
tag expression (remoting-protocol §6.5, §8.6, §11.7).

A tag expression is ``*`` (everything) or tags joined by ``||`` (``TagA || TagB``); each tag is trimmed
and its Java ``String.hashCode`` goes into ``codeSet``. Brokers filter on the hash, so a client checks
the tag string again (``SubscriptionData.matches``).

HeartbeatData as a 4.9.4 Java client writes it (the golden capture)::

    {"clientID":"192.0.2.2@wire-consumer","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",
     "consumeType":"CONSUME_PASSIVELY","groupName":"G","messageModel":"CLUSTERING","subscriptionDataSet":[
     {"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1795307277930,
      "tagsSet":[],"topic":"%RETRY%G"}],"unitMode":false}],"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from rocketq.client.errors import InvalidMessageError
from rocketq.common import json_compat
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import MessageExt

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "SUB_ALL",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "HeartbeatData",
    "MessageModel",
    "ProducerData",
    "SubscriptionData",
    "build_subscription",
]

SUB_ALL = "*"
EXPRESSION_TYPE_TAG = "TAG"
EXPRESSION_TYPE_SQL92 = "SQL92"


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


@dataclass(slots=True)
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    expression_type: str = EXPRESSION_TYPE_TAG
    class_filter_mode: bool = False

    def matches(self, msg: MessageExt) -> bool:
        """Client-side re-check of a pulled message against the tags (``PullAPIWrapper.processPullResult``)."""
        if not self.tags_set or self.expression_type != EXPRESSION_TYPE_TAG:
            return True
        tags = msg.properties.get("TAGS")
        return tags is not None and tags in self.tags_set


def build_subscription(topic: str, expression: str | None = SUB_ALL,
                       expression_type: str = EXPRESSION_TYPE_TAG) -> SubscriptionData:  # fmt: skip
    """``FilterAPI.buildSubscriptionData``: ``*``/empty → all; else tags split on ``||`` and trimmed."""
    expression_type = (expression_type or EXPRESSION_TYPE_TAG).upper()
    if expression_type not in (EXPRESSION_TYPE_TAG, EXPRESSION_TYPE_SQL92):
        raise InvalidMessageError(f"unknown expression type {expression_type!r}: use TAG or SQL92")
    if expression_type == EXPRESSION_TYPE_SQL92:
        if not expression or not expression.strip():
            raise InvalidMessageError("an SQL92 subscription needs an expression")
        return SubscriptionData(topic, expression, expression_type=EXPRESSION_TYPE_SQL92)
    if expression is None or not expression.strip() or expression.strip() == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL)
    tags: list[str] = []
    for part in expression.split("||"):
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    if not tags:
        raise InvalidMessageError(f"subscription expression {expression!r} holds no tag")
    return SubscriptionData(topic, expression, tags, [java_string_hash(t) for t in tags])


@dataclass(slots=True)
class ConsumerData:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False


@dataclass(slots=True)
class ProducerData:
    group_name: str


@dataclass(slots=True)
class HeartbeatData:
    client_id: str = field(metadata={"json": "clientID"})
    consumer_data_set: list[ConsumerData] = field(default_factory=list)
    producer_data_set: list[ProducerData] = field(default_factory=list)

    def encode(self) -> bytes:
        return json_compat.dumps_bytes(self)
