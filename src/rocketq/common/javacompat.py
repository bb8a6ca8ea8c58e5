"""Java-compatible primitives the on-disk formats depend on.

- ``java_string_hash``: ``String.hashCode`` over UTF-16 code units (tag codes,
  index keys, HashMap bucket order). Spec: store-format §2.1.
- ``crc32_masked``: ``UtilAll.crc32``: zlib CRC-32 with the top bit cleared
  (§2.2).
- ``hashmap_order``: the iteration order of a ``java.util.HashMap`` built by
  inserting names in a given order, used to store property strings
  byte-identically to a Java broker (§3.5.4).
- ``decode_utf8_java``: UTF-8 decoding with U+FFFD for malformed input, as
  Java's decoder does.
- ``java_string_hashes`` / ``java_string_hashes_after``: ``String.hashCode``
  of many strings at once with numpy (index keys are hashed a batch at a time).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from itertools import repeat

import numpy as np

_MASK32 = 0xFFFFFFFF


def java_string_hash(s: str) -> int:
    """Return Java's ``String.hashCode`` of *s* as a signed 32-bit int."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & _MASK32
    else:
        units = s.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return h - 0x100000000 if h & 0x80000000 else h


def crc32_masked(data: bytes | bytearray | memoryview) -> int:
    """``UtilAll.crc32``: CRC-32 (IEEE) with bit 31 cleared; 0 for empty data."""
    if not data:
        return 0
    return zlib.crc32(data) & 0x7FFFFFFF


def decode_utf8_java(data: bytes | bytearray | memoryview) -> str:
    """Decode UTF-8 like ``new String(bytes, UTF_8)``: malformed input → U+FFFD."""
    return bytes(data).decode("utf-8", "replace")


def encode_utf8_java(s: str) -> bytes:
    """Encode like ``String.getBytes(UTF_8)``: an unpaired surrogate becomes ``?``."""
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace")


def _bucket(name: str, buckets: int) -> int:
    h = java_string_hash(name) & _MASK32
    return (h ^ (h >> 16)) & (buckets - 1)


def hashmap_order(names: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """Names in the iteration order of a Java ``HashMap`` they were put into.

    *names* are in insertion order (a repeated name keeps its first place).
    The table starts at *initial_capacity* buckets (a power of two) and doubles
    whenever the entry count exceeds 0.75 × buckets; iteration goes by bucket,
    then by insertion order within a bucket (resizing preserves that order).
    """
    seen: dict[str, None] = {}
    for n in names:
        seen.setdefault(n, None)
    ordered = list(seen)
    buckets = 1
    while buckets < initial_capacity:
        buckets <<= 1
    while len(ordered) > buckets * 3 // 4:
        buckets <<= 1
    index = {n: i for i, n in enumerate(ordered)}
    return sorted(ordered, key=lambda n: (_bucket(n, buckets), index[n]))


_POW31_U64 = np.ones(1, dtype=np.uint64)


def _pow31_table(n: int) -> np.ndarray:
    """31^i mod 2^32 for i < n (grown on demand)."""
    global _POW31_U64
    if len(_POW31_U64) < n:
        size = max(n, 2 * len(_POW31_U64), 256)
        table = np.empty(size, dtype=np.uint64)
        acc = 1
        for i in range(size):
            table[i] = acc
            acc = (acc * 31) & _MASK32
        _POW31_U64 = table
    return _POW31_U64


def java_string_hashes(strings: list[str]) -> np.ndarray:
    """``String.hashCode`` of many strings at once, as unsigned 32-bit values (uint64 array)."""
    return _hashes_and_lengths(strings)[0]


def _hashes_and_lengths(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``String.hashCode`` (uint64) and ``String.length()`` (int64) of each string.

    For ASCII text h = Σ c[i]·31^(n−1−i) mod 2^32 is a weighted sum: the strings
    are right-aligned in a zero-padded matrix (leading zeros add nothing) and
    multiplied by the vector of powers of 31, or, when their lengths differ too
    much for a matrix, summed with ``reduceat``. Other text takes the scalar path.
    """
    count = len(strings)
    if count == 0:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    joined = "".join(strings)
    if not joined.isascii():
        hashes = np.array([java_string_hash(s) & _MASK32 for s in strings], dtype=np.uint64)
        lens = np.fromiter((len(s.encode("utf-16-le", "surrogatepass")) // 2 for s in strings), dtype=np.int64,
                           count=count)  # fmt: skip
        return hashes, lens
    lens = np.fromiter(map(len, strings), dtype=np.int64, count=count)
    width = int(lens.max())
    if width == 0:
        return np.zeros(count, dtype=np.uint64), lens
    pow31 = _pow31_table(width)
    if count * width <= 4 * len(joined) + 4096:
        padded = "".join(map(str.rjust, strings, repeat(width, count), repeat("\0", count))).encode("ascii")
        matrix = np.frombuffer(padded, dtype=np.uint8).reshape(count, width)
        # Each term is below 2^8 · 2^32, so a row of up to 2^24 of them cannot overflow 64 bits.
        sums = matrix @ pow31[width - 1 :: -1]
        return sums.astype(np.uint64) & np.uint64(_MASK32), lens
    data = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).astype(np.uint64)
    ends = np.cumsum(lens)
    exponents = np.repeat(ends, lens) - 1 - np.arange(len(data), dtype=np.int64)
    weighted = data * pow31[exponents]
    nonempty = lens > 0
    sums = np.zeros(count, dtype=np.uint64)
    sums[nonempty] = np.add.reduceat(weighted, (ends - lens)[nonempty])
    return sums & np.uint64(_MASK32), lens


def java_string_hashes_after(prefix_hashes: np.ndarray, strings: list[str]) -> np.ndarray:
    """``String.hashCode`` of ``prefix[i] + strings[i]`` from the hash of each prefix (uint64 arrays of
    unsigned 32-bit values).

    h(p + s) = h(p)·31^len(s) + h(s) mod 2^32, so a common prefix (an index key's
    ``topic#``) is hashed once, not once per key.
    """
    if not strings:
        return np.empty(0, dtype=np.uint64)
    hashes, lens = _hashes_and_lengths(strings)
    weights = _pow31_table(int(lens.max()) + 1)[lens]
    # Both factors are below 2^32 and so is the hash added: the sum stays below 2^64.
    return (prefix_hashes * weights + hashes) & np.uint64(_MASK32)
