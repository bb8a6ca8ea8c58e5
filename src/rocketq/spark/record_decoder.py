"""CommitLog records decoded in bulk into Arrow: ``MessageDecoder.decode`` for many records at once.

The record layout is the one of :mod:`rocketq.common.codec` (store-format §3.2);
this module decodes the same bytes column-wise, with numpy and pyarrow, so that
no Python code runs per record (the record positions come from
:mod:`rocketq.spark.commit_log_walk` or from consume-queue units):

1. the fixed header of every record (the 88 bytes up to BODYLENGTH with IPv4
   hosts, 100 or 112 with IPv6 ones) is copied out with one Arrow ``take``
   over a zero-copy ``large_binary`` array whose offsets are the record
   positions, and viewed as a numpy structured array;
2. topic and property lengths are gathered with numpy, every length is
   checked against TOTALSIZE as ``checkMessageAndReturnSize`` does, and
   PHYSICALOFFSET against the record's position;
3. body, topic and properties are cut with one more ``take`` whose offsets are
   the field boundaries of all records in order;
4. the property string (``name 0x01 value 0x02 ...``, store-format §3.5) is
   split with numpy at the separator bytes: ``TAGS``, ``KEYS`` and
   ``UNIQ_KEY`` and the ``properties`` map come out of that, with
   ``MessageDecoder.string2messageProperties``'s rules (empty names or values
   dropped, a later duplicate wins: rows with duplicates, or with bytes that
   are not UTF-8, are decoded by :func:`rocketq.common.message.string_to_properties`);
5. a compressed body (sysFlag bit 0: zlib, LZ4 or Zstandard) is inflated.

:data:`ARROW_SCHEMA` is the Arrow form of the data source's Spark schema
(``to_arrow_schema(..., timezone="UTC")``); a test keeps the two equal.
"""

from __future__ import annotations

import mmap
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.common.codec import MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2, RecordInfo
from rocketq.common.compression import CompressionError, decompress
from rocketq.common.javacompat import decode_utf8_java, java_hashes_after, java_hashes_of_ranges, java_string_hash
from rocketq.common.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    STOREHOSTADDRESS_V6_FLAG,
    TRANSACTION_MASK,
    TRANSACTION_ROLLBACK_TYPE,
    string_to_properties,
)
from rocketq.common.message_id import bytes_to_host
from rocketq.store.dump import host_to_string
from rocketq.store.index_file import index_key_hash, index_key_hashes_of

# --- the schema -------------------------------------------------------------------------

TIMESTAMP: Final = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA: Final = pa.schema([
    ("topic", pa.string()),
    ("queueId", pa.int32()),
    ("queueOffset", pa.int64()),
    ("commitLogOffset", pa.int64()),
    ("storeSize", pa.int32()),
    ("msgId", pa.string()),
    ("uniqKey", pa.string()),
    ("tags", pa.string()),
    ("keys", pa.list_(pa.field("element", pa.string()))),
    ("body", pa.binary()),
    ("properties", pa.map_(pa.string(), pa.string())),
    ("flag", pa.int32()),
    ("sysFlag", pa.int32()),
    ("bodyCRC", pa.int32()),
    ("reconsumeTimes", pa.int32()),
    ("bornTimestamp", TIMESTAMP),
    ("storeTimestamp", TIMESTAMP),
    ("bornHost", pa.string()),
    ("storeHost", pa.string()),
])  # fmt: skip
COLUMNS: Final = tuple(ARROW_SCHEMA.names)

# --- the fixed header ---------------------------------------------------------------------

_PREFIX_LEN: Final = 48  # TOTALSIZE .. BORNTIMESTAMP: the same for every record
_PREFIX = np.dtype([
    ("total", ">i4"), ("magic", ">i4"), ("crc", ">i4"), ("qid", ">i4"), ("flag", ">i4"),
    ("qoff", ">i8"), ("phys", ">i8"), ("sys", ">i4"), ("born_ts", ">i8"),
])  # fmt: skip


def _rest_dtype(born: int, store: int) -> np.dtype:
    """BORNHOST .. BODYLENGTH for address lengths *born* and *store* (4 or 16)."""
    return np.dtype([
        ("born_addr", f"V{born}"), ("born_port", ">i4"), ("store_ts", ">i8"), ("store_addr", f"V{store}"),
        ("store_port", ">i4"), ("reconsume", ">i4"), ("prepared", ">i8"), ("body_len", ">i4"),
    ])  # fmt: skip


_HOST_BITS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
# host bits >> 4 → (born address length, store address length, rest dtype)
_RESTS = {
    g: (16 if g & 1 else 4, 16 if g & 2 else 4, _rest_dtype(16 if g & 1 else 4, 16 if g & 2 else 4)) for g in range(4)
}

# Reasons a record is rejected, by code (0 = good).
_REASONS: Final = {
    1: "bad magic code",
    2: "TOTALSIZE runs past the end of the file",
    3: "record overlaps the next one",
    4: "negative BODYLENGTH or a body running past TOTALSIZE",
    5: "negative topic length or a topic running past TOTALSIZE",
    6: "field lengths do not add up to TOTALSIZE",
    7: "PHYSICALOFFSET does not match the record's position",
    8: "compressed body does not inflate",
    9: "body CRC mismatch",
    10: "the record does not match the consume-queue unit pointing at it (size, topic, queue or queue offset)",
}


@dataclass(slots=True)
class Corrupt:
    """A record that cannot be read: its commit-log offset and why."""

    offset: int
    reason: str

    def __str__(self) -> str:
        return f"corrupt record at commit-log offset {self.offset}: {self.reason}"


class CommitLogFile:
    """One commit-log file mapped read-only, as the three views the decoder needs.

    ``mm`` for the walk, ``u8`` (numpy) for small gathers, ``arrow`` for
    zero-copy ``take``. Nothing is copied until a column is built.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.file_from = int(self.path.name)
        with open(self.path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            self.mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        data = self.mm if self.mm is not None else b""
        self.u8 = np.frombuffer(data, dtype=np.uint8)
        self.arrow = pa.py_buffer(self.u8)

    def close(self) -> None:
        """Drop the views; the mapping goes when the last array cut from it is gone."""
        self.u8 = np.empty(0, dtype=np.uint8)
        self.arrow = pa.py_buffer(b"")
        self.mm = None


_LARGE_BINARY: Final = pa.large_binary()


def _take_fixed(data: pa.Buffer, starts: np.ndarray, width: int) -> np.ndarray:
    """``width`` bytes at each of *starts* (ascending, ``starts[i] + width <= starts[i + 1]``), packed."""
    n = len(starts)
    if n == 0 or width == 0:
        return np.empty(0, dtype=np.uint8)
    offs = np.empty(2 * n, dtype=np.int64)
    offs[0::2] = starts
    offs[1::2] = starts + width
    spans = pa.Array.from_buffers(pa.large_binary(), 2 * n - 1, [None, pa.py_buffer(offs), data])
    taken = spans.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    return np.frombuffer(taken.buffers()[2], dtype=np.uint8, count=n * width)


def _cut(data: pa.Buffer, bounds: np.ndarray, fields: Iterable[int],
         kind: pa.DataType = _LARGE_BINARY) -> list[pa.Array]:  # fmt: skip
    """Cut fields out of records: *bounds* is (n, 2k) of ascending [start, end) pairs per record."""
    n, width = bounds.shape
    flat = np.ascontiguousarray(bounds, dtype=np.int64).reshape(-1)
    out = []
    if n == 0:
        return [pa.array([], type=kind) for _ in fields]
    spans = pa.Array.from_buffers(kind, len(flat) - 1, [None, pa.py_buffer(flat), data])
    for f in fields:
        out.append(spans.take(pa.array(np.arange(2 * f, len(flat), width, dtype=np.int64))))
    return out


def _offsets(arr: pa.Array) -> np.ndarray:
    """The offsets of a (large) binary/string array, as int64, relative to its data buffer."""
    dtype = np.int64 if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type) else np.int32
    offs = np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr) + 1, offset=arr.offset * dtype().itemsize)
    return offs.astype(np.int64)


def _data(arr: pa.Array) -> np.ndarray:
    buf = arr.buffers()[2]
    return np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.empty(0, dtype=np.uint8)


def _strings(arr: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """*arr* (binary) as ``string``, and a mask of rows that are not valid UTF-8 (decoded Java's way)."""
    try:
        return arr.cast(pa.large_string()).cast(pa.string()), np.zeros(len(arr), dtype=bool)
    except pa.ArrowInvalid:
        values = arr.to_pylist()
        bad = np.zeros(len(arr), dtype=bool)
        texts = []
        for i, v in enumerate(values):
            try:
                texts.append(v.decode("utf-8"))
            except UnicodeDecodeError:
                texts.append(decode_utf8_java(v))
                bad[i] = True
        return pa.array(texts, type=pa.string()), bad


def _lookup_null(values: pa.Array, rows: np.ndarray, index: np.ndarray, n: int) -> pa.Array:
    """An array of *n* rows: ``values[index[j]]`` at ``rows[j]``, null elsewhere."""
    take = np.full(n, -1, dtype=np.int64)
    take[rows] = index
    return values.take(pa.array(take, mask=take < 0))


# --- properties ---------------------------------------------------------------------------


class Properties:
    """The property strings of a batch, split into (row, name, value) entries.

    Entries keep the stored order; a name appears at most once per row (rows
    with duplicates are decoded by ``string_to_properties``, whose dict keeps
    the first position and the last value).
    """

    def __init__(self, raw: pa.LargeBinaryArray) -> None:
        n = len(raw)
        self.n = n
        offs = _offsets(raw)
        data = _data(raw)[: int(offs[-1]) if n else 0]
        sep = np.flatnonzero(data == 2)
        counts = np.bincount(np.searchsorted(offs, sep, side="right") - 1, minlength=n) + 1 if n else np.zeros(0, int)
        nseg = int(counts.sum())
        first = np.cumsum(counts) - counts
        is_first = np.zeros(nseg, dtype=bool)
        is_first[first] = True
        is_last = np.zeros(nseg, dtype=bool)
        is_last[first + counts - 1] = True
        start = np.empty(nseg, dtype=np.int64)
        end = np.empty(nseg, dtype=np.int64)
        start[is_first] = offs[:-1]
        start[~is_first] = sep + 1
        end[is_last] = offs[1:]
        end[~is_last] = sep
        row = np.repeat(np.arange(n, dtype=np.int64), counts)
        ones = np.flatnonzero(data == 1)
        j = np.searchsorted(ones, start)
        k = ones[np.minimum(j, len(ones) - 1)] if len(ones) else np.zeros(nseg, dtype=np.int64)
        valid = (j < len(ones)) & (k < end) & (k > start) & (k < end - 1)
        start, end, k, row = start[valid], end[valid], k[valid], row[valid]
        bounds = np.stack([start, k, k + 1, end], axis=1)
        data_buf = raw.buffers()[2]
        python_rows = np.zeros(n, dtype=bool)
        try:
            raw.cast(pa.large_string())  # one UTF-8 check of every property string
            utf8 = True
        except pa.ArrowInvalid:
            utf8 = False
        names_b, values_b = _cut(data_buf if data_buf is not None else pa.py_buffer(b""), bounds, (0, 1),
                                 pa.large_string() if utf8 else pa.large_binary())  # fmt: skip
        if utf8:  # pieces of valid UTF-8 cut at ASCII separators are valid UTF-8
            names, values = names_b.cast(pa.string()), values_b.cast(pa.string())
        else:
            names, bad_n = _strings(names_b)
            values, bad_v = _strings(values_b)
            python_rows[row[bad_n | bad_v]] = True
        enc = pc.dictionary_encode(names)
        codes = np.asarray(enc.indices, dtype=np.int64)
        python_rows |= self._duplicates(codes, len(enc.dictionary), row, n)
        if python_rows.any():
            names, values, row = self._decode_rows(raw, python_rows, names, values, row)
            enc = pc.dictionary_encode(names)
            codes = np.asarray(enc.indices, dtype=np.int64)
        self.names = names
        self.values = values
        self.row = row
        self._codes = codes
        self._kinds = {name: i for i, name in enumerate(enc.dictionary.to_pylist())}

    @staticmethod
    def _duplicates(idx: np.ndarray, kinds: int, row: np.ndarray, n: int) -> np.ndarray:
        """Rows in which a name (dictionary code *idx*) appears twice."""
        dup = np.zeros(n, dtype=bool)
        m = len(row)
        if m < 2:
            return dup
        group = np.flatnonzero(np.diff(row)) + 1
        starts = np.concatenate(([0], group))
        sizes = np.diff(np.concatenate((starts, [m])))
        if kinds <= 63:
            bits = np.left_shift(np.uint64(1), idx.astype(np.uint64))
            seen = np.bitwise_or.reduceat(bits, starts)
            dup[row[starts][np.bitwise_count(seen) != sizes]] = True
        else:
            key = row * kinds + idx
            key.sort()
            dup[key[1:][key[1:] == key[:-1]] // kinds] = True
        return dup

    @staticmethod
    def _decode_rows(raw: pa.Array, which: np.ndarray, names: pa.Array, values: pa.Array,
                     row: np.ndarray) -> tuple[pa.Array, pa.Array, np.ndarray]:  # fmt: skip
        """Replace the entries of rows *which* by ``string_to_properties`` of their bytes."""
        keep = ~which[row]
        extra_rows: list[int] = []
        extra_names: list[str] = []
        extra_values: list[str] = []
        for r in np.flatnonzero(which).tolist():
            for name, value in string_to_properties(decode_utf8_java(raw[r].as_py())).items():
                extra_rows.append(r)
                extra_names.append(name)
                extra_values.append(value)
        all_rows = np.concatenate((row[keep], np.array(extra_rows, dtype=np.int64)))
        order = pa.array(np.argsort(all_rows, kind="stable"))
        mask = pa.array(keep)
        names = pa.concat_arrays([names.filter(mask), pa.array(extra_names, type=pa.string())]).take(order)
        values = pa.concat_arrays([values.filter(mask), pa.array(extra_values, type=pa.string())]).take(order)
        return names, values, np.sort(all_rows, kind="stable")

    def get(self, name: str) -> pa.Array:
        """The value of property *name* in each row (null where absent)."""
        code = self._kinds.get(name)
        hit = np.flatnonzero(self._codes == code) if code is not None else np.zeros(0, dtype=np.int64)
        return _lookup_null(self.values, self.row[hit], hit, self.n)

    def to_map(self) -> pa.MapArray:
        offsets = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(np.bincount(self.row, minlength=self.n), out=offsets[1:])
        return pa.MapArray.from_arrays(pa.array(offsets), self.names, self.values)


def split_keys(keys: pa.Array) -> pa.ListArray:
    """``KEYS`` values split at spaces, empty tokens dropped (``MessageExt.getKeys`` split); null stays null."""
    parts = pc.split_pattern(keys, " ")
    n = len(keys)
    flat = pc.list_flatten(parts)
    parent = np.asarray(pc.list_parent_indices(parts), dtype=np.int64)
    keep = np.asarray(pc.greater(pc.binary_length(flat), 0), dtype=bool) if len(flat) else np.zeros(0, bool)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(parent[keep], minlength=n), out=offsets[1:])
    mask = np.asarray(keys.is_null(), dtype=bool)
    return pa.ListArray.from_arrays(pa.array(offsets), flat.filter(pa.array(keep)),
                                    type=ARROW_SCHEMA.field("keys").type, mask=pa.array(mask))  # fmt: skip


# --- Java string hashes over Arrow strings ----------------------------------------------------

_MASK32: Final = 0xFFFFFFFF


def java_hashes(strings: pa.Array) -> np.ndarray:
    """``String.hashCode`` of each string of *strings* (no nulls), as uint64 holding unsigned 32-bit values.

    The bytes of ASCII strings are their UTF-16 code units: all are hashed at once by
    :func:`~rocketq.common.javacompat.java_hashes_of_ranges` over the Arrow data
    buffer; a string with other bytes takes :func:`java_string_hash`.
    """
    n = len(strings)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    offs = _offsets(strings)
    data = _data(strings)
    out = java_hashes_of_ranges(data, offs[:-1], offs[1:])
    for r in _non_ascii_rows(data, offs).tolist():
        out[r] = java_string_hash(strings[r].as_py()) & _MASK32
    return out


def _non_ascii_rows(data: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """Rows (given by their *offs* into *data*) holding a byte of 0x80 or more."""
    high = np.flatnonzero(data[: int(offs[-1])] >= 0x80)
    if not len(high):
        return high
    return np.unique(np.searchsorted(offs, high, side="right") - 1)


# --- decoding -------------------------------------------------------------------------------

# Upper-case hex of each byte value, two ASCII digits packed in a uint16 (memory order = text order).
_HEX_PAIRS: Final = np.frombuffer(b"".join(f"{b:02X}".encode() for b in range(256)), dtype=np.uint16)


class RecordBlock:
    """Records of one commit-log file, decoded column by column (see the module doc).

    Built from record positions; ``bad`` holds a reason code per record (0 =
    good). :meth:`select` keeps a subset; columns are built for what is kept.
    """

    def __init__(self, f: CommitLogFile, positions: np.ndarray, *, check_crc: bool = False) -> None:
        self.file = f
        pos = np.asarray(positions, dtype=np.int64)
        n = len(pos)
        bad = np.zeros(n, dtype=np.int8)
        # A position list from consume-queue units may point anywhere: keep the positions that
        # leave room for a prefix and do not step back (the take below needs ascending spans).
        room = np.ones(n, dtype=bool)
        if n > 1:
            room[1:] = pos[1:] - pos[:-1] >= _PREFIX_LEN
        inside = (pos >= 0) & (pos + _PREFIX_LEN <= f.size)
        bad[~inside] = 2
        bad[inside & ~room] = 3
        ok_idx = np.flatnonzero(bad == 0)
        prefix = np.zeros(n, dtype=_PREFIX.newbyteorder("="))
        if len(ok_idx):
            raw = _take_fixed(f.arrow, pos[ok_idx], _PREFIX_LEN).view(_PREFIX)
            for name in _PREFIX.names:
                prefix[name][ok_idx] = raw[name]
        total = prefix["total"].astype(np.int64)
        magic = prefix["magic"]
        bad[(bad == 0) & (magic != MESSAGE_MAGIC_CODE) & (magic != MESSAGE_MAGIC_CODE_V2)] = 1
        end = pos + total
        bad[(bad == 0) & ((total < _PREFIX_LEN) | (end > f.size))] = 2
        if n > 1:
            good = np.flatnonzero(bad == 0)
            if len(good) > 1 and (end[good[:-1]] > pos[good[1:]]).any():
                last_end = -1
                for i in good.tolist():  # rare: units pointing into one another
                    if pos[i] < last_end:
                        bad[i] = 3
                    else:
                        last_end = int(end[i])
        sys_flag = prefix["sys"]
        group = ((sys_flag & _HOST_BITS) >> 4).astype(np.int8)
        born_len = np.where(group & 1, 16, 4)
        store_len = np.where(group & 2, 16, 4)
        hlen = 48 + born_len + 4 + 8 + store_len + 4 + 4 + 8 + 4  # through BODYLENGTH
        bad[(bad == 0) & (total < hlen + 3)] = 6
        self.born_addr = np.zeros((n, 16), dtype=np.uint8)
        self.store_addr = np.zeros((n, 16), dtype=np.uint8)
        rest = {k: np.zeros(n, dtype=np.int64) for k in ("born_port", "store_ts", "store_port", "reconsume",
                                                          "prepared", "body_len")}  # fmt: skip
        for g in np.unique(group[bad == 0]).tolist():
            idx = np.flatnonzero((bad == 0) & (group == g))
            blen, slen, dtype = _RESTS[g]
            raw = _take_fixed(f.arrow, pos[idx] + _PREFIX_LEN, dtype.itemsize).view(dtype)
            for k, arr in rest.items():
                arr[idx] = raw[k]
            self.born_addr[idx, :blen] = np.ascontiguousarray(raw["born_addr"]).view(np.uint8).reshape(-1, blen)
            self.store_addr[idx, :slen] = np.ascontiguousarray(raw["store_addr"]).view(np.uint8).reshape(-1, slen)
        v2 = magic == MESSAGE_MAGIC_CODE_V2
        body_start = pos + hlen
        body_len = rest["body_len"]
        tlen_pos = body_start + body_len
        tsz = np.where(v2, 2, 1)
        bad[(bad == 0) & ((body_len < 0) | (tlen_pos + tsz + 2 > end))] = 4
        u8 = f.u8
        safe = np.where(bad == 0, tlen_pos, 0)
        t_hi = u8[safe].astype(np.int64) if n else np.zeros(0, np.int64)
        t_lo = u8[np.minimum(safe + 1, max(f.size - 1, 0))].astype(np.int64) if n else np.zeros(0, np.int64)
        topic_len = np.where(v2, ((t_hi << 8) | t_lo) - ((t_hi & 0x80) << 9), t_hi - ((t_hi & 0x80) << 1))
        topic_start = tlen_pos + tsz
        plen_pos = topic_start + topic_len
        bad[(bad == 0) & ((topic_len < 0) | (plen_pos + 2 > end))] = 5
        safe = np.where(bad == 0, plen_pos, 0)
        p_hi = u8[safe].astype(np.int64) if n else np.zeros(0, np.int64)
        p_lo = u8[np.minimum(safe + 1, max(f.size - 1, 0))].astype(np.int64) if n else np.zeros(0, np.int64)
        props_len = ((p_hi << 8) | p_lo) - ((p_hi & 0x80) << 9)
        props_start = plen_pos + 2
        bad[(bad == 0) & ((props_len < 0) | (props_start + props_len != end))] = 6
        phys = prefix["phys"]
        bad[(bad == 0) & (phys != f.file_from + pos)] = 7
        self.n = n
        self.pos = pos
        self.bad = bad
        self.total = total
        self.magic = magic
        self.crc = prefix["crc"].astype(np.int32)
        self.queue_id = prefix["qid"].astype(np.int32)
        self.flag = prefix["flag"].astype(np.int32)
        self.queue_offset = prefix["qoff"].astype(np.int64)
        self.phys = phys.astype(np.int64)
        self.sys_flag = sys_flag.astype(np.int32)
        self.born_ts = prefix["born_ts"].astype(np.int64)
        self.born_port = rest["born_port"].astype(np.int32)
        self.store_ts = rest["store_ts"]
        self.store_port = rest["store_port"].astype(np.int32)
        self.reconsume = rest["reconsume"].astype(np.int32)
        self.prepared = rest["prepared"]
        self.group = group
        self.bounds = np.stack([body_start, tlen_pos, topic_start, plen_pos, props_start, end], axis=1)
        self._topics: pa.Array | None = None
        self._props: Properties | None = None
        if check_crc:
            self._check_crc()

    # --- selection ------------------------------------------------------------------
    def corrupt(self) -> list[Corrupt]:
        """The rejected records, in position order."""
        out = []
        for i in np.flatnonzero(self.bad).tolist():
            code = int(self.bad[i])
            reason = _REASONS.get(code, "unreadable")
            if code == 7:
                reason += f" (it says {int(self.phys[i])})"
            out.append(Corrupt(self.file.file_from + int(self.pos[i]), reason))
        return out

    def select(self, keep: np.ndarray) -> RecordBlock:
        """The records at indices *keep* (ascending) or where the boolean mask *keep* is set."""
        idx = np.flatnonzero(keep) if keep.dtype == bool else keep
        out = object.__new__(RecordBlock)
        for name, value in self.__dict__.items():
            if isinstance(value, np.ndarray) and value.shape[:1] == (self.n,):
                setattr(out, name, value[idx])
            else:
                setattr(out, name, value)
        out.n = len(idx)
        out._topics = self._topics.take(pa.array(idx)) if self._topics is not None else None
        out._props = None
        return out

    def good(self) -> RecordBlock:
        return self if not self.bad.any() else self.select(self.bad == 0)

    def _check_crc(self) -> None:
        """BODYCRC (crc32 of the stored body, top bit cleared) against the body."""
        idx = np.flatnonzero(self.bad == 0)
        u8 = self.file.u8
        for i in idx.tolist():
            s, e = int(self.bounds[i, 0]), int(self.bounds[i, 1])
            if s < e and (zlib.crc32(u8[s:e]) & 0x7FFFFFFF) != int(self.crc[i]):
                self.bad[i] = 9

    # --- variable fields ------------------------------------------------------------------
    def topics(self) -> pa.Array:
        """TOPIC of each record (``string``)."""
        if self._topics is None:
            (raw,) = _cut(self.file.arrow, self.bounds[:, 2:4], (0,))
            self._topics = _strings(raw)[0]
        return self._topics

    def properties(self) -> Properties:
        if self._props is None:
            (raw,) = _cut(self.file.arrow, self.bounds[:, 4:6], (0,))
            self._props = Properties(raw)
        return self._props

    def bodies(self) -> tuple[pa.Array, np.ndarray]:
        """Bodies with compressed ones inflated (:func:`rocketq.common.compression.decompress`); and the rows whose
        body does not inflate (corrupt, or its codec not installed)."""
        (raw,) = _cut(self.file.arrow, self.bounds[:, 0:2], (0,))
        failed = np.zeros(self.n, dtype=bool)
        compressed = (self.sys_flag & COMPRESSED_FLAG) != 0
        if compressed.any():
            rows = np.flatnonzero(compressed).tolist()
            inflated = []
            for r in rows:
                try:
                    inflated.append(decompress(raw[r].as_py(), int(self.sys_flag[r])))
                except CompressionError:
                    failed[r] = True
                    inflated.append(b"")
            if rows:
                mask = np.zeros(self.n, dtype=bool)
                mask[rows] = True
                raw = pc.replace_with_mask(raw, pa.array(mask), pa.array(inflated, type=pa.large_binary()))
        return raw.cast(pa.binary()), failed

    # --- columns ------------------------------------------------------------------------------
    def _hosts(self, addr: np.ndarray, port: np.ndarray, v6: np.ndarray) -> pa.Array:
        """``"ip:port"`` per record; the distinct (address, port) pairs are formatted once each."""
        n = self.n
        if not v6.any():  # the common case: hash one 64-bit key per record
            key = (addr[:, :4].copy().view(">u4").reshape(n).astype(np.uint64) << np.uint64(32)) | port.astype(
                np.uint32
            ).astype(np.uint64)
            enc = pc.dictionary_encode(pa.array(key))
            texts = []
            for k in enc.dictionary.to_pylist():
                ip = bytes_to_host(int(k >> 32).to_bytes(4, "big"))
                p = k & 0xFFFFFFFF
                texts.append(host_to_string((ip, p - (1 << 32) if p & 0x80000000 else p)))
            return pa.array(texts, type=pa.string()).take(enc.indices)
        raw = np.zeros((n, 21), dtype=np.uint8)
        raw[:, :16] = addr
        raw[:, 16:20] = port.astype(">i4").view(np.uint8).reshape(n, 4)
        raw[:, 20] = v6
        uniq, inverse = np.unique(raw.view("V21").reshape(-1), return_inverse=True)
        texts = []
        for u in uniq.tolist():
            b = bytes(u)
            a = b[:16] if b[20] else b[:4]
            texts.append(host_to_string((bytes_to_host(a), int.from_bytes(b[16:20], "big", signed=True))))
        return pa.array(texts, type=pa.string()).take(pa.array(inverse.reshape(-1)))

    def msg_ids(self) -> pa.Array:
        """The offset message id: hex of store address, port and commit-log offset (upper case)."""
        n = self.n
        v6 = (self.group & 2) != 0
        tail = np.empty((n, 12), dtype=np.uint8)
        tail[:, :4] = self.store_port.astype(">i4").view(np.uint8).reshape(n, 4)
        tail[:, 4:] = self.phys.astype(">i8").view(np.uint8).reshape(n, 8)
        if not v6.any():
            raw = np.empty((n, 16), dtype=np.uint8)
            raw[:, :4] = self.store_addr[:, :4]
            raw[:, 4:] = tail
            data = _HEX_PAIRS[raw].reshape(-1)
            offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
        else:
            raw = np.zeros((n, 28), dtype=np.uint8)
            raw[:, :16] = self.store_addr
            raw[~v6, 4:16] = tail[~v6]
            raw[v6, 16:28] = tail[v6]
            hexed = _HEX_PAIRS[raw].view(np.uint8).reshape(n, 56)
            lens = np.where(v6, 56, 32)
            offsets = np.zeros(n + 1, dtype=np.int32)
            np.cumsum(lens, out=offsets[1:])
            data = hexed[np.arange(56)[None, :] < lens[:, None]]
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])

    def record_batch(self, bodies: pa.Array | None = None) -> pa.RecordBatch:
        """The data source's row for each record (:data:`ARROW_SCHEMA`)."""
        if bodies is None:
            bodies, _ = self.bodies()
        props = self.properties()
        keys = props.get(PROPERTY_KEYS)
        cols = {
            "topic": self.topics(),
            "queueId": pa.array(self.queue_id),
            "queueOffset": pa.array(self.queue_offset),
            "commitLogOffset": pa.array(self.phys),
            "storeSize": pa.array(self.total.astype(np.int32)),
            "msgId": self.msg_ids(),
            "uniqKey": props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            "tags": props.get(PROPERTY_TAGS),
            "keys": split_keys(keys),
            "body": bodies,
            "properties": props.to_map(),
            "flag": pa.array(self.flag),
            "sysFlag": pa.array(self.sys_flag),
            "bodyCRC": pa.array(self.crc),
            "reconsumeTimes": pa.array(self.reconsume),
            "bornTimestamp": timestamp_array(self.born_ts),
            "storeTimestamp": timestamp_array(self.store_ts),
            "bornHost": self._hosts(self.born_addr, self.born_port, (self.group & 1) != 0),
            "storeHost": self._hosts(self.store_addr, self.store_port, (self.group & 2) != 0),
        }
        return pa.RecordBatch.from_arrays([cols[c] for c in COLUMNS], schema=ARROW_SCHEMA)

    # --- what dispatch needs -------------------------------------------------------------------
    def tag_codes(self, schedule_code: object = None) -> np.ndarray:
        """Consume-queue tag code of each record (``CommitLog.tags_code_of``).

        Distinct TAGS values are hashed once each; records of the schedule topic are
        handed to *schedule_code* (a ``RecordInfo -> int`` callable, the store's own rule).
        """
        props = self.properties()
        tags = props.get(PROPERTY_TAGS)
        codes = np.zeros(self.n, dtype=np.int64)
        enc = pc.dictionary_encode(tags)
        if len(enc.dictionary):
            table = np.array([java_string_hash(t) for t in enc.dictionary.to_pylist()], dtype=np.int64)
            idx = np.asarray(enc.indices.fill_null(-1), dtype=np.int64)
            has = idx >= 0
            codes[has] = table[idx[has]]
        if schedule_code is not None:
            from rocketq.common.mixall import RMQ_SYS_SCHEDULE_TOPIC

            sched = np.flatnonzero(np.asarray(pc.equal(self.topics(), RMQ_SYS_SCHEDULE_TOPIC), dtype=bool))
            for r in sched.tolist():
                entries = np.flatnonzero(props.row == r)
                info = RecordInfo(
                    True, int(self.total[r]), RMQ_SYS_SCHEDULE_TOPIC, int(self.queue_id[r]), int(self.phys[r]),
                    int(self.queue_offset[r]), int(self.store_ts[r]), int(self.sys_flag[r]),
                    int(self.prepared[r]),
                    dict(zip(props.names.take(pa.array(entries)).to_pylist(),
                             props.values.take(pa.array(entries)).to_pylist(), strict=True)),
                )  # fmt: skip
                codes[r] = schedule_code(info)  # type: ignore[operator]
        return codes

    def index_keys(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The index entries of these records in dispatch order (``IndexService.buildIndex``).

        Per record (not a rolled-back transaction): ``topic#UNIQ_KEY`` then
        ``topic#key`` for each space-separated key. Returns (key hash as
        ``indexKeyHashMethod``, commit-log offset, store timestamp, record index).
        """
        props = self.properties()
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        keys = split_keys(props.get(PROPERTY_KEYS))
        live = (self.sys_flag & TRANSACTION_MASK) != TRANSACTION_ROLLBACK_TYPE
        # Key strings with their record; order within a record: the unique key first.
        u_rows = np.flatnonzero(live & ~np.asarray(uniq.is_null(), dtype=bool))
        k_flat = pc.list_flatten(keys)
        k_rows = np.asarray(pc.list_parent_indices(keys), dtype=np.int64)
        k_live = live[k_rows]
        k_rows = k_rows[k_live]
        k_vals = k_flat.filter(pa.array(k_live))
        # Dispatch order (by record; the unique key first) by where each key goes, no sort: a record's keys
        # start after those of the records before it.
        n = self.n
        has_u = np.zeros(n, dtype=np.int64)
        has_u[u_rows] = 1
        per_row = np.bincount(k_rows, minlength=n)
        first_k = np.cumsum(per_row) - per_row
        start = np.cumsum(has_u + per_row) - (has_u + per_row)
        nu, nk = len(u_rows), len(k_rows)
        dest = np.concatenate((start[u_rows], start[k_rows] + has_u[k_rows] + np.arange(nk) - first_k[k_rows]))
        order = np.empty(nu + nk, dtype=np.int64)
        order[dest] = np.arange(nu + nk)
        rows = np.concatenate((u_rows, k_rows))[order]
        strings = pa.concat_arrays([uniq.take(pa.array(u_rows)).cast(pa.string()), k_vals.cast(pa.string())])
        offs = _offsets(strings)
        data = _data(strings)
        lens = np.diff(offs)
        # hash(topic + "#" + key) from hash(topic + "#") and the key's hash and length (UTF-16 units: bytes for
        # ASCII); keys or topics that are not plain ASCII take the exact path below.
        key_hash = java_hashes_of_ranges(data, offs[:-1], offs[1:])[order]
        topics = self.topics()
        enc = pc.dictionary_encode(topics)
        topic_names = enc.dictionary.to_pylist()
        prefix = np.array([java_string_hash(t + "#") & _MASK32 for t in topic_names], dtype=np.uint64)
        t_idx = np.asarray(enc.indices, dtype=np.int64)[rows]
        h = index_key_hashes_of(java_hashes_after(prefix[t_idx], key_hash, lens[order]))
        odd = np.flatnonzero(np.isin(order, _non_ascii_rows(data, offs)))
        odd_topics = [i for i, t in enumerate(topic_names) if not t.isascii()]
        if odd_topics:
            odd = np.union1d(odd, np.flatnonzero(np.isin(t_idx, odd_topics)))
        for i in odd.tolist():
            h[i] = index_key_hash(f"{topic_names[t_idx[i]]}#{strings[int(order[i])].as_py()}")
        return h, self.phys[rows], self.store_ts[rows], rows


def timestamp_array(ms: np.ndarray) -> pa.Array:
    """Milliseconds since the epoch as the schema's UTC timestamp column (microseconds), clipped to its range."""
    us = np.clip(ms, -(2**63) // 1000, (2**63 - 1) // 1000) * 1000
    return pa.Array.from_buffers(TIMESTAMP, len(us), [None, pa.py_buffer(np.ascontiguousarray(us, dtype=np.int64))])
