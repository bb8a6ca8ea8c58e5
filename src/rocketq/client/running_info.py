"""What a client tells a broker about its consumers when an admin asks: Java's ``ConsumerStatsManager`` and the
bodies ``ConsumerRunningInfo``, ``ProcessQueueInfo``, ``ConsumeStatus``, ``ConsumeMessageDirectlyResult`` and
``GetConsumerStatusBody`` (remoting-protocol §9: codes 221, 307 and 309, broker to client).

- GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``, the dashboard's client view): a consumer's settings as
  ``properties`` (Java's property names, plus the ``PROP_*`` entries the tools read), its subscriptions, every
  queue it holds with its cache and lock state (``mqTable``) and, per topic, pull and consume rates over the
  last minute (``statusTable``); with ``jstackEnable`` the stacks of the process's threads.
- CONSUME_MESSAGE_DIRECTLY (``mqadmin consumeMessage``-style resends, the dashboard's "resend"): one message
  handed to a push consumer's listener; the answer says how it went (``CR_SUCCESS``, ``CR_LATER``, …).
- GET_CONSUMER_STATUS_FROM_CLIENT (``mqadmin getConsumerStatus``): the consumer's offsets of a topic.

Every map keyed by a ``MessageQueue`` is written with the queue as a JSON object key, in the queue's order (a
Java ``TreeMap``), which is how a Java reader rebuilds the keys.
"""

from __future__ import annotations

import collections
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from rocketq.client.message_queue import MessageQueue
from rocketq.common.heartbeat import SubscriptionData

__all__ = [
    "PROP_CLIENT_VERSION",
    "PROP_CONSUMER_START_TIMESTAMP",
    "PROP_CONSUME_ORDERLY",
    "PROP_CONSUME_TYPE",
    "PROP_NAMESERVER_ADDR",
    "PROP_THREADPOOL_CORE_SIZE",
    "ConsumeMessageDirectlyResult",
    "ConsumeStatus",
    "ConsumerRunningInfo",
    "ConsumerStatsManager",
    "GetConsumerStatusBody",
    "ProcessQueueInfo",
    "epoch_ms",
    "running_info_properties",
    "thread_stacks",
]

PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"  # sic: Java's constant has no underscore there
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"


@dataclass(slots=True)
class ProcessQueueInfo:
    """A held queue's state (``ProcessQueue.fillProcessQueueInfo``); times in epoch milliseconds."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = field(default=0, metadata={"json": "cachedMsgSizeInMiB"})
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = False  # sic: Java's field name
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0


@dataclass(slots=True)
class ConsumeStatus:
    """Pull and consume rates of one group and topic over the last minute; failed messages over the last hour."""

    pull_rt: float = field(default=0.0, metadata={"json": "pullRT"})
    pull_tps: float = field(default=0.0, metadata={"json": "pullTPS"})
    consume_rt: float = field(default=0.0, metadata={"json": "consumeRT"})
    consume_ok_tps: float = field(default=0.0, metadata={"json": "consumeOKTPS"})
    consume_failed_tps: float = field(default=0.0, metadata={"json": "consumeFailedTPS"})
    consume_failed_msgs: int = 0


@dataclass(slots=True)
class ConsumerRunningInfo:
    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    def sorted(self) -> ConsumerRunningInfo:
        """The collections in Java's orders (TreeSet by topic then expression, TreeMaps by key)."""
        self.subscription_set.sort(key=lambda s: (s.topic, s.sub_string))
        self.mq_table = dict(sorted(self.mq_table.items()))
        self.status_table = dict(sorted(self.status_table.items()))
        return self


@dataclass(slots=True)
class ConsumeMessageDirectlyResult:
    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None  # CMResult: CR_SUCCESS, CR_LATER, CR_ROLLBACK, CR_COMMIT, CR_THROW_EXCEPTION, …
    remark: str | None = None
    spent_time_mills: int = 0


@dataclass(slots=True)
class GetConsumerStatusBody:
    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)


def thread_stacks() -> str:
    """The stacks of every thread of the process, as ``UtilAll.jstack`` lists a JVM's (``jstackEnable``)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out: list[str] = []
    for ident, frame in sys._current_frames().items():
        out.append(f"Thread: {names.get(ident, ident)}\n")
        out.extend(f"    {line.strip()}\n" for line in traceback.format_stack(frame) if line.strip())
        out.append("\n")
    return "".join(out)


class _Window:
    """Per-second sums (value, times) of one statistic, kept for an hour."""

    __slots__ = ("buckets",)

    def __init__(self) -> None:
        self.buckets: collections.deque[list[float]] = collections.deque()  # [second, value, times]

    def add(self, value: float, now: float) -> None:
        second = int(now)
        buckets = self.buckets
        if buckets and buckets[-1][0] == second:
            buckets[-1][1] += value
            buckets[-1][2] += 1
        else:
            buckets.append([second, value, 1])
            while buckets and buckets[0][0] <= second - 3600:
                buckets.popleft()

    def since(self, seconds: int, now: float) -> tuple[float, float]:
        """(value, times) summed over the last *seconds*."""
        first = int(now) - seconds
        value = times = 0.0
        for second, v, t in reversed(self.buckets):
            if second <= first:
                break
            value += v
            times += t
        return value, times


class _GroupTopicStats:
    """The windows of one ``topic@group``."""

    __slots__ = ("consume_failed", "consume_ok", "consume_rt", "pull_rt", "pull_tps")

    def __init__(self) -> None:
        self.pull_rt, self.pull_tps, self.consume_rt = _Window(), _Window(), _Window()
        self.consume_ok, self.consume_failed = _Window(), _Window()


class ConsumerStatsManager:
    """Java's ``ConsumerStatsManager`` of a client instance: pull RT and TPS, consume RT, OK and failed TPS per
    ``topic@group``; what GET_CONSUMER_RUNNING_INFO reports as ``statusTable``. One call per pull and one per
    consumed batch, about half a microsecond each."""

    def __init__(self) -> None:
        self._stats: dict[tuple[str, str], _GroupTopicStats] = {}

    def _of(self, group: str, topic: str) -> _GroupTopicStats:
        stats = self._stats.get((group, topic))
        if stats is None:
            stats = self._stats[(group, topic)] = _GroupTopicStats()
        return stats

    def pulled(self, group: str, topic: str, rt_ms: float, msgs: int) -> None:
        """A pull that found *msgs* messages after *rt_ms* (``incPullRT`` and ``incPullTPS``)."""
        stats, now = self._of(group, topic), time.time()
        stats.pull_rt.add(rt_ms, now)
        stats.pull_tps.add(msgs, now)

    def consumed(self, group: str, topic: str, rt_ms: float | None, ok: int, failed: int) -> None:
        """A consumed batch (``incConsumeRT``, ``incConsumeOKTPS``, ``incConsumeFailedTPS``); *rt_ms* None when
        only the outcome is new."""
        stats, now = self._of(group, topic), time.time()
        if rt_ms is not None:
            stats.consume_rt.add(rt_ms, now)
        if ok:
            stats.consume_ok.add(ok, now)
        if failed:
            stats.consume_failed.add(failed, now)

    def consume_status(self, group: str, topic: str) -> ConsumeStatus:
        stats = self._stats.get((group, topic))
        if stats is None:
            return ConsumeStatus()
        now = time.time()

        def avg(window: _Window) -> float:
            value, times = window.since(60, now)
            return value / times if times else 0.0

        return ConsumeStatus(
            pull_rt=avg(stats.pull_rt), pull_tps=stats.pull_tps.since(60, now)[0] / 60,
            consume_rt=avg(stats.consume_rt), consume_ok_tps=stats.consume_ok.since(60, now)[0] / 60,
            consume_failed_tps=stats.consume_failed.since(60, now)[0] / 60,
            consume_failed_msgs=int(stats.consume_failed.since(3600, now)[0]),
        )  # fmt: skip


def epoch_ms(monotonic_s: float) -> int:
    """A ``time.monotonic()`` instant as epoch milliseconds (what Java's ``System.currentTimeMillis`` gives)."""
    return int((time.time() - (time.monotonic() - monotonic_s)) * 1000)


def running_info_properties(settings: dict[str, Any]) -> dict[str, str]:
    """``MixAll.object2Properties``: each setting as text, ``None`` left out."""
    out: dict[str, str] = {}
    for name, value in settings.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif hasattr(value, "name") and not isinstance(value, str):
            out[name] = str(value.name)
        else:
            out[name] = str(value)
    return out
