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
        now = time.monotonic()
        return " ".join(f"{self.tps(kind, w, now):.2f}" for w in _WINDOWS_S)
