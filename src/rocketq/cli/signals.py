"""SIGINT and SIGTERM as a clean stop for the long-running commands (``start``, ``broker``, ``namesrv``,
``consume``): while installed they set an ``asyncio.Event`` instead of raising ``KeyboardInterrupt``.

Installed before a server starts, so that a signal that comes during its start, or right after the line that
says it is ready, stops it the same clean way."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator

__all__ = ["stop_signals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def stop_signals() -> Iterator[asyncio.Event]:
    """Within the block (on the running loop), SIGINT and SIGTERM set the event it gives; after it, they act as
    before. Where the loop cannot take signal handlers (not the main thread), the event is never set."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in _SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    try:
        yield stop
    finally:
        for sig in _SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
