"""Which queue a producer sends to next: Java's ``MQFaultStrategy`` and ``LatencyFaultToleranceImpl``.

Queues are taken round-robin. A broker that just failed a send is skipped for the retry of that send
(``lastBrokerName``); and a broker that failed recently, or answered slowly, is avoided for a while:

| send latency      | ≥ 0.55 s | ≥ 1 s | ≥ 2 s | ≥ 3 s | ≥ 15 s |
| avoided for       | 30 s     | 60 s  | 120 s | 180 s | 600 s  |

a failed send (no answer, no connection, a retryable error code) counts as ``isolation_seconds``
(30 s by default; Java's 30 000 ms latency would mean 10 minutes). While every broker is avoided the
choice falls back to plain round-robin, so a single-broker cluster keeps working.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rocketq.client.message_queue import MessageQueue
from rocketq.client.route import TopicPublishInfo

__all__ = ["LatencyFaultTolerance", "MQFaultStrategy"]

_LATENCY_MAX = (0.05, 0.1, 0.55, 1.0, 2.0, 3.0, 15.0)
_NOT_AVAILABLE = (0.0, 0.0, 30.0, 60.0, 120.0, 180.0, 600.0)


@dataclass(slots=True)
class _FaultItem:
    latency: float
    start: float  # monotonic time from which the broker is usable again


class LatencyFaultTolerance:
    """Brokers to avoid until a given time."""

    def __init__(self) -> None:
        self._items: dict[str, _FaultItem] = {}

    def update(self, broker_name: str, latency: float, not_available: float) -> None:
        self._items[broker_name] = _FaultItem(latency, time.monotonic() + not_available)

    def is_available(self, broker_name: str) -> bool:
        item = self._items.get(broker_name)
        return item is None or time.monotonic() >= item.start

    def remove(self, broker_name: str) -> None:
        self._items.pop(broker_name, None)


class MQFaultStrategy:
    def __init__(self, enabled: bool = True, isolation_seconds: float = 30.0) -> None:
        self.enabled = enabled
        self.isolation_seconds = isolation_seconds
        self.tolerance = LatencyFaultTolerance()

    def select_one_message_queue(self, info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        if not self.enabled:
            return info.select_one_message_queue(last_broker_name)
        return info.select_one_message_queue(last_broker_name, self.tolerance.is_available)

    def update_fault_item(self, broker_name: str, latency: float, isolation: bool) -> None:
        if not self.enabled:
            return
        if isolation:
            self.tolerance.update(broker_name, latency, self.isolation_seconds)
            return
        duration = 0.0
        for limit, pause in zip(reversed(_LATENCY_MAX), reversed(_NOT_AVAILABLE), strict=True):
            if latency >= limit:
                duration = pause
                break
        if duration > 0:
            self.tolerance.update(broker_name, latency, duration)
        else:
            self.tolerance.remove(broker_name)
