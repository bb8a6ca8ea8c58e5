"""The JSON bodies of the client protocol that the broker reads and writes (spec §8.6–§8.9).

The heartbeat bodies, ``CheckClientRequestBody`` and the consumer enums (RocketMQ's
``remoting/protocol/heartbeat``) are shared with the client: :mod:`rocketq.common.heartbeat`. Here:
``common/message/MessageQueue``, ``remoting/protocol/body`` (``LockBatchRequestBody``, ``LockBatchResponseBody``,
``Connection``, ``ConsumerConnection``, ``ProducerConnection``, ``TopicStatsTable``, ``ConsumeStats``, ``KVTable``,
``GetConsumerListByGroupResponseBody``), ``common/admin/OffsetWrapper`` /
``TopicOffset``, ``OffsetMovedEvent``, ``PullSysFlag`` and ``common/help/FAQUrl``.

Bodies are dataclasses read with :func:`rocketq.common.json_compat.from_json` (fastjson's leniency: enum
ordinals, numbers as strings, unknown members ignored) and written with ``json_compat.dumps`` (members
sorted, MessageQueue map keys as JSON objects, as a Java reader needs them). Enum values a client sent are
kept as their Java names (:func:`enum_name`): a C++ client sends ordinals, a newer client may send a name
this module does not know, and neither must fail a heartbeat.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.common import json_compat
from rocketq.common.heartbeat import SubscriptionData

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
class ConsumeStatsList:
    """Body of GET_BROKER_CONSUME_STATS: per group, the stats of each topic it has offsets of."""

    broker_addr: str = ""
    consume_stats_list: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    total_diff: int = 0


@dataclass
class QueueTimeSpan:
    message_queue: MessageQueue = field(default_factory=MessageQueue)
    min_time_stamp: int = 0
    max_time_stamp: int = 0
    consume_time_stamp: int = 0
    delay_time: int = 0


@dataclass
class QueryConsumeTimeSpanBody:
    consume_time_span_set: list[QueueTimeSpan] = field(default_factory=list)


@dataclass
class GetConsumerStatusBody:
    """Body of INVOKE_BROKER_TO_GET_CONSUMER_STATUS's answer: each client's offsets by client id."""

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)


@dataclass
class ResetOffsetBody:
    """Body of RESET_CONSUMER_CLIENT_OFFSET and of the INVOKE_BROKER_TO_RESET_OFFSET answer."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)


@dataclass
class MessageQueueForC:
    topic: str = ""
    broker_name: str = ""
    queue_id: int = 0
    offset: int = 0


@dataclass
class ResetOffsetBodyForC:
    """The C++ client's form of :class:`ResetOffsetBody`: a list instead of an object-keyed map."""

    offset_table: list[MessageQueueForC] = field(default_factory=list)


@dataclass
class ProducerInfo:
    client_id: str = ""
    remote_ip: str = field(default="", metadata={"json": "remoteIP"})
    language: str = "JAVA"
    version: int = 0
    last_update_timestamp: int = 0


@dataclass
class ProducerTableInfo:
    """Body of GET_ALL_PRODUCER_INFO (mqadmin producer): group → its producers."""

    data: dict[str, list[ProducerInfo]] = field(default_factory=dict)


@dataclass
class ConsumeQueueData:
    physic_offset: int = 0
    physic_size: int = 0
    tags_code: int = 0
    extend_data_json: str | None = None
    bit_map: str | None = None
    eval: bool = False
    msg: str | None = None


@dataclass
class QueryConsumeQueueResponseBody:
    """Body of QUERY_CONSUME_QUEUE (mqadmin queryCq)."""

    subscription_data: SubscriptionData | None = None
    filter_data: str | None = None
    queue_data: list[ConsumeQueueData] | None = None
    max_queue_index: int = 0
    min_queue_index: int = 0


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
