"""SQL92 message selectors: RocketMQ's ``filter`` module (``SelectorParser.jj`` and the ``expression`` classes
behind ``FilterFactory``'s ``SQL92`` filter), as a consumer subscribing with ``MessageSelector.bySql`` uses them.

A selector is a condition over a message's properties (user properties and the system ones, ``TAGS`` and
``KEYS`` among them), every value a string or absent:

- literals: ``'text'`` (``''`` for a quote), integers (``5``, ``5L``), decimals (``1.5``, ``.5``, ``5E3``),
  ``TRUE``, ``FALSE``, ``NULL``; a property name is ``[A-Za-z_$][A-Za-z0-9_$]*``; keywords ignore case;
- ``=``, ``<>``, ``>``, ``>=``, ``<``, ``<=``, ``[NOT] BETWEEN x AND y``, ``[NOT] IN ('a', 'b')``,
  ``IS [NOT] NULL``, ``AND``, ``OR``, ``NOT``, unary ``-`` and ``+``, parentheses, ``--`` and ``/* */`` comments.

The semantics are Java's, quirks included, because a selector must pick the same messages on rocketq as on a
RocketMQ 4.9 broker:

- three-valued logic: a comparison with an absent property is unknown (None), ``AND``/``OR``/``NOT`` carry
  unknown as SQL does, and only TRUE selects a message;
- a property compared with a number is converted to that number's type (``Integer.valueOf``,
  ``Long.valueOf``, ``Double.valueOf``); ``>``/``<`` between two strings compare them as doubles. A value that
  does not convert is an error of the whole evaluation, and the broker then does not select the message,
  even where another branch of an ``OR`` would have;
- a bare property as a condition is never TRUE (its value is a string, not a boolean); ``NOT`` binds to the
  operand right after it, so ``NOT a = 'x'`` means ``(NOT a) = 'x'``;
- the parser stops after the first complete expression: text after it is not read beyond its first token;
- checks made when compiling: ``=`` with a ``NULL`` literal, ``>``/``<`` with a non-number literal or a
  condition, ``BETWEEN`` bounds that are null or out of order, ``IN`` on something other than a property,
  ``0.0`` and other decimals below ``Double.MIN_VALUE`` (Java's check, which refuses zero), integers beyond
  64 bits.

Values while evaluating are Java's boxes as Python objects: ``str`` (String), ``bool`` (Boolean), ``int``
(Integer), :class:`JLong` (Long), ``float`` (Double), None (null).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import Final

__all__ = ["EvaluationError", "JLong", "Selector", "SelectorError", "compile_selector"]

#: What every compile error's message starts with (Java's ``MQFilterException`` text).
INVALID: Final = "Invalid MessageSelector. "

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_DOUBLE_MIN_VALUE: Final = 5e-324  # Java's Double.MIN_VALUE: the smallest positive double


class SelectorError(ValueError):
    """The expression is not a valid selector (Java's ``MQFilterException`` from ``SelectorParser.parse``)."""


class EvaluationError(Exception):
    """An evaluation Java ends with an exception (a value that does not convert): the message is not selected."""


class JLong(int):
    """A Java ``Long``: an integer literal outside the ``Integer`` range, or such a value negated."""

    __slots__ = ()


Context = Mapping[str, str] | None
Node = Callable[[Context], object]


# ============================================================================ Java conversions


_JAVA_INT = re.compile(r"[+-]?\d+")  # Character.digit: any Unicode decimal digit
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_JAVA_BLANKS: Final = "".join(map(chr, range(33)))  # String.trim: every char up to the space
_JAVA_HEX_DOUBLE = re.compile(r"([+-]?)0[xX]((?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?")


def _parse_integral(text: str, low: int, high: int, what: str) -> int:
    if not _JAVA_INT.fullmatch(text):
        raise EvaluationError(f'NumberFormatException: For input string: "{text}" ({what})')
    value = int(text)
    if not low <= value <= high:
        raise EvaluationError(f'NumberFormatException: For input string: "{text}" (out of {what} range)')
    return value


def _integer_of(text: str) -> int:
    """``Integer.valueOf``."""
    return _parse_integral(text, _INT_MIN, _INT_MAX, "Integer")


def _long_of(text: str) -> JLong:
    """``Long.valueOf``."""
    return JLong(_parse_integral(text, _LONG_MIN, _LONG_MAX, "Long"))


def _double_of(text: str) -> float:
    """``Double.valueOf``: Java's grammar (blanks around it, ``NaN``, ``Infinity``, a ``d``/``f`` suffix, hex)."""
    s = text.strip(_JAVA_BLANKS)
    if _JAVA_DOUBLE.fullmatch(s):
        return float(s[:-1] if s[-1] in "fFdD" else s)
    m = _JAVA_HEX_DOUBLE.fullmatch(s)
    if m:
        return float.fromhex(m.group(1) + "0x" + m.group(2))
    raise EvaluationError(f'NumberFormatException: For input string: "{text}"')


def _jclass(v: object) -> str:
    t = type(v)
    if t is str:
        return "S"
    if t is bool:
        return "Z"
    if t is float:
        return "D"
    if t is JLong:
        return "J"
    return "I"


def _cmp_double(a: float, b: float) -> int:
    """``Double.compareTo``: NaN above everything and equal to itself, -0.0 below 0.0."""
    if a < b:
        return -1
    if a > b:
        return 1
    a_nan, b_nan = a != a, b != b
    if a_nan or b_nan:
        return (a_nan > b_nan) - (a_nan < b_nan)
    sa, sb = math.copysign(1.0, a), math.copysign(1.0, b)
    return (sa > sb) - (sa < sb)


def _compare(lv: object, rv: object) -> int:
    """``ComparisonExpression.__compare`` with string conversion on (as every parsed selector has it)."""
    lc, rc = _jclass(lv), _jclass(rv)
    if lc != rc:
        if lc == "Z":
            if rc == "S":  # Java casts the Boolean to String here
                raise EvaluationError("ClassCastException: Boolean cannot be cast to String")
            return -1
        if lc in ("I", "J"):  # Integer, Long: the other integer compares as is
            if rc == "D":
                lv = float(lv)  # type: ignore[arg-type]
            elif rc == "S":
                rv = _integer_of(rv) if lc == "I" else _long_of(rv)  # type: ignore[arg-type]
            elif rc not in ("I", "J"):
                return -1
        elif lc == "D":
            if rc in ("I", "J"):
                rv = float(rv)  # type: ignore[arg-type]
            elif rc == "S":
                rv = _double_of(rv)  # type: ignore[arg-type]
            else:
                return -1
        else:  # String
            if rc == "Z":
                lv = lv.lower() == "true"  # type: ignore[union-attr]  # Boolean.valueOf
            elif rc == "I":
                lv = _integer_of(lv)  # type: ignore[arg-type]
            elif rc == "J":
                lv = _long_of(lv)  # type: ignore[arg-type]
            elif rc == "D":
                lv = _double_of(lv)  # type: ignore[arg-type]
            else:
                return -1
    if type(lv) is float or type(rv) is float:
        return _cmp_double(lv, rv)  # type: ignore[arg-type]
    return (lv > rv) - (lv < rv)  # type: ignore[operator]


def _java_equals(lv: object, rv: object) -> bool:
    lc = _jclass(lv)
    if lc != _jclass(rv):
        return False
    if lc == "D":
        return _cmp_double(lv, rv) == 0  # type: ignore[arg-type]
    return lv == rv


# ============================================================================ tokens


# Token kinds; keywords are their own upper-cased text.
_KEYWORDS: Final = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})
ID, DECIMAL, FLOAT, STRING, EOF = "ID", "DECIMAL", "FLOAT", "STRING", "EOF"

_BLANK = re.compile(r"[ \t\n\r\f]+")
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT = re.compile(r"/\*[^*]*\*+(?:[^*/][^*]*\*+)*/")
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*[lL]?)")
_FLOAT = re.compile(r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+")
_STRING = re.compile(r"'(?:''|[^'])*'")
_OPERATORS: Final = (">=", "<=", "<>", "=", ">", "<", "(", ")", ",", "+", "-")


class _Token:
    __slots__ = ("kind", "pos", "text")

    def __init__(self, kind: str, text: str, pos: int) -> None:
        self.kind, self.text, self.pos = kind, text, pos

    def __repr__(self) -> str:
        return "end of expression" if self.kind == EOF else repr(self.text)


def _tokens(text: str) -> Iterator[_Token]:
    """JavaCC's token manager: the longest match at each point, made only when the parser asks for the token."""
    pos, end = 0, len(text)
    while True:
        while True:  # blanks and comments
            m = _BLANK.match(text, pos) or _LINE_COMMENT.match(text, pos) or _BLOCK_COMMENT.match(text, pos)
            if m is None:
                break
            pos = m.end()
        if pos >= end:
            yield _Token(EOF, "", pos)
            return
        c = text[pos]
        if c == "'":
            m = _STRING.match(text, pos)
            if m is None:
                raise SelectorError(f"{INVALID}unterminated string at column {pos + 1}")
            yield _Token(STRING, m.group(), pos)
            pos = m.end()
            continue
        if c.isascii() and (c.isdigit() or c == "."):
            d, f = _DECIMAL.match(text, pos), _FLOAT.match(text, pos)
            d_len = d.end() - pos if d else 0
            f_len = f.end() - pos if f else 0
            if d_len or f_len:
                kind, m_end = (FLOAT, pos + f_len) if f_len > d_len else (DECIMAL, pos + d_len)
                yield _Token(kind, text[pos:m_end], pos)
                pos = m_end
                continue
        m = _WORD.match(text, pos)
        if m is not None:
            word = m.group()
            upper = word.upper()
            yield _Token(upper, word, pos) if upper in _KEYWORDS else _Token(ID, word, pos)
            pos = m.end()
            continue
        for op in _OPERATORS:
            if text.startswith(op, pos):
                yield _Token(op, op, pos)
                pos += len(op)
                break
        else:
            raise SelectorError(f"{INVALID}unexpected character {c!r} at column {pos + 1}")


# ============================================================================ expressions


class _Expr:
    """A parsed (sub)expression: its evaluator and what Java's class tells the checks made while parsing."""

    __slots__ = ("boolean", "constant", "node", "prop", "text", "value")

    def __init__(self, node: Node, text: str, *, boolean: bool = False, constant: bool = False,
                 value: object = None, prop: str | None = None) -> None:  # fmt: skip
        self.node = node
        self.text = text
        self.boolean = boolean  # a BooleanExpression (a condition)
        self.constant = constant  # a ConstantExpression (a literal), with its value
        self.value = value
        self.prop = prop  # a PropertyExpression's name


def _constant(value: object, text: str, *, boolean: bool = False) -> _Expr:
    return _Expr(lambda _ctx: value, text, boolean=boolean, constant=True, value=value)


def _as_condition(e: _Expr) -> _Expr:
    """``asBooleanExpression``: a condition as is, a property cast to a boolean, anything else refused."""
    if e.boolean:
        return e
    if e.prop is not None:
        node = e.node

        def cast(ctx: Context) -> object:
            v = node(ctx)
            if v is None:
                return None
            return v if type(v) is bool else False

        return _Expr(cast, e.text, boolean=True)
    raise SelectorError(f"{INVALID}expression will not result in a boolean value: {e.text}")


def _check_less_than_operand(e: _Expr) -> None:
    if e.constant:
        if type(e.value) in (int, JLong, float):
            return
        raise SelectorError(f"{INVALID}value '{e.text}' cannot be compared")
    if e.boolean:
        raise SelectorError(f"{INVALID}value '{e.text}' cannot be compared")


def _check_equal_operand(e: _Expr) -> None:
    if e.constant and e.value is None:
        raise SelectorError(f"{INVALID}'{e.text}' cannot be compared")


def _equal(left: _Expr, right: _Expr, text: str) -> _Expr:
    """``doCreateEqual`` (no operand checks: ``IS NULL`` uses it directly)."""
    ln, rn = left.node, right.node

    def eq(ctx: Context) -> object:
        lv, rv = ln(ctx), rn(ctx)
        if (lv is None) != (rv is None):
            return None if lv is None else False
        if lv is None or _java_equals(lv, rv):
            return True
        return _compare(lv, rv) == 0

    return _Expr(eq, text, boolean=True)


def _not(e: _Expr, text: str) -> _Expr:
    node = e.node

    def neg(ctx: Context) -> object:
        v = node(ctx)
        return None if v is None else not v

    return _Expr(neg, text, boolean=True)


_ORDER: Final[dict[str, Callable[[int], bool]]] = {
    ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
}  # fmt: skip


def _ordering(op: str, left: _Expr, right: _Expr) -> _Expr:
    _check_less_than_operand(left)
    _check_less_than_operand(right)
    ln, rn, verdict = left.node, right.node, _ORDER[op]

    def order(ctx: Context) -> object:
        lv = ln(ctx)
        if lv is None:
            return None
        rv = rn(ctx)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:  # Java compares two strings as doubles
            return verdict(_cmp_double(_double_of(lv), _double_of(rv)))
        return verdict(_compare(lv, rv))

    return _Expr(order, f"{left.text} {op} {right.text}", boolean=True)


def _and(left: _Expr, right: _Expr) -> _Expr:
    ln, rn = left.node, right.node

    def both(ctx: Context) -> object:
        lv = ln(ctx)
        if lv is not None and not lv:
            return False
        rv = rn(ctx)
        if rv is not None and not rv:
            return False
        if lv is None or rv is None:
            return None
        return True

    return _Expr(both, f"({left.text}) AND ({right.text})", boolean=True)


def _or(left: _Expr, right: _Expr) -> _Expr:
    ln, rn = left.node, right.node

    def either(ctx: Context) -> object:
        lv = ln(ctx)
        if lv is not None and lv:
            return True
        rv = rn(ctx)
        if rv is not None and rv:
            return True
        if lv is None or rv is None:
            return None
        return False

    return _Expr(either, f"({left.text}) OR ({right.text})", boolean=True)


def _between(value: _Expr, low: _Expr, high: _Expr, negated: bool) -> _Expr:
    if negated:  # createNotBetween: no check of the bounds
        return _or(_ordering("<", value, low), _ordering(">", value, high))
    if low.constant and high.constant:
        if low.value is None or high.value is None:
            raise SelectorError(f"{INVALID}illegal values of between, values can not be null")
        try:
            out_of_order = _compare(high.value, low.value) < 0
        except EvaluationError as e:
            raise SelectorError(f"{INVALID}{e}") from None
        if out_of_order:
            raise SelectorError(f"{INVALID}illegal values of between, left value({low.text}) must be less than "
                                f"or equal to right value({high.text})")  # fmt: skip
    return _and(_ordering(">=", value, low), _ordering("<=", value, high))


def _in(value: _Expr, items: list[str], negated: bool) -> _Expr:
    if value.prop is None:
        raise SelectorError(f"{INVALID}expected a property for IN, got: {value.text}")
    node, members = value.node, frozenset(items)

    def among(ctx: Context) -> object:
        v = node(ctx)
        if v is None or type(v) is not str:
            return None
        return (v in members) != negated

    word = "NOT IN" if negated else "IN"
    return _Expr(among, f"{value.text} {word} ({', '.join(repr(i) for i in items)})", boolean=True)


def _negate(e: _Expr) -> _Expr:
    node = e.node

    def minus(ctx: Context) -> object:
        v = node(ctx)
        if v is None or type(v) is bool or type(v) is str:
            return None
        return JLong(-v) if type(v) is JLong else -v  # type: ignore[operator]

    return _Expr(minus, f"-{e.text}")


# ============================================================================ parser


class _Parser:
    """Recursive descent over SelectorParser.jj's rules, with its lookaheads; tokens are read as needed."""

    def __init__(self, text: str) -> None:
        self._source = _tokens(text)
        self._ahead: list[_Token] = []

    def _peek(self, k: int = 0) -> _Token:
        while len(self._ahead) <= k:
            if self._ahead and self._ahead[-1].kind == EOF:
                return self._ahead[-1]
            self._ahead.append(next(self._source))
        return self._ahead[k]

    def _take(self, kind: str) -> _Token:
        tok = self._peek()
        if tok.kind != kind:
            raise SelectorError(f"{INVALID}expected {kind} but found {tok!r} at column {tok.pos + 1}")
        self._ahead.pop(0)
        return tok

    def _next(self) -> _Token:
        tok = self._peek()
        self._ahead.pop(0)
        return tok

    # JmsSelector: the first complete expression; what follows is not looked at (the grammar has no <EOF>).
    def selector(self) -> _Expr:
        return _as_condition(self._or_expression())

    def _or_expression(self) -> _Expr:
        left = self._and_expression()
        while self._peek().kind == "OR":
            self._next()
            left = _or(_as_condition(left), _as_condition(self._and_expression()))
        return left

    def _and_expression(self) -> _Expr:
        left = self._equality_expression()
        while self._peek().kind == "AND":
            self._next()
            left = _and(_as_condition(left), _as_condition(self._equality_expression()))
        return left

    def _equality_expression(self) -> _Expr:
        left = self._comparison_expression()
        while True:
            kind = self._peek().kind
            if kind in ("=", "<>"):
                self._next()
                right = self._comparison_expression()
                _check_equal_operand(left)
                _check_equal_operand(right)
                if left.constant and right.constant and left.boolean and not right.boolean:
                    raise SelectorError(f"{INVALID}'{left.text}' cannot be compared with '{right.text}'")
                text = f"{left.text} {kind} {right.text}"
                left = _equal(left, right, text) if kind == "=" else _not(_equal(left, right, text), text)
            elif kind == "IS":
                null = _constant(None, "NULL", boolean=True)
                if self._peek(1).kind == "NULL":
                    self._next()
                    self._next()
                    left = _equal(left, null, f"{left.text} IS NULL")
                else:
                    self._next()
                    self._take("NOT")
                    self._take("NULL")
                    text = f"{left.text} IS NOT NULL"
                    left = _not(_equal(left, null, text), text)
            else:
                return left

    def _comparison_expression(self) -> _Expr:
        left = self._unary_expression()
        while True:
            kind = self._peek().kind
            if kind in _ORDER:
                self._next()
                left = _ordering(kind, left, self._unary_expression())
            elif kind == "BETWEEN":
                self._next()
                low = self._unary_expression()
                self._take("AND")
                left = _between(left, low, self._unary_expression(), False)
            elif kind == "IN":
                self._next()
                left = _in(left, self._string_list(), False)
            elif kind == "NOT":
                second = self._peek(1).kind
                if second == "BETWEEN":
                    self._next()
                    self._next()
                    low = self._unary_expression()
                    self._take("AND")
                    left = _between(left, low, self._unary_expression(), True)
                elif second == "IN":
                    self._next()
                    self._next()
                    left = _in(left, self._string_list(), True)
                else:
                    tok = self._peek(1)
                    raise SelectorError(f"{INVALID}expected BETWEEN or IN after NOT but found {tok!r} at column "
                                        f"{tok.pos + 1}")  # fmt: skip
            else:
                return left

    def _string_list(self) -> list[str]:
        self._take("(")
        items = [self._string()]
        while self._peek().kind == ",":
            self._next()
            items.append(self._string())
        self._take(")")
        return items

    def _string(self) -> str:
        return self._take(STRING).text[1:-1].replace("''", "'")

    def _unary_expression(self) -> _Expr:
        kind = self._peek().kind
        if kind == "+":
            self._next()
            return self._unary_expression()
        if kind == "-":
            self._next()
            return _negate(self._unary_expression())
        if kind == "NOT":
            self._next()
            operand = _as_condition(self._unary_expression())
            return _not(operand, f"NOT {operand.text}")
        return self._primary_expression()

    def _primary_expression(self) -> _Expr:
        tok = self._peek()
        kind = tok.kind
        if kind == "(":
            self._next()
            inner = self._or_expression()
            self._take(")")
            return inner
        if kind == ID:
            self._next()
            name = tok.text
            return _Expr(lambda ctx: ctx.get(name) if ctx is not None else None, name, prop=name)
        if kind == STRING:
            return _constant(self._string(), tok.text)
        self._next()
        if kind == DECIMAL:
            digits = tok.text[:-1] if tok.text[-1] in "lL" else tok.text
            value = int(digits)
            if value > _LONG_MAX:
                raise SelectorError(f"{INVALID}{tok.text} does not fit a long")
            return _constant(value if value <= _INT_MAX else JLong(value), tok.text)
        if kind == FLOAT:
            number = float(tok.text)
            if number > 1.7976931348623157e308:
                raise SelectorError(f"{INVALID}{tok.text} is greater than Double.MAX_VALUE")
            if number < _DOUBLE_MIN_VALUE:
                raise SelectorError(f"{INVALID}{tok.text} is less than Double.MIN_VALUE")
            return _constant(number, tok.text)
        if kind in ("TRUE", "FALSE"):
            return _constant(kind == "TRUE", kind, boolean=True)
        if kind == "NULL":
            return _constant(None, "NULL", boolean=True)
        raise SelectorError(f"{INVALID}unexpected {tok!r} at column {tok.pos + 1}")


# ============================================================================ selector


class Selector:
    """A compiled SQL92 selector (``SqlFilter.compile``)."""

    __slots__ = ("_node", "expression")

    def __init__(self, expression: str, node: Node) -> None:
        self.expression = expression
        self._node = node

    def evaluate(self, properties: Mapping[str, str] | None) -> object:
        """True, False or None (unknown); raises :class:`EvaluationError` where Java's evaluation throws."""
        return self._node(properties)

    def matches(self, properties: Mapping[str, str] | None) -> bool:
        """Does the message with these properties pass (the broker's ``isMatchedByCommitLog``)? Only a TRUE
        evaluation does: unknown, FALSE and an evaluation that fails do not."""
        try:
            return self._node(properties) is True
        except Exception:  # Java catches Throwable: any failure leaves the message out
            return False

    def __repr__(self) -> str:
        return f"Selector({self.expression!r})"


@lru_cache(maxsize=100)  # SelectorParser's parse cache holds 100 expressions too
def _compile_cached(expression: str) -> Selector | SelectorError:
    try:
        return Selector(expression, _Parser(expression).selector().node)
    except SelectorError as e:
        return e
    except RecursionError:
        return SelectorError(f"{INVALID}expression nested too deeply")


def compile_selector(expression: str) -> Selector:
    """Compile an SQL92 selector; raises :class:`SelectorError` (its message starts with Java's text)."""
    if expression is None or not isinstance(expression, str):
        raise SelectorError(f"{INVALID}no expression")
    result = _compile_cached(expression)
    if isinstance(result, SelectorError):
        raise SelectorError(str(result))
    return result
