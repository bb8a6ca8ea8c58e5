"""The CommitLog record: the one encoding of a stored message.

Mirrors ``CommitLog.MessageExtEncoder`` / ``checkMessageAndReturnSize`` and
``MessageDecoder.decode`` (store-format §3.2–§3.11). The store writes these
bytes, a pull returns them unchanged, every reader decodes them here.

Layout (big-endian; B, S = born/store host size: 8 for IPv4, 20 for IPv6)::

    0   i32  TOTALSIZE               whole record, this field included
    4   i32  MAGICCODE               0xDAA320A7 v1 | 0xDAA320AB v2 | 0xCBD43194 BLANK
    8   i32  BODYCRC                 crc32(body) & 0x7FFFFFFF
    12  i32  QUEUEID
    16  i32  FLAG
    20  i64  QUEUEOFFSET             index in the consume queue
    28  i64  PHYSICALOFFSET          commit-log offset of this record
    36  i32  SYSFLAG                 MessageSysFlag bits
    40  i64  BORNTIMESTAMP
    48  B    BORNHOST                address bytes + i32 port
    48+B      i64  STORETIMESTAMP
    56+B      S    STOREHOST
    56+B+S    i32  RECONSUMETIMES
    60+B+S    i64  PREPAREDTRANSACTIONOFFSET
    68+B+S    i32  BODYLENGTH, then BODY
    ...       i8 (v1) / i16 (v2) TOPICLENGTH, then TOPIC (UTF-8)
    ...       i16  PROPERTIESLENGTH, then PROPERTIES (name 0x01 value 0x02 ...)

TOTALSIZE = 91 + body + topic + properties with both hosts IPv4 and v1; each
IPv6 host adds 12, v2 adds 1. A BLANK record (i32 length, i32 magic) fills the
end of a commit-log file.

Also here: the client's batch body encoding (``MessageDecoder.encodeMessages``),
which a batch send carries and the store unpacks into ordinary records.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from dataclasses import dataclass
from typing import Final

from rocketq.common.errors import CorruptRecordError
from rocketq.common.javacompat import crc32_masked, decode_utf8_java, encode_utf8_java
from rocketq.common.message import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    Message,
    MessageExt,
    properties_to_string,
    string_to_properties,
)
from rocketq.common.message_id import bytes_to_host, host_to_bytes

MESSAGE_MAGIC_CODE: Final = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_CODE_V2: Final = -626843477  # 0xDAA320AB
BLANK_MAGIC_CODE: Final = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH: Final = 8
MAX_TOPIC_LENGTH_V1: Final = 127
MAX_PROPERTIES_LENGTH: Final = 32767

QUEUE_OFFSET_POS: Final = 20
PHYSICAL_OFFSET_POS: Final = 28
SYSFLAG_POS: Final = 36

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_I8 = struct.Struct(">b")
_LEN_MAGIC = struct.Struct(">ii")
BLANK = struct.Struct(">ii")


def _header(born_len: int, store_len: int) -> struct.Struct:
    return struct.Struct(f">iiiiiqqiq{born_len}siq{store_len}siiqi")


# Fixed part of the record up to and including BODYLENGTH, keyed by the two V6 bits.
_HEADERS: dict[tuple[bool, bool], struct.Struct] = {
    (bv6, sv6): _header(16 if bv6 else 4, 16 if sv6 else 4) for bv6 in (False, True) for sv6 in (False, True)
}


_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_HEADER_BY_FLAGS = {
    f: _HEADERS[(bool(f & BORNHOST_V6_FLAG), bool(f & STOREHOSTADDRESS_V6_FLAG))]
    for f in (0, BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG, _HOST_FLAGS)
}


def header_struct(sys_flag: int) -> struct.Struct:
    return _HEADERS[(bool(sys_flag & BORNHOST_V6_FLAG), bool(sys_flag & STOREHOSTADDRESS_V6_FLAG))]


def store_timestamp_pos(sys_flag: int) -> int:
    return 68 if sys_flag & BORNHOST_V6_FLAG else 56


def record_length(sys_flag: int, body_len: int, topic_len: int, props_len: int, v2: bool = False) -> int:
    """``calMsgLength``: the TOTALSIZE of a record with these parts."""
    b = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    s = 20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8
    fixed = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + b + 8 + s + 4 + 8 + 4
    return fixed + body_len + (2 if v2 else 1) + topic_len + 2 + props_len


_FIXED_LENGTH = {f: record_length(f, 0, 0, 0) - 1 - 2 for f in _HEADER_BY_FLAGS}  # all but variable parts


def properties_bytes_of(msg: MessageExt | Message) -> bytes:
    raw = getattr(msg, "properties_bytes", None)
    if raw is not None:
        return raw
    return encode_utf8_java(properties_to_string(msg.properties))


class PropertiesTooLongError(ValueError):
    """The property string exceeds what a signed 16-bit length can say."""


class PreparedRecord:
    """A record encoded except for the three fields known only at append time.

    ``write_into`` packs the fixed header straight into the destination (the
    mapped file) and copies the variable tail (body, topic, properties) with one
    slice assignment: the append path's only two C calls.
    """

    __slots__ = ("args", "header", "sys_flag", "tail", "total")

    def __init__(self, header: struct.Struct, args: list[object], tail: bytes, total: int, sys_flag: int) -> None:
        self.header = header
        self.args = args
        self.tail = tail
        self.total = total
        self.sys_flag = sys_flag

    def write_into(self, buf: bytearray | memoryview | mmap.mmap, pos: int, queue_offset: int,
                   physical_offset: int, store_timestamp: int) -> None:  # fmt: skip
        a = self.args
        a[5] = queue_offset
        a[6] = physical_offset
        a[11] = store_timestamp
        self.header.pack_into(buf, pos, *a)
        hs = self.header.size
        buf[pos + hs : pos + self.total] = self.tail


def prepare_record(msg: MessageExt, *, allow_v2: bool = False) -> PreparedRecord:
    """Encode *msg* up to the append-time fields (see :class:`PreparedRecord`).

    The two IPv6 sysflag bits are set from the host address families and BODYCRC
    is computed; the message's ``sys_flag``, ``body_crc``, ``magic``,
    ``store_size`` and ``properties_bytes`` are updated to what will be written.
    """
    born_addr = host_to_bytes(msg.born_host[0])
    store_addr = host_to_bytes(msg.store_host[0])
    sys_flag = msg.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if len(born_addr) == 16:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store_addr) == 16:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    topic = msg.topic.encode("utf-8") if msg.topic.isascii() else encode_utf8_java(msg.topic)
    props = properties_bytes_of(msg)
    body = msg.body or b""
    v2 = len(msg.topic) > MAX_TOPIC_LENGTH_V1
    if v2 and not allow_v2:
        raise ValueError(f"topic longer than {MAX_TOPIC_LENGTH_V1} characters")
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise PropertiesTooLongError(f"properties of {len(props)} bytes exceed {MAX_PROPERTIES_LENGTH}")
    total = _FIXED_LENGTH[sys_flag & _HOST_FLAGS] + len(body) + (2 if v2 else 1) + len(topic) + 2 + len(props)
    body_crc = zlib.crc32(body) & 0x7FFFFFFF if body else 0
    magic = MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE
    topic_len = _I16.pack(len(topic)) if v2 else bytes((len(topic),))
    tail = b"".join((body, topic_len, topic, _I16.pack(len(props)), props))
    args: list[object] = [
        total, magic, body_crc, msg.queue_id, msg.flag, msg.queue_offset, msg.commit_log_offset, sys_flag,
        msg.born_timestamp, born_addr, msg.born_host[1], msg.store_timestamp, store_addr, msg.store_host[1],
        msg.reconsume_times, msg.prepared_transaction_offset, len(body),
    ]  # fmt: skip
    msg.sys_flag = sys_flag
    msg.body_crc = body_crc
    msg.magic = magic
    msg.store_size = total
    msg.properties_bytes = props
    return PreparedRecord(_HEADER_BY_FLAGS[sys_flag & _HOST_FLAGS], args, tail, total, sys_flag)


def encode_record(msg: MessageExt, *, allow_v2: bool = False) -> bytearray:
    """Encode *msg* as one CommitLog record, every field taken from the message.

    The same encoder as the append path (:func:`prepare_record`), written into a
    new buffer.
    """
    prep = prepare_record(msg, allow_v2=allow_v2)
    buf = bytearray(prep.total)
    prep.write_into(buf, 0, msg.queue_offset, msg.commit_log_offset, msg.store_timestamp)
    return buf


def patch_record(buf: bytearray | memoryview, pos: int, queue_offset: int, physical_offset: int,
                 store_timestamp: int, sys_flag: int) -> None:  # fmt: skip
    """Fill in the three fields known only at append time of an encoded record."""
    _I64.pack_into(buf, pos + QUEUE_OFFSET_POS, queue_offset)
    _I64.pack_into(buf, pos + PHYSICAL_OFFSET_POS, physical_offset)
    _I64.pack_into(buf, pos + store_timestamp_pos(sys_flag), store_timestamp)


def encode_blank(length: int) -> bytes:
    return BLANK.pack(length, BLANK_MAGIC_CODE)


def read_size_and_magic(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    return _LEN_MAGIC.unpack_from(buf, pos)


def decode_record(buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = False,
                  read_body: bool = True) -> MessageExt:  # fmt: skip
    """Decode the record at *pos*. Raises :class:`CorruptRecordError` if it is not one.

    The returned message keeps the stored property bytes (``properties_bytes``)
    so that :func:`encode_record` reproduces the record byte for byte.
    """
    try:
        total, magic = _LEN_MAGIC.unpack_from(buf, pos)
        if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
            raise CorruptRecordError(f"bad magic code 0x{magic & 0xFFFFFFFF:08X} at {pos}")
        sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POS)[0]
        hdr = header_struct(sys_flag)
        (total, magic, body_crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_addr, born_port,
         store_ts, store_addr, store_port, reconsume, prepared, body_len) = hdr.unpack_from(buf, pos)  # fmt: skip
        p = pos + hdr.size
        if body_len > 0:
            body = bytes(buf[p : p + body_len])
            if len(body) != body_len:
                raise CorruptRecordError(f"record at {pos} is cut off in its body")
            if check_crc and crc32_masked(body) != body_crc:
                raise CorruptRecordError(f"body CRC mismatch in record at {pos}")
            p += body_len
            if not read_body:
                body = b""
        else:
            body = b""
        if magic == MESSAGE_MAGIC_CODE_V2:
            topic_len = _I16.unpack_from(buf, p)[0]
            p += 2
        else:
            topic_len = _I8.unpack_from(buf, p)[0]
            p += 1
        topic = decode_utf8_java(buf[p : p + topic_len])
        p += topic_len
        props_len = _I16.unpack_from(buf, p)[0]
        p += 2
        if props_len > 0:
            props_raw = bytes(buf[p : p + props_len])
            if len(props_raw) != props_len:
                raise CorruptRecordError(f"record at {pos} is cut off in its properties")
        else:
            props_raw = b""
        expected = record_length(sys_flag, max(body_len, 0), max(topic_len, 0), max(props_len, 0),
                                 magic == MESSAGE_MAGIC_CODE_V2)  # fmt: skip
        if expected != total:
            raise CorruptRecordError(f"record at {pos}: TOTALSIZE {total} but its fields make {expected}")
    except struct.error as e:
        raise CorruptRecordError(f"record at {pos} is cut off") from e
    return MessageExt(
        topic=topic, body=body, flag=flag, properties=string_to_properties(decode_utf8_java(props_raw)),
        queue_id=queue_id, sys_flag=sys_flag, born_timestamp=born_ts,
        born_host=(bytes_to_host(born_addr), born_port), store_timestamp=store_ts,
        store_host=(bytes_to_host(store_addr), store_port), reconsume_times=reconsume,
        prepared_transaction_offset=prepared, queue_offset=queue_offset, commit_log_offset=phys,
        store_size=total, body_crc=body_crc, magic=magic, properties_bytes=props_raw,
    )  # fmt: skip


@dataclass(slots=True)
class RecordInfo:
    """What dispatch and recovery need from a record, read without its body.

    ``size`` follows ``checkMessageAndReturnSize``: the record's TOTALSIZE on
    success, 0 for a BLANK end of file, -1 for a record that cannot be read; a
    record whose length fields disagree with TOTALSIZE has ``ok`` False and
    ``size`` = TOTALSIZE so a dispatcher can skip it.
    """

    ok: bool
    size: int
    topic: str = ""
    queue_id: int = 0
    commit_log_offset: int = 0
    queue_offset: int = 0
    store_timestamp: int = 0
    sys_flag: int = 0
    prepared_transaction_offset: int = 0
    properties: dict[str, str] | None = None
    blank: bool = False


def check_record(buf: bytes | bytearray | memoryview, pos: int, *, check_crc: bool,
                 allow_v2: bool = True) -> RecordInfo:  # fmt: skip
    """Validate the record at *pos* (store-format §3.11) and return what dispatch needs."""
    try:
        total, magic = _LEN_MAGIC.unpack_from(buf, pos)
        if magic == BLANK_MAGIC_CODE:
            return RecordInfo(True, 0, blank=True)
        if magic != MESSAGE_MAGIC_CODE and not (allow_v2 and magic == MESSAGE_MAGIC_CODE_V2):
            return RecordInfo(False, -1)
        if total <= 0 or pos + total > len(buf):
            return RecordInfo(False, -1)
        sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POS)[0]
        hdr = header_struct(sys_flag)
        (_, _, body_crc, queue_id, _flag, queue_offset, phys, sys_flag, _bt, _ba, _bp,
         store_ts, _sa, _sp, _rt, prepared, body_len) = hdr.unpack_from(buf, pos)  # fmt: skip
        p = pos + hdr.size
        if body_len > 0:
            if check_crc and crc32_masked(buf[p : p + body_len]) != body_crc:
                return RecordInfo(False, -1)
            p += body_len
        if magic == MESSAGE_MAGIC_CODE_V2:
            topic_len = _I16.unpack_from(buf, p)[0]
            p += 2
        else:
            topic_len = _I8.unpack_from(buf, p)[0]
            p += 1
        topic = decode_utf8_java(buf[p : p + topic_len]) if topic_len > 0 else ""
        p += max(topic_len, 0)
        props_len = _I16.unpack_from(buf, p)[0]
        p += 2
        props = string_to_properties(decode_utf8_java(buf[p : p + props_len])) if props_len > 0 else {}
        expected = record_length(sys_flag, max(body_len, 0), max(topic_len, 0), max(props_len, 0),
                                 magic == MESSAGE_MAGIC_CODE_V2)  # fmt: skip
        if expected != total:
            return RecordInfo(False, total)
    except (struct.error, IndexError):
        return RecordInfo(False, -1)
    return RecordInfo(True, total, topic, queue_id, phys, queue_offset, store_ts, sys_flag, prepared, props)


# --- client batch body (MessageDecoder.encodeMessages / decodeMessages) -----


def encode_batch_body(messages: list[Message]) -> bytes:
    """Encode messages as a batch send body: per item i32 size, i32 magic 0,
    i32 body CRC 0, i32 flag, i32 body length, body, i16 properties length,
    properties."""
    out = bytearray()
    for m in messages:
        props = encode_utf8_java(properties_to_string(m.properties))
        body = m.body or b""
        size = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
        out += struct.pack(">iiiii", size, 0, 0, m.flag, len(body))
        out += body
        out += _I16.pack(len(props))
        out += props
    return bytes(out)


def decode_batch_body(data: bytes | bytearray | memoryview, topic: str) -> list[tuple[Message, bytes]]:
    """Split a batch send body into messages, each with its raw property bytes."""
    items: list[tuple[Message, bytes]] = []
    pos = 0
    n = len(data)
    try:
        while pos < n:
            size, _magic, _crc, flag, body_len = struct.unpack_from(">iiiii", data, pos)
            if size <= 0 or pos + size > n:
                raise CorruptRecordError(f"bad batch item size {size} at {pos}")
            p = pos + 20
            body = bytes(data[p : p + body_len])
            p += body_len
            props_len = _I16.unpack_from(data, p)[0]
            p += 2
            props_raw = bytes(data[p : p + props_len])
            msg = Message(topic, body, flag, string_to_properties(decode_utf8_java(props_raw)))
            items.append((msg, props_raw))
            pos += size
    except struct.error as e:
        raise CorruptRecordError(f"batch body is cut off at {pos}") from e
    return items
