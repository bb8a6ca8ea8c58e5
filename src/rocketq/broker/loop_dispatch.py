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
  satisfy are woken, and answered in the same callback (:mod:`rocketq.broker.pull_request_hold_service`).
  While a pull is held, though, an append is dispatched at once, in the send that made it (see
  :meth:`LoopDispatcher.on_append`);
- appended on another thread (a delay level's or the timer's delivery thread): on the loop too, one hop away
  (``call_soon_threadsafe``, one for all the appends until it runs), so a delivery thread goes on to its next
  due message at once, and the copy reaches the held pull in one hand-over instead of two.

The reput thread stays as the fallback (``ReputMessageService.fallback_only``): when a turn appended more than
``RECORDS_PER_TURN`` records it takes the rest, and it still dispatches records nobody reported (recovery) and
records the loop left waiting for a look of the thread (50 ms); it no longer dispatches whatever it finds when it
looks, which under a steady load was always something. A pass of the thread goes only as far as the end of the log
when it began. When a turn finds the thread dispatching, it waits a moment (``LOCK_WAIT_S``, the GIL released) and
otherwise tries again in the next turn. Before, it woke the thread to take its records too: under load that kept
the thread at work, chasing the loop's appends with the GIL the loop held, and kept the loop from dispatching; the
copies of delayed messages then waited 40-240 ms (p50-p99) between being stored and being dispatched.
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

__all__ = ["LOCK_WAIT_S", "RECORDS_PER_TURN", "LoopDispatcher"]

#: Records one loop turn dispatches at most; the reput thread takes the rest.
RECORDS_PER_TURN = 2048
#: How long a turn waits for the reput thread to finish its pass before it tries again in a later turn. The wait
#: lets that thread have the GIL; it dispatches up to the end it saw when it began, so its pass is short.
LOCK_WAIT_S = 0.002


class LoopDispatcher:
    """The commit log's append hook while the broker runs (module docstring)."""

    def __init__(self, store: MessageStore, loop: asyncio.AbstractEventLoop,
                 after_dispatch: Callable[[], None] | None = None,
                 waited_for: Callable[[], bool] | None = None) -> None:  # fmt: skip
        """*after_dispatch* runs on the loop after each of its dispatches (the broker wakes the held pulls that
        the dispatched records satisfy); while *waited_for* says yes (a pull is held), an append on the loop is
        dispatched at once instead of at the end of the turn."""
        self._store = store
        self._loop = loop
        self._after_dispatch = after_dispatch
        self._waited_for = waited_for
        self._loop_thread = threading.get_ident()  # made on the loop
        self._scheduled = False
        self._dispatching = False
        self.immediate = 0  # dispatches done at once, for tests and statistics
        self._previous = store.commit_log.on_append

    def install(self) -> None:
        self._store.commit_log.on_append = self.on_append
        self._store.after_units = self._units_built
        reput = self._store.reput
        if reput is not None:
            reput.fallback_only = True

    def uninstall(self) -> None:
        """Back to waking the reput thread (before the loop stops)."""
        if self._store.commit_log.on_append == self.on_append:
            self._store.commit_log.on_append = self._previous
        if self._store.after_units == self._units_built:
            self._store.after_units = None
        reput = self._store.reput
        if reput is not None:
            reput.fallback_only = False
            reput.wakeup()  # whatever was appended and not dispatched yet

    def on_append(self, end: int) -> None:
        """Any thread, after an append (outside the commit log's put lock): one dispatch on the loop pending.

        On the loop, with a pull held (a consumer is caught up and waits), the append is dispatched at once:
        at the end of the turn it would wait for the rest of the turn, every frame of the read that brought it
        and every other connection's, which made most of the time between storing a message and answering the
        pull that waits for it. With no pull held, nobody waits on that time, and one dispatch a turn costs less.
        """
        if self._waited_for is not None and not self._dispatching and self._waited_for() and \
                threading.get_ident() == self._loop_thread:  # fmt: skip
            self.immediate += 1
            self._dispatch_turn()
            return
        self._schedule()

    def _schedule(self) -> None:
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

    def _units_built(self) -> None:
        """The store's ``after_units``: in a turn on the loop, the pulls its units wake are answered now, before
        the index of the batch is built (the reput thread's arrivals hop to the loop as before)."""
        if self._after_dispatch is not None and threading.get_ident() == self._loop_thread:
            self._after_dispatch()

    def _dispatch_turn(self) -> None:
        self._scheduled = False
        self._dispatching = True  # an append made while dispatching (none is expected) waits for the next turn
        try:
            reput = self._store.reput
            if reput is not None and not reput.dispatch_now(RECORDS_PER_TURN, LOCK_WAIT_S, make_files=False):
                # The thread is dispatching, maybe not as far as this turn's appends: again in the next turn, as an
                # append asks (waking the thread instead kept it at work, with the lock, while this loop held the
                # GIL).
                self._schedule()
            if self._after_dispatch is not None:
                self._after_dispatch()
        finally:
            self._dispatching = False
