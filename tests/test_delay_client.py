"""Delayed and timer messages sent by the Python client and consumed by its push consumer (rocketq's name server
and broker on the same loop, 127.0.0.1, free ports), with retries coming back through the delay levels, and a
broker restart while messages are parked."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from broker_support import run
from rocketq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageExt,
    Producer,
    PushConsumer,
    new_message,
)
from test_transaction_client import config, servers, stored, until

LEVELS = "1s 1s 1s 1s 2s " + " ".join(["1h"] * 13)


def test_delayed_timer_and_retried_messages_reach_a_push_consumer(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with servers(tmp_path, message_delay_level=LEVELS, timer_precision_ms=100) as s:
            got: list[tuple[bytes, int, float]] = []

            async def listener(msgs: list[MessageExt], context: Any) -> ConsumeConcurrentlyStatus:
                for m in msgs:
                    got.append((m.body, m.reconsume_times, time.monotonic()))
                if any(m.body == b"retry-me" and m.reconsume_times < 2 for m in msgs):
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            async with Producer("DelayPG", config=config(s)) as producer:
                await producer.create_topic("DelayT", 2)
                consumer = PushConsumer("DelayCG", config=config(s).copy(rebalance_interval=0.5), listener=listener,
                                        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
                consumer.subscribe("DelayT")
                async with consumer:
                    t0 = time.monotonic()
                    await producer.send(new_message("DelayT", b"level-2", delay_level=2))
                    await producer.send(new_message("DelayT", b"timer", properties={"TIMER_DELAY_MS": "1500"}))
                    await producer.send(new_message("DelayT", b"now"))
                    await producer.send(new_message("DelayT", b"retry-me"))
                    await until(lambda: sum(1 for b, _, _ in got if b == b"retry-me") >= 3, 30, "two retries")
                    await until(lambda: {b for b, _, _ in got} >= {b"level-2", b"timer", b"now"}, 10, "all")
            at = {(b, r): t - t0 for b, r, t in got}
            assert at[(b"now", 0)] < at[(b"level-2", 0)]
            assert 0.9 <= at[(b"level-2", 0)] < 4.0
            assert 1.3 <= at[(b"timer", 0)] < 4.5
            # Retries: level 3 + 0 then 3 + 1 (1 s each here), on %RETRY%DelayCG, reconsumeTimes 1 and 2.
            assert [r for b, r, _ in got if b == b"retry-me"][:3] == [0, 1, 2]
            assert at[(b"retry-me", 1)] - at[(b"retry-me", 0)] >= 0.9
            assert at[(b"retry-me", 2)] - at[(b"retry-me", 1)] >= 0.9

    run(scenario(), timeout=60)


def test_parked_messages_survive_a_broker_restart(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with servers(tmp_path, message_delay_level="2s " + " ".join(["1h"] * 17)) as s:
            async with Producer("ParkPG", config=config(s)) as producer:
                await producer.create_topic("ParkT", 1)
                for i in range(5):
                    await producer.send(new_message("ParkT", f"p{i}".encode(), delay_level=1))
                await producer.send(new_message("ParkT", b"t", properties={"TIMER_DELAY_SEC": "2"}))
            assert s.broker is not None
            assert stored(s.broker, "ParkT") == []
            port = await s.stop_broker()
            broker = await s.start_broker(port)
            await until(lambda: len(stored(broker, "ParkT")) == 6, 10, "the parked messages")
            await asyncio.sleep(0.5)
            assert sorted(m.body for m in stored(broker, "ParkT")) == [b"p0", b"p1", b"p2", b"p3", b"p4", b"t"]

    run(scenario(), timeout=60)
