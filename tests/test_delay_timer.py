"""Timer messages (an arbitrary due time, as RocketMQ 5.x accepts it): the put hook's rules, the persisted
progress (``config/timerOffset.json``), delivery through the broker and across restarts."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from broker_support import client_of, props, run, running_broker, send_v2, settle
from rocketq.broker.broker_controller import BrokerController
from rocketq.broker.timer_message_service import (
    TIMER_TOPIC,
    TimerOffsetManager,
    convert_message,
    transform_timer_message,
)
from rocketq.common.codec import decode_record
from rocketq.common.message import TRANSACTION_PREPARED_TYPE, MessageExt, string_to_properties
from rocketq.remoting.codes import ResponseCode
from rocketq.store.commit_log import PutMessageStatus

NOW = 1_800_000_000_123


def _msg(**properties: str) -> MessageExt:
    return MessageExt(topic="T", body=b"b", properties=dict(properties), queue_id=2)


def test_transform_parks_timer_messages_as_5x_does() -> None:
    m = _msg(TAGS="a", TIMER_DELIVER_MS=str(NOW + 5000))
    assert transform_timer_message(m, now=NOW) is None
    assert (m.topic, m.queue_id) == (TIMER_TOPIC, 0)
    assert m.properties["TIMER_OUT_MS"] == str((NOW + 5000) // 1000 * 1000)
    assert m.properties["REAL_TOPIC"] == "T" and m.properties["REAL_QID"] == "2"
    assert m.properties["TIMER_DELIVER_MS"] == str(NOW + 5000) and m.properties_bytes is None
    # Precedence: TIMER_DELAY_SEC, then TIMER_DELAY_MS, then TIMER_DELIVER_MS, then __STARTDELIVERTIME.
    m = _msg(TIMER_DELAY_SEC="3", TIMER_DELAY_MS="10000", TIMER_DELIVER_MS="1")
    transform_timer_message(m, now=NOW)
    assert m.properties["TIMER_OUT_MS"] == str((NOW + 3000) // 1000 * 1000)
    m = _msg(TIMER_DELAY_MS="2500")
    transform_timer_message(m, now=NOW)
    assert m.properties["TIMER_OUT_MS"] == str((NOW + 2500) // 1000 * 1000)
    m = _msg(__STARTDELIVERTIME=str(NOW + 7000))
    transform_timer_message(m, now=NOW, precision_ms=100)
    assert m.properties["TIMER_OUT_MS"] == str((NOW + 7000) // 100 * 100)
    # An exact multiple of the precision goes one step lower (5.x).
    m = _msg(TIMER_DELIVER_MS=str(1_800_000_010_000))
    transform_timer_message(m, now=NOW)
    assert m.properties["TIMER_OUT_MS"] == str(1_800_000_009_000)


def test_transform_leaves_other_messages_alone_or_refuses() -> None:
    past = _msg(TIMER_DELIVER_MS=str(NOW - 1))
    assert transform_timer_message(past, now=NOW) is None and past.topic == "T"
    plain = _msg(TAGS="x")
    assert transform_timer_message(plain, now=NOW) is None and plain.topic == "T"
    delayed = _msg(DELAY="2", TIMER_DELIVER_MS=str(NOW + 5000), TIMER_DELAY_SEC="4", TIMER_DELAY_MS="9")
    assert transform_timer_message(delayed, now=NOW) is None
    assert delayed.topic == "T" and delayed.properties == {"DELAY": "2"}
    delivered = _msg(TIMER_DELIVER_MS=str(NOW + 5000), TIMER_OUT_MS=str(NOW + 4000))
    assert transform_timer_message(delivered, now=NOW) is None and delivered.topic == "T"
    half = _msg(TIMER_DELIVER_MS=str(NOW + 5000))
    half.sys_flag = TRANSACTION_PREPARED_TYPE
    assert transform_timer_message(half, now=NOW) is None and half.topic == "T"
    too_far = _msg(TIMER_DELAY_SEC=str(3 * 86400 + 1))
    refused = transform_timer_message(too_far, now=NOW)
    assert refused is not None and refused.status is PutMessageStatus.MESSAGE_ILLEGAL
    bad = transform_timer_message(_msg(TIMER_DELIVER_MS="soon"), now=NOW)
    assert bad is not None and bad.status is PutMessageStatus.MESSAGE_ILLEGAL
    off = transform_timer_message(_msg(TIMER_DELAY_SEC="5"), now=NOW, enabled=False)
    assert off is not None and off.status is PutMessageStatus.MESSAGE_ILLEGAL


def test_convert_keeps_the_stored_string_and_clears_the_map() -> None:
    parked = _msg(TAGS="a", TIMER_DELIVER_MS=str(NOW + 5000), UNIQ_KEY="U")
    transform_timer_message(parked, now=NOW)
    parked.store_timestamp = NOW + 3
    out = convert_message(parked, NOW + 5001)
    assert (out.topic, out.queue_id) == ("T", 2)
    stored = string_to_properties((out.properties_bytes or b"").decode())
    assert stored["REAL_TOPIC"] == "T" and stored["REAL_QID"] == "2" and stored["TIMER_OUT_MS"]
    assert stored["TIMER_ENQUEUE_MS"] == str(NOW + 3) and stored["TIMER_DEQUEUE_MS"] == str(NOW + 5001)
    assert "REAL_TOPIC" not in out.properties and "TIMER_OUT_MS" in out.properties
    assert transform_timer_message(out, now=NOW) is None and out.topic == "T"  # not parked again


def test_timer_offsets_ranges_and_file(tmp_path: Path) -> None:
    offsets = TimerOffsetManager(tmp_path)
    for o in (3, 5, 4, 9, 1, 7):
        offsets.mark_done(o)
    assert offsets.cursor == 0 and offsets.done_ranges == [(1, 2), (3, 6), (7, 8), (9, 10)]
    assert offsets.is_done(4) and not offsets.is_done(6) and not offsets.is_done(0)
    offsets.mark_done(0)
    assert offsets.cursor == 2 and offsets.done_ranges == [(3, 6), (7, 8), (9, 10)]
    offsets.mark_done(2)
    offsets.mark_done(6)
    assert offsets.cursor == 8 and offsets.done_ranges == [(9, 10)]
    offsets.persist()
    text = (tmp_path / "config" / "timerOffset.json").read_text()
    assert '"cursor":8' in text
    again = TimerOffsetManager(tmp_path)
    assert again.load() and again.cursor == 8 and again.done_ranges == [(9, 10)]
    again.reset(20)
    assert again.cursor == 20 and again.done_ranges == []


async def _pull_all(broker: BrokerController, topic: str, queue_id: int = 0) -> list[MessageExt]:
    result = broker.store.get_message("test", topic, queue_id, 0, 64)
    return [decode_record(m) for m in result.messages]


async def _wait_count(broker: BrokerController, topic: str, count: int, timeout: float) -> float:
    t0 = time.monotonic()
    while broker.store.get_max_offset_in_queue(topic, 0) < count:
        assert time.monotonic() - t0 < timeout, f"{topic} has not reached {count} messages in {timeout} s"
        await asyncio.sleep(0.02)
    return time.monotonic() - t0


def test_timer_messages_through_the_broker_and_a_restart(tmp_path: Path) -> None:
    store = tmp_path / "s"
    conf = {"flushDelayOffsetInterval": "600000", "timerPrecisionMs": "100"}

    async def first() -> None:
        async with running_broker(store, **conf) as broker, client_of(broker) as client:
            now = int(time.time() * 1000)
            sends = [
                props(TAGS="a", TIMER_DELIVER_MS=str(now + 800)),
                props(TAGS="b", TIMER_DELAY_MS="900"),
                props(TAGS="c", TIMER_DELAY_SEC="1"),
                props(TAGS="d", __STARTDELIVERTIME=str(now + 4000)),
                props(TAGS="e", TIMER_DELAY_SEC="5"),
            ]
            for i, p in enumerate(sends):
                r = await client.invoke(send_v2("Timed", f"t{i}".encode(), properties=p, queue_id=1))
                assert r.code == ResponseCode.SUCCESS, r.remark
            r = await client.invoke(send_v2("Timed", b"bad", properties=props(TIMER_DELAY_SEC=str(10**7))))
            assert r.code == ResponseCode.MESSAGE_ILLEGAL
            await settle(broker)
            assert broker.store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 5
            assert broker.store.get_max_offset_in_queue("Timed", 1) == 0
            waited = await _wait_count_q(broker, "Timed", 1, 3, 4)
            assert waited < 2.0
            got = await _pull_all(broker, "Timed", 1)
            assert sorted(m.body for m in got) == [b"t0", b"t1", b"t2"]
            for m in got:
                assert m.properties["REAL_TOPIC"] == "Timed" and m.properties["REAL_QID"] == "1"
                assert int(m.properties["TIMER_DEQUEUE_MS"]) >= int(m.properties["TIMER_OUT_MS"])
                assert m.store_timestamp >= int(m.properties["TIMER_OUT_MS"])
            assert broker.timer_message_service.pending == 2
        offsets = TimerOffsetManager(store)
        assert offsets.load() and offsets.cursor == 3 and offsets.done_ranges == []

    async def second() -> None:
        async with running_broker(store, **conf) as broker:
            assert broker.timer_message_service.offsets.cursor == 3
            await _wait_count_q(broker, "Timed", 1, 5, 6)
            await asyncio.sleep(0.3)
            got = await _pull_all(broker, "Timed", 1)
            assert sorted(m.body for m in got) == [b"t0", b"t1", b"t2", b"t3", b"t4"]
            late = {m.body: m for m in got}[b"t3"]
            assert late.store_timestamp >= int(late.properties["__STARTDELIVERTIME"]) - 100

    run(first())
    run(second())


async def _wait_count_q(broker: BrokerController, topic: str, queue_id: int, count: int, timeout: float) -> float:
    t0 = time.monotonic()
    while broker.store.get_max_offset_in_queue(topic, queue_id) < count:
        assert time.monotonic() - t0 < timeout, f"{topic}/{queue_id} has not reached {count} messages in {timeout} s"
        await asyncio.sleep(0.02)
    return time.monotonic() - t0


@pytest.mark.parametrize("order", ["far-first", "near-first"])
def test_out_of_order_due_times_survive_a_restart_exactly_once(tmp_path: Path, order: str) -> None:
    """A far message before near ones: the near ones are delivered past it, recorded as ranges, and not again
    after a restart; the far one comes after the restart."""
    store = tmp_path / "s"
    conf = {"flushDelayOffsetInterval": "600000", "timerPrecisionMs": "100"}
    delays = [3000, 300, 400, 500] if order == "far-first" else [300, 400, 3000, 500]

    async def first() -> None:
        async with running_broker(store, **conf) as broker, client_of(broker) as client:
            for i, d in enumerate(delays):
                await client.invoke(send_v2("O", f"o{i}".encode(), properties=props(TIMER_DELAY_MS=str(d))))
            await _wait_count(broker, "O", 3, 3)
            await asyncio.sleep(0.1)
            assert broker.store.get_max_offset_in_queue("O", 0) == 3

    async def second() -> None:
        async with running_broker(store, **conf) as broker:
            await _wait_count(broker, "O", 4, 5)
            await asyncio.sleep(0.3)
            got = await _pull_all(broker, "O")
            assert sorted(m.body for m in got) == [b"o0", b"o1", b"o2", b"o3"]
            assert broker.timer_message_service.offsets.cursor == 4

    run(first())
    run(second())
