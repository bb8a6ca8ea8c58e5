"""``rocketq produce`` and ``rocketq consume``: send and read messages from the command line with the
Python client (:mod:`rocketq.client`), against rocketq or Apache RocketMQ.

``produce`` sends ``--count`` messages of ``--body-size`` bytes (or ``--body``), ``--batch`` of them a
request (SEND_BATCH_MESSAGE), ``--inflight`` requests at a time; ``{i}`` in ``--keys``/``--tags``/``--body``
becomes the message's number. It prints one summary line (and each send result with ``--verbose``).

``consume`` reads ``--topic`` as member of ``--group`` (clustering; offsets committed on the broker) and
prints one line per message, or with ``--json`` one JSON object per message in the shape of
``rocketq store dump --json`` (the body as delivered: inflated if it travelled compressed; without the
``MIN_OFFSET``/``MAX_OFFSET`` properties a pull adds). It stops after ``--count`` messages, or when no
message came for ``--timeout`` seconds, or on Ctrl-C / SIGTERM; exactly the messages printed are committed.

Both show a progress line on stderr when a run takes more than two seconds and stderr is a terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from typing import Any

from tqdm import tqdm

from rocketq.cli.args import add_credentials, credentials, positive, seconds
from rocketq.cli.signals import stop_signals
from rocketq.cli.store_cmd import CommandError
from rocketq.client import (
    EXPRESSION_TYPE_SQL92,
    ClientConfig,
    ConsumeFromWhere,
    InvalidMessageError,
    LitePullConsumer,
    NoRouteError,
    Producer,
    new_message,
)
from rocketq.client.client_config import resolve_namesrv_addrs
from rocketq.client.producer import check_topic
from rocketq.common.message import PROPERTY_MAX_OFFSET, PROPERTY_MIN_OFFSET, Message, MessageExt
from rocketq.common.message_json import message_to_dict

__all__ = ["register_consume", "register_produce"]

DEFAULT_PRODUCER_GROUP = "rocketq_cli_producer"


def _add_namesrv(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--namesrv", metavar="ADDR", default=None,
                   help="name server address(es), ';'-separated (default: $NAMESRV_ADDR)")  # fmt: skip
    p.add_argument("-t", "--topic", required=True, help="topic")
    add_credentials(p)


def register_produce(groups: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = groups.add_parser(
        "produce",
        help="send messages to a topic",
        description="Send messages to a topic with the rocketq client (a topic the name server does not know "
        "is created by the broker through TBW102 where it allows).",
        epilog="examples:\n  rocketq produce -n 127.0.0.1:9876 -t TopicTest --count 1000 --body-size 1024\n"
        "  rocketq produce -t TopicTest --tags TagA --keys 'order-{i}' --count 10 --batch 10",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_namesrv(p)
    p.add_argument("--count", type=positive, default=1, help="messages to send (default 1)")
    p.add_argument("--body-size", type=positive, default=128, metavar="B", help="body size in bytes (default 128)")
    p.add_argument("--body", default=None, help="body text instead of a generated one ({i}: message number)")
    p.add_argument("--tags", default=None, help="tag of every message ({i}: message number)")
    p.add_argument("--keys", default=None, help="keys, space-separated ({i}: message number)")
    p.add_argument("--property", action="append", default=[], metavar="K=V",
                   help="a user property (repeatable; {i} in V: message number)")  # fmt: skip
    p.add_argument("--batch", type=positive, default=1, metavar="N",
                   help="messages per request (default 1: no batching)")  # fmt: skip
    p.add_argument("--inflight", type=positive, default=1, metavar="N",
                   help="requests in flight at once (default 1: one after another)")  # fmt: skip
    p.add_argument("-g", "--group", default=DEFAULT_PRODUCER_GROUP, help=f"producer group ({DEFAULT_PRODUCER_GROUP})")
    p.add_argument("--timeout", type=seconds, default=3.0, help="seconds to wait for each send (default 3)")
    p.add_argument("--compress-type", choices=("ZLIB", "LZ4", "ZSTD"), default="ZLIB", type=str.upper,
                   help="how bodies of 4 KiB or more are compressed (default ZLIB; LZ4 and ZSTD need pip install "
                   "rocketq[compression]; a 4.9.4 Java consumer reads LZ4, and ZSTD only with zstd-jni on its class "
                   "path, which the 4.9.4 release lacks; older consumers read neither)")  # fmt: skip
    p.add_argument("-v", "--verbose", action="store_true", help="print every send result")
    p.set_defaults(func=cmd_produce)


def register_consume(groups: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = groups.add_parser(
        "consume",
        help="read messages of a topic",
        description="Read messages of a topic as a member of a consumer group and print them; offsets of the "
        "printed messages are committed on the broker.",
        epilog="examples:\n  rocketq consume -n 127.0.0.1:9876 -t TopicTest -g CG --count 10 --json\n"
        "  rocketq consume -t TopicTest -g CG --tags 'TagA || TagB' --timeout 5\n"
        "  rocketq consume -t TopicTest -g CG --sql \"a BETWEEN 3 AND 7 AND TAGS <> 'TagC'\"",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_namesrv(p)
    p.add_argument("-g", "--group", required=True, help="consumer group")
    p.add_argument("--count", type=positive, default=None, help="stop after this many messages")
    p.add_argument("--timeout", type=seconds, default=None, metavar="S",
                   help="stop when no message came for S seconds (default: wait until --count or Ctrl-C)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="one JSON object per message (the store dump's fields)")
    sub = p.add_mutually_exclusive_group()
    sub.add_argument("--tags", default="*", help="subscription: '*' or tags joined by '||' (default '*')")
    sub.add_argument("--sql", default=None, metavar="EXPR",
                     help="subscription: an SQL92 selector over the message properties (the broker needs "
                          "enablePropertyFilter=true)")  # fmt: skip
    p.add_argument("--from", dest="start", choices=("first", "last", "timestamp"), default="first",
                   help="where a group with no committed offset starts (default first)")  # fmt: skip
    p.add_argument("--timestamp", type=int, default=None, metavar="MS",
                   help="with --from timestamp: ms since the epoch (default: 30 minutes ago)")  # fmt: skip
    p.set_defaults(func=cmd_consume)


NO_ROUTE_HINT_S = 5.0  # a consume with no route for its topic says so after this long


class _Progress:
    """A tqdm line on stderr, shown only for runs over two seconds on a terminal."""

    def __init__(self, total: int | None, unit: str) -> None:
        self.bar = tqdm(total=total, unit=unit, file=sys.stderr, delay=2.0, disable=not sys.stderr.isatty(),
                        dynamic_ncols=True, leave=False)  # fmt: skip

    def update(self, n: int) -> None:
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


def _fmt(template: str | None, i: int) -> str | None:
    if template is None:
        return None
    return template.replace("{i}", str(i))


def _body(args: argparse.Namespace, i: int) -> bytes:
    if args.body is not None:
        return (_fmt(args.body, i) or "").encode("utf-8")
    head = f"message-{i} ".encode()
    size = args.body_size
    return (head + b"x" * size)[:size]


def _properties(items: list[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidMessageError(f"--property wants K=V, got {item!r}")
        props[key] = value
    return props


async def _produce(args: argparse.Namespace) -> int:
    props = _properties(args.property)
    progress = _Progress(args.count, "msg")
    sent = 0
    begin = time.monotonic()
    config = ClientConfig(credentials=credentials(args))
    async with Producer(args.group, args.namesrv, config=config, send_timeout=args.timeout,
                        compress_type=args.compress_type) as producer:  # fmt: skip

        def make(i: int) -> Message:
            return new_message(args.topic, _body(args, i), tags=_fmt(args.tags, i), keys=_fmt(args.keys, i),
                               properties={k: _fmt(v, i) or "" for k, v in props.items()})  # fmt: skip

        async def send_range(start: int, end: int) -> None:
            nonlocal sent
            msgs = [make(i) for i in range(start, end)]
            if args.batch > 1:
                result = await producer.send_batch(msgs)
            else:
                result = await producer.send(msgs[0])
            sent += len(msgs)
            progress.update(len(msgs))
            if args.verbose:
                where = f"queue={result.message_queue.queue_id} queueOffset={result.queue_offset}"
                print(f"{result.status.name} msgId={result.msg_id} offsetMsgId={result.offset_msg_id} {where}",
                      flush=True)  # fmt: skip

        step = max(1, args.batch)
        ranges = [(s, min(s + step, args.count)) for s in range(0, args.count, step)]
        window = max(1, args.inflight)
        try:
            for w in range(0, len(ranges), window):
                await asyncio.gather(*(send_range(s, e) for s, e in ranges[w : w + window]))
        finally:
            progress.close()
    elapsed = time.monotonic() - begin
    rate = sent / elapsed if elapsed > 0 else 0.0
    print(f"sent {sent} message(s) to {args.topic} in {elapsed:.2f} s ({rate:.0f} msg/s)", flush=True)
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    check_topic(args.topic)
    resolve_namesrv_addrs(args.namesrv)
    logging.getLogger("rocketq.client").setLevel(logging.ERROR)
    return asyncio.run(_produce(args))


def _json_object(msg: MessageExt) -> dict[str, Any]:
    """The store dump's object of a consumed message: without the ``MIN_OFFSET``/``MAX_OFFSET`` properties the
    client adds to what it pulls (never stored); the body as delivered (inflated if it was compressed)."""
    obj = message_to_dict(msg)
    props = obj["properties"]
    props.pop(PROPERTY_MIN_OFFSET, None)
    props.pop(PROPERTY_MAX_OFFSET, None)
    return obj


def _line(msg: MessageExt) -> str:
    body = msg.body or b""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = f"<{len(body)} bytes>"
    if len(text) > 200:
        text = text[:200] + "…"
    return (f"{msg.topic} queue={msg.queue_id} offset={msg.queue_offset} msgId={msg.msg_id} "
            f"tags={msg.properties.get('TAGS') or ''} keys={msg.properties.get('KEYS') or ''} body={text}")  # fmt: skip


async def _consume(args: argparse.Namespace) -> int:
    where = {"first": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "last": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
             "timestamp": ConsumeFromWhere.CONSUME_FROM_TIMESTAMP}[args.start]  # fmt: skip
    # Rebalance every second (Java: 20 s), so that a topic created after the consumer started, or a member
    # joining, is picked up at once.
    config = ClientConfig(namesrv_addr=args.namesrv, rebalance_interval=1.0, credentials=credentials(args))
    consumer = LitePullConsumer(args.group, config=config, consume_from_where=where, consume_timestamp=args.timestamp,
                                auto_commit=True, pull_batch_size=32)  # fmt: skip
    if args.sql is not None:
        consumer.subscribe(args.topic, args.sql, EXPRESSION_TYPE_SQL92)
    else:
        consumer.subscribe(args.topic, args.tags)
    progress = _Progress(args.count, "msg")
    count = 0
    out = sys.stdout
    dump: Any = json.dumps
    with stop_signals() as stop:  # stop cleanly: commit what was printed
        async with consumer:
            # A name server that does not answer is an error now; a topic with no route yet is waited for (it
            # may be created after the consumer started) and named if nothing came.
            try:
                routed = bool(await consumer.fetch_message_queues(args.topic))
            except NoRouteError:
                routed = False
            last = started = time.monotonic()
            hinted = routed
            try:
                while (args.count is None or count < args.count) and not stop.is_set():
                    want = None if args.count is None else args.count - count
                    msgs = await consumer.poll(timeout=1.0, max_messages=want)
                    if not msgs:
                        if args.timeout is not None and time.monotonic() - last >= args.timeout:
                            break
                        if not hinted and time.monotonic() - started >= NO_ROUTE_HINT_S and not consumer.assignment():
                            hinted = True  # said once: the wait goes on (the topic may be made later)
                            print(f"rocketq: waiting for {args.topic}: the name server has no route for it (not "
                                  "created yet, or no broker of it is up?); Ctrl-C to stop", file=sys.stderr)
                        continue
                    last = time.monotonic()
                    for msg in msgs:
                        out.write((dump(_json_object(msg)) if args.json else _line(msg)) + "\n")
                    out.flush()
                    count += len(msgs)
                    progress.update(len(msgs))
            finally:
                progress.close()
                await consumer.commit()
    if stop.is_set():
        print(f"rocketq: stopped: consumed {count} message(s)", file=sys.stderr)
        return 0
    if args.count is not None and count < args.count:
        why = "" if routed or consumer.assignment() else \
            f" (the name server has no route for {args.topic}: not created yet, or no broker of it is up?)"
        print(f"rocketq: consumed {count} of {args.count} message(s): none came for {args.timeout:g} s{why}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def cmd_consume(args: argparse.Namespace) -> int:
    check_topic(args.topic)
    if args.timestamp is not None and args.start != "timestamp":
        raise CommandError("--timestamp is where a group starts with --from timestamp; give --from timestamp too",
                           exit_code=2)  # fmt: skip
    resolve_namesrv_addrs(args.namesrv)
    logging.getLogger("rocketq.client").setLevel(logging.ERROR)
    return asyncio.run(_consume(args))
