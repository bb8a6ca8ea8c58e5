"""Start-up recovery of the commit log: the CRC-checked scan, and a report of what it did (store-format §11).

:func:`scan_commit_log` is the scan both recoveries run (§11.2, §11.4): from
the chosen file on, record after record while each is whole and its body CRC
matches (walked and checked a chunk of records at a time, see
:mod:`rocketq.store.record_scan`), across BLANK ends into the next file; the
first record that fails ends the valid data. In an abnormal recovery,
:class:`RecoveryDispatch` hands the records whose consume-queue unit or index
keys are missing to dispatch.

:class:`RecoveryReport` is filled in by ``MessageStore.load`` / ``start`` and
printed by ``rocketq store recover``: which recovery ran, where its scan began
and why it stopped, what was cut off (commit-log bytes and files, dirty
consume-queue units, index files newer than the checkpoint) and what was
rebuilt by dispatching again.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rocketq.common.codec import END_FILE_MIN_BLANK_LENGTH
from rocketq.store.dispatch import DispatchBatch
from rocketq.store.record_scan import RecordRun, walk_records

if TYPE_CHECKING:
    from rocketq.store.commit_log import CommitLog


@dataclass
class RecoveryReport:
    mode: str = ""  # "normal" (no abort file), "abnormal" (abort file present) or "read-only"
    scan_start_offset: int = -1  # where the CRC-checked commit-log scan began (a file start)
    recovered_offset: int = 0  # end of valid commit-log data
    stop_reason: str = ""  # why the scan stopped there
    records_scanned: int = 0
    records_redispatched: int = 0  # abnormal recovery: records handed to dispatch again
    commit_log_files_deleted: list[str] = field(default_factory=list)  # files wholly past the end
    commit_log_bytes_cleared: int = 0  # stale bytes zeroed after the end in the last file
    consume_queue_units_truncated: int = 0  # units pointing past the end (or invalid), cut off
    consume_queue_units_rebuilt: int = 0  # units added by dispatch during recovery and start-up
    consume_queues_rebuilt: int = 0  # queues whose files were missing and were rebuilt
    consume_queues_deleted: int = 0  # every queue, when the commit log has no files (destroyLogics)
    index_files_dropped: int = 0  # abnormal exit: files newer than the checkpoint's indexMsgTimestamp
    index_keys_rebuilt: int = 0
    seconds: float = 0.0
    dispatch_seconds: float = 0.0  # of which spent building consume-queue units and index keys
    # Internals for the deltas above (queue → max offset after the consume queues' own recovery).
    queue_max_after_cq_recover: dict[str, int] = field(default_factory=dict, repr=False)
    index_entries_after_load: int = field(default=0, repr=False)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("queue_max_after_cq_recover")
        d.pop("index_entries_after_load")
        return d


# ============================================================================ commit-log scan

CHUNK_RECORDS = 4096  # records walked, checked and dispatched at a time


class RecoveryDispatch:
    """Hands the records that recovery finds to dispatch, a batch at a time, leaving out those already built.

    A record needs dispatch when its consume-queue unit is missing (it ends
    past what its queue held after the queue's own recovery) or its index keys
    are (it lies at or past the last index file's endPhyOffset). Both
    dispatchers would skip the others anyway (store-format §4.5 rule 1, §5.5
    rule 1), so leaving them out changes nothing but the time: an abnormal
    recovery then reads the properties only of what it rebuilds.

    ``TAGS``, ``KEYS`` and ``UNIQ_KEY`` are picked out of the property bytes; the
    full property map (``DispatchRequest.properties``, only read by a message
    arrival listener) is parsed only when *full_properties*.
    """

    def __init__(self, batch: Callable[[DispatchBatch], None], queue_ends: dict[tuple[str, int], int],
                 index_end: int | None, *, full_properties: bool = True) -> None:  # fmt: skip
        self.batch = batch
        self.queue_ends = queue_ends  # (topic, queue id) → end of its last unit's record
        self.index_end = index_end  # None: no index to build
        self.full_properties = full_properties
        self.dispatched = 0

    def dispatch(self, cl: CommitLog, mm: mmap.mmap, run: RecordRun) -> None:
        """Dispatch the records of *run* (read from *mm*) that need it."""
        topics = cl.topics_of(mm, run)
        index_end = self.index_end
        if index_end is None or int(run.phys[0]) < index_end:
            ends_get = self.queue_ends.get
            ends = np.fromiter((ends_get(k, -1) for k in zip(topics, run.queue_id.tolist(), strict=True)),
                               dtype=np.int64, count=len(topics))  # fmt: skip
            wanted = run.phys + run.size > ends
            if index_end is not None:
                wanted |= run.phys >= index_end
            if not bool(wanted.all()):
                index = np.flatnonzero(wanted)
                if len(index) == 0:
                    return
                run = run.select(index)
                topics = [topics[i] for i in index.tolist()]
        self.batch(cl.dispatch_batch_of(mm, run, topics, full_properties=self.full_properties))
        self.dispatched += len(run)


def scan_commit_log(cl: CommitLog, index: int, check_crc: bool, dispatch: RecoveryDispatch | None,
                    progress: Callable[[int], None] | None, report: RecoveryReport | None,
                    record_offsets: np.ndarray | None = None) -> int:  # fmt: skip
    """Walk the commit log from file *index* while records are valid (§11.2); return the end of valid data.

    Records are walked and checked a chunk at a time (:func:`walk_records`: magic,
    lengths that fit the file and add up to TOTALSIZE, body CRC when *check_crc*),
    across BLANK ends into the next file; the first record that fails ends the
    valid data. Each chunk goes to *dispatch* (if any) before the next is read.
    *record_offsets* (sorted commit-log offsets where records are thought to
    start) are hints for the walk; it verifies every one it uses.
    """
    files = cl.mapped_file_queue.files
    file_size = cl.file_size
    records = 0
    reason = "end of data"
    mf = files[index]
    base = mf.file_from_offset
    pos = 0
    while True:
        mm = mf.mm
        if hasattr(mmap, "MADV_SEQUENTIAL"):
            mm.madvise(mmap.MADV_SEQUENTIAL)
        hints = None
        if record_offsets is not None:
            lo, hi = np.searchsorted(record_offsets, (base, base + file_size - 8))
            hints = record_offsets[lo:hi] - base
        while True:
            run = walk_records(mm, pos, file_size, check_crc=check_crc, max_records=CHUNK_RECORDS, base=base,
                               hints=hints)  # fmt: skip
            pos = run.end
            if len(run):
                records += len(run)
                if dispatch is not None:
                    dispatch.dispatch(cl, mm, run)
                if progress is not None:
                    progress(base + pos)
            if run.blank or run.reason or len(run) < CHUNK_RECORDS:
                break
        if not run.blank:
            if run.reason:
                reason = run.reason
            elif pos + END_FILE_MIN_BLANK_LENGTH > file_size and mm[pos:file_size].count(0) != file_size - pos:
                reason = f"no BLANK record at the end of file {mf.path.name}"
            break
        index += 1
        if index >= len(files):  # the log ends at the last file's BLANK, as 4.9.4's recovery ends it: the next
            reason = "BLANK at the end of the last file"  # append goes there, if it fits before the file's end
            break
        mf = files[index]
        base = mf.file_from_offset
        pos = 0
    if report is not None:
        report.records_scanned += records
        report.stop_reason = reason
    return base + pos
