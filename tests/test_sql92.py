"""SQL92 selectors (rocketq.common.sql92): compile errors and evaluations as RocketMQ 4.9.4's filter module gives
them. The table's expectations were checked against that module (tests/java/SelectorCheck.java); the opt-in
reference test compares thousands of generated cases with it."""

from __future__ import annotations

import base64
import os
import random
import subprocess
from pathlib import Path

import pytest

from rocketq.common.sql92 import INVALID, EvaluationError, JLong, SelectorError, compile_selector

PROPS = {"a": "5", "b": "x", "TAGS": "TagA", "f": "1.5", "n": "abc", "t": "true", "big": "5000000000", "s": " 7 "}


def outcome(expression: str, props: dict[str, str] | None) -> str:
    """INVALID, or the evaluation as SelectorCheck.java prints it: TRUE, FALSE, NULL or ERROR."""
    try:
        selector = compile_selector(expression)
    except SelectorError:
        return "INVALID"
    try:
        value = selector.evaluate(props)
    except EvaluationError:
        return "ERROR"
    return {True: "TRUE", False: "FALSE", None: "NULL"}[value]  # type: ignore[index]


CASES = [
    # comparisons with conversion of the property to the literal's type
    ("a = 5", "TRUE"), ("a = '5'", "TRUE"), ("a = 5.0", "TRUE"), ("a <> 5", "FALSE"), ("a = 6", "FALSE"),
    ("a > 3", "TRUE"), ("a >= 5", "TRUE"), ("a < 5", "FALSE"), ("a <= 4.5", "FALSE"), ("a > 3.5", "TRUE"),
    ("a = 5L", "TRUE"), ("a = 99999999999", "FALSE"), ("big = 5000000000", "TRUE"), ("big = 5", "ERROR"),
    ("big > 1.5", "TRUE"), ("s = 7", "ERROR"), ("s > 6.5", "TRUE"), ("n = 5", "ERROR"), ("n > 1", "ERROR"),
    ("f > a", "FALSE"), ("f < a", "TRUE"), ("b > a", "ERROR"), ("t = TRUE", "TRUE"), ("b = TRUE", "FALSE"),
    ("TRUE = t", "ERROR"), ("5 = a", "TRUE"), ("a > -1", "TRUE"), ("a > - -1", "TRUE"), ("a > +4", "TRUE"),
    ("a > 5E-1", "TRUE"), ("a < .5", "FALSE"), ("a = 5.", "TRUE"),
    # absent properties: unknown, carried by NOT, AND and OR as SQL does
    ("c = 5", "NULL"), ("c <> 5", "NULL"), ("c > 5", "NULL"), ("5 = c", "FALSE"), ("NOT c > 1", "INVALID"),
    ("c > 1 OR a = 5", "TRUE"), ("c > 1 AND a = 5", "NULL"), ("c > 1 AND a = 6", "FALSE"),
    ("c IS NULL", "TRUE"), ("c IS NOT NULL", "FALSE"), ("a IS NULL", "FALSE"), ("a IS NOT NULL", "TRUE"),
    ("NULL IS NULL", "TRUE"), ("5 IS NULL", "FALSE"),
    # an evaluation error ends the whole expression, even where OR would have been TRUE
    ("n = 5 OR a = 5", "ERROR"), ("a = 5 OR n = 5", "TRUE"), ("a = 6 AND n = 5", "FALSE"),
    # BETWEEN, IN
    ("a BETWEEN 1 AND 10", "TRUE"), ("a BETWEEN 6 AND 10", "FALSE"), ("a NOT BETWEEN 1 AND 10", "FALSE"),
    ("a BETWEEN 5 AND 5", "TRUE"), ("f BETWEEN 1 AND 2", "ERROR"), ("f BETWEEN 1.0 AND 2.0", "TRUE"),
    ("b IN ('x', 'y')", "TRUE"), ("b NOT IN ('x')", "FALSE"), ("c IN ('x')", "NULL"), ("(b) IN ('x')", "TRUE"),
    ("TAGS IN ('TagA', 'TagB') AND a > 1", "TRUE"), ("b IN ('x''y')", "FALSE"),
    # conditions out of properties and literals
    ("TRUE", "TRUE"), ("FALSE", "FALSE"), ("NULL", "NULL"), ("t", "FALSE"), ("c", "NULL"), ("NOT t", "TRUE"),
    ("NOT a = 'x'", "ERROR"), ("(a > 1) = TRUE", "TRUE"), ("a = 5 = TRUE", "TRUE"), ("1 = TRUE", "FALSE"),
    # keywords ignore case; comments; the parser stops after the first complete expression
    ("a > 1 and b = 'x'", "TRUE"), ("a > 1 -- note\n AND b = 'x'", "TRUE"), ("a > 1 /* x */ OR c = 1", "TRUE"),
    ("a > 1 xyz", "TRUE"), ("a > 1 )", "TRUE"), ("a > 1 --5", "TRUE"),
    # refused when compiling
    ("", "INVALID"), ("a", "FALSE"), ("5", "INVALID"), ("'x'", "INVALID"), ("-a", "INVALID"),
    ("a = NULL", "INVALID"), ("NULL = a", "INVALID"), ("a <> NULL", "INVALID"), ("TRUE = 1", "INVALID"),
    ("b > 'a'", "INVALID"), ("a > TRUE", "INVALID"), ("(a > 1) > 2", "INVALID"), ("a > 0.0", "INVALID"),
    ("a > 1 NOT x", "INVALID"), ("a IS", "INVALID"), ("a IS 5", "INVALID"), ("a BETWEEN 10 AND 1", "INVALID"),
    ("a BETWEEN NULL AND 1", "INVALID"), ("a BETWEEN 'x' AND 1", "INVALID"), ("5 IN ('x')", "INVALID"),
    ("a IN (1)", "INVALID"), ("a IN ()", "INVALID"), ("a != 5", "INVALID"), ("a = 'x", "INVALID"),
    ("a = 99999999999999999999", "INVALID"), ("a.b = 1", "INVALID"), ("a > 1 AND", "INVALID"),
    ("(a > 1", "INVALID"), ("a = 1e999", "INVALID"), ("a LIKE 'x'", "FALSE"), ("# a", "INVALID"),
    ("a > 1 /* open", "INVALID"), ("a > 1 NOT", "INVALID"), ("5 AND a", "INVALID"), ("NOT -a", "INVALID"),
]  # fmt: skip


@pytest.mark.parametrize(("expression", "expected"), CASES)
def test_selector_cases(expression: str, expected: str) -> None:
    assert outcome(expression, PROPS) == expected


def test_matches_only_true_and_never_raises() -> None:
    assert compile_selector("a = 5").matches(PROPS)
    assert not compile_selector("c = 5").matches(PROPS)  # unknown
    assert not compile_selector("n = 5 OR a = 5").matches(PROPS)  # an evaluation error
    assert not compile_selector("a = 5").matches(None)
    assert compile_selector("c IS NULL").matches(None)


def test_compile_error_message_and_cache() -> None:
    with pytest.raises(SelectorError) as e:
        compile_selector("a = NULL")
    assert str(e.value).startswith(INVALID) and "NULL" in str(e.value)
    assert compile_selector("a > 1") is compile_selector("a > 1")
    with pytest.raises(SelectorError):  # a cached error raises each time
        compile_selector("a = NULL")
    with pytest.raises(SelectorError, match="nested too deeply"):
        compile_selector("(" * 5000 + "a > 1" + ")" * 5000)


def test_java_number_conversions() -> None:
    sel = compile_selector("v = 5")
    for text, expected in (("5", True), ("+5", True), ("-5", False), ("05", True), ("5.0", None), (" 5", None),
                           ("5_0", None), ("٥", True)):  # fmt: skip
        try:
            assert sel.evaluate({"v": text}) is expected, text
        except EvaluationError:
            assert expected is None, text
    dbl = compile_selector("v = 1.5")
    for text, expected in (("1.5", True), (" 1.5 ", True), ("1.5d", True), ("1.5F", True), ("15e-1", True),
                           ("0x1.8p0", True), ("NaN", False), ("1_5", None), ("nan", None), ("inf", None),
                           ("١.٥", None)):  # fmt: skip
        try:
            assert dbl.evaluate({"v": text}) is expected, text
        except EvaluationError:
            assert expected is None, text
    with pytest.raises(EvaluationError):  # an Integer literal: Integer.valueOf of the property
        compile_selector("v > 2147483647").evaluate({"v": "2147483648"})
    assert compile_selector("v > 2147483648").evaluate({"v": "2147483649"}) is True  # a Long literal: Long.valueOf
    assert JLong(3) == 3


# ============================================================================ against RocketMQ's own filter module


def _random_case(rng: random.Random) -> tuple[str, dict[str, str]]:
    names = ["a", "b", "c", "f", "n", "t", "TAGS"]
    literals = ["0", "1", "5", "7", "2147483647", "2147483648", "99999999999", "5L", "1.5", ".5", "5E2", "0.0",
                "2.5e-3", "'5'", "'x'", "'a''b'", "'1.5'", "'true'", "''", "TRUE", "FALSE", "NULL"]
    ops = ["=", "<>", ">", ">=", "<", "<="]

    def atom() -> str:
        r = rng.random()
        if r < 0.5:
            return rng.choice(names)
        if r < 0.9:
            return rng.choice(literals)
        return rng.choice(["-", "+", "NOT "]) + atom()

    def expr(depth: int) -> str:
        r = rng.random()
        if depth <= 0 or r < 0.35:
            return f"{atom()} {rng.choice(ops)} {atom()}"
        if r < 0.45:
            neg = rng.choice(["", "NOT "])
            return f"{atom()} {neg}BETWEEN {atom()} AND {atom()}"
        if r < 0.55:
            items = ", ".join(rng.choice(["'x'", "'5'", "'TagA'", "''", "5"]) for _ in range(rng.randint(1, 3)))
            return f"{atom()} {rng.choice(['', 'NOT '])}IN ({items})"
        if r < 0.62:
            return f"{atom()} IS {rng.choice(['', 'NOT '])}NULL"
        if r < 0.8:
            return f"{expr(depth - 1)} {rng.choice(['AND', 'OR', 'and', 'Or'])} {expr(depth - 1)}"
        if r < 0.88:
            return f"NOT {expr(depth - 1)}"
        if r < 0.94:
            return f"({expr(depth - 1)})"
        tokens = ["a", "5", "'x'", "(", ")", "AND", "NOT", "IS", "NULL", "=", ">", "-", ",", "IN", "1.5", "--", "/*"]
        return " ".join(rng.choice(tokens) for _ in range(rng.randint(1, 6)))

    values = ["5", "1.5", "abc", "true", "TRUE", "", " 7 ", "+3", "-0", "2147483648", "1e3", "NaN", "Infinity",
              "0x1p3", "7d", "x", "TagA", "5.0", "-1", "0", "٥", "1.5f"]
    props = {name: rng.choice(values) for name in names if rng.random() < 0.7}
    return expr(rng.randint(0, 3)), props


@pytest.mark.reference
def test_selectors_agree_with_rocketmq_filter_module(tmp_path: Path) -> None:
    rmq_home = os.environ.get("RMQ_HOME")
    if not rmq_home:
        pytest.skip("RMQ_HOME is not set: the real RocketMQ 4.9.4 is not here")
    java_dir = Path(__file__).resolve().parent / "java"
    classpath = f"{Path(rmq_home) / 'lib'}/*"
    subprocess.run(["javac", "-d", str(tmp_path), "-cp", classpath, str(java_dir / "SelectorCheck.java")],
                   check=True, timeout=120)  # fmt: skip
    rng = random.Random(20261127)
    cases = [(e, PROPS) for e, _ in CASES] + [_random_case(rng) for _ in range(4000)]

    def b64(s: str) -> str:
        return base64.b64encode(s.encode()).decode()

    lines = [" ".join([b64(e)] + [b64(f"{k}={v}") for k, v in p.items()]) for e, p in cases]
    java = subprocess.run(["java", "-cp", f"{tmp_path}:{classpath}", "SelectorCheck"], input="\n".join(lines) + "\n",
                          capture_output=True, text=True, check=True, timeout=300)  # fmt: skip
    answers = java.stdout.splitlines()
    assert len(answers) == len(cases)
    disagreements = [(e, p, j, outcome(e, p)) for (e, p), j in zip(cases, answers, strict=True) if j != outcome(e, p)]
    assert not disagreements, disagreements[:20]
    kinds = {a for a in answers}
    assert {"TRUE", "FALSE", "NULL", "ERROR", "INVALID"} <= kinds  # the generator reaches every outcome
