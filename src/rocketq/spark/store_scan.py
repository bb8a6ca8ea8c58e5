"""Reading a store directory in parallel pieces: the batch side of the ``rocketq`` data source.

Mirrors what ``DefaultMessageStore`` reads (store-format §1, §3, §4), split for
Spark and free of pyspark itself:

- a **full scan** reads the commit log, one :class:`CommitLogRange` per file
  (``commitlog/<20-digit offset>``), or per ``maxPartitionBytes`` of a file
  larger than that: a range that starts inside a file begins at the first
  record found there (:func:`rocketq.spark.commit_log_walk.find_record_start`);
- a read **restricted to topics, queues or offsets** goes through the consume
  queues (``consumequeue/<topic>/<queueId>/``), one :class:`QueueRange` per
  queue-offset range: the 20-byte units give the records' positions and
  sizes, so nothing is walked, and each record is checked against its unit;
- both decode with :class:`rocketq.spark.record_decoder.RecordBlock` and yield
  ``pyarrow.RecordBatch``\\ es of the data source's schema.

Planning (:func:`plan_scan`) runs on the driver and reads only directory
listings and consume-queue files; partitions carry paths and numbers, never
open files. Corrupt records fail the read with their commit-log offset, or
with ``mode=PERMISSIVE`` are skipped and counted (logged on the executor and,
with ``corruptRecordsPath``, written there as JSON: :func:`corrupt_report`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.common.codec import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
from rocketq.common.errors import CorruptRecordError, StoreError
from rocketq.spark.commit_log_walk import END_BOUND, END_CORRUPT, find_record_start, walk_records
from rocketq.spark.options import EARLIEST, LATEST, OptionError, ScanOptions
from rocketq.spark.record_decoder import CommitLogFile, Corrupt, RecordBlock
from rocketq.store.consume_queue import CQ_DTYPE, CQ_STORE_UNIT_SIZE, FILLER_SIZE
from rocketq.store.read_only import readable_end
from rocketq.store.store_config import MessageStoreConfig
from rocketq.store.store_settings import store_directory, store_settings

log = logging.getLogger("rocketq.spark")
_LEN_MAGIC = struct.Struct(">ii")
_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
MAX_BATCH_BYTES = 64 << 20
#: What a corrupt record's error adds (the command-line jobs say it in their own terms).
PERMISSIVE_HINT: Final = "read with option mode=PERMISSIVE to skip corrupt records"
_SHOWN_OFFSETS = 100


# ============================================================================ the store's files


@dataclass(frozen=True, slots=True)
class DataFile:
    """A file of a mapped-file queue: start offset (its name), path, length."""

    start: int
    path: str
    size: int


def list_data_files(directory: Path) -> list[DataFile]:
    """Non-empty files named by a number, in offset order (``MappedFileQueue.load``)."""
    if not directory.is_dir():
        return []
    out = []
    for p in directory.iterdir():
        if p.is_file() and p.name.isdigit():
            size = p.stat().st_size
            if size > 0:
                out.append(DataFile(int(p.name), str(p), size))
    return sorted(out, key=lambda f: f.start)


@dataclass(frozen=True, slots=True)
class StoreLayout:
    """Where a store keeps its files (``storePathRootDir``, ``storePathCommitLog``)."""

    root: str
    commit_log_dir: str
    consume_queue_dir: str
    commit_log_files: tuple[DataFile, ...]
    #: Where recovery ends the log of a store left by a crash (:func:`rocketq.store.read_only.readable_end`):
    #: records from there on are not read. None: read to the end of the data.
    readable_end: int | None = None

    @property
    def min_offset(self) -> int:
        return self.commit_log_files[0].start if self.commit_log_files else 0

    def file_of(self, phys: np.ndarray) -> np.ndarray:
        """Index of the commit-log file holding each offset, or -1 (before the first / after the last file)."""
        starts = np.array([f.start for f in self.commit_log_files], dtype=np.int64)
        ends = starts + np.array([f.size for f in self.commit_log_files], dtype=np.int64)
        idx = np.searchsorted(starts, phys, side="right") - 1
        ok = (idx >= 0) & (phys < ends[np.maximum(idx, 0)]) if len(starts) else np.zeros(len(phys), dtype=bool)
        return np.where(ok, idx, -1)


def store_config(path: str, conf: str | None) -> MessageStoreConfig:
    """The config of the store at *path*: from *conf* (``broker.conf``) as ``rocketq store`` reads it, or
    RocketMQ's layout under *path*. File sizes are not needed to read: each file says its own."""
    root = store_directory(path)
    if conf is not None:
        return store_settings(root, conf).config
    return MessageStoreConfig(store_path_root_dir=str(root))


def store_layout(path: str, conf: str | None) -> StoreLayout:
    cfg = store_config(path, conf)
    cl_dir = cfg.commit_log_path
    if not cl_dir.is_dir():
        raise StoreError(f"{path}: no commit log at {cl_dir} (not a RocketMQ store directory?)")
    return StoreLayout(str(cfg.root), str(cl_dir), str(cfg.consume_queue_path), tuple(list_data_files(cl_dir)),
                       readable_end(cfg))


# ============================================================================ partitions


@dataclass(frozen=True, slots=True)
class CommitLogRange:
    """Records of one commit-log file that start in [begin, end); *log_end*: the log ends at *end* (where
    recovery ends a crashed store's), whatever lies there."""

    file: DataFile
    begin: int
    end: int
    log_end: bool = False

    def describe(self) -> str:
        return f"commit log {Path(self.file.path).name} [{self.begin}, {self.end})"


@dataclass(frozen=True, slots=True)
class QueueRange:
    """Records of one consume queue from queue offset *begin* to *end* (exclusive)."""

    layout: StoreLayout = field(repr=False)
    topic: str
    queue_id: int
    files: tuple[DataFile, ...]
    begin: int
    end: int

    def describe(self) -> str:
        return f"consume queue {self.topic}/{self.queue_id} [{self.begin}, {self.end})"


Partition = CommitLogRange | QueueRange


def queue_bounds(files: list[DataFile], commit_log_min: int) -> tuple[int, int]:
    """(min, max) queue offsets of a consume queue, as ``getMinOffsetInQueue`` / ``getMaxOffsetInQueue``.

    The maximum ends at the first zero unit of the last file; the minimum is the
    first unit of the first file that is not a filler and points at or after
    the commit log's first file (``correctMinOffset``).
    """
    if not files:
        return 0, 0
    last = files[-1]
    units = np.fromfile(last.path, dtype=CQ_DTYPE, count=last.size // CQ_STORE_UNIT_SIZE)
    valid = (units["phys"] >= 0) & (units["size"] > 0)
    n = len(units) if bool(valid.all()) else int(np.argmin(valid))
    hi = (last.start + n * CQ_STORE_UNIT_SIZE) // CQ_STORE_UNIT_SIZE
    first = files[0]
    units = np.fromfile(first.path, dtype=CQ_DTYPE, count=first.size // CQ_STORE_UNIT_SIZE)
    hits = np.flatnonzero((units["phys"] >= commit_log_min) & (units["size"] > 0) & (units["size"] != FILLER_SIZE))
    lo = first.start // CQ_STORE_UNIT_SIZE + (int(hits[0]) if len(hits) else len(units))
    return min(lo, hi), hi


def _resolve(offset: int, lo: int, hi: int) -> int:
    if offset == EARLIEST:
        return lo
    if offset == LATEST:
        return hi
    return min(max(offset, lo), hi)


def plan_scan(opts: ScanOptions) -> list[Partition]:
    """The partitions of a read (see the module doc)."""
    layout = store_layout(opts.path, opts.conf)
    cq_dir = Path(layout.consume_queue_dir)
    if opts.through_queues and cq_dir.is_dir():
        return _plan_queues(opts, layout, cq_dir)
    if opts.through_queues:
        if opts.starting.per_queue or opts.ending.per_queue or opts.starting.default != EARLIEST \
                or opts.ending.default != LATEST:  # fmt: skip
            raise StoreError(f"{opts.path}: startingOffsets / endingOffsets need the consume queues and the store "
                             "has none (rebuild them: rocketq spark rebuild)")  # fmt: skip
        log.warning("%s has no consume queues: reading the whole commit log and filtering", opts.path)
    return list(commit_log_ranges(layout.commit_log_files, opts.max_partition_bytes, layout.readable_end))


def data_extent(path: str, size: int) -> int:
    """Where the data of a file ends at the latest: its size, or the start of a trailing hole.

    No record starts in the unwritten, sparse tail of a commit-log file, so ranges
    there need no task (``SEEK_DATA``/``SEEK_HOLE``; a file allocated in full is read whole).
    """
    if not hasattr(os, "SEEK_HOLE"):
        return size
    fd = os.open(path, os.O_RDONLY)
    try:
        pos = last = 0
        try:
            while pos < size:
                pos = last = os.lseek(fd, os.lseek(fd, pos, os.SEEK_DATA), os.SEEK_HOLE)
        except OSError:  # ENXIO: nothing but a hole after pos
            pass
        return min(size, last)
    finally:
        os.close(fd)


TAIL_PROBE_BYTES: Final = 64 << 10


def _zeros(chunk: bytes) -> bool:
    return chunk.count(0) == len(chunk)


def commit_log_ranges(files: tuple[DataFile, ...] | list[DataFile], step: int,
                      log_end: int | None = None) -> Iterator[CommitLogRange]:  # fmt: skip
    """Ranges of at most *step* bytes over the written part of each file, the zero tail of a file in one range;
    with *log_end*, nothing from that commit-log offset on.

    A file allocated in full (``posix_fallocate``, as the store makes them) reads
    as data to ``SEEK_HOLE``; its unwritten tail is zeros. Ranges from the first
    one whose first :data:`TAIL_PROBE_BYTES` are zeros, when every later range
    starts with zeros too, are merged into one: a task that finds nothing there
    costs the same however large its range, and merging ranges changes no record
    read (a body full of zeros only makes that one task larger).
    """
    for f in files:
        extent = data_extent(f.path, f.size)
        ends_log = log_end is not None and log_end - f.start <= extent
        if log_end is not None:
            if log_end <= f.start:
                return
            extent = min(extent, log_end - f.start)
        begins = list(range(0, extent, step))
        zeros = len(begins)  # begins[zeros:] start with zeros, and so does every range after them
        if zeros > 2:
            with open(f.path, "rb") as fh:
                while zeros > 1 and _zeros(os.pread(fh.fileno(), TAIL_PROBE_BYTES, begins[zeros - 1])):
                    zeros -= 1
        for begin in begins[:zeros]:
            yield CommitLogRange(f, begin, min(begin + step, extent), ends_log and begin + step >= extent)
        if zeros < len(begins):
            yield CommitLogRange(f, begins[zeros], extent, ends_log)


def _plan_queues(opts: ScanOptions, layout: StoreLayout, cq_dir: Path) -> list[Partition]:
    parts: list[Partition] = []
    seen: set[tuple[str, int]] = set()  # the queues read
    cl_min = layout.min_offset
    for topic_dir in sorted(cq_dir.iterdir(), key=lambda p: p.name):
        if not topic_dir.is_dir() or not opts.topic_matches(topic_dir.name):
            continue
        topic = topic_dir.name
        queue_dirs = [(int(q.name), q) for q in topic_dir.iterdir() if q.is_dir() and q.name.isdigit()]
        for qid, qdir in sorted(queue_dirs):
            if not opts.queue_matches(qid):
                continue
            files = list_data_files(qdir)
            lo, hi = queue_bounds(files, cl_min)
            seen.add((topic, qid))
            for option, spec in (("startingOffsets", opts.starting), ("endingOffsets", opts.ending)):
                wanted = spec.per_queue.get(topic, {}).get(qid)
                if wanted is not None and wanted >= 0 and not lo <= wanted <= hi:  # as a broker read refuses it
                    raise OptionError(f"option {option}: queue {topic}/{qid} holds offsets [{lo}, {hi}) in the store; "
                                      f"it cannot be read from or to {wanted}")  # fmt: skip
            begin = _resolve(opts.starting.for_queue(topic, qid), lo, hi)
            end = _resolve(opts.ending.for_queue(topic, qid), lo, hi)
            if begin > end:
                raise OptionError(f"options startingOffsets/endingOffsets: queue {topic}/{qid} would be read from "
                                  f"{begin} to {end}, which ends before it starts")  # fmt: skip
            for b in range(begin, end, opts.max_partition_units):
                parts.append(QueueRange(layout, topic, qid, tuple(files), b, min(b + opts.max_partition_units, end)))
    for option, spec in (("startingOffsets", opts.starting), ("endingOffsets", opts.ending)):
        for topic, queues in spec.per_queue.items():
            missing = sorted(q for q in queues if (topic, q) not in seen)
            if missing:
                raise OptionError(f"option {option}: queue {topic}/{missing[0]} is not read: the store has no such "
                                  "queue, or options topics/topicPattern/queues leave it out")  # fmt: skip
    return parts


# ============================================================================ reading


class Damage:
    """Corrupt records of one partition: raise at the first (FAILFAST) or count them (PERMISSIVE)."""

    def __init__(self, opts: ScanOptions, part: Partition) -> None:
        self.permissive = opts.permissive
        self.report_dir = opts.corrupt_records_path
        self.part = part
        self.count = 0
        self.offsets: list[int] = []
        self.reasons: list[str] = []

    def add(self, found: list[Corrupt]) -> None:
        if not found:
            return
        if not self.permissive:
            c = found[0]
            raise CorruptRecordError(
                f"{c} ({self.part.describe()}); {PERMISSIVE_HINT}"
            )
        self.count += len(found)
        for c in found[: max(0, _SHOWN_OFFSETS - len(self.offsets))]:
            self.offsets.append(c.offset)
            self.reasons.append(c.reason)

    def close(self) -> None:
        if not self.count:
            return
        log.warning("rocketq: skipped %d corrupt records in %s, first at commit-log offset %d",
                    self.count, self.part.describe(), self.offsets[0])  # fmt: skip
        if self.report_dir:
            os.makedirs(self.report_dir, exist_ok=True)
            name = hashlib.sha1(self.part.describe().encode()).hexdigest()[:16]
            doc = {"partition": self.part.describe(), "count": self.count, "offsets": self.offsets,
                   "reasons": self.reasons}  # fmt: skip
            tmp = os.path.join(self.report_dir, f".{name}.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            os.replace(tmp, os.path.join(self.report_dir, f"{name}.json"))


def corrupt_report(path: str | os.PathLike[str]) -> dict[str, object]:
    """What PERMISSIVE reads wrote to ``corruptRecordsPath``: total count, offsets (first 100 per
    partition, sorted) and the per-partition reports."""
    reports = []
    p = Path(path)
    if p.is_dir():
        for f in sorted(p.glob("*.json")):
            reports.append(json.loads(f.read_text(encoding="utf-8")))
    offsets = sorted(o for r in reports for o in r["offsets"])
    return {"count": sum(int(r["count"]) for r in reports), "offsets": offsets, "partitions": reports}


def record_chunks(starts: np.ndarray, sizes: np.ndarray, rows: int) -> Iterator[slice]:
    """Slices of at most *rows* records and about :data:`MAX_BATCH_BYTES`."""
    n = len(starts)
    i = 0
    csum = np.cumsum(sizes) if n else np.zeros(0, dtype=np.int64)
    while i < n:
        j = min(n, i + rows)
        base = csum[i - 1] if i else 0
        k = int(np.searchsorted(csum[i:j], base + MAX_BATCH_BYTES, side="right")) + i
        j = max(i + 1, min(j, k))
        yield slice(i, j)
        i = j


class _Filter:
    """The per-record filters of a read: store time always; topics and queues on a full scan."""

    def __init__(self, opts: ScanOptions, full_scan: bool) -> None:
        self.opts = opts
        self.by_topic = full_scan and (opts.topics is not None or opts.topic_pattern is not None
                                       or bool(opts.starting.per_queue or opts.ending.per_queue))  # fmt: skip
        self.by_queue = full_scan and opts.queues is not None
        self._topic_ok: dict[str, bool] = {}

    def header_mask(self, blk: RecordBlock) -> np.ndarray:
        keep = blk.bad == 0
        o = self.opts
        if o.start_time is not None:
            keep &= blk.store_ts >= o.start_time
        if o.end_time is not None:
            keep &= blk.store_ts < o.end_time
        if self.by_queue and o.queues is not None:
            keep &= np.isin(blk.queue_id, np.array(o.queues, dtype=np.int32))
        return keep

    def topic_mask(self, blk: RecordBlock) -> np.ndarray | None:
        if not self.by_topic:
            return None
        enc = pc.dictionary_encode(blk.topics())
        names = enc.dictionary.to_pylist()
        ok = np.array([self._topic_ok.setdefault(t, self.opts.topic_matches(t)) for t in names], dtype=bool)
        return ok[np.asarray(enc.indices, dtype=np.int64)] if len(names) else np.zeros(blk.n, dtype=bool)


def _batches(blk: RecordBlock, flt: _Filter, damage: Damage) -> Iterator[pa.RecordBatch]:
    """Filter a block, report its corrupt records, and turn what is left into one RecordBatch."""
    damage.add(blk.corrupt())
    keep = flt.header_mask(blk)
    if not keep.all():
        blk = blk.select(keep)
    if blk.n == 0:
        return
    topic_ok = flt.topic_mask(blk)
    if topic_ok is not None and not topic_ok.all():
        blk = blk.select(topic_ok)
        if blk.n == 0:
            return
    bodies, failed = blk.bodies()
    if failed.any():
        damage.add([Corrupt(blk.file.file_from + int(blk.pos[i]), "compressed body does not inflate")
                    for i in np.flatnonzero(failed).tolist()])  # fmt: skip
        blk = blk.select(~failed)
        bodies = bodies.filter(pa.array(~failed))
        if blk.n == 0:
            return
    yield blk.record_batch(bodies)


def scan(part: Partition | None, opts: ScanOptions) -> Iterator[pa.RecordBatch]:
    """The rows of one partition as Arrow record batches."""
    if part is None:
        return
    damage = Damage(opts, part)
    try:
        if isinstance(part, CommitLogRange):
            yield from _scan_commit_log(part, opts, damage)
        else:
            yield from _scan_queue(part, opts, damage)
    finally:
        damage.close()


def commit_log_positions(f: CommitLogFile, part: CommitLogRange, damage: Damage,
                         ended: dict[str, str] | None = None) -> Iterator[np.ndarray]:  # fmt: skip
    """Record positions of a range, a walk at a time (a corrupt record ends a walk; PERMISSIVE resumes
    at the next record found after it). *ended* gets ``stop``: why the last walk stopped."""
    size = f.size
    pos = part.begin if part.begin == 0 else find_record_start(f.mm, f.file_from, part.begin, part.end, size, f.u8)
    if ended is not None:
        ended["stop"] = END_BOUND  # no record starts in the range: it neither adds nor ends data
    while 0 <= pos < part.end:
        w = walk_records(f.mm, pos, part.end, size)
        if ended is not None:
            ended["stop"] = w.stop
        if len(w.positions):
            yield np.frombuffer(w.positions, dtype=np.int64)
        if w.stop == END_CORRUPT:
            damage.add([Corrupt(f.file_from + w.end, w.reason)])
            pos = find_record_start(f.mm, f.file_from, w.end + 1, part.end, size, f.u8)
            continue
        if w.stop == END_BOUND and not part.log_end and w.end <= size - 8 and \
                _LEN_MAGIC.unpack_from(f.mm, w.end)[1] in _MAGICS:  # fmt: skip
            # The next range starts at the first record it finds after its begin: that must be here.
            found = find_record_start(f.mm, f.file_from, part.end, w.end + 1, size, f.u8)
            if found != w.end:
                raise StoreError(
                    f"{part.describe()}: the record at commit-log offset {f.file_from + w.end} is not where a "
                    "split of the file finds the next record; read with a larger maxPartitionBytes"
                )
        break


def _scan_commit_log(part: CommitLogRange, opts: ScanOptions, damage: Damage) -> Iterator[pa.RecordBatch]:
    f = CommitLogFile(part.file.path)
    flt = _Filter(opts, full_scan=True)
    try:
        for positions in commit_log_positions(f, part, damage):
            sizes = np.diff(np.append(positions, positions[-1]))
            for sl in record_chunks(positions, sizes, opts.batch_rows):
                yield from _batches(RecordBlock(f, positions[sl], check_crc=opts.check_crc), flt, damage)
    finally:
        f.close()


def read_units(files: tuple[DataFile, ...], begin: int, end: int) -> np.ndarray:
    """Consume-queue units of queue offsets [begin, end), across files (native-endian copy)."""
    parts = []
    for f in files:
        first = f.start // CQ_STORE_UNIT_SIZE
        last = first + f.size // CQ_STORE_UNIT_SIZE
        lo, hi = max(begin, first), min(end, last)
        if lo >= hi:
            continue
        parts.append(np.fromfile(f.path, dtype=CQ_DTYPE, count=hi - lo, offset=(lo - first) * CQ_STORE_UNIT_SIZE))
    units = np.concatenate(parts) if parts else np.zeros(0, dtype=CQ_DTYPE)
    return units.astype(CQ_DTYPE.newbyteorder("="))


def _scan_queue(part: QueueRange, opts: ScanOptions, damage: Damage) -> Iterator[pa.RecordBatch]:
    layout = part.layout
    units = read_units(part.files, part.begin, part.end)
    qoff = np.arange(part.begin, part.begin + len(units), dtype=np.int64)
    phys = units["phys"].astype(np.int64)
    size = units["size"].astype(np.int64)
    real = (size > 0) & (size != FILLER_SIZE) & (phys >= layout.min_offset)
    if layout.readable_end is not None:  # units a crash left past where recovery ends the log: truncated by it
        real &= phys + size <= layout.readable_end
    phys, size, qoff = phys[real], size[real], qoff[real]
    file_idx = layout.file_of(phys)
    missing = np.flatnonzero(file_idx < 0)
    damage.add([Corrupt(int(phys[i]), f"consume queue {part.topic}/{part.queue_id} unit {int(qoff[i])} points "
                        "past the commit log") for i in missing.tolist()])  # fmt: skip
    flt = _Filter(opts, full_scan=False)
    for fi in np.unique(file_idx[file_idx >= 0]).tolist():
        sel = np.flatnonzero(file_idx == fi)
        info = layout.commit_log_files[fi]
        order = sel[np.argsort(phys[sel], kind="stable")]
        f = CommitLogFile(info.path)
        try:
            for sl in record_chunks(phys[order], size[order], opts.batch_rows):
                rows = order[sl]
                blk = RecordBlock(f, phys[rows] - info.start, check_crc=opts.check_crc)
                _check_units(blk, part, size[rows], qoff[rows])
                yield from _batches(blk, flt, damage)
        finally:
            f.close()


def _check_units(blk: RecordBlock, part: QueueRange, sizes: np.ndarray, qoffs: np.ndarray) -> None:
    """Mark records that do not match the unit that led to them (size, queue, queue offset, topic)."""
    ok = blk.bad == 0
    wrong = ok & ((blk.total != sizes) | (blk.queue_id != part.queue_id) | (blk.queue_offset != qoffs))
    rest = np.flatnonzero(ok & ~wrong)
    if len(rest):
        topics = blk.select(rest).topics()
        other = np.asarray(pc.not_equal(topics, part.topic), dtype=bool)
        wrong[rest[other]] = True
    blk.bad[wrong] = 10

