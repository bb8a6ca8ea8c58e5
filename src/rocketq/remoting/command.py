"""RemotingCommand: one request or response of the remoting protocol, and its encodings.

Mirrors RocketMQ's ``remoting/protocol/RemotingCommand`` (frame encode/decode, ``createRequestCommand``,
``createResponseCommand``, ``decodeCommandCustomHeader``, ``makeCustomHeaderToNet``),
``RocketMQSerializable`` (binary header) and ``RemotingSerializable`` (JSON header) (spec:
remoting-protocol §2–§4).

Frame (big-endian)::

    0    i32  length        bytes after this field: 4 + H + B
    4    i32  header word   bits 31-24 serialize type (0 JSON, 1 ROCKETMQ), bits 23-0 header length H
    8    H    header
    8+H  B    body          opaque bytes, B = length - 4 - H (0: no body)

JSON header (type 0): fastjson's compact form of the command bean, members in alphabetical order,
null members left out, every ``extFields`` value a string::

    {"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,"remark":"..",
     "serializeTypeCurrentRPC":"JSON","version":401}

ROCKETMQ header (type 1)::

    0     i16  code              (Java casts to short: codes above 32767 do not survive)
    2     i8   language          LanguageCode byte
    3     i16  version
    5     i32  opaque
    9     i32  flag
    13    i32  R, then R bytes   remark, UTF-8; 0 = null
    17+R  i32  E, then E bytes   extFields entries: i16 key length, key, i32 value length, value;
                                 an empty key or value reads as null, so the entry is dropped

Replies rocketq sends always use JSON (C++ and Node.js clients read nothing else); frames of either type
decode. Decoding keeps the order of ``extFields`` entries, so a decoded frame re-encodes to the same
bytes in its own serialize type.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import json
import re
import struct
import sys
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, TypeVar, overload

from rocketq.common import json_compat
from rocketq.common.javacompat import decode_utf8_java, encode_utf8_java
from rocketq.remoting.codes import (
    CURRENT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    ResponseCode,
    SerializeType,
    request_code_name,
    response_code_name,
)
from rocketq.remoting.errors import FrameError, HeaderFieldError

__all__ = [
    "HeaderFields",
    "RemotingCommand",
    "UnescapedCommand",
    "create_request",
    "create_response",
    "decode_custom_header",
    "decode_json_header",
    "decode_rocketmq_header",
    "encode_custom_header",
    "encode_json_header",
    "encode_rocketmq_header",
    "ext_dict",
    "ext_value",
    "make_response_for",
    "next_opaque",
    "parse_bool",
]

_FRAME_HEAD = struct.Struct(">ii")
_ROCKETMQ_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_ROCKETMQ_NO_REMARK = struct.Struct(">hbhiiii")  # the same, remark length, extFields length if no remark
_JSON_TYPE: Final = int(SerializeType.JSON)
_SERIALIZE_JSON: Final = SerializeType.JSON
_SERIALIZE_ROCKETMQ: Final = SerializeType.ROCKETMQ
_ROCKETMQ_TYPE: Final = int(SerializeType.ROCKETMQ)
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
ROCKETMQ_HEADER_MIN: Final = 21  # fixed part + remark length + extFields length
MAX_HEADER_LENGTH: Final = 0xFFFFFF  # 24 bits of the header word

_opaque_counter = itertools.count()


def next_opaque() -> int:
    """A new request id from the process-wide counter (Java's ``RemotingCommand.requestId``), 0 … 2³¹−1."""
    return next(_opaque_counter) & 0x7FFFFFFF


def _int32(value: int) -> int:
    return ((int(value) + 0x80000000) & 0xFFFFFFFF) - 0x80000000


def _int16(value: int) -> int:
    return ((int(value) + 0x8000) & 0xFFFF) - 0x8000


# --------------------------------------------------------------------------------------------------
# Custom-header values: Java's toString on the way out, decodeCommandCustomHeader's parsing on the way in
# --------------------------------------------------------------------------------------------------


def ext_value(value: object) -> str | None:
    """The ``extFields`` string Java's ``makeCustomHeaderToNet`` makes of a header field value.

    ``None`` → ``None`` (the field is left out); booleans → ``true``/``false``; enums → their name;
    floats → Java's ``Double.toString``; other values → ``str``.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return json_compat.java_double_str(value)
    return str(value)


class _Missing(enum.Enum):
    MISSING = 0


_MISSING: Final = _Missing.MISSING
_D = TypeVar("_D")
_T = TypeVar("_T")
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_INT_RANGE: Final = (-(1 << 31), (1 << 31) - 1)
_LONG_RANGE: Final = (-(1 << 63), (1 << 63) - 1)


def _parse_int(name: str, text: str, bounds: tuple[int, int], kind: str) -> int:
    # Integer.parseInt / Long.parseLong: an optional sign and ASCII digits, nothing else, within range.
    if _INT_TEXT.fullmatch(text) is None:
        raise HeaderFieldError(name, f"the custom field <{name}> is not {kind}: {text!r}")
    value = int(text)
    if not bounds[0] <= value <= bounds[1]:
        raise HeaderFieldError(name, f"the custom field <{name}> is out of range for {kind}: {text}")
    return value


def parse_bool(text: str) -> bool:
    """A header boolean: ``true`` in any case (Java's ``Boolean.parseBoolean``) or ``1`` (C++ clients)."""
    return text == "1" or text.lower() == "true"


class HeaderFields(Mapping[str, str]):
    """Typed read access to a command's ``extFields`` (its custom header), as Java's
    ``decodeCommandCustomHeader`` parses them.

    Each getter raises ``HeaderFieldError`` ("the custom field <x> is null") when the field is absent
    and no default was given, or when the value does not parse; a server turns that into a
    SYSTEM_ERROR response naming the field.
    """

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, str] | None) -> None:
        self._fields: Mapping[str, str] = fields if fields is not None else {}

    def __getitem__(self, key: str) -> str:
        return self._fields[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"HeaderFields({dict(self._fields)!r})"

    def _raw(self, name: str) -> str | None:
        value = self._fields.get(name)
        return value if isinstance(value, str) else ext_value(value)

    @overload
    def get_str(self, name: str) -> str: ...
    @overload
    def get_str(self, name: str, default: _D) -> str | _D: ...
    def get_str(self, name: str, default: object = _MISSING) -> object:
        """The field as text."""
        value = self._raw(name)
        if value is None:
            return self._absent(name, default)
        return value

    @overload
    def get_int(self, name: str) -> int: ...
    @overload
    def get_int(self, name: str, default: _D) -> int | _D: ...
    def get_int(self, name: str, default: object = _MISSING) -> object:
        """The field as a Java ``int`` (32-bit, decimal)."""
        value = self._raw(name)
        if value is None:
            return self._absent(name, default)
        return _parse_int(name, value, _INT_RANGE, "an int")

    @overload
    def get_long(self, name: str) -> int: ...
    @overload
    def get_long(self, name: str, default: _D) -> int | _D: ...
    def get_long(self, name: str, default: object = _MISSING) -> object:
        """The field as a Java ``long`` (64-bit, decimal)."""
        value = self._raw(name)
        if value is None:
            return self._absent(name, default)
        return _parse_int(name, value, _LONG_RANGE, "a long")

    @overload
    def get_bool(self, name: str) -> bool: ...
    @overload
    def get_bool(self, name: str, default: _D) -> bool | _D: ...
    def get_bool(self, name: str, default: object = _MISSING) -> object:
        """The field as a boolean: true for ``true`` (any case) or ``1``, false for anything else."""
        value = self._raw(name)
        if value is None:
            return self._absent(name, default)
        return parse_bool(value)

    @overload
    def get_float(self, name: str) -> float: ...
    @overload
    def get_float(self, name: str, default: _D) -> float | _D: ...
    def get_float(self, name: str, default: object = _MISSING) -> object:
        """The field as a Java ``double``."""
        value = self._raw(name)
        if value is None:
            return self._absent(name, default)
        try:
            return float(value.strip())
        except ValueError:
            raise HeaderFieldError(name, f"the custom field <{name}> is not a double: {value!r}") from None

    @staticmethod
    def _absent(name: str, default: object) -> object:
        if default is _MISSING:
            raise HeaderFieldError(name, f"the custom field <{name}> is null")
        return default


def _field_type(tp: Any) -> Any:
    """The base type of a header dataclass field annotation (``int | None`` → ``int``)."""
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return tp


def decode_custom_header(cls: type[_T], fields: Mapping[str, str] | None) -> _T:
    """Build custom-header dataclass ``cls`` from ``extFields`` (Java's ``decodeCommandCustomHeader``).

    Each field's key is its camelCase name or ``metadata["json"]`` (e.g. ``"clientID"``, ``"a"``). A field
    without a default is required: its absence raises ``HeaderFieldError``. ``str``, ``int``, ``bool``,
    ``float``, ``Enum`` (by name) and their ``| None`` forms are parsed; unknown keys are ignored.
    """
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} is not a dataclass")
    view = HeaderFields(fields)
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        key = json_compat.json_name(f)
        tp = _field_type(hints.get(f.name, str))
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        default: object = _MISSING if required else None
        if tp is bool:
            value = view.get_bool(key, default)
        elif tp is int:
            value = view.get_long(key, default)
        elif tp is float:
            value = view.get_float(key, default)
        elif isinstance(tp, type) and issubclass(tp, enum.Enum):
            text = view.get_str(key, default)
            if text is None:
                value = None
            elif text in tp.__members__:
                value = tp.__members__[text]
            else:
                raise HeaderFieldError(key, f"the custom field <{key}> is not a {tp.__name__}: {text!r}")
        else:
            value = view.get_str(key, default)
        if value is not None:
            kwargs[f.name] = value
    return cls(**kwargs)


def encode_custom_header(header: object) -> dict[str, str]:
    """The ``extFields`` of a custom-header dataclass (Java's ``makeCustomHeaderToNet``); ``None`` fields left out."""
    if not (dataclasses.is_dataclass(header) and not isinstance(header, type)):
        raise TypeError(f"{header!r} is not a dataclass instance")
    result: dict[str, str] = {}
    for f in dataclasses.fields(header):
        text = ext_value(getattr(header, f.name))
        if text is not None:
            result[json_compat.json_name(f)] = text
    return result


def ext_dict(fields: Mapping[str, object] | object | None) -> dict[str, str] | None:
    """``extFields`` as they go on the wire: every value as its Java text (:func:`ext_value`), nulls left out; a
    header object is read field by field. None stays None."""
    if fields is None:
        return None
    if type(fields) is dict or isinstance(fields, Mapping):  # a dict skips the costly ABC check
        out: dict[str, str] = {}
        for k, v in fields.items():
            text = v if type(v) is str else ext_value(v)
            if text is not None:
                out[k if type(k) is str else str(k)] = text
        return out
    return encode_custom_header(fields)


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class RemotingCommand:
    """One frame of the protocol: a request (flag bit 0 clear) or a response (bit 0 set).

    ``ext_fields`` is ``None`` when the header has no ``extFields`` member at all and ``{}`` when it
    has an empty one (Java writes ``"extFields":{}`` when a header class with no set field was
    attached); read it through ``header``. ``body`` is ``None`` for no body.
    """

    code: int
    language: LanguageCode = LanguageCode.JAVA
    version: int = CURRENT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | None = None
    serialize_type: SerializeType = SerializeType.JSON

    # -- flags ------------------------------------------------------------------------------------

    @property
    def is_response(self) -> bool:
        """Flag bit 0: this is a response."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """Flag bit 1: a one-way request, to which nothing is answered."""
        return bool(self.flag & FLAG_ONEWAY)

    def mark_response(self) -> RemotingCommand:
        self.flag |= FLAG_RESPONSE
        return self

    def mark_oneway(self) -> RemotingCommand:
        self.flag |= FLAG_ONEWAY
        return self

    # -- custom header ----------------------------------------------------------------------------

    @property
    def header(self) -> HeaderFields:
        """Typed read access to ``ext_fields``: ``cmd.header.get_int("queueId")``."""
        return HeaderFields(self.ext_fields)

    def set_ext(self, name: str, value: object) -> RemotingCommand:
        """Set one ``extFields`` entry to Java's text of ``value``; ``None`` removes it."""
        text = ext_value(value)
        if text is None:
            if self.ext_fields is not None:
                self.ext_fields.pop(name, None)
            return self
        if self.ext_fields is None:
            self.ext_fields = {}
        self.ext_fields[name] = text
        return self

    def write_custom_header(self, fields: Mapping[str, object] | object) -> RemotingCommand:
        """Merge a custom header (a dataclass or a mapping) into ``ext_fields`` (``{}`` if it has no field)."""
        encoded = ext_dict(fields) or {}
        if self.ext_fields is None:
            self.ext_fields = {}
        self.ext_fields.update(encoded)
        return self

    def decode_custom_header(self, cls: type[_T]) -> _T:
        """``ext_fields`` as custom-header dataclass ``cls`` (see ``decode_custom_header``)."""
        return decode_custom_header(cls, self.ext_fields)

    # -- encoding ---------------------------------------------------------------------------------

    def encode_header(self, serialize_type: SerializeType | None = None) -> bytes:
        """The header bytes alone, in ``serialize_type`` (default: the command's own)."""
        st = self.serialize_type if serialize_type is None else serialize_type
        if st == SerializeType.ROCKETMQ:
            return encode_rocketmq_header(self)
        return self._json_header()

    def _json_header(self) -> bytes:
        """The JSON header (:func:`encode_json_header`; :class:`UnescapedCommand` skips its look for escapes)."""
        return encode_json_header(self)

    def encode(self, serialize_type: SerializeType | None = None) -> bytes:
        """The whole frame, length prefix included, with the header in ``serialize_type``
        (default: the command's own)."""
        return b"".join(self.encode_parts(serialize_type))

    def encode_parts(self, serialize_type: SerializeType | None = None) -> list[bytes]:
        """The frame as ``[head and header, body]`` (no body: one part), for a writer that joins many frames
        into one write: the body is copied once, there."""
        st = self.serialize_type if serialize_type is None else serialize_type
        if st is _SERIALIZE_JSON:
            header = self._json_header()
            word = size = len(header)  # type 0 in the top byte
        else:
            st = st if st is _SERIALIZE_ROCKETMQ else SerializeType(st)
            header = encode_rocketmq_header(self) if st is _SERIALIZE_ROCKETMQ else self._json_header()
            size = len(header)
            word = (int(st) << 24) | size
        if size > MAX_HEADER_LENGTH:
            raise FrameError(f"header of {size} bytes does not fit the 24-bit header length")
        body = self.body
        if not body:
            return [_FRAME_HEAD.pack(4 + size, word) + header]
        return [_FRAME_HEAD.pack(4 + size + len(body), word) + header, body]

    @classmethod
    def decode(cls, frame: bytes | bytearray | memoryview) -> RemotingCommand:
        """Decode one whole frame, length prefix included (as ``encode`` writes and the captures hold)."""
        view = memoryview(frame)
        if len(view) < 8:
            raise FrameError(f"frame of {len(view)} bytes is shorter than its 8-byte head")
        (length,) = _I32.unpack_from(view, 0)
        if length != len(view) - 4:
            raise FrameError(f"length field says {length} bytes but {len(view) - 4} follow it")
        return cls.decode_payload(view[4:])

    @classmethod
    def decode_payload(cls, payload: bytes | bytearray | memoryview) -> RemotingCommand:
        """Decode what follows the length field: header word, header, body (Java's ``RemotingCommand.decode``)."""
        view = payload if type(payload) is memoryview else memoryview(payload)
        size = len(view)
        if size < 4:
            raise FrameError("frame too short for its header word")
        (word,) = _I32.unpack_from(view, 0)
        header_end = 4 + (word & 0xFFFFFF)
        if header_end > size:
            raise FrameError(f"bad header length {header_end - 4}: only {size - 4} bytes follow")
        type_code = (word >> 24) & 0xFF
        if type_code == _ROCKETMQ_TYPE:
            cmd = decode_rocketmq_header(view[4:header_end])
        elif type_code == _JSON_TYPE:
            cmd = decode_json_header(view[4:header_end])
        else:
            raise FrameError(f"unknown serialize type {type_code}")
        if header_end < size:
            cmd.body = bytes(view[header_end:])
        return cmd

    def __repr__(self) -> str:
        name = response_code_name(self.code) if self.is_response else request_code_name(self.code)
        body = "None" if self.body is None else f"<{len(self.body)} bytes>"
        return (
            f"RemotingCommand(code={self.code} {name}, language={self.language.name}, version={self.version}, "
            f"opaque={self.opaque}, flag={self.flag}, remark={self.remark!r}, ext_fields={self.ext_fields!r}, "
            f"body={body}, serialize_type={self.serialize_type.name})"
        )


# --------------------------------------------------------------------------------------------------
# Factories (RemotingCommand.createRequestCommand / createResponseCommand)
# --------------------------------------------------------------------------------------------------


def create_request(
    code: int,
    ext_fields: Mapping[str, object] | object | None = None,
    body: bytes | None = None,
    *,
    oneway: bool = False,
    remark: str | None = None,
    opaque: int | None = None,
    version: int = CURRENT_VERSION,
    language: LanguageCode = LanguageCode.JAVA,
    serialize_type: SerializeType = SerializeType.JSON,
) -> RemotingCommand:
    """A request with a fresh opaque. ``ext_fields`` is a mapping (values turned into Java's text) or a
    custom-header dataclass instance."""
    return RemotingCommand(
        code=int(code),
        language=language,
        version=version,
        opaque=next_opaque() if opaque is None else opaque,
        flag=FLAG_ONEWAY if oneway else 0,
        remark=remark,
        ext_fields=ext_dict(ext_fields),
        body=body,
        serialize_type=serialize_type,
    )


def create_response(
    code: int = ResponseCode.SUCCESS,
    remark: str | None = None,
    opaque: int = 0,
    *,
    ext_fields: Mapping[str, object] | object | None = None,
    body: bytes | None = None,
    version: int = CURRENT_VERSION,
    unescaped: bool = False,
) -> RemotingCommand:
    """A response (flag bit 0 set), JSON-encoded (a server's transport answers a ROCKETMQ-encoded request in that
    type); *unescaped*: an :class:`UnescapedCommand` (the caller vouches that its fields are plain text)."""
    return (UnescapedCommand if unescaped else RemotingCommand)(
        code=int(code),
        version=version,
        opaque=opaque,
        flag=FLAG_RESPONSE,
        remark=remark,
        ext_fields=ext_dict(ext_fields),
        body=body,
        serialize_type=SerializeType.JSON,
    )


def make_response_for(
    request: RemotingCommand,
    code: int = ResponseCode.SUCCESS,
    remark: str | None = None,
    *,
    ext_fields: Mapping[str, object] | object | None = None,
    body: bytes | None = None,
    version: int = CURRENT_VERSION,
    unescaped: bool = False,
) -> RemotingCommand:
    """The response to ``request``: its opaque, flag bit 0, JSON header (see :func:`create_response`)."""
    return create_response(code, remark, request.opaque, ext_fields=ext_fields, body=body, version=version,
                           unescaped=unescaped)


# --------------------------------------------------------------------------------------------------
# JSON header (RemotingSerializable)
# --------------------------------------------------------------------------------------------------


_KEY_CACHE_MAX: Final = 4096
_quoted_keys: dict[str, str] = {}  # extFields key → its quoted JSON text (header names: a small set)
_quoted_languages: dict[object, str] = {}
_header_tails: dict[int, str] = {}  # version → the constant end of a JSON header


def _quoted_key(key: object) -> str:
    text = _quoted_keys.get(key)  # type: ignore[call-overload]
    if text is None:
        text = json_compat.quote(str(key))
        if len(_quoted_keys) < _KEY_CACHE_MAX and isinstance(key, str):
            _quoted_keys[key] = text
    return text


# What fastjson escapes in a string: the quote, the backslash, control characters, U+007F..U+009F, U+2028 and
# U+2029. A header whose strings hold none of them (every answer rocketq writes) is its members written as they
# are, with one f-string.
_JSON_ESCAPED = re.compile("[\"\\\\\x00-\x1f\x7f-\x9f\u2028\u2029]")

# Else (a send request: its properties hold 0x01 and 0x02) the standard library's C encoder writes it, which
# escapes as fastjson does except for the characters fastjson escapes and it does not (U+007F..U+009F, U+2028,
# U+2029) and the hex case of a control character's escape (\u001f, fastjson \u001F): a header with either goes
# the careful way, member by member.
_C_ENCODE_DIFFERS = re.compile("[\x7f-\x9f\u2028\u2029]|\\\\u00[01][a-f]")
_HEX_LETTER_ESCAPE = re.compile("\\\\u00[01][a-f]")


def _not_json(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _make_c_encode() -> Callable[[object], str]:
    """The standard library's C encoder made once (``JSONEncoder.encode`` makes one a call), or the encoder."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False).encode
    encoder = make(None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, True)

    def encode(doc: object) -> str:
        return "".join(encoder(doc, 0))

    return encode


_C_ENCODE = _make_c_encode()


def _c_encoding_matches(text: str) -> bool:
    """Whether the C encoder's ``text`` is what fastjson writes (see ``_C_ENCODE_DIFFERS``)."""
    if text.isascii():  # the usual case, two substring scans: DEL, or an escape with hex letters
        return "\x7f" not in text and ("\\u00" not in text or _HEX_LETTER_ESCAPE.search(text) is None)
    return _C_ENCODE_DIFFERS.search(text) is None


_language_names: dict[object, str] = {}


class UnescapedCommand(RemotingCommand):
    """A command whose extFields and remark its maker vouches for: set at once and never changed, plain text
    that JSON writes as it is (ASCII, no quote, backslash or control character: numbers, hex ids, status names,
    settings checked once). Its JSON header is written with no look for what to escape, from a %-format made
    once per layout (its extFields names in order, whether it has a remark, its language): the answers to sends
    and pulls, one or more per message, come in a handful of layouts. The bytes are :func:`encode_json_header`'s
    (tested)."""

    __slots__ = ()

    def _json_header(self) -> bytes:
        language = _language_names.get(self.language)
        if language is None:  # the first command of this language: encode_json_header names it
            return encode_json_header(self)
        return _plain_json_header(self.code, self.ext_fields, self.flag, language, self.opaque, self.remark,
                                  self.version).encode()  # fmt: skip


#: %-formats of plain JSON headers by layout (see UnescapedCommand); a server sends few layouts (bounded).
_plain_templates: dict[tuple[tuple[str, ...] | None, bool, str], str] = {}


def _plain_template(names: tuple[str, ...] | None, no_remark: bool, language: str) -> str:
    """The plain JSON header of a layout as a %-format (fastjson's member order, nulls left out): the code, each
    extFields value, the flag, the opaque, the remark (when there is one) and the version go in."""
    def lit(text: str) -> str:
        return text.replace("%", "%%")

    if names is None:
        members = ""
    elif names:
        members = ',"extFields":{"' + '","'.join(f'{lit(name)}":"%s' for name in names) + '"}'
    else:
        members = ',"extFields":{}'
    # serializeTypeCurrentRPC is a bean property that leaks into Java's JSON; every reader ignores it.
    template = ('{"code":%d' + members + ',"flag":%d,"language":"' + lit(language) + '","opaque":%d'
                + ("" if no_remark else ',"remark":"%s"') + ',"serializeTypeCurrentRPC":"JSON","version":%d}')
    if len(_plain_templates) >= 256:
        _plain_templates.clear()
    _plain_templates[(names, no_remark, language)] = template
    return template


def _plain_json_header(code: int, ext: dict[str, str] | None, flag: int, language: str, opaque: int,
                       remark: str | None, version: int) -> str:  # fmt: skip
    """The JSON header text of fields with nothing to escape (:func:`_plain_template` of their layout, filled)."""
    layout = (None if ext is None else tuple(ext), remark is None, language)
    template = _plain_templates.get(layout) or _plain_template(*layout)
    if remark is None:
        return template % (code, *(ext.values() if ext else ()), flag, opaque, version)
    return template % (code, *(ext.values() if ext else ()), flag, opaque, remark, version)


def plain_json_text(text: str) -> bool:
    """True when JSON writes *text* as it is (what an :class:`UnescapedCommand` may hold)."""
    if text.isalnum():  # numbers, hex ids, names (and letters beyond ASCII, which the next line refuses)
        return text.isascii()
    return text.isascii() and _JSON_ESCAPED.search(text) is None


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The JSON header fastjson writes for ``cmd``: members sorted, nulls left out, extFields as strings."""
    ext = cmd.ext_fields
    remark = cmd.remark
    try:
        # Raises TypeError unless every key, value and the remark is a string (as ``ext_dict`` makes them).
        text = "".join(ext) + "".join(ext.values()) if ext else ""
        if remark is not None:
            text += remark
    except TypeError:
        return _encode_json_header_escaping(cmd)
    language = _language_names.get(cmd.language)
    if language is None:
        language = _language_names[cmd.language] = LanguageCode.parse(cmd.language).name
    code, flag, opaque, version = cmd.code, cmd.flag, cmd.opaque, cmd.version
    if type(code) is not int or type(flag) is not int or type(opaque) is not int or type(version) is not int:
        code, flag, opaque, version = int(code), int(flag), int(opaque), int(version)
    if _JSON_ESCAPED.search(text) is None:
        text = _plain_json_header(code, ext, flag, language, opaque, remark, version)
        return text.encode() if text.isascii() else encode_utf8_java(text)
    doc: dict[str, object] = {"code": code}
    if ext is not None:
        doc["extFields"] = ext
    doc["flag"] = flag
    doc["language"] = language
    doc["opaque"] = opaque
    if remark is not None:
        doc["remark"] = remark
    doc["serializeTypeCurrentRPC"] = "JSON"
    doc["version"] = version
    text = _C_ENCODE(doc)
    if _c_encoding_matches(text):
        return encode_utf8_java(text)
    return _encode_json_header_escaping(cmd)


def _encode_json_header_escaping(cmd: RemotingCommand) -> bytes:
    """:func:`encode_json_header` member by member, each string escaped as fastjson escapes it."""
    quote = json_compat.quote
    parts = ['{"code":', str(int(cmd.code))]
    if cmd.ext_fields is not None:
        entries = []
        for key, value in cmd.ext_fields.items():
            text = value if type(value) is str else ext_value(value)
            if text is not None:
                entries.append(_quoted_key(key) + ":" + quote(text))
        parts.append(',"extFields":{' + ",".join(entries) + "}")
    language = _quoted_languages.get(cmd.language)
    if language is None:
        language = _quoted_languages[cmd.language] = quote(LanguageCode.parse(cmd.language).name)
    parts += [',"flag":', str(int(cmd.flag)), ',"language":', language, ',"opaque":', str(int(cmd.opaque))]
    if cmd.remark is not None:
        parts += [',"remark":', quote(cmd.remark)]
    version = int(cmd.version)
    tail = _header_tails.get(version)
    if tail is None:
        # serializeTypeCurrentRPC is a bean property that leaks into Java's JSON; every reader ignores it.
        tail = _header_tails[version] = f',"serializeTypeCurrentRPC":"JSON","version":{version}}}'
    parts.append(tail)
    return encode_utf8_java("".join(parts))


def _json_int(obj: Mapping[Any, Any], key: str, default: int) -> int:
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        raise FrameError(f"JSON header member {key!r} is not a number: {value!r}")
    try:
        return json_compat.from_json(int, value)
    except ValueError:
        raise FrameError(f"JSON header member {key!r} is not a number: {value!r}") from None


def _json_ext_value(value: object) -> str | None:
    # fastjson reading into HashMap<String,String>: numbers and booleans become their text, objects
    # their JSON; a null value leaves the key out.
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return ext_value(value)
    return json_compat.dumps(value)


_LANGUAGES: dict[str, LanguageCode] = dict(LanguageCode.__members__)


def _language(value: object) -> LanguageCode:
    """A header's ``language``: a known name at the cost of a lookup; absent: JAVA; else ``LanguageCode.parse``."""
    if value is None:
        return LanguageCode.JAVA
    known = _LANGUAGES.get(value) if type(value) is str else None
    return known if known is not None else LanguageCode.parse(value)


_SCAN_JSON: Final = json_compat.STANDARD_DECODER.scan_once

# msgspec's JSON decoder parses a header in about a quarter of the standard library's time (1.1 against 4 us for a
# send request's 360 bytes; the JSON header was a fifth of the broker's loop under one-way sends). It accepts
# strict JSON in strict UTF-8 only, and wherever it accepts a document it gives the standard library's values;
# anything else it refuses goes the standard way below (control characters, NaN, invalid UTF-8, huge floats).
# The usual header (int members, string extFields) is decoded straight into the members of a command; a header
# that does not fit that shape is decoded as a plain document and read member by member.
try:
    import msgspec

    class _UsualHeader(msgspec.Struct):
        code: int = 0
        language: Any = None
        version: int = 0
        opaque: int = 0
        flag: int = 0
        remark: Any = None
        extFields: dict[str, str] | None = None  # (the member's name on the wire)

    _FAST_HEADER: Callable[[Any], _UsualHeader] | None = msgspec.json.Decoder(_UsualHeader).decode
    _FAST_JSON: Callable[[Any], Any] | None = msgspec.json.Decoder().decode
    _FAST_JSON_REFUSED: tuple[type[BaseException], ...] = (msgspec.DecodeError, ValueError, RecursionError)
except ImportError:  # pragma: no cover - a dependency; the standard library alone still works
    _FAST_HEADER = _FAST_JSON = None
    _FAST_JSON_REFUSED = ()


def _all_str(mapping: dict[Any, Any]) -> bool:
    """Whether every key and value of *mapping* is a ``str`` (two joins in C, which refuse anything else)."""
    try:
        "".join(mapping)
        "".join(mapping.values())
    except TypeError:
        return False
    return True


def _decode_json_text(text: str) -> Any:
    """A header's JSON document as the standard library reads it, else in fastjson's lenient dialect."""
    try:
        # Standard JSON with nothing after it: the C scanner alone.
        obj, end = _SCAN_JSON(text, 0)
        if end != len(text) and not text[end:].isspace():
            raise ValueError("more after the header")
    except (StopIteration, ValueError, RecursionError):
        try:
            obj = json_compat.loads(text)
        except json_compat.JsonDecodeError as exc:
            raise FrameError(f"bad JSON header: {exc}") from None
    return obj


def decode_json_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Parse a JSON header as tolerantly as spec §3.1 asks: any member order, unknown or missing members,
    trailing whitespace, any ``language``, non-string ``extFields`` values coerced to their text."""
    if _FAST_HEADER is not None:
        try:
            h = _FAST_HEADER(data)  # every header a client writes
        except _FAST_JSON_REFUSED:
            pass
        else:
            remark = h.remark
            # Positional: code, language, version, opaque, flag, remark, ext_fields, body, serialize_type.
            return RemotingCommand(h.code, _language(h.language), h.version, h.opaque, h.flag,
                                   None if remark is None else _json_ext_value(remark), h.extFields, None,
                                   _SERIALIZE_JSON)  # fmt: skip
    try:
        if _FAST_JSON is None:
            raise ValueError("no msgspec")
        obj = _FAST_JSON(data)
    except _FAST_JSON_REFUSED:
        obj = _decode_json_text(str(data, "utf-8", "replace"))
    if type(obj) is not dict:
        raise FrameError(f"JSON header is not an object: {type(obj).__name__}")
    remark = obj.get("remark")
    ext = obj.get("extFields")
    ext_fields: dict[str, str] | None = None
    if type(ext) is dict and _all_str(ext):
        ext_fields = ext  # what every client sends: string keys and values, taken as they are
    elif isinstance(ext, Mapping):
        ext_fields = {}
        for key, value in ext.items():
            text = _json_ext_value(value)
            if text is not None:
                ext_fields[key if isinstance(key, str) else str(key)] = text
    elif ext is not None:
        raise FrameError(f"JSON header member 'extFields' is not an object: {ext!r}")
    language = obj.get("language")
    code, version, opaque, flag = obj.get("code"), obj.get("version"), obj.get("opaque"), obj.get("flag")
    return RemotingCommand(
        code=code if type(code) is int else _json_int(obj, "code", 0),
        language=_language(language),
        version=version if type(version) is int else _json_int(obj, "version", 0),
        opaque=opaque if type(opaque) is int else _json_int(obj, "opaque", 0),
        flag=flag if type(flag) is int else _json_int(obj, "flag", 0),
        remark=None if remark is None else _json_ext_value(remark),
        ext_fields=ext_fields,
        serialize_type=SerializeType.JSON,
    )


# --------------------------------------------------------------------------------------------------
# ROCKETMQ binary header (RocketMQSerializable)
# --------------------------------------------------------------------------------------------------


#: An extFields key as the binary header writes it (length and bytes), by key: a server writes few keys (bounded).
_ext_key_heads: dict[object, bytes] = {}


def _ext_key_head(key: object) -> bytes:
    k = encode_utf8_java(str(key))
    if len(k) > 0x7FFF:
        raise FrameError(f"extFields key of {len(k)} bytes does not fit a short length")
    head = _I16.pack(len(k)) + k
    if len(_ext_key_heads) < 4096:
        _ext_key_heads[key] = head
    return head


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    """The binary header of ``cmd``; code and version are cast to 16 bits as Java casts them."""
    language = cmd.language
    lang = language.value if type(language) is LanguageCode else LanguageCode.parse(language).value
    remark = cmd.remark
    rb = (remark.encode() if remark.isascii() else encode_utf8_java(remark)) if remark else b""
    ext: list[bytes] = []
    for key, value in (cmd.ext_fields or {}).items():
        text = value if type(value) is str else ext_value(value)
        if text is None:
            continue
        head = _ext_key_heads.get(key)
        if head is None:
            head = _ext_key_head(key)
        v = text.encode() if text.isascii() else encode_utf8_java(text)
        ext += (head, _I32.pack(len(v)), v)
    ext_bytes = b"".join(ext)
    code, version, opaque, flag = cmd.code, cmd.version, cmd.opaque, cmd.flag
    if not (-0x8000 <= code < 0x8000 and -0x8000 <= version < 0x8000 and -0x80000000 <= opaque < 0x80000000
            and -0x80000000 <= flag < 0x80000000):  # (the usual command: in range, no casts)
        code, version, opaque, flag = _int16(code), _int16(version), _int32(opaque), _int32(flag)
    return b"".join((_ROCKETMQ_FIXED.pack(code, lang, version, opaque, flag),
                     _I32.pack(len(rb)), rb, _I32.pack(len(ext_bytes)), ext_bytes))  # fmt: skip


def decode_rocketmq_header(data: bytes | bytearray | memoryview) -> RemotingCommand:
    """Parse a binary header, checking every length against the header as Java does."""
    buf = data if type(data) is bytes else bytes(data)
    size = len(buf)
    if size < ROCKETMQ_HEADER_MIN:
        raise FrameError(f"ROCKETMQ header of {size} bytes is shorter than {ROCKETMQ_HEADER_MIN}")
    # The fixed part, the remark length and, when there is no remark (every request a client sends), the
    # extFields length, in one unpack.
    code, language, version, opaque, flag, remark_len, ext_len = _ROCKETMQ_NO_REMARK.unpack_from(buf, 0)
    lang = _languages_by_code.get(language)
    if lang is None:
        lang = LanguageCode.parse(language)
    if remark_len == 0 and ext_len == size - ROCKETMQ_HEADER_MIN:
        return RemotingCommand(code, lang, version, opaque, flag, None,
                               _decode_rocketmq_ext(buf[ROCKETMQ_HEADER_MIN:]) if ext_len else None, None,
                               SerializeType.ROCKETMQ)  # fmt: skip
    if not 0 <= remark_len <= size - ROCKETMQ_HEADER_MIN:
        raise FrameError(f"ROCKETMQ header: remark length {remark_len} exceeds the header of {size} bytes")
    pos = 17 + remark_len
    remark = decode_utf8_java(buf[17:pos]) if remark_len else None
    (ext_len,) = _I32.unpack_from(buf, pos)
    pos += 4
    end = pos + ext_len
    if ext_len < 0 or end > size:
        raise FrameError(f"ROCKETMQ header: extFields length {ext_len} exceeds the header of {size} bytes")
    if end != size:
        raise FrameError(f"ROCKETMQ header: {size - end} bytes left over after the extFields")
    ext_fields = _decode_rocketmq_ext(buf[pos:end]) if ext_len > 0 else None
    return RemotingCommand(code, lang, version, opaque, flag, remark, ext_fields, None, SerializeType.ROCKETMQ)


_languages_by_code = {member.value: member for member in LanguageCode}
# Lengths read unsigned: a negative one (Java throws on it) reads as one past the block, refused as such.
_unpack_u16 = struct.Struct(">H").unpack_from
_unpack_u32 = struct.Struct(">I").unpack_from


#: extFields layouts by block size: the lengths of the entries in order (key, value, key, value, ...) and, once the
#: same lengths have come twice, a Struct that reads the whole block in one call, with the keys of that second block
#: (as bytes, and as text). A client writes the same layout header after header (the same keys, values of the same
#: widths), so most blocks are one unpack; the lengths it reads are compared with the layout's, and a block of the
#: same size but another layout is read entry by entry. Keys equal to the layout's are not decoded again: its text
#: is used (whose hashes the dict of every block then reuses).
_ext_layouts: dict[int, tuple[tuple[int, ...], struct.Struct | None, tuple[bytes, ...], tuple[str, ...]]] = {}
_EXT_LAYOUTS_MAX: Final = 256


def _decode_rocketmq_ext(block: bytes) -> dict[str, str]:
    """The extFields of a binary header: entries of a 2-byte key length, the key, a 4-byte value length and the
    value, which must fill the block exactly. Text is decoded as Java's ``new String(bytes, UTF_8)``; an entry
    with an empty key or value reads as null in Java and is left out.

    An ASCII block of a known layout (``_ext_layouts``) is one unpack. Otherwise the loop reads it; it does no
    bounds check of its own: reading a length past the block raises, a slice past it comes out short but leaves
    the position past the end, which the check after the loop refuses."""
    n = len(block)
    ascii_block = block.isascii()  # every header a client sends in practice
    layout = _ext_layouts.get(n)
    if layout is not None and ascii_block and layout[1] is not None:
        parts = layout[1].unpack(block)
        if parts[0::2] == layout[0]:
            keys = parts[1::4]
            names = layout[3] if keys == layout[2] else map(bytes.decode, keys)
            return dict(zip(names, map(bytes.decode, parts[3::4]), strict=True))
    text: str | bytes = block.decode("ascii") if ascii_block else block  # one decode, then slices of it
    entries: list[tuple[str | bytes, str | bytes]] = []
    complete = True  # no entry left out
    pos = 0
    try:
        while pos < n:
            key_len = _unpack_u16(block, pos)[0]
            key = text[pos + 2 : pos + 2 + key_len]
            pos += 2 + key_len
            value_len = _unpack_u32(block, pos)[0]
            pos += 4
            if key_len and value_len:
                entries.append((key, text[pos : pos + value_len]))
            else:
                complete = False
            pos += value_len
    except struct.error:
        raise FrameError(f"ROCKETMQ header: extFields entry at byte {pos} cut short") from None
    if pos != n:
        raise FrameError(f"ROCKETMQ header: an extFields entry runs {pos - n} bytes past the extFields")
    if not ascii_block:
        # Decoded in order, so a later entry wins even where two raw keys read as one text (bad UTF-8).
        return {decode_utf8_java(k): decode_utf8_java(v) for k, v in entries}  # type: ignore[arg-type]
    if complete:
        _learn_ext_layout(n, entries, layout)  # type: ignore[arg-type]
    return dict(entries)  # type: ignore[arg-type]


def _learn_ext_layout(
    size: int, entries: list[tuple[str, str]],
    known: tuple[tuple[int, ...], struct.Struct | None, tuple[bytes, ...], tuple[str, ...]] | None,
) -> None:  # fmt: skip
    """Remember the layout of an ASCII block read entry by entry; give it a Struct (and its keys) the second time
    it comes."""
    lengths = tuple(map(len, itertools.chain.from_iterable(entries)))
    if known is not None and known[0] == lengths:
        fmt = "".join(f"H{k}sI{v}s" for k, v in zip(lengths[0::2], lengths[1::2], strict=True))
        keys = tuple(sys.intern(key) for key, _ in entries)
        _ext_layouts[size] = (lengths, struct.Struct(">" + fmt), tuple(key.encode() for key in keys), keys)
        return
    if len(_ext_layouts) >= _EXT_LAYOUTS_MAX:
        _ext_layouts.clear()
    _ext_layouts[size] = (lengths, None, (), ())
