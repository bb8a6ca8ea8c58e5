"""Topic and group names: ``common/topic/TopicValidator``, the naming part of ``MixAll``, and ``PermName``.

- A topic name is 1–127 characters of ``[%|a-zA-Z0-9_-]`` (spec §6.1 step 2).
- System topics cannot be created or deleted by an admin; a few of them cannot be sent to.
- ``%RETRY%<group>`` and ``%DLQ%<group>`` are a group's retry and dead-letter topics.
- Permission bits of a topic or broker (spec §8.2): 8 PRIORITY, 4 READ, 2 WRITE, 1 INHERIT.

Each check returns ``None`` when the name is fine, else ``(response code, remark)`` with Java's remark. The
codes are those of the spec (INVALID_PARAMETER for a bad name, as 5.x answers; 4.9 said SYSTEM_ERROR).
"""

from __future__ import annotations

from rocketq.common.mixall import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    CID_ONSAPI_OWNER_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_RMQ_SYS_PREFIX,
    DLQ_GROUP_TOPIC_PREFIX,
    FILTERSRV_CONSUMER_GROUP,
    NOT_ALLOWED_SEND_TOPICS,
    ONS_HTTP_PROXY_GROUP,
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    REPLY_TOPIC_POSTFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_TRACE_TOPIC,
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SELF_TEST_CONSUMER_GROUP,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    TOOLS_CONSUMER_GROUP,
    TOPIC_MAX_LENGTH,
    get_dlq_topic,
    get_retry_topic,
    is_legal_name,
    is_retry_topic,
)
from rocketq.remoting.codes import ResponseCode

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "CID_ONSAPI_OWNER_GROUP",
    "CID_ONSAPI_PERMISSION_GROUP",
    "CID_ONSAPI_PULL_GROUP",
    "CID_RMQ_SYS_PREFIX",
    "DLQ_GROUP_TOPIC_PREFIX",
    "FILTERSRV_CONSUMER_GROUP",
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
    "TOPIC_MAX_LENGTH",
    "Problem",
    "check_allowed_send_topic",
    "check_not_system_topic",
    "get_dlq_topic",
    "get_retry_topic",
    "is_inherited",
    "is_readable",
    "is_retry_topic",
    "is_sys_consumer_group",
    "is_system_topic",
    "is_writeable",
    "validate_topic",
]


Problem = tuple[int, str]


def is_readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def is_writeable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def is_inherited(perm: int) -> bool:
    return bool(perm & PERM_INHERIT)


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


#: Topics found legal (a broker sees few distinct names; bounded): checked again at the cost of a lookup.
_LEGAL_TOPICS: set[str] = set()


def validate_topic(topic: str | None) -> Problem | None:
    """``validateTopic``: not blank, legal characters only, at most 127 characters."""
    if topic in _LEGAL_TOPICS:
        return None
    problem = _topic_problem(topic)
    if problem is None and len(_LEGAL_TOPICS) < 65536:
        _LEGAL_TOPICS.add(topic)  # type: ignore[arg-type]
    return problem


def _topic_problem(topic: str | None) -> Problem | None:
    if topic is None or not topic.strip():
        return ResponseCode.INVALID_PARAMETER, "The specified topic is blank."
    if not is_legal_name(topic):
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
