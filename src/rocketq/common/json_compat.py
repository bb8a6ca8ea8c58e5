"""JSON as Java peers write and read it: the dialect of fastjson 1.2.x, compact or pretty-printed.

Mirrors what RocketMQ's ``RemotingSerializable`` (``JSON.toJSONString`` / ``JSON.parseObject`` of fastjson)
does to bodies (spec: remoting-protocol §8.1):

- ``loads``: a lenient reader. Map keys may be quoted strings, bare integers (``{0:"a"}`` → ``int`` key),
  bare words, or whole objects/arrays (``{{"brokerName":"b","queueId":0,"topic":"t"}:5}``, MessageQueue
  keys of offset tables), which come back as hashable ``FrozenObject`` / ``tuple`` keys. Also accepted:
  single-quoted strings, trailing commas, a UTF-8 BOM, whitespace (C++ bodies end with ``\\n``). Standard
  JSON takes the fast path through the stdlib parser and gives the same result.
- ``dumps`` / ``dumps_bytes``: a compact writer. Default mode is fastjson's default: map entries in
  iteration order, ``None`` values left out, non-string keys bare (``0:``, ``true:``, an object key written
  as the object), enums by name, Java-style doubles (``0.0``, ``1.0E10``), strings raw UTF-8 with the
  escapes fastjson makes. ``standard=True`` is the form 4.9.4+ name servers use for routes
  (``BrowserCompatible, QuoteFieldNames, MapSortField``): map keys sorted, every key a string (an object
  key becomes its JSON text in a string), non-ASCII and ``/`` escaped. ``pretty=True`` is fastjson's
  ``PrettyFormat`` as the broker's config files use it: a tab per level, a line break before each bean
  member and string map key (integer keys stay inline), lists broken only with two items or more.
- Beans: a dataclass instance is written as fastjson writes a Java bean: members named in camelCase
  (``metadata={"json": "clientID"}`` overrides), sorted by name, ``None`` left out.
  ``from_json(SomeType, value)`` reads a decoded value back into a type the way fastjson's
  ``parseObject`` would: numbers from strings, enums by name or ordinal, ``"1"``/``"0"`` booleans,
  Java sets as arrays, unknown members ignored (or kept in a field marked ``{"fastjson": "extra"}``).

It lives in ``common`` (standard library and ``rocketq.common.errors`` only) so that every layer, the
store's config files included, can share one JSON dialect.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import functools
import json
import math
import re
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from decimal import Decimal
from typing import Any, Final

from rocketq.common.errors import RocketqError

__all__ = [
    "FrozenObject",
    "JsonDecodeError",
    "JsonValueError",
    "dumps",
    "dumps_bytes",
    "freeze",
    "from_json",
    "java_double_str",
    "json_name",
    "loads",
    "quote",
]


class JsonDecodeError(RocketqError, ValueError):
    """Text that is not JSON, not even in fastjson's lenient dialect."""

    def __init__(self, msg: str, text: str, pos: int) -> None:
        lineno = text.count("\n", 0, pos) + 1
        colno = pos - text.rfind("\n", 0, pos)
        super().__init__(f"{msg}: line {lineno} column {colno} (char {pos})")
        self.msg = msg
        self.pos = pos
        self.lineno = lineno
        self.colno = colno


class JsonValueError(RocketqError, ValueError):
    """A decoded JSON value that does not fit the type ``from_json`` was asked for."""


# --------------------------------------------------------------------------------------------------
# Hashable objects: JSON objects used as map keys
# --------------------------------------------------------------------------------------------------


class FrozenObject(Mapping[Any, Any]):
    """An immutable, hashable JSON object: what ``loads`` returns for an object used as a map key.

    Keeps member order (``dumps`` writes it back as read); equality ignores order, like a dict's.
    """

    __slots__ = ("_hash", "_members")

    def __init__(self, members: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = ()) -> None:
        self._members: dict[Any, Any] = {k: freeze(v) for k, v in dict(members).items()}
        self._hash: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._members[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._members.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._members == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenObject({self._members!r})"


def freeze(value: Any) -> Any:
    """A hashable equivalent of a decoded JSON value: objects → ``FrozenObject``, arrays → ``tuple``."""
    if isinstance(value, FrozenObject):
        return value
    if isinstance(value, Mapping):
        return FrozenObject(value)
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


# --------------------------------------------------------------------------------------------------
# Reader
# --------------------------------------------------------------------------------------------------

_WS = re.compile(r"[ \t\n\r\f\v]*")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
_BARE_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_PLAIN_DQ = re.compile(r'"([^"\\]*)"')
_DQ_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL)
_SQ_STRING = re.compile(r"'((?:[^'\\]|\\.)*)'", re.DOTALL)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", re.DOTALL)
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "'": "'",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\x0b",
    "0": "\x00",
}
_LITERALS = (("true", True), ("false", False), ("null", None))


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON for fastjson either; send them to the lenient parser, which refuses.
    raise ValueError(name)


class _Parser:
    """Recursive descent over the text; see ``loads`` for the dialect."""

    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, msg: str, pos: int) -> JsonDecodeError:
        return JsonDecodeError(msg, self.text, pos)

    def skip(self, pos: int) -> int:
        m = _WS.match(self.text, pos)
        return m.end() if m else pos

    def string(self, pos: int) -> tuple[str, int]:
        if self.text.startswith('"', pos):
            m = _PLAIN_DQ.match(self.text, pos)
            if m is not None:
                return m.group(1), m.end()
            m = _DQ_STRING.match(self.text, pos)
        else:
            m = _SQ_STRING.match(self.text, pos)
        if m is None:
            raise self.fail("unterminated string", pos)
        return self.unescape(m.group(1), pos), m.end()

    def unescape(self, body: str, pos: int) -> str:
        def one(m: re.Match[str]) -> str:
            code = m.group(1)
            if len(code) == 5 and code[0] == "u":
                return chr(int(code[1:], 16))
            if len(code) == 3 and code[0] == "x":
                return chr(int(code[1:], 16))
            if code in _SIMPLE_ESCAPES:
                return _SIMPLE_ESCAPES[code]
            raise self.fail(f"invalid escape \\{code}", pos)

        s = _ESCAPE.sub(one, body)
        if any("\ud800" <= ch <= "\udfff" for ch in s):
            # \uXXXX pairs of UTF-16 surrogates form one character; a lone one stays as it is.
            s = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        return s

    def number(self, pos: int) -> tuple[int | float, int] | None:
        m = _NUMBER.match(self.text, pos)
        if m is None:
            return None
        if m.group(1) is None and m.group(2) is None:
            return int(m.group()), m.end()
        return float(m.group()), m.end()

    def key(self, pos: int) -> tuple[Any, int]:
        ch = self.text[pos : pos + 1]
        if ch in ('"', "'"):
            return self.string(pos)
        if ch == "{":
            obj, end = self.object(pos + 1)
            return FrozenObject(obj), end
        if ch == "[":
            arr, end = self.array(pos + 1)
            return freeze(arr), end
        num = self.number(pos)
        if num is not None:
            return num
        m = _BARE_WORD.match(self.text, pos)
        if m is not None:
            return m.group(), m.end()
        raise self.fail("expected a member name", pos)

    def value(self, pos: int) -> tuple[Any, int]:
        text = self.text
        ch = text[pos : pos + 1]
        if ch == "{":
            return self.object(pos + 1)
        if ch == "[":
            return self.array(pos + 1)
        if ch in ('"', "'"):
            return self.string(pos)
        num = self.number(pos)
        if num is not None:
            return num
        for word, literal in _LITERALS:
            if text.startswith(word, pos):
                return literal, pos + len(word)
        raise self.fail("expected a value", pos)

    def object(self, pos: int) -> tuple[dict[Any, Any], int]:
        result: dict[Any, Any] = {}
        pos = self.skip(pos)
        if self.text.startswith("}", pos):
            return result, pos + 1
        while True:
            key, pos = self.key(pos)
            pos = self.skip(pos)
            if not self.text.startswith(":", pos):
                raise self.fail("expected ':'", pos)
            value, pos = self.value(self.skip(pos + 1))
            result[key] = value
            pos = self.skip(pos)
            ch = self.text[pos : pos + 1]
            if ch == "}":
                return result, pos + 1
            if ch != ",":
                raise self.fail("expected ',' or '}'", pos)
            pos = self.skip(pos + 1)
            if self.text.startswith("}", pos):  # fastjson tolerates a trailing comma
                return result, pos + 1

    def array(self, pos: int) -> tuple[list[Any], int]:
        result: list[Any] = []
        pos = self.skip(pos)
        if self.text.startswith("]", pos):
            return result, pos + 1
        while True:
            value, pos = self.value(pos)
            result.append(value)
            pos = self.skip(pos)
            ch = self.text[pos : pos + 1]
            if ch == "]":
                return result, pos + 1
            if ch != ",":
                raise self.fail("expected ',' or ']'", pos)
            pos = self.skip(pos + 1)
            if self.text.startswith("]", pos):
                return result, pos + 1

    def document(self) -> Any:
        start = 1 if self.text.startswith("\ufeff") else 0
        try:
            value, pos = self.value(self.skip(start))
        except RecursionError:
            raise self.fail("nested too deeply", start) from None
        pos = self.skip(pos)
        if pos != len(self.text):
            raise self.fail("extra data after the value", pos)
        return value


# One decoder for every call (json.loads with options would build a new one each time).
_STANDARD = json.JSONDecoder(strict=False, parse_constant=_reject_constant)
#: The standard-JSON decoder ``loads`` tries first (its ``scan_once`` parses one value at an index).
STANDARD_DECODER: Final = _STANDARD


def loads(data: str | bytes | bytearray | memoryview) -> Any:
    """Parse one JSON value in fastjson's lenient dialect.

    Objects become ``dict`` (member order kept), arrays ``list``. A map key is a ``str`` when quoted
    or a bare word, an ``int``/``float`` when a bare number, a ``FrozenObject``/``tuple`` when an
    object/array. Bytes are decoded as UTF-8, malformed sequences becoming U+FFFD (as Java does).
    Raises ``JsonDecodeError``.
    """
    text = data if isinstance(data, str) else str(data, "utf-8", "replace")
    try:
        # Standard JSON (most bodies): the C parser gives exactly what the lenient one would.
        return _STANDARD.decode(text)
    except (ValueError, RecursionError):
        pass
    return _Parser(text).document()


# --------------------------------------------------------------------------------------------------
# Writer
# --------------------------------------------------------------------------------------------------

# fastjson's default escapes: '"' and '\\', \b \t \n \f \r by letter, the other C0 controls, U+007F..U+009F
# and U+2028/U+2029 as \uXXXX (upper-case hex). Everything else goes out raw.
_NEEDS_ESCAPE = re.compile('[\x00-\x1f"\\\\\x7f-\x9f\u2028\u2029]')
# BrowserCompatible: '/' too, and every character from U+007F up (per UTF-16 unit).
_NEEDS_ESCAPE_BROWSER = re.compile('[\x00-\x1f"\\\\/\x7f-\U0010ffff]')
_LETTER_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    escaped = _LETTER_ESCAPES.get(ch)
    if escaped is not None:
        return escaped
    code = ord(ch)
    if code > 0xFFFF:  # a Java string holds it as a surrogate pair; each half is escaped
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
    return f"\\u{code:04X}"


# The default escapes as a translation table (all of them are single BMP characters): one C pass over a
# string, e.g. the \x01/\x02 separators of every message's properties.
_ESCAPE_TABLE = {
    code: _escape_char(_NEEDS_ESCAPE.match(chr(code)))  # type: ignore[arg-type]
    for code in [*range(0x20), 0x22, 0x5C, *range(0x7F, 0xA0), 0x2028, 0x2029]
}


def quote(s: str, *, browser_compatible: bool = False) -> str:
    """``s`` as a double-quoted JSON string, escaped as fastjson escapes it."""
    if browser_compatible:
        if _NEEDS_ESCAPE_BROWSER.search(s) is None:
            return f'"{s}"'
        return '"' + _NEEDS_ESCAPE_BROWSER.sub(_escape_char, s) + '"'
    if _NEEDS_ESCAPE.search(s) is None:
        return f'"{s}"'
    return '"' + s.translate(_ESCAPE_TABLE) + '"'


def java_double_str(value: float) -> str:
    """``Double.toString``: ``0.0``, ``1.5``, ``1.0E10``, ``1.0E-4`` (shortest round-trip digits)."""
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    # value = 0.d1d2d3... × 10^(point); sci exponent n: value = d1.d2d3... × 10^n
    n = len(digit_tuple) + exponent - 1
    prefix = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if n >= 0:
            int_part = digits[: n + 1].ljust(n + 1, "0")
            frac = digits[n + 1 :] or "0"
            return f"{prefix}{int_part}.{frac}"
        return f"{prefix}0.{'0' * (-n - 1)}{digits}"
    return f"{prefix}{digits[0]}.{digits[1:] or '0'}E{n}"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_EXTRA = "extra"


def json_name(field: dataclasses.Field[Any]) -> str:
    """The JSON member name of a dataclass field: ``metadata["json"]`` or the camelCase field name."""
    name = field.metadata.get("json")
    return name if isinstance(name, str) else _camel(field.name)


@functools.cache
def _bean_names(cls: type) -> tuple[tuple[str, str], ...]:
    """(attribute, member name) of each member field of ``cls``: all the writer needs."""
    return tuple((f.name, json_name(f)) for f in dataclasses.fields(cls) if f.metadata.get("fastjson") != _EXTRA)


@functools.cache
def _bean_layout(cls: type) -> tuple[tuple[str, str, Any, tuple[str, ...]], ...]:
    """(attribute, member name, resolved type, accepted aliases) of each member field of ``cls``."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, json_name(f), hints.get(f.name, Any), tuple(f.metadata.get("aliases", ())))
        for f in dataclasses.fields(cls)
        if f.metadata.get("fastjson") != _EXTRA
    )


@functools.cache
def _extra_field(cls: type) -> str | None:
    for f in dataclasses.fields(cls):
        if f.metadata.get("fastjson") == _EXTRA:
            return f.name
    return None


@functools.cache
def _has_fields(cls: type) -> bool:
    """Whether ``cls`` has any field (the unknown-members field too): a bean of none is written ``{}``."""
    return bool(dataclasses.fields(cls))


@functools.cache
def _sorted_bean_names(cls: type) -> tuple[tuple[str, str], ...]:
    """:func:`_bean_names` in the order fastjson writes the members (Java's order of their names)."""
    return tuple(sorted(_bean_names(cls), key=lambda names: _java_sort_key(names[1])))


def _bean_members(bean: Any) -> list[tuple[str, Any]]:
    """(member name, value) of *bean* as fastjson writes them: in order, nulls left out, unknown members kept."""
    cls = type(bean)
    extra = _extra_field(cls)
    more = getattr(bean, extra) if extra is not None else None
    if not more:  # the usual case: the order is the class's, worked out once
        return [(name, value) for attr, name in _sorted_bean_names(cls) if (value := getattr(bean, attr)) is not None]
    members: dict[str, Any] = dict(more)
    for attr, name in _bean_names(cls):
        members[name] = getattr(bean, attr)
    return sorted((kv for kv in members.items() if kv[1] is not None), key=lambda kv: _java_sort_key(kv[0]))


def _java_sort_key(s: str) -> bytes:
    # String.compareTo orders by UTF-16 code unit, which differs from code point order above U+FFFF.
    return s.encode("utf-16-be", "surrogatepass")


def _is_bean(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


class _Writer:
    """One writer for both layouts: compact, and fastjson's ``PrettyFormat`` (one tab per nesting level)."""

    def __init__(self, standard: bool, pretty: bool = False) -> None:
        self.standard = standard
        self.pretty = pretty
        self.level = 0
        self.out: list[str] = []

    def quote(self, s: str) -> str:
        return quote(s, browser_compatible=self.standard)

    def newline(self, level: int) -> None:
        if self.pretty:
            self.out.append(_indent(level))

    def value(self, value: Any) -> None:
        out = self.out
        kind = type(value)
        if kind is str:  # the commonest values first, by exact type (not bool, not an enum)
            out.append(self.quote(value))
        elif kind is int:
            out.append(str(value))
        elif value is None:
            out.append("null")
        elif value is True:
            out.append("true")
        elif value is False:
            out.append("false")
        elif isinstance(value, enum.Enum):  # before int: an IntEnum is written by name too
            out.append(self.quote(value.name))
        elif isinstance(value, int):
            out.append(str(int(value)))
        elif isinstance(value, float):
            out.append("null" if math.isnan(value) or math.isinf(value) else java_double_str(value))
        elif isinstance(value, Decimal):
            out.append(str(value))
        elif isinstance(value, str):
            out.append(self.quote(value))
        elif isinstance(value, bytes | bytearray | memoryview):
            out.append(self.quote(base64.b64encode(bytes(value)).decode("ascii")))  # byte[] → base64
        elif isinstance(value, Mapping):
            self.map(value)
        elif _is_bean(value):
            if _has_fields(type(value)):
                self.members(_bean_members(value))
            else:
                out.append("{}")
        elif isinstance(value, list | tuple):
            # PrettyFormat's ListSerializer breaks lines only for two items or more.
            self.array(value, broken=len(value) > 1)
        elif isinstance(value, set | frozenset):
            # A Java Set is written in hash order, which means nothing: sort for a stable output. Its
            # CollectionCodec never breaks lines.
            try:
                items = sorted(value)
            except TypeError:
                items = list(value)
            self.array(items, broken=False)
        else:
            raise TypeError(f"cannot write {type(value).__name__} as JSON")

    def array(self, items: Iterable[Any], broken: bool) -> None:
        level = self.level
        self.out.append("[")
        if broken:
            self.level = level + 1
        for i, item in enumerate(items):
            if i:
                self.out.append(",")
            if broken:
                self.newline(level + 1)
            self.value(item)
        self.level = level
        if broken:
            self.newline(level)
        self.out.append("]")

    def members(self, members: Iterable[tuple[str, Any]]) -> None:
        level = self.level
        out = self.out
        out.append("{")
        self.level = level + 1
        standard = self.standard
        first = _indent(level + 1) if self.pretty else ""  # what goes before a member: newline() inline
        rest = "," + first
        for name, value in members:
            out.append(first + _member_name(name, standard))
            first = rest
            self.value(value)
        self.level = level
        self.newline(level)
        out.append("}")

    def map(self, mapping: Mapping[Any, Any]) -> None:
        entries: Iterable[tuple[Any, Any]] = mapping.items()
        if self.standard:
            entries = _sorted_entries(mapping)
        level = self.level
        self.out.append("{")
        self.level = level + 1
        first = True
        for key, value in entries:
            if value is None:  # fastjson leaves null map values out (no WriteMapNullValue)
                continue
            if not first:
                self.out.append(",")
            first = False
            if isinstance(key, str):  # MapSerializer breaks the line before string keys only
                self.newline(level + 1)
            self.key(key)
            self.out.append(":")
            self.value(value)
        self.level = level
        if mapping:
            self.newline(level)
        self.out.append("}")

    def key(self, key: Any) -> None:
        if isinstance(key, str):
            self.out.append(self.quote(key))
        elif isinstance(key, enum.Enum):
            self.out.append(self.quote(key.name))
        elif self.standard:
            # WriteNonStringKeyAsString: the key's own JSON text, as a string.
            self.out.append(self.quote(dumps(key)))
        else:
            self.value(key)


_NEWLINES = ["\n" + "\t" * level for level in range(32)]


def _indent(level: int) -> str:
    """A new line at nesting *level*: fastjson's PrettyFormat puts a tab per level."""
    return _NEWLINES[level] if level < len(_NEWLINES) else "\n" + "\t" * level


@functools.lru_cache(maxsize=1024)
def _member_name(name: str, standard: bool) -> str:
    """A bean member's name, quoted, and its colon: beans of one class repeat a few names."""
    return quote(name, browser_compatible=standard) + ":"


def _sorted_entries(mapping: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
    """MapSortField: a TreeMap over the keys' natural order (numbers numerically, strings by UTF-16 unit)."""
    items = list(mapping.items())
    keys = [k for k, _ in items]
    if all(isinstance(k, str) for k in keys):
        return sorted(items, key=lambda kv: _java_sort_key(kv[0]))
    if all(isinstance(k, int | float) and not isinstance(k, bool) for k in keys):
        return sorted(items, key=lambda kv: kv[0])
    return items  # keys that are not mutually comparable: fastjson gives up sorting, so do we


def dumps(obj: Any, *, standard: bool = False, pretty: bool = False) -> str:
    """Serialize ``obj`` as fastjson does (see the module docstring for the modes).

    ``dict``/``Mapping``: a Java map; ``dataclass``: a Java bean; ``list``/``tuple``/``set``: an array;
    ``Enum``: its name; ``bytes``: base64; ``float``: Java's ``Double.toString``. ``pretty=True`` is
    ``JSON.toJSONString(obj, true)``, the layout of the broker's config files (store-format §8).
    """
    writer = _Writer(standard, pretty)
    writer.value(obj)
    return "".join(writer.out)


def dumps_bytes(obj: Any, *, standard: bool = False) -> bytes:
    """``dumps`` encoded as UTF-8: a body ready for ``RemotingCommand.body``."""
    return dumps(obj, standard=standard).encode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------------------------------
# Typed reading: decoded values into Python types, as fastjson's parseObject coerces them
# --------------------------------------------------------------------------------------------------


def _fail(path: str, expected: str, value: Any) -> JsonValueError:
    return JsonValueError(f"{path}: expected {expected}, found {value!r}")


def _to_bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0", ""):
            return False
    raise _fail(path, "a boolean", value)


def _to_int(value: Any, path: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise _fail(path, "an integer", value)


def _to_float(value: Any, path: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise _fail(path, "a number", value)


def _to_str(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, Mapping | list | tuple):
        return dumps(value)  # fastjson turns a JSONObject into its text when a String is wanted
    raise _fail(path, "a string", value)


def _to_enum(tp: type[enum.Enum], value: Any, path: str) -> enum.Enum:
    if isinstance(value, tp):
        return value
    members = list(tp)
    if isinstance(value, str):
        member = tp.__members__.get(value)
        if member is not None:
            return member
        if value.strip().lstrip("-").isdigit():
            value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(members):
        return members[value]  # fastjson reads a number into an enum as its ordinal
    raise _fail(path, f"a {tp.__name__} name or ordinal", value)


def _to_key(tp: Any, key: Any, path: str) -> Any:
    if isinstance(key, str) and dataclasses.is_dataclass(tp) and key.lstrip().startswith("{"):
        key = loads(key)  # standard form: an object key arrives as its JSON text
    return from_json(tp, key, path=f"{path}<key {key!r}>")


def _to_bean(cls: type, value: Any, path: str) -> Any:
    if not isinstance(value, Mapping):
        raise _fail(path, f"an object for {cls.__name__}", value)
    kwargs: dict[str, Any] = {}
    known: set[Any] = set()
    for attr, name, tp, aliases in _bean_layout(cls):
        for member in (name, *aliases):
            if member in value:
                known.add(member)
                if value[member] is not None:
                    kwargs[attr] = from_json(tp, value[member], path=f"{path}.{member}")
                break
    extra = _extra_field(cls)
    if extra is not None:
        kwargs[extra] = {str(k): v for k, v in value.items() if k not in known}
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a member without a default is missing
        raise JsonValueError(f"{path}: cannot build {cls.__name__}: {exc}") from None


def from_json(tp: Any, value: Any, *, path: str = "$") -> Any:
    """Convert a value from ``loads`` to type ``tp`` with fastjson's leniency.

    ``tp`` may be ``bool``/``int``/``float``/``str``/``bytes`` (base64), an ``Enum`` (name or ordinal), a
    dataclass (members by JSON name; missing ones keep their defaults, unknown ones are ignored or go
    to the field marked ``{"fastjson": "extra"}``; ``metadata={"aliases": (...)}`` accepts old names),
    ``list[T]``/``set[T]``/``frozenset[T]``/``tuple[T, ...]``, ``dict[K, V]`` (integer keys from
    ``"0"`` or ``0``, dataclass keys from object keys or their JSON text), ``X | None``, or ``Any``.
    Raises ``JsonValueError`` naming the path of the value that does not fit.
    """
    if tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors: list[str] = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return from_json(arg, value, path=path)
            except JsonValueError as exc:
                errors.append(str(exc))
        raise JsonValueError("; ".join(errors) or f"{path}: no type fits {value!r}")
    if tp is bool:
        return _to_bool(value, path)
    if tp is int:
        return _to_int(value, path)
    if tp is float:
        return _to_float(value, path)
    if tp is str:
        return _to_str(value, path)
    if tp is bytes:
        if isinstance(value, str):
            return base64.b64decode(value)
        raise _fail(path, "a base64 string", value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _to_enum(tp, value, path)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _to_bean(tp, value, path)
    if origin in (list, set, frozenset, tuple, Sequence, AbstractSet):
        if not isinstance(value, list | tuple):
            raise _fail(path, "an array", value)
        args = typing.get_args(tp)
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                raise _fail(path, f"an array of {len(args)}", value)
            return tuple(from_json(a, v, path=f"{path}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
        item_tp = args[0] if args else Any
        items = [from_json(item_tp, v, path=f"{path}[{i}]") for i, v in enumerate(value)]
        if origin in (list, Sequence):
            return items
        if origin is tuple:
            return tuple(items)
        return frozenset(items) if origin is frozenset else set(items)
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise _fail(path, "an object", value)
        args = typing.get_args(tp)
        key_tp, val_tp = args if args else (Any, Any)
        return {
            _to_key(key_tp, k, path): from_json(val_tp, v, path=f"{path}[{k!r}]")
            for k, v in value.items()
            if v is not None
        }
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise _fail(path, tp.__name__, value)
    raise JsonValueError(f"{path}: unsupported target type {tp!r}")
