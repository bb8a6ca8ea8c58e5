"""Bounded waits that keep a cancellation which arrives as the wait completes (rocketq.common.aio)."""

from __future__ import annotations

import asyncio

import pytest

from rocketq.common.aio import wait_event, within


async def _service(event: asyncio.Event, rounds: list[int]) -> None:
    while True:  # the shape of every wake-or-timeout service loop
        await wait_event(event, 30.0)
        event.clear()
        rounds.append(1)


def test_cancel_arriving_with_the_wakeup_stops_the_loop() -> None:
    async def main() -> None:
        for _ in range(50):
            event, rounds = asyncio.Event(), []
            task = asyncio.create_task(_service(event, rounds))
            await asyncio.sleep(0)
            event.set()  # the wake-up and the cancel land in the same loop iteration
            task.cancel()
            done, _ = await asyncio.wait([task], timeout=2.0)
            assert task in done and task.cancelled(), "the cancellation was lost"

    asyncio.run(main())


def test_wait_event_times_out_and_reports() -> None:
    async def main() -> None:
        event = asyncio.Event()
        assert await wait_event(event, 0.01) is False
        event.set()
        assert await wait_event(event, 0.01) is True
        with pytest.raises(TimeoutError):
            await within(asyncio.sleep(1.0), 0.01)
        assert await within(asyncio.sleep(0, result=7), 1.0) == 7

    asyncio.run(main())
