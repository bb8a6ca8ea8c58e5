"""Walking a run of commit-log records: RocketMQ's ``checkMessageAndReturnSize`` for many records at once.

Recovery (with the body CRC, store-format §11.2, §11.4) and dispatch of
records read back from the file (without it, §10) walk the same way:

1. follow the chain of TOTALSIZE fields from a start position, in Python (the
   only part that must go record by record): each step reads TOTALSIZE and
   MAGICCODE; a BLANK, a bad magic code or a length that runs past the data
   ends the walk;
2. check every record found with numpy, fields gathered from the mapping for
   all of them at once (§3.11): the length fields must fit the record and add
   up to TOTALSIZE;
3. with ``check_crc``, compare body CRCs (``zlib.crc32`` over views of the
   mapping) up to the first record that failed step 2.

The result (:class:`RecordRun`) holds the valid records column by column, where
the walk stopped and why. :func:`pick_dispatch_properties` takes ``TAGS``,
``KEYS``, ``UNIQ_KEY`` and ``DELAY`` out of a record's property bytes with one
regular-expression call, by the rules of ``string2messageProperties``;
:func:`pick_dispatch_properties_of` does the same for all records of a walk
with numpy.
"""

from __future__ import annotations

import mmap
import re
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from rocketq.common.codec import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, record_length
from rocketq.common.javacompat import decode_utf8_java
from rocketq.common.message import BORNHOST_V6_FLAG, KEY_SEPARATOR, STOREHOSTADDRESS_V6_FLAG

_HEAD = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE
MIN_RECORD = record_length(0, 0, 0, 0)
# The first 40 bytes of every record: TOTALSIZE … SYSFLAG.
_FIXED = np.dtype([("total", ">i4"), ("magic", ">i4"), ("body_crc", ">i4"), ("queue_id", ">i4"), ("flag", ">i4"),
                   ("queue_offset", ">i8"), ("phys", ">i8"), ("sys_flag", ">i4")])  # fmt: skip
_R40 = np.arange(40, dtype=np.int64)
_R8 = np.arange(8, dtype=np.int64)
_R4 = np.arange(4, dtype=np.int64)
_R2 = np.arange(2, dtype=np.int64)
_V4_HEADER = 88  # fixed header up to and including BODYLENGTH with both hosts IPv4; each IPv6 host adds 12


@dataclass(slots=True)
class RecordRun:
    """The records a walk found valid (int64 columns, positions relative to the file) and where it stopped.

    ``end`` is the position after the last record walked over: the next record,
    a BLANK, the first bad record, or the limit. ``blank`` says a BLANK record
    ends the file's data there; ``reason`` says what was wrong with the record
    at ``end`` (empty when the walk simply ran out of data or records).
    ``skipped`` counts records walked over without being valid (dispatch only).
    """

    pos: np.ndarray
    size: np.ndarray
    queue_id: np.ndarray
    queue_offset: np.ndarray
    phys: np.ndarray
    sys_flag: np.ndarray
    store_timestamp: np.ndarray
    prepared_offset: np.ndarray
    topic_pos: np.ndarray
    topic_len: np.ndarray
    props_pos: np.ndarray
    props_len: np.ndarray
    end: int
    blank: bool = False
    reason: str = ""
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.pos)

    def select(self, index: np.ndarray | slice) -> RecordRun:
        """The records at *index* (the same walk end)."""
        return RecordRun(
            self.pos[index], self.size[index], self.queue_id[index], self.queue_offset[index], self.phys[index],
            self.sys_flag[index], self.store_timestamp[index], self.prepared_offset[index], self.topic_pos[index],
            self.topic_len[index], self.props_pos[index], self.props_len[index], self.end, self.blank, self.reason,
            self.skipped,
        )  # fmt: skip


def _gather(u8: np.ndarray, at: np.ndarray, width: np.ndarray, dtype: str) -> np.ndarray:
    """The big-endian integers of *dtype* at positions *at* of *u8*, as int64 (one numpy gather).

    Positions past the end are clipped: what they read is garbage that the length checks reject.
    """
    at = np.minimum(at, len(u8) - len(width))
    return u8[at[:, None] + width].view(dtype).reshape(len(at)).astype(np.int64)


def walk_records(mm: mmap.mmap, start: int, limit: int, *, check_crc: bool, max_records: int,
                 skip_invalid: bool = False, base: int = 0, hints: np.ndarray | None = None) -> RecordRun:  # fmt: skip
    """Walk the records of *mm* from *start* while they lie before *limit* (see the module docstring).

    At most *max_records* records are walked. Recovery stops at the first record
    that fails a check; dispatch (*skip_invalid*, no CRC) walks over a record
    whose length fields disagree with its TOTALSIZE and leaves it out, as
    RocketMQ's reput does. *base* (the file's commit-log offset) only goes into
    messages.

    *hints* (sorted positions in the file where records are thought to start, from
    the consume queues) let runs of records be followed with numpy: where the walk
    stands on a hint, the TOTALSIZE and MAGICCODE of the hints from there on are
    read at once and taken while each record is sound and ends exactly where the
    next hint begins, which is the chain a record-by-record walk follows; between
    hints (records without a unit) it goes record by record.
    """
    head = _HEAD.unpack_from
    v1, v2, blank_magic = MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, BLANK_MAGIC_CODE
    positions: list[int] = []
    append = positions.append
    runs: list[np.ndarray] = []  # stretches taken from the hints, in order between the single positions
    pos = start
    blank = False
    reason = ""
    left = max_records
    u8 = np.frombuffer(mm, dtype=np.uint8)
    try:
        hint_at = 0
        next_hint = -1
        if hints is not None and len(hints):
            hint_at = int(np.searchsorted(hints, pos))
            next_hint = int(hints[hint_at]) if hint_at < len(hints) else -1
        while left > 0 and pos + 8 <= limit:
            if pos == next_hint:
                assert hints is not None
                taken, after = _follow_hints(u8, hints[hint_at : hint_at + left], limit)
                if taken:
                    if positions:
                        runs.append(np.asarray(positions, dtype=np.int64))
                        positions.clear()
                    runs.append(hints[hint_at : hint_at + taken])
                    left -= taken
                    pos = after
                    hint_at = int(np.searchsorted(hints, pos))
                    next_hint = int(hints[hint_at]) if hint_at < len(hints) else -1
                    continue
            elif 0 <= next_hint < pos:
                assert hints is not None
                hint_at = int(np.searchsorted(hints, pos))
                next_hint = int(hints[hint_at]) if hint_at < len(hints) else -1
            total, magic = head(mm, pos)
            if magic in (v1, v2):
                if total < MIN_RECORD or pos + total > limit:
                    reason = f"record length {total} at offset {base + pos} runs past the data"
                    break
                append(pos)
                pos += total
                left -= 1
                continue
            if magic == blank_magic:
                blank = True
            elif total or magic:
                reason = f"bad magic code 0x{magic & 0xFFFFFFFF:08X} at offset {base + pos}"
            break
        if positions or not runs:
            runs.append(np.asarray(positions, dtype=np.int64))
        p = runs[0] if len(runs) == 1 else np.concatenate(runs)
        return _check(u8, mm, p, pos, blank, reason, check_crc=check_crc and not skip_invalid,
                      skip_invalid=skip_invalid, base=base)  # fmt: skip
    finally:
        del u8


def _follow_hints(u8: np.ndarray, hints: np.ndarray, limit: int) -> tuple[int, int]:
    """How many records, from ``hints[0]`` on, the record-by-record walk would visit at exactly these
    positions (each with a record's magic code and a TOTALSIZE that fits, and ending where the next
    begins; the last one need only be sound), and where the walk stands after them."""
    heads = u8[hints[:, None] + _R8].view(">i4").reshape(len(hints), 2).astype(np.int64)
    total, magic = heads[:, 0], heads[:, 1]
    after = hints + total
    sound = ((magic == MESSAGE_MAGIC_CODE) | (magic == MESSAGE_MAGIC_CODE_V2)) & (total >= MIN_RECORD) & \
        (after <= limit)  # fmt: skip
    # Record i is taken when records 0..i are sound and each of 0..i-1 ends where the next begins.
    linked = np.ones(len(hints), dtype=bool)
    linked[1:] = after[:-1] == hints[1:]
    taken_ok = sound & linked
    taken = len(hints) if bool(taken_ok.all()) else int(np.argmin(taken_ok))
    return taken, int(after[taken - 1]) if taken else -1


def _check(u8: np.ndarray, mm: mmap.mmap, p: np.ndarray, end: int, blank: bool, reason: str, *, check_crc: bool,
           skip_invalid: bool, base: int) -> RecordRun:  # fmt: skip
    """Steps 2 and 3 of the walk over the records at positions *p*."""
    n = len(p)
    fixed = u8[p[:, None] + _R40].view(_FIXED).reshape(n)  # p + 40 <= p + TOTALSIZE: always inside
    total = fixed["total"].astype(np.int64)
    sys_flag = fixed["sys_flag"].astype(np.int64)
    born6 = (sys_flag & BORNHOST_V6_FLAG) != 0
    hs = _V4_HEADER + 12 * born6 + 12 * ((sys_flag & STOREHOSTADDRESS_V6_FLAG) != 0)
    rec_end = p + total
    store_ts = _gather(u8, p + 56 + 12 * born6, _R8, ">i8")
    prepared = _gather(u8, p + hs - 12, _R8, ">i8")
    body_len = _gather(u8, p + hs - 4, _R4, ">i4")
    v2 = fixed["magic"] == MESSAGE_MAGIC_CODE_V2
    tsz = 1 + v2
    # BODYLENGTH <= 0 means no body; then TOPICLENGTH (a signed byte, or i16 in v2), then PROPERTIESLENGTH (i16).
    tpos = p + hs + np.maximum(body_len, 0)
    body_fits = tpos + tsz <= rec_end
    t1 = _gather(u8, tpos, _R2, ">i2")  # the byte at tpos and the one after it
    topic_len = np.where(v2, t1, t1 >> 8)  # v1: the signed high byte
    ppos = tpos + tsz + np.maximum(topic_len, 0)
    props_len = _gather(u8, ppos, _R2, ">i2")
    lengths_ok = body_fits & (ppos + 2 <= rec_end) & (ppos + 2 + np.maximum(props_len, 0) == rec_end)
    skipped = 0
    bad = n
    if not bool(lengths_ok.all()):
        if skip_invalid:
            skipped = n - int(np.count_nonzero(lengths_ok))
        else:
            bad = int(np.argmin(lengths_ok))
    crc_failed = False
    if check_crc:
        # Java checks the body CRC before it reads the topic and the properties.
        upto = bad + 1 if bad < n and bool(body_fits[bad]) else bad
        crc_bad = _first_crc_mismatch(mm, (p + hs)[:upto], body_len[:upto], fixed["body_crc"][:upto])
        if crc_bad < upto:
            bad = crc_bad
            crc_failed = True
    if bad < n:
        at = base + int(p[bad])
        if crc_failed:
            reason = f"body CRC mismatch at offset {at}"
        elif not bool(body_fits[bad]):
            reason = f"body length {int(body_len[bad])} at offset {at} does not fit the record"
        else:
            reason = f"length fields of the record at offset {at} disagree with TOTALSIZE"
        end = int(p[bad])
        blank = False
        sel: np.ndarray | slice = slice(0, bad)
    elif skipped:
        sel = np.flatnonzero(lengths_ok)
    else:
        sel = slice(None)
    return RecordRun(
        p[sel], total[sel], fixed["queue_id"].astype(np.int64)[sel], fixed["queue_offset"].astype(np.int64)[sel],
        fixed["phys"].astype(np.int64)[sel], sys_flag[sel], store_ts[sel], prepared[sel], (tpos + tsz)[sel],
        topic_len[sel], (ppos + 2)[sel], np.maximum(props_len, 0)[sel], end, blank, reason, skipped,
    )  # fmt: skip


def _first_crc_mismatch(mm: mmap.mmap, body_pos: np.ndarray, body_len: np.ndarray, body_crc: np.ndarray) -> int:
    """Index of the first record whose body CRC is wrong, or len when there is none.

    The CRCs are computed by a chain of ``map`` calls (no bytecode per record) and
    compared with numpy. An empty body's CRC is not checked, as ``checkMessageAndReturnSize``
    checks only ``bodyLen > 0`` (its field should be 0, which ``zlib.crc32`` gives for no bytes).
    """
    n = len(body_pos)
    if n == 0:
        return 0
    starts = body_pos.tolist()
    ends = (body_pos + np.maximum(body_len, 0)).tolist()
    with memoryview(mm) as view:
        crcs = np.fromiter(map(zlib.crc32, map(view.__getitem__, map(slice, starts, ends))), dtype=np.int64, count=n)
    bad = ((crcs & 0x7FFFFFFF) != body_crc) & (body_len > 0)
    return int(np.argmax(bad)) if bool(bad.any()) else n


# A property segment "name\x01value" (non-empty value) at the start of the string or after a \x02.
_DISPATCH_PROPERTIES = re.compile(rb"(?<![^\x02])(TAGS|KEYS|UNIQ_KEY|DELAY)\x01([^\x02]+)")
_DISPATCH_NAMES = (b"TAGS\x01", b"KEYS\x01", b"UNIQ_KEY\x01", b"DELAY\x01")
_NAME_WIDTH = max(map(len, _DISPATCH_NAMES))
_TOKEN = re.compile(rb"[^ ]+")


def _name_match(name: bytes) -> tuple[np.uint64, np.uint64, int]:
    """(the first 8 bytes of *name* as a little-endian number, the mask of those bytes, its ninth byte or -1)."""
    head = name[:8]
    mask = (1 << (8 * len(head))) - 1
    return np.uint64(int.from_bytes(head, "little")), np.uint64(mask), name[8] if len(name) > 8 else -1


_NAME_MATCH = [_name_match(name) for name in _DISPATCH_NAMES]


def pick_dispatch_properties(raw: bytes) -> dict[bytes, bytes]:
    """``TAGS``, ``KEYS``, ``UNIQ_KEY`` and ``DELAY`` of stored property bytes, as ``string2messageProperties``
    reads them: a segment needs a non-empty value and a later segment wins.

    Values stay bytes (decode with ``decode_utf8_java``): the separators are ASCII,
    so decoding the whole string first and splitting after gives the same.
    """
    return dict(_DISPATCH_PROPERTIES.findall(raw))


DispatchProperties = tuple[list[str | None], list[str | None], list[str | None], list[str | None]]


class PropertyValues:
    """Where the ``TAGS``, ``KEYS``, ``UNIQ_KEY`` and ``DELAY`` values of the records of a walk lie.

    The records' property strings are joined into ``blob`` (``data`` is the same
    bytes as a numpy array): each segment follows a \x02, each record ends at a
    \x00. ``values[name]`` holds, for the records that have the property, the
    record numbers and the [start, end) of the value in ``blob`` (the last
    non-empty segment of that name, by the rules of :func:`pick_dispatch_properties`).
    The text is ASCII, so byte positions are character positions.
    """

    __slots__ = ("blob", "count", "data", "values")

    def __init__(self, blob: bytes, data: np.ndarray, count: int,
                 values: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> None:  # fmt: skip
        self.blob = blob
        self.data = data
        self.count = count
        self.values = values

    def strings(self, name: str) -> list[str | None]:
        """The value of *name* for each record (None where absent)."""
        records, starts, ends = self.values[name]
        text = self.blob.decode("ascii")
        column = np.full(self.count, None, dtype=object)
        column[records] = list(map(text.__getitem__, map(slice, starts.tolist(), ends.tolist())))
        return column.tolist()  # type: ignore[no-any-return]


def find_dispatch_properties(mm: mmap.mmap, run: RecordRun) -> PropertyValues | tuple[bytes, ...]:
    """Find ``TAGS``, ``KEYS``, ``UNIQ_KEY`` and ``DELAY`` in the property strings of all records of *run*
    at once, with numpy (see :class:`PropertyValues`).

    When the text is not ASCII, or a \x00 inside a property string would blur the
    records, the records' property bytes are returned instead (for
    :func:`pick_dispatch_properties`, record by record).
    """
    n = len(run)
    raws = tuple(map(mm.__getitem__, map(slice, run.props_pos.tolist(), (run.props_pos + run.props_len).tolist())))
    joined = b"\x00\x02".join(raws)
    if not joined.isascii() or joined.count(0) != n - 1:
        return raws
    blob = b"\x02" + joined + b"\x00" * _NAME_WIDTH  # the padding keeps every gather below inside
    data = np.frombuffer(blob, dtype=np.uint8)
    is_end = data == 0
    is_separator = data == 2
    record_ends = np.flatnonzero(is_end)
    segments = np.flatnonzero(is_separator) + 1
    stops = np.flatnonzero(is_end | is_separator)  # where a value ends
    # The first 8 bytes of every segment as one number (little-endian), to match names against.
    eight = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))  # 8 bytes from every position
    heads = eight[segments]
    values: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for name, (prefix, mask, ninth) in zip(_DISPATCH_NAMES, _NAME_MATCH, strict=True):
        hit = (heads & mask) == prefix
        if ninth >= 0:
            hit &= data[np.minimum(segments + 8, len(data) - 1)] == ninth
        at = segments[hit]
        value_start = at + len(name)
        value_end = stops[np.searchsorted(stops, value_start)]
        keep = value_end > value_start  # an empty value drops the segment
        records = np.searchsorted(record_ends, at[keep])
        value_start, value_end = value_start[keep], value_end[keep]
        last = np.ones(len(records), dtype=bool)  # a later segment of the same name wins
        last[:-1] = records[1:] != records[:-1]
        values[name[:-1].decode()] = (records[last], value_start[last], value_end[last])
    return PropertyValues(blob, data, n, values)


def pick_dispatch_properties_of(mm: mmap.mmap, run: RecordRun) -> DispatchProperties:
    """``TAGS``, ``KEYS``, ``UNIQ_KEY`` and ``DELAY`` (lists, None where absent) of the records of *run*."""
    found = find_dispatch_properties(mm, run)
    if isinstance(found, PropertyValues):
        return found.strings("TAGS"), found.strings("KEYS"), found.strings("UNIQ_KEY"), found.strings("DELAY")
    return pick_dispatch_properties_of_raws(found)


def split_key_tokens(found: PropertyValues, records: np.ndarray, starts: np.ndarray,
                     ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """The ``KEYS`` values [start, end) of *records* split into their space-separated tokens, empty ones
    dropped (``KEYS`` holds several keys separated by one space): (record, start, end) of each token,
    in order. Values without a space (the usual case) are their own token."""
    spaces = np.flatnonzero(found.data == ord(KEY_SEPARATOR))
    spaced = np.flatnonzero(np.searchsorted(spaces, starts) != np.searchsorted(spaces, ends))
    if len(spaced) == 0:
        return records, starts, ends
    blob = found.blob
    parts: list[tuple[int, int, int]] = []
    plain = np.ones(len(records), dtype=bool)
    plain[spaced] = False
    for i in spaced.tolist():
        parts.extend((int(records[i]), m.start(), m.end()) for m in _TOKEN.finditer(blob, int(starts[i]), int(ends[i])))
    split = np.asarray(parts, dtype=np.int64).reshape(-1, 3)
    all_records = np.concatenate((records[plain], split[:, 0]))
    order = np.argsort(all_records, kind="stable")  # tokens of one record stay in order
    return (all_records[order], np.concatenate((starts[plain], split[:, 1]))[order],
            np.concatenate((ends[plain], split[:, 2]))[order])  # fmt: skip


def pick_dispatch_properties_of_raws(raws: tuple[bytes, ...]) -> DispatchProperties:
    """:func:`pick_dispatch_properties_of` for the property bytes of each record, record by record."""
    n = len(raws)
    columns: dict[bytes, list[str | None]] = {name[:-1]: [None] * n for name in _DISPATCH_NAMES}
    for i, raw in enumerate(raws):
        for name, value in pick_dispatch_properties(raw).items():
            columns[name][i] = decode_utf8_java(value)
    return columns[b"TAGS"], columns[b"KEYS"], columns[b"UNIQ_KEY"], columns[b"DELAY"]


def same_topic(mm: mmap.mmap, run: RecordRun) -> bool:
    """Whether every record of *run* has the topic bytes of its first one (one numpy comparison)."""
    width = int(run.topic_len[0])
    if not bool((run.topic_len == width).all()):
        return False
    u8 = np.frombuffer(mm, dtype=np.uint8)
    try:
        topics = u8[run.topic_pos[:, None] + np.arange(width, dtype=np.int64)]
    finally:
        del u8
    return bool((topics == topics[0]).all())
