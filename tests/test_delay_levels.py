"""Delay levels through the broker: the golden store's parked messages delivered again by rocketq and compared
with the copies RocketMQ 4.9.4 wrote, delivery order and timing, ``delayOffset.json`` across restarts, and
consumer retries through the levels (store-format §9.1, §9.2; remoting-protocol §6.7, §11.5)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from broker_support import client_of, decode_records, props, pull_request, run, running_broker, send_v2, settle
from conftest import copy_store
from rocketq.broker.broker_controller import BrokerController
from rocketq.common import json_compat
from rocketq.common.codec import decode_record
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import MessageExt
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import create_request
from rocketq.store.config_json import DelayOffsetManager

GOLDEN_CONF = {"mappedFileSizeCommitLog": str(1 << 20), "brokerName": "broker-a"}
FAST_LEVELS = "1s 2s 3s " + " ".join(["1h"] * 15)


def _golden_record(golden_clean: Path, offset: int) -> MessageExt:
    name = f"{offset // (1 << 20) * (1 << 20):020d}"
    data = (golden_clean / "store" / "commitlog" / name).read_bytes()
    return decode_record(data, offset % (1 << 20))


async def _read_queue(broker: BrokerController, topic: str, queue_id: int, start: int = 0) -> list[MessageExt]:
    result = broker.store.get_message("test", topic, queue_id, start, 64)
    return [decode_record(m) for m in result.messages]


async def _wait_queue(broker: BrokerController, topic: str, queue_id: int, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while broker.store.get_max_offset_in_queue(topic, queue_id) < count:
        assert time.monotonic() < deadline, f"{topic}/{queue_id} has not reached {count} messages in {timeout} s"
        await asyncio.sleep(0.05)


def test_golden_parked_messages_are_delivered_as_rocketmq_delivered_them(tmp_path: Path, golden_clean: Path,
                                                                         clean_dump: dict) -> None:  # fmt: skip
    """Reset the golden store's delay offsets: rocketq delivers the parked messages again, and each new copy
    has the golden copy's property bytes and fields (store time, offsets and ids aside)."""
    store = copy_store(golden_clean / "store", tmp_path / "store")
    (store / "config" / "delayOffset.json").write_text("{\n\t\"offsetTable\":{1:0,3:0\n\t}\n}")
    (store / "config" / "delayOffset.json.bak").unlink()
    records = {r["physicalOffset"]: r for r in clean_dump["records"] if r.get("type") == "MESSAGE"}
    golden_copies = {r["properties"]["UNIQ_KEY"]: r for r in records.values()
                     if r["topic"] in ("GoldenDelay", "%RETRY%GoldenConsumerGroup")}  # fmt: skip
    assert len(golden_copies) == 3

    async def scenario() -> None:
        async with running_broker(store, **GOLDEN_CONF) as broker:
            await _wait_queue(broker, "GoldenDelay", 0, 4, 10)
            await _wait_queue(broker, "%RETRY%GoldenConsumerGroup", 0, 2, 10)
            await settle(broker)
            new = await _read_queue(broker, "GoldenDelay", 0, 2) + await _read_queue(
                broker, "%RETRY%GoldenConsumerGroup", 0, 1)
            assert len(new) == 3
            for copy in new:
                golden = golden_copies[copy.uniq_key or ""]
                expected = _golden_record(golden_clean, golden["physicalOffset"])
                assert copy.properties_bytes == expected.properties_bytes
                for name in ("topic", "queue_id", "body", "flag", "sys_flag", "born_timestamp", "born_host",
                             "store_host", "reconsume_times", "prepared_transaction_offset", "store_size"):
                    assert getattr(copy, name) == getattr(expected, name), name
                # The copy's consume-queue tag code is the hash of its tag, not a due time.
                cq = broker.store.find_consume_queue(copy.topic, copy.queue_id, create=False)
                assert cq is not None
                unit = cq.get_unit(copy.queue_offset)
                assert unit is not None and unit.tags_code == java_string_hash(copy.tags or "")
            assert broker.schedule_message_service.delivered == 3
        # Shutdown persisted where each level stands.
        offsets = DelayOffsetManager(store)
        assert offsets.load()
        assert offsets.offset_table == {1: 2, 3: 1}

    run(scenario())


def test_a_parked_message_has_the_golden_property_bytes(tmp_path: Path, golden_clean: Path) -> None:
    """A delayed send as the Java producer makes it (``WAIT`` first in its map, ``DELAY`` set later): the broker
    takes ``WAIT`` out and puts it back, so the parked copy, encoded again, has ``DELAY`` before ``WAIT`` (one
    ``HashMap`` bucket), byte for byte as 4.9.4 parked the golden one."""
    golden = _golden_record(golden_clean, 472044)
    sent = {k: v for k, v in golden.properties.items() if k not in ("CLUSTER", "REAL_TOPIC", "REAL_QID")}
    sent = {"WAIT": sent.pop("WAIT"), **sent}

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", **GOLDEN_CONF) as broker, client_of(broker) as client:
            r = await client.invoke(send_v2("GoldenDelay", golden.body, queue_id=0, properties=props(**sent),
                                            g=golden.born_timestamp))  # fmt: skip
            assert r.code == ResponseCode.SUCCESS
            await _wait_queue(broker, golden.topic, golden.queue_id, 1, 10)
            (parked,) = await _read_queue(broker, golden.topic, golden.queue_id)
            assert parked.properties_bytes == golden.properties_bytes

    run(scenario())


def test_levels_deliver_when_due_and_restart_delivers_nothing_twice(tmp_path: Path) -> None:
    store = tmp_path / "s"
    conf = {"messageDelayLevel": FAST_LEVELS, "flushDelayOffsetInterval": "600000"}
    sent: dict[str, tuple[int, float]] = {}

    async def first() -> None:
        async with running_broker(store, **conf) as broker, client_of(broker) as client:
            t0 = time.monotonic()
            for i in range(6):
                level = 1 if i % 2 == 0 else 3
                r = await client.invoke(send_v2("Later", f"m{i}".encode(), properties=props(TAGS=f"T{i}",
                                                DELAY=str(level), UNIQ_KEY=f"U{i}")))  # fmt: skip
                assert r.code == ResponseCode.SUCCESS
                sent[f"m{i}"] = (level, t0)
            await settle(broker)
            # Parked: queue level-1 of SCHEDULE_TOPIC_XXXX, nothing in Later yet.
            assert broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 0) == 3
            assert broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", 2) == 3
            assert broker.store.get_max_offset_in_queue("Later", 0) == 0
            await _wait_queue(broker, "Later", 0, 3, 5)
            waited = time.monotonic() - t0
            assert 0.9 <= waited < 2.5
            got = await _read_queue(broker, "Later", 0)
            assert sorted(m.body for m in got) == [b"m0", b"m2", b"m4"]
            # The level-3 messages are still parked when the broker stops.
            assert broker.store.get_max_offset_in_queue("Later", 0) == 3
        offsets = DelayOffsetManager(store)
        assert offsets.load() and offsets.offset_table[1] == 3 and offsets.offset_table.get(3, 0) == 0

    async def second() -> None:
        async with running_broker(store, **conf) as broker:
            await _wait_queue(broker, "Later", 0, 6, 6)
            await asyncio.sleep(0.3)  # nothing more comes
            got = await _read_queue(broker, "Later", 0)
            assert sorted(m.body for m in got) == [f"m{i}".encode() for i in range(6)]
            assert len({m.uniq_key for m in got}) == 6
            for m in got:
                assert m.properties["DELAY"] == str(sent[m.body.decode()][0])
                assert m.properties["REAL_TOPIC"] == "Later" and m.properties["REAL_QID"] == "0"
                assert m.store_timestamp >= m.born_timestamp

    run(first())
    run(second())


def test_retries_go_through_the_levels_again_and_again(tmp_path: Path) -> None:
    """Send-back with delay level 0 uses level 3 + reconsumeTimes, also for a message already retried (its
    stale DELAY/REAL_TOPIC properties name the retry topic itself)."""
    levels = "1s 1s 1s 1s 1s " + " ".join(["1h"] * 13)

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", messageDelayLevel=levels) as broker, client_of(broker) as client:
            await client.invoke(send_v2("Work", b"job", properties=props(TAGS="T")))
            await settle(broker)
            msg = decode_records((await client.invoke(pull_request("G", "Work", 0, 0))).body)[0]
            for attempt in (1, 2):
                fields = {"offset": msg.commit_log_offset, "group": "G", "delayLevel": 0, "originTopic": "Work"}
                r = await client.invoke(create_request(RequestCode.CONSUMER_SEND_MSG_BACK, fields))
                assert r.code == ResponseCode.SUCCESS
                await settle(broker)
                # Parked in level 3 + (attempt - 1), queue id level - 1.
                level = 3 + attempt - 1
                assert broker.store.get_max_offset_in_queue("SCHEDULE_TOPIC_XXXX", level - 1) == 1
                assert broker.store.get_max_offset_in_queue("%RETRY%G", 0) == attempt - 1
                await _wait_queue(broker, "%RETRY%G", 0, attempt, 5)
                msg = (await _read_queue(broker, "%RETRY%G", 0, attempt - 1))[0]
                assert msg.reconsume_times == attempt and msg.body == b"job"
                assert msg.properties["DELAY"] == str(level) and msg.properties["RETRY_TOPIC"] == "Work"

    run(scenario())


def test_a_delayed_message_reaches_its_queue_after_its_topic_shrank_or_went_away(tmp_path: Path) -> None:
    """As 4.9.4's: a delayed message is delivered to the queue it was sent to, whatever its topic's config says by
    then (shrunk, or deleted): the store takes any queue of a broker's deliveries (the broker checked the send).
    Refused, it was lost; and a deleted topic was not made again by the delivery."""

    async def update_topic(client, topic: str, queues: int) -> None:  # type: ignore[no-untyped-def]
        r = await client.invoke(create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues,
            "perm": 6, "topicFilterType": "SINGLE_TAG"}))  # fmt: skip
        assert r.code == ResponseCode.SUCCESS

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", messageDelayLevel=FAST_LEVELS, autoCreateTopicEnable="false",
                                  ) as broker, client_of(broker) as client:  # fmt: skip
            await update_topic(client, "Shrinks", 4)
            await update_topic(client, "Goes", 4)
            for topic in ("Shrinks", "Goes"):
                r = await client.invoke(send_v2(topic, b"later", queue_id=3, properties=props(DELAY="2")))
                assert r.code == ResponseCode.SUCCESS
            await update_topic(client, "Shrinks", 1)
            r = await client.invoke(create_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Goes"}))
            assert r.code == ResponseCode.SUCCESS
            await _wait_queue(broker, "Shrinks", 3, 1, 10)
            await _wait_queue(broker, "Goes", 3, 1, 10)
            assert [m.body for m in await _read_queue(broker, "Shrinks", 3)] == [b"later"]
            assert broker.topic_config_manager.select_topic_config("Goes") is None  # not made again
            # brokerStatus shows each level's delivered and parked offsets (buildRunningStats)
            info = await client.invoke(create_request(RequestCode.GET_BROKER_RUNTIME_INFO))
            table = json_compat.loads(info.body or b"")["table"]
            assert table["scheduleMessageOffset_2"] == "2,2" and "scheduleMessageOffset_1" not in table

    run(scenario())


def test_delay_offsets_are_persisted_every_interval(tmp_path: Path) -> None:
    store = tmp_path / "s"

    async def scenario() -> None:
        async with running_broker(store, messageDelayLevel=FAST_LEVELS, flushDelayOffsetInterval="200") as broker, \
                client_of(broker) as client:  # fmt: skip
            await client.invoke(send_v2("P", b"x", properties=props(DELAY="1")))
            await _wait_queue(broker, "P", 0, 1, 5)
            deadline = time.monotonic() + 3
            while True:
                offsets = DelayOffsetManager(store)
                if offsets.load() and offsets.offset_table.get(1) == 1:
                    break
                assert time.monotonic() < deadline, "delayOffset.json was not written within 3 s"
                await asyncio.sleep(0.05)

    run(scenario())


def test_offsets_outside_the_queue_are_corrected(tmp_path: Path) -> None:
    store = tmp_path / "s"

    async def fill() -> None:
        async with running_broker(store, messageDelayLevel=FAST_LEVELS) as broker, client_of(broker) as client:
            await client.invoke(send_v2("C", b"x", properties=props(DELAY="2")))
            await _wait_queue(broker, "C", 0, 1, 5)

    async def reopen() -> None:
        async with running_broker(store, messageDelayLevel=FAST_LEVELS) as broker:
            assert broker.store.delay_offset_manager.offset_table[2] == 1
            await asyncio.sleep(0.2)
            assert broker.store.get_max_offset_in_queue("C", 0) == 1

    run(fill())
    (store / "config" / "delayOffset.json").write_text("{\n\t\"offsetTable\":{2:99\n\t}\n}")
    run(reopen())


def test_a_delay_that_is_not_an_integer_is_refused(tmp_path: Path) -> None:
    """4.9.4 reads ``DELAY`` with ``Integer.parseInt`` and the put fails where that throws; the message was stored
    undelayed (delivered at once) before. The refusal names the property; nothing is stored."""

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", messageDelayLevel=FAST_LEVELS) as broker, \
                client_of(broker) as client:  # fmt: skip
            for bad in ("abc", "1_0", " 2", "99999999999"):
                r = await client.invoke(send_v2("BadDelay", b"x", queue_id=0, properties=props(DELAY=bad)))
                assert r.code == ResponseCode.MESSAGE_ILLEGAL, (bad, r.code, r.remark)
                assert "property DELAY" in (r.remark or "") and repr(bad) in (r.remark or "")
            assert broker.store.get_max_phy_offset() == 0
            for fine in ("0", "-3", "+1"):  # no delay, no delay, level 1
                r = await client.invoke(send_v2("BadDelay", f"d{fine}".encode(), queue_id=0,
                                                properties=props(DELAY=fine)))  # fmt: skip
                assert r.code == ResponseCode.SUCCESS, (fine, r.remark)
            await _wait_queue(broker, "BadDelay", 0, 3, 10)
            assert sorted(m.body for m in await _read_queue(broker, "BadDelay", 0)) == [b"d+1", b"d-3", b"d0"]

    run(scenario())
