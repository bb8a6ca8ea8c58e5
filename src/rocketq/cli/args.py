"""Argument types shared by the ``rocketq`` commands: each turns a bad value into argparse's one-line usage
error (``rocketq …: error: argument --x: …``) instead of a traceback further down."""

from __future__ import annotations

import argparse

__all__ = ["non_negative", "port", "positive"]


def non_negative(text: str) -> int:
    """An integer ≥ 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def positive(text: str) -> int:
    """An integer ≥ 1."""
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (any free port) to 65535."""
    value = non_negative(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"not a port (0 to 65535): {value}")
    return value
