"""A failure that repeats, logged once in a while with a count instead of at every repeat.

A server that meets the same failure in a loop (dispatch of a record whose consume-queue file cannot be made, an
accept with no descriptor left) must say so, but one line with a traceback per try filled disks at thousands a
second. :class:`Throttled` lets the first report through (with its traceback) and then one per interval, saying
how many were held back.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["Throttled"]


class Throttled:
    """Reports to *log* at most once per *every_s* seconds (thread-safe)."""

    def __init__(self, log: logging.Logger, every_s: float = 10.0) -> None:
        self.log = log
        self.every_s = every_s
        self._last = -every_s
        self._held = 0
        self._lock = threading.Lock()

    def _due(self) -> int | None:
        """The count held back since the last report when one is due now, else None (counted)."""
        now = time.monotonic()
        with self._lock:
            if now - self._last < self.every_s:
                self._held += 1
                return None
            held, self._held, self._last = self._held, 0, now
            return held

    def error(self, msg: str, *args: object, exc_info: bool = False) -> None:
        held = self._due()
        if held is not None:
            suffix = f" ({held} more like it since the last report)" if held else ""
            self.log.error(msg + suffix, *args, exc_info=exc_info)

    def exception(self, msg: str, *args: object) -> None:
        """:meth:`error` with the traceback of the exception being handled."""
        self.error(msg, *args, exc_info=True)
