"""asyncio waits with a time limit that never lose a cancellation.

On Python 3.11 ``asyncio.wait_for`` swallows a ``cancel()`` that arrives while the awaited thing completes
(CPython gh-86296, fixed in 3.12): the waiter returns normally and a service loop built on it runs on, so
whoever cancelled it and awaits it hangs. ``asyncio.timeout`` counts cancellations and has no such race;
every bounded wait of a long-running loop goes through these two helpers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["wait_event", "within"]

_T = TypeVar("_T")


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass; whether it is set."""
    try:
        async with asyncio.timeout(max(0.0, timeout)):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


async def within(aw: Awaitable[_T], timeout: float) -> _T:
    """``await aw`` for at most ``timeout`` seconds; ``TimeoutError`` after that."""
    async with asyncio.timeout(max(0.0, timeout)):
        return await aw
