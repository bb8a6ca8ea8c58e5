"""Java-compatible primitives the on-disk formats depend on.

- ``java_string_hash``: ``String.hashCode`` over UTF-16 code units (tag codes,
  index keys, HashMap bucket order). Spec: store-format §2.1.
- ``crc32_masked``: ``UtilAll.crc32``: zlib CRC-32 with the top bit cleared
  (§2.2).
- ``hashmap_order``: the iteration order of a ``java.util.HashMap`` built by
  inserting names in a given order, used to store property strings
  byte-identically to a Java broker (§3.5.4); ``hashmap_ordered`` re-orders a map so.
- ``decode_utf8_java``: UTF-8 decoding with U+FFFD for malformed input, as
  Java's decoder does.
- ``java_string_hashes`` / ``java_string_hashes_after``: ``String.hashCode``
  of many strings at once with numpy (index keys are hashed a batch at a time).
- ``parse_java_int``: ``Integer.parseInt``'s accepted texts (a property such as ``DELAY``).
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np

_MASK32 = 0xFFFFFFFF
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_V = TypeVar("_V")


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


def parse_java_int(text: str) -> int | None:
    """``Integer.parseInt``: an optional sign and ASCII digits, within 32 bits; None where Java would throw
    (Python's ``int`` also takes spaces, underscores and other digits)."""
    if not _JAVA_INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << 31) <= value < (1 << 31) else None


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
    return list(_hashmap_order(tuple(dict.fromkeys(names)), initial_capacity))


def hashmap_key_order(mapping: dict[str, Any]) -> tuple[str, ...]:
    """The keys of *mapping* (in insertion order) in the order a Java ``HashMap`` of its entries iterates them."""
    return _hashmap_order(tuple(mapping), 16)


def hashmap_ordered(mapping: dict[str, _V]) -> dict[str, _V]:
    """*mapping* (in insertion order) re-ordered as a Java ``HashMap`` of its entries iterates
    (:func:`hashmap_order`); *mapping* itself when that is its order already."""
    names = tuple(mapping)
    order = _hashmap_order(names, 16)
    if order == names:
        return mapping
    return {k: mapping[k] for k in order}


# Property and header name sets repeat (every message of a producer has the same ones): most calls are a lookup.
@functools.lru_cache(maxsize=4096)
def _hashmap_order(unique: tuple[str, ...], initial_capacity: int) -> tuple[str, ...]:
    buckets = 1
    while buckets < initial_capacity:
        buckets <<= 1
    while len(unique) > buckets * 3 // 4:
        buckets <<= 1
    index = {n: i for i, n in enumerate(unique)}
    return tuple(sorted(unique, key=lambda n: (_bucket(n, buckets), index[n])))


_INV31 = pow(31, -1, 1 << 32)  # 31 is odd, so it has an inverse modulo 2^32
_POWERS: dict[int, np.ndarray] = {31: np.ones(1, dtype=np.uint64), _INV31: np.ones(1, dtype=np.uint64)}


def _powers(base: int, n: int) -> np.ndarray:
    """base^i mod 2^32 for i < n (at least; grown on demand by doubling), as uint64."""
    table = _POWERS[base]
    if len(table) < n:
        size = max(n, 2 * len(table), 256)
        grown = np.empty(size, dtype=np.uint64)
        grown[: len(table)] = table
        done = len(table)
        while done < size:
            step = min(done, size - done)
            # base^(done + i) = base^i · base^done: both below 2^32, so the product fits 64 bits.
            grown[done : done + step] = (grown[:step] * np.uint64(pow(base, done, 1 << 32))) & np.uint64(_MASK32)
            done += step
        _POWERS[base] = table = grown
    return table


def _pow31_table(n: int) -> np.ndarray:
    """31^i mod 2^32 for i < n (at least)."""
    return _powers(31, n)


def java_string_hashes(strings: list[str]) -> np.ndarray:
    """``String.hashCode`` of many strings at once, as unsigned 32-bit values (uint64 array)."""
    return java_hashes_and_lengths(strings)[0]


def java_hashes_and_lengths(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``String.hashCode`` (uint64) and ``String.length()`` (int64) of each string.

    ASCII text goes through :func:`java_hashes_of_ranges` (its bytes are its UTF-16
    code units); other text takes the scalar path.
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
    ends = np.cumsum(lens)
    return java_hashes_of_ranges(np.frombuffer(joined.encode("ascii"), dtype=np.uint8), ends - lens, ends), lens


def java_hashes_of_ranges(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``String.hashCode`` of the ASCII text in ``data[starts[i]:ends[i]]`` for every i (uint64 array).

    h(s, e) = Σ c[j]·31^(e−1−j) mod 2^32 over s ≤ j < e. The ranges are copied
    left-aligned into a matrix as wide as the longest (rows of a sliding-window
    view, the bytes past a range's end masked to zero) and multiplied by the
    powers of 31: that gives 31^(width−len)·h, and multiplying by the inverse of
    31 (odd, so invertible modulo 2^32) to the power width−len leaves h. When the
    lengths differ too much for a matrix, one running sum serves all ranges:
    h(s, e) = 31^(e−1) · (G(e) − G(s)) with G(i) = Σ_{j<i} c[j]·31^(−j).
    """
    count = len(starts)
    if count == 0:
        return np.empty(0, dtype=np.uint64)
    lens = ends - starts
    width = int(lens.max())
    if width == 0:
        return np.zeros(count, dtype=np.uint64)
    mask = np.uint64(_MASK32)
    if count * width > 4 * int(lens.sum()) + 4096:
        size = len(data)
        # Each term is below 2^32 after the mask, so the sum of fewer than 2^32 of them fits 64 bits.
        running = np.empty(size + 1, dtype=np.uint64)
        running[0] = 0
        np.cumsum((data.astype(np.uint64) * _powers(_INV31, size)[:size]) & mask, out=running[1:])
        diff = (running[ends] - running[starts]) & mask
        return (diff * _powers(31, size)[np.maximum(ends - 1, 0)]) & mask
    if int(starts.max()) + width > len(data):
        data = np.concatenate((data, np.zeros(width, dtype=data.dtype)))
    # Row i of this view is data[i : i + width] (a sliding window, no copy); taking rows copies them.
    windows = np.ndarray((len(data) - width + 1, width), dtype=np.uint8, buffer=data, strides=(1, 1))
    rows = windows[starts]
    full = int(lens.min()) == width
    if not full:
        rows = rows * (np.arange(width) < lens[:, None])
    # Each term is below 2^8 · 2^32, so a row of up to 2^24 of them cannot overflow 64 bits.
    hashes = (rows @ _powers(31, width)[width - 1 :: -1]) & mask
    if not full:
        hashes = (hashes * _powers(_INV31, width + 1)[width - lens]) & mask
    return hashes.astype(np.uint64)


def java_hashes_after(prefix_hashes: np.ndarray, hashes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``String.hashCode`` of ``prefix[i] + s[i]`` from the hash of each prefix and the hash and length of
    each s (uint64 arrays of unsigned 32-bit values): h(p + s) = h(p)·31^len(s) + h(s) mod 2^32."""
    if len(hashes) == 0:
        return np.empty(0, dtype=np.uint64)
    weights = _pow31_table(int(lengths.max()) + 1)[lengths]
    # Both factors are below 2^32 and so is the hash added: the sum stays below 2^64.
    return (prefix_hashes * weights + hashes) & np.uint64(_MASK32)


def java_string_hashes_after(prefix_hashes: np.ndarray, strings: list[str]) -> np.ndarray:
    """``String.hashCode`` of ``prefix[i] + strings[i]`` from the hash of each prefix (uint64 arrays of
    unsigned 32-bit values).

    h(p + s) = h(p)·31^len(s) + h(s) mod 2^32, so a common prefix (an index key's
    ``topic#``) is hashed once, not once per key.
    """
    hashes, lens = java_hashes_and_lengths(strings)
    return java_hashes_after(prefix_hashes, hashes, lens)
