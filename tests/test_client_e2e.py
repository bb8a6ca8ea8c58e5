"""The client end to end against rocketq's own name server and broker (in this process, 127.0.0.1, free
ports): every way of sending, the three consumers, ordering per queue across a consumer restart, members
joining and leaving while a producer runs, broadcasting, retry and dead-letter queue, consuming from a
timestamp, the blocking API and ``rocketq produce`` / ``rocketq consume``.

The scenarios are plain ``async`` functions of a ``Cluster`` (a name-server address and a way to stop
it); ``test_client_reference.py`` runs the same ones against Apache RocketMQ 4.9.4.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rocketq.client import (
    ClientConfig,
    ClientError,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    InvalidMessageError,
    LitePullConsumer,
    MessageClientExt,
    MessageModel,
    MessageQueue,
    NoRouteError,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    RequestTimeoutError,
    SelectMessageQueueByHash,
    SendStatus,
    create_reply_message,
    new_message,
)
from rocketq.client.blocking import BlockingLitePullConsumer, BlockingProducer, BlockingPushConsumer
from rocketq.common.message import MessageExt

log = logging.getLogger(__name__)

SCENARIO_TIMEOUT = 120.0


@dataclass
class Cluster:
    """Where the servers listen; ``stop`` shuts them down."""

    namesrv_addr: str
    name: str
    stop: Callable[[], None] = lambda: None
    notes: dict[str, Any] = field(default_factory=dict)


class InProcessServers:
    """rocketq's name server and broker on their own event loop in a background thread."""

    def __init__(self, root: Path, *, property_filter: bool = True, **broker_settings: Any) -> None:
        """*broker_settings*: more ``BrokerConfig``/``MessageStoreConfig`` fields by attribute name."""
        self.root = root
        self.property_filter = property_filter
        self.broker_settings = broker_settings
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="rocketq-test-servers", daemon=True)
        self.namesrv: Any = None
        self.broker: Any = None

    def start(self) -> str:
        self.thread.start()
        return asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(60)

    async def _start(self) -> str:
        from rocketq.broker.broker_config import load_broker_config
        from rocketq.broker.broker_controller import BrokerController
        from rocketq.namesrv.namesrv_controller import NamesrvController

        self.namesrv = NamesrvController("127.0.0.1", 0, kv_config_path=self.root / "kvConfig.json")
        await self.namesrv.start()
        broker_config, store_config = load_broker_config(
            None, namesrv_addr=self.namesrv.address, listen_port=0, broker_ip1="127.0.0.1", broker_name="broker-a",
            store_path_root_dir=str(self.root / "store"), mapped_file_size_commit_log=64 * 1024 * 1024,
            enable_property_filter=self.property_filter, **self.broker_settings,
        )  # fmt: skip
        self.broker = BrokerController(broker_config, store_config)
        await self.broker.start()
        return str(self.namesrv.address)

    async def _stop(self) -> None:
        try:
            if self.broker is not None:
                await self.broker.shutdown()
        finally:
            if self.namesrv is not None:
                await self.namesrv.stop()

    def stop(self) -> None:
        if self.thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._stop(), self.loop).result(60)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self.thread.join(30)
        if not self.loop.is_running():
            self.loop.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    servers = InProcessServers(tmp_path_factory.mktemp("rocketq-cluster"))
    try:
        addr = servers.start()
        yield Cluster(addr, "rocketq", servers.stop)
    finally:
        servers.stop()


def client_config(cluster: Cluster, **changes: Any) -> ClientConfig:
    """Fast timers, so that rebalances and commits happen within a test's patience."""
    base = dict(namesrv_addr=cluster.namesrv_addr, rebalance_interval=1.0, persist_consumer_offset_interval=1.0,
                poll_name_server_interval=2.0, heartbeat_broker_interval=5.0)  # fmt: skip
    base.update(changes)
    return ClientConfig(**base)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def run(scenario: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(scenario, SCENARIO_TIMEOUT))


async def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.05)


async def make_topic(producer: Producer, topic: str, queues: int) -> None:
    await producer.create_topic(topic, queues)


# -----------------------------------------------------------------------------------------------------
# Scenarios
# -----------------------------------------------------------------------------------------------------


async def scenario_send_every_way_and_pull(cluster: Cluster) -> None:
    topic = unique("Sends")
    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 4)
        sync = await producer.send(new_message(topic, b"sync", tags="TagA", keys=["k-sync", "k-all"],
                                               properties={"color": "red"}))  # fmt: skip
        assert sync.status is SendStatus.SEND_OK and len(sync.msg_id) == 32
        callbacks: list[Any] = []
        task = producer.send_async(new_message(topic, b"async", tags="TagB"), lambda r, e: callbacks.append((r, e)))
        async_result = await task
        await producer.send_oneway(new_message(topic, b"oneway", tags="TagC"))
        big = os.urandom(1024) * 20  # compressible: zlib on the wire
        await producer.send(new_message(topic, big, tags="TagZ"))
        queue = (await producer.fetch_publish_message_queues(topic))[2]
        pinned = await producer.send(new_message(topic, b"pinned"), queue=queue)
        assert pinned.message_queue == queue
        batch = await producer.send_batch([new_message(topic, f"batch-{i}", tags="TagD") for i in range(5)])
        assert batch.msg_id.count(",") == 4
        await wait_until(lambda: bool(callbacks), 5, "the async callback")
        assert callbacks[0][0] is not None and callbacks[0][0].msg_id == async_result.msg_id

    async with PullConsumer(unique("PullG"), config=client_config(cluster)) as consumer:
        mqs = await consumer.fetch_subscribe_message_queues(topic)
        assert len(mqs) == 4
        got: dict[bytes, MessageExt] = {}
        deadline = time.monotonic() + 10
        while len(got) < 10 and time.monotonic() < deadline:
            for mq in mqs:
                offset = 0
                while True:
                    result = await consumer.pull(mq, "*", offset, 32)
                    if result.status is not PullStatus.FOUND:
                        break
                    for m in result.messages:
                        got[m.body] = m
                    offset = result.next_begin_offset
        assert set(got) == {b"sync", b"async", b"oneway", big, b"pinned"} | {f"batch-{i}".encode() for i in range(5)}
        m = got[b"sync"]
        assert m.properties["TAGS"] == "TagA" and m.properties["KEYS"] == "k-sync k-all"
        assert m.properties["color"] == "red" and m.properties["UNIQ_KEY"] == sync.msg_id
        # As Java's MessageClientExt: the id the send returned, and the store's id beside it.
        assert isinstance(m, MessageClientExt) and m.msg_id == sync.msg_id and m.offset_msg_id == sync.offset_msg_id
        assert got[big].sys_flag & 0x1  # stored compressed, delivered inflated
        assert got[b"pinned"].queue_id == queue.queue_id
        batch_offsets = sorted(got[f"batch-{i}".encode()].queue_offset for i in range(5))
        assert batch_offsets == list(range(batch_offsets[0], batch_offsets[0] + 5))  # consecutive, one queue
        tagged = await consumer.pull(mqs[0], "TagD", 0, 32)
        assert all(x.properties.get("TAGS") == "TagD" for x in tagged.messages)
        # Long polling: an empty queue answers NO_NEW_MSG after the broker held the pull, or the message
        # that arrives meanwhile.
        mq = mqs[3]
        end = await consumer.max_offset(mq)

        async def later() -> None:
            await asyncio.sleep(0.5)
            async with Producer(unique("PG"), config=client_config(cluster)) as p:
                await p.send(new_message(topic, b"late"), queue=mq)

        sender = asyncio.ensure_future(later())
        t0 = time.monotonic()
        held = await consumer.pull_block_if_not_found(mq, "*", end, 32)
        await sender
        assert held.status is PullStatus.FOUND and held.messages[0].body == b"late"
        assert time.monotonic() - t0 < 10
        # Offsets: commit, read back.
        await consumer.update_consume_offset(mq, end)
        assert await consumer.fetch_consume_offset(mq) == end
        viewed = await consumer.view_message(sync.offset_msg_id)
        assert viewed.body == b"sync"
        found = await consumer.query_message(topic, "k-all")
        assert [x.body for x in found] == [b"sync"]


async def scenario_tag_filtered_push(cluster: Cluster) -> None:
    topic = unique("Tags")
    group = unique("TagGroup")
    received: list[tuple[str, bytes]] = []

    async def listener(msgs: list[MessageExt], context: Any) -> ConsumeConcurrentlyStatus:
        received.extend((m.properties.get("TAGS", ""), m.body) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 2)
        consumer = PushConsumer(group, config=client_config(cluster), listener=listener,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
        consumer.subscribe(topic, "TagA || TagB")
        async with consumer:
            for i in range(30):
                await producer.send(new_message(topic, f"m{i}", tags=("TagA", "TagB", "TagC")[i % 3]))
            await wait_until(lambda: len(received) >= 20, 30, "20 tagged messages")
            await asyncio.sleep(0.5)
    assert len(received) == 20
    assert {t for t, _ in received} == {"TagA", "TagB"}


async def scenario_reset_offset_of_an_online_group(cluster: Cluster) -> None:
    """``rocketq admin resetOffsetByTime`` while a push consumer of the group is online: the broker tells the
    consumer (RESET_CONSUMER_CLIENT_OFFSET), which drops what it holds and consumes again from the new offsets."""
    from rocketq.cli.main import main as rocketq_main

    topic, group = unique("Reset"), unique("ResetGroup")
    received: list[bytes] = []

    async def listener(msgs: list[MessageExt], context: Any) -> ConsumeConcurrentlyStatus:
        received.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 2)
        for i in range(10):
            await producer.send(new_message(topic, f"r{i}"))
    consumer = PushConsumer(group, config=client_config(cluster), listener=listener,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe(topic, "*")
    async with consumer:
        await wait_until(lambda: len(received) >= 10, 30, "the 10 messages")
        await asyncio.sleep(1.5)  # an offset commit, so that the broker knows the group's offsets
        argv = ["admin", "-n", cluster.namesrv_addr, "resetOffsetByTime", "-g", group, "-t", topic, "-s", "0"]
        assert await asyncio.to_thread(rocketq_main, argv) == 0
        await wait_until(lambda: len(received) >= 20, 30, "the 10 messages again after the reset")
    assert sorted(received) == sorted([f"r{i}".encode() for i in range(10)] * 2)


async def scenario_sql92_filtered_consumers(cluster: Cluster) -> None:
    """A push consumer and a pull consumer that select by SQL92 over user properties and tags; the broker
    must run with enablePropertyFilter=true."""
    topic = unique("Sql")
    group = unique("SqlGroup")
    selector = "a BETWEEN 3 AND 12 AND (TAGS <> 'skip' OR color IS NULL) AND a <> 7"
    received: list[int] = []

    async def listener(msgs: list[MessageExt], context: Any) -> ConsumeConcurrentlyStatus:
        received.extend(int(m.properties["a"]) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def expected(i: int) -> bool:
        tags, color = ("skip" if i % 3 == 0 else "keep"), ("red" if i % 2 else None)
        return 3 <= i <= 12 and (tags != "skip" or color is None) and i != 7

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 2)
        consumer = PushConsumer(group, config=client_config(cluster), listener=listener,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
        consumer.subscribe(topic, selector, "SQL92")
        async with consumer:
            for i in range(20):
                props = {"a": str(i)} | ({"color": "red"} if i % 2 else {})
                await producer.send(new_message(topic, f"m{i}", tags="skip" if i % 3 == 0 else "keep",
                                                properties=props))  # fmt: skip
            want = [i for i in range(20) if expected(i)]
            await wait_until(lambda: len(received) >= len(want), 30, f"{len(want)} selected messages")
            await asyncio.sleep(0.5)
        assert sorted(received) == want
        # A selector the broker cannot compile stops the start, with the broker's reason (no filter-off hint).
        bad = PushConsumer(unique("SqlBad"), config=client_config(cluster), listener=listener)
        bad.subscribe(topic, "a = NULL", "SQL92")
        with pytest.raises(ClientError, match="does not take the SQL92 subscription") as refused:
            await bad.start()
        assert "enablePropertyFilter" not in str(refused.value)
        async with PullConsumer(unique("SqlPull"), config=client_config(cluster)) as puller:
            got: list[int] = []
            for mq in await puller.fetch_subscribe_message_queues(topic):
                result = await puller.pull(mq, "a >= 15", 0, 32, expression_type="SQL92")
                got.extend(int(m.properties["a"]) for m in result.messages)
            assert sorted(got) == [15, 16, 17, 18, 19]


async def scenario_orderly_across_restart(cluster: Cluster) -> None:
    topic = unique("Orderly")
    group = unique("OrderlyGroup")
    keys, per_key = 8, 40
    seen: list[tuple[str, str, int, int]] = []  # (consumer, key, seq, queue)
    failed_once: set[tuple[str, int]] = set()
    stop_first = asyncio.Event()

    def listener_for(name: str) -> Callable[[list[MessageExt], Any], Awaitable[ConsumeOrderlyStatus]]:
        async def listener(msgs: list[MessageExt], context: Any) -> ConsumeOrderlyStatus:
            for m in msgs:
                key, seq = m.properties["KEYS"], int(m.properties["seq"])
                if seq == 5 and (key, seq) not in failed_once:  # fail once: the batch comes again, in order
                    failed_once.add((key, seq))
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            seen.extend((name, m.properties["KEYS"], int(m.properties["seq"]), m.queue_id) for m in msgs)
            await asyncio.sleep(0.002)
            if name == "first" and len(seen) >= keys * per_key // 2:
                stop_first.set()
            return ConsumeOrderlyStatus.SUCCESS

        return listener

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 4)
        selector = SelectMessageQueueByHash()
        for seq in range(per_key):
            for k in range(keys):
                key = f"order-{k}"
                msg = new_message(topic, f"{key}:{seq}", keys=key, properties={"seq": str(seq)})
                await producer.send(msg, selector=selector, arg=key)

    def consumer(name: str) -> PushConsumer:
        c = PushConsumer(group, config=client_config(cluster), instance_name=name, listener=listener_for(name),
                         orderly=True, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                         suspend_current_queue_time=0.1, consume_message_batch_max_size=3)  # fmt: skip
        c.subscribe(topic)
        return c

    async with consumer("first"):
        await asyncio.wait_for(stop_first.wait(), 60)
    consumed_before = len(seen)
    async with consumer("second"):
        await wait_until(lambda: len({(k, s) for _, k, s, _ in seen}) >= keys * per_key, 60, "every message")
    assert consumed_before < keys * per_key
    by_key: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
    for name, key, seq, _ in seen:
        by_key[key].append((name, seq))
    for key, events in by_key.items():
        assert {s for _, s in events} == set(range(per_key)), key
        # Each consumer sees the key's messages in order; the second one may start a little before where
        # the first stopped (its last batch uncommitted), never after.
        for name in ("first", "second"):
            seqs = [s for n, s in events if n == name]
            assert seqs == sorted(seqs) and len(seqs) == len(set(seqs)), (key, name, seqs)
        firsts = [s for n, s in events if n == "first"]
        seconds = [s for n, s in events if n == "second"]
        if firsts and seconds:
            assert seconds[0] <= firsts[-1] + 1, (key, firsts[-1], seconds[0])
    queues_of_key = {key: {q for _, k, _, q in seen if k == key} for key in by_key}
    assert all(len(q) == 1 for q in queues_of_key.values())  # one key, one queue
    assert len(failed_once) == keys


async def scenario_orderly_member_joins(cluster: Cluster) -> None:
    """A second orderly member takes over queues from the first: the broker lock passes over only after the
    first finished its batch and committed, so each key keeps its order across the hand-over."""
    topic = unique("OrderlyJoin")
    group = unique("OrderlyJoinGroup")
    keys, per_key = 8, 40
    seen: list[tuple[str, str, int]] = []

    def listener_for(name: str) -> Callable[[list[MessageExt], Any], Awaitable[ConsumeOrderlyStatus]]:
        async def listener(msgs: list[MessageExt], context: Any) -> ConsumeOrderlyStatus:
            seen.extend((name, m.properties["KEYS"], int(m.properties["seq"])) for m in msgs)
            await asyncio.sleep(0.003)
            return ConsumeOrderlyStatus.SUCCESS

        return listener

    def consumer(name: str) -> PushConsumer:
        c = PushConsumer(group, config=client_config(cluster), instance_name=name, listener=listener_for(name),
                         orderly=True, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
        c.subscribe(topic)
        return c

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 4)
        for seq in range(per_key):
            for k in range(keys):
                await producer.send(new_message(topic, "x", keys=f"k{k}", properties={"seq": str(seq)}),
                                    selector=SelectMessageQueueByHash(), arg=f"k{k}")  # fmt: skip
    async with consumer("one") as one:
        await wait_until(lambda: len(seen) >= 20, 30, "the first member to start")
        async with consumer("two") as two:
            await wait_until(lambda: len({(k, q) for _, k, q in seen}) >= keys * per_key, 60, "every message")
            assert two.assignment() and one.assignment()
    for k in range(keys):
        events = [(n, q) for n, key, q in seen if key == f"k{k}"]
        assert {q for _, q in events} == set(range(per_key))
        previous: tuple[str, int] | None = None
        for name, q in events:
            if previous is not None:
                if name == previous[0]:
                    assert q == previous[1] + 1, (k, events)  # one member: strictly in order
                else:
                    assert q <= previous[1] + 1, (k, events)  # a new owner resumes at or before the last
            previous = (name, q)


async def scenario_clustering_join_and_leave(cluster: Cluster) -> None:
    topic = unique("Members")
    group = unique("MemberGroup")
    total = 600
    records: list[tuple[str, str, MessageQueue]] = []  # (consumer, uniq key, queue)

    def listener_for(name: str) -> Callable[[list[MessageExt], Any], Awaitable[None]]:
        async def listener(msgs: list[MessageExt], context: Any) -> None:
            for m in msgs:
                records.append((name, m.properties["UNIQ_KEY"], MessageQueue(m.topic, "", m.queue_id)))
            await asyncio.sleep(0.001)

        return listener

    def consumer(name: str) -> PushConsumer:
        c = PushConsumer(group, config=client_config(cluster), instance_name=name, listener=listener_for(name),
                         consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
        c.subscribe(topic)
        return c

    sent: list[str] = []
    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 8)

        async def produce() -> None:
            for i in range(total):
                sent.append((await producer.send(new_message(topic, f"m{i}"))).msg_id)
                await asyncio.sleep(0.008)

        sending = asyncio.ensure_future(produce())
        c1 = await consumer("c1").start()
        await asyncio.sleep(1.5)
        c2 = await consumer("c2").start()
        await asyncio.sleep(1.5)
        c3 = await consumer("c3").start()
        await asyncio.sleep(1.0)
        await c1.shutdown()
        await sending
        def shared_out() -> bool:
            mine = [mq for c in (c2, c3) for mq in c.assignment() if mq.topic == topic]
            return len(mine) == 8 and len(set(mine)) == 8 and all(c.assignment() for c in (c2, c3))

        try:
            await wait_until(lambda: {u for _, u, _ in records} >= set(sent), 60, "every message consumed")
            await wait_until(shared_out, 20, "the two members left to share the 8 queues")
        finally:
            await c2.shutdown()
            await c3.shutdown()
    counts = collections.Counter(u for _, u, _ in records)
    duplicates = {u: n for u, n in counts.items() if n > 1}
    owners: dict[MessageQueue, set[str]] = collections.defaultdict(set)
    for name, _, mq in records:
        owners[mq].add(name)
    cluster.notes["clustering_duplicates"] = len(duplicates)
    log.info("join/leave: %d messages, %d consumed twice or more", total, len(duplicates))
    for u in duplicates:
        queues = {mq for _, uu, mq in records if uu == u}
        assert all(len(owners[q]) > 1 for q in queues), "a duplicate outside a rebalanced queue"
    assert {name for name, _, _ in records} == {"c1", "c2", "c3"}


async def scenario_broadcasting(cluster: Cluster, offset_dir: Path) -> None:
    topic = unique("Broadcast")
    group = unique("BroadcastGroup")
    got: dict[str, list[bytes]] = collections.defaultdict(list)

    def consumer(name: str) -> PushConsumer:
        async def listener(msgs: list[MessageExt], context: Any) -> None:
            got[name].extend(m.body for m in msgs)

        c = PushConsumer(group, config=client_config(cluster), instance_name=name, listener=listener,
                         message_model=MessageModel.BROADCASTING, offset_store_dir=str(offset_dir),
                         consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
        c.subscribe(topic)
        return c

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 4)
        async with consumer("b1") as b1, consumer("b2") as b2:
            for i in range(40):
                await producer.send(new_message(topic, f"m{i}"))
            await wait_until(lambda: len(got["b1"]) >= 40 and len(got["b2"]) >= 40, 30, "both members")
            await asyncio.sleep(1.2)  # one persist round
            ids = (b1.client_id, b2.client_id)
    expected = sorted(f"m{i}".encode() for i in range(40))
    assert sorted(got["b1"]) == expected and sorted(got["b2"]) == expected
    for cid in ids:
        stored = (offset_dir / cid / group / "offsets.json").read_text()
        assert '"topic":"' + topic + '"' in stored


async def scenario_retry_and_dlq(cluster: Cluster) -> None:
    topic = unique("Retry")
    group = unique("RetryGroup")
    deliveries: list[tuple[bytes, int, str]] = []

    async def listener(msgs: list[MessageExt], context: Any) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            deliveries.append((m.body, m.reconsume_times, m.topic))
        if any(m.body.startswith(b"bad") for m in msgs):
            context.delay_level_when_next_consume = 1  # retry after 1 s instead of 10 s
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 2)
        await producer.create_topic(f"%DLQ%{group}", 1)  # readable, to look into it
        consumer = PushConsumer(group, config=client_config(cluster), listener=listener, max_reconsume_times=2,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
        consumer.subscribe(topic)
        async with consumer:
            bad = await producer.send(new_message(topic, b"bad-1", keys="bad"))
            await producer.send(new_message(topic, b"good-1"))
            await wait_until(lambda: sum(1 for b, _, _ in deliveries if b == b"bad-1") >= 3, 60, "three deliveries")
            await asyncio.sleep(2.5)  # no fourth one
    bad_deliveries = [(r, t) for b, r, t in deliveries if b == b"bad-1"]
    assert bad_deliveries == [(0, topic), (1, topic), (2, topic)]  # retried on %RETRY%, shown with its own topic
    assert [b for b, _, _ in deliveries].count(b"good-1") == 1
    async with PullConsumer(unique("DlqReader"), config=client_config(cluster)) as reader:
        dlq = MessageQueue(f"%DLQ%{group}", "broker-a", 0)
        deadline = time.monotonic() + 20
        while True:
            result = await reader.pull(dlq, "*", 0, 32)
            if result.status is PullStatus.FOUND or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert result.status is PullStatus.FOUND
        dead = result.messages[0]
        assert dead.body == b"bad-1"
        assert dead.properties["UNIQ_KEY"] == bad.msg_id
        assert dead.properties.get("RETRY_TOPIC") == topic or dead.properties.get("ORIGIN_MESSAGE_ID")


async def scenario_a_hung_listener_is_let_go_after_the_consume_timeout(cluster: Cluster) -> None:
    """Java's ``consumeTimeout``: a message with the listener longer than that is sent back for retry (delay level 3,
    10 s) and leaves the process queue, so the committed offset moves past it while the listener still hangs; it
    comes again from the retry topic. Each delivery carries ``CONSUME_START_TIME``."""
    topic = unique("Hung")
    group = unique("HungGroup")
    deliveries: list[tuple[bytes, int, str | None]] = []
    release = asyncio.Event()

    async def listener(msgs: list[MessageExt], context: Any) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            deliveries.append((m.body, m.reconsume_times, m.properties.get("CONSUME_START_TIME")))
            if m.body == b"stuck" and m.reconsume_times == 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(release.wait(), 40)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 1)
        consumer = PushConsumer(group, config=client_config(cluster), listener=listener, consume_timeout=1.0,
                                consume_thread_nums=4, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(topic)
        async with consumer:
            for body in [b"stuck", *(f"ok-{i}".encode() for i in range(5))]:
                await producer.send(new_message(topic, body))
            mq = MessageQueue(topic, "broker-a", 0)
            assert consumer.running_settings()["consumeTimeout"] == 0  # whole minutes, as Java reports it
            try:
                table = consumer.offset_store.offset_table  # type: ignore[union-attr]
                await wait_until(lambda: table.get(mq) == 6, 20, "the offset past the hung message")
                await wait_until(lambda: (b"stuck", 1) in {(b, r) for b, r, _ in deliveries}, 30, "the retry")
            finally:
                release.set()
    assert sorted(b for b, r, _ in deliveries if r == 0) == [b"ok-0", b"ok-1", b"ok-2", b"ok-3", b"ok-4", b"stuck"]
    assert all(started and started.isdigit() for _, _, started in deliveries)


async def scenario_consume_from_timestamp(cluster: Cluster, exact: bool = True) -> None:
    """``exact``: only the messages stored after the timestamp arrive (a broker that honours
    ``setZeroIfNotFound``); otherwise they arrive, the older ones may too."""
    topic = unique("Since")
    group = unique("SinceGroup")
    received: list[bytes] = []

    async def listener(msgs: list[MessageExt], context: Any) -> None:
        received.extend(m.body for m in msgs)

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 2)
        for i in range(10):
            await producer.send(new_message(topic, f"old-{i}"))
        # A 4.9 store answers the offset whose store time is nearest the timestamp, before or after it:
        # put the timestamp much nearer the new messages than the old ones.
        await asyncio.sleep(1.0)
        since = int(time.time() * 1000)
        await asyncio.sleep(0.05)
        for i in range(10):
            await producer.send(new_message(topic, f"new-{i}"))
    consumer = PushConsumer(group, config=client_config(cluster), listener=listener, consume_timestamp=since,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP)  # fmt: skip
    consumer.subscribe(topic)
    async with consumer:
        await wait_until(lambda: len(set(received)) >= 10, 30, "the new messages")
        await asyncio.sleep(1.0)
    new = sorted(f"new-{i}".encode() for i in range(10))
    if exact:
        assert sorted(set(received)) == new
    else:
        assert set(new) <= set(received)
    cluster.notes["timestamp_old_received"] = sum(1 for b in received if b.startswith(b"old"))


async def scenario_flow_control(cluster: Cluster) -> None:
    topic = unique("Flow")
    cached: list[int] = []
    done: list[bytes] = []
    consumer: PushConsumer | None = None

    async def listener(msgs: list[MessageExt], context: Any) -> None:
        assert consumer is not None
        cached.extend(pq.msg_count for pq in consumer.rebalance.process_queue_table.values())
        await asyncio.sleep(0.01)
        done.extend(m.body for m in msgs)

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 1)
        await producer.send_batch([new_message(topic, f"m{i}") for i in range(100)])
        consumer = PushConsumer(unique("FlowGroup"), config=client_config(cluster), listener=listener,
                                pull_batch_size=4, pull_threshold_for_queue=5, consume_thread_nums=2,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: len(done) >= 100, 30, "100 slow messages")
            stats = dict(consumer.stats)
    assert max(cached) <= 5 + 4  # the threshold, plus the one pull that crossed it
    assert stats["flow_control"] > 0
    assert sorted(done) == sorted(f"m{i}".encode() for i in range(100))


async def scenario_lite_pull(cluster: Cluster) -> None:
    topic = unique("Lite")
    group = unique("LiteGroup")
    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 3)
        for i in range(30):
            await producer.send(new_message(topic, f"m{i}", tags="T" if i % 2 else "U"))
    consumer = LitePullConsumer(group, config=client_config(cluster), pull_batch_size=4,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe(topic, "T")
    got: list[MessageExt] = []
    async with consumer:
        deadline = time.monotonic() + 30
        while len(got) < 15 and time.monotonic() < deadline:
            got.extend(await consumer.poll(timeout=1.0, max_messages=3))
        await asyncio.sleep(0.5)  # the pulls behind the last match move past the filtered-out tail
        await consumer.commit()
        committed = {mq: await consumer.committed(mq) for mq in consumer.assignment()}
        first = sorted(consumer.assignment())[0]
        await consumer.seek(first, 0)
        again = await consumer.poll(timeout=5.0)
    assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(1, 30, 2))
    assert all(m.properties["TAGS"] == "T" for m in got)
    assert sum(committed.values()) == 30  # every queue committed up to its end
    assert again and again[0].queue_id == first.queue_id

    assigned = LitePullConsumer(unique("AssignGroup"), config=client_config(cluster))
    mq = MessageQueue(topic, "broker-a", 1)
    assigned.assign([mq])
    async with assigned:
        await assigned.seek_to_begin(mq)
        msgs: list[MessageExt] = []
        deadline = time.monotonic() + 10
        while not msgs and time.monotonic() < deadline:
            msgs = await assigned.poll(timeout=1.0)
        assert msgs and all(m.queue_id == 1 for m in msgs)
        assert assigned.assignment() == {mq}
        await assigned.seek(mq, 0)
        async for m in assigned:  # the asynchronous iterator: messages one by one
            assert m.queue_id == 1 and m.queue_offset == 0
            break


async def scenario_request_reply(cluster: Cluster) -> None:
    """Request-reply: a responder (a push consumer that answers with create_reply_message) and requesters in
    another client instance; each reply reaches the request that asked, concurrent ones included, through the
    broker's push; a request nobody answers times out with RequestTimeoutError."""
    topic = unique("Requests")
    async with Producer(unique("ResponderPG"), config=client_config(cluster, instance_name="responder")) as answers:
        await make_topic(answers, topic, 2)

        async def listener(msgs: list[MessageExt], context: Any) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                if m.body != b"silence":
                    reply = create_reply_message(m, b"re: " + m.body)
                    reply.properties["served-by"] = "responder"
                    await answers.send(reply)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(unique("ResponderG"), config=client_config(cluster, instance_name="responder"),
                                listener=listener, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe(topic)
        async with consumer:
            await wait_until(lambda: sum(mq.topic == topic for mq in consumer.assignment()) == 2, 30,
                             "the responder's queues")
            requester = Producer(unique("RequesterPG"), config=client_config(cluster, instance_name="requester"))
            async with requester:
                first = await requester.request(new_message(topic, b"q0", tags="Q"), timeout=10)
                assert first.body == b"re: q0" and first.topic.endswith("_REPLY_TOPIC")
                assert first.properties["MSG_TYPE"] == "reply" and first.properties["served-by"] == "responder"
                assert first.properties["REPLY_TO_CLIENT"] == requester.client_id
                assert int(first.properties["ARRIVE_TIME"]) >= first.born_timestamp > 0
                bodies = [f"q{i}".encode() for i in range(1, 9)]
                replies = await asyncio.gather(*(requester.request(new_message(topic, b), timeout=10) for b in bodies))
                assert [r.body for r in replies] == [b"re: " + b for b in bodies]
                assert len({r.properties["CORRELATION_ID"] for r in replies}) == len(bodies)
                called: list[tuple[Any, Any]] = []
                task = requester.request_async(new_message(topic, b"cb"), lambda r, e: called.append((r, e)), 10)
                assert (await task).body == b"re: cb"
                await wait_until(lambda: bool(called), 5, "the request callback")
                assert called[0][0].body == b"re: cb" and called[0][1] is None
                begin = time.monotonic()
                try:
                    await requester.request(new_message(topic, b"silence"), timeout=1.5)
                except RequestTimeoutError as exc:
                    assert "wait reply message timeout, 1500 ms" in str(exc)
                else:
                    raise AssertionError("a request nobody answers returned")
                assert 1.4 < time.monotonic() - begin < 5


async def scenario_admin_calls_to_a_consumer(cluster: Cluster) -> None:
    """What the admin tools ask of a consumer through its broker (mqadmin consumerStatus, getConsumerStatus, the
    dashboard's resend): GET_CONSUMER_RUNNING_INFO, GET_CONSUMER_STATUS_FROM_CLIENT (via
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS) and CONSUME_MESSAGE_DIRECTLY, answered by the Python push consumer."""
    from rocketq.client.admin import MQAdmin
    from rocketq.common import json_compat
    from rocketq.remoting.codes import RequestCode
    from rocketq.remoting.command import create_request
    from rocketq.remoting.transport import RemotingClient

    topic, group = unique("AdminCalls"), unique("AdminG")
    consumed: list[bytes] = []

    async def listener(msgs: list[MessageExt], context: Any) -> ConsumeConcurrentlyStatus:
        for m in msgs:
            if m.body == b"boom":
                raise RuntimeError("listener says no")
            consumed.append(m.body)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if msgs[0].body == b"later" else \
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS  # fmt: skip

    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await make_topic(producer, topic, 2)
        sent = [await producer.send(new_message(topic, f"m{i}")) for i in range(6)]
        consumer = PushConsumer(group, config=client_config(cluster, instance_name="admin-target"),
                                listener=listener, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                                consume_thread_nums=3)  # fmt: skip
        consumer.subscribe(topic, "*")
        async with consumer, MQAdmin(cluster.namesrv_addr) as admin:
            await wait_until(lambda: len(consumed) >= 6, 30, "six messages consumed")
            await consumer.persist_consumer_offset()
            broker_addr = next(iter((await admin.cluster_info()).broker_addr_table.values())).broker_addrs[0]
            client = RemotingClient(broker_addr)
            try:
                r = await client.invoke(create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, {
                    "consumerGroup": group, "clientId": consumer.client_id, "jstackEnable": True}), 10)  # fmt: skip
                assert r.code == 0, r.remark
                info = json_compat.loads(r.body)
                props = info["properties"]
                assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and props["PROP_CONSUMEORDERLY"] == "false"
                assert props["PROP_THREADPOOL_CORE_SIZE"] == "3" and props["consumerGroup"] == group
                assert props["messageModel"] == "CLUSTERING" and props["PROP_NAMESERVER_ADDR"].endswith(";")
                assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) > 0 and props["PROP_CLIENT_VERSION"].startswith("V")
                assert {s["topic"] for s in info["subscriptionSet"]} == {topic, f"%RETRY%{group}"}
                held = {(k["topic"], k["queueId"]): v for k, v in info["mqTable"].items()}
                assert {q for t, q in held if t == topic} == {0, 1}
                assert sum(v["commitOffset"] for (t, _q), v in held.items() if t == topic) == 6
                assert all(v["droped"] is False and v["lastPullTimestamp"] > 1e12 for v in held.values())
                status = info["statusTable"][topic]
                assert status["consumeOKTPS"] == pytest.approx(6 / 60) and status["pullRT"] >= 0
                assert status["consumeFailedMsgs"] == 0 and "Thread: " in info["jstack"]
                missing = await client.invoke(create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, {
                    "consumerGroup": "NoSuchGroup", "clientId": consumer.client_id}), 10)  # fmt: skip
                assert missing.code != 0

                r = await client.invoke(create_request(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {
                    "topic": topic, "group": group}), 10)  # fmt: skip
                assert r.code == 0, r.remark
                table = json_compat.loads(r.body)["consumerTable"][consumer.client_id]
                assert sorted((k["queueId"], v) for k, v in table.items()) == \
                    sorted((q, v["commitOffset"]) for (t, q), v in held.items() if t == topic)  # fmt: skip

                async def direct(offset_msg_id: str) -> dict[str, Any]:
                    answer = await client.invoke(create_request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {
                        "consumerGroup": group, "clientId": consumer.client_id, "msgId": offset_msg_id}), 10)
                    assert answer.code == 0, answer.remark
                    return dict(json_compat.loads(answer.body))

                ok = await direct(sent[2].offset_msg_id)
                assert ok["consumeResult"] == "CR_SUCCESS" and ok["order"] is False and ok["autoCommit"] is True
                assert consumed.count(b"m2") == 2  # consumed again, through the listener
                for body, verdict in ((b"later", "CR_LATER"), (b"boom", "CR_THROW_EXCEPTION")):
                    extra = await producer.send(new_message(unique("Elsewhere"), body))
                    result = await direct(extra.offset_msg_id)
                    assert result["consumeResult"] == verdict, result
                assert "listener says no" in result["remark"]
            finally:
                await client.close()

            async def cli(*args: str) -> str:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "rocketq.cli.main", "admin", "-n", cluster.namesrv_addr, *args,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)  # fmt: skip
                out, _ = await asyncio.wait_for(proc.communicate(), 60)
                assert proc.returncode == 0, out
                return out.decode()

            brief = await cli("consumerStatus", "-g", group)
            assert consumer.client_id in brief and "Same subscription in the same group of consumer" in brief
            detail = json.loads(await cli("consumerStatus", "-g", group, "-i", consumer.client_id, "--json"))
            assert detail["properties"]["consumerGroup"] == group
            assert [(q["topic"], q["queueId"]) for q in detail["mqTable"] if q["topic"] == topic] == [(topic, 0),
                                                                                                     (topic, 1)]
            text = await cli("consumerStatus", "-g", group, "-i", consumer.client_id)
            assert "#Consumer RT&TPS#" in text and f"{topic} " in text
            again = await cli("queryMsgById", "-i", sent[4].offset_msg_id, "-g", group, "-d", consumer.client_id)
            assert "consumeResult=CR_SUCCESS" in again and consumed.count(b"m4") == 2, again


# -----------------------------------------------------------------------------------------------------
async def scenario_sends_without_a_writable_queue(cluster: Cluster) -> None:
    """A topic whose route has no queue to write to (read-only: ``perm=4``): every way of sending says there is no
    route (Java: ``MQClientException`` "No route info of this topic"), and the selector is never called."""
    topic = unique("ReadOnly")
    async with Producer(unique("PG"), config=client_config(cluster)) as producer:
        await producer.create_topic(topic, 2, perm=4)
        msg = new_message(topic, b"x")
        picked: list[object] = []

        def selector(mqs: Any, m: Any, arg: Any) -> Any:
            picked.append(arg)
            return mqs[0]

        attempts: list[Callable[[], Awaitable[object]]] = [
            lambda: producer.send(msg), lambda: producer.send_oneway(msg),
            lambda: producer.send_async(msg), lambda: producer.send_batch([new_message(topic, b"a")]),
            lambda: producer.send(msg, selector=selector, arg=1),
            lambda: producer.send(msg, selector=SelectMessageQueueByHash(), arg="order-1"),
            lambda: producer.request(msg, 1.0),
        ]  # fmt: skip
        for attempt in attempts:
            with pytest.raises(NoRouteError, match=topic):
                await attempt()
        assert not picked
        # A selector that raises: the client's error, with the selector's as its cause.
        await make_topic(producer, f"{topic}W", 2)

        def broken(mqs: Any, m: Any, arg: Any) -> Any:
            raise KeyError(arg)

        with pytest.raises(ClientError, match="selector") as caught:
            await producer.send(new_message(f"{topic}W", b"y"), selector=broken, arg="k")
        assert isinstance(caught.value.__cause__, KeyError)


async def scenario_groups_are_checked_at_start(cluster: Cluster) -> None:
    """Producer and consumer groups as Java's ``Validators.checkGroup`` and ``checkConfig`` take them: refused at
    start, before any request reaches a broker (no retry topic is made for a refused consumer group)."""
    config = client_config(cluster)
    bad = {"bad group!": "illegal characters", "g" * 256: "longer than group max length 255", "": "blank"}
    for group, why in [*bad.items(), ("DEFAULT_PRODUCER", "can not equal DEFAULT_PRODUCER")]:
        with pytest.raises(InvalidMessageError, match=why):
            await Producer(group, config=config).start()

    def push(group: str) -> PushConsumer:
        consumer = PushConsumer(group, config=config)
        consumer.subscribe("T", "*")
        consumer.register_message_listener(lambda msgs, context: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        return consumer

    consumers: list[Callable[[str], Any]] = [
        push, lambda g: PullConsumer(g, config=config), lambda g: LitePullConsumer(g, config=config)]
    for make in consumers:
        for group, why in [*bad.items(), ("DEFAULT_CONSUMER", "can not equal DEFAULT_CONSUMER")]:
            with pytest.raises(InvalidMessageError, match=why):
                await make(group).start()
    from rocketq.client.admin import MQAdmin

    async with MQAdmin(cluster.namesrv_addr) as admin:
        assert not [t for t in await admin.topic_list() if t.startswith("%RETRY%") and ("bad" in t or "ggg" in t)]


# Tests (rocketq in this process)
# -----------------------------------------------------------------------------------------------------


def test_send_every_way_and_pull(cluster: Cluster) -> None:
    run(scenario_send_every_way_and_pull(cluster))


def test_sends_without_a_writable_queue(cluster: Cluster) -> None:
    run(scenario_sends_without_a_writable_queue(cluster))


def test_groups_are_checked_at_start(cluster: Cluster) -> None:
    run(scenario_groups_are_checked_at_start(cluster))


def test_a_hung_listener_is_let_go_after_the_consume_timeout(cluster: Cluster) -> None:
    run(scenario_a_hung_listener_is_let_go_after_the_consume_timeout(cluster))


def test_tag_filtered_push_consumer(cluster: Cluster) -> None:
    run(scenario_tag_filtered_push(cluster))


def test_sql92_filtered_consumers(cluster: Cluster) -> None:
    run(scenario_sql92_filtered_consumers(cluster))


def test_orderly_consumption_keeps_queue_order_across_a_restart(cluster: Cluster) -> None:
    run(scenario_orderly_across_restart(cluster))


def test_orderly_queues_pass_between_members_in_order(cluster: Cluster) -> None:
    run(scenario_orderly_member_joins(cluster))


def test_clustering_members_join_and_leave_while_producing(cluster: Cluster) -> None:
    run(scenario_clustering_join_and_leave(cluster))


def test_broadcasting_gives_every_member_every_message(cluster: Cluster, tmp_path: Path) -> None:
    run(scenario_broadcasting(cluster, tmp_path))


def test_retry_then_dead_letter_queue(cluster: Cluster) -> None:
    run(scenario_retry_and_dlq(cluster))


def test_consume_from_timestamp(cluster: Cluster) -> None:
    run(scenario_consume_from_timestamp(cluster))


def test_reset_offset_of_an_online_group(cluster: Cluster) -> None:
    run(scenario_reset_offset_of_an_online_group(cluster))


def test_lite_pull_consumer(cluster: Cluster) -> None:
    run(scenario_lite_pull(cluster))


def test_flow_control_by_cached_count(cluster: Cluster) -> None:
    run(scenario_flow_control(cluster))


def test_request_reply(cluster: Cluster) -> None:
    run(scenario_request_reply(cluster))


def test_admin_calls_to_a_consumer(cluster: Cluster) -> None:
    run(scenario_admin_calls_to_a_consumer(cluster))


def test_blocking_api(cluster: Cluster) -> None:
    topic = unique("Blocking")
    config = client_config(cluster)
    with BlockingProducer(unique("PG"), config=config) as producer:
        producer.create_topic(topic, 2)
        results = [producer.send(new_message(topic, f"m{i}")) for i in range(5)]
        futures = [producer.send_async(new_message(topic, f"a{i}")) for i in range(5)]
        results += [f.result(10) for f in futures]
        producer.send_batch([new_message(topic, f"b{i}") for i in range(5)])
    assert all(r.ok for r in results)
    first = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    with BlockingLitePullConsumer(unique("LiteG"), config=config, subscribe={topic: "*"},
                                  consume_from_where=first) as consumer:  # fmt: skip
        bodies = [m.body for m in consumer.iter_messages(idle_timeout=3, max_messages=15)]
    assert len(bodies) == 15 and len(set(bodies)) == 15
    # An SQL92 subscription through the blocking face: topic → (expression, type). UNIQ_KEY is a property too.
    wanted = results[2].msg_id
    with BlockingLitePullConsumer(unique("LiteSqlG"), config=config, consume_from_where=first,
                                  subscribe={topic: (f"UNIQ_KEY = '{wanted}'", "SQL92")}) as consumer:  # fmt: skip
        selected = list(consumer.iter_messages(idle_timeout=3, max_messages=15))
    assert [m.body for m in selected] == [b"m2"]

    seen: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], context: Any) -> None:  # a plain function: runs on a worker thread
        assert threading.current_thread().name.startswith("consume-")
        with lock:
            seen.extend(m.body for m in msgs)

    with BlockingPushConsumer(unique("PushG"), config=config, listener=listener, subscribe={topic: "*"},
                              consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET):  # fmt: skip
        deadline = time.monotonic() + 30
        while len(seen) < 15 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(set(seen)) == 15

    # Request-reply with the blocking faces: the responder's listener replies through a blocking producer.
    with BlockingProducer(unique("ResponderPG"), config=config) as answers:
        def respond(msgs: list[MessageExt], context: Any) -> None:
            for m in msgs:
                if m.body.startswith(b"ask"):
                    answers.send(create_reply_message(m, m.body.upper()))

        with BlockingPushConsumer(unique("ResponderG"), config=config, listener=respond, subscribe={topic: "*"}), \
                BlockingProducer(unique("RequesterPG"), config=client_config(cluster, instance_name="req")) as asker:
            assert asker.request(new_message(topic, b"ask-1"), timeout=15).body == b"ASK-1"
            assert asker.request_async(new_message(topic, b"ask-2"), None, 15).result(20).body == b"ASK-2"


def _rocketq(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("NAMESRV_ADDR", None)
    return subprocess.run([sys.executable, "-m", "rocketq.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)  # fmt: skip


def test_cli_produce_and_consume(cluster: Cluster) -> None:
    from rocketq.store.dump import FIELDS

    topic = unique("Cli")
    group = unique("CliGroup")
    ns = cluster.namesrv_addr
    produced = _rocketq("produce", "-n", ns, "-t", topic, "--count", "25", "--batch", "5", "--tags", "TagCli",
                        "--keys", "k-{i}", "--body-size", "64")  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    assert "sent 25 message(s)" in produced.stdout
    first = _rocketq("consume", "-n", ns, "-t", topic, "-g", group, "--count", "10", "--json", "--timeout", "20")
    assert first.returncode == 0, first.stderr
    lines = [json.loads(line) for line in first.stdout.splitlines()]
    assert len(lines) == 10
    assert all(tuple(obj) == FIELDS for obj in lines)
    assert all(obj["tags"] == "TagCli" and obj["keys"].startswith("k-") for obj in lines)
    assert all("MIN_OFFSET" not in obj["properties"] and obj["bodyLength"] == 64 for obj in lines)
    rest = _rocketq("consume", "-n", ns, "-t", topic, "-g", group, "--timeout", "3")
    assert rest.returncode == 0, rest.stderr
    assert len(rest.stdout.splitlines()) == 15  # exactly the 15 not consumed (and committed) before
    short = _rocketq("consume", "-n", ns, "-t", topic, "-g", group, "--count", "1", "--timeout", "1")
    assert short.returncode == 1 and "consumed 0 of 1" in short.stderr
    bad = _rocketq("produce", "-n", ns, "-t", "bad topic!", "--count", "1")
    assert bad.returncode == 1 and "illegal characters" in bad.stderr
    # usage mistakes are usage errors, before anything is sent or read
    for argv, says in [(("produce", "--count", "0"), "--count: must be at least 1"),
                       (("produce", "--timeout", "0"), "--timeout: must be more than 0 seconds"),
                       (("produce", "--body-size", "0"), "--body-size: must be at least 1"),
                       (("consume", "-g", group, "--timeout", "-3"), "--timeout: must be more than 0 seconds"),
                       (("consume", "-g", group, "--timestamp", "5"), "give --from timestamp too")]:  # fmt: skip
        wrong = _rocketq(argv[0], "-n", ns, "-t", topic, *argv[1:])
        assert wrong.returncode == 2 and says in wrong.stderr and "Traceback" not in wrong.stderr, (argv, wrong.stderr)
    with contextlib.suppress(Exception):
        cluster.notes["cli"] = produced.stdout.strip()


def test_cli_sql92_consume(cluster: Cluster) -> None:
    topic = unique("CliSql")
    ns = cluster.namesrv_addr
    produced = _rocketq("produce", "-n", ns, "-t", topic, "--count", "30", "--property", "a={i}", "--property",
                        "kind=demo", "--tags", "T{i}")  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    got = _rocketq("consume", "-n", ns, "-t", topic, "-g", unique("CliSqlG"), "--sql", "a >= 25 AND kind = 'demo'",
                   "--count", "5", "--json", "--timeout", "20")  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert sorted(int(json.loads(line)["properties"]["a"]) for line in got.stdout.splitlines()) == [25, 26, 27, 28, 29]
    bad = _rocketq("consume", "-n", ns, "-t", topic, "-g", unique("CliSqlG"), "--sql", "a = NULL", "--count", "1")
    assert bad.returncode == 1 and "Invalid MessageSelector" in bad.stderr and "Traceback" not in bad.stderr
    both = _rocketq("consume", "-n", ns, "-t", topic, "-g", "g", "--sql", "a > 1", "--tags", "T1")
    assert both.returncode == 2 and "not allowed with" in both.stderr


def test_sql92_needs_a_broker_with_the_property_filter(tmp_path: Path) -> None:
    servers = InProcessServers(tmp_path, property_filter=False)
    try:
        ns = servers.start()
        cluster = Cluster(ns, "rocketq-no-filter")

        async def scenario() -> None:
            async with Producer(unique("PG"), config=client_config(cluster)) as producer:
                topic = unique("NoSql")
                await make_topic(producer, topic, 1)
                def listener(msgs: list[MessageExt], context: Any) -> ConsumeConcurrentlyStatus:
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

                consumer = PushConsumer(unique("NoSqlG"), config=client_config(cluster), listener=listener)
                consumer.subscribe(topic, "a > 1", "SQL92")
                with pytest.raises(ClientError, match="enablePropertyFilter=true") as e:
                    await consumer.start()
                assert "does not support consumer to filter message by SQL92" in str(e.value)
                return topic

        topic = run(scenario())
        refused = _rocketq("consume", "-n", ns, "-t", topic, "-g", "g", "--sql", "a > 1", "--count", "1")
        assert refused.returncode == 1 and "enablePropertyFilter" in refused.stderr
        assert "Traceback" not in refused.stderr
    finally:
        servers.stop()


def test_cli_consumer_started_before_the_topic_exists(cluster: Cluster) -> None:
    topic = unique("Later")
    env = dict(os.environ)
    env.pop("NAMESRV_ADDR", None)
    consumer = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "consume", "-n", cluster.namesrv_addr,
                                 "-t", topic, "-g", unique("LaterGroup"), "--count", "5", "--timeout", "30"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)  # fmt: skip
    try:
        time.sleep(2.0)  # the consumer is up and finds no route
        produced = _rocketq("produce", "-n", cluster.namesrv_addr, "-t", topic, "--count", "5")
        assert produced.returncode == 0, produced.stderr
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait(10)
    assert consumer.returncode == 0, err
    assert len(out.splitlines()) == 5


def test_readme_client_example_runs(cluster: Cluster) -> None:
    """The README's client example, as written, against this cluster (its address and fresh names swapped in)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Using the client", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    suffix = uuid.uuid4().hex[:8]
    for name in ("DemoProducer", "DemoTopic", "DemoGroup"):
        code = code.replace(f'"{name}"', f'"{name}{suffix}"')
    code = code.replace("127.0.0.1:9876", cluster.namesrv_addr)
    env = dict(os.environ)
    env.pop("NAMESRV_ADDR", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=90, env=env,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    # "got b'hello'" may come after the reply, once the example is already leaving: not waited for.
    assert "SendStatus.SEND_OK" in done.stdout and "reply: b're: question'" in done.stdout, done.stdout
