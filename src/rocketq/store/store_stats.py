"""How long a store's puts and gets take: the timing half of RocketMQ's ``StoreStatsService``.

What GET_BROKER_RUNTIME_INFO (mqadmin brokerStatus) reports from it, as 4.9.4 writes it, and what monitoring
reads (rocketmq-exporter parses every one of these keys):

- ``putMessageEntireTimeMax``, ``getMessageEntireTimeMax``: the longest put and get since the store opened, in ms;
- ``putMessageDistributeTime``: the puts of the last whole minute by time taken, in 13 ranges
  (``[<=0ms]:N [0~10ms]:N … [10s~]:N `` with the trailing space);
- ``putLatency99``, ``putLatency999``: the 99th and 99.9th percentile put time of the last whole minute, in ms
  (``%.2f``), interpolated within 4.9.4's finer buckets (``findPutMessageEntireTimePX``).

A put's time runs from its store timestamp (taken as its append begins) to the moment its outcome is final: at
once under ASYNC_FLUSH, once flushed (and held by a slave) when it waits for that, as Java's
``asyncPutMessage`` times its future. The minute rolls when :meth:`PutGetTimes.roll_if_due` is called after it
ended (the broker does so with its other samples every few seconds; Java's stats thread checks every second).
The common put of 0 ms is counted by the put path inline (``zero``), the others through :meth:`put_time`.
"""

from __future__ import annotations

import time
from bisect import bisect_left, bisect_right

__all__ = ["DISTRIBUTE_DESC", "PutGetTimes"]

#: The ranges of ``putMessageDistributeTime`` (``PUT_MESSAGE_ENTIRE_TIME_MAX_DESC``).
DISTRIBUTE_DESC = ("[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]", "[500ms~1s]",
                   "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]")  # fmt: skip
# upper bounds (exclusive) of the ranges after the first, for a time above 0 ms
_DISTRIBUTE_BOUNDS = (10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)


def _px_bucket_bounds() -> tuple[int, ...]:
    """``PUT_MESSAGE_ENTIRE_TIME_BUCKETS``: steps of 1 ms up to 20, 2 to 50, 5 to 100, 10 to 200, 50 to 500,
    100 to 1000, 1000 to 10000, then one bucket for the rest; each bucket named by its upper bound (inclusive)."""
    bounds: list[int] = []
    top = 0
    for step, times in ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9)):
        for _ in range(times):
            top += step
            bounds.append(top)
    bounds.append(2**63 - 1)  # Long.MAX_VALUE
    return tuple(bounds)


_PX_BOUNDS = _px_bucket_bounds()


class PutGetTimes:
    """Put and get times of one store (see the module)."""

    __slots__ = ("_distribution", "_last_distribution", "_last_px", "_px", "_window_start", "get_max",
                 "put_max", "zero")  # fmt: skip

    def __init__(self, now: float | None = None) -> None:
        #: puts of 0 ms this minute, not yet in the two tables below (the put path adds to it inline)
        self.zero = 0
        self.put_max = 0
        self.get_max = 0
        self._distribution = [0] * len(DISTRIBUTE_DESC)
        self._px = [0] * len(_PX_BOUNDS)
        self._last_distribution = [0] * len(DISTRIBUTE_DESC)
        self._last_px = [0] * len(_PX_BOUNDS)
        self._window_start = time.monotonic() if now is None else now

    def put_time(self, ms: int) -> None:
        """A put that took *ms* milliseconds (``setPutMessageEntireTimeMax``)."""
        if ms <= 0:
            self.zero += 1
            return
        self._distribution[1 + bisect_right(_DISTRIBUTE_BOUNDS, ms)] += 1
        self._px[bisect_left(_PX_BOUNDS, ms)] += 1
        if ms > self.put_max:
            self.put_max = ms

    def get_time(self, ms: int) -> None:
        """A get that took *ms* milliseconds (``setGetMessageEntireTimeMax``)."""
        if ms > self.get_max:
            self.get_max = ms

    def roll_if_due(self, now: float | None = None) -> None:
        """Start a new minute when the current one has run 60 s (*now*: a ``time.monotonic()`` value)."""
        now = time.monotonic() if now is None else now
        if now - self._window_start < 60.0:
            return
        self._window_start = now
        zero, self.zero = self.zero, 0
        distribution, self._distribution = self._distribution, [0] * len(DISTRIBUTE_DESC)
        px, self._px = self._px, [0] * len(_PX_BOUNDS)
        distribution[0] += zero
        px[0] += zero
        self._last_distribution, self._last_px = distribution, px

    def distribution(self) -> str:
        """``putMessageDistributeTime`` of the last whole minute."""
        return "".join(f"{desc}:{n} " for desc, n in zip(DISTRIBUTE_DESC, self._last_distribution, strict=True))

    def latency(self, px: float) -> float:
        """``findPutMessageEntireTimePX``: the put time below which *px* of the last whole minute's puts took."""
        counts = self._last_px
        index = int(sum(counts) * px)
        passed = 0
        for i, count in enumerate(counts):
            if index <= passed + count:
                below = _PX_BOUNDS[i - 1] if i else 0
                return below + ((_PX_BOUNDS[i] - below) * (index - passed) / count if count else 0.0)
            passed += count
        return 0.0

    def runtime_info(self) -> dict[str, str]:
        return {
            "putMessageEntireTimeMax": str(self.put_max),
            "getMessageEntireTimeMax": str(self.get_max),
            "putMessageDistributeTime": self.distribution(),
            "putLatency99": f"{self.latency(0.99):.2f}",
            "putLatency999": f"{self.latency(0.999):.2f}",
        }
