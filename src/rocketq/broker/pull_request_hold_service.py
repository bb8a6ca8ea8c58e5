"""Long polling: RocketMQ's ``broker/longpolling/PullRequestHoldService``, ``ManyPullRequest``, ``PullRequest``
and ``NotifyMessageArrivingListener`` (spec §6.2).

A pull that finds nothing (PULL_NOT_FOUND) with the SUSPEND flag is held here instead of answered. It is
woken, and the pull runs once more without the right to be held again, when:

- a message that passes its filter lands in its queue (the store's dispatcher calls
  :meth:`PullRequestHoldService.notify_messages_arriving_threadsafe`, once a queue and dispatch batch: on the
  event loop, where the broker dispatches what is appended (:mod:`rocketq.broker.loop_dispatch`), the pulls
  are woken right after the dispatch batch; from another thread the arrivals of one dispatch batch hop to the
  loop together, with one wake-up of it);
- the queue already grew when the pull is registered (a message dispatched between the pull's read and
  its registration would otherwise wait for the next one, or for the periodic check);
- its suspend time is up (``suspendTimeoutMillis``; 1 s, ``shortPollingTimeMills``, when long polling is
  off);
- the periodic check (every 5 s, as Java's service loop) sees the queue grew past its offset, a safety net.

A held pull whose connection closes is dropped. Each held pull is an ``asyncio.Future`` that its own
request task awaits, so holding costs no thread and never delays other requests on the connection. The pull
processor also gives each held pull an ``answer`` callback: the wake-up runs the pull again and writes its
response right there (Java's ``executeRequestWhenWakeup``), instead of a turn of the loop later in the task,
and another turn later at the connection's next flush; on a busy broker each turn is milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from rocketq.broker.expression_message_filter import ExpressionMessageFilter
from rocketq.remoting.transport import RemotingConnection

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 5.0

#: The property maps of arriving records, one a record (None where not read), or None for none read.
_MapsOrNone = Sequence[Mapping[str, str] | None] | None


class WakeReason:
    ARRIVED = "arrived"
    TIMEOUT = "timeout"
    CLOSED = "closed"


@dataclass(eq=False)
class PullRequest:
    """``PullRequest``: one held pull."""

    connection: RemotingConnection
    topic: str
    queue_id: int
    pull_from_this_offset: int
    message_filter: ExpressionMessageFilter
    future: asyncio.Future[str] = field(repr=False)
    #: Runs the pull again and answers it, right in the callback that wakes it (not ``CLOSED``); an error it
    #: raises goes to the waiting task instead.
    answer: Callable[[str], None] | None = field(default=None, repr=False)

    def wake(self, reason: str) -> None:
        if self.future.done():
            return
        if self.answer is not None and reason != WakeReason.CLOSED:
            try:
                self.answer(reason)
            except Exception as exc:
                self.future.set_exception(exc)
                return
        self.future.set_result(reason)


class PullRequestHoldService:
    """Held pulls by ``topic@queueId`` (``pullRequestTable``)."""

    def __init__(self, max_offset_in_queue: Callable[[str, int], int]) -> None:
        self._max_offset = max_offset_in_queue
        self.pull_request_table: dict[str, list[PullRequest]] = {}
        self._by_connection: dict[RemotingConnection, set[PullRequest]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._task: asyncio.Task[None] | None = None
        # Arrivals reported by the dispatch thread, not yet seen by the loop (guarded by _arrivals_lock).
        self._arrivals: list[tuple[str, int, Sequence[int], Sequence[int | None], _MapsOrNone]] = []
        self._arrivals_lock = threading.Lock()

    @staticmethod
    def build_key(topic: str, queue_id: int) -> str:
        return f"{topic}@{queue_id}"

    def is_held_on(self, topic: str, queue_id: int) -> bool:
        """Is a pull held on this queue? (Any thread: one dict lookup.)"""
        return self.build_key(topic, queue_id) in self.pull_request_table

    @property
    def held_count(self) -> int:
        return sum(len(v) for v in self.pull_request_table.values())

    # --- life cycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._task = self._loop.create_task(self._run(), name="PullRequestHoldService")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for requests in list(self.pull_request_table.values()):
            for request in requests:
                request.wake(WakeReason.CLOSED)
        self.pull_request_table.clear()
        self._by_connection.clear()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            try:
                self.check_hold_request()
            except Exception:
                log.exception("check hold request failed")

    # --- holding ------------------------------------------------------------------------------------
    async def suspend(self, connection: RemotingConnection, topic: str, queue_id: int, offset: int,
                      message_filter: ExpressionMessageFilter, timeout_s: float,
                      answer: Callable[[str], None] | None = None) -> str:  # fmt: skip
        """Hold a pull until it should run again; returns why (a :class:`WakeReason` value).

        With *answer*, a wake-up (arrival or timeout) calls it first, in the waking callback: the pull is
        answered there, one loop turn before its task would resume. A pull let through at once (its queue grew
        before it was registered) is not; its caller runs it again."""
        if connection.closed:
            return WakeReason.CLOSED
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        request = PullRequest(connection, topic, queue_id, offset, message_filter, loop.create_future(), answer)
        key = self.build_key(topic, queue_id)
        self.pull_request_table.setdefault(key, []).append(request)
        self._by_connection.setdefault(connection, set()).add(request)
        if self._max_offset(topic, queue_id) > offset:
            # Dispatched after the pull read the queue but before it was registered here: nobody would have
            # woken it. Let it read again now (the read filters by tag again).
            self._forget(key, request)
            return WakeReason.ARRIVED
        # The timeout wakes the same future as an arrival does, so a woken pull resumes one loop iteration after
        # its wake-up (wait_for over a shield would take three: on a busy loop each costs a full iteration).
        timer = loop.call_later(max(0.0, timeout_s), request.wake, WakeReason.TIMEOUT)
        try:
            return await request.future
        finally:
            timer.cancel()
            self._forget(key, request)

    def _forget(self, key: str, request: PullRequest) -> None:
        requests = self.pull_request_table.get(key)
        if requests is not None:
            with contextlib.suppress(ValueError):
                requests.remove(request)
            if not requests:
                del self.pull_request_table[key]
        held = self._by_connection.get(request.connection)
        if held is not None:
            held.discard(request)
            if not held:
                del self._by_connection[request.connection]

    def on_connection_closed(self, connection: RemotingConnection) -> None:
        for request in list(self._by_connection.get(connection, ())):
            request.wake(WakeReason.CLOSED)

    # --- waking -------------------------------------------------------------------------------------
    def notify_messages_arriving_threadsafe(self, topic: str, queue_id: int, max_offsets: Sequence[int],
                                            tags_codes: Sequence[int | None],
                                            properties: _MapsOrNone) -> None:  # fmt: skip
        """What the store's ``message_arriving_listener`` hears, less the store times: called by the dispatcher once
        a queue and dispatch batch, with that queue's new records in queue order.

        The arrivals are queued, so that a pull is woken once its queue has the whole dispatch batch. On the
        loop's thread the dispatcher calls :meth:`drain_arrivals` right after its batch (and, should it not, the
        loop does in its next turn). From another thread the first arrival since the loop last looked schedules
        it to look (one ``call_soon_threadsafe``, one wake-up of the loop, for a whole dispatch batch)."""
        loop = self._loop
        if loop is None or self.build_key(topic, queue_id) not in self.pull_request_table:
            return  # nobody waits on this queue (a dict lookup is safe from another thread)
        with self._arrivals_lock:
            first = not self._arrivals
            self._arrivals.append((topic, queue_id, max_offsets, tags_codes, properties))
        if first:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                if threading.get_ident() == self._loop_thread:
                    loop.call_soon(self.drain_arrivals)
                else:
                    loop.call_soon_threadsafe(self.drain_arrivals)

    def drain_arrivals(self) -> None:
        """On the loop: wake the held pulls that the arrivals queued so far satisfy."""
        with self._arrivals_lock:
            arrivals, self._arrivals = self._arrivals, []
        for topic, queue_id, max_offsets, tags_codes, properties in arrivals:
            self.notify_messages_arriving(topic, queue_id, max_offsets, tags_codes, properties)

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None,
                                properties: Mapping[str, str] | None = None) -> None:  # fmt: skip
        """``notifyMessageArriving``: wake the pulls of this queue that the new message satisfies."""
        self.notify_messages_arriving(topic, queue_id, (max_offset,), (tags_code,), (properties,))

    def notify_messages_arriving(self, topic: str, queue_id: int, max_offsets: Sequence[int],
                                 tags_codes: Sequence[int | None],
                                 properties: _MapsOrNone = None) -> None:  # fmt: skip
        """``notifyMessageArriving`` for new records of one queue, in queue order, at once: a pull is woken if
        one of them passes its filter, and the queue has grown past the pull's offset.

        Java asks that record by record: a record's offset, or the queue's max offset when that is not past the
        pull's, must be past the pull's. The records arrive in queue order and the queue holds them all, so that
        holds for every record of the batch or for none; which leaves the filter to ask record by record."""
        requests = self.pull_request_table.get(self.build_key(topic, queue_id))
        if not requests:
            return
        last = max_offsets[-1]
        newest: int | None = None
        for request in list(requests):
            if request.future.done():
                continue  # woken already; its task has not forgotten it yet
            if last <= request.pull_from_this_offset:
                if newest is None:
                    newest = self._max_offset(topic, queue_id)
                if newest <= request.pull_from_this_offset:
                    continue
            flt = request.message_filter
            if flt.matches_all or any(
                flt.is_matched_by_consume_queue(code)
                and flt.is_matched_by_properties(properties[i] if properties is not None else None)
                for i, code in enumerate(tags_codes)
            ):
                request.wake(WakeReason.ARRIVED)

    def check_hold_request(self) -> None:
        """``checkHoldRequest``: wake held pulls whose queue grew (no filter information: any new message)."""
        for key in list(self.pull_request_table):
            topic, _, qid = key.rpartition("@")
            try:
                queue_id = int(qid)
            except ValueError:
                continue
            self.notify_message_arriving(topic, queue_id, self._max_offset(topic, queue_id))
