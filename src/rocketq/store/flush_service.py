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
  one asyncio loop share one future per round (no polling anywhere). The
  rounds run on the service's own thread, so a put whose disk hangs still
  returns after ``syncFlushTimeout`` (a put that ran the fdatasync itself
  could not).
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
import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from rocketq.store.checkpoint import StoreCheckpoint
from rocketq.store.commit_log import PutMessageResult, PutMessageStatus
from rocketq.store.consume_queue import ConsumeQueue
from rocketq.store.mapped_file_queue import MappedFileQueue
from rocketq.store.store_config import MessageStoreConfig

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


class _LoopRound:
    __slots__ = ("future", "started", "timer", "waiters")

    def __init__(self, future: asyncio.Future[int], timer: asyncio.TimerHandle, started: float) -> None:
        self.future = future
        self.timer = timer
        self.started = started  # loop time when its first waiter came: the others count their timeout from it
        self.waiters = 1


def _settle_round(fut: asyncio.Future[int], timer: asyncio.TimerHandle, value: int) -> None:
    """Runs in the event loop's thread: end one round for every task of that loop waiting on it."""
    timer.cancel()
    if not fut.done():
        fut.set_result(value)


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
    """

    name = "GroupCommitService"

    def __init__(self, queue: MappedFileQueue, checkpoint: StoreCheckpoint | None) -> None:
        super().__init__()
        self.queue = queue
        self.checkpoint = checkpoint
        self._lock = threading.Lock()  # guards the waiters of the next round
        self._requests: list[GroupCommitRequest] = []
        # Per event loop: the future of the next round, its syncFlushTimeout timer, the tasks waiting on it.
        self._rounds: dict[asyncio.AbstractEventLoop, _LoopRound] = {}
        self._round = threading.Lock()  # held while a flush round runs
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

        Tasks of one loop await the same future per round. A round whose flush
        began before this put appended does not cover it: the task waits for
        the next. The timeout counts from when the task's first round began
        (its first waiter came; a put that joins a round later may time out a
        round's length early): no clock read per put.
        """
        queue = self.queue
        if queue.flushed_where >= next_offset:
            return PutMessageStatus.PUT_OK
        loop = asyncio.get_running_loop()
        deadline = -1.0
        while True:
            with self._lock:
                current = self._rounds.get(loop)
                if current is None:
                    now = loop.time()
                    fut = loop.create_future()
                    self._rounds[loop] = _LoopRound(fut, loop.call_later(timeout_s, _expire_round, fut), now)
                else:
                    current.waiters += 1
                    fut = current.future
                    now = current.started
            if deadline < 0:
                deadline = now + timeout_s
            if current is None:
                self.wakeup()
            value = await fut
            if queue.flushed_where >= next_offset:
                return PutMessageStatus.PUT_OK
            if value == _ROUND_FAILED or (value == _ROUND_EXPIRED and loop.time() >= deadline):
                return PutMessageStatus.FLUSH_DISK_TIMEOUT

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

    def do_commit(self) -> None:
        """One round: take the waiters, flush all that was appended, end their waits."""
        with self._lock:
            reqs, self._requests = self._requests, []
            rounds, self._rounds = self._rounds, {}
        if not reqs and not rounds:
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
        ts = queue.store_timestamp
        if ts and self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = ts
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
        self._note_timestamp()

    def flush_once(self, least_pages: int) -> None:
        try:
            if flush_files(self.queue, least_pages):
                self.flushes += 1
        except OSError:
            log.exception("flushing the commit log failed")
        self._note_timestamp()

    def _note_timestamp(self) -> None:
        ts = self.queue.store_timestamp
        if ts and self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = ts


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
