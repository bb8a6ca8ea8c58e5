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
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

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
