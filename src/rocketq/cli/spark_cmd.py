"""``rocketq spark …``: the Spark jobs over a store directory (:mod:`rocketq.spark`).

Subcommands (each takes ``-c/--conf broker.conf``, ``--master`` and ``--spark-conf KEY=VALUE``):

- ``rebuild DIR``                 every consume queue and index file rebuilt from the commit log;
- ``export DIR OUT``              messages to Parquet / JSON partitioned by topic and date;
- ``stats DIR``                   per topic and queue counts, bytes, time range, rate chart (PNG), top tags/keys;
- ``query DIR --key K | --time-range A B``  messages across the whole store;
- ``package [OUT]``               the zip of the package for ``spark-submit --py-files``.

The jobs run in ``local[*]`` unless ``--master`` says otherwise; under
``spark-submit`` (entry script ``rocketq/spark/__main__.py``) they use its
session. Nothing here imports pyspark until a job runs; without the ``spark``
extra the command says how to install it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rocketq.cli.args import positive
from rocketq.cli.store_cmd import CommandError
from rocketq.common.errors import RocketqError
from rocketq.store.store_config import MessageStoreConfig
from rocketq.store.store_lock import StoreLock
from rocketq.store.store_settings import store_directory, store_settings

_CONF_HELP = (
    "broker.conf with RocketMQ's property names (storePathCommitLog, mappedFileSizeConsumeQueue, maxHashSlotNum, "
    "maxIndexNum, ...); without it sizes are inferred from the files"
)
# Errors of ours raised inside Spark tasks arrive wrapped; this finds the original message.
_OUR_ERROR = re.compile(
    r"(?:rocketq\.\S+\.)?(CorruptRecordError|StoreError|OptionError|CommandError|RocketqError): ([^\n]+)"
)


def _need_spark() -> None:
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as e:
        raise CommandError(f"{e.name} is not installed: pip install 'rocketq[spark]'") from None


@contextmanager
def _session(args: argparse.Namespace) -> Iterator[Any]:
    """The job's SparkSession (stopped afterwards if made here); Spark's errors turned into ours."""
    _need_spark()
    from rocketq.spark.session import get_session

    conf = dict(args.spark_conf or [])
    spark, created = get_session(args.master, app_name=f"rocketq {args.command}", conf=conf)
    interrupts = _QuietInterrupts(spark)
    try:
        yield spark
    except RocketqError:
        raise
    except Exception as e:
        found = _OUR_ERROR.search(str(e))
        if found is not None:
            why = found.group(2).strip()
            from rocketq.spark.store_scan import PERMISSIVE_HINT  # (pyspark is there: a job ran)

            if getattr(args, "permissive", None) is False:  # a job with the option: its name
                why = why.replace(PERMISSIVE_HINT, "give --permissive to skip corrupt records")
            elif not hasattr(args, "permissive"):  # rebuild: nothing may be skipped
                why = why.replace(PERMISSIVE_HINT, f"'rocketq store verify {args.dir}' tells more")
            raise CommandError(why) from None
        from pyspark.errors import PySparkException

        if isinstance(e, PySparkException) or type(e).__name__ == "Py4JJavaError":
            first = next((line.strip() for line in str(e).splitlines() if line.strip()), type(e).__name__)
            raise CommandError(f"Spark: {first}") from None
        raise
    finally:
        try:
            interrupts.settle()
            if created:
                spark.stop()
        finally:
            interrupts.restore()


class _QuietInterrupts:
    """Ctrl-C during a job: a clean stop, without tracebacks.

    PySpark's own SIGINT handler cancels the jobs through the very py4j connection the interrupted call is reading
    (a reentrant call, which fails), py4j logs both failures with their tracebacks, and a session stopped under
    running tasks logs theirs. While this is installed (main thread only), an interrupt turns Spark's logging off,
    cancels the jobs from a thread of its own (a py4j connection of its own) and silences py4j's report of the
    interrupted call; :meth:`settle`, before the session stops, waits for the jobs to go. The interrupt ends the
    command as any other: ``rocketq: interrupted``, status 130.
    """

    def __init__(self, spark: Any) -> None:
        self._sc = spark.sparkContext
        self._cancelling: threading.Thread | None = None
        self._previous: Any = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_interrupt)

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        if self._cancelling is None:
            logging.disable(logging.CRITICAL)  # py4j reports the interrupted call on the root logger
            accumulators = getattr(self._sc, "_accumulatorServer", None)  # a socketserver: it prints a cut link
            if accumulators is not None:
                accumulators.handle_error = _ignore_error
            quiet = threading.Event()
            self._cancelling = threading.Thread(target=self._cancel, args=(quiet,), name="rocketq-cancel-jobs",
                                                daemon=True)  # fmt: skip
            self._cancelling.start()
            # The interrupt cuts the call in progress, which aborts its job at once: Spark's logging off first.
            quiet.wait(3)
        raise KeyboardInterrupt

    def _cancel(self, quiet: threading.Event) -> None:
        sc = self._sc
        try:
            try:
                sc.setLogLevel("OFF")
            finally:
                quiet.set()
            sc.cancelAllJobs()
            deadline = time.monotonic() + 10
            while sc.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
                time.sleep(0.1)
        except Exception:  # the session is stopping anyway, and its stop cancels what runs
            pass

    def settle(self) -> None:
        """After an interrupt, before the session stops: the cancelled jobs gone (a second Ctrl-C stops waiting)."""
        if self._cancelling is not None:
            with contextlib.suppress(KeyboardInterrupt):
                self._cancelling.join(12)

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        logging.disable(logging.NOTSET)


def _ignore_error(request: Any, client_address: Any) -> None:
    """``socketserver.BaseServer.handle_error`` that prints nothing."""


def _progress(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


def _say_settings(settings: Any, from_conf: bool) -> None:
    """What the rebuilt files will be sized by, on stderr, and a warning where a size is only RocketMQ's default
    while the commit log shows the store was not written with the defaults."""
    cfg = settings.config
    sources = settings.sources
    sys.stderr.write(
        f"rebuilding with mappedFileSizeCommitLog={cfg.mapped_file_size_commit_log} "
        f"({sources.get('mappedFileSizeCommitLog', '?')}), mappedFileSizeConsumeQueue="
        f"{cfg.mapped_file_size_consume_queue} ({sources.get('mappedFileSizeConsumeQueue', '?')}), "
        f"maxHashSlotNum={cfg.max_hash_slot_num} maxIndexNum={cfg.max_index_num} ({sources.get('index', '?')})\n")
    if from_conf:
        return
    sys.stderr.write("delay levels: RocketMQ's default messageDelayLevel (the due times of SCHEDULE_TOPIC_XXXX "
                     "units follow from it; give -c if the broker had others)\n")  # fmt: skip
    if cfg.mapped_file_size_commit_log == MessageStoreConfig().mapped_file_size_commit_log:
        return
    defaults = [name for name in ("mappedFileSizeConsumeQueue", "index")
                if sources.get(name) in ("RocketMQ default", "RocketMQ default (no index files)")]  # fmt: skip
    if defaults:
        sys.stderr.write(
            f"warning: the commit-log files are not of RocketMQ's default size, yet {' and '.join(defaults)} "
            "could only be taken from the defaults (no files to read them from): a broker started with other "
            "settings will not open these files. Give the store's broker.conf with -c.\n")


def _settings_config(args: argparse.Namespace) -> Any:
    return store_settings(store_directory(args.dir), args.conf).config


def _a_store(raw: str, *, rebuilt: bool = False) -> Path:
    """*raw* as a store directory, checked before Spark starts (a JVM and seconds of work for a mistyped path):
    it holds a commit log, and a store to rebuild is not in use."""
    store_dir = store_directory(raw)
    if not (store_dir / "commitlog").is_dir():
        # a mistyped path (the store's parent, say) would read nothing, or get consume queues of nothing
        raise CommandError(f"{store_dir}: not a RocketMQ store (no commitlog/ directory)"
                           + ("; nothing rebuilt" if rebuilt else ""), exit_code=1)  # fmt: skip
    if rebuilt:
        with StoreLock(store_dir):  # refused at once when a broker or another job has it
            pass
    return store_dir


def cmd_rebuild(args: argparse.Namespace) -> int:
    store_dir = _a_store(args.dir, rebuilt=True)
    settings = store_settings(store_dir, args.conf)
    config = settings.config
    _say_settings(settings, args.conf is not None)
    with _session(args) as spark:
        from rocketq.spark.rebuild import rebuild

        report = rebuild(spark, config, progress=_progress(args), max_partition_bytes=args.max_partition_bytes)
    sys.stdout.write("\n".join(report.lines()) + "\n")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    store = str(_a_store(args.dir))
    from rocketq.spark.export import check_out_apart, check_out_free

    check_out_apart(store, str(args.out))  # before Spark starts: a quick refusal, nothing deleted
    check_out_free(str(args.out), args.overwrite)
    with _session(args) as spark:
        from rocketq.spark.export import export

        options = {"mode": "PERMISSIVE"} if args.permissive else {}
        report = export(spark, store, args.out, fmt=args.format, conf=args.conf, options=options,
                        overwrite=args.overwrite, progress=_progress(args))  # fmt: skip
    sys.stdout.write("\n".join(report.lines()) + "\n")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    store = str(_a_store(args.dir))
    with _session(args) as spark:
        from rocketq.spark.stats import draw_chart, format_table, store_stats

        options = {"mode": "PERMISSIVE"} if args.permissive else {}
        stats = store_stats(spark, store, conf=args.conf, options=options, top=args.top)
    if stats.queues and args.chart != "-":
        draw_chart(stats, args.chart)
    if args.json:
        sys.stdout.write(json.dumps(stats.to_json(), indent=1) + "\n")
    else:
        sys.stdout.write("\n".join(format_table(stats)) + "\n")
    return 0


def _time_arg(text: str) -> int:
    from rocketq.spark.options import OptionError, parse_time

    try:
        return parse_time(text, "time")
    except OptionError:
        raise argparse.ArgumentTypeError(f"not a time (ms since the epoch or ISO-8601): {text!r}") from None


def cmd_query(args: argparse.Namespace) -> int:
    if args.key is None and args.time_range is None:
        raise CommandError("give --key K or --time-range A B (see 'rocketq spark query --help')", exit_code=2)
    if args.time_range is not None and args.time_range[1] < args.time_range[0]:
        raise CommandError("--time-range: the end is before the start", exit_code=2)
    store = str(_a_store(args.dir))
    with _session(args) as spark:
        from rocketq.spark.query import query

        found = query(spark, store, key=args.key, time_range=tuple(args.time_range) if args.time_range else None,
                      topic=args.topic, conf=args.conf, limit=args.max, permissive=args.permissive)  # fmt: skip
    out = sys.stdout
    for m in found.messages:
        if args.json:
            out.write(json.dumps(m) + "\n")
        else:
            keys = " ".join(m["keys"] or []) or "-"
            out.write(f"{m['commitLogOffset']:>12}  {m['topic']}/{m['queueId']}#{m['queueOffset']}  {m['msgId']}  "
                      f"storeTimestamp={m['storeTimestamp']}  tags={m['tags'] or '-'}  keys=[{keys}]  "
                      f"uniq={m['uniqKey'] or '-'}  body={len(m['body']) * 3 // 4}B\n")  # fmt: skip
    more = f" (more exist: --max {args.max} reached)" if found.truncated else ""
    sys.stderr.write(f"{len(found.messages)} messages{more}\n")
    return 0 if found.messages else 1


def cmd_package(args: argparse.Namespace) -> int:
    from rocketq.spark.session import entry_script, package_zip

    out = package_zip(args.out)
    sys.stdout.write(f"{out}\nentry script for spark-submit: {entry_script()}\n")
    return 0


_COMMANDS: dict[str, tuple[str, str, str]] = {
    "rebuild": (
        "rebuild every consume queue and index file from the commit log, in parallel",
        "Decode the commit log of DIR per file in parallel and write every consume queue and index file anew,\n"
        "byte for byte what the store's own dispatch writes (index file names are creation times). The new\n"
        "files replace consumequeue/ and index/ only when all tasks succeeded; the store must not be in use.",
        "example:\n  rocketq spark rebuild ~/store -c broker.conf",
    ),
    "export": (
        "export messages to Parquet or JSON, partitioned by topic and date",
        "Write every message of DIR (all columns of the rocketq source, bodies decompressed) under\n"
        "OUT/topic=<topic>/date=<yyyy-mm-dd>/ (store time, UTC).",
        "example:\n  rocketq spark export ~/store /data/rocketq-export --format parquet",
    ),
    "stats": (
        "per topic and queue: messages, bytes, time range, rate over time, top keys and tags",
        "Print a table per topic and queue (messages, bytes, first/last store time, mean rate), the most\n"
        "frequent tags and keys per topic, and draw the message rate over time per topic as a PNG.",
        "example:\n  rocketq spark stats ~/store --chart rate.png",
    ),
    "query": (
        "find messages by key or store-time range across the whole store",
        "Scan DIR in parallel for messages whose KEYS hold K or whose UNIQ_KEY is K, and/or stored between A\n"
        "and B (both inclusive; ms since the epoch or ISO-8601, UTC unless a zone is given); --topic reads\n"
        "only that topic's queues. Exit status 1 when nothing is found.",
        "example:\n  rocketq spark query ~/store --key order-42\n"
        "  rocketq spark query ~/store --time-range 2026-11-22T00:00:00Z 2026-11-22T01:00:00Z --topic TopicA",
    ),
}


def register(groups: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``spark`` group and its subcommands to the top-level parser's subcommands."""
    spark = groups.add_parser(
        "spark",
        help="Spark jobs over a store: rebuild, export, stats, query",
        description="Spark jobs over a RocketMQ store directory (local[*] by default; --master for a cluster).",
        epilog="example:\n  rocketq spark stats ~/store\n  rocketq spark rebuild ~/store -c broker.conf",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    spark.set_defaults(func=lambda _a: _missing_command(spark))
    sub = spark.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-c", "--conf", metavar="FILE", help=_CONF_HELP)
    common.add_argument("--master", metavar="URL", help="Spark master (default local[*], or spark-submit's)")
    common.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", type=_key_value,
                        help="a Spark setting, e.g. spark.driver.memory=2g (repeatable)")  # fmt: skip
    common.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    parsers: dict[str, argparse.ArgumentParser] = {}
    for name, (short, long, example) in _COMMANDS.items():
        parsers[name] = sub.add_parser(name, help=short, description=long, epilog=example, parents=[common],
                                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
        parsers[name].add_argument("dir", metavar="DIR", help="the store directory (storePathRootDir)")
    p = parsers["rebuild"]
    p.add_argument("--max-partition-bytes", metavar="N", type=positive, default=128 << 20,
                   help="commit-log bytes per decode task (default 128 MiB)")  # fmt: skip
    p.set_defaults(func=cmd_rebuild)
    p = parsers["export"]
    p.add_argument("out", metavar="OUT", help="output directory")
    p.add_argument("--format", choices=("parquet", "json"), default="parquet", help="file format (default parquet)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.add_argument("--permissive", action="store_true", help="skip corrupt records instead of failing")
    p.set_defaults(func=cmd_export)
    p = parsers["stats"]
    p.add_argument("--chart", metavar="PNG", default="rocketq-stats.png",
                   help="where to draw the rate chart (default rocketq-stats.png; - for none)")  # fmt: skip
    p.add_argument("--top", metavar="N", type=positive, default=5, help="top N tags and keys per topic")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--permissive", action="store_true", help="skip corrupt records instead of failing")
    p.set_defaults(func=cmd_stats)
    p = parsers["query"]
    p.add_argument("--key", metavar="K", help="a KEYS token or a UNIQ_KEY")
    p.add_argument("--time-range", metavar=("A", "B"), nargs=2, type=_time_arg, help="store time from A to B")
    p.add_argument("--topic", metavar="T", help="only topic T")
    p.add_argument("--max", metavar="N", type=positive, default=1000, help="at most N messages (default 1000)")
    p.add_argument("--json", action="store_true", help="JSON lines")
    p.add_argument("--permissive", action="store_true", help="skip corrupt records instead of failing")
    p.set_defaults(func=cmd_query)
    p = sub.add_parser("package", help="zip the rocketq package for spark-submit --py-files",
                       description="Write a zip of the installed rocketq package (for --py-files or addPyFile) and "
                                   "print the entry script spark-submit runs.",
                       epilog="example:\n  rocketq spark package /tmp/rocketq.zip",
                       formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("out", metavar="OUT", nargs="?", default="rocketq.zip", help="zip file (default rocketq.zip)")
    p.set_defaults(func=cmd_package)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _missing_command(parser: argparse.ArgumentParser) -> int:
    names = ", ".join([*_COMMANDS, "package"])
    raise CommandError(f"choose a command: {names} (see '{parser.prog} --help')", exit_code=2)

