"""When delayed and timer messages are delivered, and how fast a consumer hears of it: the delivery threads'
sleep until the next due time (woken early only by a message due sooner), the restoring step the delay levels
and the timer share, and the wake-up of a held pull."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from broker_support import client_of, props, run, running_broker, send_v2, settle
from rocketq.broker import delayed_delivery
from rocketq.broker.broker_controller import BrokerController
from rocketq.broker.delayed_delivery import DueTimeWakeup, now_ms, restore_real_message
from rocketq.broker.expression_message_filter import ExpressionMessageFilter
from rocketq.broker.pull_request_hold_service import PullRequestHoldService, WakeReason
from rocketq.broker.schedule_message_service import message_time_up
from rocketq.broker.timer_message_service import TIMER_TOPIC
from rocketq.common.heartbeat import build_subscription_data
from rocketq.common.message import MessageExt, properties_to_string, string_to_properties
from rocketq.remoting.codes import ResponseCode
from rocketq.store.commit_log import PutMessageResult, PutMessageStatus

FAST_LEVELS = "1s 2s 3s " + " ".join(["1h"] * 15)


# --- the sleep of a delivery thread -------------------------------------------------------------------------
def _sleeper(wakeup: DueTimeWakeup, until_ms: float | None) -> tuple[threading.Thread, list[float]]:
    took: list[float] = []

    def sleep() -> None:
        t0 = time.monotonic()
        wakeup.sleep(until_ms)
        took.append(time.monotonic() - t0)

    thread = threading.Thread(target=sleep, daemon=True)
    thread.start()
    return thread, took


def test_a_thread_sleeps_until_its_due_time_and_only_sooner_arrivals_wake_it() -> None:
    wakeup = DueTimeWakeup()
    wakeup.awake()
    thread, took = _sleeper(wakeup, now_ms() + 3000)
    time.sleep(0.1)
    wakeup.arrived(now_ms() + 5000)  # due later than what the thread waits for: it sleeps on
    wakeup.arrived(now_ms() + 3000)
    thread.join(0.3)
    assert thread.is_alive()
    wakeup.arrived(now_ms() + 100)  # due sooner: the thread looks again now
    thread.join(2.0)
    assert not thread.is_alive() and took[0] < 1.0


def test_an_arrival_while_the_thread_is_awake_cuts_its_next_sleep_short() -> None:
    """The thread may have read its queue before the message came: its next sleep must not miss it."""
    wakeup = DueTimeWakeup()
    wakeup.awake()
    wakeup.arrived(now_ms() + 10_000)  # arrives between the read and the sleep
    t0 = time.monotonic()
    wakeup.sleep(now_ms() + 5000)
    assert time.monotonic() - t0 < 0.5


def test_an_idle_thread_is_woken_by_any_arrival(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delayed_delivery, "IDLE_CHECK_S", 30.0)
    wakeup = DueTimeWakeup()
    wakeup.awake()
    thread, took = _sleeper(wakeup, None)
    time.sleep(0.1)
    assert thread.is_alive()
    wakeup.arrived(now_ms() + 3_600_000)
    thread.join(2.0)
    assert not thread.is_alive() and took[0] < 1.0


# --- the restoring step both services share ------------------------------------------------------------------
def _parked(**properties: str) -> MessageExt:
    text = properties_to_string(properties)
    return MessageExt(topic="SCHEDULE_TOPIC_XXXX", body=b"b", flag=3, properties=dict(properties), queue_id=1,
                      sys_flag=0, born_timestamp=11, born_host=("10.0.0.1", 5), store_host=("10.0.0.2", 6),
                      reconsume_times=2, store_timestamp=1_800_000_000_000,
                      properties_bytes=text.encode())  # fmt: skip


def test_restoring_keeps_or_builds_the_string_and_hides_names_from_the_map_only() -> None:
    parked = _parked(TAGS="t", DELAY="2", REAL_TOPIC="Orders", REAL_QID="3", UNIQ_KEY="U")
    plain = restore_real_message(parked, hide=("DELAY",))
    assert (plain.topic, plain.queue_id) == ("Orders", 3)
    assert plain.properties_bytes == parked.properties_bytes  # nothing added: the stored string as it is
    assert "DELAY" not in plain.properties and plain.properties["REAL_TOPIC"] == "Orders"
    for name in ("body", "flag", "sys_flag", "born_timestamp", "born_host", "store_host", "reconsume_times"):
        assert getattr(plain, name) == getattr(parked, name), name
    added = restore_real_message(parked, add={"X": "1"}, hide=("REAL_TOPIC", "REAL_QID"))
    stored = string_to_properties((added.properties_bytes or b"").decode())
    assert stored["X"] == "1" and stored["REAL_TOPIC"] == "Orders" and stored["DELAY"] == "2"
    assert (added.topic, added.queue_id) == ("Orders", 3)
    assert "REAL_TOPIC" not in added.properties and "REAL_QID" not in added.properties
    assert parked.properties["REAL_TOPIC"] == "Orders"  # the parked message is not changed


def test_a_delay_level_copy_is_not_parked_again_by_a_timer_property(tmp_path: Path) -> None:
    """``DELAY`` wins over a due time; the delivered copy's map has neither, so the copy is delivered once."""
    parked = _parked(DELAY="1", REAL_TOPIC="T", REAL_QID="0", __STARTDELIVERTIME=str(now_ms() + 3_600_000))
    copy = message_time_up(parked)
    assert "__STARTDELIVERTIME" not in copy.properties and "DELAY" not in copy.properties

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", messageDelayLevel=FAST_LEVELS) as broker, \
                client_of(broker) as client:  # fmt: skip
            later = str(now_ms() + 3_600_000)
            r = await client.invoke(send_v2("T", b"x", properties=props(DELAY="1", __STARTDELIVERTIME=later)))
            assert r.code == ResponseCode.SUCCESS
            deadline = time.monotonic() + 5
            while broker.store.get_max_offset_in_queue("T", 0) < 1:
                assert time.monotonic() < deadline, "the delayed message was not delivered"
                await asyncio.sleep(0.02)
            assert broker.store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 0

    run(scenario())


# --- the services, through a broker ------------------------------------------------------------------------
async def _wait_count(broker: BrokerController, topic: str, count: int, timeout: float) -> float:
    t0 = time.monotonic()
    while broker.store.get_max_offset_in_queue(topic, 0) < count:
        assert time.monotonic() - t0 < timeout, f"{topic} has not reached {count} messages in {timeout} s"
        await asyncio.sleep(0.01)
    return time.monotonic() - t0


def test_a_timer_message_due_soon_is_delivered_on_time_while_one_due_later_waits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(delayed_delivery, "IDLE_CHECK_S", 30.0)  # no periodic look: only arrivals wake the thread
    conf = {"timerPrecisionMs": "10"}

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", **conf) as broker, client_of(broker) as client:
            await asyncio.sleep(0.2)  # the timer thread is idle
            await client.invoke(send_v2("Far", b"far", properties=props(TIMER_DELAY_MS="4000")))
            deadline = time.monotonic() + 2
            while broker.timer_message_service.pending < 1:  # woken by the arrival, it now waits for the far one
                assert time.monotonic() < deadline, "the timer thread did not take the far message"
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)
            t0 = time.monotonic()
            await client.invoke(send_v2("Near", b"near", properties=props(TIMER_DELAY_MS="300")))
            await _wait_count(broker, "Near", 1, 3.0)
            assert time.monotonic() - t0 < 1.0  # not when the far one is due
            assert broker.store.get_max_offset_in_queue("Far", 0) == 0
            assert broker.timer_message_service.pending == 1

    run(scenario())


def test_the_timer_takes_arrivals_without_reading_them_back(tmp_path: Path) -> None:
    """The arrival listener hands the timer each message's due time: its thread reads a parked record once, to
    deliver it (reading every record parked while it slept, when it wakes, would make the delivery late)."""

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", timerPrecisionMs="100") as broker, client_of(broker) as client:
            look = broker.store.look_message_by_offset
            reads = {"timer": 0}

            def counting(phys: int, size: int) -> MessageExt | None:
                if threading.current_thread().name == "TimerMessageDelivery":
                    reads["timer"] += 1
                return look(phys, size)

            broker.store.look_message_by_offset = counting  # type: ignore[method-assign]
            for i in range(40):
                await client.invoke(send_v2("Many", f"m{i}".encode(), properties=props(TIMER_DELAY_MS="1500")))
            await _wait_count(broker, "Many", 40, 6.0)
            assert reads["timer"] == 40

    run(scenario())


def test_an_idle_level_is_woken_by_its_first_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delayed_delivery, "IDLE_CHECK_S", 30.0)  # no periodic look: only the arrival wakes it

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", messageDelayLevel=FAST_LEVELS) as broker, \
                client_of(broker) as client:  # fmt: skip
            await asyncio.sleep(0.3)  # the level threads are idle
            t0 = time.monotonic()
            await client.invoke(send_v2("Soon", b"x", properties=props(DELAY="1")))
            await _wait_count(broker, "Soon", 1, 5.0)
            assert 0.9 <= time.monotonic() - t0 < 1.8

    run(scenario())


def test_a_level_is_not_woken_by_messages_due_after_its_head(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", messageDelayLevel=FAST_LEVELS) as broker, \
                client_of(broker) as client:  # fmt: skip
            service = broker.schedule_message_service
            rounds = {3: 0}
            deliver_due = service._deliver_due

            def counting(level: int) -> float | None:
                rounds[level] = rounds.get(level, 0) + 1
                return deliver_due(level)

            service._deliver_due = counting  # type: ignore[method-assign]
            await client.invoke(send_v2("L3", b"head", properties=props(DELAY="3")))
            await settle(broker)
            await asyncio.sleep(0.1)
            before = rounds[3]
            for i in range(20):
                await client.invoke(send_v2("L3", f"m{i}".encode(), properties=props(DELAY="3")))
            await settle(broker)
            await asyncio.sleep(0.1)
            assert rounds[3] - before <= 1  # not a round per message
            await _wait_count(broker, "L3", 21, 6.0)

    run(scenario())


@pytest.mark.parametrize("kind", ["delay level", "timer"])
def test_a_refused_delivery_is_tried_again_soon_and_delivered_once(tmp_path: Path, kind: str) -> None:
    """Java tries a refused put again after 100 ms (delay levels) or half the timer precision (5.x timer), not
    after DELAY_FOR_A_PERIOD (10 s)."""
    conf = {"messageDelayLevel": FAST_LEVELS, "timerPrecisionMs": "100"}

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", **conf) as broker, client_of(broker) as client:
            put = broker.put_message_sync
            refused: list[float] = []

            def refuse_first(msg: MessageExt) -> PutMessageResult:
                if msg.topic == "R" and not refused:
                    refused.append(time.monotonic())
                    return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error="refused by the test")
                return put(msg)

            broker.put_message_sync = refuse_first  # type: ignore[method-assign]
            p = props(DELAY="1") if kind == "delay level" else props(TIMER_DELAY_MS="1000")
            await client.invoke(send_v2("R", b"x", properties=p))
            await _wait_count(broker, "R", 1, 5.0)
            assert refused and time.monotonic() - refused[0] < 1.0
            await asyncio.sleep(0.3)
            assert broker.store.get_max_offset_in_queue("R", 0) == 1

    run(scenario())


# --- the held pull ------------------------------------------------------------------------------------------
class _Conn:
    closed = False


def test_a_woken_pull_resumes_on_the_next_loop_iteration() -> None:
    """On a busy broker each hop through the event loop costs a whole iteration: a woken pull takes one."""

    async def scenario() -> None:
        max_offset = [0]  # the queue is empty when the pull is held, then one message arrives
        hold = PullRequestHoldService(lambda _topic, _queue: max_offset[0])
        flt = ExpressionMessageFilter(build_subscription_data("T", "*", "TAG", 0))
        held = asyncio.ensure_future(hold.suspend(_Conn(), "T", 0, 0, flt, 30.0))  # type: ignore[arg-type]
        while not hold.held_count:
            await asyncio.sleep(0)
        max_offset[0] = 1
        hold.notify_message_arriving("T", 0, 1)
        await asyncio.sleep(0)
        assert held.done() and held.result() == WakeReason.ARRIVED
        assert hold.held_count == 0
        # And the suspend time still ends it.
        reason = await hold.suspend(_Conn(), "T", 0, 1, flt, 0.05)  # type: ignore[arg-type]
        assert reason == WakeReason.TIMEOUT and hold.held_count == 0

    run(scenario())
