"""Message body compression: RocketMQ 5's ``common/compression`` (``CompressionType``, ``CompressorFactory``).

A compressed body has bit 0 of ``sysFlag`` set (``COMPRESSED_FLAG``) and its compression type in bits 8-10:

====  =======  ==========================================================================
type  name     body
====  =======  ==========================================================================
0     ZLIB     RocketMQ 4.x producers set bit 0 only: zlib (``UtilAll.compress``)
1     LZ4      an LZ4 frame (``LZ4FrameOutputStream``)
2     ZSTD     a Zstandard frame (``ZstdOutputStream``)
3     ZLIB     zlib, as 5.x producers flag it
====  =======  ==========================================================================

zlib is in the standard library; LZ4 and Zstandard need the optional packages of ``pip install rocketq[compression]``
(``lz4``, ``zstandard``), imported only when such a body comes. Every reader of bodies (the client's pull and
reply paths, ``rocketq admin``, ``rocketq store import``, the Spark decoder) inflates through :func:`decompress`.
"""

from __future__ import annotations

import enum
import zlib
from typing import Any

from rocketq.common.errors import RocketqError
from rocketq.common.message import COMPRESSED_FLAG, COMPRESSION_TYPE_MASK

__all__ = ["CodecMissingError", "CompressionError", "CompressionType", "compress", "compressed_type", "decompress"]


class CompressionError(RocketqError, ValueError):
    """A body that cannot be inflated: corrupt data, an unknown type, or a codec that is not installed."""


class CodecMissingError(CompressionError):
    """The body's codec (LZ4, Zstandard) is not installed: the data may well be fine."""


class CompressionType(enum.IntEnum):
    LZ4 = 1
    ZSTD = 2
    ZLIB = 3

    @classmethod
    def of(cls, name: str) -> CompressionType:
        """``CompressionType.of``: by name, any case."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise CompressionError(f"unknown compression type {name!r} (LZ4, ZSTD or ZLIB)") from None

    @property
    def flag(self) -> int:
        """``getCompressionFlag``: the sysFlag bits of the type (bit 0 not included)."""
        return int(self) << 8


def compressed_type(sys_flag: int) -> CompressionType | None:
    """The compression of a body with *sys_flag*, None when it is not compressed (``findByValue``: 0 is ZLIB)."""
    if not sys_flag & COMPRESSED_FLAG:
        return None
    value = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if value == 0:
        return CompressionType.ZLIB
    try:
        return CompressionType(value)
    except ValueError:
        raise CompressionError(f"unknown compression type {value} in sysFlag {sys_flag:#x}") from None


def _module(kind: CompressionType) -> Any:
    try:
        if kind is CompressionType.LZ4:
            import lz4.frame

            return lz4.frame
        import zstandard

        return zstandard
    except ImportError:
        package = "lz4" if kind is CompressionType.LZ4 else "zstandard"
        raise CodecMissingError(f"a {kind.name} body needs the {package} package: pip install rocketq[compression]"
                                ) from None  # fmt: skip


def compress(body: bytes, kind: CompressionType = CompressionType.ZLIB, level: int = 5) -> bytes:
    """*body* compressed as a producer of *kind* does (``Compressor.compress``; *level* as RocketMQ passes it:
    zlib's level, Zstandard's level, ignored by LZ4)."""
    if kind is CompressionType.ZLIB:
        return zlib.compress(body, level)
    if kind is CompressionType.LZ4:
        return bytes(_module(kind).compress(body))
    return bytes(_module(kind).ZstdCompressor(level=level).compress(body))


def decompress(body: bytes, sys_flag: int) -> bytes:
    """*body* inflated according to *sys_flag*; as given when the flag says it is not compressed."""
    kind = compressed_type(sys_flag)
    if kind is None or not body:
        return body
    try:
        if kind is CompressionType.ZLIB:
            return zlib.decompress(body)
        module = _module(kind)
        if kind is CompressionType.LZ4:
            return bytes(module.decompress(body))
        # A streamed frame need not say its size: read it as a stream, frame after frame.
        reader = module.ZstdDecompressor().decompressobj(read_across_frames=True)
        return reader.decompress(body) + reader.flush()
    except CompressionError:
        raise
    except Exception as exc:  # zlib.error, RuntimeError of lz4, ZstdError
        raise CompressionError(f"{kind.name} body does not inflate: {exc}") from exc
