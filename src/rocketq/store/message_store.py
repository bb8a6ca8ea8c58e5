"""The embeddable message store: RocketMQ's ``DefaultMessageStore``.

Opens a store directory (``storePathRootDir``) laid out exactly as RocketMQ
lays it out, recovers it, and serves puts and reads (store-format §1, §10, §11):

- ``put_message`` / ``put_messages`` append to the :class:`CommitLog` (under
  SYNC_FLUSH they wait for the group commit; ``aput_message``,
  ``put_message_then`` and ``put_message_async`` wait without blocking);
- the reput service (:class:`ReputMessageService`, a thread) follows the commit
  log and dispatches the records, a batch at a time, to their
  :class:`ConsumeQueue` and to the :class:`IndexService`
  (:mod:`rocketq.store.dispatch`), then wakes anyone waiting for a queue to
  grow. Records just appended come as rows handed over by the put path; others
  are read back from the file. An owner with a thread of its own (a broker's
  event loop) may instead dispatch there, right after appends
  (:meth:`ReputMessageService.dispatch_now`, from the commit log's ``on_append``
  hook): the thread is then only the fallback, and a new record reaches its
  waiters without two thread hand-overs;
- ``get_message`` reads a queue through its consume-queue units and returns the
  raw records, with RocketMQ's statuses and next/min/max offsets;
- ``query_message`` looks keys up through the index;
- replication (:mod:`rocketq.store.ha`, started by ``start_ha``): a master streams its commit log to slaves and,
  as ``SYNC_MASTER``, answers a put once a slave holds it; a slave (``brokerRole=SLAVE``) refuses puts and
  appends what its master sends (``append_to_commit_log``), dispatched like its own records.

Life cycle as in RocketMQ 4.9: ``lock`` is held with a POSIX record lock while
the store is open; ``abort`` exists while it runs and is removed by a clean
close, so its presence at the next open means abnormal recovery. A store opened
``read_only`` takes no lock, writes nothing, and recovers only in memory.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import operator
import os
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from rocketq.common.codec import decode_record, read_size_and_magic
from rocketq.common.errors import CorruptRecordError, StoreError
from rocketq.common.javacompat import hashmap_ordered
from rocketq.common.json_compat import java_double_str
from rocketq.common.log_throttle import Throttled
from rocketq.common.message import (
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    HostPort,
    Message,
    MessageExt,
    MessageExtBatch,
    wait_store_msg_ok,
)
from rocketq.common.message_id import UniqueIdGenerator, decode_offset_message_id
from rocketq.common.mixall import (
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    human_byte_count,
    is_legal_name,
)
from rocketq.store.checkpoint import StoreCheckpoint
from rocketq.store.commit_log import (
    CommitLog,
    PutMessageResult,
    PutMessageStatus,
    now_ms,
)
from rocketq.store.config_json import (
    ConfigManager,
    ConsumerFilterManager,
    ConsumerOffsetManager,
    DelayOffsetManager,
    SubscriptionGroupManager,
    TopicConfig,
    TopicConfigManager,
)
from rocketq.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from rocketq.store.dispatch import (
    ROW_OFFSET,
    ROW_QUEUE_OFFSET,
    ROW_SIZE,
    ROW_SYS_FLAG,
    DispatchBatch,
    DispatchRequest,
)
from rocketq.store.flush_service import GroupCommitService
from rocketq.store.ha import HAClient, HAService
from rocketq.store.index_service import IndexService
from rocketq.store.message_filter import MessageFilter
from rocketq.store.recovery import RecoveryDispatch, RecoveryReport
from rocketq.store.running_flags import NOT_WRITEABLE_BITS, RunningFlags
from rocketq.store.services import StoreServices
from rocketq.store.store_config import SYNC_FLUSH, MessageStoreConfig
from rocketq.store.store_lock import StoreLock
from rocketq.store.store_stats import PutGetTimes

_log = logging.getLogger(__name__)

#: ``listener(topic, queue_id, max_offsets, tags_codes, store_timestamps, properties)``: Java's
#: ``MessageArrivingListener.arriving`` for the records of one queue that one dispatch made consumable, in queue
#: order: each record's queue offset + 1, tag code and store time, and its property map (``properties`` None, or
#: an entry None, where the map was not read). One call a queue and dispatch batch, not one a record: a pull held
#: on the queue is woken once.
ArrivalListener = Callable[
    [str, int, Sequence[int], Sequence[int], Sequence[int], Sequence[dict[str, str] | None] | None], None
]

# Topics the store writes for itself; the broker keeps no write-queue limit for them here.
INTERNAL_TOPICS = frozenset({RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC})
MAX_QUEUE_ID = 1023
_UNCHECKED = object()
DISPATCH_BATCH = 1024  # records per dispatch round: bounds the wake-up delay of a long poll
# Fewer records than this are dispatched one by one: numpy's fixed costs outweigh its speed below it.
SCALAR_DISPATCH = 16
_GET_DELAY = operator.methodcaller("get", PROPERTY_DELAY_TIME_LEVEL, "0")
_NO_DELAY = frozenset(("", "0"))  # DELAY values of a message that is not delayed


_row_offset = operator.itemgetter(ROW_OFFSET)
_row_size = operator.itemgetter(ROW_SIZE)
_ROWS_IN_A_LOOP = 256  # _rows_in_order: up to this many rows in a plain loop
_UNITS_IN_A_LOOP = 128  # do_dispatch_batch: the units of a batch of at most this many records skip numpy


def _listed(column: Sequence[Any]) -> Sequence[Any]:
    """A dispatch batch's column as plain Python values: a numpy column as a list, a list or tuple as it is."""
    return column.tolist() if isinstance(column, np.ndarray) else column


def _rows_of(columns: Sequence[Sequence[Any]], rows: list[int]) -> list[list[Any]]:
    """The values of *rows* (record numbers) in each of *columns*."""
    return [[column[i] for i in rows] for column in columns]


def _rows_in_order(chunk: list[tuple[object, ...]], offset: int, end: int) -> tuple[int, int]:
    """How many of *chunk*'s rows, from the first, follow each other from *offset* and end within *end*, and
    the offset they reach: the rows a dispatch may use. A few rows in a plain loop (numpy's fixed costs were
    some 15 us a call), many in numpy."""
    if len(chunk) <= _ROWS_IN_A_LOOP:
        count = 0
        at = offset
        for row in chunk:
            if row[ROW_OFFSET] != at:
                break
            after = at + row[ROW_SIZE]  # type: ignore[operator]
            if after > end:
                break
            at = after
            count += 1
        return count, at
    offsets = np.fromiter(map(_row_offset, chunk), dtype=np.int64, count=len(chunk))
    ends = np.fromiter(map(_row_size, chunk), dtype=np.int64, count=len(chunk)).cumsum() + offset
    good = (offsets[1:] == ends[:-1]) & (ends[1:] <= end)
    count = len(chunk) if bool(good.all()) else int(np.argmin(good)) + 1
    if int(ends[0]) > end or int(offsets[0]) != offset:
        count = 0
    return count, int(ends[count - 1]) if count else offset


_PHYSICAL_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


_PUT_OK = PutMessageStatus.PUT_OK
_time = time.time


def _ms_since(store_timestamp: int) -> int:
    """Milliseconds from a put's store timestamp to now, as Java subtracts two ``currentTimeMillis``."""
    return int(_time() * 1000.0 - store_timestamp)



class GetMessageStatus(Enum):
    # Members hash by identity, in C (Enum's own __hash__ is a call of Python code): a request looks its status
    # up in a dict. They compare by identity already, and each is one object.
    __hash__ = object.__hash__

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    """What ``get_message`` found: raw records plus RocketMQ's offsets."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[bytes] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.messages)

    def decode(self) -> list[MessageExt]:
        return [decode_record(m) for m in self.messages]


@dataclass(slots=True)
class QueryMessageResult:
    messages: list[MessageExt] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


def _set_flush_status(result: PutMessageResult, status: PutMessageStatus) -> None:
    """A put's result after its flush: FLUSH_DISK_TIMEOUT (or another failure) replaces PUT_OK."""
    if status is not PutMessageStatus.PUT_OK:
        result.status = status


class ReputMessageService:
    """Follows the commit log and dispatches every record (``ReputMessageService``).

    One dispatcher at a time (``_dispatch_lock``): the thread, or an appender calling :meth:`dispatch_now`.
    While another dispatcher is in charge (``fallback_only``: the broker dispatches on its event loop), the
    thread dispatches only when woken (that dispatcher could not finish, or data became readable later) or when
    records have waited with no progress for a look (``FALLBACK_LOOK_S``); otherwise, under a steady load, it
    would find records every time it looked and dispatch them itself, taking the GIL from the dispatcher in
    charge and sending its arrivals over to the loop.
    """

    #: Seconds between the thread's looks at the log when nothing wakes it.
    FALLBACK_LOOK_S = 0.05

    def __init__(self, store: MessageStore, reput_from_offset: int) -> None:
        self.store = store
        self.reput_from_offset = reput_from_offset
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._caught_up = threading.Condition()
        self._thread: threading.Thread | None = None
        self._rows: list[tuple[object, ...]] = []  # hand-off rows taken but not dispatched yet
        self._sleeping = False
        self._dispatch_lock = threading.Lock()
        #: Another dispatcher is in charge: the thread is only its fallback (class docstring).
        self.fallback_only = False
        # A dispatch that must not wait on the disk stopped at a unit whose consume-queue file is not made yet: the
        # thread makes such files before it takes the lock (dispatch_now).
        self._files_wanted = False
        #: (start, end) of commit-log data that is gone (a file missing between two others), where dispatch stopped
        self.missing: tuple[int, int] | None = None
        # A failure that repeats at every try (no descriptor left to make a consume-queue file): reported with a
        # count once in a while, not once a try.
        self._failures = Throttled(_log)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ReputMessageService", daemon=True)
        self._thread.start()

    def wakeup(self, _end: int = 0) -> None:
        """Called after every append: wakes the thread if it sleeps (one attribute test otherwise)."""
        if self._sleeping:
            self._sleeping = False
            self._wake.set()

    def behind(self) -> int:
        """Bytes appended and not dispatched yet. A slave's log may end inside a record (its master's frames do
        not follow records): that part of a record is not behind, it waits for the rest."""
        cl = self.store.commit_log
        behind = cl.get_max_offset() - self.reput_from_offset
        if 0 < behind < cl.file_size and self.store._slave and \
                cl.is_partial_tail(self.reput_from_offset):  # fmt: skip
            return 0
        return behind

    def _run(self) -> None:
        stuck = False  # the last round made no progress (say at a record that cannot be read)
        seen = -1  # where dispatch stood at the last look, as a fallback
        index = self.store.index_service
        while not self._stopped.is_set():
            # Keys left waiting by dispatch (whichever thread dispatched) go into the index after DEFER_S at most.
            try:
                index.build_pending_if_due()
            except Exception:  # pragma: no cover - as a dispatch failure below
                _log.exception("indexing waiting keys failed")
            # Say "asleep" before looking for work: an append after the look sees the flag and wakes us.
            self._sleeping = True
            if self.fallback_only:
                if not self._wake.wait(self.FALLBACK_LOOK_S) and not stuck:
                    offset, seen = seen, self.reput_from_offset
                    if offset != seen or self.behind() <= 0:
                        continue  # the dispatcher in charge is moving (or there is nothing to do)
            elif stuck or self.behind() <= 0:
                self._wake.wait(self.FALLBACK_LOOK_S)
            self._sleeping = False
            self._wake.clear()
            before = self.reput_from_offset
            # As a fallback, up to the end seen now only: chasing the appends of a busy dispatcher in charge (with
            # the GIL that dispatcher's thread holds) kept the lock from it for hundreds of ms at a time.
            until = self.store.commit_log.get_max_offset() if self.fallback_only else None
            try:
                if self._files_wanted:
                    # Consume-queue files are made before the lock is taken: meanwhile the loop goes on dispatching
                    # up to the first unit of such a file, not kept waiting for the lock by the disk.
                    self._files_wanted = False
                    self.store.prepare_consume_queues([*self._rows, *(self.store.commit_log.handoff or ())])
                with self._dispatch_lock:
                    self.do_reput(until=until)
            except Exception:  # pragma: no cover - a dispatcher bug must not kill the thread silently
                self._failures.exception("dispatch failed at %d", self.reput_from_offset)
                time.sleep(0.1)
            stuck = self.reput_from_offset == before

    def dispatch_now(self, budget: int | None = None, wait: float = 0.0, *, make_files: bool = True) -> bool:
        """Dispatch what is appended in the caller's thread, now; False when another dispatcher is at work (the
        lock was not free within *wait* seconds): the caller tries again later.

        For an appender that wants its records in their queues (and their waiters woken) before it goes on,
        without handing over to the thread and back. At most *budget* records: when more are behind (or a record
        cannot be read, or dispatch fails, logged), the thread is woken to take the rest. Without *make_files*
        (an event loop, which must not wait on the disk), dispatch stops before a record whose unit would be the
        first of a consume-queue file (a new queue's, or the next of a full one), and the thread makes that file
        and goes on from there.
        """
        lock = self._dispatch_lock
        if not lock.acquire(timeout=wait):  # 0: one try
            return False
        try:
            if not self.do_reput(budget, make_files=make_files):
                self.wakeup()
        except Exception:
            self._failures.exception("dispatch failed at %d", self.reput_from_offset)
            self.wakeup()
        finally:
            lock.release()
        return True

    def do_reput(self, budget: int | None = None, until: int | None = None, *, make_files: bool = True) -> bool:
        """Dispatch from ``reput_from_offset`` up to the readable end of the commit log, or *until* that offset
        (a record boundary), in rounds of at most ``DISPATCH_BATCH`` records and *budget* records in all. True when
        it got to the end it aimed at, False when it stopped short (out of budget, at a record it cannot read, or
        stopping, or, without *make_files*, at a record whose unit needs a new file: see :meth:`dispatch_now`).

        Records just appended come as rows from the hand-off (:meth:`CommitLog.take_handoff`),
        used only while each is the record at exactly the offset reached and ends within
        the readable data; anything else (a BLANK, records nobody handed over) is read
        back from the file.
        """
        store = self.store
        cl = store.commit_log
        dispatch_batch = store.do_dispatch_batch
        dispatch_rows = store.do_dispatch_rows
        rows = self._rows
        k = 0  # rows[:k] are done
        stopped = self._stopped
        left = -1 if budget is None else budget  # records this call may still dispatch; negative: no limit
        caught_up = False
        while not stopped.is_set() and left:
            min_offset = cl.get_min_offset()
            if min_offset > self.reput_from_offset:
                self.reput_from_offset = min_offset
            offset = self.reput_from_offset
            end = cl.get_max_offset()
            if until is not None and until < end:
                end = until
            if offset >= end:
                caught_up = True
                break
            most = DISPATCH_BATCH if left < 0 else min(left, DISPATCH_BATCH)
            new = cl.take_handoff()
            if new:
                # Appended in place (the rows are this service's own once handed over): a copy of what is left at
                # every hand-off cost the time of the whole backlog each round while a fast writer stayed ahead.
                if k >= len(rows):
                    rows, k = new, 0
                else:
                    if k > len(rows) >> 1:
                        del rows[:k]
                        k = 0
                    rows += new
            n = len(rows)
            # Rows of records already dispatched from the file are stale.
            if k < n and rows[k][ROW_OFFSET] < offset:  # type: ignore[operator]
                k = bisect.bisect_left(rows, offset, lo=k, key=_row_offset)
            if k < n and rows[k][ROW_OFFSET] == offset:
                chunk = rows[k : k + most]
                count, reached = _rows_in_order(chunk, offset, cl.readable_end(offset, end))
                if not make_files:
                    ready = store.rows_with_files(chunk, count)
                    if ready < count:
                        count = ready
                        if count:
                            last = chunk[count - 1]
                            reached = last[ROW_OFFSET] + last[ROW_SIZE]  # type: ignore[operator]
                        else:
                            self._files_wanted = True  # the thread makes the files (woken by the caller)
                            break
                if count:
                    if count < len(chunk):
                        chunk = chunk[:count]
                    k += count
                    dispatch_rows(chunk)
                    self.reput_from_offset = reached
                    left -= count
                    continue
            stop_at = rows[k][ROW_OFFSET] if k < n and rows[k][ROW_OFFSET] < end else end
            batch, new_offset = cl.read_dispatch_batch(offset, stop_at, most,  # type: ignore[arg-type]
                                                       full_properties=store.arrival_property_topics())
            if batch is not None:
                dispatch_batch(batch)
                left -= len(batch.topic)
            if new_offset == offset:
                skip_to = self._skip_unreadable(offset)
                if skip_to is None:
                    break  # nothing readable there yet (or a slave, whose master's log goes on later)
                new_offset = skip_to
            self.reput_from_offset = new_offset
        self._rows = rows[k:]
        with self._caught_up:
            self._caught_up.notify_all()
        return caught_up

    def _skip_unreadable(self, offset: int) -> int | None:
        """Where dispatch goes on after a record at *offset* that cannot be read (a zeroed page, a damaged BLANK):
        the end of that file's readable data, as ``doReput`` does on a master (its log is complete: what cannot be
        read will never become readable, and stopping there would leave everything after it undispatched, for
        good). None where it stays: nothing readable past *offset* yet, or a slave, whose copy may end inside a
        record its master sends the rest of."""
        store = self.store
        if store._slave:
            return None
        found = store.commit_log.get_data(offset)
        if found is None:
            files = store.commit_log.mapped_file_queue.files
            later = next((f.file_from_offset for f in files if f.file_from_offset > offset), None)
            if later is not None and self.missing is None:  # a file gone from the middle of the log: never readable
                self.missing = (offset, later)
                _log.error("dispatch cannot go on: the commit log has no file for offsets %d to %d", offset,
                           later)  # fmt: skip
            return None
        mf, _pos = found
        end = mf.file_from_offset + mf.read_position()
        if end <= offset:
            return None
        _log.error("dispatch cannot read the record at commit-log offset %d: skipping %d bytes to %d, the end of "
                   "what %s holds", offset, end - offset, end, mf.path.name)  # fmt: skip
        return end

    def wait_caught_up(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._caught_up:
            while self.behind() > 0:
                left = deadline - time.monotonic()
                if left <= 0 or self.missing is not None:
                    return False
                self._wake.set()
                self._caught_up.wait(min(left, 0.05))
        return True

    def shutdown(self) -> None:
        # Like RocketMQ, give dispatch a moment to catch up before stopping.
        self.wait_caught_up(5.0)
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5.0)


class MessageStore:
    """``DefaultMessageStore``: open with :meth:`open` or use as a context manager."""

    def __init__(self, config: MessageStoreConfig | None = None, *, root: str | os.PathLike[str] | None = None,
                 read_only: bool = False, progress: Callable[[str, int, int], None] | None = None,
                 dispatch: bool = True) -> None:  # fmt: skip
        self.config = config or MessageStoreConfig()
        if root is not None:
            self.config.store_path_root_dir = str(root)
        self.read_only = read_only
        # dispatch=False runs no reput thread: records are appended only, and their consume-queue
        # units and index keys are built when the store is next opened (bulk loads, benchmarks).
        self.dispatch_enabled = dispatch
        #: Whether a put's queue must be one its topic's config has (the topic made when unknown, where
        #: autoCreateTopicEnable allows). A broker turns it off: its processors check a producer's sends as
        #: Java's ``msgCheck`` does, and, as Java's store, the store then takes any queue, so a delayed message, a
        #: retry or a committed transaction is delivered to its queue even when its topic shrank or went away
        #: meanwhile (a refusal then lost the message; the topic made again resurrected a deleted one).
        self.check_topic_configs = True
        self.root = self.config.root
        self._progress = progress
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self._cq_lock = threading.Lock()
        self.commit_log = CommitLog(self.config, read_only=read_only)
        self.index_service = IndexService(
            self.root, self.config.max_hash_slot_num, self.config.max_index_num, read_only=read_only,
            max_msgs_num_batch=self.config.max_msgs_num_batch,
        )  # fmt: skip
        self.index_service.on_file_full = self._on_index_file_full
        self.topic_config_manager = TopicConfigManager(self.root)
        self.consumer_offset_manager = ConsumerOffsetManager(self.root)
        self.delay_offset_manager = DelayOffsetManager(self.root)
        self.subscription_group_manager = SubscriptionGroupManager(self.root)
        self.consumer_filter_manager = ConsumerFilterManager(self.root)
        self.checkpoint: StoreCheckpoint | None = None
        self.reput: ReputMessageService | None = None
        self.last_exit_ok = True
        self.recovered_offset = 0
        self._lock = StoreLock(self.root)
        self._closed = True
        self._uniq = UniqueIdGenerator(self.config.broker_ip1)
        self._good_topics: set[str] = set()
        self._checked_queues: dict[tuple[str, int], object] = {}
        self.put_failed_times = 0  # appends the commit log refused (putMessageFailedTimes)
        self._failed_lock = threading.Lock()
        # Called once the records of a dispatch batch reach their consume queue (long polling wake-up): once a
        # queue, with that queue's records in queue order (see ArrivalListener), and their property maps where
        # they were read: records read back from the commit log come with their maps only for the topics of
        # ``message_arriving_property_topics`` (parsing every record's properties was most of a broker's
        # dispatch time). ``message_arriving_wanted(topic, queue_id)``, if set, says whether the listener wants
        # to hear of a queue's records at all (asked once per queue and dispatch batch).
        self.message_arriving_listener: ArrivalListener | None = None
        #: Called in the dispatching thread once a batch's consume-queue units are built and its arrivals told,
        #: before its index is built: the broker answers the pulls they wake there (a woken pull reads the
        #: consume queue only), so that the index's share of the batch is not in their latency.
        self.after_units: Callable[[], None] | None = None
        self.message_arriving_wanted: Callable[[str, int], bool] | None = None
        self.message_arriving_property_topics: frozenset[str] = frozenset()
        # Durability (issue 3): flags that refuse puts (disk full, tested in _validate), the
        # background services, and what recovery did.
        self.running_flags = RunningFlags()
        self._sync_flush = self.config.flush_disk_type == SYNC_FLUSH  # puts wait for the flush
        self._sync_master = self.config.broker_role == "SYNC_MASTER"  # puts wait for a slave (store/ha.py)
        self._slave = self.config.broker_role == "SLAVE"  # puts are refused: the master's log is copied in
        self._waits = self._sync_flush or self._sync_master  # a put's time is taken once it settled
        #: put and get times (StoreStatsService's putMessageEntireTimeMax, putMessageDistributeTime, ...)
        self.put_get_times = PutGetTimes()
        self.services: StoreServices | None = None
        # Master/slave replication (store/ha.py), started by start_ha: the master's service, the slave's client.
        self.ha_service: HAService | None = None
        self.ha_client: HAClient | None = None
        self.recovery_report = RecoveryReport()

    # --- open / close ------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None, config: MessageStoreConfig | None = None,
             **kwargs: object) -> MessageStore:  # fmt: skip
        store = cls(config, root=root, **kwargs)  # type: ignore[arg-type]
        store.load()
        store.start()
        return store

    def __enter__(self) -> MessageStore:
        if self._closed:
            self.load()
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def abort_file(self) -> Path:
        return self.root / "abort"

    def _check_root(self) -> None:
        if self.read_only:
            if not self.root.is_dir():
                raise StoreError(f"{self.root}: no such store directory")
            markers = ("commitlog", "consumequeue", "checkpoint", "index", "config")
            if not any((self.root / m).exists() for m in markers) and not self.config.commit_log_path.exists():
                raise StoreError(f"{self.root}: not a RocketMQ store (no commitlog, consumequeue or checkpoint)")
            return
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"{self.root}: exists and is not a directory")
        self.root.mkdir(parents=True, exist_ok=True)

    def load(self) -> None:
        """``DefaultMessageStore.load``: files, checkpoint, index, then recovery."""
        self._check_root()
        if not self.read_only:
            self._lock.acquire()
        try:
            self.last_exit_ok = not self.abort_file.exists()
            self.commit_log.load()
            self._load_consume_queues()
            self.checkpoint = StoreCheckpoint(self.root / "checkpoint", read_only=self.read_only)
            index_dir = self.index_service.store_path
            on_disk = sum(1 for f in index_dir.iterdir() if f.name.isdigit()) if index_dir.is_dir() else 0
            self.index_service.load(self.last_exit_ok, self.checkpoint.index_msg_timestamp)
            self.recovery_report.index_files_dropped = max(0, on_disk - len(self.index_service.files))
            for manager in self.config_managers():
                manager.load()
            self._recover()
        except BaseException:
            self._release()
            raise
        self._closed = False

    def _load_consume_queues(self) -> None:
        base = self.config.consume_queue_path
        if not base.is_dir():
            return
        for topic_dir in sorted(base.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                try:
                    qid = int(qdir.name)
                except ValueError:
                    continue
                cq = ConsumeQueue(topic_dir.name, qid, base, self.config.mapped_file_size_consume_queue,
                                  read_only=self.read_only)  # fmt: skip
                cq.load()
                self.consume_queue_table.setdefault(topic_dir.name, {})[qid] = cq

    def _recover(self) -> None:
        report = self.recovery_report
        report.commit_log_files_deleted += self.commit_log.mapped_file_queue.dropped_at_load
        started = time.perf_counter()
        max_phy_of_cq = -1
        for cq in self.consume_queues():
            cq.recover()
            max_phy_of_cq = max(max_phy_of_cq, cq.max_physic_offset)
            report.queue_max_after_cq_recover[f"{cq.topic}-{cq.queue_id}"] = cq.get_max_offset_in_queue()
        report.index_entries_after_load = sum(max(0, f.index_count - 1) for f in self.index_service.files)
        progress = self._recovery_progress()
        if self.last_exit_ok:
            report.mode = "normal"
            end = self.commit_log.recover_normally(max_phy_of_cq, self._truncate_dirty_logic_files,
                                                   self._destroy_logics, progress, report,
                                                   self._record_offsets_from)  # fmt: skip
        else:
            report.mode = "abnormal"
            min_ts = self.abnormal_recovery_min_timestamp()
            end = self.commit_log.recover_abnormally(max_phy_of_cq, min_ts, self._recovery_dispatch(),
                                                     self._truncate_dirty_logic_files, self._destroy_logics,
                                                     progress, report, self._record_offsets_from)  # fmt: skip
        self.recovered_offset = end
        report.recovered_offset = end
        for cq in self.consume_queues():
            cq.zero_stale_tail()
        self._recover_topic_queue_table()
        report.seconds += time.perf_counter() - started

    def _record_offsets_from(self, offset: int) -> np.ndarray:
        """Sorted commit-log offsets, from *offset* on, of the records the consume queues point at: hints
        for recovery's walk of the commit log (it checks every one it uses)."""
        parts = [cq.record_offsets_from(offset) for cq in self.consume_queues()]
        if not parts:
            return np.empty(0, dtype=np.int64)
        offsets = np.sort(np.concatenate(parts))
        return offsets[np.concatenate(([True], offsets[1:] != offsets[:-1]))] if len(offsets) else offsets

    def abnormal_recovery_min_timestamp(self) -> int:
        """The checkpoint-derived store time abnormal recovery starts from (§6, §11.4)."""
        assert self.checkpoint is not None
        cp = self.checkpoint
        use_index = self.config.message_index_enable and self.config.message_index_safe
        return cp.min_timestamp_index if use_index else cp.min_timestamp

    def _recovery_dispatch(self) -> RecoveryDispatch:
        """Dispatch for abnormal recovery: batched, and only records whose unit or keys are missing."""
        ends = {(cq.topic, cq.queue_id): cq.max_physic_offset for cq in self.consume_queues()}
        index_end: int | None = None
        if self.config.message_index_enable:
            files = self.index_service.files
            index_end = files[-1].end_phy_offset if files else 0
        batch = self.do_dispatch_batch
        per_record = type(self).do_dispatch is not MessageStore.do_dispatch
        if per_record:
            batch = self._dispatch_each  # a subclass that watches single records (the read-only CLI store)
        report = self.recovery_report

        def counting(b: DispatchBatch) -> None:
            report.records_redispatched += len(b)
            t0 = time.perf_counter()
            batch(b)
            report.dispatch_seconds += time.perf_counter() - t0

        full = per_record or self.message_arriving_listener is not None  # they read whole requests
        return RecoveryDispatch(counting, ends, index_end, full_properties=full)

    def _dispatch_each(self, batch: DispatchBatch) -> None:
        for req in batch.requests():
            self.do_dispatch(req)

    def _recovery_progress(self) -> Callable[[int], None] | None:
        if self._progress is None:
            return None
        total = self.commit_log.get_max_offset()
        report = self._progress
        step = max(1, total // 200)
        last = [0]

        def cb(offset: int) -> None:
            if offset - last[0] >= step:
                last[0] = offset
                report("recover", offset, total)

        return cb

    def _truncate_dirty_logic_files(self, phy_offset: int) -> None:
        for cq in self.consume_queues():
            before = cq.get_max_offset_in_queue()
            cq.truncate_dirty_logic_files(phy_offset)
            self.recovery_report.consume_queue_units_truncated += max(0, before - cq.get_max_offset_in_queue())

    def _destroy_logics(self) -> None:
        """``destroyLogics``: the commit log has no files, so no consume queue can point anywhere: all go."""
        if self.read_only:
            return
        queues = list(self.consume_queues())
        units = sum(max(0, cq.get_max_offset_in_queue() - cq.get_min_offset_in_queue()) for cq in queues)
        if queues:
            _log.warning("the commit log at %s has no files: deleting every consume queue (%d queues, %d units)",
                         self.config.commit_log_path, len(queues), units)  # fmt: skip
        for cq in queues:
            cq.destroy()
        self.consume_queue_table.clear()
        self.recovery_report.consume_queues_deleted += len(queues)
        self.recovery_report.consume_queue_units_truncated += units

    def _recover_topic_queue_table(self) -> None:
        table: dict[str, int] = {}
        min_phy = self.commit_log.get_min_offset()
        for cq in self.consume_queues():
            table[f"{cq.topic}-{cq.queue_id}"] = cq.get_max_offset_in_queue()
            cq.correct_min_offset(min_phy)
        self.commit_log.topic_queue_table = table

    def start(self) -> None:
        """Start dispatch from the consume queues' end and wait until it has caught up."""
        if self.read_only:
            return
        reput_from = self.commit_log.get_min_offset()
        for cq in self.consume_queues():
            reput_from = max(reput_from, cq.max_physic_offset)
        reput_from = max(reput_from, 0, self.commit_log.get_min_offset())
        self.reput = ReputMessageService(self, reput_from)
        self.reput.start()
        self.wait_dispatched(3600.0)
        missing = self.reput.missing
        if missing is not None:  # (4.9.4's start waits for its dispatch for ever there)
            self.close()  # what dispatch built stays; so does abort, dispatch having stopped short
            start, end = missing
            raise StoreError(
                f"{self.config.commit_log_path}: no commit-log file holds offsets {start} to {end} (file "
                f"{start // self.commit_log.file_size * self.commit_log.file_size:020d} is missing), and the consume "
                "queues and the index are built only up to it: restore the file, or move the files from "
                f"{end:020d} on out of the directory (their messages are then gone)")  # fmt: skip
        self._recover_topic_queue_table()
        if self.dispatch_enabled:
            self.commit_log.on_append = self.reput.wakeup
            self.commit_log.handoff = []
        else:
            self.reput.shutdown()
            self.reput = None
        self._finish_recovery_report()
        self.services = StoreServices(self)
        self.services.start()
        self.abort_file.touch()
        self._fsync_dir(self.root)

    def _finish_recovery_report(self) -> None:
        """Count what dispatch rebuilt between the consume queues' own recovery and now (caught up)."""
        report = self.recovery_report
        before = report.queue_max_after_cq_recover
        rebuilt = 0
        for cq in self.consume_queues():
            key = f"{cq.topic}-{cq.queue_id}"
            if key not in before:
                report.consume_queues_rebuilt += 1
            rebuilt += cq.get_max_offset_in_queue() - before.get(key, cq.get_min_offset_in_queue())
        report.consume_queue_units_rebuilt = max(0, rebuilt + report.consume_queue_units_truncated)
        keys = sum(max(0, f.index_count - 1) for f in self.index_service.files)
        report.index_keys_rebuilt = max(0, keys - report.index_entries_after_load)

    @staticmethod
    def _fsync_dir(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Flush everything and remove ``abort`` (a clean shutdown)."""
        if self._closed:
            return
        self._closed = True
        clean = True
        self._stop_ha()
        services = self.services
        if services is not None:
            services.shutdown_intake()
        if self.reput is not None:
            self.reput.shutdown()
            clean = self.reput.behind() <= 0
        if services is not None:
            services.shutdown()
        if not self.read_only:
            self.flush()
            self.persist_configs()
        self.index_service.close()
        for cq in self.consume_queues():
            cq.close()
        self.commit_log.close()
        if services is not None:
            services.close_pool()
            self.services = None
        if self.checkpoint is not None:
            self.checkpoint.close()
        # As RocketMQ: a store that is not writeable (disk full) keeps abort, so the next start checks it.
        if not self.read_only and clean and self.running_flags.is_writeable():
            self.abort_file.unlink(missing_ok=True)
        self._release()

    def flush(self) -> None:
        """Flush commit log, consume queues, index and checkpoint, in that order."""
        assert self.checkpoint is not None
        cl_queue = self.commit_log.mapped_file_queue
        cl_queue.commit_all()
        cl_queue.flush_all()
        if cl_queue.store_timestamp:
            self.checkpoint.physic_msg_timestamp = cl_queue.store_timestamp
        logics_ts = self.checkpoint.logics_msg_timestamp
        for cq in self.consume_queues():
            cq.queue.flush_all()
        self.checkpoint.flushed_logics_msg_timestamp = logics_ts
        self.index_service.flush()
        self.checkpoint.flush()

    def config_managers(self) -> list[ConfigManager]:
        """The JSON files a broker keeps in ``config/`` beside the store."""
        return [self.topic_config_manager, self.consumer_offset_manager, self.delay_offset_manager,
                self.subscription_group_manager, self.consumer_filter_manager]

    def persist_configs(self) -> None:
        if self.read_only:
            return
        for manager in self.config_managers():
            manager.persist()

    def _release(self) -> None:
        self._lock.release()

    def _on_index_file_full(self, end_timestamp: int) -> None:
        if self.checkpoint is not None:
            self.checkpoint.index_msg_timestamp = end_timestamp
            self.checkpoint.flush()

    # --- consume queues ----------------------------------------------------------------
    def consume_queues(self) -> Iterator[ConsumeQueue]:
        for queues in list(self.consume_queue_table.values()):
            yield from list(queues.values())

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = True) -> ConsumeQueue | None:
        queues = self.consume_queue_table.get(topic)
        if queues is not None:
            cq = queues.get(queue_id)
            if cq is not None:
                return cq
        if not create:
            return None
        with self._cq_lock:
            queues = self.consume_queue_table.setdefault(topic, {})
            cq = queues.get(queue_id)
            if cq is None:
                cq = ConsumeQueue(topic, queue_id, self.config.consume_queue_path,
                                  self.config.mapped_file_size_consume_queue, read_only=self.read_only)  # fmt: skip
                queues[queue_id] = cq
            return cq

    # --- dispatch ----------------------------------------------------------------------
    def _needs_file(self, row: tuple[Any, ...]) -> bool:
        """Whether the unit of a dispatch row would go into a consume-queue file not made yet (the queue's first,
        or the one after its last: :meth:`ConsumeQueue.prepare_file`)."""
        if row[ROW_SYS_FLAG] & TRANSACTION_PREPARED_TYPE:
            return False  # no unit
        queues = self.consume_queue_table.get(row[0])
        cq = queues.get(row[1]) if queues is not None else None
        return cq is None or cq.needs_file(row[ROW_QUEUE_OFFSET])

    def rows_with_files(self, rows: Sequence[tuple[Any, ...]], count: int) -> int:
        """How many of the first *count* dispatch rows come before a record whose unit would go into a
        consume-queue file not made yet (:meth:`ConsumeQueue.prepare_file`)."""
        needs = self._needs_file
        for i in range(count):
            if needs(rows[i]):
                return i
        return count

    def prepare_consume_queues(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Make the consume-queue files that the units of *rows* (dispatch rows) are the first of
        (:meth:`ConsumeQueue.prepare_file`): file-system work, for a thread other than the event loop's."""
        if self.read_only:
            return
        for row in rows:
            if self._needs_file(row):
                cq = self.find_consume_queue(row[0], row[1])
                if cq is not None:
                    cq.prepare_file(row[ROW_QUEUE_OFFSET])

    def do_dispatch(self, req: DispatchRequest) -> None:
        """Build the consume-queue unit and index keys of one record (§4.4, §4.5, §5.5), then tell the
        arrival listener (if any). A read-only store builds nothing: its queues and index stay as found."""
        if self.read_only:
            return
        (topic, queue_id, phys, size, tags_code, store_ts, queue_offset, keys, uniq_key, sys_flag, _prepared,
         properties) = req  # fmt: skip
        unit = not sys_flag & TRANSACTION_PREPARED_TYPE
        if unit:
            cq = self.find_consume_queue(topic, queue_id)
            assert cq is not None
            cq.put_message_position_info(phys, size, tags_code, queue_offset)
            if self.checkpoint is not None:
                self._note_logics_timestamp(store_ts)
        if self.config.message_index_enable:
            self.index_service.defer(topic, phys, store_ts, sys_flag, uniq_key, keys)
        listener = self.message_arriving_listener
        if listener is not None and unit:
            wanted = self.message_arriving_wanted
            if wanted is None or wanted(topic, queue_id):
                listener(topic, queue_id, (queue_offset + 1,), (tags_code,), (store_ts,), (properties,))

    def do_dispatch_rows(self, rows: list[tuple[object, ...]]) -> None:
        """:meth:`do_dispatch_batch` for rows (tuples in :class:`DispatchRequest` order)."""
        if len(rows) < SCALAR_DISPATCH:
            dispatch = MessageStore.do_dispatch
            for row in rows:
                dispatch(self, row)  # type: ignore[arg-type]
        else:
            self.do_dispatch_batch(DispatchBatch.from_rows(rows))

    def do_dispatch_batch(self, batch: DispatchBatch) -> None:
        """Build the consume-queue units and index keys of records in commit-log order (§4.4, §4.5, §5.5).

        Units go per queue, in numpy blocks or, for a batch of at most ``_UNITS_IN_A_LOOP`` records, from plain
        lists; then the arrival listener (if any) hears of each queue's records (and ``after_units`` runs),
        then the index takes all keys at once; a batch of fewer than
        ``SCALAR_DISPATCH`` records (whose keys are strings) goes a record at a time,
        which costs less than numpy's calls. A read-only store builds nothing: its
        queues and index stay as found.
        """
        if self.read_only or not len(batch):
            return
        if len(batch) < SCALAR_DISPATCH and batch.index_keys is None:
            for req in batch.requests():
                MessageStore.do_dispatch(self, req)
            return
        groups = batch.consume_queue_groups()
        if groups:
            whole = len(batch)
            few = whole <= _UNITS_IN_A_LOOP
            if few:  # a live send: plain lists in a loop (numpy's conversions cost more than the units)
                lists = [_listed(c) for c in (batch.commit_log_offset, batch.msg_size, batch.tags_code,
                                              batch.consume_queue_offset)]  # fmt: skip
            else:
                arrays = [np.asarray(c, dtype=np.int64) for c in (batch.commit_log_offset, batch.msg_size,
                                                                  batch.tags_code, batch.consume_queue_offset)]
            last = 0
            for topic, queue_id, index in groups:
                cq = self.find_consume_queue(topic, queue_id)
                assert cq is not None
                if few:
                    cq.put_few_units(*(lists if len(index) == whole else _rows_of(lists, index.tolist())))
                else:
                    cq.put_units(*(arrays if len(index) == whole else (a[index] for a in arrays)))
                last = max(last, int(index[-1]))
            if self.checkpoint is not None:
                self._note_logics_timestamp(int(batch.store_timestamp[last]))
        listener = self.message_arriving_listener
        if listener is not None and groups:
            # Before the index (Java tells after it): the units are what a woken pull reads.
            self._tell_arrivals(listener, batch, groups)
            if self.after_units is not None:
                try:
                    self.after_units()
                except Exception:  # the index must still be built: a failure there is the hook's alone
                    _log.exception("after_units hook failed")
        if self.config.message_index_enable:
            index = self.index_service
            if batch.index_keys is not None:
                index.build_pending()  # keys go in in commit-log order
                index.build_index_hashed(batch.topic, batch.commit_log_offset, batch.store_timestamp, batch.sys_flag,
                                         *batch.index_keys)  # fmt: skip
            else:
                index.defer_batch(batch.topic, batch.commit_log_offset, batch.store_timestamp, batch.sys_flag,
                                  batch.uniq_key, batch.keys)  # fmt: skip

    def _note_logics_timestamp(self, store_timestamp: int) -> None:
        """The checkpoint's logicsMsgTimestamp after dispatching a record of *store_timestamp*, held back to the
        oldest record whose index keys wait for a build (abnormal recovery starts from it)."""
        assert self.checkpoint is not None
        waiting = self.index_service.pending_oldest_timestamp
        self.checkpoint.logics_msg_timestamp = min(store_timestamp, waiting) if waiting else store_timestamp
        if self._slave:
            # A slave's appends are the master's bytes, with no store time of their own for the flush services
            # to note: as ConsumeQueue.putMessagePositionInfoWrapper, its physicMsgTimestamp follows dispatch.
            self.checkpoint.physic_msg_timestamp = store_timestamp

    def arrival_property_topics(self) -> bool | frozenset[str]:
        """What dispatch reads property maps for (``CommitLog.read_dispatch_batch``): nothing without a listener."""
        if self.message_arriving_listener is None:
            return False
        return self.message_arriving_property_topics

    def _tell_arrivals(self, listener: ArrivalListener, batch: DispatchBatch,
                       groups: list[tuple[str, int, np.ndarray]]) -> None:  # fmt: skip
        """Tell the arrival listener of the units of *batch*, once a queue (commit-log order within a queue),
        skipping whole the queues it does not want."""
        wanted = self.message_arriving_wanted
        columns: list[Sequence[Any]] | None = None
        whole = len(batch)
        for topic, queue_id, index in groups:
            if wanted is not None and not wanted(topic, queue_id):
                continue
            if columns is None:
                columns = [_listed(c) for c in (batch.consume_queue_offset, batch.tags_code, batch.store_timestamp)]
            props: Sequence[dict[str, str] | None] | None = batch.properties if batch.has_properties else None
            if len(index) == whole:  # one queue's batch: the columns as they are
                offsets, tags, stamps = columns
            else:
                rows = index.tolist()
                offsets, tags, stamps = _rows_of(columns, rows)
                props = [props[i] for i in rows] if props is not None else None
            listener(topic, queue_id, [o + 1 for o in offsets], tags, stamps, props)

    def wait_dispatched(self, timeout: float = 10.0) -> bool:
        """Block until every appended record is in its consume queue and the index."""
        if self.reput is None:
            return True
        caught_up = self.reput.wait_caught_up(timeout)
        self.index_service.build_pending()
        return caught_up

    def dispatch_behind_bytes(self) -> int:
        return self.reput.behind() if self.reput is not None else 0

    @property
    def put_message_times_total(self) -> int:
        """Messages appended since the store opened, of every topic (``getPutMessageTimesTotal``)."""
        return self.commit_log.put_times_total

    def runtime_info(self) -> dict[str, str]:
        """The figures of ``StoreStatsService.getRuntimeInfo`` and ``DefaultMessageStore`` that rocketq keeps, as
        Java writes them."""
        self.put_get_times.roll_if_due()
        times, size = self.commit_log.put_times_total, self.commit_log.put_size_total
        mfq = self.commit_log.mapped_file_queue
        pool = self.services.pool if self.services is not None else None
        info = {
            **self.put_get_times.runtime_info(),
            "putMessageTimesTotal": str(times or 1),  # Java shows 1 for none
            "putMessageSizeTotal": str(size),
            "putMessageAverageSize": java_double_str(size / (times or 1)),
            "putMessageFailedTimes": str(self.put_failed_times),
            "dispatchMaxBuffer": "0",
            "remainTransientStoreBufferNumbs": str(pool.available_buffer_nums() if pool is not None else 2**31 - 1),
            "remainHowManyDataToFlush": human_byte_count(max(0, self.get_max_phy_offset() - mfq.flushed_where)),
        }
        if pool is not None:
            info["remainHowManyDataToCommit"] = human_byte_count(max(0, self.get_max_phy_offset()
                                                                     - mfq.committed_where))  # fmt: skip
        return info

    # --- put -----------------------------------------------------------------------------
    def _check_topic(self, topic: str) -> str | None:
        if topic in self._good_topics:
            return None
        err = self._topic_error(topic)
        if err is None and len(self._good_topics) < 100_000:
            self._good_topics.add(topic)
        return err

    def _topic_error(self, topic: str) -> str | None:
        if not topic:
            return "topic is empty"
        if len(topic) > self.config.max_topic_length:
            return f"topic is longer than {self.config.max_topic_length} characters"
        if not is_legal_name(topic):
            return f"topic {topic!r} has characters other than letters, digits, %, |, - and _"
        return None

    def _check_queue(self, topic: str, queue_id: int) -> str | None:
        if queue_id < 0:
            return f"queue id {queue_id} is negative"
        if topic in INTERNAL_TOPICS:
            return None
        cfg = self.topic_config_manager.get(topic)
        if cfg is not None:
            # As the broker's msgCheck: below the greater of the two counts. A queue past the write queues but
            # not the read ones takes messages (a producer's route a moment old, while write queues shrink).
            queues = max(cfg.write_queue_nums, cfg.read_queue_nums)
            if queue_id >= queues:
                return f"queue id {queue_id} is illegal: topic {topic} has {queues} queues"
            return None
        if not self.config.auto_create_topic_enable:
            return f"topic {topic} does not exist and autoCreateTopicEnable is false"
        if queue_id > MAX_QUEUE_ID:
            return f"queue id {queue_id} is illegal (at most {MAX_QUEUE_ID})"
        return None

    def _ensure_topic(self, topic: str, queue_id: int) -> None:
        if topic in INTERNAL_TOPICS or self.topic_config_manager.get(topic) is not None:
            return
        n = max(self.config.default_topic_queue_nums, queue_id + 1)
        self.topic_config_manager.put(TopicConfig(topic, read_queue_nums=n, write_queue_nums=n))
        self.topic_config_manager.persist()

    def to_message_ext(self, msg: Message, queue_id: int, *, born_host: HostPort | None = None,
                       born_timestamp: int | None = None, sys_flag: int = 0,
                       keep_wait: bool = False) -> MessageExt:  # fmt: skip
        """Wrap a message as a producer and a broker would: ``UNIQ_KEY`` added when it has none (the producer's
        part: the store's own puts have no producer), ``CLUSTER`` added.

        Properties are ordered as a 4.9 broker's ``HashMap`` holds them, and ``WAIT``
        is dropped as that broker drops it (unless *keep_wait*: a stored copy being replayed).
        """
        return self.message_ext_of(msg.topic, msg.body, msg.flag, dict(msg.properties), queue_id,
                                   born_host=born_host, born_timestamp=born_timestamp, sys_flag=sys_flag,
                                   keep_wait=keep_wait)  # fmt: skip

    def message_ext_of(self, topic: str, body: bytes, flag: int, props: dict[str, str], queue_id: int, *,
                       born_host: HostPort | None = None, born_timestamp: int | None = None, sys_flag: int = 0,
                       keep_wait: bool = False, reconsume_times: int = 0, add_uniq_key: bool = True,
                       reput_wait: bool = False) -> MessageExt:  # fmt: skip
        """:meth:`to_message_ext` of a message's parts, taking *props* over (it is changed: the caller's own map,
        as a send's freshly parsed properties are, spares a copy). A broker storing a producer's send passes
        ``add_uniq_key=False``: a 4.9.4 broker stores what the producer sent, with an id or without.

        *reput_wait* (with *keep_wait*): as 4.9.4's send processor, which takes ``WAIT`` out of the map and puts it
        back after ``CLUSTER``, so that a map encoded again later (a half message, a delayed one) has ``WAIT``
        after the other keys of its ``HashMap`` bucket (``PGROUP`` and ``DELAY`` share it)."""
        wait = props.get(PROPERTY_WAIT_STORE_MSG_OK)
        if not keep_wait:
            props.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
        if add_uniq_key and PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in props:  # an id is made only when wanted
            props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = self._uniq.next_id()
        props[PROPERTY_CLUSTER] = self.config.broker_cluster_name
        if reput_wait and keep_wait and wait is not None:
            del props[PROPERTY_WAIT_STORE_MSG_OK]
            props[PROPERTY_WAIT_STORE_MSG_OK] = wait
        store_host = self.config.store_host
        msg = MessageExt(
            topic, body, flag, hashmap_ordered(props), queue_id, sys_flag,
            now_ms() if born_timestamp is None else born_timestamp, born_host or store_host, 0, store_host,
            reconsume_times,
        )  # fmt: skip
        if wait is not None and wait != "true":  # (the common case decided without a call)
            msg.wait_store_msg_ok = wait_store_msg_ok(wait)
        return msg

    def _validate(self, topic: str, queue_id: int) -> PutMessageResult | None:
        """Why messages of one queue cannot be put now (``checkStoreStatus`` + ``checkMessage``), or None. The
        commit log holds them against ``maxMessageSize`` (a message's body, a batch's size as sent)."""
        if self.read_only or self._closed:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error="store is not open for writing")
        if self._slave:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                    error="message store is slave mode, so putMessage is forbidden")  # fmt: skip
        if self.running_flags.flag_bits & NOT_WRITEABLE_BITS:
            reasons = ", ".join(self.running_flags.reasons()) or "not writeable"
            error = f"the message store is not writeable ({reasons}); puts are refused"
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error=error)
        if not self.check_topic_configs:  # a broker's store: its processors hold sends to the topic configs
            err = self._check_topic(topic)
            if err is None and queue_id < 0:
                err = f"queue id {queue_id} is negative"
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error=err) if err else None
        key = (topic, queue_id)
        # A queue already checked stays valid while its topic's config object is the same.
        known = self._checked_queues.get(key, _UNCHECKED)
        if known is _UNCHECKED or self.topic_config_manager.topic_config_table.get(topic) is not known:
            err = self._check_topic(topic) or self._check_queue(topic, queue_id)
            if err:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error=err)
            self._ensure_topic(topic, queue_id)
            if len(self._checked_queues) < 100_000:
                self._checked_queues[key] = self.topic_config_manager.get(topic)
        return None

    def _counted(self, result: PutMessageResult, wait: bool) -> PutMessageResult:
        """*result* of the commit log, a failure counted (``putMessageFailedTimes``: not the refusals of the
        checks before the commit log, as in Java), and whether the put waits (*wait*: ``isWaitStoreMsgOK``); a
        put that does not wait is timed now, one that waits once it settled (:meth:`_timed`)."""
        if result.status is not PutMessageStatus.PUT_OK:
            with self._failed_lock:  # puts come from the event loop and the delivery threads
                self.put_failed_times += 1
            return result
        if not wait:
            result.wait = False
            self._flush_soon(result)  # asked for once, here: the waits below only skip such a put
        if not (wait and self._waits):
            self.put_get_times.put_time(_ms_since(result.store_timestamp))
        return result

    def _timed(self, result: PutMessageResult) -> PutMessageResult:
        """A put that waited for its flush or its slave, timed now that it settled (a put refused before it was
        stored, or that did not wait, is not timed here)."""
        if self._waits and result.wait and result.store_timestamp:
            self.put_get_times.put_time(_ms_since(result.store_timestamp))
        return result

    def _append(self, msg: MessageExt | Message, queue_id: int | None = None) -> PutMessageResult:
        """Check and append one message to the commit log (no waiting for a flush)."""
        if isinstance(msg, Message):
            msg = self.to_message_ext(msg, queue_id or 0)
        elif queue_id is not None:
            msg.queue_id = queue_id
        bad = self._validate(msg.topic, msg.queue_id)
        if bad is not None:
            return bad
        result = self.commit_log.put_message(msg)
        if result.status is not _PUT_OK or not msg.wait_store_msg_ok or self._waits:
            self._counted(result, msg.wait_store_msg_ok)
        else:  # the common put, done, and timed here: one clock read, no call under 1 ms
            ms = _time() * 1000.0 - result.store_timestamp
            if ms < 1.0:
                self.put_get_times.zero += 1
            else:
                self.put_get_times.put_time(int(ms))
        return result

    def _append_batch(self, msgs: list[MessageExt | Message] | MessageExtBatch,
                      queue_id: int | None = None) -> PutMessageResult:  # fmt: skip
        """Check and append a producer batch (no waiting for a flush)."""
        if isinstance(msgs, MessageExtBatch):
            return self._append_message_batch(msgs, queue_id)
        if not msgs:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error="empty batch")
        exts = [
            self.to_message_ext(m, queue_id or 0) if isinstance(m, Message) else m for m in msgs
        ]
        if queue_id is not None:
            for m in exts:
                m.queue_id = queue_id
        first = exts[0]
        topic, qid = first.topic, first.queue_id
        for m in exts:
            if m.topic != topic or m.queue_id != qid:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                        error="a batch must have one topic and one queue")  # fmt: skip
            if m.sys_flag & TRANSACTION_MASK:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                        error="batch messages cannot be transactional")  # fmt: skip
            if _GET_DELAY(m.properties) not in _NO_DELAY:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error="batch messages cannot be delayed")
        bad = self._validate(topic, qid)
        if bad is not None:
            return bad
        return self._counted(self.commit_log.put_messages(exts), first.wait_store_msg_ok)

    def _append_message_batch(self, batch: MessageExtBatch, queue_id: int | None = None) -> PutMessageResult:
        """:meth:`_append_batch` of a batch held column by column: the same checks, each a pass in C."""
        if not len(batch):
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error="empty batch")
        if queue_id is not None:
            batch.queue_id = queue_id
        if batch.sys_flag & TRANSACTION_MASK:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error="batch messages cannot be transactional")
        if not set(map(_GET_DELAY, batch.properties)) <= _NO_DELAY:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error="batch messages cannot be delayed")
        bad = self._validate(batch.topic, batch.queue_id)
        if bad is not None:
            return bad
        return self._counted(self.commit_log.put_message_batch(batch), batch.wait_store_msg_ok)

    def put_message(self, msg: MessageExt | Message, queue_id: int | None = None) -> PutMessageResult:
        """Append one message; a plain :class:`Message` is wrapped by :meth:`to_message_ext`.

        Under SYNC_FLUSH it returns once the group commit has the record on disk
        (``FLUSH_DISK_TIMEOUT`` after ``syncFlushTimeout``, the data staying queued).
        """
        result = self._append(msg, queue_id)
        if self._sync_flush:
            result = self._wait_flushed(result)
        return self._timed(self._wait_transferred(result) if self._sync_master else result)

    def put_messages(self, msgs: list[MessageExt | Message] | MessageExtBatch,
                     queue_id: int | None = None) -> PutMessageResult:  # fmt: skip
        """Append a producer batch: one topic and queue, consecutive offsets, one store time (under
        SYNC_FLUSH it returns once on disk, as :meth:`put_message`). A :class:`MessageExtBatch` (a batch send
        as the broker takes it) is appended column by column."""
        result = self._append_batch(msgs, queue_id)
        if self._sync_flush:
            result = self._wait_flushed(result)
        return self._timed(self._wait_transferred(result) if self._sync_master else result)

    def put_message_async(self, msg: MessageExt | Message, queue_id: int | None = None) -> Future[PutMessageResult]:
        """:meth:`put_message` without blocking on the flush: a future of the result.

        Under SYNC_FLUSH it completes when the group commit has the record on disk
        (``asyncPutMessage``); asyncio code can use :meth:`aput_message` instead.
        """
        return self._future_of(self._append(msg, queue_id))

    def put_messages_async(self, msgs: list[MessageExt | Message] | MessageExtBatch,
                           queue_id: int | None = None) -> Future[PutMessageResult]:  # fmt: skip
        """:meth:`put_messages` without blocking on the flush (see :meth:`put_message_async`)."""
        return self._future_of(self._append_batch(msgs, queue_id))

    async def aput_message(self, msg: MessageExt | Message, queue_id: int | None = None) -> PutMessageResult:
        """:meth:`put_message` for asyncio code: appends at once, then awaits the group commit.

        Other tasks run meanwhile; the tasks of one loop share one future per flush
        round (:meth:`GroupCommitService.wait_flushed`).
        """
        result = self._append(msg, queue_id)
        flushed = self._flushed(result)
        if flushed is not None:  # awaited here, not in a coroutine of its own: one frame fewer to resume a put
            _set_flush_status(result, await flushed)
        if self._sync_master and result.status is PutMessageStatus.PUT_OK and result.wait:
            result.status = await self._transferred(result)
        return self._timed(result)

    async def aput_messages(self, msgs: list[MessageExt | Message] | MessageExtBatch,
                            queue_id: int | None = None) -> PutMessageResult:  # fmt: skip
        """:meth:`put_messages` for asyncio code (see :meth:`aput_message`)."""
        return await self._settled(self._append_batch(msgs, queue_id))

    def put_message_then(self, msg: MessageExt | Message, queue_id: int | None = None,
                         ) -> PutMessageResult | Coroutine[Any, Any, PutMessageResult]:  # fmt: skip
        """For an event loop that must append now, in its order, and wait later: the result when it is final at
        once, else a coroutine that ends with it once flushed (SYNC_FLUSH) and held by a slave (SYNC_MASTER)."""
        result = self._append(msg, queue_id)
        return self._settled(result) if self._waits_for(result) else result

    def put_messages_then(self, msgs: list[MessageExt | Message] | MessageExtBatch, queue_id: int | None = None,
                          ) -> PutMessageResult | Coroutine[Any, Any, PutMessageResult]:  # fmt: skip
        """:meth:`put_message_then` of a producer batch."""
        result = self._append_batch(msgs, queue_id)
        return self._settled(result) if self._waits_for(result) else result

    def _waits_for(self, result: PutMessageResult) -> bool:
        return result.ok and result.wait and (self._sync_flush or self._sync_master)

    def _flush_soon(self, result: PutMessageResult) -> None:
        """A put that does not wait (``WAIT=false``) under SYNC_FLUSH: its flush is asked for, not awaited, as
        Java's ``submitFlushRequest`` wakes the group commit service."""
        if not (self._sync_flush and result.ok):
            return
        if self.services is not None and self.services.group_commit is not None:
            self.services.group_commit.flush_soon()
        else:  # no service yet to flush it later: now, as a waiting put is flushed then
            self.commit_log.mapped_file_queue.flush_all()

    async def _settled(self, result: PutMessageResult) -> PutMessageResult:
        """*result* once flushed and replicated as the store's modes ask (asyncio)."""
        flushed = self._flushed(result)
        if flushed is not None:
            _set_flush_status(result, await flushed)
        if self._sync_master and result.status is PutMessageStatus.PUT_OK and result.wait:
            result.status = await self._transferred(result)
        return self._timed(result)

    async def _transferred(self, result: PutMessageResult) -> PutMessageStatus:
        """A SYNC_MASTER put, stored: its status once a slave holds its records (asyncio)."""
        ha = self.ha_service
        if ha is None:
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        return await ha.wait_transferred(result.wrote_offset + result.wrote_bytes, self.config.slave_timeout / 1000)

    def _flushed(self, result: PutMessageResult) -> Coroutine[Any, Any, PutMessageStatus] | None:
        """For asyncio code under SYNC_FLUSH: the wait for the group commit round that covers *result*'s record
        (:meth:`GroupCommitService.wait_flushed`), or None when there is nothing to wait for."""
        if not (self._sync_flush and result.ok and result.wait):
            return None
        gc = self._group_commit()
        if gc is None:
            return None
        return gc.wait_flushed(result.wrote_offset + result.wrote_bytes, self.config.sync_flush_timeout / 1000)

    def _group_commit(self) -> GroupCommitService | None:
        """The group commit service (SYNC_FLUSH); None before the services run: the flush is done here then."""
        services = self.services
        gc = services.group_commit if services is not None else None
        if gc is None:
            self.commit_log.mapped_file_queue.flush_all()
        return gc

    def _wait_flushed(self, result: PutMessageResult) -> PutMessageResult:
        """``handleDiskFlush`` of a blocking put under SYNC_FLUSH: block until the record is on disk."""
        if result.ok and result.wait:
            gc = self._group_commit()
            if gc is not None:
                _set_flush_status(result, gc.commit_and_wait(result.wrote_offset + result.wrote_bytes,
                                                             self.config.sync_flush_timeout / 1000))  # fmt: skip
        return result

    def _future_of(self, result: PutMessageResult) -> Future[PutMessageResult]:
        """:meth:`_wait_flushed` (and, on a SYNC_MASTER, :meth:`_wait_transferred`) as a
        ``concurrent.futures.Future`` that the group commit (and a slave's acknowledgement) completes."""
        settled = self._settling(result)
        if self._waits:
            settled.add_done_callback(lambda f: self._timed(f.result()))
        return settled

    def _settling(self, result: PutMessageResult) -> Future[PutMessageResult]:
        fut: Future[PutMessageResult] = Future()
        gc = self._group_commit() if self._sync_flush and result.ok and result.wait else None
        if gc is None:
            fut.set_result(result)
        else:
            gc.submit(result.wrote_offset + result.wrote_bytes, result, fut)
        if not self._sync_master or not result.ok or not result.wait:
            return fut
        if fut.done():
            return self._transfer_future(fut.result())
        replicated: Future[PutMessageResult] = Future()

        def flushed(f: Future[PutMessageResult]) -> None:
            r = f.result()
            if r.status is not PutMessageStatus.PUT_OK:
                replicated.set_result(r)
                return
            self._transfer_future(r).add_done_callback(lambda t: replicated.set_result(t.result()))

        fut.add_done_callback(flushed)
        return replicated

    # --- replication (store/ha.py) -------------------------------------------------------------
    def _transfer_future(self, result: PutMessageResult) -> Future[PutMessageResult]:
        """A SYNC_MASTER put, stored: a future of *result* once a slave holds its records (``handleHA``)."""
        ha = self.ha_service
        if ha is None or result.status is not PutMessageStatus.PUT_OK:
            if result.status is PutMessageStatus.PUT_OK:
                result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            done: Future[PutMessageResult] = Future()
            done.set_result(result)
            return done
        return ha.transfer_future(result)

    def _wait_transferred(self, result: PutMessageResult) -> PutMessageResult:
        """A blocking SYNC_MASTER put: wait until a slave holds its records (or the slave timeout)."""
        if result.status is not PutMessageStatus.PUT_OK or not result.wait:
            return result
        return self._transfer_future(result).result()

    def start_ha(self, host: str = "127.0.0.1", port: int = 0, master_address: str | None = None) -> None:
        """Start replication (``HAService.start``): a master listens for slaves on *host*:*port* (0: any free port,
        then :attr:`HAService.port`); a slave follows *master_address* (``host:port`` of the master's HA listener;
        ``haMasterAddress`` when not given; :meth:`update_ha_master_address` can set it later). An unusable port
        raises OSError."""
        if self.read_only or self.ha_service is not None or self.ha_client is not None:
            return
        if self._slave:
            self.ha_client = HAClient(self, master_address or self.config.ha_master_address or None)
            self.ha_client.start()
            return
        service = HAService(self, host, port)
        service.start()
        self.ha_service = service

    def update_ha_master_address(self, addr: str | None) -> None:
        """``updateHaMasterAddress``: where a slave's client connects (a master ignores it)."""
        if self.ha_client is not None:
            self.ha_client.update_master_address(addr)

    def append_to_commit_log(self, start_offset: int, data: bytes | bytearray | memoryview) -> bool:
        """``appendToCommitLog``: a slave stores bytes of its master's commit log (see :meth:`CommitLog.append_data`);
        dispatch is woken as by a put."""
        if self._closed or self.read_only:
            return False
        return self.commit_log.append_data(start_offset, data)

    def after_replica_append(self) -> None:
        """After a slave's appends of one read, before it acknowledges them: under SYNC_FLUSH they go to disk
        first (so an acknowledged offset is one the slave has on disk)."""
        if self._sync_flush:
            self.commit_log.mapped_file_queue.flush(0)

    def _stop_ha(self) -> None:
        if self.ha_client is not None:
            self.ha_client.shutdown()
            self.ha_client = None
        if self.ha_service is not None:
            self.ha_service.shutdown()
            self.ha_service = None

    def execute_delete_files_manually(self) -> None:
        """An admin's request to delete expired commit-log files in the next 20 cleaning rounds."""
        if self.services is not None:
            self.services.clean.commit_log_cleaner.execute_delete_files_manually()

    def get_flushed_offset(self) -> int:
        """Commit-log offset up to which data is known to be on disk."""
        return self.commit_log.mapped_file_queue.flushed_where

    def get_confirm_offset(self) -> int:
        """Where readers may go (5.x ``getConfirmOffset`` without HA): the flushed end under
        SYNC_FLUSH, the written end under ASYNC_FLUSH."""
        if self.config.flush_disk_type == SYNC_FLUSH:
            return min(self.get_flushed_offset(), self.commit_log.get_max_offset())
        return self.commit_log.get_max_offset()

    # --- get -----------------------------------------------------------------------------
    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_count: int,
                    message_filter: MessageFilter | None = None) -> GetMessageResult:  # fmt: skip
        """Read up to *max_count* records of a queue from *offset* (``getMessage``), timed
        (``getMessageEntireTimeMax``)."""
        begin = _time()
        try:
            return self._get_message(group, topic, queue_id, offset, max_count, message_filter)
        finally:
            if _time() - begin >= 0.001:
                self.put_get_times.get_time(int((_time() - begin) * 1000.0))

    def _get_message(self, group: str, topic: str, queue_id: int, offset: int, max_count: int,
                     message_filter: MessageFilter | None) -> GetMessageResult:  # fmt: skip
        # nextOffsetCorrection: where a read that found nothing there sends the reader next. A slave leaves the
        # offset as it was asked (unless offsetCheckInSlave): its master corrects offsets. A slave that joined
        # late has no queue for messages only older files held: the same rule (Java makes the queue, empty).
        correct = not self._slave or self.config.offset_check_in_slave
        cq = self.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0 if correct else offset, 0, 0)
        min_offset = cq.get_min_offset_in_queue()
        max_offset = cq.get_max_offset_in_queue()
        if max_offset == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0 if correct else offset, min_offset,
                                    max_offset)  # fmt: skip
        if offset < min_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, min_offset if correct else offset, min_offset,
                                    max_offset)  # fmt: skip
        if offset == max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:  # 4.9 corrects to the end (4.7 went back to 0 when the queue began at 0)
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_offset if correct else offset,
                                    min_offset, max_offset)  # fmt: skip
        # RocketMQ looks at most max(16000, maxMsgNums × 20) bytes of units per pull.
        max_filter = max(16000, max_count * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE
        units = cq.get_index_buffer(offset, max_filter)
        if units is None:
            nxt = cq.roll_next_file(offset) if correct else offset
            return GetMessageResult(GetMessageStatus.OFFSET_FOUND_NULL, nxt, min_offset, max_offset)
        cfg = self.config
        result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        cl = self.commit_log
        max_phy = cl.get_max_offset()
        memory = _PHYSICAL_MEMORY * cfg.access_message_in_memory_max_ratio // 100
        if (message_filter is None or message_filter.matches_all) and \
                self._get_from_one_file(result, units, offset, max_count, max_phy, memory):  # fmt: skip
            return result
        # Units become Python ints a chunk at a time: a pull of 32 looks at up to 800 units but,
        # unfiltered, mostly uses its first 32.
        unit_phys, unit_size, unit_tags = units["phys"], units["size"], units["tags"]
        chunk = max(max_count, 32)
        phys_arr: list[int] = []
        size_arr: list[int] = []
        tags_arr: list[int] | None = [] if message_filter is not None else None
        converted = 0
        mem_bytes, mem_count = cfg.max_transfer_bytes_on_message_in_memory, cfg.max_transfer_count_on_message_in_memory
        disk_bytes, disk_count = cfg.max_transfer_bytes_on_message_in_disk, cfg.max_transfer_count_on_message_in_disk
        file_size = cl.file_size
        next_phy_file_start = -1
        total_size = 0
        messages = result.messages
        queue_offsets = result.queue_offsets
        # The mapped file of the previous message: consecutive units mostly share one.
        mf_start = mf_end = -1
        mf_mm = None
        mf_readable = 0
        i = 0
        last_phy = 0
        n = len(units)
        while i < n:
            if i == converted:
                converted = min(n, converted + chunk)
                phys_arr += unit_phys[i:converted].tolist()
                size_arr += unit_size[i:converted].tolist()
                if tags_arr is not None:
                    tags_arr += unit_tags[i:converted].tolist()
            phys = phys_arr[i]
            size = size_arr[i]
            last_phy = phys
            if next_phy_file_start >= 0 and phys < next_phy_file_start:
                i += 1
                continue
            count = len(messages)
            if total_size and count:
                if max_count <= count:
                    break
                if max_phy - phys > memory:  # "in disk": RocketMQ sends less per pull
                    if total_size + size > disk_bytes or count > disk_count - 1:
                        break
                elif total_size + size > mem_bytes or count > mem_count - 1:
                    break
            if tags_arr is not None and message_filter is not None and \
                    not message_filter.is_matched_by_consume_queue(tags_arr[i]):
                if not total_size:
                    result.status = GetMessageStatus.NO_MATCHED_MESSAGE
                i += 1
                continue
            if not mf_start <= phys < mf_end:
                found = cl.get_data(phys)
                if found is None:
                    mf_start = mf_end = -1
                else:
                    mf, _pos = found
                    mf_start = mf.file_from_offset
                    mf_end = mf_start + file_size
                    mf_mm = mf.mm
                    mf_readable = mf_start + mf.read_position()
            if mf_start <= phys and phys + size <= mf_readable and size > 0 and mf_mm is not None:
                pos = phys - mf_start
                data: bytes | None = mf_mm[pos : pos + size]
            else:
                data = None
            if data is None:
                if not total_size:
                    result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = cl.roll_next_file(phys)
                i += 1
                continue
            if message_filter is not None and not message_filter.is_matched_by_commit_log(data):
                if not total_size:
                    result.status = GetMessageStatus.NO_MATCHED_MESSAGE
                i += 1
                continue
            messages.append(data)
            queue_offsets.append(offset + i)
            total_size += size
            next_phy_file_start = -1
            i += 1
        if total_size:
            result.status = GetMessageStatus.FOUND
        result.next_begin_offset = offset + i
        result.buffer_total_size = total_size
        result.suggest_pulling_from_slave = max_phy - last_phy > memory
        return result

    def _get_from_one_file(self, result: GetMessageResult, units: np.ndarray, offset: int, max_count: int,
                           max_phy: int, memory: int) -> bool:  # fmt: skip
        """:meth:`get_message`'s loop for its usual case, done with a few list operations per pull instead of a
        pass per unit: nothing to filter, and the records it would send all readable in one commit-log file and
        "in memory" (within *memory* bytes of *max_phy*, so one pair of transfer limits holds for all). Fills
        *result* as the loop would and returns True; returns False, *result* untouched, in any other case (the
        loop then reads unit by unit).
        """
        n = len(units)
        k = min(n, max_count)
        if k <= 0:
            return False
        phys = units["phys"][:k].tolist()
        sizes = units["size"][:k].tolist()
        cfg = self.config
        cl = self.commit_log
        if min(sizes) <= 0 or max_phy - min(phys) > memory:
            return False
        # The loop takes the first record, then stops before a record past maxMsgNums, past the count limit or
        # over the byte limit (sizes are positive: the running totals rise, and bisect finds where they pass).
        totals = list(itertools.accumulate(sizes))
        count = max(1, min(k, cfg.max_transfer_count_on_message_in_memory,
                           bisect.bisect_right(totals, cfg.max_transfer_bytes_on_message_in_memory)))  # fmt: skip
        found = cl.get_data(phys[0])
        if found is None:
            return False
        mf = found[0]
        mm = mf.mm
        start = mf.file_from_offset
        if count < k:
            del phys[count:], sizes[count:]
        if mm is None or min(phys) < start or max(map(operator.add, phys, sizes)) > start + mf.read_position():
            return False
        result.messages = [mm[p - start : p - start + size] for p, size in zip(phys, sizes, strict=True)]
        result.queue_offsets = list(range(offset, offset + count))
        result.status = GetMessageStatus.FOUND
        result.next_begin_offset = offset + count
        result.buffer_total_size = totals[count - 1]
        # The loop's last unit looked at: the one it stopped before, else the last one.
        last_phy = int(units["phys"][count]) if count < n else phys[-1]
        result.suggest_pulling_from_slave = max_phy - last_phy > memory
        return True

    # --- offsets and lookups --------------------------------------------------------------
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.get_min_offset_in_queue() if cq is not None else -1

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get_unit(cq_offset) if cq is not None else None
        return unit.phys if unit is not None else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return 0
        return cq.get_offset_in_queue_by_time(timestamp, self.commit_log.get_min_offset(),
                                              self.commit_log.pickup_store_timestamp)  # fmt: skip

    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int | None = None) -> int:
        """Store time of the first message of the store, or of one queue; -1 if none."""
        if topic is None:
            min_off = self.commit_log.get_min_offset()
            if min_off < 0:
                return -1
            return self.commit_log.pickup_store_timestamp(min_off, 0)
        cq = self.find_consume_queue(topic, queue_id or 0, create=False)
        if cq is None:
            return -1
        unit = cq.get_unit(cq.get_min_offset_in_queue())
        if unit is None:
            return -1
        return self.commit_log.pickup_store_timestamp(unit.phys, unit.size)

    def get_message_store_timestamp(self, topic: str, queue_id: int, cq_offset: int) -> int:
        cq = self.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get_unit(cq_offset) if cq is not None else None
        if unit is None:
            return -1
        return self.commit_log.pickup_store_timestamp(unit.phys, unit.size)

    def look_message_by_offset(self, commit_log_offset: int, size: int = -1) -> MessageExt | None:
        """The message whose record starts at *commit_log_offset*, or None."""
        data = self._record_at(commit_log_offset, size)
        if data is None and self._commit_for(commit_log_offset):
            data = self._record_at(commit_log_offset, size)
        if data is None:
            return None
        try:
            msg = decode_record(data)
        except CorruptRecordError:
            return None
        return msg if msg.commit_log_offset == commit_log_offset else None

    def _record_at(self, offset: int, size: int) -> bytes | None:
        """The readable bytes of the record at *offset* (*size* of them; read from its head when not positive)."""
        if size <= 0:
            head = self.commit_log.get_message(offset, 8)
            if head is None:
                return None
            size, _magic = read_size_and_magic(head, 0)
            if size <= 0:
                return None
        return self.commit_log.get_message(offset, size)

    def _commit_for(self, offset: int) -> bool:
        """Commit the write buffers now when *offset* was appended but is not readable yet; True if it was.

        With a transient store pool an appended record is readable once the commit service has copied it into its
        file: within ``commitIntervalCommitLog`` (200 ms), and only once 4 pages wait unless its thorough interval
        has passed. RocketMQ's lookups miss it meanwhile: a transaction ended at once (as producers do) found no
        half message, and stayed open until the broker's check asked the producer again a minute later."""
        services = self.services
        queue = self.commit_log.mapped_file_queue
        if services is None or services.commit is None or not queue.committed_where <= offset < \
                queue.get_max_wrote_position():  # fmt: skip
            return False
        queue.commit_all()
        return True

    def look_message_by_msg_id(self, msg_id: str) -> MessageExt | None:
        """Find a message by its offset message id (store host + commit-log offset)."""
        _host, offset = decode_offset_message_id(msg_id)
        return self.look_message_by_offset(offset)

    def query_message(self, topic: str, key: str, max_num: int, begin: int = 0,
                      end: int | None = None) -> QueryMessageResult:  # fmt: skip
        """Messages of *topic* whose ``KEYS`` or ``UNIQ_KEY`` hold *key*, in commit-log order (``queryMessage``
        sorts the offsets the index gives)."""
        end = now_ms() if end is None else end
        found = self.index_service.query_offset(topic, key, max_num, begin, end)
        result = QueryMessageResult(
            index_last_update_timestamp=found.index_last_update_timestamp,
            index_last_update_phyoffset=found.index_last_update_phyoffset,
        )
        for phys in sorted(set(found.phy_offsets)):
            msg = self.look_message_by_offset(phys)
            if msg is None or msg.topic != topic:
                continue
            if key == msg.uniq_key or key in msg.key_list():
                result.messages.append(msg)
        return result

    def topics(self) -> list[str]:
        return sorted(self.consume_queue_table)

    def clean_expired_consumer_queue(self) -> int:
        """``cleanExpiredConsumerQueue`` (mqadmin cleanExpiredCQ): destroy the consume queues whose last unit
        points below the commit log's first offset, all of whose messages retention has removed (the delay
        topic's queues stay). Returns how many were destroyed."""
        if self.read_only:
            return 0
        min_phy = self.get_min_phy_offset()
        stale: list[tuple[str, int]] = []
        for topic, queues in list(self.consume_queue_table.items()):
            if topic == RMQ_SYS_SCHEDULE_TOPIC:
                continue
            for queue_id, cq in list(queues.items()):
                if 0 <= cq.max_physic_offset < min_phy:
                    stale.append((topic, queue_id))
        for topic, queue_id in stale:
            with self._cq_lock:
                queues = self.consume_queue_table.get(topic, {})
                cq = queues.pop(queue_id, None)
                if not queues:
                    self.consume_queue_table.pop(topic, None)
            if cq is not None:
                _log.info("cleanExpiredConsumerQueue: %s %d destroyed, below commit-log offset %d", topic, queue_id,
                         min_phy)  # fmt: skip
                cq.destroy()
                self.commit_log.topic_queue_table.pop(f"{topic}-{queue_id}", None)
        return len(stale)

    def clean_unused_topics(self, topics_in_use: set[str]) -> int:
        """``cleanUnusedTopic`` (mqadmin cleanUnusedTopic): the consume queues of every topic not in
        *topics_in_use* (but the delay and transaction-op topics) destroyed. Returns how many."""
        unused = [t for t in list(self.consume_queue_table) if t not in topics_in_use
                  and t not in (RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC)]  # fmt: skip
        return self.delete_topics(unused)

    def delete_topics(self, topics: list[str] | set[str]) -> int:
        """``deleteTopics``: destroy the consume queues of *topics* and forget their next queue offsets
        (a deleted topic created again starts at offset 0). The commit log keeps their records until
        retention removes them. Returns how many consume queues were destroyed."""
        if self.read_only:
            return 0
        destroyed = 0
        for topic in topics:
            with self._cq_lock:
                queues = self.consume_queue_table.pop(topic, None)
            for queue_id, cq in (queues or {}).items():
                cq.destroy()
                self.commit_log.topic_queue_table.pop(f"{topic}-{queue_id}", None)
                destroyed += 1
            topic_dir = self.config.consume_queue_path / topic
            if topic_dir.is_dir() and not any(topic_dir.iterdir()):
                topic_dir.rmdir()  # only when its queues left it empty
        return destroyed
