"""Put and get counters of a broker: RocketMQ's ``store/stats/BrokerStats`` with the TPS of
``BrokerStatsManager`` (what GET_BROKER_RUNTIME_INFO reports as ``msgPutTotalTodayNow``, ``putTps`` …).

Totals count messages since start; the "morning" totals are the totals at the last local midnight and the
one before. TPS over the last 10 s, 1 min and 10 min come from samples taken by :meth:`sample` (the
controller calls it every few seconds) and are written as Java writes them: ``"0.00 0.00 0.00"``.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections import deque
from collections.abc import Callable

from rocketq.common.json_compat import java_double_str

_WINDOWS_S = (10, 60, 600)


class BrokerStats:
    """*put_total* counts every message the store appended since start, of every topic (Java's
    ``msgPutTotalTodayNow`` is the store's ``putMessageTimesTotal``); gets are counted by the pull path."""

    def __init__(self, put_total: Callable[[], int] = lambda: 0) -> None:
        self._put_total = put_total
        self.get_total = 0
        self.put_total_today_morning = 0
        self.put_total_yesterday_morning = 0
        self.get_total_today_morning = 0
        self.get_total_yesterday_morning = 0
        self._day = _dt.date.today()
        self._samples: deque[tuple[float, int, int]] = deque()
        self.sample()

    @property
    def put_total(self) -> int:
        return self._put_total()

    def on_get(self, n: int = 1) -> None:
        self.get_total += n

    def sample(self, now: float | None = None) -> None:
        """Record the totals now; roll the morning totals when the day changed."""
        now = time.monotonic() if now is None else now
        today = _dt.date.today()
        if today != self._day:
            self._day = today
            self.put_total_yesterday_morning = self.put_total_today_morning
            self.get_total_yesterday_morning = self.get_total_today_morning
            self.put_total_today_morning = self.put_total
            self.get_total_today_morning = self.get_total
        self._samples.append((now, self.put_total, self.get_total))
        while self._samples and now - self._samples[0][0] > _WINDOWS_S[-1] + 10:
            self._samples.popleft()

    def tps(self, kind: str, window_s: float, now: float | None = None) -> float:
        now = time.monotonic() if now is None else now
        current = self.put_total if kind == "put" else self.get_total
        base = None
        for t, put, get in self._samples:
            if now - t <= window_s:
                base = (t, put if kind == "put" else get)
                break
        if base is None or now - base[0] <= 0:
            return 0.0
        return (current - base[1]) / (now - base[0])

    def tps_string(self, kind: str) -> str:
        """``StoreStatsService.getPutTps()`` and kin: the TPS of each window as Java prints a double."""
        now = time.monotonic()
        return " ".join(java_double_str(self.tps(kind, w, now)) for w in _WINDOWS_S)


class KeyedStats:
    """Message counts per key, as ``BrokerStatsManager``'s stats items (``TOPIC_PUT_NUMS`` by topic,
    ``GROUP_GET_NUMS`` by ``topic@group``) that VIEW_BROKER_STATS_DATA reports: the sum and TPS of the last
    minute, hour and day, worked out as 4.9.4's ``StatsItem`` works them out.

    Each window keeps, per key, snapshots of the key's count taken on its own schedule from the broker's start
    (every 10 s for the minute, 10 min for the hour, an hour for the day; the last 7, 7 and 25 of them); the
    first snapshot of a key that has come since is preceded by one of 0 an interval earlier. A window's sum is
    its last snapshot less its first, its TPS that over their time apart. So, as in Java, a count shows up at
    the next snapshot, and the hour and the day show nothing until their first snapshot after a key's first
    message. A key exists (has stats) once it has counted something since start; ``totals`` may start above 0
    (counts the broker held before it started are not its to report).
    """

    #: (interval between two snapshots in seconds, snapshots kept): samplingInSeconds, InMinutes, InHour
    _WINDOWS = ((10.0, 7), (600.0, 7), (3600.0, 25))

    def __init__(self, totals: dict[str, int] | None = None, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.totals: dict[str, int] = dict(totals or {})
        self._base = dict(self.totals)
        self._snapshots: tuple[dict[str, deque[tuple[float, int]]], ...] = tuple({} for _ in self._WINDOWS)
        # Java's sampling tasks first run as the broker starts, when no key has counted anything yet
        self._due = [now + interval for interval, _keep in self._WINDOWS]

    def add(self, key: str, n: int = 1) -> None:
        self.totals[key] = self.totals.get(key, 0) + n

    def count(self, key: str) -> int:
        """What *key* counted since start."""
        return self.totals.get(key, 0) - self._base.get(key, 0)

    def exists(self, key: str) -> bool:
        return self.count(key) > 0

    def sample(self, now: float | None = None) -> None:
        """Take the snapshots that are due (the controller calls this every few seconds)."""
        now = time.monotonic() if now is None else now
        for i, ((interval, keep), lists) in enumerate(zip(self._WINDOWS, self._snapshots, strict=True)):
            if now < self._due[i]:
                continue
            due = self._due[i] + interval
            self._due[i] = due if due > now else now + interval  # after a long pause: no burst of snapshots
            for key in self.totals:
                value = self.count(key)
                snapshots = lists.get(key)
                if snapshots is None:
                    if value <= 0:
                        continue
                    snapshots = lists[key] = deque([(now - interval, 0)], maxlen=keep)
                snapshots.append((now, value))

    def snapshot(self, key: str) -> list[tuple[int, float]]:
        """(sum, tps) of the last minute, hour and day (``computeStatsData``)."""
        out: list[tuple[int, float]] = []
        for lists in self._snapshots:
            snapshots = lists.get(key)
            if not snapshots:
                out.append((0, 0.0))
                continue
            (t0, v0), (t1, v1) = snapshots[0], snapshots[-1]
            total = v1 - v0
            out.append((total, total / (t1 - t0) if t1 > t0 else 0.0))
        return out
