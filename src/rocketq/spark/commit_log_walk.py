"""Finding CommitLog records in a file: the walk of ``CommitLog.checkMessageAndReturnSize``.

A commit-log file (store-format §3) is a run of records, each starting with
``i32 TOTALSIZE, i32 MAGICCODE``; a BLANK record (magic ``0xCBD43194``) or
zeros end the data of a file. Finding the records is the one sequential step
of reading a file: :func:`walk_records` follows the TOTALSIZE chain and only
that (about 0.2 µs a record); every field is then decoded in bulk by
:mod:`rocketq.spark.record_decoder`.

A file can be read in several byte ranges at once. A range that does not start
at the beginning of a file starts at the first record found by
:func:`find_record_start`: the first position ``p`` whose MAGICCODE is a
message magic and whose PHYSICALOFFSET field (``p + 28``) equals the record's
own commit-log offset. That 12-byte signature cannot be met by chance inside a
body; a walk that does not land exactly on the next range's start proves it
was (the reader then fails with the offset rather than return wrong data).
"""

from __future__ import annotations

import mmap
import struct
from array import array
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from rocketq.common.codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    PHYSICAL_OFFSET_POS,
    record_length,
)

MIN_RECORD_SIZE: Final = record_length(0, 0, 0, 0)  # 91: IPv4 hosts, v1, every variable part empty
_LEN_MAGIC = struct.Struct(">ii")
_I64 = struct.Struct(">q")
_ZERO_CHUNK: Final = 1 << 20
_MAGIC_BYTES: Final = (struct.pack(">i", MESSAGE_MAGIC_CODE), struct.pack(">i", MESSAGE_MAGIC_CODE_V2))

# Why a walk stopped.
END_BOUND: Final = "bound"  # reached the end of its range: the next record belongs to the next range
END_BLANK: Final = "blank"  # a BLANK record: the rest of the file is free space
END_ZEROS: Final = "zeros"  # zeros where a record would start: the end of the written data
END_FILE: Final = "eof"  # fewer than 8 bytes left in the file
END_CORRUPT: Final = "corrupt"  # something that is not a record; ``reason`` says what


@dataclass(slots=True)
class Walk:
    """Record start positions (relative to the file) found by :func:`walk_records`."""

    positions: array = field(default_factory=lambda: array("q"))
    end: int = 0
    stop: str = END_BOUND
    reason: str = ""


def walk_records(buf: object, pos: int, stop: int, file_size: int) -> Walk:
    """Follow TOTALSIZE from *pos* while records start before *stop*.

    *buf* is the whole file (any object ``struct.unpack_from`` accepts). The
    walk checks what the chain itself needs: a message magic, a TOTALSIZE of
    at least :data:`MIN_RECORD_SIZE` that stays inside the file. Everything
    else is checked in bulk by the decoder.
    """
    out = array("q")
    append = out.append
    unpack = _LEN_MAGIC.unpack_from
    last = file_size - 8
    v1, v2 = MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2
    while pos < stop:
        if pos > last:
            return Walk(out, pos, END_FILE)
        total, magic = unpack(buf, pos)
        if magic in (v1, v2):
            if total < MIN_RECORD_SIZE or pos + total > file_size:
                return Walk(out, pos, END_CORRUPT, f"TOTALSIZE {total} does not fit the file")
            append(pos)
            pos += total
            continue
        if magic == BLANK_MAGIC_CODE:
            return Walk(out, pos, END_BLANK)
        if total == 0 and magic == 0:
            return Walk(out, pos, END_ZEROS)
        return Walk(out, pos, END_CORRUPT, f"bad magic code 0x{magic & 0xFFFFFFFF:08X}")
    return Walk(out, pos, END_BOUND)


def _first_nonzero(u8: np.ndarray, pos: int, end: int) -> int:
    """The first position in [pos, end) holding a non-zero byte, or *end* (zeros are skipped a chunk at a time)."""
    while pos < end:
        stop = min(end, pos + _ZERO_CHUNK)
        chunk = u8[pos:stop]
        if chunk.any():
            return pos + int(np.argmax(chunk != 0))
        pos = stop
    return end


def find_record_start(buf: mmap.mmap | bytes, file_from: int, start: int, stop: int, file_size: int,
                      u8: np.ndarray | None = None) -> int:  # fmt: skip
    """The first position in [*start*, *stop*) where a record starts, or -1 (see the module doc).

    *buf* is the whole file as an ``mmap`` (or ``bytes``): its ``find`` looks for the
    magic codes at C speed; with *u8*, a numpy view of the same bytes, runs of zeros
    (the unwritten tail of a file) are skipped first, several times faster.
    """
    hi = min(stop, file_size - MIN_RECORD_SIZE + 1) + 4  # magic positions searched: [start + 4, hi)
    lo = start + 4
    if u8 is not None:
        lo = max(lo, _first_nonzero(u8, lo, hi))
        if lo >= hi:
            return -1
    v1, v2 = _MAGIC_BYTES
    pos = lo
    while True:
        q = buf.find(v1, pos, hi + 3)
        q2 = buf.find(v2, pos, q + 3 if q >= 0 else hi + 3)  # a v2 magic only counts before the v1 one
        if q2 >= 0:
            q = q2
        if q < 0:
            return -1
        p = q - 4
        if p >= stop:
            return -1
        total = _LEN_MAGIC.unpack_from(buf, p)[0]
        phys = _I64.unpack_from(buf, p + PHYSICAL_OFFSET_POS)[0]
        if phys == file_from + p and MIN_RECORD_SIZE <= total <= file_size - p:
            return p
        pos = q + 1
