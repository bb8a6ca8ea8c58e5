"""The ``rocketq`` Spark data source over a running broker: batch and streaming reads and writes.

rocketq's name server and broker run in this process (``test_client_e2e.InProcessServers``, 127.0.0.1,
free ports); Spark's Python workers reach them over loopback. Acceptance of issue 6 (broker side):

- a batch read equals what was produced, and equals the same broker's store read with the store source;
- ``startingOffsets`` / ``endingOffsets`` / ``queues`` select exactly their ranges;
- a stream obeys ``maxMessagesPerTrigger`` and ``availableNow``, and continues from its checkpoint; its
  offsets start at ``latest`` by default and take in queues that appear later;
- a batch write reads back; a replayed streaming micro-batch does not produce twice;
- a stream from the broker into a file sink, whose Spark process is killed (SIGKILL) mid-batch while
  messages keep coming, then restarted from the same checkpoint in this process, has every message
  exactly once in its output.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketq.client import new_message
from rocketq.client.blocking import BlockingProducer
from rocketq.client.errors import ClientTimeoutError
from rocketq.client.message_queue import MessageQueue
from rocketq.client.pull_result import PullResult, PullStatus
from rocketq.common.codec import decode_record
from rocketq.common.message import Message, MessageExt
from rocketq.spark import broker_clients
from rocketq.spark.broker_sink import PartitionWriter, SinkError, key_prefix, produce_partition, row_key
from rocketq.spark.broker_source import (
    DataLossError,
    OffsetRangeError,
    QueueCatalog,
    StreamOffsets,
    plan_stream,
    share_limit,
)
from rocketq.spark.options import OptionError, parse_broker_options, parse_options, parse_sink_options, source_kind
from test_client_e2e import InProcessServers

pytestmark = pytest.mark.spark

SRC = str(Path(__file__).resolve().parents[1] / "src")
USER_PROPS = ("color", "n")


class Broker:
    """The in-process servers, a producer, and helpers to make topics of known content."""

    def __init__(self, servers: InProcessServers, addr: str) -> None:
        self.servers = servers
        self.addr = addr
        self.producer = BlockingProducer(f"spark-test-{uuid.uuid4().hex[:6]}", addr).start()

    def topic(self, prefix: str, queues: int = 4) -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        self.producer.create_topic(name, queues)
        return name

    def produce(self, topic: str, n: int, start: int = 0, *, big_every: int = 0) -> list[Message]:
        sent = []
        for i in range(start, start + n):
            body = (f"big-{i}-".encode() * 700) if big_every and i % big_every == 0 else f"m-{i}".encode()
            msg = new_message(topic, body, tags=f"T{i % 3}", keys=[f"k{i}", "all"],
                              properties={"color": "red" if i % 2 else "blue", "n": str(i)})  # fmt: skip
            self.producer.send(msg)
            sent.append(msg)
        return sent

    def settle(self) -> None:
        """Wait (bounded) until the broker dispatched everything (consume queues and index)."""
        assert self.servers.broker.store.wait_dispatched(10.0)

    def close(self) -> None:
        self.producer.shutdown()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    servers = InProcessServers(tmp_path_factory.mktemp("rocketq-spark-broker"))
    try:
        b = Broker(servers, servers.start())
        try:
            yield b
        finally:
            b.close()
            broker_clients.close_all()  # the source's clients this process kept (reads planned or run here)
    finally:
        servers.stop()


def read_broker(spark: Any, addr: str, topic: str, **options: str) -> list[dict[str, Any]]:
    """Rows of a batch read, timestamps as ms, ordered by (queue, offset)."""
    from pyspark.sql import functions as F

    reader = spark.read.format("rocketq").option("namesrv", addr).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load()
    cols = [F.unix_millis(c).alias(c) if c.endswith("Timestamp") else F.col(c) for c in df.columns]
    rows = [r.asDict(recursive=True) for r in df.select(*cols).collect()]
    return sorted(rows, key=lambda r: (r["queueId"], r["queueOffset"]))


def bodies(rows: list[dict[str, Any]]) -> Counter[bytes]:
    return Counter(bytes(r["body"]) for r in rows)


# ---------------------------------------------------------------------------------------- options


def test_options_choose_the_source_and_refuse_mistakes() -> None:
    assert source_kind({"path": "/x"}) == "store" and source_kind({"namesrv": "127.0.0.1:9876"}) == "broker"
    with pytest.raises(OptionError, match="not both"):
        source_kind({"path": "/x", "namesrv": "127.0.0.1:9876"})
    with pytest.raises(OptionError, match=r"path .* or option namesrv"):
        source_kind({})
    with pytest.raises(OptionError, match="option topic"):
        parse_broker_options({"namesrv": "127.0.0.1:9876"}, streaming=False)
    with pytest.raises(OptionError, match="option namesrv"):
        parse_broker_options({"namesrv": "nohost", "topic": "T"}, streaming=False)
    with pytest.raises(OptionError, match="endingOffsets: a stream has no end"):
        parse_broker_options({"namesrv": "127.0.0.1:9876", "topic": "T", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match="topic 'U' is not read"):
        parse_broker_options({"namesrv": "127.0.0.1:9876", "topic": "T", "startingOffsets": '{"U": {"0": 1}}'},
                             streaming=False)  # fmt: skip
    with pytest.raises(OptionError, match="maxMessagesPerTrigger"):
        parse_broker_options({"namesrv": "127.0.0.1:9876", "topic": "T", "maxMessagesPerTrigger": "0"},
                             streaming=True)  # fmt: skip
    # a store read's options, or a near miss of its own, are refused, not dropped (a time-bounded read read all)
    ns = {"namesrv": "127.0.0.1:9876", "topic": "T"}
    for option, why in (("startTime", "option startTime is an option of a store read; a broker read does not"),
                        ("mode", "option mode is an option of a store read"),
                        ("startingOffset", "did you mean startingOffsets"),
                        ("producerGroup", "option producerGroup is an option of a write")):  # fmt: skip
        with pytest.raises(OptionError, match=why):
            parse_broker_options({**ns, option.lower(): "x"}, streaming=False)
    with pytest.raises(OptionError, match=r"option startingOffsets is an option of a (store|broker) read; a write"):
        parse_sink_options({"namesrv": "127.0.0.1:9876", "startingoffsets": "earliest"})
    with pytest.raises(OptionError, match="option consumerGroup is an option of a broker read"):
        parse_options({"path": "/x", "consumergroup": "g"})
    assert parse_sink_options({"namesrv": "127.0.0.1:9876", "checkpointlocation": "/tmp/c"}).topic is None
    batch = parse_broker_options({"namesrv": "127.0.0.1:9876", "topic": "A, B"}, streaming=False)
    stream = parse_broker_options({"namesrv": "127.0.0.1:9876", "topic": "A"}, streaming=True)
    assert batch.topics == ("A", "B") and batch.starting.default == -2 and stream.starting.default == -1
    assert parse_sink_options({"namesrv": "127.0.0.1:9876"}).send_batch_size == 32


class FakeQueue:
    """A queue as a 4.9.4 broker shows one whose head retention deleted: min offset *reported*, messages from
    *first* on (a pull below *first* answers nothing and points on, a consume-queue file at a time)."""

    def __init__(self, reported: int, first: int, end: int, step: int = 40) -> None:
        self.reported, self.first, self.end, self.step = reported, first, end, step
        self.pulls = 0

    def min_offset(self, mq: Any) -> int:
        return self.reported

    def max_offset(self, mq: Any) -> int:
        return self.end

    def pull(self, mq: Any, expr: str, offset: int, n: int) -> PullResult:
        self.pulls += 1
        if offset < self.first:
            return PullResult(PullStatus.NO_MATCHED_MSG, min(offset + self.step, self.first), self.reported, self.end)
        msg = MessageExt(topic=mq.topic, body=b"m", queue_id=mq.queue_id, queue_offset=offset)
        return PullResult(PullStatus.FOUND, offset + 1, self.reported, self.end, [msg])


def _catalog(fake: FakeQueue, **options: str) -> tuple[QueueCatalog, dict[str, MessageQueue]]:
    opts = parse_broker_options({"namesrv": "127.0.0.1:9876", "topic": "T", **options}, streaming=False)
    return QueueCatalog(opts, fake), {"T/0": MessageQueue("T", "b", 0)}  # type: ignore[arg-type]


def test_offsets_resolve_against_what_the_broker_still_has() -> None:
    """earliest is the first message the broker can serve (a 4.9.4 broker reports min 0 for a queue whose
    messages retention deleted); an explicit offset below the min offset is data loss, one past the max an
    error; never moved silently."""
    fake = FakeQueue(reported=0, first=100, end=130)
    catalog, queues = _catalog(fake)
    assert catalog.resolve(queues, catalog.opts.starting, "startingOffsets") == {"T/0": 100}
    # a 4.9.4 broker skips at most 800 removed units a pull; a first consume-queue file holds 300,000
    for first in (300_000, 299_999, 1, 712_345):
        fake = FakeQueue(reported=0, first=first, end=first + 10, step=800)
        catalog, queues = _catalog(fake)
        assert catalog.resolve(queues, catalog.opts.starting, "startingOffsets") == {"T/0": first}
        assert fake.pulls <= 25
    gone = FakeQueue(reported=0, first=50, end=50, step=800)  # everything gone: earliest is the end
    catalog, queues = _catalog(gone)
    assert catalog.resolve(queues, catalog.opts.starting, "startingOffsets") == {"T/0": 50}
    healthy = FakeQueue(reported=5, first=5, end=9)
    catalog, queues = _catalog(healthy)
    assert catalog.resolve(queues, catalog.opts.starting, "startingOffsets") == {"T/0": 5} and healthy.pulls == 1
    below = json.dumps({"T": {"0": 3}})
    catalog, queues = _catalog(FakeQueue(reported=20, first=20, end=30), startingOffsets=below)
    with pytest.raises(DataLossError, match=r"queue T/0 now starts at offset 20: messages \[3, 20\) are gone"):
        catalog.resolve(queues, catalog.opts.starting, "startingOffsets")
    catalog, queues = _catalog(FakeQueue(reported=20, first=20, end=30), startingOffsets=below,
                               failOnDataLoss="false")  # fmt: skip
    assert catalog.resolve(queues, catalog.opts.starting, "startingOffsets") == {"T/0": 20}
    catalog, queues = _catalog(FakeQueue(reported=0, first=0, end=30), endingOffsets=json.dumps({"T": {"0": 31}}))
    with pytest.raises(OffsetRangeError, match="queue T/0 ends at offset 30 on the broker"):
        catalog.resolve(queues, catalog.opts.ending, "endingOffsets")


def test_a_stream_behind_a_deleted_head_moves_past_it_in_one_batch() -> None:
    """With failOnDataLoss=false and a read limit, a stream whose offsets retention passed reads from the min
    offset on: one batch skips the gap, rather than one empty batch per limit's worth of it."""
    fake = FakeQueue(reported=875, first=875, end=1000)
    opts = parse_broker_options({"namesrv": "127.0.0.1:9876", "topic": "T", "failOnDataLoss": "false"},
                                streaming=True)  # fmt: skip
    state = StreamOffsets(opts)
    state.catalog = QueueCatalog(opts, fake)  # type: ignore[arg-type]
    state.queues, state._routed_at = {"T/0": MessageQueue("T", "b", 0)}, time.monotonic()
    assert state.latest({"T/0": 50}, 25) == {"T/0": 900}
    strict = StreamOffsets(parse_broker_options({"namesrv": "127.0.0.1:9876", "topic": "T"}, streaming=True))
    strict.catalog = QueueCatalog(strict.opts, fake)  # type: ignore[arg-type]
    strict.queues, strict._routed_at = state.queues, time.monotonic()
    assert strict.latest({"T/0": 50}, 25) == {"T/0": 75}  # the read of [50, 75) then fails as data loss


def test_share_limit_is_fair_and_exact() -> None:
    assert share_limit({"a/0": 100, "a/1": 100, "a/2": 100}, 30) == {"a/0": 10, "a/1": 10, "a/2": 10}
    assert share_limit({"a/0": 2, "a/1": 100, "a/2": 0}, 30) == {"a/0": 2, "a/1": 28, "a/2": 0}
    assert share_limit({"a/0": 1, "a/1": 1, "a/2": 1}, 2) == {"a/0": 1, "a/1": 1, "a/2": 0}
    assert sum(share_limit({f"t/{i}": 7 for i in range(5)}, 33).values()) == 33


# ---------------------------------------------------------------------------------------- batch read


def test_batch_read_equals_produced_and_the_store(spark: Any, broker: Broker) -> None:
    topic = broker.topic("Read")
    sent = broker.produce(topic, 120, big_every=40)  # bodies of 4 KiB+ travel zlib-compressed
    broker.settle()
    rows = read_broker(spark, broker.addr, topic)
    assert len(rows) == 120
    by_body = {bytes(r["body"]): r for r in rows}
    assert set(by_body) == {m.body for m in sent}
    for m in sent:
        r = by_body[m.body]
        assert r["topic"] == topic and r["tags"] == m.properties["TAGS"]
        assert r["keys"] == m.properties["KEYS"].split(" ")
        assert {k: r["properties"][k] for k in USER_PROPS} == {k: m.properties[k] for k in USER_PROPS}
        assert r["uniqKey"] == m.properties["UNIQ_KEY"] and "MIN_OFFSET" not in r["properties"]
    assert any(r["sysFlag"] & 1 for r in rows)  # stored compressed, read inflated
    for q in range(4):
        offsets = [r["queueOffset"] for r in rows if r["queueId"] == q]
        assert offsets == list(range(len(offsets)))
    # The broker's own store directory read with the store source: the same rows, column for column.
    store = str(broker.servers.broker.store.root)
    from pyspark.sql import functions as F

    df = spark.read.format("rocketq").option("topics", topic).load(store)
    cols = [F.unix_millis(c).alias(c) if c.endswith("Timestamp") else F.col(c) for c in df.columns]
    from_store = sorted((r.asDict(recursive=True) for r in df.select(*cols).collect()),
                        key=lambda r: (r["queueId"], r["queueOffset"]))  # fmt: skip
    assert from_store == rows


def test_offset_options_select_ranges(spark: Any, broker: Broker) -> None:
    topic = broker.topic("Ranges")
    broker.produce(topic, 40)  # 10 per queue (round robin)
    broker.settle()
    rows = read_broker(spark, broker.addr, topic, startingOffsets=json.dumps({topic: {"0": 4, "1": "latest"}}),
                       endingOffsets=json.dumps({topic: {"0": 7, "2": 3}}))  # fmt: skip
    got = {(r["queueId"], r["queueOffset"]) for r in rows}
    assert got == {(0, 4), (0, 5), (0, 6), (2, 0), (2, 1), (2, 2)} | {(3, i) for i in range(10)}
    rows = read_broker(spark, broker.addr, topic, queues="1,3", startingOffsets="latest")
    assert rows == []
    rows = read_broker(spark, broker.addr, topic, queues="1", maxMessagesPerPartition="3", pullBatchSize="2")
    assert [r["queueOffset"] for r in rows] == list(range(10))
    with pytest.raises(Exception, match="not both"):
        spark.read.format("rocketq").option("namesrv", broker.addr).option("topic", topic).load("/tmp").collect()
    with pytest.raises(Exception, match=r"NoSuchTopic|no route"):
        read_broker(spark, broker.addr, f"NoSuchTopic_{uuid.uuid4().hex[:6]}")


# ---------------------------------------------------------------------------------------- streaming read


def run_available_now(spark: Any, addr: str, topic: str, out: Path, ck: Path, **options: str) -> list[int]:
    """One ``availableNow`` run from the broker into a parquet sink; the input rows of each batch."""
    reader = spark.readStream.format("rocketq").option("namesrv", addr).option("topic", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    q = (reader.load().select("queueId", "queueOffset", "body").writeStream.format("parquet")
         .option("path", str(out)).option("checkpointLocation", str(ck)).trigger(availableNow=True)
         .start())  # fmt: skip
    try:
        assert q.awaitTermination(120), "the availableNow query did not finish in 120 s"
    finally:
        q.stop()
    assert q.exception() is None, q.exception()
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]


def test_stream_max_messages_per_trigger_and_restart(spark: Any, broker: Broker, tmp_path: Path) -> None:
    topic = broker.topic("Stream")
    broker.produce(topic, 70)
    broker.settle()
    out, ck = tmp_path / "out", tmp_path / "ck"
    sizes = run_available_now(spark, broker.addr, topic, out, ck, startingOffsets="earliest",
                              maxMessagesPerTrigger="30")  # fmt: skip
    assert sizes == [30, 30, 10]
    broker.produce(topic, 25, start=70)
    broker.settle()
    assert run_available_now(spark, broker.addr, topic, out, ck, maxMessagesPerTrigger="30") == [25]
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(bytes(r["body"]) for r in rows) == sorted(f"m-{i}".encode() for i in range(95))
    offsets = json.loads((ck / "offsets" / "3").read_text().splitlines()[-1])
    assert list(offsets) == [f"{topic}/{q}" for q in range(4)] and sum(offsets.values()) == 95  # all read, sorted


def test_stream_offsets_start_latest_and_admit_new_queues(broker: Broker) -> None:
    """The driver side of a stream without Spark: ``latest`` by default, a read limit shared fairly, the
    availableNow target, and a queue missing from the start entering at its min offset, unread."""
    topic = broker.topic("Offsets", queues=2)
    broker.produce(topic, 10)
    broker.settle()
    state = StreamOffsets(parse_broker_options({"namesrv": broker.addr, "topic": topic}, streaming=True))
    start = state.initial()
    assert list(start) == [f"{topic}/0", f"{topic}/1"] and sum(start.values()) == 10
    assert state.latest(start, None) == start  # nothing new
    broker.produce(topic, 6, start=10)
    broker.settle()
    state.fix_target()
    broker.produce(topic, 4, start=16)
    broker.settle()
    end = state.latest(start, 4)
    assert all(end[k] - start[k] == 2 for k in start)
    assert sum(state.latest(end, None).values()) == 16  # the availableNow target, not the 4 sent after it
    state.target = None
    assert sum(state.latest(end, None).values()) == 20
    without_q0 = {k: v for k, v in end.items() if k != f"{topic}/0"}
    latest = state.latest(without_q0, None)
    assert latest[f"{topic}/0"] == 0 and list(latest) == sorted(latest)
    assert [p.queue_id for p in plan_stream(state.queues, without_q0, latest)] == [1]


# ---------------------------------------------------------------------------------------- writes


def test_batch_write_reads_back(spark: Any, broker: Broker) -> None:
    topic = broker.topic("Write")
    rows = [(topic if i % 2 else None, f"w-{i}".encode(), f"Tag{i % 2}", [f"a{i}", f"b{i}"],
             {"i": str(i), "TAGS": "not this one"}, i % 4 if i < 10 else None) for i in range(40)]  # fmt: skip
    df = spark.createDataFrame(rows, "topic STRING, body BINARY, tags STRING, keys ARRAY<STRING>, "
                                     "properties MAP<STRING,STRING>, queueId INT").repartition(3)  # fmt: skip
    df.write.format("rocketq").option("namesrv", broker.addr).option("topic", topic).mode("append").save()
    broker.settle()
    got = read_broker(spark, broker.addr, topic)
    assert bodies(got) == Counter(r[1] for r in rows)
    for r in got:
        i = int(bytes(r["body"])[2:])
        assert r["tags"] == f"Tag{i % 2}" and r["keys"] == [f"a{i}", f"b{i}"] and r["properties"]["i"] == str(i)
        assert len(r["uniqKey"]) == 32
        if i < 10:
            assert r["queueId"] == i % 4
    with pytest.raises(Exception, match="body column"):
        spark.createDataFrame([("x",)], "v STRING").write.format("rocketq").option("namesrv", broker.addr) \
            .option("topic", topic).mode("append").save()  # fmt: skip
    with pytest.raises(Exception, match="mode overwrite"):
        df.write.format("rocketq").option("namesrv", broker.addr).mode("overwrite").save()


def test_partition_writer_sends_only_what_is_missing(broker: Broker) -> None:
    """The sink's exactly-once protocol without Spark: an attempt that stored a prefix, a replay of a
    finished partition, and a send whose answer was lost although the broker stored it."""
    topic = broker.topic("Prefix", queues=2)
    opts = parse_sink_options({"namesrv": broker.addr, "topic": topic, "sendBatchSize": "4"})
    rows = [{"body": f"p-{i}".encode(), "keys": f"k{i}"} for i in range(23)]
    first = produce_partition(iter(rows[:9]), opts, "w", "7", 1)  # an attempt that died after 9 rows
    assert (first.sent, first.already) == (9, 0)
    broker.settle()
    again = produce_partition(iter(rows), opts, "w", "7", 1)
    assert (again.rows, again.sent, again.already) == (23, 14, 9)
    broker.settle()
    done = produce_partition(iter(rows), opts, "w", "7", 1)
    assert (done.sent, done.already, done.lookups) == (0, 23, 1)
    # A send that reaches the broker but whose answer is lost: looked up, not sent again.
    writer = PartitionWriter(opts, "w", "8", 1)
    real_send = writer._send
    calls: list[int] = []

    def lossy_send(msgs: Any, queue_id: int | None) -> None:
        real_send(msgs, queue_id)
        calls.append(len(msgs))
        if len(calls) == 1:
            raise ClientTimeoutError("answer lost")

    writer._send = lossy_send  # type: ignore[method-assign]
    report = writer.write(iter(rows[:6]))
    assert calls == [4, 2] and report.sent == 6
    broker.settle()
    got = read_broker_counts(broker, topic)
    assert got == Counter({f"p-{i}".encode(): 1 for i in range(23)}) + Counter({f"p-{i}".encode(): 1 for i in range(6)})
    assert row_key(key_prefix("w", "7", 1), 0) != row_key(key_prefix("w", "8", 1), 0)


def test_a_partition_writer_waits_for_a_broker_out_of_reach(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sends refused while the broker restarts are tried again for brokerRetrySeconds (each time after looking up
    whether the last one arrived), not counted against sendRetries; with no patience the task fails."""
    from rocketq.client.errors import BrokerUnreachableError
    from rocketq.spark import broker_sink

    monkeypatch.setattr(broker_sink, "UNREACHABLE_WAIT", 0.05)
    topic = broker.topic("Patient", queues=1)
    rows = [{"body": f"w-{i}".encode()} for i in range(3)]
    opts = parse_sink_options({"namesrv": broker.addr, "topic": topic, "sendRetries": "0"})
    writer = PartitionWriter(opts, "w", "1", 0)
    real_send = writer._send
    refusals = [5]

    def restarting(msgs: Any, queue_id: int | None) -> None:
        if refusals[0]:
            refusals[0] -= 1
            raise BrokerUnreachableError("connect to the broker failed: connection refused")
        real_send(msgs, queue_id)

    writer._send = restarting  # type: ignore[method-assign]
    report = writer.write(iter(rows))
    assert report.sent == 3 and refusals == [0]
    broker.settle()
    assert read_broker_counts(broker, topic) == Counter({f"w-{i}".encode(): 1 for i in range(3)})
    impatient = PartitionWriter(parse_sink_options({"namesrv": broker.addr, "topic": topic, "sendRetries": "0",
                                                    "brokerRetrySeconds": "0"}), "w", "2", 0)  # fmt: skip
    refusals[0] = 1
    impatient._send = restarting  # type: ignore[method-assign]
    with pytest.raises(SinkError, match="failed 1 times"):
        impatient.write(iter(rows))


def test_a_partition_with_a_bad_row_sends_nothing(broker: Broker) -> None:
    """Every row is checked before the first send: a body over the producer's limit, or a queue the topic does
    not have, fails the partition with nothing of it stored."""
    topic = broker.topic("BadRow", queues=2)
    opts = parse_sink_options({"namesrv": broker.addr, "topic": topic})
    ok = [{"body": b"ok-0"}, {"body": b"ok-1"}]
    with pytest.raises(SinkError, match=r"row 2: .*body size over max value.*nothing of this partition was sent"):
        produce_partition(iter([*ok, {"body": b"x" * (4 * 1024 * 1024 + 10)}]), opts, "w", "1", 0)
    with pytest.raises(SinkError, match=r"row 2: topic .* has no writable queue 7; nothing of this partition"):
        produce_partition(iter([*ok, {"body": b"q", "queueId": 7}]), opts, "w", "2", 0)
    broker.settle()
    assert read_broker_counts(broker, topic) == Counter()


def test_a_copied_message_loses_what_the_broker_kept_of_it(broker: Broker) -> None:
    """A row read from a topic carries the properties the broker stored: a committed transaction message's
    TRAN_MSG and PGROUP, the DELAY and REAL_TOPIC a delivered delayed message keeps. Sent again they would park
    the copy as a half message or delay it again; the copy is a plain message, at once. A DELAY of a row that
    was never delivered (no REAL_TOPIC) still asks for a delay level."""
    topic = broker.topic("CopyProps", queues=1)
    opts = parse_sink_options({"namesrv": broker.addr, "topic": topic})
    committed = {"TRAN_MSG": "true", "PGROUP": "pg_tx", "TRANSACTION_CHECK_TIMES": "1", "CLUSTER": "Other",
                 "color": "red"}  # fmt: skip
    delivered = {"DELAY": "16", "REAL_TOPIC": "Orig", "REAL_QID": "3", "color": "blue"}
    rows = [{"body": b"was-tx", "properties": committed}, {"body": b"was-delayed", "properties": delivered},
            {"body": b"to-delay", "properties": {"DELAY": "1"}}]  # fmt: skip
    assert produce_partition(iter(rows), opts, "w", "3", 0).sent == 3
    broker.settle()
    store = broker.servers.broker.store
    stored = {m.body: m for m in (decode_record(r) for r in store.get_message("g", topic, 0, 0, 8).messages)}
    assert set(stored) == {b"was-tx", b"was-delayed"}  # at once; the third waits for its delay level
    tx, delayed = stored[b"was-tx"], stored[b"was-delayed"]
    assert tx.sys_flag & 0xC == 0 and tx.properties["color"] == "red" and tx.properties["CLUSTER"] != "Other"
    assert not {"TRAN_MSG", "PGROUP", "TRANSACTION_CHECK_TIMES"} & set(tx.properties)
    assert not {"DELAY", "REAL_TOPIC", "REAL_QID"} & set(delayed.properties) and delayed.properties["color"] == "blue"
    assert store.get_max_offset_in_queue("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 0
    assert store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 1  # level 1: the third row


def read_broker_counts(broker: Broker, topic: str) -> Counter[bytes]:
    from rocketq.spark.broker_source import plan_batch, read_slice

    opts = parse_broker_options({"namesrv": broker.addr, "topic": topic}, streaming=False)
    return Counter(b for part in plan_batch(opts) for batch in read_slice(part, opts)
                   for b in batch.column("body").to_pylist())  # fmt: skip


def test_stream_write_is_idempotent_on_replay(spark: Any, broker: Broker, tmp_path: Path) -> None:
    source, target = broker.topic("CopyFrom"), broker.topic("CopyTo")
    broker.produce(source, 40)
    broker.settle()
    ck = tmp_path / "ck"

    def copy() -> Any:
        stream = (spark.readStream.format("rocketq").option("namesrv", broker.addr).option("topic", source)
                  .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "25").load())  # fmt: skip
        q = (stream.selectExpr("body", "tags", "keys", "properties").writeStream.format("rocketq")
             .option("namesrv", broker.addr).option("topic", target).option("checkpointLocation", str(ck))
             .trigger(availableNow=True).start())  # fmt: skip
        try:
            assert q.awaitTermination(120)
        finally:
            q.stop()
        assert q.exception() is None, q.exception()
        return q

    copy()
    assert sorted(p.name for p in (ck / "commits").iterdir() if p.name.isdigit()) == ["0", "1"]
    broker.settle()
    assert read_broker_counts(broker, target) == Counter(f"m-{i}".encode() for i in range(40))
    # A crash after the sink produced batch 1 but before Spark recorded it: Spark replays batch 1.
    (ck / "commits" / "1").unlink()
    (ck / "commits" / ".1.crc").unlink(missing_ok=True)
    q = copy()
    assert [p["batchId"] for p in q.recentProgress if p["numInputRows"]] == [1]
    broker.settle()
    assert read_broker_counts(broker, target) == Counter(f"m-{i}".encode() for i in range(40))


# ---------------------------------------------------------------------------------------- acceptance

CHILD = textwrap.dedent("""
    import sys
    from rocketq.spark.session import get_session

    addr, topic, out, ck = sys.argv[1:5]
    spark, _ = get_session("local[1]", app_name="rocketq-killed",
                           conf={"spark.sql.shuffle.partitions": "1",
                                 "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"})
    stream = (spark.readStream.format("rocketq").option("namesrv", addr).option("topic", topic)
              .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", "40").load())
    q = (stream.selectExpr("queueId", "queueOffset", "uniqKey", "CAST(body AS STRING) AS body").writeStream
         .format("json").option("path", out).option("checkpointLocation", ck)
         .trigger(processingTime="100 milliseconds").start())
    print("started", flush=True)
    q.awaitTermination()
""")


def _batches(ck: Path, kind: str) -> int:
    d = ck / kind
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.is_dir() else 0


def test_stream_killed_and_restarted_delivers_exactly_once(spark: Any, broker: Broker, tmp_path: Path) -> None:
    topic = broker.topic("Killed")
    out, ck = tmp_path / "out", tmp_path / "ck"
    total = 600
    produced: list[Message] = []
    stop = threading.Event()

    def keep_producing(upto: int) -> None:  # about 150 messages a second, bounded in count and time
        deadline = time.monotonic() + 60
        while len(produced) < upto and not stop.is_set() and time.monotonic() < deadline:
            produced.extend(broker.produce(topic, 5, start=len(produced)))
            time.sleep(0.03)

    producer = threading.Thread(target=keep_producing, args=(total // 2,), daemon=True)
    producer.start()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p))
    child_log = (tmp_path / "child.log").open("wb")
    child = subprocess.Popen([sys.executable, "-c", CHILD, broker.addr, topic, str(out), str(ck)], env=env,
                             stdout=child_log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    killed_mid_batch = False
    try:
        # Kill the whole Spark process tree (driver, JVM, Python workers) once two batches are committed,
        # preferably while a third is between its offset log entry and its commit. A Spark process starting
        # on a loaded 2-core machine takes a while: 180 s at most.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and child.poll() is None:
            done, planned = _batches(ck, "commits"), _batches(ck, "offsets")
            if done >= 2 and (planned > done or time.monotonic() > deadline - 60):
                killed_mid_batch = planned > done
                break
            time.sleep(0.005)
        assert child.poll() is None, "the streaming process ended by itself"
        assert _batches(ck, "commits") >= 2, ("the killed query never committed two batches in 180 s; its log "
                                              "ends:\n" + _tail(tmp_path / "child.log"))  # fmt: skip
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
        child_log.close()
    # Restart from the same checkpoint in this process while the rest keeps coming; run until all is in.
    restarted = time.monotonic()
    producer.join(70)
    producer = threading.Thread(target=keep_producing, args=(total,), daemon=True)
    producer.start()
    stream = (spark.readStream.format("rocketq").option("namesrv", broker.addr).option("topic", topic)
              .option("maxMessagesPerTrigger", "100").load())  # fmt: skip
    query = (stream.selectExpr("queueId", "queueOffset", "uniqKey", "CAST(body AS STRING) AS body").writeStream
             .format("json").option("path", str(out)).option("checkpointLocation", str(ck))
             .trigger(processingTime="200 milliseconds").start())  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and query.isActive and (len(produced) < total or read_upto(query) < total):
            time.sleep(0.2)
    finally:
        query.stop()
        stop.set()
    assert query.exception() is None, query.exception()
    producer.join(70)
    assert len(produced) == total and read_upto(query) == total
    rows = spark.read.json(str(out)).collect()  # through the sink's _spark_metadata: committed files only
    seen = Counter(r["uniqKey"] for r in rows)
    expected = {m.properties["UNIQ_KEY"] for m in produced}
    assert set(seen) == expected, (len(set(seen)), len(expected))
    assert max(seen.values()) == 1, [k for k, v in seen.items() if v > 1][:5]
    assert Counter(r["body"] for r in rows) == Counter(m.body.decode() for m in produced)
    print(f"killed mid-batch: {killed_mid_batch}; restarted run {time.monotonic() - restarted:.1f} s")


def _tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def read_upto(query: Any) -> int:
    """How many messages the query's last committed batch reaches (the sum of its end offsets)."""
    progress = query.lastProgress
    if not progress or not progress["sources"]:
        return 0
    end = progress["sources"][0]["endOffset"]
    return sum((json.loads(end) if isinstance(end, str) else end).values())


def test_a_broker_out_of_reach_for_a_while_is_waited_for(caplog: pytest.LogCaptureFixture) -> None:
    """A call that cannot reach the broker (restarting, failing over) is tried again for brokerRetrySeconds, as
    RocketMQ's consumers pull again later: a streaming query's micro-batch waits instead of the query ending."""
    from rocketq.client.errors import BrokerUnreachableError
    from rocketq.spark.broker_source import PatientConsumer

    class Flaky:
        def __init__(self, failures: int) -> None:
            self.failures = failures
            self.calls = 0

        def max_offset(self, mq: Any) -> int:
            self.calls += 1
            if self.calls <= self.failures:
                raise BrokerUnreachableError("connect to 127.0.0.1:10911 failed: connection refused")
            return 42

        def shutdown(self) -> str:
            return "not retried"

    flaky = Flaky(2)
    with caplog.at_level(logging.WARNING, logger="rocketq.spark"):
        assert PatientConsumer(flaky, 30).max_offset(None) == 42  # type: ignore[arg-type]
    assert flaky.calls == 3 and sum("trying again" in r.getMessage() for r in caplog.records) == 2
    impatient = PatientConsumer(Flaky(1), 0)  # type: ignore[arg-type]
    with pytest.raises(BrokerUnreachableError):
        impatient.max_offset(None)
    assert impatient.shutdown() == "not retried"
    begin = time.monotonic()
    with pytest.raises(BrokerUnreachableError):
        PatientConsumer(Flaky(100), 1.2).max_offset(None)  # type: ignore[arg-type]
    assert 1.0 < time.monotonic() - begin < 5
    with pytest.raises(OptionError, match="brokerRetrySeconds"):
        parse_broker_options({"namesrv": "127.0.0.1:9876", "topic": "T", "brokerretryseconds": "-1"},
                             streaming=True)  # fmt: skip
