"""Which asyncio event loop rocketq's processes run on: the standard one, or uvloop when asked for and installed.

RocketMQ's servers sit on Netty's epoll transport rather than the JDK's generic NIO selector when the platform has
it (``NettyServerConfig.useEpollNativeSelector``); uvloop (an event loop on libuv) is the same kind of choice for
Python. It is off unless ``ROCKETQ_UVLOOP=1`` is in the environment (and ``pip install rocketq[uvloop]``):
measured on the broker it brings no throughput, and it starves the broker's own threads. uvloop keeps the GIL
across its socket reads and writes, so a delay-delivery, reput or flush thread gets the GIL only when the
interpreter's switch interval (5 ms) forces it; under a send load that made delayed messages 1-3.5 s late at p50
(the standard loop releases the GIL in every socket call: 1-2 ms), see bench/broker_bench.py ``--delay-tx``.

``run(main)`` replaces ``asyncio.run(main)`` in the server entry points (``rocketq start``, ``broker``,
``namesrv``) and the broker bench's load generators; ``new_event_loop()`` makes a loop of the same kind for one
driven by hand.

Not for processes that print much after their loop has ended (the command-line clients, the blocking client's
thread): once a uvloop loop is closed, a large write to a pipe on stdout can come out short (uvloop 0.23 on
Linux: ``os.write(1, 200 KB)`` into a full pipe returns 64 KiB), so those keep the standard loop.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from rocketq.common.log_throttle import Throttled
from rocketq.common.process_limits import raise_open_files_limit

__all__ = ["ENV_VAR", "loop_factory", "loop_name", "new_event_loop", "run", "uvloop_wanted"]

_log = logging.getLogger(__name__)

#: ``1``/``true``/``yes``/``on`` turn uvloop on (when installed); anything else (or unset): the standard loop.
ENV_VAR: Final = "ROCKETQ_UVLOOP"
_ON: Final = frozenset({"1", "true", "yes", "on"})

_T = TypeVar("_T")


def uvloop_wanted(enabled: bool | None = None) -> bool:
    """Whether to try uvloop: ``enabled`` when given, else what ``ROCKETQ_UVLOOP`` says (default no), and never on
    Windows (uvloop does not exist there)."""
    if sys.platform == "win32":
        return False
    if enabled is not None:
        return enabled
    return os.environ.get(ENV_VAR, "").strip().lower() in _ON


def loop_factory(enabled: bool | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's ``new_event_loop`` when wanted and importable; ``None`` (the standard loop) otherwise."""
    if not uvloop_wanted(enabled):
        return None
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def new_event_loop(enabled: bool | None = None) -> asyncio.AbstractEventLoop:
    """A new event loop of the preferred kind (see :func:`loop_factory`)."""
    factory = loop_factory(enabled)
    return factory() if factory is not None else asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, _T], *, enabled: bool | None = None) -> _T:
    """``asyncio.run(main)`` on the preferred loop (Ctrl-C, task cancellation and shutdown as ``asyncio.run``),
    with the open-files limit raised (:mod:`rocketq.common.process_limits`) and a server socket's failures to
    accept for want of descriptors reported once in a while, not once a try."""
    raise_open_files_limit()
    with asyncio.Runner(loop_factory=loop_factory(enabled)) as runner:
        runner.get_loop().set_exception_handler(_AcceptFailures())
        return runner.run(main)


class _AcceptFailures:
    """The loop's exception handler: asyncio's ``socket.accept() out of system resource`` (no descriptor left)
    reported once in a while (:class:`~rocketq.common.log_throttle.Throttled`); everything else as asyncio's
    default handler does. asyncio logs that with a traceback at every failed accept and, in CPython 3.11,
    schedules a retry per failure of a burst: a broker out of descriptors wrote tens of thousands a second."""

    def __init__(self) -> None:
        self._report = Throttled(_log)

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != "socket.accept() out of system resource":
            loop.default_exception_handler(context)
            return
        self._report.error("cannot accept connections: %s: no descriptor left (raise the open files limit: "
                           "ulimit -n)", context.get("exception"))  # fmt: skip


def loop_name(loop: asyncio.AbstractEventLoop | None = None) -> str:
    """``uvloop`` or ``asyncio`` for the running (or given) loop, for a start-up line."""
    loop = loop if loop is not None else asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
