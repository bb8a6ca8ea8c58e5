"""Admin and lookup requests over a real socket: topics, offsets and times, statistics, query by key, view by id
(spec §6.4, §6.9, §6.13, §6.16)."""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path

from broker_support import client_of, decode_records, props, pull_request, run, running_broker, send_v2, settle
from rocketq.common import json_compat
from rocketq.common.message_id import decode_offset_message_id
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request


def _create_topic(topic: str, queues: int = 2, perm: int = 6) -> RemotingCommand:
    return create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues, "perm": perm,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})  # fmt: skip


def test_create_and_delete_topic(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", autoCreateTopicEnable="false") as broker, \
                client_of(broker) as client:  # fmt: skip
            r = await client.invoke(_create_topic("Made", 3))
            assert (r.code, r.remark, r.ext_fields) == (ResponseCode.SUCCESS, "not set any response code", None)
            cfg = broker.topic_config_manager.select_topic_config("Made")
            assert cfg is not None and (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == (3, 3, 6)
            assert (await client.invoke(send_v2("Made", b"x", queue_id=2))).code == ResponseCode.SUCCESS
            await settle(broker)
            topics = json_compat.loads((await client.invoke(create_request(RequestCode.GET_ALL_TOPIC_CONFIG))).body)
            assert topics["topicConfigTable"]["Made"]["writeQueueNums"] == 3 and "counter" in topics["dataVersion"]
            r = await client.invoke(_create_topic("TBW102"))
            assert r.code == ResponseCode.INVALID_PARAMETER
            assert r.remark == "The topic[TBW102] is conflict with system topic."
            assert (await client.invoke(_create_topic("broker-a"))).code == ResponseCode.INVALID_PARAMETER
            assert (await client.invoke(_create_topic("a/b"))).code == ResponseCode.INVALID_PARAMETER
            delete = create_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Made"})
            assert (await client.invoke(delete)).code == ResponseCode.SUCCESS
            assert broker.topic_config_manager.select_topic_config("Made") is None
            assert not (tmp_path / "s" / "consumequeue" / "Made").exists()
            assert (await client.invoke(send_v2("Made", b"x"))).code == ResponseCode.TOPIC_NOT_EXIST
            # Created again, it starts from offset 0.
            await client.invoke(_create_topic("Made", 3))
            r = await client.invoke(send_v2("Made", b"again", queue_id=2))
            assert (r.ext_fields or {})["queueOffset"] == "0"
            stats = await client.invoke(create_request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"}))
            assert (stats.code, stats.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")

    run(scenario())


def test_offsets_times_and_stats(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            before = time.time_ns() // 1_000_000 - 5
            for i in range(3):
                await client.invoke(send_v2("O", f"m{i}".encode(), queue_id=1))
            await settle(broker)

            def ask(code: int, **fields: object) -> RemotingCommand:
                return create_request(code, {"topic": "O", "queueId": 1, **fields})

            assert (await client.invoke(ask(RequestCode.GET_MAX_OFFSET))).ext_fields == {"offset": "3"}
            assert (await client.invoke(ask(RequestCode.GET_MIN_OFFSET))).ext_fields == {"offset": "0"}
            assert (await client.invoke(ask(RequestCode.GET_MAX_OFFSET, queueId=0))).ext_fields == {"offset": "0"}
            assert (await client.invoke(ask(RequestCode.GET_MIN_OFFSET, queueId=0))).ext_fields == {"offset": "0"}
            earliest = await client.invoke(ask(RequestCode.GET_EARLIEST_MSG_STORETIME))
            ts = int((earliest.ext_fields or {})["timestamp"])
            assert before <= ts <= time.time_ns() // 1_000_000
            search = await client.invoke(ask(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=before))
            assert search.ext_fields == {"offset": "0"}
            later = await client.invoke(ask(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=ts + 60_000))
            # All older: the last message (4.9's answer) or the max offset (5.x's); the store decides.
            assert later.ext_fields == {"offset": str(broker.store.get_offset_in_queue_by_time("O", 1, ts + 60_000))}
            assert (later.ext_fields or {})["offset"] in ("2", "3")
            stats = await client.invoke(create_request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "O"}))
            text = stats.body.decode()  # type: ignore[union-attr]
            # MessageQueue map keys are JSON objects, as a Java reader needs them.
            assert '{"brokerName":"broker-a","queueId":1,"topic":"O"}:{"lastUpdateTimestamp":' in text
            table = json_compat.loads(stats.body)["offsetTable"]
            q1 = next(v for k, v in table.items() if k["queueId"] == 1)
            assert (q1["minOffset"], q1["maxOffset"]) == (0, 3)
            info = json_compat.loads((await client.invoke(create_request(RequestCode.GET_BROKER_RUNTIME_INFO))).body)
            t = info["table"]
            assert int(t["msgPutTotalTodayNow"]) >= 3 and t["brokerVersionDesc"] == "V5_3_3"
            # the store's figures (StoreStatsService): every append since start, of every topic
            times, size = broker.store.put_message_times_total, broker.store.commit_log.put_size_total
            assert t["msgPutTotalTodayNow"] == t["putMessageTimesTotal"] == str(times)
            assert t["putMessageSizeTotal"] == str(size) and float(t["putMessageAverageSize"]) == size / times
            assert (t["putMessageFailedTimes"], t["dispatchMaxBuffer"]) == ("0", "0")
            assert t["remainTransientStoreBufferNumbs"] == "2147483647" and "remainHowManyDataToCommit" not in t
            assert re.fullmatch(r"\d+ B|\d+\.\d [KMG]iB", t["remainHowManyDataToFlush"])
            assert t[f"commitLogDiskRatio_{broker.store_config.commit_log_path}"] == t["commitLogDiskRatio"]
            assert (t["EndTransactionQueueSize"], t["EndTransactionThreadPoolQueueCapacity"]) == ("0", "100000")
            assert len(info["table"]["putTps"].split()) == 3
            # what rocketmq-exporter's BrokerRuntimeStats parses, each as it parses it (one missing fails it all)
            for key in ("msgPutTotalTodayNow", "sendThreadPoolQueueHeadWaitTimeMills", "msgGetTotalTodayNow",
                        "queryThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueSize", "bootTimestamp",
                        "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning", "pullThreadPoolQueueSize",
                        "commitLogMinOffset", "pullThreadPoolQueueHeadWaitTimeMills", "dispatchMaxBuffer",
                        "pageCacheLockTimeMills", "commitLogMaxOffset", "getMessageEntireTimeMax",
                        "msgPutTotalTodayMorning", "putMessageTimesTotal", "msgGetTotalTodayMorning",
                        "sendThreadPoolQueueSize", "startAcceptSendRequestTimeStamp", "putMessageEntireTimeMax",
                        "earliestMessageTimeStamp", "remainTransientStoreBufferNumbs", "queryThreadPoolQueueCapacity",
                        "dispatchBehindBytes", "putMessageSizeTotal", "sendThreadPoolQueueCapacity",
                        "pullThreadPoolQueueCapacity", "brokerVersion"):  # fmt: skip
                assert re.fullmatch(r"-?\d+", t[key]), key
            for key in ("consumeQueueDiskRatio", "commitLogDiskRatio", "putMessageAverageSize", "putLatency99",
                        "putLatency999"):  # fmt: skip
                float(t[key])
            for key in ("putTps", "getMissTps", "getTransferedTps", "getTotalTps", "getFoundTps"):
                assert [float(x) for x in t[key].split(" ")], key
            ranges = dict(x.split(":") for x in t["putMessageDistributeTime"].split(" ") if x)
            assert list(ranges)[:2] == ["[<=0ms]", "[0~10ms]"] and len(ranges) == 13
            assert re.fullmatch(r"Total : [\d.]+ \w+, Free : [\d.]+ \w+\.", t["commitLogDirCapacity"])
            assert re.fullmatch(r"[\d.]+ [KMGTPE]?i?B", t["remainHowManyDataToFlush"])
            # getDiskPartitionSpaceUsedPercent: used / (used + usable), rounded up to a hundredth.
            st = os.statvfs(broker.store_config.root)
            used = (st.f_blocks - st.f_bfree) * st.f_frsize
            ratio = math.ceil(used * 100 / (used + st.f_bavail * st.f_frsize)) / 100
            assert abs(float(info["table"]["commitLogDiskRatio"]) - ratio) <= 0.01  # (the disk may move meanwhile)
            assert len(info["table"]["commitLogDiskRatio"]) <= 4  # 0.37, as Java's String.valueOf of it
            conf = await client.invoke(create_request(RequestCode.GET_BROKER_CONFIG))
            assert "brokerName=broker-a" in conf.body.decode().splitlines()  # type: ignore[union-attr]
            unknown = await client.invoke(create_request(9999))
            assert (unknown.code, unknown.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                      " request type 9999 not supported")  # fmt: skip

    run(scenario())


def test_query_message_by_key_and_unique_key_and_view_by_id(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            sent = []
            for i in range(3):
                keys = props(KEYS=f"order-{i} shared", UNIQ_KEY=f"ID{i}")
                r = await client.invoke(send_v2("Q", f"m{i}".encode(), properties=keys))
                sent.append(r.ext_fields or {})
            await settle(broker)

            def query(key: str, *, unique: bool = False, max_num: int = 32) -> RemotingCommand:
                return create_request(RequestCode.QUERY_MESSAGE, {
                    "topic": "Q", "key": key, "maxNum": max_num, "beginTimestamp": 0,
                    "endTimestamp": 9223372036854775807, "_UNIQUE_KEY_QUERY": unique})  # fmt: skip

            r = await client.invoke(query("shared"))
            assert r.code == ResponseCode.SUCCESS
            assert set(r.ext_fields or {}) == {"indexLastUpdatePhyoffset", "indexLastUpdateTimestamp"}
            assert sorted(m.body for m in decode_records(r.body)) == [b"m0", b"m1", b"m2"]
            one = decode_records((await client.invoke(query("order-1"))).body)
            assert [m.body for m in one] == [b"m1"]
            by_uniq = decode_records((await client.invoke(query("ID2", unique=True, max_num=1))).body)
            assert [m.body for m in by_uniq] == [b"m2"]
            miss = await client.invoke(query("nothing"))
            assert (miss.code, miss.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                                "can not find message, maybe time range not correct")  # fmt: skip
            offset = decode_offset_message_id(sent[1]["msgId"])[1]
            view = await client.invoke(create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}))
            assert (view.code, view.ext_fields) == (ResponseCode.SUCCESS, None)
            assert [m.body for m in decode_records(view.body)] == [b"m1"]
            bad = await client.invoke(create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset + 1}))
            assert bad.code == ResponseCode.SYSTEM_ERROR
            assert bad.remark == f"can not find message by the offset, {offset + 1}"
            # The pulled record and the viewed record are the same bytes.
            pulled = await client.invoke(pull_request("g", "Q", 0, 1, max_msgs=1))
            assert pulled.body == view.body

    run(scenario())


def test_subscription_group_admin(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            body = json_compat.dumps_bytes({"groupName": "Admin", "retryQueueNums": 2, "retryMaxTimes": 3,
                                            "consumeEnable": False})  # fmt: skip
            r = await client.invoke(create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body))
            assert r.code == ResponseCode.SUCCESS
            cfg = broker.subscription_group_manager.table.get("Admin")
            assert cfg is not None and (cfg.retry_queue_nums, cfg.retry_max_times, cfg.consume_enable) == (2, 3, False)
            denied = await client.invoke(pull_request("Admin", "TBW102", 0, 0, sys_flag=4))
            assert denied.code == ResponseCode.NO_PERMISSION
            assert denied.remark == "subscription group no permission, Admin"
            groups = json_compat.loads((await client.invoke(
                create_request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))).body)  # fmt: skip
            assert "Admin" in groups["subscriptionGroupTable"] and "TOOLS_CONSUMER" in groups["subscriptionGroupTable"]
            delete = create_request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "Admin", "removeOffset": True})
            assert (await client.invoke(delete)).code == ResponseCode.SUCCESS
            assert broker.subscription_group_manager.table.get("Admin") is None

    run(scenario())


def test_query_correction_offset(tmp_path: Path) -> None:
    long_max = (1 << 63) - 1

    def commit(group: str, queue_id: int, offset: int) -> RemotingCommand:
        fields = {"consumerGroup": group, "topic": "C", "queueId": queue_id, "commitOffset": offset}
        return create_request(RequestCode.UPDATE_CONSUMER_OFFSET, fields)

    def query(filter_groups: str, compare: str) -> RemotingCommand:
        return create_request(RequestCode.QUERY_CORRECTION_OFFSET, {"topic": "C", "filterGroups": filter_groups,
                                                                    "compareGroup": compare})  # fmt: skip

    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            for i in range(10):
                for q in (0, 1):
                    await client.invoke(send_v2("C", f"m{i}".encode(), queue_id=q))
            await settle(broker)
            for group, offsets in (("g1", (5, 3)), ("g2", (2, 9)), ("cmp", (4, 7))):
                for q, offset in enumerate(offsets):
                    assert (await client.invoke(commit(group, q, offset))).code == ResponseCode.SUCCESS
            r = await client.invoke(query("g2,cmp", "cmp"))  # g1 alone counts; cmp is behind it on queue 0
            assert r.code == ResponseCode.SUCCESS
            assert json_compat.loads(r.body)["correctionOffsets"] == {0: long_max, 1: 3}  # fastjson's bare integer keys
            r = await client.invoke(query("", "cmp"))  # every group counts, the compare group too
            assert json_compat.loads(r.body)["correctionOffsets"] == {0: 2, 1: 3}
            # The filter groups' offsets are still there (4.9.4 deletes them while it answers).
            assert broker.consumer_offset_manager.query_offset("g2", "C", 1) == 9

    run(scenario())
