"""The key index of a store: RocketMQ's ``IndexService``.

Mirrors ``store/index/IndexService.java`` (RocketMQ 4.9; store-format §5, §6,
§11.1). The index is the run of files in ``<store>/index/``, named by their
local creation time ``yyyyMMddHHmmssSSS`` so that name order is creation order
(see :mod:`rocketq.store.index_file` for the layout of one file).

- ``build_index`` indexes one dispatched record under ``<topic>#<UNIQ_KEY>``
  and ``<topic>#<key>`` for each space-separated key (§5.5), always into the
  last file. A full file (indexCount ≥ maxIndexNum) is followed by a new one
  seeded with its end values (§5.3); the full file is then flushed, on a
  thread of its own as in Java, and ``on_file_full(endTimestamp)`` lets the
  store move the checkpoint's indexMsgTimestamp (§6). ``build_index_batch``
  (key strings) and ``build_index_hashed`` (keys already hashed, from the
  bytes) index many records at once with numpy and leave the same bytes.
- Dispatch does not index a record at once: ``defer`` / ``defer_batch`` collect
  its keys and ``build_pending`` indexes them together, once ``DEFER_RECORDS``
  records wait, once the oldest has waited ``DEFER_S`` (``build_pending_if_due``,
  from the reput thread's looks), and before anything reads the index: a query,
  a flush, ``MessageStore.wait_dispatched``. Java indexes each record in its
  ``DispatchRequest``; here the cost of indexing a key falls tenfold from a batch
  of 32 to one of 512 (numpy's fixed costs), and a broker's dispatch turns are
  small. The files get the same bytes, keys in commit-log order; only their
  writing is later by milliseconds, well inside the 3 s by which abnormal
  recovery starts before the checkpoint (dispatch also holds the checkpoint's
  logicsMsgTimestamp back to the oldest waiting key), so a crash loses no key:
  recovery indexes those records again.
- ``query_offset`` walks files from newest to oldest (§5.7).
- ``load`` drops, after an abnormal exit, every file whose endTimestamp is
  newer than the checkpoint's indexMsgTimestamp (§11.1): such a file may lack
  keys, and dispatch indexes those records again.

Locking: ``_write_lock`` serialises writers (dispatch, flush, deletion, close);
``_build_lock`` keeps builds of waiting keys in the order they were collected;
``_files_lock`` guards the file list and is held by queries while they walk
the files, so a query never reads a file that is being deleted. Queries do
not wait for a writer that is only adding keys.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from rocketq.common.errors import StoreError
from rocketq.common.javacompat import java_hashes_after, java_hashes_and_lengths, java_string_hash
from rocketq.common.message import KEY_SEPARATOR, TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE
from rocketq.store.index_file import IndexFile, index_file_size, index_key_hash, index_key_hashes_of

log = logging.getLogger(__name__)


@dataclass(slots=True)
class QueryOffsetResult:
    """``QueryOffsetResult``: candidate offsets (may hold hash collisions) and the index's newest end."""

    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


_ONE_MS = timedelta(milliseconds=1)

#: Records whose keys wait for one build (``defer``): a build of this many costs a tenth per key of one of 32.
DEFER_RECORDS = 512
#: Seconds the oldest waiting record may wait before ``build_pending_if_due`` indexes it.
DEFER_S = 0.05


def time_file_name(t: datetime) -> str:
    """``UtilAll.timeMillisToHumanString``: local time as ``yyyyMMddHHmmssSSS``."""
    return f"{t:%Y%m%d%H%M%S}{t.microsecond // 1000:03d}"


def _parse_time_file_name(name: str) -> datetime | None:
    if len(name) != 17 or not name.isdigit():
        return None
    try:
        return datetime.strptime(name[:14], "%Y%m%d%H%M%S").replace(microsecond=int(name[14:]) * 1000)
    except ValueError:
        return None


class IndexService:
    """All index files of one store."""

    def __init__(self, store_root: Path, max_hash_slot_num: int, max_index_num: int, *,
                 read_only: bool = False, max_msgs_num_batch: int = 64) -> None:  # fmt: skip
        if max_hash_slot_num <= 0:
            raise StoreError(f"maxHashSlotNum must be positive, got {max_hash_slot_num}")
        if max_index_num < 2:
            # Entry 0 is never used, so a file needs two entries to hold one key.
            raise StoreError(f"maxIndexNum must be at least 2, got {max_index_num}")
        self.store_path = Path(store_root) / "index"
        self.hash_slot_num = max_hash_slot_num
        self.index_num = max_index_num
        self.read_only = read_only
        self.max_msgs_num_batch = max_msgs_num_batch
        self.files: list[IndexFile] = []
        self.on_file_full: Callable[[int], None] | None = None
        self._write_lock = threading.Lock()
        self._files_lock = threading.Lock()
        self._prefix_hashes: dict[str, int] = {}  # topic -> String.hashCode of "topic#"
        # Records whose keys wait for a build (module docstring), one list per column of build_index_batch.
        self._pending_lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._pending: tuple[list[str], list[int], list[int], list[int], list[str | None], list[str | None]] = (
            [], [], [], [], [], [])  # fmt: skip
        self._waiting = 0  # records deferred and not yet in the files (a build under way included)
        self._pending_since = 0.0  # monotonic time the oldest waiting record came
        #: Store time of the oldest waiting record (0: none wait).
        self.pending_oldest_timestamp = 0
        # Flushes a file that just became full, then tells on_file_full (_last_writable_file).
        self._full_flusher: threading.Thread | None = None

    # --- loading ------------------------------------------------------------------
    def load(self, last_exit_ok: bool, index_msg_timestamp: int) -> bool:
        """Open the index files in name order (§11.1).

        After an abnormal exit a file whose endTimestamp > *index_msg_timestamp*
        is destroyed, to be built again (a read-only service reads it as it is). A file whose name
        is not a number is skipped, as Java does; a file of the wrong size
        raises :class:`StoreError`, since the configured slot and entry counts
        must be those the store was written with.
        """
        if not self.store_path.is_dir():
            return True
        size = index_file_size(self.hash_slot_num, self.index_num)
        loaded: list[IndexFile] = []
        for p in sorted(self.store_path.iterdir(), key=lambda q: q.name):
            if not p.is_file():
                continue
            if not p.name.isdigit():
                log.warning("skipping %s: not an index file name", p)
                continue
            actual = p.stat().st_size
            if actual == 0:
                # Created but never sized: a crash in the middle of making it. It holds nothing.
                log.info("index file %s is empty (made when the broker died): dropped", p.name)
                if not self.read_only:
                    p.unlink()
                continue
            if actual != size:
                for f in loaded:
                    f.close()
                raise StoreError(
                    f"{p}: {actual} bytes, but index files of maxHashSlotNum={self.hash_slot_num} and "
                    f"maxIndexNum={self.index_num} are {size} bytes (were these settings changed?)"
                )
            f = IndexFile(p, self.hash_slot_num, self.index_num, read_only=self.read_only)
            if not last_exit_ok and f.end_timestamp > index_msg_timestamp and not self.read_only:
                log.info("index file %s ends after the checkpoint (%d > %d): dropped",
                         p.name, f.end_timestamp, index_msg_timestamp)  # fmt: skip
                f.destroy()
                continue
            # (a read-only service, which cannot build the file again, reads it as it is: the newest messages of
            # a store left by a crash are in it, and a query checks each message it finds against its key)
            loaded.append(f)
        with self._files_lock:
            self.files = loaded
        return True

    # --- deferred writing ------------------------------------------------------------
    def defer(self, topic: str, commit_log_offset: int, store_timestamp: int, sys_flag: int,
              uniq_key: str | None, keys: str | None) -> None:  # fmt: skip
        """Index one dispatched record with the next build (:meth:`build_index` in effect)."""
        with self._pending_lock:
            topics, phys, times, flags, uniq_keys, key_lists = self._pending
            if not self._waiting:
                self._pending_since = time.monotonic()
                self.pending_oldest_timestamp = store_timestamp
            topics.append(topic)
            phys.append(commit_log_offset)
            times.append(store_timestamp)
            flags.append(sys_flag)
            uniq_keys.append(uniq_key)
            key_lists.append(keys)
            self._waiting += 1
            full = len(phys) >= DEFER_RECORDS
        if full:
            self.build_pending()

    def defer_batch(self, topics: Sequence[str], phys: Sequence[int], store_timestamps: Sequence[int],
                    sys_flags: Sequence[int], uniq_keys: Sequence[str | None],
                    keys: Sequence[str | None]) -> None:  # fmt: skip
        """Index many dispatched records, columns in commit-log order, with the next build (:meth:`build_index_batch`
        in effect)."""
        if not len(phys):
            return
        with self._pending_lock:
            pending = self._pending
            if not self._waiting:
                self._pending_since = time.monotonic()
                self.pending_oldest_timestamp = int(store_timestamps[0])
            for column, values in zip(pending, (topics, phys, store_timestamps, sys_flags, uniq_keys, keys),
                                      strict=True):  # fmt: skip
                column.extend(values)
            self._waiting += len(phys)
            full = len(pending[1]) >= DEFER_RECORDS
        if full:
            self.build_pending()

    @property
    def pending_count(self) -> int:
        """Records whose keys are not in the index yet (waiting, or in a build under way)."""
        return self._waiting

    def build_pending(self) -> None:
        """Index every record that waits (in the order they came); returns once a build under way is done too."""
        if not self._waiting:
            return
        with self._build_lock:
            with self._pending_lock:
                pending = self._pending
                self._pending = ([], [], [], [], [], [])
            try:
                if pending[1]:
                    self.build_index_batch(*pending)
            finally:
                # Counted out once the keys are in: until then readers wait and the checkpoint does not pass them.
                with self._pending_lock:
                    self._waiting -= len(pending[1])
                    waiting = self._pending
                    self.pending_oldest_timestamp = int(waiting[2][0]) if waiting[1] else 0

    def build_pending_if_due(self) -> None:
        """:meth:`build_pending` when the oldest waiting record has waited ``DEFER_S`` seconds."""
        if self._waiting and time.monotonic() - self._pending_since >= DEFER_S:
            self.build_pending()

    # --- writing ------------------------------------------------------------------
    def build_index(self, topic: str, commit_log_offset: int, store_timestamp: int, sys_flag: int,
                    uniq_key: str | None, keys: str | None) -> None:  # fmt: skip
        """Index one dispatched record (``IndexService.buildIndex``, §5.5)."""
        if self.read_only:
            raise StoreError("store is open read-only")
        with self._write_lock:
            # As in Java the last file is looked up (and a full one replaced) before any check.
            f = self._last_writable_file()
            if commit_log_offset < f.end_phy_offset:
                return  # already indexed (dispatch replayed after a restart)
            if sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
                return
            prefix = topic + "#"
            if uniq_key is not None:
                key = prefix + uniq_key
                if not f.put_key(key, commit_log_offset, store_timestamp):
                    f = self._last_writable_file()
                    f.put_key(key, commit_log_offset, store_timestamp)
            if keys:
                for token in keys.split(KEY_SEPARATOR):
                    if token:
                        key = prefix + token
                        if not f.put_key(key, commit_log_offset, store_timestamp):
                            f = self._last_writable_file()
                            f.put_key(key, commit_log_offset, store_timestamp)

    def build_index_batch(self, topics: Sequence[str], phys: Sequence[int], store_timestamps: Sequence[int],
                          sys_flags: Sequence[int], uniq_keys: Sequence[str | None],
                          keys: Sequence[str | None]) -> None:  # fmt: skip
        """Index many dispatched records, given column by column in commit-log order, with the
        rules of :meth:`build_index` (the files end up byte for byte as with one call per record).

        The keys are hashed together (:func:`java_hashes_and_lengths`) and handed to
        :meth:`build_index_hashed`.
        """
        n = len(phys)
        if n == 0:
            return
        # UNIQ_KEYs first then KEYS tokens, each with the number of its record (build_index_hashed
        # puts them in build_index's order). The common cases (every record has both) stay in C.
        if None in uniq_keys:
            uniq_owners = [i for i, u in enumerate(uniq_keys) if u is not None]
            strings = [uniq_keys[i] for i in uniq_owners]
            owners = np.asarray(uniq_owners, dtype=np.int64)
        else:
            strings = list(uniq_keys)  # type: ignore[arg-type]
            owners = np.arange(n, dtype=np.int64)
        if all(keys):
            tokens: list[str] = list(keys)  # type: ignore[arg-type]
            token_owners = np.arange(n, dtype=np.int64)
        else:
            keyed = [i for i, k in enumerate(keys) if k]
            tokens = [keys[i] for i in keyed]  # type: ignore[misc]
            token_owners = np.asarray(keyed, dtype=np.int64)
        if KEY_SEPARATOR in "\0".join(tokens):
            split_owners: list[int] = []
            split_tokens: list[str] = []
            for i, k in zip(token_owners.tolist(), tokens, strict=True):
                for token in k.split(KEY_SEPARATOR):
                    if token:
                        split_owners.append(i)
                        split_tokens.append(token)
            tokens = split_tokens
            token_owners = np.asarray(split_owners, dtype=np.int64)
        hashes, lengths = java_hashes_and_lengths(strings + tokens)
        self.build_index_hashed(topics, phys, store_timestamps, sys_flags, np.concatenate((owners, token_owners)),
                                hashes, lengths)  # fmt: skip

    def build_index_hashed(self, topics: Sequence[str], phys: Sequence[int], store_timestamps: Sequence[int],
                           sys_flags: Sequence[int], owners: np.ndarray, hashes: np.ndarray,
                           lengths: np.ndarray) -> None:  # fmt: skip
        """:meth:`build_index_batch` for keys given by hash: the key values of the records (their
        ``UNIQ_KEY`` and ``KEYS`` tokens, without ``topic#``) as the number of the record each belongs
        to (*owners*; for one record the ``UNIQ_KEY`` before its tokens, tokens in order), its
        ``String.hashCode`` (*hashes*, unsigned) and ``String.length()`` (*lengths*).

        ``topic#`` is hashed once per topic and joined to each value's hash
        (:func:`java_hashes_after`); the keys go into the files a file at a time
        (:meth:`IndexFile.put_keys`) in the order :meth:`build_index` adds them.
        """
        if self.read_only:
            raise StoreError("store is open read-only")
        if len(owners) == 0:
            if len(phys):
                with self._write_lock:
                    self._last_writable_file()  # Java looks up (and replaces a full) last file for every record
            return
        order = np.argsort(owners, kind="stable")  # by record; UNIQ_KEY first, tokens in order
        phy_arr = np.asarray(phys, dtype=np.int64)
        flag_arr = np.asarray(sys_flags, dtype=np.int64)
        key_hashes = index_key_hashes_of(java_hashes_after(self._topic_prefix_hashes(topics, owners), hashes,
                                                           lengths))  # fmt: skip
        with self._write_lock:
            f = self._last_writable_file()
            # Offsets only grow within a batch, so the "already indexed" test of build_index
            # needs the end offset as it was when the batch began.
            skip = (phy_arr < f.end_phy_offset) | ((flag_arr & TRANSACTION_MASK) == TRANSACTION_ROLLBACK_TYPE)
            if bool(skip.any()):
                order = order[~skip[owners[order]]]
                if len(order) == 0:
                    return
            owners = owners[order]
            key_hashes = key_hashes[order]
            key_phys = phy_arr[owners]
            key_times = np.asarray(store_timestamps, dtype=np.int64)[owners]
            done = 0
            total = len(key_hashes)
            while done < total:
                done += f.put_keys(key_hashes[done:], key_phys[done:], key_times[done:])
                if done < total:
                    f = self._last_writable_file()
            if int(owners[-1]) < len(phys) - 1:
                # A record after the last key's: Java's buildIndex for it replaces a file the keys just
                # filled by a new, empty one.
                self._last_writable_file()

    def _topic_prefix_hashes(self, topics: Sequence[str], owners: np.ndarray) -> np.ndarray:
        """``String.hashCode`` of ``topic#`` for the record of each key (uint64)."""
        cache = self._prefix_hashes
        first = topics[0]
        if topics.count(first) == len(topics):  # the usual batch: one topic
            h = cache.get(first)
            if h is None:
                h = cache[first] = java_string_hash(first + "#") & 0xFFFFFFFF
            return np.full(len(owners), h, dtype=np.uint64)
        per_record = []
        for t in topics:
            h = cache.get(t)
            if h is None:
                h = java_string_hash(t + "#") & 0xFFFFFFFF
                if len(cache) < 4096:
                    cache[t] = h
            per_record.append(h)
        return np.asarray(per_record, dtype=np.uint64)[owners]

    def _last_writable_file(self) -> IndexFile:
        """The last file, or a new one when there is none or it is full (``getAndCreateLastIndexFile``)."""
        files = self.files
        prev = files[-1] if files else None
        if prev is not None and not prev.is_write_full():
            return prev
        end_phy, end_ts = (prev.end_phy_offset, prev.end_timestamp) if prev is not None else (0, 0)
        f = IndexFile.create(self.store_path / self._new_file_name(), self.hash_slot_num, self.index_num,
                             end_phy, end_ts)  # fmt: skip
        with self._files_lock:
            self.files.append(f)
        if prev is not None:
            # On a thread of its own, as Java does: the msync of a full file (hundreds of MB, some still dirty)
            # can take seconds, and whoever builds the index here may be the broker's event loop.
            self.wait_full_flushed()
            flusher = threading.Thread(target=self._flush_full_file, args=(prev, end_ts), name="IndexFileFlush",
                                       daemon=True)  # fmt: skip
            self._full_flusher = flusher
            flusher.start()
        return f

    def _flush_full_file(self, f: IndexFile, end_ts: int) -> None:
        """Make a full file durable, then let the checkpoint's indexMsgTimestamp move to its end (in that order:
        after a crash, recovery keeps the files that end by that time)."""
        try:
            f.flush()
        except (StoreError, OSError, ValueError) as e:  # the checkpoint then stays where it was
            log.error("cannot flush the full index file %s: %s", f.name, e)
            return
        if end_ts > 0 and self.on_file_full is not None:
            self.on_file_full(end_ts)

    def wait_full_flushed(self) -> None:
        """Return once the flush of the last file that became full (if any) is done."""
        flusher = self._full_flusher
        if flusher is not None:
            flusher.join()
            self._full_flusher = None

    def _new_file_name(self) -> str:
        """Local time now, or 1 ms after the last file's time if that is not earlier; then unique.

        Java would reuse a name created in the same millisecond and could sort a new file
        before older ones after a clock step back; a later name keeps name order = creation order.
        """
        t = datetime.now()
        if self.files:
            last = _parse_time_file_name(self.files[-1].name)
            if last is not None and t <= last:
                t = last + _ONE_MS
        name = time_file_name(t)
        while (self.store_path / name).exists():
            t += _ONE_MS
            name = time_file_name(t)
        return name

    # --- querying -----------------------------------------------------------------
    def query_offset(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """Offsets of records indexed under ``<topic>#<key>`` stored in [begin, end] (§5.7).

        At most ``min(max_num, max_msgs_num_batch)`` offsets, newest first; they can
        include records of other keys with the same hash.
        """
        if self._waiting:
            self.build_pending()
        max_num = min(max_num, self.max_msgs_num_batch)
        key_hash = index_key_hash(topic + "#" + key)
        result = QueryOffsetResult()
        phy_offsets = result.phy_offsets
        with self._files_lock:
            files = self.files
            if not files:
                return result
            last = files[-1]
            result.index_last_update_timestamp = last.end_timestamp
            result.index_last_update_phyoffset = last.end_phy_offset
            for f in reversed(files):
                if f.is_time_matched(begin, end):
                    f.select_phy_offsets_by_hash(phy_offsets, key_hash, max_num, begin, end)
                if f.begin_timestamp < begin or len(phy_offsets) >= max_num:
                    break
        return result

    # --- deletion and life cycle ---------------------------------------------------------
    def delete_expired_file(self, min_phy_offset: int) -> int:
        """Delete the leading files that end before *min_phy_offset*, never the last one.

        Returns how many were deleted (``IndexService.deleteExpiredFile``).
        """
        if self.read_only:
            raise StoreError("store is open read-only")
        with self._write_lock, self._files_lock:
            self.wait_full_flushed()  # the flusher takes no lock: joined here, no new one can start
            files = self.files
            expired = 0
            while expired < len(files) - 1 and files[expired].end_phy_offset < min_phy_offset:
                expired += 1
            for f in files[:expired]:
                log.info("deleting expired index file %s (ends at %d < %d)", f.name, f.end_phy_offset,
                         min_phy_offset)  # fmt: skip
                f.destroy()
            self.files = files[expired:]
            return expired

    def flush(self) -> None:
        """Index what waits, then flush every file (holding off writers, not queries, while msync runs)."""
        if not self.read_only:
            self.build_pending()
        with self._write_lock:
            self.wait_full_flushed()
            for f in list(self.files):
                f.flush()

    def close(self) -> None:
        """Index what waits, flush and unmap every file."""
        if not self.read_only:
            self.build_pending()
        with self._write_lock, self._files_lock:
            self.wait_full_flushed()
            for f in self.files:
                f.flush()
                f.close()
            self.files = []

    def destroy(self) -> None:
        """Delete every index file."""
        with self._write_lock, self._files_lock:
            self.wait_full_flushed()
            for f in self.files:
                f.destroy()
            self.files = []
