"""Topic and group names: ``common/topic/TopicValidator``, the naming part of ``MixAll``, and ``PermName``.

- A topic name is 1–127 characters of ``[%|a-zA-Z0-9_-]`` (spec §6.1 step 2).
- System topics cannot be created or deleted by an admin; a few of them cannot be sent to.
- ``%RETRY%<group>`` and ``%DLQ%<group>`` are a group's retry and dead-letter topics.
- Permission bits of a topic or broker (spec §8.2): 8 PRIORITY, 4 READ, 2 WRITE, 1 INHERIT.

Each check returns ``None`` when the name is fine, else ``(response code, remark)`` with Java's remark. The
codes are those of the spec (INVALID_PARAMETER for a bad name, as 5.x answers; 4.9 said SYSTEM_ERROR).
"""

from __future__ import annotations

import re
from typing import Final

from rocketq.remoting.codes import ResponseCode

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

_LEGAL = re.compile(r"[%|a-zA-Z0-9_-]+")

Problem = tuple[int, str]


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def get_retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def get_dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


def validate_topic(topic: str | None) -> Problem | None:
    """``validateTopic``: not blank, legal characters only, at most 127 characters."""
    if topic is None or not topic.strip():
        return ResponseCode.INVALID_PARAMETER, "The specified topic is blank."
    if _LEGAL.fullmatch(topic) is None:
        return (ResponseCode.INVALID_PARAMETER,
                "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")  # fmt: skip
    if len(topic) > TOPIC_MAX_LENGTH:
        return ResponseCode.INVALID_PARAMETER, "The specified topic is longer than topic max length."
    return None


def is_system_topic(topic: str, extra: frozenset[str] | set[str] = frozenset()) -> bool:
    return topic in SYSTEM_TOPICS or topic in extra or topic.startswith(SYSTEM_TOPIC_PREFIX)


def check_not_system_topic(topic: str, extra: frozenset[str] | set[str] = frozenset()) -> Problem | None:
    """``isSystemTopic(topic, response)``: an admin may not create or delete these."""
    if is_system_topic(topic, extra):
        return ResponseCode.INVALID_PARAMETER, f"The topic[{topic}] is conflict with system topic."
    return None


def check_allowed_send_topic(topic: str) -> Problem | None:
    """``isNotAllowedSendTopic(topic, response)``."""
    if topic in NOT_ALLOWED_SEND_TOPICS:
        return ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
    return None
