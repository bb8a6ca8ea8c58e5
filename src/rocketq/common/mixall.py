"""Names RocketMQ reserves: ``common/MixAll`` (group prefixes, built-in groups), the system topics of
``common/topic/TopicValidator`` and the permission bits of ``common/constant/PermName``; and MixAll's
byte count for people (``humanReadableByteCount``).

Every layer that needs one of these names (the store marks schedule and transaction records, the broker
validates and routes, the client builds retry topics, the admin tool reads as ``TOOLS_CONSUMER``) takes it
from here, so that each is written down once.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "CID_ONSAPI_OWNER_GROUP",
    "CID_ONSAPI_PERMISSION_GROUP",
    "CID_ONSAPI_PULL_GROUP",
    "CID_RMQ_SYS_PREFIX",
    "CLIENT_INNER_PRODUCER_GROUP",
    "DLQ_GROUP_TOPIC_PREFIX",
    "FILTERSRV_CONSUMER_GROUP",
    "MASTER_ID",
    "NOT_ALLOWED_SEND_TOPICS",
    "ONS_HTTP_PROXY_GROUP",
    "PERM_INHERIT",
    "PERM_PRIORITY",
    "PERM_READ",
    "PERM_WRITE",
    "REPLY_TOPIC_POSTFIX",
    "RETRY_GROUP_TOPIC_PREFIX",
    "RMQ_SYS_BENCHMARK_TOPIC",
    "RMQ_SYS_OFFSET_MOVED_EVENT",
    "RMQ_SYS_SCHEDULE_TOPIC",
    "RMQ_SYS_SELF_TEST_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "SELF_TEST_CONSUMER_GROUP",
    "SYSTEM_TOPICS",
    "SYSTEM_TOPIC_PREFIX",
    "TOOLS_CONSUMER_GROUP",
    "TOOLS_PRODUCER_GROUP",
    "TOPIC_MAX_LENGTH",
    "TOPIC_SYS_FLAG_UNIT",
    "TOPIC_SYS_FLAG_UNIT_SUB",
    "get_dlq_topic",
    "get_retry_topic",
    "human_byte_count",
    "is_legal_name",
    "is_retry_topic",
]

#: The broker id of a master (``MixAll.MASTER_ID``).
MASTER_ID: Final = 0
#: The topic whose route stands in for a topic the name server does not know yet (auto-creation).
AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC: Final = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
TOPIC_MAX_LENGTH: Final = 127

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
CID_RMQ_SYS_PREFIX: Final = "CID_RMQ_SYS_"

# MixAll's built-in groups (SubscriptionGroupManager.init creates these).
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
TOOLS_PRODUCER_GROUP: Final = "TOOLS_PRODUCER"
CLIENT_INNER_PRODUCER_GROUP: Final = "CLIENT_INNER_PRODUCER"
FILTERSRV_CONSUMER_GROUP: Final = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP: Final = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP: Final = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PULL_GROUP: Final = "CID_ONSAPI_PULL"
CID_ONSAPI_PERMISSION_GROUP: Final = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP: Final = "CID_ONSAPI_OWNER"

PERM_PRIORITY: Final = 0x8
PERM_READ: Final = 0x4
PERM_WRITE: Final = 0x2
PERM_INHERIT: Final = 0x1
#: ``TopicSysFlag``: a unit topic, a topic with unit subscriptions (the name server lists topics by them).
TOPIC_SYS_FLAG_UNIT: Final = 0x1
TOPIC_SYS_FLAG_UNIT_SUB: Final = 0x2


def is_legal_name(name: str) -> bool:
    """Only ``^[%|a-zA-Z0-9_-]+$``, the characters ``TopicValidator`` and ``Validators`` allow in a topic or group
    name (the whole name: a regex's ``$`` would let a final newline through)."""
    return _LEGAL_NAME.fullmatch(name) is not None


_LEGAL_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")

#: Topics every broker treats as system topics; a broker adds its cluster and broker names.
SYSTEM_TOPICS: Final = frozenset({
    AUTO_CREATE_TOPIC_KEY_TOPIC, RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_BENCHMARK_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRACE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT,
})  # fmt: skip
#: Topics no client may send to.
NOT_ALLOWED_SEND_TOPICS: Final = frozenset({
    RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, RMQ_SYS_SELF_TEST_TOPIC, RMQ_SYS_OFFSET_MOVED_EVENT,
})  # fmt: skip


def get_retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def get_dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def human_byte_count(n: int) -> str:
    """``MixAll.humanReadableByteCount(bytes, false)``: ``512 B``, ``1.5 KiB``, ``74.5 GiB``."""
    if n < 1024:
        return f"{n} B"
    units = "KMGTPE"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < len(units):
        value /= 1024
        exp += 1
    return f"{value:.1f} {units[exp - 1]}iB"
