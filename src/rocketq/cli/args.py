"""Argument types shared by the ``rocketq`` commands: each turns a bad value into argparse's one-line usage
error (``rocketq …: error: argument --x: …``) instead of a traceback further down."""

from __future__ import annotations

import argparse
from typing import Any

from rocketq.common.acl import SessionCredentials
from rocketq.common.errors import RocketqError

__all__ = ["add_credentials", "credentials", "non_negative", "port", "positive", "seconds"]


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


def seconds(text: str) -> float:
    """A duration in seconds, above 0 (a timeout of 0 or less would fail every wait, blamed on the server)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:  # (NaN too)
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text}")
    return value


def port(text: str) -> int:
    """A TCP port, 0 (any free port) to 65535."""
    value = non_negative(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"not a port (0 to 65535): {value}")
    return value


def add_credentials(p: argparse.ArgumentParser, *, default: Any = None) -> None:
    """``--access-key`` / ``--secret-key``: an ACL account to sign every request with."""
    p.add_argument("--access-key", dest="access_key", metavar="AK", default=default,
                   help="ACL account (with --secret-key): sign every request, for brokers with "
                   "aclEnable=true")  # fmt: skip
    p.add_argument("--secret-key", dest="secret_key", metavar="SK", default=default,
                   help="the ACL account's secret key")  # fmt: skip


class CredentialsError(RocketqError):
    exit_code = 2


def credentials(args: argparse.Namespace) -> SessionCredentials | None:
    """The account of ``--access-key``/``--secret-key``, or None when neither is given."""
    access_key, secret_key = getattr(args, "access_key", None), getattr(args, "secret_key", None)
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise CredentialsError("--access-key and --secret-key go together")
    return SessionCredentials(access_key, secret_key)
