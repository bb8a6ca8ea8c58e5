"""The JSON bodies and enums of the client protocol that the broker reads and writes (spec §8.6–§8.9).

Mirrors RocketMQ's ``remoting/protocol/heartbeat`` (``HeartbeatData``, ``ConsumerData``, ``ProducerData``,
``SubscriptionData``, ``ConsumeType``, ``MessageModel``, ``ConsumeFromWhere``), ``common/message/MessageQueue``,
``remoting/protocol/body`` (``LockBatchRequestBody``, ``LockBatchResponseBody``, ``Connection``,
``ConsumerConnection``, ``ProducerConnection``, ``TopicStatsTable``, ``ConsumeStats``, ``KVTable``,
``CheckClientRequestBody``, ``GetConsumerListByGroupResponseBody``), ``common/admin/OffsetWrapper`` /
``TopicOffset``, ``OffsetMovedEvent``, ``PullSysFlag`` and ``common/help/FAQUrl``.

Bodies are dataclasses read with :func:`rocketq.common.json_compat.from_json` (fastjson's leniency: enum
ordinals, numbers as strings, unknown members ignored) and written with ``json_compat.dumps`` (members
sorted, MessageQueue map keys as JSON objects, as a Java reader needs them). Enum-valued members are kept
as their Java names (strings): a C++ client sends ordinals, a newer client may send a name this module does
not know, and neither must fail a heartbeat.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.common import json_compat

# --- FAQUrl ----------------------------------------------------------------------------------------
FAQ_URL: Final = "http://rocketmq.apache.org/docs/faq/"


def suggest_todo(url: str = FAQ_URL) -> str:
    """``FAQUrl.suggestTodo``: the hint Java appends to many remarks."""
    return f"\nSee {url} for further details."


# --- PullSysFlag -----------------------------------------------------------------------------------
FLAG_COMMIT_OFFSET: Final = 0x1
FLAG_SUSPEND: Final = 0x2
FLAG_SUBSCRIPTION: Final = 0x4
FLAG_CLASS_FILTER: Final = 0x8
FLAG_LITE_PULL_MESSAGE: Final = 0x10


# --- enums (ordinals as Java declares them) ----------------------------------------------------------
class ConsumeType(enum.Enum):
    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1
    CONSUME_POP = 2


class MessageModel(enum.Enum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


def enum_name(cls: type[enum.Enum], value: object, default: str | None = None) -> str | None:
    """The Java name of an enum value received as a name or an ordinal; unknown names are kept as they are."""
    if value is None:
        return default
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, bool):
        return default
    if isinstance(value, int) or (isinstance(value, str) and value.strip().lstrip("-").isdigit()):
        members = list(cls)
        n = int(value)
        return members[n].name if 0 <= n < len(members) else default
    return str(value)


# --- heartbeat ----------------------------------------------------------------------------------------
SUB_ALL: Final = "*"
EXPRESSION_TYPE_TAG: Final = "TAG"


@dataclass
class SubscriptionData:
    """``SubscriptionData``; ``tags_set``/``code_set`` are what the client sent (C++ sends zero codes)."""

    topic: str = ""
    sub_string: str = SUB_ALL
    class_filter_mode: bool = False
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str | None = EXPRESSION_TYPE_TAG

    @property
    def is_tag_type(self) -> bool:
        """``ExpressionType.isTagType``: no type or ``TAG``."""
        return not self.expression_type or self.expression_type == EXPRESSION_TYPE_TAG


def build_subscription_data(topic: str, sub_string: str | None, expression_type: str | None = None,
                            sub_version: int = 0) -> SubscriptionData:  # fmt: skip
    """``FilterAPI.build``: tags split on ``||`` and trimmed; ``*`` or empty means everything."""
    sub = SubscriptionData(topic=topic, sub_version=sub_version, expression_type=expression_type or "TAG")
    text = (sub_string or "").strip()
    if not text or text == SUB_ALL:
        sub.sub_string = SUB_ALL
        return sub
    sub.sub_string = sub_string or ""
    if sub.is_tag_type:
        from rocketq.common.javacompat import java_string_hash

        for tag in text.split("||"):
            tag = tag.strip()
            if tag:
                sub.tags_set.append(tag)
                sub.code_set.append(java_string_hash(tag))
    return sub


@dataclass
class ConsumerData:
    group_name: str = ""
    consume_type: Any = None
    message_model: Any = None
    consume_from_where: Any = None
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False


@dataclass
class ProducerData:
    group_name: str = ""


@dataclass
class HeartbeatData:
    client_id: str = field(default="", metadata={"json": "clientID"})
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)
    heartbeat_fingerprint: int = 0
    without_sub: bool = False


@dataclass
class CheckClientRequestBody:
    client_id: str = ""
    group: str = ""
    subscription_data: SubscriptionData | None = None


# --- queues, locks, connections --------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class MessageQueue:
    """``MessageQueue``: identity is (topic, brokerName, queueId); written ``{"brokerName","queueId","topic"}``."""

    topic: str = ""
    broker_name: str = ""
    queue_id: int = 0


@dataclass
class LockBatchRequestBody:
    """Body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ (the unlock body has the same members)."""

    consumer_group: str = ""
    client_id: str = ""
    only_this_broker: bool = False
    mq_set: list[MessageQueue] = field(default_factory=list)


@dataclass
class LockBatchResponseBody:
    lock_ok_mq_set: list[MessageQueue] = field(default_factory=list, metadata={"json": "lockOKMQSet"})


@dataclass
class GetConsumerListByGroupResponseBody:
    consumer_id_list: list[str] = field(default_factory=list)


@dataclass
class Connection:
    client_id: str = ""
    client_addr: str = ""
    language: str = "JAVA"
    version: int = 0


@dataclass
class ConsumerConnection:
    connection_set: list[Connection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None


@dataclass
class ProducerConnection:
    connection_set: list[Connection] = field(default_factory=list)


# --- statistics ---------------------------------------------------------------------------------------
@dataclass
class TopicOffset:
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@dataclass
class TopicStatsTable:
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)


@dataclass
class OffsetWrapper:
    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0


@dataclass
class ConsumeStats:
    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0


@dataclass
class KVTable:
    table: dict[str, str] = field(default_factory=dict)


@dataclass
class OffsetMovedEvent:
    """Body of the messages a broker writes to ``OFFSET_MOVED_EVENT`` on PULL_OFFSET_MOVED."""

    consumer_group: str = ""
    message_queue: MessageQueue = field(default_factory=MessageQueue)
    offset_request: int = 0
    offset_new: int = 0


def decode_body(tp: type[Any], body: bytes | None) -> Any:
    """A JSON body read into ``tp`` with fastjson's leniency; raises ``ValueError`` (a JSON or value error)."""
    if not body:
        raise ValueError("the request has no body")
    return json_compat.from_json(tp, json_compat.loads(body))


def encode_body(obj: Any) -> bytes:
    """A body as fastjson writes it (compact, members sorted, object map keys written as objects)."""
    return json_compat.dumps_bytes(obj)
