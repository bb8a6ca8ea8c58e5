"""Getting appended bytes onto the disk: RocketMQ's flush and commit services.

Mirrors the inner services of ``store/CommitLog.java`` and
``DefaultMessageStore.FlushConsumeQueueService`` (store-format §6, §10, §13):

- :class:`GroupCommitService` (``flushDiskType=SYNC_FLUSH``): a put joins the
  next flush round and waits; a round takes every waiter that joined so far,
  flushes all that was appended (one fdatasync per file touched, during which
  more puts join the next round: the group commit) and ends each wait with
  ``PUT_OK`` — or ``FLUSH_DISK_TIMEOUT`` when the flush failed or took longer
  than ``syncFlushTimeout``. A blocking put waits on a lock of its own, a
  ``concurrent.futures.Future`` is completed by the service, and the tasks of
  one asyncio loop share one future per round. The rounds run on the
  service's own thread, so a put whose disk hangs still returns after
  ``syncFlushTimeout`` (a put that ran the fdatasync itself could not). The
  rounds of one event loop run in a helper process instead
  (:mod:`rocketq.store.sync_helper`, ``syncFlushHelperEnable``): the loop
  starts each and hears of its end within a put, where the thread would wait
  for the GIL, so a round's flush can overlap the next round's appends.
- :class:`FlushRealTimeService` (``ASYNC_FLUSH``): every
  ``flushIntervalCommitLog`` ms it flushes when at least
  ``flushCommitLogLeastPages`` pages are dirty, and everything every
  ``flushCommitLogThoroughInterval`` ms.
- :class:`CommitRealTimeService` (``transientStorePoolEnable``): every
  ``commitIntervalCommitLog`` ms copies at least ``commitCommitLogLeastPages``
  pages (everything every ``commitCommitLogThoroughInterval`` ms) from the
  write buffers into the files, then wakes the flush and the dispatch.
- :class:`FlushConsumeQueueService`: consume queues every
  ``flushIntervalConsumeQueue`` ms when ``flushConsumeQueueLeastPages`` pages
  are dirty; every ``flushConsumeQueueThoroughInterval`` ms all of them, after
  which the checkpoint gets the logics timestamp taken before that flush and
  is forced to disk.

After every group commit and every thorough ASYNC flush the checkpoint's
``physicMsgTimestamp`` (in memory) moves to the store time of the last record
flushed; the consume-queue service persists it. RocketMQ flushes one file per
call; these services go on into the next file while whole files were
completed, as files smaller than RocketMQ's 1 GiB would otherwise let the
flush fall behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from rocketq.store.checkpoint import StoreCheckpoint
from rocketq.store.commit_log import PutMessageResult, PutMessageStatus
from rocketq.store.consume_queue import ConsumeQueue
from rocketq.store.mapped_file import MappedFile
from rocketq.store.mapped_file_queue import MappedFileQueue
from rocketq.store.store_config import MessageStoreConfig
from rocketq.store.sync_helper import SyncHelper

log = logging.getLogger(__name__)
RETRY_TIMES_OVER = 10


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ServiceThread:
    """A named daemon thread with ``wakeup`` / ``wait_for_running`` / ``shutdown`` (``ServiceThread``)."""

    name = "ServiceThread"

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._guarded_run, name=self.name, daemon=True)
        self._thread.start()

    def _guarded_run(self) -> None:
        try:
            self.run()
        except Exception:  # pragma: no cover - a bug must be seen, not kill the store silently
            log.exception("%s died", self.name)

    def run(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def wakeup(self, _end: int = 0) -> None:
        if not self._wake.is_set():
            self._wake.set()

    def wait_for_running(self, interval_ms: int) -> None:
        """Sleep up to *interval_ms*, less if woken or stopped."""
        self._wake.wait(interval_ms / 1000)
        self._wake.clear()

    def shutdown(self, timeout: float = 60.0) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)


# ============================================================================ group commit


class GroupCommitRequest:
    """A put waiting, blocked or through a ``concurrent.futures.Future``, until the commit log is on disk
    up to ``next_offset`` (``GroupCommitRequest``)."""

    __slots__ = ("_lock", "future", "next_offset", "result", "status")

    def __init__(self, next_offset: int, result: PutMessageResult | None = None,
                 future: Future[PutMessageResult] | None = None) -> None:  # fmt: skip
        self.next_offset = next_offset
        self.status: PutMessageStatus | None = None
        self.result = result
        self.future = future
        self._lock: threading.Lock | None = None
        if future is None:
            lock = threading.Lock()
            lock.acquire()
            self._lock = lock

    def complete(self, status: PutMessageStatus) -> None:
        self.status = status
        if self._lock is not None:
            self._lock.release()
        fut = self.future
        if fut is not None and self.result is not None and not fut.done():
            if status is not PutMessageStatus.PUT_OK:
                self.result.status = status
            fut.set_result(self.result)

    def wait(self, timeout_s: float) -> PutMessageStatus:
        """Block until flushed; ``FLUSH_DISK_TIMEOUT`` after *timeout_s* (the data stays queued)."""
        assert self._lock is not None
        if self._lock.acquire(timeout=timeout_s):
            return self.status or PutMessageStatus.UNKNOWN_ERROR
        return PutMessageStatus.FLUSH_DISK_TIMEOUT


# What a round future of an event loop resolves to besides the flushed offset.
_ROUND_EXPIRED = -1  # syncFlushTimeout passed before the round ended
_ROUND_FAILED = -2  # the flush raised
_ROUND_HANDED_BACK = -3  # the helper process went away: wait on the service thread's rounds instead


class _LoopRound:
    __slots__ = ("future", "started", "timer", "waiters")

    def __init__(self, future: asyncio.Future[int], timer: asyncio.TimerHandle | None, started: float) -> None:
        self.future = future
        self.timer = timer
        self.started = started  # loop time when its first waiter came: the others count their timeout from it
        self.waiters = 0  # each waiter counts itself in


class _HelperRound(_LoopRound):
    """A round whose fdatasyncs the helper process runs: the files and how far each is covered, the requests
    sent for them, and the commit-log offset and store time the round makes durable."""

    __slots__ = ("first_seq", "last_seq", "parts", "sent_at", "store_timestamp", "target")

    def __init__(self, base: _LoopRound, parts: list[tuple[MappedFile, int]], first_seq: int, last_seq: int,
                 target: int, store_timestamp: int) -> None:  # fmt: skip
        super().__init__(base.future, base.timer, base.started)
        self.waiters = base.waiters
        self.parts = parts
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.target = target
        self.store_timestamp = store_timestamp
        self.sent_at = time.perf_counter()


def _settle_round(fut: asyncio.Future[int], timer: asyncio.TimerHandle | None, value: int) -> None:
    """Runs in the event loop's thread: end one round for every task of that loop waiting on it."""
    if timer is not None:
        timer.cancel()
    if not fut.done():
        fut.set_result(value)


def _note_flush_time(checkpoint: StoreCheckpoint | None, queue: MappedFileQueue) -> None:
    """The checkpoint's physicMsgTimestamp after a flush of the commit log: the store time it made durable."""
    if queue.store_timestamp and checkpoint is not None:
        checkpoint.physic_msg_timestamp = queue.store_timestamp


def _expire_round(fut: asyncio.Future[int]) -> None:
    if not fut.done():
        fut.set_result(_ROUND_EXPIRED)


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH: puts share flushes (``CommitLog.GroupCommitService``).

    A round takes every waiter that joined since the last one, flushes the commit
    log up to all that was appended (one fdatasync per file touched, during which
    more puts append and join the next round) and ends each waiter's wait. The
    waiters of an event loop share one future per round (:meth:`wait_flushed`):
    joining costs a dictionary lookup, and ending the round is one hand-over to
    that loop, whatever the number of tasks. Blocking puts and
    ``concurrent.futures`` callers each hand in a :class:`GroupCommitRequest`.

    The rounds of the first event loop that waits run in a helper process instead
    (:mod:`rocketq.store.sync_helper`, unless *use_helper* is off): the loop
    itself starts a round when the last one ends, and learns that it ended within
    one put, where the service thread would have to wait for the GIL. Other
    loops, blocking puts, and every wait when the helper cannot run, use the
    thread.
    """

    name = "GroupCommitService"

    def __init__(self, queue: MappedFileQueue, checkpoint: StoreCheckpoint | None, *,
                 use_helper: bool = True) -> None:  # fmt: skip
        super().__init__()
        self.queue = queue
        self.checkpoint = checkpoint
        self._lock = threading.Lock()  # guards the waiters of the next round
        self._requests: list[GroupCommitRequest] = []
        # Per event loop: the future of the next round, its syncFlushTimeout timer, the tasks waiting on it.
        self._rounds: dict[asyncio.AbstractEventLoop, _LoopRound] = {}
        self._round = threading.Lock()  # held while a flush round runs
        # The helper process and its loop's rounds (touched in that loop's thread only): the round being
        # flushed, and the one its latecomers wait for, which starts when it ends.
        self._helper: SyncHelper | None = None
        self._helper_off = not use_helper
        self._flushing: _HelperRound | None = None
        self._next: _LoopRound | None = None
        # Whether the next round starts the moment one ends, or once the puts it woke have been made: see
        # _end_helper_round. Estimates (EWMA, seconds): a round's flush, and the loop thread's CPU time a put
        # takes (measured from round to round: its CPU time then, and the puts done then).
        self._flush_s = 0.0
        self._put_s = 0.0
        self._cpu_mark = (0.0, 0)
        self._deferred = False  # a start is waiting for the woken puts
        # Statistics: rounds with at least one waiter, and puts they covered.
        self.flush_rounds = 0
        self.requests_done = 0

    # --- joining a round -----------------------------------------------------------------
    def submit(self, next_offset: int, result: PutMessageResult | None = None,
               future: Future[PutMessageResult] | None = None) -> GroupCommitRequest:  # fmt: skip
        """Join the next round with a request (``putRequest``): blocking, or completing *future*."""
        req = GroupCommitRequest(next_offset, result, future)
        with self._lock:
            first = not self._requests
            self._requests.append(req)
        if first:  # the first of a round wakes the service; the others ride along
            self.wakeup()
        return req

    def commit_and_wait(self, next_offset: int, timeout_s: float) -> PutMessageStatus:
        """Block until a round has flushed past *next_offset* (``FLUSH_DISK_TIMEOUT`` after *timeout_s*)."""
        if self.queue.flushed_where >= next_offset:
            return PutMessageStatus.PUT_OK  # an earlier round covered it already
        return self.submit(next_offset).wait(timeout_s)

    async def wait_flushed(self, next_offset: int, timeout_s: float) -> PutMessageStatus:
        """Await a round that has flushed past *next_offset* (``FLUSH_DISK_TIMEOUT`` after *timeout_s*).

        Tasks of one loop await the same future per round, the helper's or the
        thread's (:meth:`_join`). A round whose flush began before this put
        appended does not cover it: the task waits for the next. The timeout
        counts from when the task's first round began (its first waiter came; a
        put that joins a round later may time out a round's length early): no
        clock read per put. When the helper goes away, the wait starts again on
        the thread's rounds.
        """
        loop = asyncio.get_running_loop()
        deadline = -1.0
        while True:
            rnd = self._join(loop, next_offset, timeout_s)
            if rnd is None:
                return PutMessageStatus.PUT_OK
            if deadline < 0:
                deadline = rnd.started + timeout_s
            value = await rnd.future
            if self.queue.flushed_where >= next_offset:
                return PutMessageStatus.PUT_OK
            if value == _ROUND_HANDED_BACK:
                deadline = -1.0
            elif value == _ROUND_FAILED or (value == _ROUND_EXPIRED and loop.time() >= deadline):
                return PutMessageStatus.FLUSH_DISK_TIMEOUT

    def _join(self, loop: asyncio.AbstractEventLoop, next_offset: int, timeout_s: float) -> _LoopRound | None:
        """Count a waiter for *next_offset* into a round of *loop* and give that round: the helper's when the
        helper serves this loop, else the service thread's next one. None when it is flushed already."""
        if self.queue.flushed_where >= next_offset:
            return None
        helper = self._helper
        if helper is None or helper.loop is not loop or helper.broken:
            helper = self._helper_for(loop)
        if helper is not None:
            rnd = self._join_helper_round(helper, loop, next_offset, timeout_s)
            if rnd is not None or self.queue.flushed_where >= next_offset:
                return rnd
            # (the helper went away while the round was starting: the thread's rounds then)
        with self._lock:
            rnd = self._rounds.get(loop)
            first = rnd is None
            if rnd is None:
                rnd = self._rounds[loop] = self._new_loop_round(loop, timeout_s)
            rnd.waiters += 1
        if first:
            self.wakeup()
        return rnd

    # --- rounds in the helper process (its loop's thread) ----------------------------------------
    def _helper_for(self, loop: asyncio.AbstractEventLoop) -> SyncHelper | None:
        """The helper serving *loop*, started for it if no live loop has one; None: use the thread."""
        ended: SyncHelper | None = None
        with self._lock:  # loops of several threads may get here at once
            if self._helper_off or self.stopped:
                return None
            helper = self._helper
            if helper is not None:
                if helper.loop is loop and not helper.broken:
                    return helper
                if not helper.broken and not helper.loop.is_closed():
                    return None  # it serves another loop
                ended, self._helper = helper, None  # its loop has ended: nobody waits on its rounds any more
                self._flushing = self._next = None
                self._deferred = False
            try:
                helper = SyncHelper(loop, functools.partial(self._helper_reported, loop))
            except (OSError, ValueError) as e:
                log.warning("no SYNC_FLUSH helper process (%s): the commit log is flushed on the service thread", e)
                self._helper_off = True
                helper = None
            self._helper = helper
        if ended is not None:
            ended.close()
        return helper

    def _join_helper_round(self, helper: SyncHelper, loop: asyncio.AbstractEventLoop, next_offset: int,
                           timeout_s: float) -> _LoopRound | None:  # fmt: skip
        """:meth:`_join` on the helper's rounds: the one being flushed if it covers *next_offset*, else the next
        (which starts at once when none is being flushed); None when *next_offset* is flushed already, or the
        helper went away meanwhile."""
        queue = self.queue
        flushing = self._flushing
        if flushing is not None and helper.done() >= flushing.last_seq:
            self._end_helper_round(helper, loop)  # ended: starts the next
            if queue.flushed_where >= next_offset:
                return None
            flushing = self._flushing
        if flushing is None and not self._deferred:
            flushing = self._start_helper_round(helper, loop, self._new_loop_round(loop, timeout_s))
        if flushing is not None and flushing.target >= next_offset:
            rnd: _LoopRound = flushing
        elif (flushing is None and queue.flushed_where >= next_offset) or (helper.broken and not self._deferred):
            return None  # flushed, or the helper went away while the round was starting
        else:
            rnd = self._next or self._new_loop_round(loop, timeout_s)
            self._next = rnd
        rnd.waiters += 1
        return rnd

    @staticmethod
    def _new_loop_round(loop: asyncio.AbstractEventLoop, timeout_s: float) -> _LoopRound:
        fut = loop.create_future()
        return _LoopRound(fut, loop.call_later(timeout_s, _expire_round, fut), loop.time())

    def _start_helper_round(self, helper: SyncHelper, loop: asyncio.AbstractEventLoop,
                            base: _LoopRound) -> _HelperRound | None:  # fmt: skip
        """Send the helper a round covering all that was appended, one request per file touched, with *base*'s
        future and waiters. None when there is nothing to flush (the waiters are told) or the helper is gone."""
        queue = self.queue
        last = queue.last()
        # The store time first, then the end: a record appended between the two is covered, not claimed.
        store_ts = last.store_timestamp if last is not None else 0
        start, target = queue.flushed_where, queue.get_max_offset()
        if target <= start:
            _settle_round(base.future, base.timer, start)
            return None
        parts: list[tuple[MappedFile, int]] = []
        for mf in reversed(list(queue.files)):  # back to the file of the flushed point: one or two, of any number
            begin = mf.file_from_offset
            end = min(begin + mf.read_position(), target)
            if end > start and end > begin:
                parts.append((mf, end - begin))
            elif begin + mf.read_position() <= start:
                break
        parts.reverse()
        if not parts:  # pragma: no cover - the files below the end are always there
            _settle_round(base.future, base.timer, start)
            return None
        try:
            seqs = [helper.request(os.fsencode(os.path.abspath(mf.path))) for mf, _ in parts]
        except OSError:
            self._helper_gone(helper, loop)
            _settle_round(base.future, base.timer, _ROUND_HANDED_BACK)
            return None
        rnd = _HelperRound(base, parts, seqs[0], seqs[-1], target, store_ts)
        self._flushing = rnd
        return rnd

    def _start_deferred(self, helper: SyncHelper, loop: asyncio.AbstractEventLoop) -> None:
        """The puts woken by the last round have been made (they ran before this callback): start the round
        that covers them and the ones that waited already."""
        self._deferred = False
        nxt, self._next = self._next, None
        if helper is self._helper and not helper.broken and self._flushing is None and nxt is not None \
                and not nxt.future.done():  # fmt: skip
            self._start_helper_round(helper, loop, nxt)

    def _end_helper_round(self, helper: SyncHelper, loop: asyncio.AbstractEventLoop) -> None:
        """The helper finished the round being flushed: mark the files, end the waits, start the next round."""
        rnd = self._flushing
        assert rnd is not None
        self._flushing = None
        failed, err = helper.failed()
        if failed >= rnd.first_seq:
            log.error("flushing the commit log failed: %s", os.strerror(err))
            value = _ROUND_FAILED
        else:
            for mf, end in rnd.parts:
                mf.mark_flushed(end)
            queue = self.queue
            queue.mark_flushed(rnd.target, rnd.store_timestamp)
            _note_flush_time(self.checkpoint, queue)
            value = queue.flushed_where
        self.flush_rounds += 1
        self.requests_done += rnd.waiters
        took = time.perf_counter() - rnd.sent_at
        self._flush_s = took if not self._flush_s else 0.8 * self._flush_s + 0.2 * took
        cpu, (cpu_then, done_then) = time.thread_time(), self._cpu_mark
        self._cpu_mark = (cpu, self.requests_done)
        if cpu_then and self.requests_done > done_then:
            took = (cpu - cpu_then) / (self.requests_done - done_then)
            self._put_s = took if not self._put_s else 0.8 * self._put_s + 0.2 * took
        _settle_round(rnd.future, rnd.timer, value)
        nxt = self._next
        if nxt is not None and nxt.future.done():
            # Its waiters gave up (syncFlushTimeout): their records are flushed all the same, as the thread's
            # rounds flush everything appended.
            self._next = None
            self._start_helper_round(helper, loop, _LoopRound(loop.create_future(), None, loop.time()))
            return
        # The puts this round held go on now. When the loop's time for all the waiting puts exceeds a flush by
        # half again, the next round starts at once and these ride the one after: two groups, one appending
        # while the other is flushed. Otherwise it starts once these are made, with them: one group, a flush
        # at a time (the loop idles while the disk works, but two half groups would each wait a whole flush,
        # and a flush under load takes longer). durability_bench: 64 asyncio writers take the first, about 30
        # puts a flush and more puts/s than one group; 8 to 32 writers the second: two groups had given 8
        # writers 20% fewer puts/s, and 32 writers 5-20% fewer (without the margin they took two groups).
        waiting = rnd.waiters + (nxt.waiters if nxt is not None else 0)
        if waiting * self._put_s > 1.5 * self._flush_s:
            if nxt is not None:
                self._next = None
                self._start_helper_round(helper, loop, nxt)
            # (else the first of these puts starts a round, and the others ride the next)
        else:
            self._deferred = True
            loop.call_soon(self._start_deferred, helper, loop)

    def _helper_reported(self, loop: asyncio.AbstractEventLoop) -> None:
        """The helper's byte (or its end) woke the loop: end the round it finished, if no put has yet."""
        helper = self._helper
        if helper is None or helper.loop is not loop:
            return
        if helper.broken:
            self._helper_gone(helper, loop)
            return
        if self._flushing is not None and helper.done() >= self._flushing.last_seq:
            self._end_helper_round(helper, loop)

    def _helper_gone(self, helper: SyncHelper, loop: asyncio.AbstractEventLoop) -> None:
        """The helper died: from now on the thread flushes; whoever waited on the helper waits on it again."""
        if not self.stopped:  # (at shutdown it was closed on purpose)
            log.warning("the SYNC_FLUSH helper process %d went away: the commit log is flushed on the service thread",
                        helper.pid)  # fmt: skip
        helper.broken = True
        if self._helper is helper:
            self._helper = None
            self._helper_off = True
        self._hand_back(_ROUND_HANDED_BACK)
        helper.close()

    def _hand_back(self, value: int) -> None:
        """End the helper's rounds with *value* (its loop's thread)."""
        rounds = (self._flushing, self._next)
        self._flushing = self._next = None
        self._deferred = False
        for rnd in rounds:
            if rnd is not None:
                _settle_round(rnd.future, rnd.timer, value)

    # --- the rounds ------------------------------------------------------------------------
    def run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            with self._round:
                self.do_commit()

    def shutdown(self, timeout: float = 60.0) -> None:
        super().shutdown(timeout)
        with self._round:
            self.do_commit()
        # Everything appended is flushed now: the helper's waiters are done.
        helper, self._helper = self._helper, None
        self._helper_off = True
        if helper is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits
                helper.loop.call_soon_threadsafe(self._hand_back, self.queue.flushed_where)
            helper.close()

    def flush_soon(self) -> None:
        """A put that does not wait for its flush (``WAIT=false``) was appended: wake the service, whose next round
        flushes it (Java's ``submitFlushRequest``); a lost wake-up costs at most the service's one-second beat."""
        self.wakeup()

    def do_commit(self) -> None:
        """One round: take the waiters, flush all that was appended, end their waits. With no waiter, what is
        appended and not flushed yet (puts that did not wait) is flushed all the same, as Java's doCommit does."""
        with self._lock:
            reqs, self._requests = self._requests, []
            rounds, self._rounds = self._rounds, {}
        if not reqs and not rounds and self.queue.flushed_where >= self.queue.get_max_offset():
            return
        queue = self.queue
        # Everything appended so far, which includes the records of every waiter taken above.
        target = queue.get_max_offset()
        failed = False
        try:
            # One flush per file between the flushed point and the target.
            for _ in range(len(queue.files) + 2):
                if queue.flushed_where >= target or queue.flush(0):
                    break
        except OSError:
            log.exception("flushing the commit log failed")
            failed = True
        flushed = queue.flushed_where
        _note_flush_time(self.checkpoint, queue)
        # Counted before the waiters hear of it: they may look at the statistics at once.
        self.flush_rounds += 1
        self.requests_done += len(reqs) + sum(r.waiters for r in rounds.values())
        ok = PutMessageStatus.PUT_OK
        timeout = PutMessageStatus.FLUSH_DISK_TIMEOUT
        for r in reqs:
            r.complete(ok if flushed >= r.next_offset else timeout)
        value = _ROUND_FAILED if failed else flushed
        for loop, r in rounds.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(_settle_round, r.future, r.timer, value)


# ============================================================================= async flush


class FlushRealTimeService(ServiceThread):
    """ASYNC_FLUSH: flush on an interval (``CommitLog.FlushRealTimeService``)."""

    name = "FlushRealTimeService"

    def __init__(self, queue: MappedFileQueue, config: MessageStoreConfig,
                 checkpoint: StoreCheckpoint | None) -> None:  # fmt: skip
        super().__init__()
        self.queue = queue
        self.config = config
        self.checkpoint = checkpoint
        self.last_flush_timestamp = 0
        self.flushes = 0

    def run(self) -> None:
        cfg = self.config
        while not self._stopped.is_set():
            least = cfg.flush_commit_log_least_pages
            now = _now_ms()
            if now >= self.last_flush_timestamp + cfg.flush_commit_log_thorough_interval:
                self.last_flush_timestamp = now
                least = 0
            if cfg.flush_commit_log_timed:
                self._stopped.wait(cfg.flush_interval_commit_log / 1000)
            else:
                self.wait_for_running(cfg.flush_interval_commit_log)
            self.flush_once(least)
        for _ in range(RETRY_TIMES_OVER):
            if self.queue.flush(0):
                break
        _note_flush_time(self.checkpoint, self.queue)

    def flush_once(self, least_pages: int) -> None:
        try:
            if flush_files(self.queue, least_pages):
                self.flushes += 1
        except OSError:
            log.exception("flushing the commit log failed")
        _note_flush_time(self.checkpoint, self.queue)


class CommitRealTimeService(ServiceThread):
    """transientStorePoolEnable: copy write buffers into the files (``CommitLog.CommitRealTimeService``)."""

    name = "CommitRealTimeService"

    def __init__(self, queue: MappedFileQueue, config: MessageStoreConfig,
                 on_committed: Iterable[Callable[[], None]] = ()) -> None:  # fmt: skip
        super().__init__()
        self.queue = queue
        self.config = config
        self.on_committed = list(on_committed)
        self.last_commit_timestamp = 0

    def run(self) -> None:
        cfg = self.config
        while not self._stopped.is_set():
            least = cfg.commit_commit_log_least_pages
            begin = _now_ms()
            if begin >= self.last_commit_timestamp + cfg.commit_commit_log_thorough_interval:
                self.last_commit_timestamp = begin
                least = 0
            self.commit_once(least)
            self.wait_for_running(cfg.commit_interval_commit_log)
        for _ in range(RETRY_TIMES_OVER):
            if self.queue.commit(0):
                break

    def commit_once(self, least_pages: int) -> None:
        try:
            if commit_files(self.queue, least_pages):
                self.last_commit_timestamp = _now_ms()  # something was committed
                for cb in self.on_committed:
                    cb()
        except OSError:
            log.exception("committing the commit log failed")


# ========================================================================== consume queues


def flush_files(queue: MappedFileQueue, least_pages: int) -> bool:
    """Flush from ``flushed_where`` on; go on into the next file while whole files were completed.

    RocketMQ flushes one file per call, which is enough with its 1 GiB files;
    with small files one file per interval would fall behind the writers.
    Returns True if anything was flushed.
    """
    flushed = False
    for _ in range(len(queue.files) + 1):
        if queue.flush(least_pages):
            break
        flushed = True
        if queue.flushed_where % queue.mapped_file_size:
            break  # stopped inside a file: nothing more is ready
    return flushed


def commit_files(queue: MappedFileQueue, least_pages: int) -> bool:
    """:func:`flush_files` for the commit of write buffers. Returns True if anything was committed."""
    committed = False
    for _ in range(len(queue.files) + 1):
        if queue.commit(least_pages):
            break
        committed = True
        if queue.committed_where % queue.mapped_file_size:
            break
    return committed


def flush_queue_fully(cq: ConsumeQueue) -> None:
    """Flush every file of *cq* up to its end (Java flushes one file per call)."""
    q = cq.queue
    for _ in range(len(q.files) + 1):
        if q.flush(0):
            break


class FlushConsumeQueueService(ServiceThread):
    """Consume queues to disk, then the checkpoint (``DefaultMessageStore.FlushConsumeQueueService``)."""

    name = "FlushConsumeQueueService"

    def __init__(self, queues: Callable[[], Iterable[ConsumeQueue]], config: MessageStoreConfig,
                 checkpoint: StoreCheckpoint) -> None:  # fmt: skip
        super().__init__()
        self.queues = queues
        self.config = config
        self.checkpoint = checkpoint
        self.last_flush_timestamp = 0

    def run(self) -> None:
        while not self._stopped.is_set():
            self.wait_for_running(self.config.flush_interval_consume_queue)
            if self._stopped.is_set():
                break
            self.do_flush(thorough=False)
        self.do_flush(thorough=True)

    def do_flush(self, thorough: bool) -> None:
        cfg = self.config
        least = 0 if thorough else cfg.flush_consume_queue_least_pages
        now = _now_ms()
        if now >= self.last_flush_timestamp + cfg.flush_consume_queue_thorough_interval:
            self.last_flush_timestamp = now
            thorough = True
            least = 0
        # Taken before the flush: every unit dispatched up to here is on disk afterwards.
        logics_ts = self.checkpoint.logics_msg_timestamp
        try:
            for cq in self.queues():
                if thorough:
                    flush_queue_fully(cq)
                else:
                    flush_files(cq.queue, least)
        except (OSError, ValueError):
            log.exception("flushing consume queues failed")
            return
        if thorough:
            if logics_ts > 0:
                self.checkpoint.flushed_logics_msg_timestamp = logics_ts
            self.checkpoint.flush()
