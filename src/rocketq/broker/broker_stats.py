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

from rocketq.common.json_compat import java_double_str

_WINDOWS_S = (10, 60, 600)


class BrokerStats:
    def __init__(self) -> None:
        self.put_total = 0
        self.get_total = 0
        self.put_total_today_morning = 0
        self.put_total_yesterday_morning = 0
        self.get_total_today_morning = 0
        self.get_total_yesterday_morning = 0
        self._day = _dt.date.today()
        self._samples: deque[tuple[float, int, int]] = deque()
        self.sample()

    def on_put(self, n: int = 1) -> None:
        self.put_total += n

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
    minute, hour and day.

    Totals are kept since start; :meth:`sample` records them (every call for the minute, every 10 min for the
    hour, every hour for the day, as Java samples), and a window's sum is the total now less the total at
    the oldest sample inside it. Before a window has filled, it covers the time since start.
    """

    #: (window in seconds, least gap between two samples of it)
    _WINDOWS = ((60.0, 0.0), (3600.0, 600.0), (86400.0, 3600.0))

    def __init__(self, totals: dict[str, int] | None = None, now: float | None = None) -> None:
        self.totals: dict[str, int] = dict(totals or {})
        self._samples: tuple[deque[tuple[float, dict[str, int]]], ...] = tuple(deque() for _ in self._WINDOWS)
        self.sample(now)

    def add(self, key: str, n: int = 1) -> None:
        self.totals[key] = self.totals.get(key, 0) + n

    def sample(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for (window, gap), samples in zip(self._WINDOWS, self._samples, strict=True):
            if not samples or now - samples[-1][0] >= gap:
                samples.append((now, dict(self.totals)))
            # keep the last sample at or before the window's start: the base of a full window
            while len(samples) > 1 and now - samples[1][0] >= window:
                samples.popleft()

    def snapshot(self, key: str, now: float | None = None) -> list[tuple[int, float]]:
        """(sum, tps) of the last minute, hour and day."""
        now = time.monotonic() if now is None else now
        current = self.totals.get(key, 0)
        out: list[tuple[int, float]] = []
        for (window, _gap), samples in zip(self._WINDOWS, self._samples, strict=True):
            base_time, base = next(((t, s) for t, s in samples if now - t <= window), samples[-1])
            total = max(current - base.get(key, 0), 0)
            elapsed = now - base_time
            out.append((total, total / elapsed if elapsed > 0 else 0.0))
        return out
