"""PULL_MESSAGE over a real socket: statuses, long polling, filtering, offsets (spec §6.2, §11.7)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from broker_support import (
    client_of,
    decode_records,
    heartbeat,
    props,
    pull_request,
    run,
    running_broker,
    send_v2,
    settle,
)
from rocketq.broker.expression_message_filter import ExpressionMessageFilter, record_tags
from rocketq.broker.pull_message_processor import pull_response_code
from rocketq.common.codec import encode_record
from rocketq.common.heartbeat import SubscriptionData
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import MessageExt
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.transport import RemotingClient
from rocketq.store.message_store import GetMessageStatus


def test_status_mapping_is_java_s() -> None:
    s = GetMessageStatus
    assert pull_response_code(s.FOUND, 5) == ResponseCode.SUCCESS
    assert pull_response_code(s.NO_MESSAGE_IN_QUEUE, 0) == ResponseCode.PULL_NOT_FOUND
    assert pull_response_code(s.NO_MESSAGE_IN_QUEUE, 3) == ResponseCode.PULL_OFFSET_MOVED
    assert pull_response_code(s.NO_MATCHED_LOGIC_QUEUE, 0) == ResponseCode.PULL_NOT_FOUND
    assert pull_response_code(s.NO_MATCHED_LOGIC_QUEUE, 1) == ResponseCode.PULL_OFFSET_MOVED
    assert pull_response_code(s.OFFSET_TOO_SMALL, 0) == ResponseCode.PULL_OFFSET_MOVED
    assert pull_response_code(s.OFFSET_OVERFLOW_ONE, 9) == ResponseCode.PULL_NOT_FOUND
    assert pull_response_code(s.OFFSET_OVERFLOW_BADLY, 9) == ResponseCode.PULL_OFFSET_MOVED
    assert pull_response_code(s.NO_MATCHED_MESSAGE, 9) == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert pull_response_code(s.MESSAGE_WAS_REMOVING, 9) == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert pull_response_code(s.OFFSET_FOUND_NULL, 9) == ResponseCode.PULL_NOT_FOUND


def test_filter_matches_tag_code_then_tag_string() -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")  # a collision the tag code alone cannot tell apart
    flt = ExpressionMessageFilter(SubscriptionData(topic="t", sub_string="Aa || TagC"))
    assert flt.is_matched_by_consume_queue(java_string_hash("BB"))
    record = bytes(encode_record(MessageExt(topic="t", body=b"x", properties={"KEYS": "k", "TAGS": "BB"})))
    assert record_tags(record) == "BB"
    assert not flt.is_matched_by_commit_log(record)
    first = bytes(encode_record(MessageExt(topic="t", body=b"x", properties={"TAGS": "Aa", "KEYS": "k"})))
    assert record_tags(first) == "Aa" and flt.is_matched_by_commit_log(first)
    assert record_tags(bytes(encode_record(MessageExt(topic="t", body=b"x", properties={"KEYS": "k"})))) is None
    assert ExpressionMessageFilter(SubscriptionData(topic="t", sub_string="*")).matches_all


def test_found_not_found_offset_moved_and_retry_immediately(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            empty = await client.invoke(pull_request("g", "BenchmarkTest", 3, 0, sys_flag=4))
            assert (empty.code, empty.remark) == (ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
            assert empty.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "0", "minOffset": "0",
                                        "maxOffset": "0"}  # fmt: skip
            moved = await client.invoke(pull_request("g", "BenchmarkTest", 3, 7, sys_flag=4))
            assert (moved.code, moved.remark) == (ResponseCode.PULL_OFFSET_MOVED, "NO_MESSAGE_IN_QUEUE")
            for i, tag in enumerate(["TagA", "TagB", "TagA"]):
                await client.invoke(send_v2("P", f"m{i}".encode(), properties=props(TAGS=tag)))
            await settle(broker)
            found = await client.invoke(pull_request("g", "P", 0, 0, sys_flag=4, subscription="TagA", max_msgs=1))
            assert (found.code, found.remark) == (ResponseCode.SUCCESS, "FOUND")
            assert (found.ext_fields or {})["nextBeginOffset"] == "1" and (found.ext_fields or {})["maxOffset"] == "3"
            skipped = await client.invoke(pull_request("g", "P", 0, 1, sys_flag=4, subscription="TagA"))
            assert [m.body for m in decode_records(skipped.body)] == [b"m2"]
            assert (skipped.ext_fields or {})["nextBeginOffset"] == "3"
            none = await client.invoke(pull_request("g", "P", 0, 1, sys_flag=4, subscription="TagB", max_msgs=1))
            assert [m.body for m in decode_records(none.body)] == [b"m1"]
            nomatch = await client.invoke(pull_request("g", "P", 0, 2, sys_flag=4, subscription="TagC"))
            assert (nomatch.code, nomatch.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
            assert (nomatch.ext_fields or {})["nextBeginOffset"] == "3"
            badly = await client.invoke(pull_request("g", "P", 0, 50, sys_flag=4))
            assert (badly.code, badly.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY")
            assert (badly.ext_fields or {})["nextBeginOffset"] == "3"  # 4.9.4: the max offset (4.7: back to 0)
            one = await client.invoke(pull_request("g", "P", 0, 3, sys_flag=4))
            assert (one.code, one.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
            # PULL_OFFSET_MOVED left an event in OFFSET_MOVED_EVENT, tagged and keyed by the group.
            await settle(broker)
            events = decode_records((await client.invoke(pull_request("x", "OFFSET_MOVED_EVENT", 0, 0,
                                                                      sys_flag=4))).body)  # fmt: skip
            assert events and events[0].tags == "g" and b'"offsetRequest":7' in events[0].body

    run(scenario())


def test_pull_checks_group_topic_queue_and_subscription(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", autoCreateSubscriptionGroup="false") as broker, \
                client_of(broker) as client:  # fmt: skip
            r = await client.invoke(pull_request("nobody", "TBW102", 0, 0))
            assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and "does not exist" in (r.remark or "")
            r = await client.invoke(pull_request("TOOLS_CONSUMER", "Missing", 0, 0))
            assert r.code == ResponseCode.TOPIC_NOT_EXIST and r.remark is not None
            assert r.remark.startswith("topic[Missing] not exist, apply first please!")
            r = await client.invoke(pull_request("TOOLS_CONSUMER", "TBW102", 99, 0))
            assert r.code == ResponseCode.INVALID_PARAMETER and "queueId[99] is illegal" in (r.remark or "")
            r = await client.invoke(pull_request("TOOLS_CONSUMER", "TBW102", 0, 0, sys_flag=2, subscription=None))
            assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
            r = await client.invoke(pull_request("TOOLS_CONSUMER", "TBW102", 0, 0, sys_flag=4, subscription="a||"))
            assert r.code == ResponseCode.PULL_NOT_FOUND

    run(scenario())


def test_heartbeat_subscription_is_used_and_must_be_latest(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            for tag in ("TagA", "TagB"):
                await client.invoke(send_v2("H", tag.encode(), properties=props(TAGS=tag)))
            await settle(broker)
            assert (await client.invoke(heartbeat("c1", "hg", {"H": "TagB"}))).code == ResponseCode.SUCCESS
            r = await client.invoke(pull_request("hg", "H", 0, 0, sys_flag=2, subscription=None,
                                                 sub_version=1795307277930))  # fmt: skip
            assert [m.body for m in decode_records(r.body)] == [b"TagB"]
            r = await client.invoke(pull_request("hg", "H", 0, 0, sys_flag=2, subscription=None,
                                                 sub_version=1795307277931))  # fmt: skip
            assert r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
            r = await client.invoke(pull_request("hg", "Other", 0, 0, sys_flag=2, subscription=None))
            assert r.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_NOT_EXIST)

    run(scenario())


def test_long_poll_wakes_on_arrival_and_times_out(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            await client.invoke(send_v2("LP", b"first"))
            await settle(broker)
            # Timeout: PULL_NOT_FOUND with nextBeginOffset = the requested offset, after about the suspend time.
            t0 = time.monotonic()
            r = await client.invoke(pull_request("g", "LP", 0, 1, suspend_ms=400), timeout=5)
            waited = time.monotonic() - t0
            assert (r.code, r.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
            assert (r.ext_fields or {})["nextBeginOffset"] == "1" and 0.35 <= waited < 5.0
            assert broker.pull_request_hold_service.held_count == 0
            # Wake-up: a held pull answers as soon as a matching message lands; a non-matching one does not wake it.
            held = asyncio.ensure_future(client.invoke(pull_request("g", "LP", 0, 1, suspend_ms=10_000,
                                                                    subscription="Wanted"), timeout=15))  # fmt: skip
            for _ in range(100):
                if broker.pull_request_hold_service.held_count:
                    break
                await asyncio.sleep(0.01)
            assert broker.pull_request_hold_service.held_count == 1
            sender = RemotingClient(broker.broker_addr)  # a second connection: the held pull does not block it
            try:
                await sender.invoke(send_v2("LP", b"other", properties=props(TAGS="Other")))
                await settle(broker)
                await asyncio.sleep(0.1)
                assert not held.done()
                t0 = time.monotonic()
                await sender.invoke(send_v2("LP", b"wanted", properties=props(TAGS="Wanted")))
                r = await asyncio.wait_for(held, 5)
                assert time.monotonic() - t0 < 5.0  # not the 10 s suspend time
            finally:
                await sender.close()
            assert r.code == ResponseCode.SUCCESS
            assert [m.body for m in decode_records(r.body)] == [b"wanted"]
            # A held pull does not delay other requests on its own connection.
            held2 = asyncio.ensure_future(client.invoke(pull_request("g", "LP", 0, 3, suspend_ms=10_000),
                                                        timeout=15))  # fmt: skip
            await asyncio.sleep(0.05)
            t0 = time.monotonic()
            ok = await client.invoke(send_v2("Elsewhere", b"x"))
            assert ok.code == ResponseCode.SUCCESS and time.monotonic() - t0 < 1.0
            assert not held2.done()
            held2.cancel()

    run(scenario())


def test_commit_offset_piggyback_and_vip_port_has_no_pull(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            await client.invoke(send_v2("CO", b"x"))
            await settle(broker)
            await client.invoke(pull_request("cog", "CO", 0, 0, sys_flag=0x5, commit_offset=1))
            assert broker.consumer_offset_manager.query_offset("cog", "CO", 0) == 1
            vip = RemotingClient(f"127.0.0.1:{broker.vip_port}")
            try:
                r = await vip.invoke(pull_request("cog", "CO", 0, 0))
                assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
                assert r.remark == f" request type {RequestCode.PULL_MESSAGE} not supported"
                assert (await vip.invoke(send_v2("CO", b"via vip"))).code == ResponseCode.SUCCESS
            finally:
                await vip.close()

    run(scenario())


class _FakeConnection:
    closed = False


def test_a_pull_registered_after_its_queue_grew_is_let_through_at_once() -> None:
    """The message dispatched between the pull's read and its registration must not wait for the next one."""
    from rocketq.broker.pull_request_hold_service import PullRequestHoldService, WakeReason

    async def scenario() -> None:
        max_offsets = {("T", 0): 5}
        service = PullRequestHoldService(lambda topic, qid: max_offsets[(topic, qid)])
        flt = ExpressionMessageFilter(SubscriptionData(topic="T"))
        t0 = time.monotonic()
        reason = await service.suspend(_FakeConnection(), "T", 0, 4, flt, 10.0)  # type: ignore[arg-type]
        assert reason == WakeReason.ARRIVED and time.monotonic() - t0 < 1.0
        assert service.held_count == 0
        reason = await service.suspend(_FakeConnection(), "T", 0, 5, flt, 0.05)  # type: ignore[arg-type]
        assert reason == WakeReason.TIMEOUT

    run(scenario())


def test_arrivals_of_one_dispatch_batch_wake_the_loop_once() -> None:
    from rocketq.broker.pull_request_hold_service import PullRequestHoldService, WakeReason

    async def scenario() -> None:
        max_offsets = {("T", 0): 0, ("T", 1): 0}
        service = PullRequestHoldService(lambda topic, qid: max_offsets[(topic, qid)])
        service.start()
        loop = asyncio.get_running_loop()
        scheduled: list[object] = []
        real = loop.call_soon_threadsafe

        def counting(callback, *args):  # type: ignore[no-untyped-def]
            if getattr(callback, "__name__", "") != "_set_state":  # not to_thread's own hand-back
                scheduled.append(callback)
            return real(callback, *args)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        try:
            flt = ExpressionMessageFilter(SubscriptionData(topic="T"))
            held = [asyncio.ensure_future(service.suspend(_FakeConnection(), "T", q, 0, flt, 10.0))  # type: ignore[arg-type]
                    for q in (0, 1)]  # fmt: skip
            await asyncio.sleep(0.01)
            assert service.held_count == 2

            def dispatch() -> None:  # the store's dispatch thread: 64 messages on two queues
                for i in range(64):
                    q = i % 2
                    max_offsets[("T", q)] = i // 2 + 1
                    service.notify_messages_arriving_threadsafe("T", q, (i // 2 + 1,), (0,), None)

            await asyncio.to_thread(dispatch)
            assert await asyncio.wait_for(asyncio.gather(*held), 5) == [WakeReason.ARRIVED, WakeReason.ARRIVED]
            # Not one hop a message: the dispatch thread may lose the GIL to the loop now and then, no more.
            assert 1 <= len(scheduled) <= 8
        finally:
            loop.call_soon_threadsafe = real  # type: ignore[method-assign]
            await service.shutdown()

    run(scenario())
