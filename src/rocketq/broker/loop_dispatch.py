"""Dispatch of new records on the broker's event loop: the broker's side of the store's reput service.

RocketMQ's ``ReputMessageService`` is a thread that follows the commit log, builds the consume-queue units and
index entries of each new record, then tells ``NotifyMessageArrivingListener``, which wakes the held pulls
(``PullRequestHoldService``). In Java both hand-overs are cheap. In one Python process they are not: a send
appended on the event loop had to wake the reput thread, which had to win the GIL from the busy loop (up to the
5 ms switch interval, more on a loaded machine), and its arrivals had to hop back to the loop. Measured on a
loaded broker, these two hops were most of the time between storing a message and answering the held pull that
waits for it.

So the broker dispatches on its event loop (:class:`LoopDispatcher`, the commit log's append hook):

- appended on the event loop (sends): once per loop turn, after the turn's appends (a callback the appends
  schedule, at most one pending), on the loop itself; right after it, the held pulls that the new records
  satisfy are woken, and answered in the same callback (:mod:`rocketq.broker.pull_request_hold_service`);
- appended on another thread (a delay level's or the timer's delivery thread): on the loop too, one hop away
  (``call_soon_threadsafe``, one for all the appends until it runs), so a delivery thread goes on to its next
  due message at once, and the copy reaches the held pull in one hand-over instead of two.

The reput thread stays as the fallback (``ReputMessageService.fallback_only``): while another dispatcher is at
work, or when a turn appended more than ``ROUNDS_PER_TURN`` dispatch rounds of records, it takes the rest, and it
still dispatches records nobody reported (recovery) and records the loop left waiting for a look of the thread
(50 ms); it no longer dispatches whatever it finds when it looks, which under a steady load was always something.
Dispatch stays one at a time (:meth:`ReputMessageService.dispatch_now`), so the units of a
queue are written in commit-log order whichever thread writes them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocketq.store.message_store import MessageStore

__all__ = ["ROUNDS_PER_TURN", "LoopDispatcher"]

#: Dispatch rounds (of up to ``DISPATCH_BATCH`` records) one loop turn does at most; the reput thread takes the rest.
ROUNDS_PER_TURN = 2


class LoopDispatcher:
    """The commit log's append hook while the broker runs (module docstring)."""

    def __init__(self, store: MessageStore, loop: asyncio.AbstractEventLoop,
                 after_dispatch: Callable[[], None] | None = None) -> None:  # fmt: skip
        """*after_dispatch* runs on the loop after each of its dispatches (the broker wakes the held pulls that
        the dispatched records satisfy)."""
        self._store = store
        self._loop = loop
        self._after_dispatch = after_dispatch
        self._loop_thread = threading.get_ident()  # made on the loop
        self._scheduled = False
        self._previous = store.commit_log.on_append

    def install(self) -> None:
        self._store.commit_log.on_append = self.on_append
        reput = self._store.reput
        if reput is not None:
            reput.fallback_only = True

    def uninstall(self) -> None:
        """Back to waking the reput thread (before the loop stops)."""
        if self._store.commit_log.on_append == self.on_append:
            self._store.commit_log.on_append = self._previous
        reput = self._store.reput
        if reput is not None:
            reput.fallback_only = False
            reput.wakeup()  # whatever was appended and not dispatched yet

    def on_append(self, end: int) -> None:
        """Any thread, after an append (outside the commit log's put lock): one dispatch on the loop pending."""
        if self._scheduled:
            # Set before the pending dispatch began, so that dispatch will see this append (it clears the flag
            # before it looks at the end of the log).
            return
        self._scheduled = True
        if threading.get_ident() == self._loop_thread:
            self._loop.call_soon(self._dispatch_turn)
            return
        try:
            self._loop.call_soon_threadsafe(self._dispatch_turn)
        except RuntimeError:  # the loop is closed: the reput thread takes it
            self._scheduled = False
            reput = self._store.reput
            if reput is not None:
                reput.wakeup()

    def _dispatch_turn(self) -> None:
        self._scheduled = False
        reput = self._store.reput
        if reput is not None:
            reput.dispatch_now(ROUNDS_PER_TURN)
        if self._after_dispatch is not None:
            self._after_dispatch()
