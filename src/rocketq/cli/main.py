"""The ``rocketq`` command line: ``rocketq <group> <command> ...``.

Groups are registered in :data:`GROUPS`, each from a module of its own:
``store`` (:mod:`rocketq.cli.store_cmd`), ``namesrv``
(:mod:`rocketq.cli.namesrv_cmd`), ``spark`` (:mod:`rocketq.cli.spark_cmd`).

Errors a user can cause (a wrong path, a directory that is not a store, a bad
option or config file) end the program with one line on stderr,
``rocketq: error: ...``, and a non-zero status: 2 for a usage error, 1 for
anything else. No traceback, unless ``ROCKETQ_DEBUG`` is set.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from rocketq.cli import admin_cmd, broker_cmd, client_cmd, namesrv_cmd, spark_cmd, store_cmd
from rocketq.common.errors import RocketqError

PROG = "rocketq"

# (group name, function adding it to the top-level subparsers), in the order --help lists them.
GROUPS: list[tuple[str, Callable[[argparse._SubParsersAction], None]]] = [  # type: ignore[type-arg]
    ("store", store_cmd.register),
    ("namesrv", namesrv_cmd.register),
    ("broker", broker_cmd.register_broker),
    ("start", broker_cmd.register_start),
    ("admin", admin_cmd.register),
    ("produce", client_cmd.register_produce),
    ("consume", client_cmd.register_consume),
    ("spark", spark_cmd.register),
]


class UsageError(Exception):
    """A command line argparse rejected."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a usage error by raising, so ``main`` prints one line and returns 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        ns, extras = super().parse_known_args(args, namespace)
        if getattr(ns, "_deepest_prog", None) is None:  # the innermost command's parser returns first
            ns._deepest_prog = self.prog
        return ns, extras

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        """As argparse's, but an argument no parser took points at the help of the command it was given to."""
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            raise UsageError(f"unrecognized arguments: {' '.join(extras)} "
                             f"(see '{getattr(ns, '_deepest_prog', None) or self.prog} --help')")  # fmt: skip
        return ns


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog=PROG,
        description="rocketq: an Apache RocketMQ-compatible message store and broker in Python.",
        epilog="example:\n  rocketq store inspect ~/store\n"
        "  rocketq store dump ~/store --json > messages.jsonl",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    groups = parser.add_subparsers(dest="group", metavar="GROUP", title="groups")
    for _name, register in GROUPS:
        register(groups)
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("rocketq")
    except Exception:  # pragma: no cover - not installed
        return "unknown"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        name = exc.filename if exc.filename is not None else ""
        return f"{name}: {exc.strerror}" if name else exc.strerror
    return str(exc) or type(exc).__name__


def _interrupted(e: BaseException) -> bool:
    """Whether *e* stands for a Ctrl-C: Python wraps an interrupt that comes in some places (a class body's
    ``__set_name__`` of an import under way, say) in a RuntimeError whose cause it is."""
    seen = 0
    cause: BaseException | None = e
    while cause is not None and seen < 10:
        if isinstance(cause, KeyboardInterrupt):
            return True
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``rocketq`` with *argv* (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help, --version
        return e.code if isinstance(e.code, int) else 0
    func = getattr(args, "func", None)
    if func is None:
        names = ", ".join(name for name, _ in GROUPS)
        print(f"{PROG}: error: choose a command group: {names} (see '{PROG} --help')", file=sys.stderr)
        return 2
    try:
        return int(func(args))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``rocketq store dump ... | head``): stop quietly.
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (RocketqError, OSError) as e:
        print(f"{PROG}: error: {_describe(e)}", file=sys.stderr)
        return int(getattr(e, "exit_code", 1))
    except Exception as e:
        if _interrupted(e):
            print(f"{PROG}: interrupted", file=sys.stderr)
            return 130
        if os.environ.get("ROCKETQ_DEBUG"):
            raise
        print(
            f"{PROG}: internal error: {type(e).__name__}: {e} (set ROCKETQ_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return 70


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
