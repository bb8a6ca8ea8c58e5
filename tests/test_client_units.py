"""The client's parts that need no server: process queue offsets, offset stores, queue selectors, the fault
strategy, configuration, message building and validation."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.client import InvalidMessageError, MessageQueue, new_message
from rocketq.client.client_config import ClientConfig, resolve_namesrv_addrs
from rocketq.client.consume_orderly import suspend_seconds
from rocketq.client.errors import (
    BrokerBusyError,
    BrokerError,
    BrokerUnreachableError,
    ClientError,
    NoRouteError,
    broker_error,
    log_failure,
)
from rocketq.client.fault_strategy import MQFaultStrategy
from rocketq.client.offset_store import LocalFileOffsetStore, ReadOffsetType
from rocketq.client.process_queue import ProcessQueue
from rocketq.client.producer import Producer, check_group, check_topic
from rocketq.client.push_consumer import parse_consume_timestamp
from rocketq.client.queue_selector import SelectMessageQueueByHash, java_hash_code
from rocketq.client.route import TopicPublishInfo
from rocketq.common.message import Message, MessageExt
from rocketq.remoting.codes import ResponseCode


def msg(offset: int, body: bytes = b"x") -> MessageExt:
    return MessageExt(topic="T", body=body, queue_offset=offset)


# -- process queue ------------------------------------------------------------------------------------


def test_commit_offset_is_the_lowest_message_still_in_hand() -> None:
    pq = ProcessQueue()
    pq.put_message([msg(i) for i in range(10, 15)])
    assert (pq.msg_count, pq.msg_size, pq.max_span) == (5, 5, 4)
    assert pq.remove_message([msg(12)]) == 10  # 10 and 11 still being consumed
    assert pq.remove_message([msg(10), msg(11)]) == 13
    assert pq.remove_message([msg(13), msg(14)]) == 15  # empty: one past the highest
    assert pq.remove_message([msg(15)]) == -1  # nothing was there
    pq.put_message([msg(15)])
    pq.next_pull_offset = 40  # the pull moved past messages filtered out by tag
    assert pq.remove_message([msg(15)]) == 40


def test_orderly_take_commit_and_retry() -> None:
    pq = ProcessQueue()
    assert pq.put_message([msg(i) for i in range(5)])  # first put: start a consume task
    assert not pq.put_message([msg(5)])  # already consuming
    batch = pq.take_messages(3)
    assert [m.queue_offset for m in batch] == [0, 1, 2]
    pq.make_message_to_consume_again(batch[1:])  # 1 and 2 come again, before 3
    assert [m.queue_offset for m in pq.take_messages(10)] == [1, 2, 3, 4, 5]
    assert pq.commit() == 6 and pq.msg_count == 0
    assert pq.take_messages(1) == [] and not pq.consuming


def test_orderly_results_without_auto_commit() -> None:
    """``processConsumeResult`` with ``context.auto_commit = False``: SUCCESS commits nothing (the batch stays
    taken), COMMIT commits every batch taken since, ROLLBACK puts them all back for later; with auto_commit (the
    default) SUCCESS commits, and COMMIT / ROLLBACK are taken for it."""
    import types

    from rocketq.client.consume_orderly import ConsumeMessageOrderlyService
    from rocketq.client.listener import ConsumeOrderlyContext, ConsumeOrderlyStatus

    committed: list[int] = []
    consumer = types.SimpleNamespace(
        stats={"consumed_ok": 0, "consumed_failed": 0}, group="G", suspend_current_queue_time=1.0,
        instance=types.SimpleNamespace(consumer_stats=types.SimpleNamespace(consumed=lambda *a: None)),
        offset_store=types.SimpleNamespace(update_offset=lambda mq, offset, only_increase: committed.append(offset)),
        consume_message_batch_max_size=1, consume_thread_nums=1)  # fmt: skip
    service = ConsumeMessageOrderlyService(consumer, lambda msgs, ctx: None)  # type: ignore[arg-type]
    later: list[float] = []
    service._submit_later = lambda pq, mq, delay: later.append(delay)  # type: ignore[method-assign]
    mq = MessageQueue("T", "b", 0)

    async def scenario() -> None:
        pq = ProcessQueue()
        pq.put_message([msg(i) for i in range(6)])
        manual = ConsumeOrderlyContext(mq, auto_commit=False)
        for status in (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.SUCCESS):
            assert await service._process_result(pq.take_messages(1), status, manual, pq, mq)
        assert committed == [] and pq.msg_count == 6
        assert await service._process_result(pq.take_messages(1), ConsumeOrderlyStatus.COMMIT, manual, pq, mq)
        assert committed == [3] and pq.msg_count == 3
        batch = pq.take_messages(2)
        assert not await service._process_result(batch, ConsumeOrderlyStatus.ROLLBACK, manual, pq, mq)
        assert later == [1.0] and committed == [3]
        assert [m.queue_offset for m in pq.take_messages(10)] == [3, 4, 5]  # rolled back: consumed again
        auto = ConsumeOrderlyContext(mq)
        assert await service._process_result([], ConsumeOrderlyStatus.ROLLBACK, auto, pq, mq)
        assert committed == [3, 6]  # taken for SUCCESS when committing by itself

    asyncio.run(scenario())


def test_push_consumer_settings_out_of_range_are_refused_at_start() -> None:
    from rocketq.client import PushConsumer

    for setting, value, words in (("pull_batch_size", 0, "pullBatchSize Out of range [1, 1024]"),
                                  ("consume_message_batch_max_size", 5000, "consumeMessageBatchMaxSize"),
                                  ("pull_threshold_for_queue", 70000, "pullThresholdForQueue"),
                                  ("consume_thread_nums", 0, "consumeThreadNums")):  # fmt: skip
        consumer = PushConsumer("G", "127.0.0.1:1", listener=lambda msgs, ctx: None, **{setting: value})
        consumer.subscribe("T")
        with pytest.raises(InvalidMessageError, match=words.replace("[", r"\[").replace("]", r"\]")):
            asyncio.run(consumer.start())


def test_duplicate_pulls_are_ignored() -> None:
    pq = ProcessQueue()
    pq.put_message([msg(1), msg(2)])
    pq.put_message([msg(2), msg(3)])
    assert pq.msg_count == 3



class _PlainProcessQueue:
    """The process queue's counting, message by message: the reference for its bulk paths."""

    def __init__(self) -> None:
        self.msgs: dict[int, int] = {}
        self.max = 0

    def put(self, offsets: list[int], sizes: list[int]) -> None:
        for off, size in zip(offsets, sizes, strict=True):
            if off not in self.msgs:
                self.msgs[off] = size
                self.max = max(self.max, off)

    def remove(self, offsets: list[int], next_pull: int) -> int:
        if not self.msgs:
            return -1
        for off in offsets:
            self.msgs.pop(off, None)
        if self.msgs:
            return min(self.msgs)
        return max(self.max + 1, next_pull)


_OPS = st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 40), max_size=8), st.integers(0, 3)), max_size=30)


@given(_OPS)
def test_process_queue_counts_as_message_by_message(ops: list[tuple[bool, list[int], int]]) -> None:
    """Pulls (runs past what is in hand, taken in bulk, or anything else) and removals (a run of the offsets in
    hand, taken in bulk, or any offsets) keep the count, size, span and commit offset of a plain reading."""
    pq, plain = ProcessQueue(), _PlainProcessQueue()
    for is_put, offsets, shape in ops:
        if shape == 1:  # a pull's shape: increasing past the highest in hand
            base = max([*plain.msgs, -1]) + 1
            offsets = sorted({base + o for o in offsets})
        elif shape == 2 and plain.msgs:  # a batch consumed whole: a run of what is in hand
            held = sorted(plain.msgs)
            start = offsets[0] % len(held) if offsets else 0
            offsets = held[start : start + len(offsets)]
        sizes = [o % 3 for o in offsets]  # empty bodies too
        if is_put:
            pq.put_message([msg(o, b"x" * n) for o, n in zip(offsets, sizes, strict=True)])
            plain.put(offsets, sizes)
        else:
            pq.next_pull_offset = shape * 10
            assert pq.remove_message(msg(o) for o in offsets) == plain.remove(offsets, pq.next_pull_offset)
        assert (pq.msg_count, pq.msg_size) == (len(plain.msgs), sum(plain.msgs.values()))
        assert pq.max_span == (max(plain.msgs) - min(plain.msgs) if plain.msgs else 0)
        assert pq.has_temp_message() == bool(plain.msgs)


# -- offset stores ------------------------------------------------------------------------------------


def test_local_offset_file_round_trip_and_backup(tmp_path: Path) -> None:
    async def go() -> None:
        store = LocalFileOffsetStore("10.0.0.1@7", "G", tmp_path)
        a, b = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)
        store.update_offset(a, 5, False)
        store.update_offset(a, 3, True)  # increase-only: ignored
        store.update_offset(b, 9, False)
        await store.persist_all([a, b])
        path = tmp_path / "10.0.0.1@7" / "G" / "offsets.json"
        text = path.read_text()
        assert text.startswith('{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:5')
        store.update_offset(a, 6, False)
        await store.persist_all([a, b])
        assert path.with_name("offsets.json.bak").exists()
        again = LocalFileOffsetStore("10.0.0.1@7", "G", tmp_path)
        await again.load()
        assert await again.read_offset(a, ReadOffsetType.READ_FROM_MEMORY) == 6
        path.write_text("{not json")  # damaged: the backup is read
        assert await again.read_offset(a, ReadOffsetType.READ_FROM_STORE) == 5
        assert await again.read_offset(MessageQueue("T", "broker-a", 7), ReadOffsetType.READ_FROM_STORE) == -1

    asyncio.run(go())


def test_local_offset_file_written_by_java_is_read(tmp_path: Path) -> None:
    # LocalFileOffsetStore of the Java client writes pretty JSON with MessageQueue objects as keys.
    java = ('{\n\t"offsetTable":{{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":3,\n'
            '\t\t\t"topic":"TopicTest"\n\t\t}:42,{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":0,\n'
            '\t\t\t"topic":"TopicTest"\n\t\t}:7\n\t}\n}')  # fmt: skip
    target = tmp_path / "cid" / "G" / "offsets.json"
    target.parent.mkdir(parents=True)
    target.write_text(java)
    store = LocalFileOffsetStore("cid", "G", tmp_path)
    asyncio.run(store.load())
    assert store.clone_offset_table() == {MessageQueue("TopicTest", "broker-a", 3): 42,
                                          MessageQueue("TopicTest", "broker-a", 0): 7}  # fmt: skip


# -- selectors and faults -----------------------------------------------------------------------------


def test_hash_selector_uses_java_hash_codes() -> None:
    assert java_hash_code("order-1") == -1207111310
    assert java_hash_code("TagA") == 2598919
    assert java_hash_code(7) == 7 and java_hash_code(2**40) == 256
    mqs = [MessageQueue("T", "b", i) for i in range(4)]
    select = SelectMessageQueueByHash()
    assert select(mqs, new_message("T", b"x"), "TagA") == mqs[2598919 % 4]
    assert all(select(mqs, new_message("T", b"x"), "k") == select(mqs, new_message("T", b"y"), "k") for _ in range(3))


def test_fault_strategy_avoids_a_failed_broker_for_a_while() -> None:
    info = TopicPublishInfo([MessageQueue("T", b, i) for b in ("a", "b") for i in range(2)])
    strategy = MQFaultStrategy(isolation_seconds=30)
    strategy.update_fault_item("a", 0.1, True)
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(8)} == {"b"}
    strategy.update_fault_item("a", 0.01, False)  # fast again: usable
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(8)} == {"a", "b"}
    strategy.update_fault_item("b", 1.2, False)  # slow: avoided 60 s
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(8)} == {"a"}


# -- configuration and messages -----------------------------------------------------------------------


def test_name_server_address_comes_from_argument_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    monkeypatch.delenv("rocketmq.namesrv.addr", raising=False)
    with pytest.raises(ClientError, match="no name server address"):
        resolve_namesrv_addrs(None)
    monkeypatch.setenv("rocketmq.namesrv.addr", "10.0.0.3:9876")
    assert resolve_namesrv_addrs(None) == ["10.0.0.3:9876"]
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876;10.0.0.2:9876")
    assert resolve_namesrv_addrs(None) == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert resolve_namesrv_addrs("127.0.0.1:1") == ["127.0.0.1:1"]


def test_client_id() -> None:
    config = ClientConfig(client_ip="10.1.2.3", instance_name="app", unit_name="u1")
    assert config.build_client_id() == "10.1.2.3@app@u1"
    config.change_instance_name_to_pid()  # a name given is kept
    assert config.build_client_id() == "10.1.2.3@app@u1"
    # DEFAULT (a broadcasting consumer keeps it: its offset file is found by this id in the next run)
    assert ClientConfig(client_ip="10.1.2.3").build_client_id() == "10.1.2.3@DEFAULT"
    # changeInstanceNameToPID: pid#<a clock reading>, a name of each client of its own, as a 4.9.4 producer and
    # clustering consumer take at start; kept once taken
    a, b = ClientConfig(client_ip="10.1.2.3"), ClientConfig(client_ip="10.1.2.3")
    a.change_instance_name_to_pid()
    b.change_instance_name_to_pid()
    pid, _, stamp = a.build_client_id().removeprefix("10.1.2.3@").partition("#")
    assert pid == str(os.getpid()) and stamp.isdigit() and a.build_client_id() != b.build_client_id()
    name = a.instance_name
    a.change_instance_name_to_pid()
    assert a.instance_name == name


def test_new_message_properties() -> None:
    m = new_message("T", "héllo", tags="TagA", keys=["a", "b"], properties={"k": "v"}, delay_level=3)
    assert m.body == "héllo".encode()
    assert m.properties == {"TAGS": "TagA", "KEYS": "a b", "WAIT": "true", "k": "v", "DELAY": "3"}
    with pytest.raises(InvalidMessageError):
        new_message("T", b"x", properties={"k": 1})  # type: ignore[dict-item]
    # Java's putUserProperty: no system name (it would change what the message is), nothing blank (lost on the way).
    for name in ("TAGS", "KEYS", "DELAY", "UNIQ_KEY", "RETRY_TOPIC", "TRAN_MSG"):
        with pytest.raises(InvalidMessageError, match=f"Property<{name}> is used by system"):
            new_message("T", b"x", properties={name: "v"})
    for blank in ({"k": ""}, {"k": "  "}, {"": "v"}):
        with pytest.raises(InvalidMessageError, match="blank"):
            new_message("T", b"x", properties=blank)
    assert new_message("T", b"x", properties={"TIMER_DELAY_MS": "1500"}).properties["TIMER_DELAY_MS"] == "1500"


def test_orderly_suspend_time_is_the_listeners_or_the_consumers_within_java_bounds() -> None:
    assert suspend_seconds(-1, 1.0) == 1.0  # -1: the consumer's own
    assert suspend_seconds(500, 1.0) == 0.5
    assert suspend_seconds(40_000, 1.0) == 30.0 and suspend_seconds(-1, 60.0) == 30.0
    assert suspend_seconds(5, 1.0) == 0.01 and suspend_seconds(-7, 1.0) == 0.01


def test_name_server_addresses_must_be_host_and_port() -> None:
    assert resolve_namesrv_addrs("127.0.0.1:9876; [::1]:9877,localhost:1") == ["127.0.0.1:9876", "[::1]:9877",
                                                                                 "localhost:1"]  # fmt: skip
    for bad in ("127.0.0.1", "127.0.0.1:x", ":9876"):
        with pytest.raises(ClientError, match="not host:port"):
            resolve_namesrv_addrs(bad)


def test_topic_and_message_checks() -> None:
    check_topic("%RETRY%G_1-x|y")
    for bad in ("", "  ", "a b", "t" * 128, "ü", "T\n"):  # a final newline too (a regex "$" lets it by)
        with pytest.raises(InvalidMessageError):
            check_topic(bad)
    with pytest.raises(InvalidMessageError, match="illegal characters"):
        check_group("G\n", "consumer")
    producer = Producer("PG", "127.0.0.1:1", max_message_size=10)
    with pytest.raises(InvalidMessageError, match="must be bytes, not str"):  # not a failed encoding later on
        producer.check_message(Message("T", "text"))  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError, match="must be bytes, not str"):  # in a batch, after a good one
        producer._make_batch([new_message("T", b"x"), Message("T", "text")])  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError, match="length is zero"):
        producer.check_message(new_message("T", b""))
    with pytest.raises(InvalidMessageError, match="over max value"):
        producer.check_message(new_message("T", b"x" * 11))
    with pytest.raises(InvalidMessageError, match="forbidden"):
        producer.check_message(new_message("SCHEDULE_TOPIC_XXXX", b"x"))
    with pytest.raises(InvalidMessageError, match="same"):
        producer._make_batch([new_message("A", b"x"), new_message("B", b"x")])
    with pytest.raises(InvalidMessageError, match="TimeDelayLevel"):
        producer._make_batch([new_message("A", b"x", delay_level=2)])
    with pytest.raises(InvalidMessageError, match="TimeDelayLevel"):
        producer._make_batch([new_message("A", b"x"), new_message("A", b"x", delay_level=1)])
    with pytest.raises(InvalidMessageError, match="length is zero"):
        producer._make_batch([new_message("A", b"x"), new_message("A", b"")])
    with pytest.raises(InvalidMessageError, match="over max value"):
        producer._make_batch([new_message("A", b"x"), new_message("A", b"x" * 11)])
    undelayed = new_message("A", b"x")
    undelayed.properties["DELAY"] = "0"  # (a user property may not be named so: see new_message)
    assert Producer("PG", "127.0.0.1:1")._make_batch([undelayed]).topic == "A"


def test_consume_timestamps() -> None:
    assert parse_consume_timestamp(1234) == 1234
    assert parse_consume_timestamp(dt.datetime(2024, 1, 2, tzinfo=dt.UTC)) == 1704153600000
    local = dt.datetime(2024, 1, 2, 3, 4, 5).timestamp() * 1000
    assert parse_consume_timestamp("20240102030405") == int(local)
    with pytest.raises(InvalidMessageError):
        parse_consume_timestamp("yesterday")


def test_errors_say_what_went_wrong() -> None:
    busy = broker_error(ResponseCode.SYSTEM_BUSY, "[REJECTREQUEST]system busy", "10.0.0.1:10911")
    assert isinstance(busy, BrokerBusyError)
    assert str(busy) == "SYSTEM_BUSY (2) from 10.0.0.1:10911: [REJECTREQUEST]system busy"
    assert isinstance(broker_error(ResponseCode.TOPIC_NOT_EXIST, "x"), BrokerError)
    assert "no route info for topic 'T'" in str(NoRouteError("T"))


def test_blocking_clients_refuse_misuse() -> None:
    from rocketq.client.blocking import BlockingProducer, _LoopThread

    producer = BlockingProducer("PG", "127.0.0.1:1")
    with pytest.raises(RuntimeError, match="not started"):
        producer.send(new_message("T", b"x"))
    loop = _LoopThread.acquire()
    try:
        async def inside() -> None:
            async def nothing() -> None:
                return None

            loop.run(nothing())  # a blocking call on the loop's own thread would deadlock

        with pytest.raises(RuntimeError, match="event loop thread"):
            loop.run(inside())
    finally:
        _LoopThread.release()
    assert _LoopThread._current is None  # the last user stopped the loop thread


def test_consumer_stats_rates_cover_a_minute_failed_messages_an_hour(monkeypatch: pytest.MonkeyPatch) -> None:
    from rocketq.client import running_info

    now = [1_000_000.0]
    monkeypatch.setattr(running_info.time, "time", lambda: now[0])
    stats = running_info.ConsumerStatsManager()
    stats.pulled("G", "T", 10.0, 32)
    stats.pulled("G", "T", 30.0, 0)
    stats.consumed("G", "T", 4.0, 30, 6)
    s = stats.consume_status("G", "T")
    assert (s.pull_rt, s.pull_tps, s.consume_ok_tps, s.consume_failed_tps) == (20.0, 32 / 60, 0.5, 0.1)
    assert (s.consume_rt, s.consume_failed_msgs) == (4.0, 6)
    assert stats.consume_status("G", "Other") == running_info.ConsumeStatus()
    now[0] += 61  # past the minute: rates fall to zero, failures still count for the hour
    s = stats.consume_status("G", "T")
    assert (s.pull_rt, s.pull_tps, s.consume_ok_tps, s.consume_failed_msgs) == (0.0, 0.0, 0.0, 6)
    now[0] += 3600
    stats.consumed("G", "T", None, 1, 1)  # a new bucket drops those older than an hour
    assert stats.consume_status("G", "T").consume_failed_msgs == 1
    info = running_info.ConsumerRunningInfo(status_table={"T": s})
    from rocketq.common import json_compat

    body = json_compat.loads(json_compat.dumps_bytes(info))
    assert set(body["statusTable"]["T"]) == {"pullRT", "pullTPS", "consumeRT", "consumeOKTPS", "consumeFailedTPS",
                                             "consumeFailedMsgs"}  # Java's member names


def test_consume_message_directly_reports_each_listener_outcome() -> None:
    """CONSUME_MESSAGE_DIRECTLY's answers for an orderly and a concurrent listener: the status, the retry topic
    reset, the orderly context's autoCommit, an exception's text."""
    import types

    from rocketq.client.consume_concurrently import ConsumeMessageConcurrentlyService
    from rocketq.client.consume_orderly import ConsumeMessageOrderlyService
    from rocketq.client.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
    from rocketq.common.message import MessageExt

    consumer = types.SimpleNamespace(retry_topic="%RETRY%G", consume_message_batch_max_size=1, consume_thread_nums=1)
    seen: list[tuple[str, str]] = []

    async def orderly(msgs: list[MessageExt], context: Any) -> Any:
        seen.append((msgs[0].topic, context.message_queue.broker_name))
        body = msgs[0].body
        if body == b"boom":
            raise ValueError("no way")
        if body == b"manual":
            context.auto_commit = False
            return ConsumeOrderlyStatus.COMMIT
        return {b"ok": None, b"wait": ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, b"f": False}[body]

    async def concurrently(msgs: list[MessageExt], context: Any) -> Any:
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if msgs[0].body == b"later" else True

    async def scenario() -> None:
        o = ConsumeMessageOrderlyService(consumer, orderly)  # type: ignore[arg-type]
        c = ConsumeMessageConcurrentlyService(consumer, concurrently)  # type: ignore[arg-type]
        retried = MessageExt("%RETRY%G", b"ok", properties={"RETRY_TOPIC": "Orig"})
        r = await o.consume_message_directly(retried, "broker-a")
        assert (r.consume_result, r.order, r.auto_commit) == ("CR_SUCCESS", True, True)
        assert seen == [("Orig", "broker-a")]
        outcomes = {b: (await o.consume_message_directly(MessageExt("T", b), "b")) for b in
                    (b"wait", b"f", b"manual", b"boom")}  # fmt: skip
        assert {b: r.consume_result for b, r in outcomes.items()} == {
            b"wait": "CR_LATER", b"f": "CR_LATER", b"manual": "CR_COMMIT", b"boom": "CR_THROW_EXCEPTION"}
        assert outcomes[b"manual"].auto_commit is False and outcomes[b"boom"].remark == "ValueError: no way"
        assert (await c.consume_message_directly(MessageExt("T", b"later"), "b")).consume_result == "CR_LATER"
        ok = await c.consume_message_directly(MessageExt("T", b"x"), "b")
        assert (ok.consume_result, ok.order, ok.spent_time_mills >= 0) == ("CR_SUCCESS", False, True)

    asyncio.run(scenario())


def test_log_failure_gives_a_client_error_one_line_and_a_bug_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("rocketq.client.test")
    with caplog.at_level(logging.WARNING, logger="rocketq.client.test"):
        log_failure(log, BrokerUnreachableError("connect to 127.0.0.1:1 failed: connection refused"),
                    "%s: persisting offsets of %s", "client-1", "G")  # fmt: skip
        try:
            raise KeyError("a bug")
        except KeyError as exc:
            log_failure(log, exc, "%s: rebalance of %s", "client-1", "G")
    (down, bug) = caplog.records
    assert down.levelno == logging.WARNING and down.exc_info is None
    assert down.getMessage() == ("client-1: persisting offsets of G failed: connect to 127.0.0.1:1 failed: "
                                 "connection refused")  # fmt: skip
    assert bug.levelno == logging.ERROR and bug.getMessage() == "client-1: rebalance of G failed"
    assert bug.exc_info is not None and bug.exc_info[0] is KeyError

