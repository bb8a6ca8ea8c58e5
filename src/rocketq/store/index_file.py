"""One hash index file: RocketMQ's ``IndexFile`` with its ``IndexHeader``.

Mirrors ``store/index/IndexFile.java`` and ``store/index/IndexHeader.java``
(RocketMQ 4.9; store-format §5). A file is ``index/<yyyyMMddHHmmssSSS>`` of
``40 + slots × 4 + entries × 20`` bytes, big-endian, created sparse at full size::

    header   0   40            beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 |
                               endPhyOffset i64 | hashSlotCount i32 | indexCount i32
    slots    40  slots × 4     slot s: i32 number of the newest entry whose keyHash % slots == s, 0 = empty
    entries  40 + 4 × slots    entry n (20 bytes): keyHash i32 | phyOffset i64 |
                               timeDiff i32 (seconds since beginTimestamp) | prev i32 (chain, 0 = none)

Entry 0 is never used; ``indexCount`` is the number of the next entry, so a
file holds at most ``entries − 1`` keys. Slots head singly linked chains that
run from newer to older entries. Only hashes are stored, so a lookup can return
offsets of other keys; callers compare the keys of the loaded messages.

The header values are cached in attributes (Java keeps them in atomics) and
the whole header is rewritten with one precompiled struct after every key.
"""

from __future__ import annotations

import os
import struct
from operator import mul as _mul
from pathlib import Path

import numpy as np

from rocketq.common.errors import StoreError
from rocketq.common.javacompat import java_string_hash, java_string_hashes
from rocketq.store.mapped_file import OS_PAGE_SIZE, MappedFile, notify_synced

INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_SIZE = 20
INVALID_INDEX = 0

_INT_MAX = 0x7FFFFFFF
SMALL_BATCH = 16  # put_keys takes fewer keys than this one by one
_HEADER = struct.Struct(">qqqqii")
_SLOT = struct.Struct(">i")
_ENTRY = struct.Struct(">iqii")
_I64 = struct.Struct(">q")
_BEGIN_TIMESTAMP_POS = 0
_END_TIMESTAMP_POS = 8
_BEGIN_PHY_OFFSET_POS = 16
_END_PHY_OFFSET_POS = 24
_POW31 = tuple(pow(31, i, 1 << 32) for i in range(1024))  # 31^i mod 2^32


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """Byte size of an index file with *hash_slot_num* slots and *index_num* entries."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE


def index_key_hash(key: str) -> int:
    """``IndexFile.indexKeyHashMethod``: ``|String.hashCode|``, and 0 for ``Integer.MIN_VALUE``.

    Java's ``Math.abs(Integer.MIN_VALUE)`` stays negative, which the method maps to 0.
    """
    if len(key) <= len(_POW31) and key.isascii():
        # Hashing is most of the cost of indexing a key. For ASCII the UTF-16 code units are the
        # bytes, and sum(c[i]·31^(n−1−i)) mod 2^32 runs in C loops, about twice as fast as the
        # per-character loop of java_string_hash (which handles everything else).
        h = sum(map(_mul, key.encode()[::-1], _POW31)) & 0xFFFFFFFF
        if h & 0x80000000:
            h = 0x100000000 - h
    else:
        h = java_string_hash(key)
        if h < 0:
            h = -h
    return h if h <= _INT_MAX else 0


def index_key_hashes(keys: list[str]) -> np.ndarray:
    """:func:`index_key_hash` of many keys at once (int64 array)."""
    return index_key_hashes_of(java_string_hashes(keys))


def index_key_hashes_of(java_hashes: np.ndarray) -> np.ndarray:
    """:func:`index_key_hash` from ``String.hashCode`` values given as unsigned 32-bit numbers (int64 array)."""
    h = java_hashes.astype(np.int64)
    neg = h >= 0x80000000
    h[neg] = 0x100000000 - h[neg]  # |signed value|
    h[h > _INT_MAX] = 0  # Math.abs(Integer.MIN_VALUE) stays negative: Java maps it to 0
    return h


def _group_by_slot(slots: np.ndarray, slot_num: int) -> tuple[np.ndarray, np.ndarray]:
    """Batch positions sorted by slot, keeping batch order within a slot; and the sorted slots.

    ``argsort(kind="stable")`` of millions of keys is most of a large batch's cost
    (a merge sort). With the position packed under the slot every key is distinct,
    so numpy's much faster unstable sort gives the same order.
    """
    n = len(slots)
    shift = max(1, (n - 1).bit_length())
    if shift + max(1, (slot_num - 1).bit_length()) > 62:
        order = np.argsort(slots, kind="stable")
        return order, slots[order]
    packed = (slots.astype(np.int64) << shift) | np.arange(n, dtype=np.int64)
    packed.sort()
    return packed & ((1 << shift) - 1), packed >> shift


_ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])


class IndexFile:
    """An index file mapped whole; ``put_key`` appends, ``select_phy_offsets`` looks up."""

    __slots__ = (
        "_begin_phy_offset",
        "_begin_timestamp",
        "_end_phy_offset",
        "_end_timestamp",
        "_entries_base",
        "_hash_slot_count",
        "_index_count",
        "_mapped",
        "_mm",
        "hash_slot_num",
        "index_num",
        "path",
        "read_only",
    )

    def __init__(self, path: str | os.PathLike[str], hash_slot_num: int, index_num: int, *,
                 read_only: bool = False, create: bool = False) -> None:  # fmt: skip
        """Map the file and load its header (``IndexFile`` + ``IndexHeader.load``).

        A brand-new file reads as all zeros, which loads exactly like Java's fresh
        in-memory header (indexCount 1).
        """
        self.path = Path(path)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.read_only = read_only
        self._entries_base = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        self._mapped = MappedFile(self.path, index_file_size(hash_slot_num, index_num),
                                  read_only=read_only, create=create)  # fmt: skip
        if create:
            # The header page is read and written at once: a full disk fails here, not as a SIGBUS.
            try:
                self._mapped.reserve(0, min(OS_PAGE_SIZE, self._mapped.file_size))
            except StoreError:
                self._mapped.destroy()
                raise
        self._mm = self._mapped.mm
        (
            self._begin_timestamp,
            self._end_timestamp,
            self._begin_phy_offset,
            self._end_phy_offset,
            self._hash_slot_count,
            self._index_count,
        ) = _HEADER.unpack_from(self._mm, 0)
        if self._index_count <= 0:
            self._index_count = 1

    @classmethod
    def create(cls, path: str | os.PathLike[str], hash_slot_num: int, index_num: int,
               end_phy_offset: int = 0, end_timestamp: int = 0) -> IndexFile:  # fmt: skip
        """A new file following one whose end values are given (§5.3).

        As in Java's constructor, positive end values of the previous file become
        both begin and end values here and are written into the header at once;
        the counters are not written until the first key.
        """
        path = Path(path)
        if path.exists():
            raise StoreError(f"{path}: index file already exists")
        path.parent.mkdir(parents=True, exist_ok=True)
        f = cls(path, hash_slot_num, index_num, create=True)
        mm = f._mm
        if end_phy_offset > 0:
            f._begin_phy_offset = f._end_phy_offset = end_phy_offset
            _I64.pack_into(mm, _BEGIN_PHY_OFFSET_POS, end_phy_offset)
            _I64.pack_into(mm, _END_PHY_OFFSET_POS, end_phy_offset)
        if end_timestamp > 0:
            f._begin_timestamp = f._end_timestamp = end_timestamp
            _I64.pack_into(mm, _BEGIN_TIMESTAMP_POS, end_timestamp)
            _I64.pack_into(mm, _END_TIMESTAMP_POS, end_timestamp)
        return f

    # --- header ---------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.path.name

    @property
    def begin_timestamp(self) -> int:
        return self._begin_timestamp

    @property
    def end_timestamp(self) -> int:
        return self._end_timestamp

    @property
    def begin_phy_offset(self) -> int:
        return self._begin_phy_offset

    @property
    def end_phy_offset(self) -> int:
        return self._end_phy_offset

    @property
    def hash_slot_count(self) -> int:
        return self._hash_slot_count

    @property
    def index_count(self) -> int:
        return self._index_count

    def is_write_full(self) -> bool:
        return self._index_count >= self.index_num

    def is_time_matched(self, begin: int, end: int) -> bool:
        """Whether [begin, end] touches the file's time range (Java's three clauses, kept as is)."""
        b = self._begin_timestamp
        e = self._end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)

    # --- writing --------------------------------------------------------------
    def _reserve(self, pos: int, end: int) -> None:
        """Give blocks to the file before keys are written through its mapping (the file is sparse): the header
        and the slot table whole, the first time (keys land in slots at random), then the entries from *pos* to
        *end* and some way past (:meth:`MappedFile.reserve_ahead`). A full disk is then a StoreError here,
        before anything is written, never a SIGBUS on a hole of the mapping."""
        mapped = self._mapped
        if mapped.reserved_to < self._entries_base:
            mapped.reserve(0, self._entries_base)
        mapped.reserve_ahead(pos, end)

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Add one key (§5.6); False when the file is full."""
        if self._index_count >= self.index_num:
            return False
        return self.put_key_hashed(index_key_hash(key), phy_offset, store_timestamp)

    def put_key_hashed(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """:meth:`put_key` for a precomputed :func:`index_key_hash`."""
        n = self._index_count
        if n >= self.index_num:
            return False
        entry_pos = self._entries_base + n * INDEX_SIZE
        if entry_pos + INDEX_SIZE > self._mapped.reserved_to:
            self._reserve(entry_pos, entry_pos + INDEX_SIZE)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE
        mm = self._mm
        prev = _SLOT.unpack_from(mm, slot_pos)[0]
        if prev <= INVALID_INDEX or prev > n:
            prev = INVALID_INDEX
        # The diff uses beginTimestamp as it is before this key: in a follow-up file the first
        # entry is measured from the previous file's end, as Java does.
        begin_ts = self._begin_timestamp
        diff = store_timestamp - begin_ts
        if begin_ts <= 0 or diff <= 0:
            diff = 0  # Java truncates toward zero and clamps negatives to 0
        else:
            diff //= 1000
            if diff > _INT_MAX:
                diff = _INT_MAX
        _ENTRY.pack_into(mm, entry_pos, key_hash, phy_offset, diff, prev)
        _SLOT.pack_into(mm, slot_pos, n)
        if n <= 1:
            self._begin_phy_offset = phy_offset
            self._begin_timestamp = begin_ts = store_timestamp
        if prev == INVALID_INDEX:
            self._hash_slot_count += 1
        self._index_count = n + 1
        self._end_phy_offset = phy_offset
        self._end_timestamp = store_timestamp
        _HEADER.pack_into(mm, 0, begin_ts, store_timestamp, self._begin_phy_offset, phy_offset,
                          self._hash_slot_count, n + 1)  # fmt: skip
        return True

    def put_keys(self, hashes: np.ndarray, phys: np.ndarray, times: np.ndarray) -> int:
        """Add many keys with precomputed :func:`index_key_hashes`; return how many fit.

        The same entries, slot heads and header as that many :meth:`put_key` calls,
        written as one block: entries back to back, each slot head set to the newest
        entry of the batch in that slot, the header once. The first entry of a file
        (which sets beginTimestamp) goes through :meth:`put_key` to keep its quirk.
        """
        total = len(hashes)
        if total <= SMALL_BATCH:  # numpy's fixed costs outweigh its speed: key by key
            done = 0
            for h1, p1, t1 in zip(hashes.tolist(), phys.tolist(), times.tolist(), strict=True):
                if not self.put_key_hashed(h1, p1, t1):
                    break
                done += 1
            return done
        done = 0
        if self._index_count <= 1:
            if not self.put_key_hashed(int(hashes[0]), int(phys[0]), int(times[0])):
                return 0
            done = 1
        n0 = self._index_count
        count = min(total - done, self.index_num - n0)
        if count <= 0:
            return done
        start = self._entries_base + n0 * INDEX_SIZE
        if start + count * INDEX_SIZE > self._mapped.reserved_to:
            self._reserve(start, start + count * INDEX_SIZE)
        h = hashes[done : done + count]
        p = phys[done : done + count]
        t = times[done : done + count]
        slots = h % self.hash_slot_num
        slot_table = np.frombuffer(self._mm, dtype=">i4", count=self.hash_slot_num, offset=INDEX_HEADER_SIZE)
        try:
            prev = slot_table[slots].astype(np.int64)
            prev[(prev <= INVALID_INDEX) | (prev > n0)] = INVALID_INDEX
            # Within the batch, a key's chain link is the previous key of the batch in its slot.
            order, ss = _group_by_slot(slots, self.hash_slot_num)
            same = np.empty(count, dtype=bool)
            same[0] = False
            same[1:] = ss[1:] == ss[:-1]
            prev_sorted = prev[order]
            sorted_nums = order + n0
            prev_sorted[same] = sorted_nums[:-1][same[1:]]
            prev[order] = prev_sorted
            last_in_slot = np.ones(count, dtype=bool)
            last_in_slot[:-1] = ~same[1:]
            slot_table[ss[last_in_slot]] = sorted_nums[last_in_slot]
        finally:
            del slot_table
        begin_ts = self._begin_timestamp
        if begin_ts <= 0:
            diff = np.zeros(count, dtype=np.int64)
        else:
            diff = np.clip((t - begin_ts) // 1000, 0, _INT_MAX)
            diff[t - begin_ts <= 0] = 0  # Java truncates toward zero; negatives clamp to 0
        # Written in place through a view of the mapping (no staging copy of the batch).
        entries = np.frombuffer(self._mm, dtype=_ENTRY_DTYPE, count=count, offset=self._entries_base + n0 * INDEX_SIZE)
        try:
            entries["hash"] = h
            entries["phy"] = p
            entries["diff"] = diff
            entries["prev"] = prev
        finally:
            del entries
        self._hash_slot_count += int(np.count_nonzero(prev == INVALID_INDEX))
        self._index_count = n0 + count
        self._end_phy_offset = end_phy = int(p[-1])
        self._end_timestamp = end_ts = int(t[-1])
        _HEADER.pack_into(self._mm, 0, begin_ts, end_ts, self._begin_phy_offset, end_phy,
                          self._hash_slot_count, self._index_count)  # fmt: skip
        return done + count

    # --- reading --------------------------------------------------------------
    def select_phy_offsets(self, phy_offsets: list[int], key: str, max_num: int, begin: int,
                           end: int) -> None:  # fmt: skip
        """Append to *phy_offsets* the offsets of entries for *key* stored in [begin, end] (§5.7)."""
        self.select_phy_offsets_by_hash(phy_offsets, index_key_hash(key), max_num, begin, end)

    def select_phy_offsets_by_hash(self, phy_offsets: list[int], key_hash: int, max_num: int,
                                   begin: int, end: int) -> None:  # fmt: skip
        """As :meth:`select_phy_offsets` for a precomputed :func:`index_key_hash`."""
        count = self._index_count
        found = len(phy_offsets)
        if count <= 1 or found >= max_num:
            return
        mm = self._mm
        n = _SLOT.unpack_from(mm, INDEX_HEADER_SIZE + (key_hash % self.hash_slot_num) * HASH_SLOT_SIZE)[0]
        if n <= INVALID_INDEX or n > count:
            return
        base = self._entries_base
        begin_ts = self._begin_timestamp
        unpack = _ENTRY.unpack_from
        append = phy_offsets.append
        while found < max_num:
            h, phy, diff, prev = unpack(mm, base + n * INDEX_SIZE)
            if diff < 0:
                break
            t = begin_ts + diff * 1000
            if h == key_hash and begin <= t <= end:
                append(phy)
                found += 1
            # A chain only ever points to older entries; Java stops on prev == n, stopping on
            # prev >= n gives the same walk over any file it wrote and cannot cycle on a damaged one.
            if prev <= INVALID_INDEX or prev >= n or t < begin:
                break
            n = prev

    # --- life cycle -------------------------------------------------------------
    def flush(self) -> None:
        """Rewrite the header from the cached values and msync (``IndexFile.flush``)."""
        if self.read_only or self._mm is None:
            return
        _HEADER.pack_into(self._mm, 0, self._begin_timestamp, self._end_timestamp, self._begin_phy_offset,
                          self._end_phy_offset, self._hash_slot_count, self._index_count)  # fmt: skip
        self._mapped.sync()  # not mmap.flush: that msync holds the GIL (MappedFile.sync)
        notify_synced(self.path, self._mm, 0, len(self._mm))  # test hook (fault tests)

    def close(self) -> None:
        self._mapped.close()
        self._mm = None

    def destroy(self) -> None:
        self._mapped.destroy()
        self._mm = None

    def __repr__(self) -> str:
        return (
            f"IndexFile({self.name}, count={self._index_count}, ts=[{self._begin_timestamp}, "
            f"{self._end_timestamp}], phy=[{self._begin_phy_offset}, {self._end_phy_offset}])"
        )
