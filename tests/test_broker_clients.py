"""Client management over a real socket: heartbeats, consumer lists and the NOTIFY_CONSUMER_IDS_CHANGED push,
unregistering, offsets, orderly locks, send-back to the retry topic and the DLQ (spec §6.5–§6.8, §6.10, §6.12)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from broker_support import (
    Recorder,
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
from rocketq.common import json_compat
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request
from rocketq.remoting.transport import RemotingClient


def _list_request(group: str) -> RemotingCommand:
    return create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})


def test_heartbeat_consumer_list_and_notify_push(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker:
            on_notify = Recorder()
            pushed, got_push = on_notify.requests, on_notify.arrived
            first = RemotingClient(broker.broker_addr)
            first.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
            second = RemotingClient(broker.broker_addr)
            try:
                r = await first.invoke(heartbeat("10.0.0.1@1", "CG", {"T": "*", "%RETRY%CG": "*"},
                                                 producer_groups=("PG",)))  # fmt: skip
                assert (r.code, r.ext_fields, r.remark) == (ResponseCode.SUCCESS, None, None)
                # The heartbeat created the group's retry topic (1 queue, perm 6).
                retry = broker.topic_config_manager.select_topic_config("%RETRY%CG")
                assert retry is not None and (retry.read_queue_nums, retry.perm) == (1, 6)
                await asyncio.wait_for(got_push.wait(), 2)  # the first client of a group is a change too
                got_push.clear()
                pushed.clear()
                r = await first.invoke(_list_request("CG"))
                assert r.ext_fields == {} and json_compat.loads(r.body) == {"consumerIdList": ["10.0.0.1@1"]}
                await second.invoke(heartbeat("10.0.0.2@2", "CG", {"T": "*", "%RETRY%CG": "*"},
                                              producer_groups=("PG2",)))  # fmt: skip
                await asyncio.wait_for(got_push.wait(), 2)
                assert pushed[0].ext_fields == {"consumerGroup": "CG"} and pushed[0].is_oneway
                ids = json_compat.loads((await first.invoke(_list_request("CG"))).body)["consumerIdList"]
                assert sorted(ids) == ["10.0.0.1@1", "10.0.0.2@2"]
                # Same heartbeat again: nothing changed, no push.
                got_push.clear()
                await second.invoke(heartbeat("10.0.0.2@2", "CG", {"T": "*", "%RETRY%CG": "*"}))
                await asyncio.sleep(0.2)
                assert not got_push.is_set()
                conns = await first.invoke(create_request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                                          {"consumerGroup": "CG"}))  # fmt: skip
                body = json_compat.loads(conns.body)
                assert {c["clientId"] for c in body["connectionSet"]} == {"10.0.0.1@1", "10.0.0.2@2"}
                assert body["messageModel"] == "CLUSTERING" and set(body["subscriptionTable"]) == {"T", "%RETRY%CG"}
                producers = await first.invoke(create_request(RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                                              {"producerGroup": "PG"}))  # fmt: skip
                assert json_compat.loads(producers.body)["connectionSet"][0]["clientId"] == "10.0.0.1@1"
                # Closing a connection forgets its client and notifies the rest of the group.
                got_push.clear()
                await second.close()
                await asyncio.wait_for(got_push.wait(), 2)
                ids = json_compat.loads((await first.invoke(_list_request("CG"))).body)["consumerIdList"]
                assert ids == ["10.0.0.1@1"]
                # a producer group whose connections closed is kept, empty (4.9.4's doChannelCloseEvent)
                producers = await first.invoke(create_request(RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                                              {"producerGroup": "PG2"}))  # fmt: skip
                assert (producers.code, json_compat.loads(producers.body)) == (ResponseCode.SUCCESS,
                                                                               {"connectionSet": []})  # fmt: skip
                fields = {"clientID": "10.0.0.1@1", "consumerGroup": "CG", "producerGroup": ""}
                unregister = create_request(RequestCode.UNREGISTER_CLIENT, fields)
                r = await first.invoke(unregister)
                assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {})
                r = await first.invoke(_list_request("CG"))
                assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "no consumer for this group, CG")
                r = await first.invoke(create_request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                                      {"consumerGroup": "CG"}))  # fmt: skip
                assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
            finally:
                await first.close()
                await second.close()

    run(scenario())


def test_heartbeat_accepts_cpp_ordinals_and_numeric_strings(tmp_path: Path) -> None:
    body = (b'{"clientID":"1.2.3.4@9#DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
            b'"groupName":"CPPG","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":"17953",'
            b'"topic":"%RETRY%CPPG"},{"codeSet":[0,0],"subString":"TagA || TagB","subVersion":"17953",'
            b'"tagsSet":["TagA","TagB"],"topic":"TopicTest"}]}]}\n')  # fmt: skip

    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            r = await client.invoke(create_request(RequestCode.HEART_BEAT, None, body))
            assert r.code == ResponseCode.SUCCESS
            info = broker.consumer_manager.get_consumer_group_info("CPPG")
            assert info is not None and info.message_model == "CLUSTERING" and info.consume_type == "CONSUME_PASSIVELY"
            assert info.find_subscription_data("TopicTest").sub_version == 17953  # type: ignore[union-attr]
            check = create_request(RequestCode.CHECK_CLIENT_CONFIG, None, json_compat.dumps_bytes(
                {"clientId": "c", "group": "CPPG", "subscriptionData": {"topic": "T", "subString": "a > 1",
                                                                       "expressionType": "SQL92"}}))  # fmt: skip
            r = await client.invoke(check)
            assert r.code == ResponseCode.SYSTEM_ERROR
            assert r.remark == "The broker does not support consumer to filter message by SQL92"
            tag = create_request(RequestCode.CHECK_CLIENT_CONFIG, None, json_compat.dumps_bytes(
                {"clientId": "c", "group": "CPPG", "subscriptionData": {"topic": "T", "subString": "*"}}))  # fmt: skip
            assert (await client.invoke(tag)).code == ResponseCode.SUCCESS

    run(scenario())


def test_query_and_update_consumer_offsets(tmp_path: Path) -> None:
    def query(group: str, topic: str, queue_id: int) -> RemotingCommand:
        return create_request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic,
                                                                  "queueId": queue_id})  # fmt: skip

    def update(group: str, topic: str, queue_id: int, offset: int) -> RemotingCommand:
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
        return create_request(RequestCode.UPDATE_CONSUMER_OFFSET, fields)

    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            # Never committed, queue never lost data: 0 (golden capture 014).
            r = await client.invoke(query("g", "Fresh", 0))
            assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})
            r = await client.invoke(update("g", "Fresh", 0, 5))
            assert (r.code, r.ext_fields) == (ResponseCode.SUCCESS, {})
            assert (await client.invoke(query("g", "Fresh", 0))).ext_fields == {"offset": "5"}
            await client.invoke(update("g", "Fresh", 0, -1))  # ali-ons sends -1: ignored
            assert (await client.invoke(query("g", "Fresh", 0))).ext_fields == {"offset": "5"}
            await client.invoke_oneway(update("g", "Fresh", 1, 9))
            for _ in range(100):
                if broker.consumer_offset_manager.query_offset("g", "Fresh", 1) == 9:
                    break
                await asyncio.sleep(0.01)
            assert (await client.invoke(query("g", "Fresh", 1))).ext_fields == {"offset": "9"}
            fields = {"consumerGroup": "g", "topic": "Fresh", "queueId": 2, "setZeroIfNotFound": False}
            no_zero = create_request(RequestCode.QUERY_CONSUMER_OFFSET, fields)
            r = await client.invoke(no_zero)
            assert r.code == ResponseCode.QUERY_NOT_FOUND
            assert r.remark == "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
            stats = await client.invoke(create_request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "g"}))
            assert stats.code == ResponseCode.SUCCESS and stats.body is not None

    run(scenario())


def test_lock_and_unlock_batch_mq(tmp_path: Path) -> None:
    def body(client_id: str, *queues: int) -> bytes:
        mqs = [{"brokerName": "broker-a", "queueId": q, "topic": "T"} for q in queues]
        return json_compat.dumps_bytes({"clientId": client_id, "consumerGroup": "OG", "mqSet": mqs,
                                        "onlyThisBroker": False})  # fmt: skip

    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            r = await client.invoke(create_request(RequestCode.LOCK_BATCH_MQ, None, body("c1", 0, 1)))
            assert r.code == ResponseCode.SUCCESS
            got = json_compat.loads(r.body)["lockOKMQSet"]
            assert sorted(mq["queueId"] for mq in got) == [0, 1]
            assert got[0] == {"brokerName": "broker-a", "queueId": 0, "topic": "T"}
            r = await client.invoke(create_request(RequestCode.LOCK_BATCH_MQ, None, body("c2", 1, 2)))
            assert [mq["queueId"] for mq in json_compat.loads(r.body)["lockOKMQSet"]] == [2]
            r = await client.invoke(create_request(RequestCode.UNLOCK_BATCH_MQ, None, body("c1", 1)))
            assert r.code == ResponseCode.SUCCESS
            r = await client.invoke(create_request(RequestCode.LOCK_BATCH_MQ, None, body("c2", 1, 2)))
            assert sorted(mq["queueId"] for mq in json_compat.loads(r.body)["lockOKMQSet"]) == [1, 2]
            # A group holding locks is an orderly group: its retry sends go to the DLQ (spec §6.1 step 5).
            assert not broker.rebalance_lock_manager.is_lock_all_expired("OG")

    run(scenario())


def test_send_back_to_retry_then_dlq(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            sent = await client.invoke(send_v2("Work", b"job", properties=props(TAGS="T", KEYS="job-1")))
            await settle(broker)
            original = decode_records((await client.invoke(pull_request("SBG", "Work", 0, 0))).body)[0]

            def back(offset: int, delay: int, max_times: int = 16) -> RemotingCommand:
                return create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
                    "offset": offset, "group": "SBG", "delayLevel": delay, "originMsgId": original.uniq_key,
                    "originTopic": "Work", "unitMode": False, "maxReconsumeTimes": max_times})  # fmt: skip

            r = await client.invoke(back(original.commit_log_offset, 0))
            assert (r.code, r.ext_fields, r.remark) == (ResponseCode.SUCCESS, None, None)
            await settle(broker)
            # Delay level 3 + reconsumeTimes: the copy waits in SCHEDULE_TOPIC_XXXX queue 2 for %RETRY%SBG.
            scheduled = decode_records((await client.invoke(pull_request("x", "SCHEDULE_TOPIC_XXXX", 2, 0))).body)
            assert len(scheduled) == 1
            s = scheduled[0]
            assert s.reconsume_times == 1 and s.body == b"job"
            assert s.properties["REAL_TOPIC"] == "%RETRY%SBG" and s.properties["DELAY"] == "3"
            assert s.properties["RETRY_TOPIC"] == "Work" and s.properties["WAIT"] == "false"
            assert s.properties["ORIGIN_MESSAGE_ID"] == (sent.ext_fields or {})["msgId"]
            assert s.born_timestamp == original.born_timestamp
            # Past maxReconsumeTimes (reconsumeTimes 1 >= 1): straight to %DLQ%SBG, no delay.
            r = await client.invoke(back(s.commit_log_offset, 0, max_times=1))
            assert r.code == ResponseCode.SUCCESS
            await settle(broker)
            dlq = decode_records((await client.invoke(pull_request("x", "%DLQ%SBG", 0, 0))).body)
            assert len(dlq) == 1 and dlq[0].reconsume_times == 2 and dlq[0].properties["DELAY"] == "0"
            assert dlq[0].properties["ORIGIN_MESSAGE_ID"] == (sent.ext_fields or {})["msgId"]
            # delayLevel -1: DLQ at once.
            assert (await client.invoke(back(original.commit_log_offset, -1))).code == ResponseCode.SUCCESS
            r = await client.invoke(back(10**9, 0))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "look message by offset failed, 1000000000")
            # A client's fallback send to the retry topic at the limit (4.9.4: reconsumeTimes >= max) also ends in
            # the DLQ; one below it goes to the retry topic.
            for times in (16, 15):
                fallback = send_v2("%RETRY%SBG", b"job", properties=props(RETRY_TOPIC="Work"), j=times, l=16)
                r = await client.invoke(fallback)
                assert r.code == ResponseCode.SUCCESS
            await settle(broker)
            assert len(decode_records((await client.invoke(pull_request("x", "%DLQ%SBG", 0, 0))).body)) == 3
            retried = decode_records((await client.invoke(pull_request("x", "%RETRY%SBG", 0, 0))).body)
            assert [m.reconsume_times for m in retried if m.body == b"job"][-1:] == [15]

    run(scenario())


def test_delayed_and_retried_messages_come_back_when_due(tmp_path: Path) -> None:
    async def scenario() -> None:
        levels = "1s 2s " + " ".join(["1h"] * 16)
        async with running_broker(tmp_path / "s", messageDelayLevel=levels) as broker, client_of(broker) as client:
            t0 = time.monotonic()
            r = await client.invoke(send_v2("Later", b"in a second", properties=props(TAGS="T", DELAY="1")))
            assert r.code == ResponseCode.SUCCESS
            got = await client.invoke(pull_request("g", "Later", 0, 0, suspend_ms=5000), timeout=10)
            waited = time.monotonic() - t0
            msgs = decode_records(got.body)
            assert [m.body for m in msgs] == [b"in a second"] and 0.8 <= waited < 5.0
            # Delivered with the parked message's properties, DELAY and REAL_* included (as Java stores them).
            assert msgs[0].properties["REAL_TOPIC"] == "Later" and msgs[0].properties["DELAY"] == "1"
            assert broker.store.delay_offset_manager.query_offset(1) == 1
            # A send-back with delay level 2 comes back on %RETRY%<group> after 2 s, reconsumeTimes 1.
            fields = {"offset": msgs[0].commit_log_offset, "group": "LG", "delayLevel": 2, "originTopic": "Later"}
            back = create_request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)
            assert (await client.invoke(back)).code == ResponseCode.SUCCESS
            retried = await client.invoke(pull_request("LG", "%RETRY%LG", 0, 0, suspend_ms=6000), timeout=10)
            again = decode_records(retried.body)
            assert [(m.body, m.reconsume_times) for m in again] == [(b"in a second", 1)]
            assert again[0].properties["RETRY_TOPIC"] == "Later"

    run(scenario())
