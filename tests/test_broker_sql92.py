"""SQL92 filtering on the broker, over a socket: CHECK_CLIENT_CONFIG, pulls with the subscription in the request
and with the group's registered filter (its errors), a held pull woken only by a matching message, the filter
table's life cycle and consumerFilter.json."""

from __future__ import annotations

import asyncio
import json
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
    settle,  # fmt: skip
)
from rocketq.broker.consumer_filter_manager import ConsumerFilterManager
from rocketq.broker.expression_message_filter import ExpressionMessageFilter, record_properties
from rocketq.common import json_compat
from rocketq.common.codec import encode_record
from rocketq.common.heartbeat import SubscriptionData
from rocketq.common.message import MessageExt
from rocketq.common.sql92 import compile_selector
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request
from rocketq.remoting.transport import RemotingClient

ON = {"enablePropertyFilter": "true"}
SUB_FLAG = 0x2 | 0x4  # suspend + subscription in the request


def check_config(expression: str, expression_type: str = "SQL92") -> RemotingCommand:
    body = {"clientId": "c", "group": "g", "subscriptionData": {"topic": "T", "subString": expression,
                                                                 "expressionType": expression_type}}  # fmt: skip
    return create_request(RequestCode.CHECK_CLIENT_CONFIG, None, json_compat.dumps_bytes(body))


async def fill(client: RemotingClient, topic: str, n: int = 10) -> None:
    for i in range(n):
        r = await client.invoke(send_v2(topic, f"m{i}".encode(), properties=props(a=str(i), TAGS="even" if i % 2
                                                                                   else "odd")))  # fmt: skip
        assert r.code == ResponseCode.SUCCESS


def bodies(r: RemotingCommand) -> list[bytes]:
    return [m.body for m in decode_records(r.body)]


def test_filter_evaluates_record_properties() -> None:
    msg = MessageExt(topic="T", body=b"x", properties={"a": "7", "TAGS": "TagA", "KEYS": "k"})
    record = bytes(encode_record(msg))
    assert record_properties(record) == {"a": "7", "TAGS": "TagA", "KEYS": "k"}
    sub = SubscriptionData(topic="T", sub_string="a > 5 AND TAGS = 'TagA'", expression_type="SQL92")
    flt = ExpressionMessageFilter(sub, compile_selector(sub.sub_string))
    assert not flt.matches_all
    assert flt.is_matched_by_consume_queue(12345)  # no bit maps: every unit is a candidate
    assert flt.is_matched_by_commit_log(record)
    assert flt.is_matched_by_properties({"a": "7", "TAGS": "TagA"})
    assert not flt.is_matched_by_properties({"a": "3", "TAGS": "TagA"})
    assert flt.is_matched_by_properties(None)  # not at hand: the pull reads the record
    assert ExpressionMessageFilter(sub).matches_all  # no filter data: everything, as Java


def test_check_client_config(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", **ON) as broker, client_of(broker) as client:
            assert (await client.invoke(check_config("a > 1 AND TAGS IN ('x')"))).code == ResponseCode.SUCCESS
            r = await client.invoke(check_config("a = NULL"))
            assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
            assert r.remark.startswith("Invalid MessageSelector.") and "NULL" in r.remark  # type: ignore[union-attr]
            r = await client.invoke(check_config("a > 1", "JSON"))
            assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED  # no filter of that type
            assert (await client.invoke(check_config("*", "TAG"))).code == ResponseCode.SUCCESS

    run(scenario())


def test_pull_with_the_expression_in_the_request(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", **ON) as broker, client_of(broker) as client:
            await fill(client, "Q")
            await settle(broker)
            r = await client.invoke(pull_request("g", "Q", 0, 0, sys_flag=SUB_FLAG, subscription="a >= 7",
                                                 expression_type="SQL92"))  # fmt: skip
            assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"m7", b"m8", b"m9"]
            assert (r.ext_fields or {})["nextBeginOffset"] == "10"
            r = await client.invoke(pull_request("g", "Q", 0, 0, sys_flag=SUB_FLAG, expression_type="SQL92",
                                                 subscription="TAGS = 'even' AND a BETWEEN 2 AND 6"))  # fmt: skip
            assert bodies(r) == [b"m3", b"m5"]
            # Nothing selected in the whole range: NO_MATCHED_MESSAGE, with the offset moved past it.
            r = await client.invoke(pull_request("g", "Q", 0, 0, sys_flag=SUB_FLAG, subscription="a > 100",
                                                 expression_type="SQL92", suspend_ms=0))  # fmt: skip
            assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and (r.ext_fields or {})["nextBeginOffset"] == "10"
            r = await client.invoke(pull_request("g", "Q", 0, 0, sys_flag=SUB_FLAG, subscription="a >",
                                                 expression_type="SQL92"))  # fmt: skip
            assert (r.code, r.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                          "parse the consumer's subscription failed")  # fmt: skip

    run(scenario())


def test_sql92_is_refused_while_the_property_filter_is_off(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            await fill(client, "Q", 2)
            r = await client.invoke(pull_request("g", "Q", 0, 0, sys_flag=SUB_FLAG, subscription="a > 0",
                                                 expression_type="SQL92"))  # fmt: skip
            assert r.code == ResponseCode.SYSTEM_ERROR
            assert r.remark == "The broker does not support consumer to filter message by SQL92"
            # so is one that does not parse (4.9.4 checks the setting before it looks at the expression)
            for expression, kind in (("a >", "SQL92"), ("x", "XPATH")):
                r = await client.invoke(pull_request("g", "Q", 0, 0, sys_flag=SUB_FLAG, subscription=expression,
                                                     expression_type=kind))  # fmt: skip
                assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                              f"The broker does not support consumer to filter message by {kind}")

    run(scenario())


def test_pull_with_the_group_s_registered_filter(tmp_path: Path) -> None:
    v1, v2 = 1795307277930, 1795307279000

    def pull(version: int) -> RemotingCommand:
        return pull_request("hg", "Q", 0, 0, sys_flag=2, subscription=None, sub_version=version,
                            expression_type="SQL92")  # fmt: skip

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", **ON) as broker, client_of(broker) as client:
            await fill(client, "Q")
            await settle(broker)
            assert (await client.invoke(pull(v1))).code == ResponseCode.SUBSCRIPTION_NOT_EXIST  # no heartbeat yet
            hb = heartbeat("c1", "hg", {"Q": "a < 2 OR a = 9"}, expression_type="SQL92", sub_version=v1)
            assert (await client.invoke(hb)).code == ResponseCode.SUCCESS
            data = broker.consumer_filter_manager.get("Q", "hg")
            assert data is not None and data.client_version == v1 and data.expression == "a < 2 OR a = 9"
            r = await client.invoke(pull(v1))
            assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"m0", b"m1", b"m9"]
            # A newer subscription that does not compile: the group's subscription moves on, its filter cannot.
            bad = heartbeat("c1", "hg", {"Q": "a <"}, expression_type="SQL92", sub_version=v2)
            assert (await client.invoke(bad)).code == ResponseCode.SUCCESS
            r = await client.invoke(pull(v2))
            assert (r.code, r.remark) == (ResponseCode.FILTER_DATA_NOT_LATEST,
                                          "the consumer's consumer filter data not latest")  # fmt: skip
            # An older heartbeat (a client that has not seen the change) does not replace the filter.
            old = heartbeat("c2", "hg", {"Q": "a = 0"}, expression_type="SQL92", sub_version=v1 - 1)
            await client.invoke(old)
            assert broker.consumer_filter_manager.get("Q", "hg").expression == "a < 2 OR a = 9"  # type: ignore[union-attr]
            # A group whose only expression never compiled has no filter data.
            await client.invoke(heartbeat("c3", "bad", {"Q": "a <"}, expression_type="SQL92", sub_version=v1))
            r = await client.invoke(pull_request("bad", "Q", 0, 0, sys_flag=2, subscription=None, sub_version=v1,
                                                 expression_type="SQL92"))  # fmt: skip
            assert r.code == ResponseCode.FILTER_DATA_NOT_EXIST

    run(scenario())


def test_held_pull_wakes_for_a_matching_message_only(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", **ON) as broker, client_of(broker) as client:
            await fill(client, "W", 1)
            await settle(broker)
            held = asyncio.ensure_future(client.invoke(pull_request(
                "g", "W", 0, 1, sys_flag=SUB_FLAG, subscription="color = 'red'", expression_type="SQL92",
                suspend_ms=10_000), timeout=15))  # fmt: skip
            for _ in range(200):
                if broker.pull_request_hold_service.held_count:
                    break
                await asyncio.sleep(0.01)
            assert broker.pull_request_hold_service.held_count == 1
            sender = RemotingClient(broker.broker_addr)
            try:
                await sender.invoke(send_v2("W", b"blue", properties=props(color="blue")))
                await settle(broker)
                await asyncio.sleep(0.2)
                assert not held.done()
                t0 = time.monotonic()
                await sender.invoke(send_v2("W", b"red", properties=props(color="red")))
                r = await asyncio.wait_for(held, 5)
                assert time.monotonic() - t0 < 5.0
            finally:
                await sender.close()
            assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"red"]

    run(scenario())


def test_filter_table_life_cycle_and_file(tmp_path: Path) -> None:
    store = tmp_path / "s"

    async def first() -> None:
        async with running_broker(store, **ON) as broker, client_of(broker) as client:
            hb = heartbeat("c1", "fg", {"F": "a > 1"}, expression_type="SQL92", sub_version=5)
            assert (await client.invoke(hb)).code == ResponseCode.SUCCESS
            data = broker.consumer_filter_manager.get("F", "fg")
            assert data is not None and not data.is_dead
            # The group's last client leaves: the filter dies but stays (for a day).
            unregister = create_request(RequestCode.UNREGISTER_CLIENT, {"clientID": "c1", "consumerGroup": "fg"})
            assert (await client.invoke(unregister)).code == ResponseCode.SUCCESS
            assert data.is_dead
            # The same version comes back: alive again.
            await client.invoke(hb)
            assert not data.is_dead

    run(first())
    saved = json.loads((store / "config" / "consumerFilter.json").read_text())
    entry = saved["filterDataByTopic"]["F"]["groupFilterData"]["fg"]
    assert (entry["expression"], entry["expressionType"], entry["clientVersion"]) == ("a > 1", "SQL92", 5)

    async def second() -> None:
        async with running_broker(store, **ON) as broker, client_of(broker) as client:
            data = broker.consumer_filter_manager.get("F", "fg")
            assert data is not None and data.selector is not None and data.is_dead  # loaded, until a heartbeat
            await client.invoke(send_v2("F", b"two", properties=props(a="2")))
            await client.invoke(send_v2("F", b"one", properties=props(a="1")))
            await settle(broker)
            # A pull right after a restart, before any heartbeat: the group info is missing, not the filter.
            hb = heartbeat("c1", "fg", {"F": "a > 1"}, expression_type="SQL92", sub_version=5)
            await client.invoke(hb)
            r = await client.invoke(pull_request("fg", "F", 0, 0, sys_flag=2, subscription=None, sub_version=5,
                                                 expression_type="SQL92"))  # fmt: skip
            assert bodies(r) == [b"two"]

    run(second())


def test_dead_entries_are_dropped_after_the_clean_span() -> None:
    mgr = ConsumerFilterManager(clean_time_span_ms=0)
    assert mgr.register("T", "g", "a > 1", "SQL92", 1)
    assert not mgr.register("T", "g", "a > 2", "SQL92", 1)  # same version: kept
    assert not mgr.register("T", "g2", "*", "TAG", 1)  # tags are not kept
    assert not mgr.register("T", "g3", "a >", "SQL92", 1)  # does not compile
    mgr.register_group("g", [])  # no longer subscribes T
    assert mgr.get("T", "g").is_dead  # type: ignore[union-attr]
    mgr.to_file()
    assert mgr.get("T", "g") is None


def test_filter_support_retry_filters_a_retry_topic_by_the_original_topic_s_selector(tmp_path: Path) -> None:
    async def pull_retry(flag: str) -> list[bytes]:
        async with running_broker(tmp_path / flag, **ON, filterSupportRetry=flag) as broker, \
                client_of(broker) as client:  # fmt: skip
            hb = heartbeat("c1", "rg", {"R": "a > 5"}, expression_type="SQL92", sub_version=9)
            assert (await client.invoke(hb)).code == ResponseCode.SUCCESS  # also creates %RETRY%rg
            for a, topic in (("3", "R"), ("7", "R"), ("1", "Unfiltered")):
                r = await client.invoke(send_v2("%RETRY%rg", f"{topic}-{a}".encode(),
                                                properties=props(a=a, RETRY_TOPIC=topic)))  # fmt: skip
                assert r.code == ResponseCode.SUCCESS, r.remark
            await settle(broker)
            r = await client.invoke(pull_request("rg", "%RETRY%rg", 0, 0, sys_flag=SUB_FLAG, subscription="*"))
            return bodies(r)

    assert run(pull_retry("false")) == [b"R-3", b"R-7", b"Unfiltered-1"]
    assert run(pull_retry("true")) == [b"R-7", b"Unfiltered-1"]
    sub = SubscriptionData(topic="%RETRY%rg", sub_string="*")
    selectors = {"R": compile_selector("a > 5")}
    flt = ExpressionMessageFilter(sub, None, selectors.get)
    assert not flt.matches_all and flt.is_matched_by_consume_queue(1)
    assert not flt.is_matched_by_properties({"a": "3", "RETRY_TOPIC": "R"})
    assert flt.is_matched_by_properties({"a": "3"})  # no origin: passes
