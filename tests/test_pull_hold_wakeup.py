"""The wake-up path of a held pull: a new record is dispatched where it was appended and wakes the pull at once
(:mod:`rocketq.broker.loop_dispatch`), with the store's reput thread only as the fallback."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from broker_support import client_of, decode_records, props, pull_request, run, running_broker, send_v2, settle
from rocketq.broker.broker_controller import BrokerController
from rocketq.broker.expression_message_filter import ExpressionMessageFilter
from rocketq.broker.loop_dispatch import LOCK_WAIT_S, RECORDS_PER_TURN, LoopDispatcher
from rocketq.broker.pull_request_hold_service import PullRequestHoldService, WakeReason
from rocketq.common.codec import encode_batch_body
from rocketq.common.heartbeat import SubscriptionData
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import Message
from rocketq.common.mixall import RMQ_SYS_SCHEDULE_TOPIC
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.transport import RemotingConnection
from rocketq.store.message_store import SCALAR_DISPATCH, MessageStore, ReputMessageService
from rocketq.store.store_config import MessageStoreConfig


def _stop_reput_thread(broker: BrokerController) -> None:
    """Leave the loop dispatcher (and delivery threads) as the only dispatchers: nothing else would put a new
    record into its consume queue, so a held pull answered with it was woken through them."""
    # What was appended so far first: the thread makes new queues' first files (the loop does not wait on the
    # disk), so a queue the test uses must have its file before the thread goes.
    assert broker.store.wait_dispatched(10)
    reput = broker.store.reput
    assert reput is not None and reput._thread is not None
    reput._stopped.set()
    reput._wake.set()
    reput._thread.join(5)
    assert not reput._thread.is_alive()
    reput._stopped.clear()  # do_reput stops at once while it is set


async def _held(broker: BrokerController) -> None:
    for _ in range(500):
        if broker.pull_request_hold_service.held_count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the pull was not held")


def test_a_send_wakes_a_held_pull_without_the_reput_thread(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            assert (await client.invoke(send_v2("W", b"first"))).code == ResponseCode.SUCCESS
            _stop_reput_thread(broker)
            for body in (b"second", b"third"):  # twice: the dispatch of a turn is scheduled again after it ran
                offset = broker.store.get_max_offset_in_queue("W", 0)
                held = asyncio.ensure_future(client.invoke(pull_request("g", "W", 0, offset, suspend_ms=20_000),
                                                           timeout=30))  # fmt: skip
                await _held(broker)
                t0 = time.monotonic()
                assert (await client.invoke(send_v2("W", body))).code == ResponseCode.SUCCESS
                r = await asyncio.wait_for(held, 10)
                # Far below the suspend time and the hold service's 5 s check (which could not help anyway).
                assert time.monotonic() - t0 < 5.0
                assert r.code == ResponseCode.SUCCESS
                assert [m.body for m in decode_records(r.body)] == [body]

    run(scenario())


def test_with_a_pull_held_a_send_is_dispatched_in_the_send_and_without_one_at_the_end_of_the_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A consumer that waits (a held pull) gets the message answered before the producer gets its answer, in the
    callback that stored it; with nobody waiting, the send is answered first and the dispatch comes once a turn."""
    answered: list[str] = []
    enqueue = RemotingConnection._enqueue

    def spy(self: RemotingConnection, cmd: RemotingCommand) -> None:
        if cmd.is_response and cmd.code == ResponseCode.SUCCESS:
            answered.append("pull" if cmd.body else "send")
        enqueue(self, cmd)

    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            dispatcher = broker._loop_dispatcher
            assert dispatcher is not None
            assert (await client.invoke(send_v2("W", b"first"))).code == ResponseCode.SUCCESS
            assert dispatcher.immediate == 0  # nobody waits
            await settle(broker)
            monkeypatch.setattr(RemotingConnection, "_enqueue", spy)
            held = asyncio.ensure_future(client.invoke(pull_request("g", "W", 0, 1, suspend_ms=20_000), timeout=30))
            await _held(broker)
            assert (await client.invoke(send_v2("W", b"second"))).code == ResponseCode.SUCCESS
            r = await asyncio.wait_for(held, 10)
            assert [m.body for m in decode_records(r.body)] == [b"second"]
            assert answered == ["pull", "send"] and dispatcher.immediate == 1
            answered.clear()
            assert (await client.invoke(send_v2("W", b"third"))).code == ResponseCode.SUCCESS
            assert answered == ["send"] and dispatcher.immediate == 1

    run(scenario())


def test_a_held_pull_is_answered_before_the_index_of_its_batch_is_built(tmp_path: Path) -> None:
    """The pull a batch wakes reads only its consume queue: it is answered once the units are in, and the index
    keys of the batch come after (the index work of a batch is not in the consumer's latency; they wait for a
    build of many batches, here for wait_dispatched)."""

    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            assert (await client.invoke(send_v2("W", b"first"))).code == ResponseCode.SUCCESS
            _stop_reput_thread(broker)
            held = asyncio.ensure_future(client.invoke(pull_request("g", "W", 0, 1, suspend_ms=20_000), timeout=30))
            await _held(broker)
            [request] = [r for rs in broker.pull_request_hold_service.pull_request_table.values() for r in rs]
            answered_when_indexing: list[bool] = []
            index = broker.store.index_service

            def spying(original: Any) -> Any:
                def spy(*args: object, **kwargs: object) -> object:
                    answered_when_indexing.append(request.future.done())
                    return original(*args, **kwargs)

                return spy

            for name in ("build_index_batch", "build_index_hashed"):
                setattr(index, name, spying(getattr(index, name)))
            msgs = [Message("W", f"m{i}".encode(), 0, {"KEYS": f"key-{i}"}) for i in range(2 * SCALAR_DISPATCH)]
            sent = await client.invoke(send_v2("W", encode_batch_body(msgs), code=RequestCode.SEND_BATCH_MESSAGE,
                                               m=True))  # fmt: skip
            assert sent.code == ResponseCode.SUCCESS
            r = await asyncio.wait_for(held, 10)
            assert r.code == ResponseCode.SUCCESS
            assert [m.body for m in decode_records(r.body)] == [m.body for m in msgs]
            assert broker.store.wait_dispatched(10)  # builds the index keys left waiting
            assert answered_when_indexing[:1] == [True]
            assert len(broker.store.query_message("W", "key-7", 4, 0, 1 << 62).messages) == 1  # the index too

    run(scenario())


def test_a_delivered_delay_message_wakes_a_held_pull_without_the_reput_thread(tmp_path: Path) -> None:
    """A delivery thread's put is dispatched on the loop; so is the parked record (appended on the loop), which is
    what wakes the level's thread."""

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", messageDelayLevel="1s 2s") as broker, client_of(broker) as client:
            assert (await client.invoke(send_v2("D", b"now"))).code == ResponseCode.SUCCESS  # makes the topic
            _stop_reput_thread(broker)
            # The level's queue gets its first unit now: its file is the thread's to make, made here instead.
            parked = broker.store.find_consume_queue(RMQ_SYS_SCHEDULE_TOPIC, 0)
            assert parked is not None
            parked.prepare_file(broker.store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, 0))
            offset = broker.store.get_max_offset_in_queue("D", 0)
            held = asyncio.ensure_future(client.invoke(pull_request("g", "D", 0, offset, suspend_ms=20_000),
                                                       timeout=30))  # fmt: skip
            await _held(broker)
            t0 = time.monotonic()
            sent = await client.invoke(send_v2("D", b"later", properties=props(DELAY="1")))
            assert sent.code == ResponseCode.SUCCESS
            r = await asyncio.wait_for(held, 15)
            assert 0.9 <= time.monotonic() - t0 < 5.0
            assert r.code == ResponseCode.SUCCESS
            assert [m.body for m in decode_records(r.body)] == [b"later"]

    run(scenario(), timeout=60)


def test_the_reput_thread_leaves_a_steady_stream_to_the_loop_and_takes_over_a_stalled_one(tmp_path: Path) -> None:
    """With the loop dispatching, the store's thread is its fallback only: records that wait for the loop's next
    turn (a busy loop) are not taken from it, but records left waiting by a loop that stopped turning are."""

    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker:
            store = broker.store
            reput = store.reput
            assert reput is not None and reput.fallback_only
            # The queue's first unit: the thread makes its file (the loop does not wait on the disk), then the loop
            # has the queue.
            assert store.put_message(Message("Steady", b"first", 0, {}), 0).ok
            await settle(broker)
            by_thread: list[int] = []
            real = reput.do_reput

            def watched(budget: int | None = None, until: int | None = None, *, make_files: bool = True) -> bool:
                if threading.current_thread() is reput._thread and reput.behind() > 0:
                    by_thread.append(reput.reput_from_offset)
                return real(budget, until, make_files=make_files)

            reput.do_reput = watched  # type: ignore[method-assign]
            for i in range(60):
                assert store.put_message(Message("Steady", b"x%d" % i, 0, {}), 0).ok
                time.sleep(0.02)  # a busy loop: the record waits 20 ms for the dispatch turn
                await asyncio.sleep(0)
            await settle(broker)
            # Before, the thread found records at nearly every look (every 50 ms) and took them; a loop descheduled
            # past a look on a loaded machine still lets it take a few.
            assert len(by_thread) <= 3, by_thread
            taken = len(by_thread)
            assert store.put_message(Message("Steady", b"stalled", 0, {}), 0).ok
            time.sleep(0.4)  # the loop stops turning: its dispatch turn cannot run
            assert len(by_thread) > taken, "the thread did not take over"
            assert store.get_max_offset_in_queue("Steady", 0) == 62

    run(scenario())


class _Reput:
    def __init__(self) -> None:
        self.calls: list[tuple[int | None, int]] = []
        self.busy = 0  # calls still to find the lock taken (the thread dispatching)

    def dispatch_now(self, budget: int | None = None, wait: float = 0.0, *, make_files: bool = True) -> bool:
        assert wait == LOCK_WAIT_S
        assert not make_files  # the loop never waits on the disk for a new queue's file
        self.calls.append((budget, threading.get_ident()))
        if self.busy:
            self.busy -= 1
            return False
        return True

    def wakeup(self) -> None:
        pass


class _CommitLog:
    on_append = None


class _Store:
    def __init__(self) -> None:
        self.reput = _Reput()
        self.commit_log = _CommitLog()


def test_appends_of_a_loop_turn_and_of_other_threads_are_dispatched_once_on_the_loop() -> None:
    async def scenario() -> None:
        store = _Store()
        dispatcher = LoopDispatcher(store, asyncio.get_running_loop())  # type: ignore[arg-type]
        dispatcher.install()
        assert store.commit_log.on_append == dispatcher.on_append
        for end in (10, 20, 30):
            dispatcher.on_append(end)
        assert store.reput.calls == []  # not inside the append: after the turn's appends
        await asyncio.sleep(0)
        assert store.reput.calls == [(RECORDS_PER_TURN, threading.get_ident())]
        dispatcher.on_append(40)
        await asyncio.sleep(0)
        assert len(store.reput.calls) == 2

        def deliver() -> None:  # two appends of a delivery thread: one dispatch, on the loop
            dispatcher.on_append(50)
            dispatcher.on_append(60)

        thread = threading.Thread(target=deliver)
        thread.start()
        thread.join()  # blocking the loop: both appends come before it can dispatch
        for _ in range(100):
            if len(store.reput.calls) == 3:
                break
            await asyncio.sleep(0.01)
        assert store.reput.calls[2:] == [(RECORDS_PER_TURN, threading.get_ident())]
        dispatcher.uninstall()
        assert store.commit_log.on_append is None

    run(scenario())


def test_a_turn_that_finds_the_thread_dispatching_tries_again_in_the_next_turns() -> None:
    """Not by waking the thread to take its records: under load that kept the thread at work, with the lock."""

    async def scenario() -> None:
        store = _Store()
        dispatcher = LoopDispatcher(store, asyncio.get_running_loop())  # type: ignore[arg-type]
        dispatcher.install()
        store.reput.busy = 2
        dispatcher.on_append(10)
        for expected in (1, 2, 3):  # one try a turn, with no append to ask for it, until the lock is had
            await asyncio.sleep(0)
            assert len(store.reput.calls) == expected
        for _ in range(3):
            await asyncio.sleep(0)
        assert len(store.reput.calls) == 3  # then nothing more
        dispatcher.uninstall()

    run(scenario())


def test_a_pass_of_the_reput_thread_stops_at_the_end_it_was_given(tmp_path: Path) -> None:
    config = MessageStoreConfig(store_path_root_dir=str(tmp_path), mapped_file_size_commit_log=1 << 20)
    with MessageStore(config, dispatch=False) as store:
        for i in range(10):
            assert store.put_message(Message("Bounded", b"m%d" % i, 0, {}), 0).ok
        reput = ReputMessageService(store, 0)
        fourth = store.commit_log.get_max_offset() * 4 // 10  # every record is the same size
        assert reput.do_reput(until=fourth)
        assert reput.reput_from_offset == fourth
        assert store.get_max_offset_in_queue("Bounded", 0) == 4
        assert not reput.do_reput(budget=3)  # out of budget before the end
        assert store.get_max_offset_in_queue("Bounded", 0) == 7
        assert reput.do_reput()
        assert store.get_max_offset_in_queue("Bounded", 0) == 10


class _Conn:
    closed = False


def test_an_arrival_reported_on_the_loop_wakes_the_pull_at_once() -> None:
    async def scenario() -> None:
        max_offset = [0]
        hold = PullRequestHoldService(lambda _topic, _queue: max_offset[0])
        hold.start()
        loop = asyncio.get_running_loop()
        hops: list[object] = []
        real = loop.call_soon_threadsafe
        loop.call_soon_threadsafe = lambda *a: hops.append(a) or real(*a)  # type: ignore[method-assign]
        try:
            flt = ExpressionMessageFilter(SubscriptionData(topic="T"))
            plain = asyncio.ensure_future(hold.suspend(_Conn(), "T", 0, 0, flt, 30.0))  # type: ignore[arg-type]
            while not hold.held_count:
                await asyncio.sleep(0)
            answered: list[str] = []
            held = asyncio.ensure_future(hold.suspend(_Conn(), "T", 0, 0, flt, 30.0,  # type: ignore[arg-type]
                                                      answered.append))  # fmt: skip
            while hold.held_count < 2:
                await asyncio.sleep(0)
            max_offset[0] = 1
            hold.notify_messages_arriving_threadsafe("T", 0, (1,), (0,), None)
            assert hops == []  # no hop through the loop's self-pipe
            hold.drain_arrivals()  # what the loop dispatcher does after its batch
            assert answered == [WakeReason.ARRIVED]  # answered in the waking callback
            await asyncio.sleep(0)
            assert plain.done() and plain.result() == WakeReason.ARRIVED
            assert held.done() and held.result() == WakeReason.ARRIVED
            # Not drained by a dispatcher: the loop drains in its next turn.
            late = asyncio.ensure_future(hold.suspend(_Conn(), "T", 0, 1, flt, 30.0))  # type: ignore[arg-type]
            while not hold.held_count:
                await asyncio.sleep(0)
            max_offset[0] = 2
            hold.notify_messages_arriving_threadsafe("T", 0, (2,), (0,), None)
            assert await asyncio.wait_for(late, 5) == WakeReason.ARRIVED
        finally:
            loop.call_soon_threadsafe = real  # type: ignore[method-assign]
            await hold.shutdown()

    run(scenario())


def test_the_records_of_one_queue_wake_each_pull_they_satisfy_once() -> None:
    """The arrivals of one queue and dispatch batch, told together: a pull is woken when any record passes its
    filter (tag code, then the TAGS property where the map was read) and the queue grew past its offset (the
    batch's last offset, or the queue's max offset when that is not past the pull's: Java's rule record by
    record, which holds for all of a batch's records or for none)."""

    async def scenario() -> None:
        max_offset = [0]
        hold = PullRequestHoldService(lambda _topic, _queue: max_offset[0])
        hold.start()
        woken: dict[str, list[str]] = {}
        tasks: list[asyncio.Future[str]] = []

        async def held(name: str, expression: str, offset: int) -> None:
            flt = ExpressionMessageFilter(SubscriptionData(topic="T", sub_string=expression))
            woken[name] = []
            tasks.append(asyncio.ensure_future(hold.suspend(_Conn(), "T", 0, offset, flt, 30.0,  # type: ignore[arg-type]
                                                            woken[name].append)))  # fmt: skip
            count = hold.held_count
            while hold.held_count == count:
                await asyncio.sleep(0)

        try:
            await held("b", "TagB", 0)
            await held("c", "TagC", 0)
            await held("all", "*", 0)
            await held("ahead", "*", 5)  # beyond the batch and the queue
            await held("by-max", "*", 3)  # beyond the batch, not the queue
            await held("d", "TagD", 0)
            a, b, c, d = (java_string_hash(t) for t in ("TagA", "TagB", "TagC", "TagD"))
            max_offset[0] = 4  # the queue: the batch, and one record since
            maps = ({"TAGS": "TagA"}, {"TAGS": "TagB"}, {"TAGS": "TagE"})
            hold.notify_messages_arriving("T", 0, (1, 2, 3), (a, b, d), maps)
            assert {name: len(v) for name, v in woken.items()} == {
                "b": 1,  # by the record before the last
                "c": 0, "all": 1, "ahead": 0, "by-max": 1,
                "d": 0,  # TagD's code, but its map says TagE
            }  # fmt: skip
            hold.notify_messages_arriving("T", 0, (4,), (c,), None)  # no map read: the tag code alone
            assert {name: len(v) for name, v in woken.items()} == {"b": 1, "c": 1, "all": 1, "ahead": 0, "by-max": 1,
                                                                   "d": 0}  # fmt: skip
        finally:
            await hold.shutdown()

    run(scenario())
