"""The requests mqadmin 4.9 sends a broker for its tools, over a real socket, in the Java tools' frames:
updateBrokerConfig, brokerConsumeStats, cloneGroupOffset, resetOffsetByTime, consumerStatus and consuming a
message directly (the broker passes the call on to the consumer), the consume time span, producer, queryCq,
cleanUnusedTopic, cleanExpiredCQ, deleteExpiredCommitLog; and the name server's getNamesrvConfig and
updateNamesrvConfig."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from broker_support import Recorder, client_of, heartbeat, props, pull_request, run, running_broker, send_v2, settle
from rocketq.broker.broker_stats import KeyedStats
from rocketq.common import json_compat
from rocketq.namesrv.namesrv_controller import NamesrvController
from rocketq.remoting.codes import LanguageCode, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request, make_response_for
from rocketq.remoting.transport import RemotingClient


def _commit(group: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
    fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
    return create_request(RequestCode.UPDATE_CONSUMER_OFFSET, fields)


async def _config_lines(client: RemotingClient) -> list[str]:
    body = (await client.invoke(create_request(RequestCode.GET_BROKER_CONFIG))).body or b""
    return body.decode().splitlines()


def _reset(timestamp: int, force: bool, language: LanguageCode = LanguageCode.JAVA) -> RemotingCommand:
    fields = {"topic": "T", "group": "CG", "timestamp": timestamp, "isForce": force}
    return create_request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields, language=language)


def test_update_broker_config_changes_what_get_broker_config_shows(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            lines = await _config_lines(client)
            # Java's names (MessageStoreConfig.brokerIP1, checkCRCOnRecover), not the camelCase of ours
            assert "brokerIP1=127.0.0.1" in lines and "checkCRCOnRecover=true" in lines
            assert not any(x.startswith(("brokerIp1=", "checkCrcOnRecover=")) for x in lines)
            port = broker.broker_config.listen_port
            # mqadmin updateBrokerConfig: a properties body (MixAll.properties2String), no header
            body = "fileReservedTime=49\ncheckCRCOnRecover=false\nlistenPort=1\nnoSuchKey=1\nflushDiskType=X\n"
            r = await client.invoke(create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, body.encode()))
            assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
            assert broker.store_config.file_reserved_time == 49 and broker.store_config.check_crc_on_recover is False
            assert broker.broker_config.listen_port == port  # fixed while running
            assert broker.store_config.flush_disk_type == "ASYNC_FLUSH"  # a value that does not parse is skipped
            lines = await _config_lines(client)
            assert "fileReservedTime=49" in lines and "checkCRCOnRecover=false" in lines
            # 4.9.4's settings rocketq does not act on are listed at their defaults and kept when updated;
            # a value of the wrong kind is skipped
            cores = os.cpu_count() or 1
            assert f"pullMessageThreadPoolNums={16 + cores * 2}" in lines and "serverSelectorThreads=3" in lines
            assert "clientWorkerThreads=4" in lines and "enableConsumeQueueExt=false" in lines
            assert f"storePathCommitLog={tmp_path / 's' / 'commitlog'}" in lines
            assert f"haListenPort={broker.store.ha_service.port}" in lines  # type: ignore[union-attr]
            assert not any(x.endswith("=None") for x in lines)
            body = b"sendMessageThreadPoolNums=7\ncommercialEnable=FALSE\nserverWorkerThreads=lots\n"
            r = await client.invoke(create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, body))
            lines = await _config_lines(client)
            assert "sendMessageThreadPoolNums=7" in lines and "commercialEnable=false" in lines
            assert "serverWorkerThreads=8" in lines
            r = await client.invoke(create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, b"brokerPermission=4\n"))
            assert r.code == ResponseCode.SUCCESS and broker.broker_config.broker_permission == 4

    run(scenario())


def test_broker_consume_stats_clone_offsets_and_time_span(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            for i in range(5):
                await client.invoke(send_v2("T", f"m{i}".encode(), queue_id=i % 2))
            await settle(broker)
            await client.invoke(heartbeat("10.0.0.1@1", "CG", {"T": "*"}))
            await client.invoke(_commit("CG", "T", 0, 2))
            await client.invoke(_commit("CG", "T", 1, 1))
            # brokerConsumeStats: GET_BROKER_CONSUME_STATS with isOrder
            r = await client.invoke(create_request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": False}))
            assert r.code == ResponseCode.SUCCESS
            text = r.body.decode()  # type: ignore[union-attr]
            assert '{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":3,"consumerOffset":2,' in text
            body = json_compat.loads(r.body)
            assert body["brokerAddr"] == broker.broker_addr and body["totalDiff"] == 2
            groups = {g: stats for entry in body["consumeStatsList"] for g, stats in entry.items()}
            assert len(groups["CG"]) == 1 and len(groups["CG"][0]["offsetTable"]) == broker.topic_config_manager \
                .select_topic_config("T").write_queue_nums  # type: ignore[union-attr]  # fmt: skip
            r = await client.invoke(create_request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": True}))
            assert all(not stats for entry in json_compat.loads(r.body)["consumeStatsList"] for stats in entry.values())
            # cloneGroupOffset
            clone = create_request(RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": "CG", "destGroup": "CG2", "topic": "T",
                                                                    "offline": False})  # fmt: skip
            assert (await client.invoke(clone)).code == ResponseCode.SUCCESS
            assert broker.consumer_offset_manager.query_offsets("CG2", "T") == {0: 2, 1: 1}
            # the consume time span of a group
            r = await client.invoke(create_request(RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": "T", "group": "CG"}))
            spans = json_compat.loads(r.body)["consumeTimeSpanSet"]
            q0 = next(s for s in spans if s["messageQueue"]["queueId"] == 0)
            assert q0["minTimeStamp"] > 0 and q0["maxTimeStamp"] >= q0["consumeTimeStamp"] >= q0["minTimeStamp"]
            assert q0["delayTime"] >= 0
            r = await client.invoke(create_request(RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": "No", "group": "CG"}))
            assert r.code == ResponseCode.TOPIC_NOT_EXIST

    run(scenario())


def test_reset_offset_by_time_goes_to_the_online_consumers(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as admin:
            for i in range(4):
                await admin.invoke(send_v2("T", f"m{i}".encode(), queue_id=0))
            await settle(broker)
            reset = _reset(-1, True)
            r = await admin.invoke(reset)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <CG> not exist")
            await admin.invoke(_commit("CG", "T", 0, 1))
            for q in range(1, 4):
                await admin.invoke(_commit("CG", "T", q, 0))
            r = await admin.invoke(reset)
            # nobody online: the tool then commits the offsets itself (ResetOffsetByTimeOldCommand)
            assert r.code == ResponseCode.CONSUMER_NOT_ONLINE and r.remark.startswith("Consumer not online")
            on_reset = Recorder()
            got = on_reset.requests
            consumer = RemotingClient(broker.broker_addr)
            consumer.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, on_reset)
            try:
                await consumer.invoke(heartbeat("10.0.0.1@1", "CG", {"T": "*"}))
                r = await admin.invoke(reset)
                assert r.code == ResponseCode.SUCCESS
                table = json_compat.loads(r.body)["offsetTable"]
                assert {k["queueId"]: v for k, v in table.items()}[0] == 4
                await asyncio.wait_for(on_reset.arrived.wait(), 5)
                assert got[0].is_oneway and got[0].ext_fields == {"topic": "T", "group": "CG", "timestamp": "-1",
                                                                  "isForce": "true"}  # fmt: skip
                pushed = json_compat.loads(got[0].body)["offsetTable"]
                assert {k["queueId"]: v for k, v in pushed.items()}[0] == 4
                # not forced: an offset is only moved back
                table = json_compat.loads((await admin.invoke(_reset(-1, False))).body)["offsetTable"]
                assert {k["queueId"]: v for k, v in table.items()}[0] == 1
                # a C++ tool gets the list form
                assert (await admin.invoke(_reset(0, True, LanguageCode.CPP))).code == ResponseCode.SUCCESS
                await asyncio.sleep(0.2)
                assert isinstance(json_compat.loads(got[-1].body)["offsetTable"], list)
            finally:
                await consumer.close()

    run(scenario())


def test_consumer_running_info_and_consume_directly_are_passed_to_the_consumer(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as admin:
            r = await admin.invoke(send_v2("T", b"direct", properties=props(UNIQ_KEY="AB", KEYS="k")))
            offset_id = (r.ext_fields or {})["msgId"]
            await settle(broker)
            on_running_info = Recorder(lambda r: make_response_for(r, body=b'{"properties":{"x":"1"}}'))
            on_direct = Recorder(lambda r: make_response_for(r, body=b'{"consumeResult":"CR_SUCCESS"}'))
            consumer = RemotingClient(broker.broker_addr)
            consumer.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, on_running_info)
            consumer.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, on_direct)
            try:
                info = create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "CG",
                                                                              "clientId": "10.0.0.1@1",
                                                                              "jstackEnable": False})  # fmt: skip
                r = await admin.invoke(info)
                assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <CG> <10.0.0.1@1> not online")
                await consumer.invoke(heartbeat("10.0.0.1@1", "CG", {"T": "*"}))
                r = await admin.invoke(info)
                assert (r.code, r.body) == (ResponseCode.SUCCESS, b'{"properties":{"x":"1"}}')
                asked = on_running_info.requests[0]
                assert asked.code == RequestCode.GET_CONSUMER_RUNNING_INFO
                assert asked.ext_fields == {"consumerGroup": "CG", "clientId": "10.0.0.1@1", "jstackEnable": "false"}
                direct = create_request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": "CG",
                                                                               "clientId": "10.0.0.1@1",
                                                                               "msgId": offset_id})  # fmt: skip
                r = await admin.invoke(direct)
                assert (r.code, r.body) == (ResponseCode.SUCCESS, b'{"consumeResult":"CR_SUCCESS"}')
                forwarded = on_direct.requests[0]
                assert forwarded.ext_fields is not None and forwarded.ext_fields["brokerName"] == "broker-a"
                # the whole stored record, as selectOneMessageByOffset gives it
                assert forwarded.body is not None and b"direct" in forwarded.body
                assert int.from_bytes(forwarded.body[:4], "big") == len(forwarded.body)
            finally:
                await consumer.close()

    run(scenario())


def test_producer_info_consume_queue_and_housekeeping(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            for i in range(3):
                await client.invoke(send_v2("T", f"m{i}".encode(), queue_id=0))
            await settle(broker)
            await client.invoke(heartbeat("10.0.0.1@1", "", {}, producer_groups=("PG",)))
            # mqadmin producer
            r = await client.invoke(create_request(RequestCode.GET_ALL_PRODUCER_INFO, {"brokerAddr": ""}))
            info = json_compat.loads(r.body)["data"]["PG"][0]
            assert info["clientId"] == "10.0.0.1@1" and info["remoteIP"].startswith("/127.0.0.1:")
            assert info["language"] == "JAVA" and info["lastUpdateTimestamp"] > 0
            # mqadmin queryCq
            q = {"topic": "T", "queueId": 0, "index": 1, "count": 5, "consumerGroup": "CG"}
            r = await client.invoke(create_request(RequestCode.QUERY_CONSUME_QUEUE, q))
            body = json_compat.loads(r.body)
            assert (r.code, body["maxQueueIndex"], body["minQueueIndex"]) == (ResponseCode.SUCCESS, 3, 0)
            assert body["filterData"] == "CG@T is not online!" and len(body["queueData"]) == 2
            unit = broker.store.find_consume_queue("T", 0).get_unit(1)  # type: ignore[union-attr]
            assert body["queueData"][0]["physicOffset"] == unit.phys  # type: ignore[union-attr]
            r = await client.invoke(create_request(RequestCode.QUERY_CONSUME_QUEUE, {**q, "queueId": 7}))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "7@T is not exist!")
            # mqadmin cleanUnusedTopic / cleanExpiredCQ / deleteExpiredCommitLog
            broker.topic_config_manager.delete_topic_config("T")
            r = await client.invoke(create_request(RequestCode.CLEAN_UNUSED_TOPIC))
            assert r.code == ResponseCode.SUCCESS and broker.store.find_consume_queue("T", 0, create=False) is None
            for code in (RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, RequestCode.DELETE_EXPIRED_COMMITLOG):
                assert (await client.invoke(create_request(code))).code == ResponseCode.SUCCESS
            # exportConfigs reads these two
            lines = await _config_lines(client)
            assert "filterServerNums=0" in lines and "useTLS=false" in lines

    run(scenario())


def test_clean_expired_consume_queue_drops_queues_below_the_commit_log(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            await client.invoke(send_v2("Old", b"x", queue_id=0))
            await client.invoke(send_v2("New", b"y", queue_id=0))
            await settle(broker)
            old = broker.store.find_consume_queue("Old", 0, create=False)
            new = broker.store.find_consume_queue("New", 0, create=False)
            assert old is not None and new is not None
            # as if retention had removed the commit-log file holding Old's only message
            broker.store.get_min_phy_offset = lambda: new.max_physic_offset - 1  # type: ignore[method-assign]
            r = await client.invoke(create_request(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE))
            assert r.code == ResponseCode.SUCCESS
            assert broker.store.find_consume_queue("Old", 0, create=False) is None
            assert broker.store.find_consume_queue("New", 0, create=False) is new

    run(scenario())


def test_name_server_config_get_and_update(tmp_path: Path) -> None:
    async def scenario() -> None:
        ctl = NamesrvController("127.0.0.1", 0, kv_config_path=tmp_path / "kvConfig.json")
        ctl.processor.config["configStorePath"] = str(tmp_path / "namesrv.properties")  # an update writes it
        await ctl.start()
        client = RemotingClient(ctl.address)
        try:
            r = await client.invoke(create_request(RequestCode.GET_NAMESRV_CONFIG))
            lines = (r.body or b"").decode().splitlines()
            assert f"kvConfigPath={tmp_path / 'kvConfig.json'}" in lines and "orderMessageEnable=false" in lines
            ctl.kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
            body = b"orderMessageEnable=true\nnoSuchKey=1\nclusterTest=maybe\n"
            r = await client.invoke(create_request(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body))
            assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
            r = await client.invoke(create_request(RequestCode.GET_NAMESRV_CONFIG))
            lines = (r.body or b"").decode().splitlines()
            assert "orderMessageEnable=true" in lines and "clusterTest=false" in lines
            assert not any(x.startswith("noSuchKey") for x in lines)
            # NettyServerConfig, as Java's name server lists it, with the port it listens on
            assert f"listenPort={ctl.port}" in lines and "serverWorkerThreads=8" in lines
            assert "serverPooledByteBufAllocatorEnable=true" in lines and len(lines) == 20
        finally:
            await client.close()
            await ctl.stop()

    run(scenario())


def test_view_broker_stats_data_counts_puts_by_topic_and_gets_by_group(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            await client.invoke(send_v2("T", b"before", queue_id=0))
            await settle(broker)
        # a restarted broker counts what is put from then on (statsAll's InMsg24Hour, exportMetrics)
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:

            def view(name: str, key: str) -> RemotingCommand:
                return create_request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})

            r = await client.invoke(view("TOPIC_PUT_NUMS", "T"))  # nothing put since start: no stats yet
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <TOPIC_PUT_NUMS> <T> not exist")
            for i in range(4):
                await client.invoke(send_v2("T", f"m{i}".encode(), queue_id=i % 2))
            await settle(broker)
            r = await client.invoke(view("TOPIC_PUT_NUMS", "T"))  # as Java's item: there from the first put on
            body = json_compat.loads(r.body)
            assert [body[k]["sum"] for k in ("statsMinute", "statsHour", "statsDay")] == [0, 0, 0]
            broker._sample_stats(time.monotonic() + 10)  # the controller's, as the minute's first snapshot is due
            r = await client.invoke(view("TOPIC_PUT_NUMS", "T"))
            body = json_compat.loads(r.body)
            assert r.code == ResponseCode.SUCCESS
            # as Java: the minute's first snapshot came, the hour's and the day's not yet
            assert [body[k]["sum"] for k in ("statsMinute", "statsHour", "statsDay")] == [4, 0, 0]
            assert body["statsMinute"]["tps"] == pytest.approx(0.4)
            pulled = await client.invoke(pull_request("CG", "T", 0, 0))
            assert pulled.code == ResponseCode.SUCCESS
            broker.group_get_stats.sample(time.monotonic() + 20)  # the minute's next snapshot
            body = json_compat.loads((await client.invoke(view("GROUP_GET_NUMS", "T@CG"))).body)
            assert body["statsMinute"]["sum"] == 3  # "before" and two of the new ones are in queue 0
            r = await client.invoke(view("GROUP_GET_NUMS", "T@Nobody"))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <GROUP_GET_NUMS> <T@Nobody> not exist")

    run(scenario())


def test_keyed_stats_windows_as_java_samples_them() -> None:
    """4.9.4's StatsItem: per window, snapshots on its own schedule from start, a 0 snapshot an interval before
    a key's first; sum = last - first snapshot, TPS over their time apart; 7, 7 and 25 snapshots kept."""
    stats = KeyedStats({"T": 10, "Old": 3}, now=-9.0)  # the start's sampling found nothing to sample
    stats.add("T", 5)
    assert not stats.exists("Old") and stats.exists("T")
    stats.sample(now=-4.0)
    assert stats.snapshot("T") == [(0, 0.0)] * 3  # counted, no snapshot due yet
    stats.sample(now=1.0)  # the minute's first after the start
    assert stats.snapshot("T") == [(5, 5 / 10), (0, 0.0), (0, 0.0)]
    stats.add("T", 5)
    for t in range(11, 602, 5):  # the controller calls every 5 s
        if t == 591:
            stats.add("T", 6)
        stats.sample(now=float(t))
    (m_sum, m_tps), (h_sum, h_tps), (d_sum, _) = stats.snapshot("T")
    assert (m_sum, m_tps) == (6, 6 / 60)  # the last 7 minute snapshots: 16 at 591 and 601, 10 before
    assert (h_sum, h_tps) == (16, 16 / 600) and d_sum == 0  # the hour's first at 591, the day's not yet


def test_consume_stats_carry_the_groups_consume_tps(tmp_path: Path) -> None:
    """GET_CONSUME_STATS (mqadmin consumerProgress's "Consume TPS", its group list's #TPS): the last minute's
    TPS of GROUP_GET_NUMS of each topic of the group, summed (AdminBrokerProcessor.getConsumeStats)."""
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            for i in range(6):
                await client.invoke(send_v2("T", f"m{i}".encode(), queue_id=i % 2))
                await client.invoke(send_v2("U", f"u{i}".encode(), queue_id=0))
            await settle(broker)
            for topic, queue_id in (("T", 0), ("T", 1), ("U", 0)):
                assert (await client.invoke(pull_request("CG", topic, queue_id, 0))).code == ResponseCode.SUCCESS
                await client.invoke(_commit("CG", topic, queue_id, 3 if topic == "T" else 6))

            def stats(**header: str) -> dict[str, object]:
                return {"consumerGroup": "CG", **header}

            def tps(topic: str) -> float:
                return broker.group_get_stats.snapshot(f"{topic}@CG")[0][1]

            broker.group_get_stats.sample(time.monotonic() + 10)  # the first snapshot after the gets
            r = await client.invoke(create_request(RequestCode.GET_CONSUME_STATS, stats()))
            body = json_compat.loads(r.body)
            assert body["consumeTps"] == pytest.approx(tps("T") + tps("U")) == pytest.approx((6 + 6) / 10)
            assert len(body["offsetTable"]) == 8  # 4 queues each of T and U
            r = await client.invoke(create_request(RequestCode.GET_CONSUME_STATS, stats(topic="U")))
            assert json_compat.loads(r.body)["consumeTps"] == pytest.approx(tps("U")) == pytest.approx(0.6)
            r = await client.invoke(create_request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "Nobody"}))
            assert json_compat.loads(r.body)["consumeTps"] == 0

    run(scenario())
