"""The requests mqadmin 4.9 sends a broker for its tools, over a real socket, in the Java tools' frames:
updateBrokerConfig, brokerConsumeStats, cloneGroupOffset, resetOffsetByTime, consumerStatus and consuming a
message directly (the broker passes the call on to the consumer), and the consume time span."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_support import client_of, heartbeat, props, run, running_broker, send_v2, settle
from rocketq.common import json_compat
from rocketq.remoting.codes import LanguageCode, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request, make_response_for
from rocketq.remoting.transport import RemotingClient, RemotingConnection


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
            got: list[RemotingCommand] = []
            arrived = asyncio.Event()

            def on_reset(conn: RemotingConnection, request: RemotingCommand) -> None:
                got.append(request)
                arrived.set()

            consumer = RemotingClient(broker.broker_addr)
            consumer.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, on_reset)
            try:
                await consumer.invoke(heartbeat("10.0.0.1@1", "CG", {"T": "*"}))
                r = await admin.invoke(reset)
                assert r.code == ResponseCode.SUCCESS
                table = json_compat.loads(r.body)["offsetTable"]
                assert {k["queueId"]: v for k, v in table.items()}[0] == 4
                await asyncio.wait_for(arrived.wait(), 5)
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
            asked: list[RemotingCommand] = []

            def on_running_info(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
                asked.append(request)
                return make_response_for(request, ResponseCode.SUCCESS, body=b'{"properties":{"x":"1"}}')

            def on_direct(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
                asked.append(request)
                return make_response_for(request, ResponseCode.SUCCESS, body=b'{"consumeResult":"CR_SUCCESS"}')

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
                assert asked[0].code == RequestCode.GET_CONSUMER_RUNNING_INFO
                assert asked[0].ext_fields == {"consumerGroup": "CG", "clientId": "10.0.0.1@1", "jstackEnable": "false"}
                direct = create_request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": "CG",
                                                                               "clientId": "10.0.0.1@1",
                                                                               "msgId": offset_id})  # fmt: skip
                r = await admin.invoke(direct)
                assert (r.code, r.body) == (ResponseCode.SUCCESS, b'{"consumeResult":"CR_SUCCESS"}')
                forwarded = asked[1]
                assert forwarded.ext_fields is not None and forwarded.ext_fields["brokerName"] == "broker-a"
                # the whole stored record, as selectOneMessageByOffset gives it
                assert forwarded.body is not None and b"direct" in forwarded.body
                assert int.from_bytes(forwarded.body[:4], "big") == len(forwarded.body)
            finally:
                await consumer.close()

    run(scenario())
