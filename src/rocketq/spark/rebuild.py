"""``rocketq spark rebuild DIR``: every consume queue and index file rebuilt from the commit log, in parallel.

What the store's dispatch (``ReputMessageService`` → ``ConsumeQueue.putMessagePositionInfo``
and ``IndexService.buildIndex``, store-format §4.5, §5.5) writes when it
follows the commit log from its first record, done as two Spark stages:

1. **decode**, one task per commit-log file (or ``maxPartitionBytes`` range of
   one): the records' dispatch fields are decoded in bulk
   (:class:`~rocketq.spark.record_decoder.RecordBlock`), tag codes computed as
   ``CommitLog.tags_code_of`` does, index keys hashed as
   ``IndexService.buildIndex`` orders them; the task writes its consume-queue
   units (grouped by queue, commit-log order kept) and index entries to a
   staging directory inside the store;
2. **write**, one task per group of consume queues and one per index file:
   the units of a queue, gathered from every decode task in commit-log order,
   go through the store's own :class:`~rocketq.store.consume_queue.ConsumeQueue`;
   the entries of index file *k* (the *k*-th run of ``maxIndexNum - 1``
   keys) through :class:`~rocketq.store.index_file.IndexFile`, seeded with the
   previous file's end values as ``getAndCreateLastIndexFile`` seeds it.

The result is byte for byte what the store's dispatch writes (index file names
are creation times, so they differ; contents do not), including its quirks: a
store with records but no keys has one empty index file, and a last index file
filled exactly is followed by an empty one when any record comes after the one
whose key filled it (Java's ``buildIndex`` looks the last file up for every
record).

The new files are built under ``DIR/.rebuild-<id>/`` and swapped in for
``consumequeue/`` and ``index/`` only when every task has succeeded; the
store's ``lock`` is held meanwhile, so a broker cannot run on it. The
checkpoint is left as it is. A corrupt record fails the rebuild with its
offset (``rocketq store verify`` tells more).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.common.errors import StoreError
from rocketq.common.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK, TRANSACTION_NOT_TYPE
from rocketq.spark.commit_log_walk import END_BOUND, END_ZEROS
from rocketq.spark.options import ScanOptions
from rocketq.spark.record_decoder import CommitLogFile, RecordBlock
from rocketq.spark.store_scan import (
    CommitLogRange,
    Damage,
    commit_log_positions,
    commit_log_ranges,
    list_data_files,
    record_chunks,
)
from rocketq.store.commit_log import CommitLog
from rocketq.store.consume_queue import ConsumeQueue
from rocketq.store.index_file import IndexFile
from rocketq.store.index_service import time_file_name
from rocketq.store.read_only import readable_end
from rocketq.store.store_config import MessageStoreConfig
from rocketq.store.store_lock import StoreLock

_DECODE_ROWS = 65536
_UNIT_SCHEMA = pa.schema([("topic", pa.string()), ("queueId", pa.int32()), ("phys", pa.int64()),
                          ("size", pa.int32()), ("tags", pa.int64()), ("queueOffset", pa.int64())])  # fmt: skip
_KEY_DTYPE = np.dtype([("hash", "<i8"), ("phys", "<i8"), ("time", "<i8")])


# ============================================================================ tasks


@dataclass(frozen=True, slots=True)
class DecodeTask:
    no: int
    range: CommitLogRange
    staging: str
    config: MessageStoreConfig


@dataclass(slots=True)
class DecodeResult:
    """What a decode task found: records (all kinds), units per queue (row ranges of its unit file), keys."""

    no: int
    records: int
    stop: str
    queues: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    keys: int = 0
    last_key_record: int = -1  # index (within the task) of the record whose key is the task's last


def _units_path(staging: str, no: int) -> str:
    return os.path.join(staging, "parts", f"{no:06d}.units.arrow")


def _keys_path(staging: str, no: int) -> str:
    return os.path.join(staging, "parts", f"{no:06d}.keys.npy")


def decode_part(task: DecodeTask) -> DecodeResult:
    """Stage 1 (an executor): the dispatch fields of one commit-log range, to the staging directory."""
    f = CommitLogFile(task.range.file.path)
    damage = Damage(ScanOptions(path=task.staging), task.range)
    schedule_code = CommitLog(task.config, read_only=True).tags_code_of
    units: list[pa.RecordBatch] = []
    keys: list[np.ndarray] = []
    records = 0
    last_key_record = -1
    ended: dict[str, str] = {}
    try:
        for positions in commit_log_positions(f, task.range, damage, ended):
            sizes = np.diff(np.append(positions, positions[-1]))
            for sl in record_chunks(positions, sizes, _DECODE_ROWS):
                blk = RecordBlock(f, positions[sl])
                damage.add(blk.corrupt())
                tt = blk.sys_flag & TRANSACTION_MASK
                to_queue = np.flatnonzero((tt == TRANSACTION_NOT_TYPE) | (tt == TRANSACTION_COMMIT_TYPE))
                codes = blk.tag_codes(schedule_code)
                idx = pa.array(to_queue)
                units.append(pa.RecordBatch.from_arrays([
                    blk.topics().take(idx), pa.array(blk.queue_id[to_queue]), pa.array(blk.phys[to_queue]),
                    pa.array(blk.total[to_queue].astype(np.int32)), pa.array(codes[to_queue]),
                    pa.array(blk.queue_offset[to_queue]),
                ], schema=_UNIT_SCHEMA))  # fmt: skip
                h, phys, times, rows = blk.index_keys()
                if len(h):
                    entries = np.empty(len(h), dtype=_KEY_DTYPE)
                    entries["hash"], entries["phys"], entries["time"] = h, phys, times
                    keys.append(entries)
                    last_key_record = records + int(rows[-1])
                records += blk.n
    finally:
        f.close()
    table = pa.Table.from_batches(units, schema=_UNIT_SCHEMA)
    order = pc.sort_indices(table, sort_keys=[("topic", "ascending"), ("queueId", "ascending")])
    table = table.take(order)  # stable: commit-log order within each queue
    result = DecodeResult(task.no, records, ended.get("stop", END_BOUND), last_key_record=last_key_record)
    n = table.num_rows
    if n:
        enc = pc.dictionary_encode(table.column("topic").combine_chunks())
        codes = enc.indices.to_numpy()
        names = enc.dictionary.to_pylist()
        qid = table.column("queueId").to_numpy()
        change = np.flatnonzero((codes[1:] != codes[:-1]) | (qid[1:] != qid[:-1])) + 1
        for s, e in zip(np.concatenate(([0], change)).tolist(), np.concatenate((change, [n])).tolist(), strict=True):
            result.queues[(names[codes[s]], int(qid[s]))] = (s, e)
    # The driver made parts/ (no makedirs here: a task of a job that failed must not make the directory again).
    with pa.OSFile(_units_path(task.staging, task.no), "wb") as sink, pa.ipc.new_file(sink, _UNIT_SCHEMA) as w:
        w.write_table(table)
    all_keys = np.concatenate(keys) if keys else np.empty(0, dtype=_KEY_DTYPE)
    np.save(_keys_path(task.staging, task.no), all_keys)
    result.keys = len(all_keys)
    return result


@dataclass(frozen=True, slots=True)
class QueueTask:
    """Stage 2: write these consume queues; each from row ranges of decode tasks' unit files."""

    staging: str
    file_size: int
    queues: tuple[tuple[str, int, tuple[tuple[int, int, int], ...]], ...]  # topic, qid, ((no, start, end), ...)


@dataclass(frozen=True, slots=True)
class IndexTask:
    """Stage 2: write index file *name* from global keys [first, last), seeded with (seed_phys, seed_time)."""

    staging: str
    name: str
    slots: int
    entries: int
    first: int
    last: int
    seed_phys: int
    seed_time: int
    parts: tuple[tuple[int, int, int], ...]  # (decode task no, first global key, key count)


def _open_units(staging: str, no: int) -> pa.Table:
    with pa.memory_map(_units_path(staging, no), "r") as source:
        return pa.ipc.open_file(source).read_all()


def write_queues(task: QueueTask) -> int:
    """Stage 2: consume queues through the store's own ``ConsumeQueue``; returns the units written."""
    tables: dict[int, pa.Table] = {}
    root = Path(task.staging) / "consumequeue"
    written = 0
    for topic, qid, slices in task.queues:
        cols: dict[str, list[np.ndarray]] = {"phys": [], "size": [], "tags": [], "queueOffset": []}
        for no, start, end in slices:
            if no not in tables:
                tables[no] = _open_units(task.staging, no)
            part = tables[no].slice(start, end - start)
            for name, parts in cols.items():
                parts.append(part.column(name).to_numpy())
        phys, size, tags, qoff = (np.concatenate(cols[k]) for k in ("phys", "size", "tags", "queueOffset"))
        cq = ConsumeQueue(topic, qid, root, task.file_size)
        try:
            cq.put_units(phys, size.astype(np.int64), tags, qoff)
            cq.flush()
        finally:
            cq.close()
        written += len(phys)
    return written


def write_index(task: IndexTask) -> int:
    """Stage 2: one index file through the store's own ``IndexFile``; returns the keys written."""
    path = Path(task.staging) / "index" / task.name
    f = IndexFile.create(path, task.slots, task.entries, task.seed_phys, task.seed_time)
    try:
        chunks = []
        for no, first, count in task.parts:
            lo, hi = max(task.first, first), min(task.last, first + count)
            if lo < hi:
                keys = np.load(_keys_path(task.staging, no), mmap_mode="r")
                chunks.append(np.asarray(keys[lo - first : hi - first]))
        if chunks:
            keys = np.concatenate(chunks)
            done = f.put_keys(keys["hash"].astype(np.int64), keys["phys"].astype(np.int64),
                              keys["time"].astype(np.int64))  # fmt: skip
            if done != len(keys):
                raise StoreError(f"index file {task.name}: {done} of {len(keys)} keys fit")
        f.flush()
    finally:
        f.close()
    return task.last - task.first


def run_stage2(task: QueueTask | IndexTask) -> int:
    return write_queues(task) if isinstance(task, QueueTask) else write_index(task)


# ============================================================================ the job


@dataclass(slots=True)
class RebuildReport:
    store: str
    records: int = 0
    queues: int = 0
    units: int = 0
    index_files: int = 0
    keys: int = 0
    commit_log_ranges: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [
            f"rebuilt {self.store} from {self.records} records in {self.commit_log_ranges} commit-log ranges "
            f"in {self.seconds:.1f} s",
            f"  consume queues  {self.queues} queues, {self.units} units",
            f"  index           {self.index_files} files, {self.keys} keys",
            *(f"  note: {n}" for n in self.notes),
        ]


def plan_decode(config: MessageStoreConfig, staging: str, max_partition_bytes: int,
                log_end: int | None = None) -> list[DecodeTask]:  # fmt: skip
    files = list_data_files(config.commit_log_path)
    ranges = commit_log_ranges(files, max_partition_bytes, log_end)
    return [DecodeTask(i, rng, staging, config) for i, rng in enumerate(ranges)]


def plan_queues(results: list[DecodeResult], staging: str, file_size: int, groups: int) -> list[QueueTask]:
    """Queues spread over *groups* tasks by unit count (largest first onto the lightest task)."""
    slices: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for r in results:  # decode-task order is commit-log order
        for key, (start, end) in r.queues.items():
            slices.setdefault(key, []).append((r.no, start, end))
    weight = {k: sum(e - s for _, s, e in v) for k, v in slices.items()}
    bins: list[list[tuple[str, int, tuple[tuple[int, int, int], ...]]]] = [[] for _ in range(max(1, groups))]
    load = [0] * len(bins)
    for key in sorted(slices, key=lambda k: -weight[k]):
        i = load.index(min(load))
        bins[i].append((key[0], key[1], tuple(slices[key])))
        load[i] += weight[key]
    return [QueueTask(staging, file_size, tuple(sorted(b))) for b in bins if b]


def plan_index(results: list[DecodeResult], tasks: list[DecodeTask], staging: str,
               config: MessageStoreConfig) -> list[IndexTask]:  # fmt: skip
    """Index files: the k-th holds keys [k(N-1), (k+1)(N-1)) (entry 0 of a file is never used)."""
    per_file = config.max_index_num - 1
    parts = []
    total = 0
    for r in results:
        parts.append((r.no, total, r.keys))
        total += r.keys
    records = sum(r.records for r in results)
    if records == 0:
        return []
    n_files = max(1, -(-total // per_file))
    if total and total % per_file == 0 and _record_after_last_key(results):
        n_files += 1  # the next record finds the last file full and creates one more
    keys_at = _key_reader(staging, parts)
    now = _dt.datetime.now()
    out = []
    for k in range(n_files):
        first, last = min(k * per_file, total), min((k + 1) * per_file, total)
        seed_phys = seed_time = 0
        if k > 0:
            seed_phys, seed_time = keys_at(k * per_file - 1)
        name = time_file_name(now + _dt.timedelta(milliseconds=k))
        out.append(IndexTask(staging, name, config.max_hash_slot_num, config.max_index_num, first, last,
                             seed_phys, seed_time, tuple(parts)))  # fmt: skip
    return out


def _key_reader(staging: str, parts: list[tuple[int, int, int]]) -> Any:
    def at(g: int) -> tuple[int, int]:
        for no, first, count in parts:
            if first <= g < first + count:
                e = np.load(_keys_path(staging, no), mmap_mode="r")[g - first]
                return int(e["phys"]), int(e["time"])
        raise IndexError(g)

    return at


def _record_after_last_key(results: list[DecodeResult]) -> bool:
    """Whether any record follows the one with the last key: Java's ``buildIndex`` for it looks the last file up
    and, finding it full, creates an empty one (results are in commit-log order)."""
    last = max((r for r in results if r.last_key_record >= 0), key=lambda r: r.no)
    if last.records > last.last_key_record + 1:
        return True
    return any(r.records > 0 for r in results if r.no > last.no)


def _check_contiguous(results: list[DecodeResult], tasks: list[DecodeTask]) -> None:
    """Dispatch stops where the data ends (zeros instead of a record): nothing may follow that."""
    ended_at: DecodeTask | None = None
    for t, r in zip(tasks, results, strict=True):
        if ended_at is not None and r.records:
            raise StoreError(
                f"commit-log data ends at offset {ended_at.range.file.start} + {ended_at.range.end} (zeros) but "
                f"records follow in {Path(t.range.file.path).name}: run 'rocketq store verify'"
            )
        if r.stop == END_ZEROS and ended_at is None:
            ended_at = t


def rebuild(spark: Any, config: MessageStoreConfig, *, progress: bool = False,
            max_partition_bytes: int = 128 << 20) -> RebuildReport:  # fmt: skip
    """Rebuild ``consumequeue/`` and ``index/`` of the store *config* describes (see the module doc)."""
    start = time.perf_counter()
    root = config.root
    report = RebuildReport(str(root))
    log_end = readable_end(config)  # asked before the lock is taken here: it says whether another holds it
    if log_end is not None:
        report.notes.append(f"the store was not shut down cleanly (abort file): the commit log is read up to offset "
                            f"{log_end}, where recovery ends it")  # fmt: skip
    from rocketq.spark.session import JobProgress

    sc = spark.sparkContext
    with StoreLock(root):
        # What an interrupted rebuild left (the lock says none runs now): its files are of no use.
        for stale in root.glob(".rebuild-*"):
            shutil.rmtree(stale, ignore_errors=True)
        staging = root / f".rebuild-{uuid.uuid4().hex[:12]}"
        (staging / "parts").mkdir(parents=True)
        try:
            tasks = plan_decode(config, str(staging), max_partition_bytes, log_end)
            report.commit_log_ranges = len(tasks)
            results: list[DecodeResult] = []
            if tasks:
                with JobProgress(spark, "rebuild: decode", len(tasks), enabled=progress):
                    results = sc.parallelize(tasks, len(tasks)).map(decode_part).collect()
            results.sort(key=lambda r: r.no)
            _check_contiguous(results, tasks)
            report.records = sum(r.records for r in results)
            groups = max(1, sc.defaultParallelism * 2)
            queue_tasks = plan_queues(results, str(staging), config.mapped_file_size_consume_queue, groups)
            index_tasks = plan_index(results, tasks, str(staging), config) if config.message_index_enable else []
            stage2: list[QueueTask | IndexTask] = [*index_tasks, *queue_tasks]
            (staging / "consumequeue").mkdir()
            (staging / "index").mkdir()
            if stage2:
                with JobProgress(spark, "rebuild: write", len(stage2), enabled=progress):
                    sc.parallelize(stage2, len(stage2)).map(run_stage2).collect()
            report.queues = sum(len(t.queues) for t in queue_tasks)
            report.units = sum(e - s for t in queue_tasks for _, _, sl in t.queues for _, s, e in sl)
            report.index_files = len(index_tasks)
            report.keys = sum(t.last - t.first for t in index_tasks)
            _swap(root, staging, config, config.message_index_enable)
        except BaseException:
            # A failed job's other tasks go on until Spark kills them, writing into the staging directory: it is
            # removed once they are gone, or they would make parts of it again.
            _wait_tasks_gone(sc)
            raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    report.seconds = time.perf_counter() - start
    return report


def _wait_tasks_gone(sc: Any, timeout: float = 30.0) -> None:
    """Wait (at most *timeout* seconds) until no executor runs a task (Spark's ``SparkExecutorInfo``)."""
    deadline = time.monotonic() + timeout
    with contextlib.suppress(Exception):  # a session stopping, a cluster manager gone: nothing to wait for
        tracker = sc._jsc.sc().statusTracker()
        while time.monotonic() < deadline:
            if not sum(info.numRunningTasks() for info in tracker.getExecutorInfos()):
                return
            time.sleep(0.1)


def _swap(root: Path, staging: Path, config: MessageStoreConfig, index: bool) -> None:
    """Put the new directories in place of the old ones (renames within the store directory)."""
    pairs = [(config.consume_queue_path, staging / "consumequeue")]
    if index:
        pairs.append((config.index_path, staging / "index"))
    for final, new in pairs:
        if final.exists():
            final.rename(staging / f"old-{final.name}")
        new.rename(final)
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
