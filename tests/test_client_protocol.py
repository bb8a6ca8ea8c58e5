"""The client's requests are the frames the Java 4.9.4 client sent, and it reads the answers a 4.9.4 broker
gave (golden captures under ``remoting-4.9.4/``).

The client talks to a fake remoting layer that records each request and answers with the captured
response; a request is compared with the captured request header by header field (values and the
Java ``HashMap`` order of ``extFields``) and body, only clocks and ids that differ per run aside.
"""

from __future__ import annotations

import asyncio
import types
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from conftest import GOLDEN
from rocketq.client.client_config import ClientConfig
from rocketq.client.client_instance import ClientInstance
from rocketq.client.errors import InvalidMessageError
from rocketq.client.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
    build_subscription,
)
from rocketq.client.message_queue import MessageQueue
from rocketq.client.mq_client_api import decode_records
from rocketq.client.producer import CommunicationMode, Producer, _encode_batch, new_message, properties_string
from rocketq.client.pull_api import PullAPIWrapper, build_sys_flag
from rocketq.client.pull_result import PullStatus
from rocketq.client.route import parse_topic_route, route_to_publish_info, route_to_subscribe_info
from rocketq.client.send_result import SendStatus
from rocketq.common import json_compat
from rocketq.common.heartbeat import build_subscription_data
from rocketq.remoting.codes import RequestCode
from rocketq.remoting.command import RemotingCommand

FRAMES = GOLDEN / "remoting-4.9.4"
BROKER = "127.0.0.2:10911"


def frame(name: str) -> RemotingCommand:
    return RemotingCommand.decode((FRAMES / name).read_bytes())


class FakeRemoting:
    """Records requests; answers each with the captured response registered for its code."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, RemotingCommand]] = []
        self.answers: dict[int, RemotingCommand] = {}

    def answer(self, code: int, response_file: str) -> None:
        self.answers[code] = frame(response_file)

    async def invoke(self, request: RemotingCommand, timeout: float = 3.0, *,
                     addr: str | None = None) -> RemotingCommand:  # fmt: skip
        self.sent.append((addr or "", request))
        response = self.answers[request.code]
        response.opaque = request.opaque
        return response

    async def invoke_oneway(self, request: RemotingCommand, *, addr: str | None = None) -> None:
        self.sent.append((addr or "", request))

    async def close(self) -> None:
        return None

    async def close_connection(self, addr: str) -> None:
        return None


def make_instance() -> tuple[ClientInstance, FakeRemoting]:
    config = ClientConfig(namesrv_addr="127.0.0.2:9876", client_ip="192.0.2.2", instance_name="wire")
    instance = ClientInstance(config, "192.0.2.2@wire-consumer")
    fake = FakeRemoting()
    instance.remoting = fake  # type: ignore[assignment]
    instance.api.remoting = fake  # type: ignore[assignment]
    instance.broker_addr_table["broker-a"] = {0: BROKER}
    return instance, fake


def same_request(ours: RemotingCommand, captured: RemotingCommand, *, except_fields: tuple[str, ...] = ()) -> None:
    assert ours.code == captured.code
    assert ours.flag == captured.flag
    assert ours.language == captured.language
    assert ours.version == captured.version
    ext = dict(ours.ext_fields or {})
    want = dict(captured.ext_fields or {})
    for name in except_fields:
        assert name in ext, name
        ext[name] = want[name]
    assert list(ext) == list(want)  # the Java HashMap order
    assert ext == want
    assert ours.body == captured.body


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


# -- producer -----------------------------------------------------------------------------------------


def wire_message(body: str, *, tags: str, keys: str, uniq: str, props: dict[str, str] | None = None) -> Any:
    msg = new_message("WireTopic", body, tags=tags, keys=keys, properties=props)
    msg.properties["UNIQ_KEY"] = uniq
    return msg


def test_send_is_the_captured_send_message_v2() -> None:
    async def go() -> None:
        instance, fake = make_instance()
        fake.answer(RequestCode.SEND_MESSAGE_V2, "005-json-SEND_MESSAGE_V2-response.bin")
        producer = Producer("WireProducerGroup", config=instance.config, _instance=instance)
        msg = wire_message("hello wire 0", tags="TagA", keys="wire-k1 wire-k2", uniq="C0000202628F5FFD2B276C3F23B50000",
                           props={"color": "red"})  # fmt: skip
        result = await producer._send_kernel(msg, MessageQueue("WireTopic", "broker-a", 0), CommunicationMode.SYNC, 3)
        addr, request = fake.sent[0]
        assert addr == BROKER
        same_request(request, frame("005-json-SEND_MESSAGE_V2-request.bin"), except_fields=("g",))
        assert result is not None
        assert result.status is SendStatus.SEND_OK
        assert result.msg_id == "C0000202628F5FFD2B276C3F23B50000"
        assert result.offset_msg_id == "7F00000200002A9F0000000000000000"
        assert result.message_queue == MessageQueue("WireTopic", "broker-a", 0)
        assert result.queue_offset == 0
        assert result.region_id == "DefaultRegion" and result.trace_on

    run(go())


def test_oneway_send_sets_the_oneway_bit_and_waits_for_nothing() -> None:
    async def go() -> None:
        instance, fake = make_instance()
        producer = Producer("WireProducerGroup", config=instance.config, _instance=instance)
        msg = wire_message("hello oneway", tags="TagC", keys="wire-oneway", uniq="C0000202628F5FFD2B276C3F24090002")
        result = await producer._send_kernel(msg, MessageQueue("WireTopic", "broker-a", 0), CommunicationMode.ONEWAY, 3)
        assert result is None
        same_request(fake.sent[0][1], frame("006-json-SEND_MESSAGE_V2-oneway-request.bin"), except_fields=("g",))

    run(go())


def test_smart_msg_off_sends_send_message_with_long_field_names() -> None:
    async def go() -> None:
        instance, fake = make_instance()
        fake.answer(RequestCode.SEND_MESSAGE, "030-rocketmq-SEND_MESSAGE-response.bin")
        producer = Producer("WireProducerGroup", config=instance.config, _instance=instance, send_smart_msg=False)
        msg = new_message("WireTopicBin", "hello wire 0", tags="TagA", keys="wire-k1 wire-k2",
                          properties={"color": "red"})  # fmt: skip
        msg.properties["UNIQ_KEY"] = "C000020263515FFD2B276C3F44D90000"
        await producer._send_kernel(msg, MessageQueue("WireTopicBin", "broker-a", 0), CommunicationMode.SYNC, 3)
        ours = fake.sent[0][1]
        captured = frame("030-rocketmq-SEND_MESSAGE-request.bin")
        ext = dict(ours.ext_fields or {})
        ext["bornTimestamp"] = captured.header["bornTimestamp"]
        assert ours.code == RequestCode.SEND_MESSAGE
        assert ext == captured.ext_fields
        assert ours.body == captured.body

    run(go())


def test_batch_body_and_header_are_the_captured_send_batch_message() -> None:
    async def go() -> None:
        instance, fake = make_instance()
        fake.answer(RequestCode.SEND_BATCH_MESSAGE, "007-json-SEND_BATCH_MESSAGE-response.bin")
        producer = Producer("WireProducerGroup", config=instance.config, _instance=instance)
        msgs = [wire_message(f"batch {i}", tags="TagD", keys=f"wire-b{i}", props={"i": str(i)},
                             uniq=f"C0000202628F5FFD2B276C3F240B000{3 + i}") for i in range(2)]  # fmt: skip
        batch = producer._make_batch(msgs)
        result = await producer._send_kernel(batch, MessageQueue("WireTopic", "broker-a", 1), CommunicationMode.SYNC, 3,
                                             batch_items=msgs)  # fmt: skip
        same_request(fake.sent[0][1], frame("007-json-SEND_BATCH_MESSAGE-request.bin"), except_fields=("g",))
        assert result is not None
        assert result.msg_id == "C0000202628F5FFD2B276C3F240B0003,C0000202628F5FFD2B276C3F240B0004"
        assert result.offset_msg_id.count(",") == 1
        assert result.queue_offset == 1 and result.message_queue.queue_id == 1

    run(go())


def test_properties_go_out_in_java_hashmap_order() -> None:
    props = {"TAGS": "TagA", "KEYS": "k", "WAIT": "true", "color": "red", "UNIQ_KEY": "U"}
    assert properties_string(props) == "color\x01red\x02KEYS\x01k\x02UNIQ_KEY\x01U\x02WAIT\x01true\x02TAGS\x01TagA"
    msgs = [new_message("T", "b", tags="x")]
    assert _encode_batch(msgs).endswith(b"WAIT\x01true\x02TAGS\x01x")


def test_big_bodies_are_compressed_with_the_zlib_flags() -> None:
    async def go() -> None:
        instance, fake = make_instance()
        fake.answer(RequestCode.SEND_MESSAGE_V2, "005-json-SEND_MESSAGE_V2-response.bin")
        producer = Producer("WireProducerGroup", config=instance.config, _instance=instance)
        body = b"compress me " * 1000
        await producer._send_kernel(new_message("WireTopic", body), MessageQueue("WireTopic", "broker-a", 0),
                                    CommunicationMode.SYNC, 3)  # fmt: skip
        request = fake.sent[0][1]
        assert request.header.get_int("f") == 0x301  # compressed + zlib, as 4.9.4 stores it (sysFlag 769)
        assert request.body is not None and zlib.decompress(request.body) == body
        await producer._send_kernel(new_message("WireTopic", b"x" * 4095), MessageQueue("WireTopic", "broker-a", 0),
                                    CommunicationMode.SYNC, 3)  # fmt: skip
        assert fake.sent[1][1].header.get_int("f") == 0

    run(go())


# -- consumer -----------------------------------------------------------------------------------------


def test_heartbeat_body_is_the_captured_consumer_heartbeat() -> None:
    data = HeartbeatData(
        "192.0.2.2@wire-consumer",
        [ConsumerData("WireConsumerGroup", ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                      ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, [
                          SubscriptionData("%RETRY%WireConsumerGroup", sub_version=1795307277930),
                          SubscriptionData("WireTopic", sub_version=1795307277928)])],
        [ProducerData("CLIENT_INNER_PRODUCER")],
    )  # fmt: skip
    assert data.encode() == frame("011-json-HEART_BEAT-consumer-request.bin").body
    producer_only = HeartbeatData("192.0.2.2@WireAdmin", [], [ProducerData("CLIENT_INNER_PRODUCER")])
    assert producer_only.encode() == frame("009-json-HEART_BEAT-producer-request.bin").body


def test_heartbeat_request_of_an_instance() -> None:
    async def go() -> None:
        instance, fake = make_instance()
        fake.answer(RequestCode.HEART_BEAT, "011-json-HEART_BEAT-consumer-response.bin")
        await instance.api.send_heartbeat(BROKER, instance.heartbeat_data())
        request = fake.sent[0][1]
        captured = frame("011-json-HEART_BEAT-consumer-request.bin")
        assert (request.code, request.flag, request.ext_fields) == (captured.code, captured.flag, None)
        assert json_compat.loads(request.body or b"")["clientID"] == "192.0.2.2@wire-consumer"

    run(go())


def test_tag_expressions() -> None:
    sub = build_subscription("T", "TagA || TagB")
    assert sub.tags_set == ["TagA", "TagB"] and sub.code_set == [2598919, 2598920]
    # as Java's FilterAPI: only "*" or nothing is everything; " * " is the tag "*", a blank expression no tag (the
    # client refuses that at once: Java's consumer would silently receive nothing)
    assert build_subscription("T", "*").tags_set == [] and build_subscription("T", "").sub_string == "*"
    spaced = build_subscription("T", " * ")
    assert (spaced.sub_string, spaced.tags_set) == (" * ", ["*"])
    with pytest.raises(InvalidMessageError, match="holds no tag"):
        build_subscription("T", " ")
    blank = build_subscription_data("T", " ")  # as a broker reads a pull's subscription
    assert (blank.sub_string, blank.tags_set) == (" ", [])
    assert build_subscription("T", None).sub_string == "*"
    assert build_subscription("T", "a||b|| a ").tags_set == ["a", "b"]


def test_pull_request_and_found_response() -> None:
    async def go() -> None:
        instance, fake = make_instance()
        fake.answer(RequestCode.PULL_MESSAGE, "015-json-PULL_MESSAGE-found-response.bin")
        api = PullAPIWrapper(instance, "WireConsumerGroup")
        mq = MessageQueue("WireTopic", "broker-a", 0)
        result = await api.pull_kernel(mq, None, "TAG", 1795307278176, 0, 32, build_sys_flag(False, True, False), 0,
                                       15.0, 30.0)  # fmt: skip
        same_request(fake.sent[0][1], frame("015-json-PULL_MESSAGE-found-request.bin"))
        result = api.process_pull_result(mq, result, build_subscription("WireTopic", "TagA || TagC"))
        assert result.status is PullStatus.FOUND
        assert (result.next_begin_offset, result.min_offset, result.max_offset) == (3, 0, 3)
        # The tx message (TagT) is filtered out on the client, as Java re-checks tags.
        assert [m.body for m in result.messages] == [b"hello wire 0", b"hello oneway"]
        assert result.messages[0].properties["MAX_OFFSET"] == "3"
        assert result.messages[0].properties["MIN_OFFSET"] == "0"

    run(go())


def test_consumer_calls_are_the_captured_frames() -> None:
    async def go() -> None:
        instance, fake = make_instance()
        api = instance.api
        fake.answer(RequestCode.QUERY_CONSUMER_OFFSET, "014-json-QUERY_CONSUMER_OFFSET-response.bin")
        fake.answer(RequestCode.GET_CONSUMER_LIST_BY_GROUP, "013-json-GET_CONSUMER_LIST_BY_GROUP-response.bin")
        fake.answer(RequestCode.CONSUMER_SEND_MSG_BACK, "016-json-CONSUMER_SEND_MSG_BACK-response.bin")
        fake.answer(RequestCode.UNREGISTER_CLIENT, "018-json-UNREGISTER_CLIENT-response.bin")
        fake.answer(RequestCode.UPDATE_CONSUMER_OFFSET, "022-json-UPDATE_CONSUMER_OFFSET-response.bin")
        fake.answer(RequestCode.GET_MAX_OFFSET, "020-json-GET_MAX_OFFSET-response.bin")
        fake.answer(RequestCode.GET_MIN_OFFSET, "019-json-GET_MIN_OFFSET-response.bin")
        fake.answer(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, "021-json-SEARCH_OFFSET_BY_TIMESTAMP-response.bin")

        checks: list[tuple[str, Callable[[], Any], Any]] = [
            ("014-json-QUERY_CONSUMER_OFFSET-request.bin",
             lambda: api.query_consumer_offset(BROKER, "WireConsumerGroup", "WireTopic", 0), 0),
            ("013-json-GET_CONSUMER_LIST_BY_GROUP-request.bin",
             lambda: api.get_consumer_id_list(BROKER, "WireConsumerGroup"), ["192.0.2.2@wire-consumer"]),
            ("017-json-UPDATE_CONSUMER_OFFSET-oneway-request.bin",
             lambda: api.update_consumer_offset(BROKER, "WireConsumerGroup", "WireTopic", 0, 3, oneway=True), None),
            ("018-json-UNREGISTER_CLIENT-request.bin",
             lambda: api.unregister_client(BROKER, "192.0.2.2@wire-consumer", None, "WireConsumerGroup"), None),
        ]  # fmt: skip
        for name, call, expected in checks:
            fake.sent.clear()
            assert await call() == expected
            same_request(fake.sent[0][1], frame(name))
        # Offsets of the pull consumer (the capture adds the lite pull's "ReqT" marker, which is not sent here).
        for name, call, expected in [
            ("020-json-GET_MAX_OFFSET-request.bin", lambda: api.get_max_offset(BROKER, "WireTopic", 0), 3),
            ("019-json-GET_MIN_OFFSET-request.bin", lambda: api.get_min_offset(BROKER, "WireTopic", 0), 0),
            ("021-json-SEARCH_OFFSET_BY_TIMESTAMP-request.bin",
             lambda: api.search_offset(BROKER, "WireTopic", 0, 1795307224376), 0),
            ("022-json-UPDATE_CONSUMER_OFFSET-request.bin",
             lambda: api.update_consumer_offset(BROKER, "WirePullGroup", "WireTopic", 0, 1), None),
        ]:  # fmt: skip
            fake.sent.clear()
            assert await call() == expected
            ours = fake.sent[0][1]
            want = dict(frame(name).ext_fields or {})
            want.pop("ReqT")
            assert ours.ext_fields == want and list(ours.ext_fields) == list(want)

    run(go())


def test_send_back_is_the_captured_consumer_send_msg_back() -> None:
    async def go() -> None:
        instance, fake = make_instance()
        fake.answer(RequestCode.CONSUMER_SEND_MSG_BACK, "016-json-CONSUMER_SEND_MSG_BACK-response.bin")
        pulled = decode_records(frame("015-json-PULL_MESSAGE-found-response.bin").body)[0]
        pulled.commit_log_offset = 217
        pulled.properties["UNIQ_KEY"] = "C0000202628F5FFD2B276C3F23FE0001"
        await instance.api.consumer_send_message_back(BROKER, pulled, "WireConsumerGroup", 0, 16)
        same_request(fake.sent[0][1], frame("016-json-CONSUMER_SEND_MSG_BACK-request.bin"))

    run(go())


def test_query_and_view_answers_decode() -> None:
    async def go() -> None:
        instance, fake = make_instance()
        fake.answer(RequestCode.QUERY_MESSAGE, "023-json-QUERY_MESSAGE-response.bin")
        fake.answer(RequestCode.VIEW_MESSAGE_BY_ID, "024-json-VIEW_MESSAGE_BY_ID-response.bin")
        found = await instance.api.query_message(BROKER, "WireTopic", "wire-k2", 32, 0, 2**63 - 1)
        ours = fake.sent[0][1]
        captured = frame("023-json-QUERY_MESSAGE-request.bin")
        assert ours.ext_fields == captured.ext_fields
        assert any("wire-k2" in (m.keys or "") for m in found)
        viewed = await instance.api.view_message(BROKER, 0)
        assert fake.sent[1][1].ext_fields == frame("024-json-VIEW_MESSAGE_BY_ID-request.bin").ext_fields
        assert viewed.commit_log_offset == 0 and viewed.body == b"hello wire 0"

    run(go())


# -- routes -------------------------------------------------------------------------------------------


def test_route_of_the_capture() -> None:
    route = parse_topic_route(frame("002-json-GET_ROUTEINFO_BY_TOPIC-ok-response.bin").body or b"")
    info = route_to_publish_info("TBW102", route)
    assert [mq.queue_id for mq in info.message_queues] == list(range(8))
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.2:10911"}
    standin = route.copy_with_queue_nums(4)
    assert [mq.queue_id for mq in route_to_publish_info("NewTopic", standin).message_queues] == [0, 1, 2, 3]
    assert len(route_to_subscribe_info("TBW102", route)) == 8
    legacy = parse_topic_route(b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.5:10911",1:"10.0.0.6:10911"},'
                               b'"brokerName":"b","cluster":"c"}],"queueDatas":[{"brokerName":"b","perm":4,'
                               b'"readQueueNums":2,"topicSynFlag":0,"writeQueueNums":2}]}')  # fmt: skip
    assert legacy.broker_datas[0].broker_addrs == {0: "10.0.0.5:10911", 1: "10.0.0.6:10911"}
    assert route_to_publish_info("T", legacy).message_queues == []  # read-only: no publish queue
    assert len(route_to_subscribe_info("T", legacy)) == 2


def test_order_topic_conf_replaces_the_queue_data() -> None:
    route = parse_topic_route(b'{"brokerDatas":[],"queueDatas":[],"orderTopicConf":"b1:2;b2:1"}')
    info = route_to_publish_info("T", route)
    assert info.order_topic
    assert [(mq.broker_name, mq.queue_id) for mq in info.message_queues] == [("b1", 0), ("b1", 1), ("b2", 0)]


def test_round_robin_skips_the_broker_that_failed() -> None:
    info = route_to_publish_info("T", parse_topic_route(
        b'{"brokerDatas":[{"brokerAddrs":{"0":"a:1"},"brokerName":"a","cluster":"c"},'
        b'{"brokerAddrs":{"0":"b:1"},"brokerName":"b","cluster":"c"}],"queueDatas":['
        b'{"brokerName":"a","perm":6,"readQueueNums":2,"writeQueueNums":2},'
        b'{"brokerName":"b","perm":6,"readQueueNums":2,"writeQueueNums":2}]}'))  # fmt: skip
    seen = [info.select_one_message_queue().queue_id for _ in range(4)]
    assert len(seen) == 4
    assert all(info.select_one_message_queue("a").broker_name == "b" for _ in range(10))
    assert all(info.select_one_message_queue(None, lambda name: name != "b").broker_name == "a" for _ in range(10))
    # Every broker isolated: plain round robin still answers.
    assert info.select_one_message_queue(None, lambda name: False).broker_name in ("a", "b")


def test_notify_consumer_ids_changed_wakes_the_rebalance() -> None:
    async def go() -> None:
        instance, _ = make_instance()
        conn = types.SimpleNamespace(remote_address=BROKER)
        request = frame("012-json-NOTIFY_CONSUMER_IDS_CHANGED-request.bin")
        assert request.is_oneway
        assert instance._on_consumer_ids_changed(conn, request) is None  # type: ignore[arg-type]
        assert instance._rebalance_wakeup.is_set()

    run(go())
