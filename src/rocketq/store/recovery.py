"""Start-up recovery of the commit log: the CRC-checked scan, and a report of what it did (store-format §11).

:func:`scan_commit_log` is the scan both recoveries run (§11.2, §11.4): from
the chosen file on, record after record while each is whole and its body CRC
matches, across BLANK ends into the next file; the first record that fails
ends the valid data. In an abnormal recovery, :class:`RecoveryDispatch` hands
the records whose consume-queue unit or index keys are missing to dispatch.

:class:`RecoveryReport` is filled in by ``MessageStore.load`` / ``start`` and
printed by ``rocketq store recover``: which recovery ran, where its scan began
and why it stopped, what was cut off (commit-log bytes and files, dirty
consume-queue units, index files newer than the checkpoint) and what was
rebuilt by dispatching again.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from rocketq.common.codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    header_struct,
    record_length,
)
from rocketq.common.javacompat import decode_utf8_java
from rocketq.common.message import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

if TYPE_CHECKING:
    from rocketq.store.commit_log import CommitLog, DispatchRequest


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

_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE (a BLANK record is just these 8 bytes)
# TOTALSIZE MAGICCODE BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG: the first 40 bytes of a record.
_FIXED = struct.Struct(">iiiiiqqi")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
# Size of the fixed header up to and including BODYLENGTH (…, PREPAREDTRANSACTIONOFFSET i64, BODYLENGTH i32),
# by the two IPv6 host bits.
_HEADER_SIZE = {
    flags: header_struct(flags).size
    for flags in (0, BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
}
_HOST_BITS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_MIN_RECORD = record_length(0, 0, 0, 0)
DISPATCH_BATCH = 4096


def _dispatch_properties(blob: bytes) -> tuple[str | None, str | None, str | None]:
    """``TAGS``, ``KEYS`` and ``UNIQ_KEY`` of a stored property string, as ``string_to_properties`` reads them.

    One pass over the segments ``name\x01value``: a segment with an empty name
    or value is dropped and a later one wins, as in Java. (The separators are
    ASCII, so decoding first and splitting after, or the reverse, agree.)
    """
    text = blob.decode("ascii") if blob.isascii() else decode_utf8_java(blob)
    tags = keys = uniq = None
    for seg in text.split("\x02"):
        name, _, value = seg.partition("\x01")
        if value:
            if name == "KEYS":
                keys = value
            elif name == "UNIQ_KEY":
                uniq = value
            elif name == "TAGS":
                tags = value
    return tags, keys, uniq


class RecoveryDispatch:
    """Hands the records that recovery finds to dispatch, in batches, leaving out those already built.

    A record needs dispatch when its consume-queue unit is missing (it ends
    past what its queue held after the queue's own recovery) or its index keys
    are (it lies at or past the last index file's endPhyOffset). Both
    dispatchers would skip the others anyway (store-format §4.5 rule 1, §5.5
    rule 1), so leaving them out changes nothing but the time: an abnormal
    recovery then re-parses only what it rebuilds.

    Requests are built from the fields the scan has read plus ``TAGS``,
    ``KEYS`` and ``UNIQ_KEY`` picked out of the property bytes; the full
    property map (``DispatchRequest.properties``, only read by a message
    arrival listener) is parsed only when *full_properties*.
    """

    def __init__(self, batch: Callable[[list[DispatchRequest]], None], queue_ends: dict[tuple[bytes, int], int],
                 index_end: int | None, *, full_properties: bool = True) -> None:  # fmt: skip
        self.batch = batch
        self.queue_ends = queue_ends  # (topic as stored, queue id) → end of its last unit's record
        self.index_end = index_end  # None: no index to build
        self.full_properties = full_properties
        self.pending: list[DispatchRequest] = []
        self.dispatched = 0

    def wants(self, topic: bytes, queue_id: int, phys: int, size: int) -> bool:
        if self.index_end is not None and phys >= self.index_end:
            return True
        return phys + size > self.queue_ends.get((topic, queue_id), -1)

    def add(self, req: DispatchRequest) -> None:
        self.pending.append(req)
        if len(self.pending) >= DISPATCH_BATCH:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            reqs, self.pending = self.pending, []
            self.batch(reqs)
            self.dispatched += len(reqs)


def scan_commit_log(cl: CommitLog, index: int, check_crc: bool, dispatch: RecoveryDispatch | None,
                    progress: Callable[[int], None] | None, report: RecoveryReport | None) -> int:  # fmt: skip
    """Walk the commit log from file *index* while records are valid (§11.2); return the end of valid data.

    Per record only the fixed fields, the length fields and the body CRC
    (``zlib.crc32`` over a view of the mapping, no copy) are read; a record is
    turned into a dispatch request only when *dispatch* wants it. The checks
    are those of ``checkMessageAndReturnSize`` with CRC: magic, lengths that
    fit the file and add up to TOTALSIZE, body CRC.
    """
    from rocketq.store.commit_log import SCHEDULE_TOPIC, DispatchRequest

    files = cl.mapped_file_queue.files
    file_size = cl.file_size
    v1, v2, blank = MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE
    head, fixed, i32, i16 = _HEAD.unpack_from, _FIXED.unpack_from, _I32.unpack_from, _I16.unpack_from
    i64 = _I64.unpack_from
    header_size = _HEADER_SIZE
    crc32 = zlib.crc32
    tag_code = cl._tag_code
    check = cl.check_message_and_return_size
    topics: dict[bytes, str] = {}
    no_props: dict[str, str] = {}
    wanting = dispatch is not None
    ends_get = dispatch.queue_ends.get if dispatch is not None else {}.get
    index_end = dispatch.index_end if dispatch is not None else None
    if index_end is None:
        index_end = 1 << 62
    full_props = dispatch.full_properties if dispatch is not None else True
    pending: list[DispatchRequest] = []
    batch_size = DISPATCH_BATCH
    records = 0
    reason = "end of data"
    magic = 0
    mf = files[index]
    base = mf.file_from_offset
    pos = 0
    while True:
        mm = mf.mm
        if hasattr(mmap, "MADV_SEQUENTIAL"):
            mm.madvise(mmap.MADV_SEQUENTIAL)
        view = memoryview(mm)
        try:
            while True:
                if pos + 40 > file_size:  # no room for a record: a BLANK, or the end
                    last_total, magic = head(mm, pos) if pos + 8 <= file_size else (1, 0)
                    if magic != blank and (last_total or magic):
                        reason = f"no BLANK record at the end of file {mf.path.name}"
                    break
                total, magic, body_crc, queue_id, _flag, queue_offset, rec_phys, sys_flag = fixed(mm, pos)
                if magic == blank:
                    break
                if magic != v1 and magic != v2:
                    if total or magic:
                        reason = f"bad magic code 0x{magic & 0xFFFFFFFF:08X} at offset {base + pos}"
                    break
                end = pos + total
                if total < _MIN_RECORD or end > file_size:
                    reason = f"record length {total} at offset {base + pos} runs past the file"
                    break
                host_bits = sys_flag & _HOST_BITS
                hs = header_size[host_bits]
                body_len = i32(mm, pos + hs - 4)[0]
                p = pos + hs
                if body_len < 0 or p + body_len > end:
                    reason = f"body length {body_len} at offset {base + pos} does not fit the record"
                    break
                if check_crc and body_len and crc32(view[p : p + body_len]) & 0x7FFFFFFF != body_crc:
                    reason = f"body CRC mismatch at offset {base + pos}"
                    break
                p += body_len
                if magic == v1:
                    topic_len = mm[p]
                    if topic_len > 127:
                        topic_len -= 256  # a signed byte, as Java reads it
                    p += 1
                else:
                    topic_len = i16(mm, p)[0]
                    p += 2
                if topic_len < 0 or p + topic_len + 2 > end or p + topic_len + 2 + i16(mm, p + topic_len)[0] != end:
                    reason = f"length fields of the record at offset {base + pos} disagree with TOTALSIZE"
                    break
                records += 1
                if not records & 0x3FFF and progress is not None:
                    progress(base + pos)
                if wanting:
                    phys = base + pos
                    topic_b = mm[p : p + topic_len]
                    need_unit = phys + total > ends_get((topic_b, queue_id), -1)
                    if need_unit or phys >= index_end:
                        topic = topics.get(topic_b)
                        if topic is None:
                            topic = topics[topic_b] = (topic_b.decode("ascii") if topic_b.isascii()
                                                       else decode_utf8_java(topic_b))  # fmt: skip
                        req = None
                        if not full_props and topic != SCHEDULE_TOPIC:
                            tags, keys, uniq = _dispatch_properties(mm[p + topic_len + 2 : end])
                            # A unit already built is not written again: then its tag code is not needed.
                            req = DispatchRequest(
                                topic, queue_id, rec_phys, total, tag_code(tags) if tags and need_unit else 0,
                                i64(mm, pos + (68 if sys_flag & BORNHOST_V6_FLAG else 56))[0], queue_offset,
                                keys, uniq, sys_flag, i64(mm, pos + hs - 12)[0], no_props,
                            )  # fmt: skip
                        if req is None:
                            req = check(mm, pos, False)[1]
                        if req is None:
                            reason = f"record at offset {base + pos} cannot be parsed"
                            records -= 1
                            break
                        pending.append(req)
                        if len(pending) >= batch_size:
                            dispatch.pending.extend(pending)  # type: ignore[union-attr]
                            dispatch.flush()  # type: ignore[union-attr]
                            pending = []
                pos = end
        finally:
            view.release()
        if progress is not None:
            progress(base + pos)
        if magic != blank:
            break
        index += 1
        if index >= len(files):
            pos = file_size
            reason = "end of the last file"
            break
        mf = files[index]
        base = mf.file_from_offset
        pos = 0
    if dispatch is not None:
        dispatch.pending.extend(pending)
        dispatch.flush()
    if report is not None:
        report.records_scanned += records
        report.stop_reason = reason
    return base + pos
