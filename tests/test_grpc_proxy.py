"""RocketMQ 5's gRPC endpoint (rocketq.proxy): the official Python client of RocketMQ 5 against a broker, the
protocol's answers to bad requests, and POP consumption's bookkeeping on its own."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import grpc
import pytest

from broker_support import run, running_broker, settle
from js_support import node_packages
from rocketq.broker.broker_controller import BrokerController, BrokerStartError
from rocketq.common.codec import decode_record
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import Message
from rocketq.proxy import grpc_service
from rocketq.proxy.grpc_service import consistent_hash
from rocketq.proxy.pop import AckStatus, PopService
from rocketq.proxy.schema import SERVICE, pb
from rocketq.store.config_json import SubscriptionGroupConfig, TopicConfig
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig

TOPIC = "GrpcTopic"
HERE = Path(__file__).resolve().parent
#: Where `make install` puts the official client (apart from the venv: see the Makefile).
CLIENT_DIR = HERE.parent / ".venv" / "rocketmq5-client"


def _topic(broker: BrokerController, name: str = TOPIC, read: int = 4, write: int = 4, perm: int = 6) -> None:
    broker.topic_config_manager.update_topic_config(TopicConfig(name, read, write, perm))


async def _official_client(endpoint: str, plan: dict[str, Any], home: Path) -> dict[str, Any]:
    """Run tests/grpc_client_script.py (the official client) with *plan*; its JSON answer."""
    assert (CLIENT_DIR / "rocketmq" / "v5").is_dir(), \
        f"the official RocketMQ 5 Python client is not in {CLIENT_DIR}: run `make install`"  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(CLIENT_DIR)}
    return await _client_process([sys.executable, str(HERE / "grpc_client_script.py"), endpoint, json.dumps(plan)],
                                 home, env)  # fmt: skip


async def _client_process(argv: list[str], home: Path, env: dict[str, str] | None = None,
                          cwd: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """Run a client program with its own ``HOME`` (clients log there), at most 90 s; the JSON of its last line."""
    home.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(*argv, cwd=cwd, env={**(env or os.environ), "HOME": str(home)},
                                                stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    except TimeoutError:
        proc.kill()
        raise
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])


def _stored(broker: BrokerController, topic: str) -> list[Any]:
    """Every message of *topic* on the broker, queue by queue."""
    found = []
    config = broker.topic_config_manager.select_topic_config(topic)
    queues = config.read_queue_nums if config is not None else 1
    for q in range(queues):
        got = broker.store.get_message("check", topic, q, 0, 1000)
        found += [decode_record(raw) for raw in got.messages]
    return found


# --- the official client ----------------------------------------------------------------------------------------
def test_the_official_rocketmq5_client_sends_and_receives_through_the_grpc_endpoint(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "b", grpcServerPort="0") as broker:
            _topic(broker)
            endpoint = f"127.0.0.1:{broker.broker_config.grpc_server_port}"
            messages = [{"topic": TOPIC, "body": f"a{i}", "tag": "TagA", "keys": [f"k{i}", "both"],
                         "props": {"color": "red", "n": str(i)}} for i in range(4)]  # fmt: skip
            messages += [{"topic": TOPIC, "body": f"b{i}", "tag": "TagB"} for i in range(2)]
            messages += [{"topic": TOPIC, "body": f"g{i}", "tag": "TagA", "group": "order-7"} for i in range(3)]
            sent = await _official_client(endpoint, {"produce": messages}, tmp_path / "home")
            assert sent["errors"] == [] and len(sent["sent"]) == 9
            await settle(broker)
            stored = {m.body.decode(): m for m in _stored(broker, TOPIC)}
            assert sorted(stored) == sorted(m["body"] for m in messages)
            a0 = stored["a0"]
            assert a0.properties["TAGS"] == "TagA" and sorted(a0.properties["KEYS"].split(" ")) == ["both", "k0"]
            assert a0.properties["color"] == "red" and a0.properties["PGROUP"] == TOPIC
            assert a0.properties["UNIQ_KEY"] == sent["sent"][0]["message_id"]
            assert broker.store.query_message(TOPIC, "both", 32, 0, 2**62).messages  # keys are indexed
            # One message group, one queue: the one the proxy's consistent hash picks.
            group_queues = {stored[f"g{i}"].queue_id for i in range(3)}
            assert group_queues == {consistent_hash(java_string_hash("order-7"), 4)}
            assert stored["g0"].properties["__SHARDINGKEY"] == "order-7"
            # A simple consumer with a tag filter gets the TagA messages, each once, and acknowledges them.
            got = await _official_client(endpoint, {"consume": {"group": "GrpcGroup", "topic": TOPIC, "tag": "TagA",
                                                                "want": 7, "seconds": 20}}, tmp_path / "home")
            assert got["errors"] == []
            bodies = sorted(m["body"] for m in got["received"])
            assert bodies == sorted([f"a{i}" for i in range(4)] + [f"g{i}" for i in range(3)])
            first = next(m for m in got["received"] if m["body"] == "a1")
            assert first["tag"] == "TagA" and first["keys"] == ["both", "k1"] and first["attempt"] == 1
            assert first["props"] == {"color": "red", "n": "1"}
            assert first["message_id"] == sent["sent"][1]["message_id"]
            assert next(m for m in got["received"] if m["body"] == "g2")["group"] == "order-7"
            # Acknowledged: the group's offsets are past them (what consumerProgress shows), nothing comes again.
            offsets = broker.consumer_offset_manager.query_offsets("GrpcGroup", TOPIC)
            assert sum(offsets.values()) == sum(broker.store.get_max_offset_in_queue(TOPIC, q) for q in range(4))
            again = await _official_client(endpoint, {"consume": {"group": "GrpcGroup", "topic": TOPIC,
                                                                  "want": 1, "seconds": 3, "await": 1}},
                                           tmp_path / "home")  # fmt: skip
            assert again["received"] == []

    run(scenario(), 180)


def test_a_message_not_acknowledged_comes_again_then_goes_to_the_dead_letter_queue(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "b", grpcServerPort="0") as broker:
            _topic(broker)
            # Two attempts in all (retryMaxTimes + 1).
            broker.subscription_group_manager.update_subscription_group_config(
                SubscriptionGroupConfig("RetryGroup", retry_max_times=1))
            endpoint = f"127.0.0.1:{broker.broker_config.grpc_server_port}"
            home = tmp_path / "home"
            sent = await _official_client(endpoint, {"produce": [{"topic": TOPIC, "body": "once"}]}, home)
            assert len(sent["sent"]) == 1
            # Received, then made visible again after 1 s instead of being acknowledged: twice.
            plan = {"consume": {"group": "RetryGroup", "topic": TOPIC, "want": 1, "seconds": 20, "change_to": 1}}
            first = await _official_client(endpoint, plan, home)
            assert [(m["body"], m["attempt"]) for m in first["received"]] == [("once", 1)]
            second = await _official_client(endpoint, plan, home)
            assert [(m["body"], m["attempt"]) for m in second["received"]] == [("once", 2)]
            # Out of attempts: the next receive moves it to %DLQ%RetryGroup instead of delivering it.
            third = await _official_client(endpoint, {"consume": {"group": "RetryGroup", "topic": TOPIC, "want": 1,
                                                                  "seconds": 5, "await": 2}}, home)  # fmt: skip
            assert third["received"] == []
            await settle(broker)
            dead = _stored(broker, "%DLQ%RetryGroup")
            assert [m.body for m in dead] == [b"once"]
            assert dead[0].properties["UNIQ_KEY"] == sent["sent"][0]["message_id"]
            # Done with: the group's offset is past it.
            queue = next(q for q in range(4) if broker.store.get_max_offset_in_queue(TOPIC, q))
            assert broker.consumer_offset_manager.query_offset("RetryGroup", TOPIC, queue) == 1

    run(scenario(), 180)


def test_transactions_and_delivery_times_from_the_official_client(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "b", grpcServerPort="0", timerPrecisionMs="100") as broker:
            _topic(broker)
            endpoint = f"127.0.0.1:{broker.broker_config.grpc_server_port}"
            home = tmp_path / "home"
            start = time.time()
            sent = await _official_client(endpoint, {"produce": [
                {"topic": TOPIC, "body": "committed", "tx": "commit"},
                {"topic": TOPIC, "body": "rolled back", "tx": "rollback"},
                {"topic": TOPIC, "body": "later", "delay_s": 3},
                {"topic": TOPIC, "body": "now"},
            ]}, home)  # fmt: skip
            assert sent["errors"] == [] and len(sent["sent"]) == 4
            got = await _official_client(endpoint, {"consume": {"group": "TxGroup", "topic": TOPIC, "want": 3,
                                                                "seconds": 25}}, home)  # fmt: skip
            assert sorted(m["body"] for m in got["received"]) == ["committed", "later", "now"]
            await settle(broker)
            later = next(m for m in _stored(broker, TOPIC) if m.body == b"later")
            assert later.store_timestamp >= int(start * 1000) + 2000  # put in its queue when due, not before

    run(scenario(), 180)


def test_the_official_push_consumer_retries_a_failed_message(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "b", grpcServerPort="0") as broker:
            _topic(broker)
            endpoint = f"127.0.0.1:{broker.broker_config.grpc_server_port}"
            plan = {"produce": [{"topic": TOPIC, "body": f"p{i}"} for i in range(5)],
                    "push": {"group": "PushGroup", "topic": TOPIC, "want": 6, "fail": ["p2"], "seconds": 30,
                             "linger": 2}}  # fmt: skip
            got = await _official_client(endpoint, plan, tmp_path / "home")
            assert got["errors"] == []
            deliveries = sorted((m["body"], m["attempt"]) for m in got["received"])
            # p2 failed once: the consumer hid it for its first back-off step, and it came again.
            assert deliveries == [("p0", 1), ("p1", 1), ("p2", 1), ("p2", 2), ("p3", 1), ("p4", 1)]
            offsets = broker.consumer_offset_manager.query_offsets("PushGroup", TOPIC)
            assert sum(offsets.values()) == 5  # every one acknowledged in the end

    run(scenario(), 120)


def test_a_fifo_group_gets_a_message_group_in_order_and_gives_up_on_a_message_into_the_dlq(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "b", grpcServerPort="0") as broker:
            _topic(broker)
            # An ordered group (5.x's consumeMessageOrderly) with two attempts a message.
            broker.subscription_group_manager.update_subscription_group_config(SubscriptionGroupConfig(
                "FifoGroup", retry_max_times=1, extra={"consumeMessageOrderly": True}))  # fmt: skip
            endpoint = f"127.0.0.1:{broker.broker_config.grpc_server_port}"
            plan = {"produce": [{"topic": TOPIC, "body": f"f{i}", "group": "order-1"} for i in range(5)],
                    "push": {"group": "FifoGroup", "topic": TOPIC, "want": 7, "fail": ["f1"], "fail_always": ["f2"],
                             "seconds": 40, "linger": 2}}  # fmt: skip
            got = await _official_client(endpoint, plan, tmp_path / "home")
            assert got["errors"] == []
            # In order: a failed message is tried again before the next one; f2 fails twice and is given up.
            assert [m["body"] for m in got["received"]] == ["f0", "f1", "f1", "f2", "f2", "f3", "f4"]
            await settle(broker)
            assert [m.body for m in _stored(broker, "%DLQ%FifoGroup")] == [b"f2"]
            offsets = broker.consumer_offset_manager.query_offsets("FifoGroup", TOPIC)
            assert sum(offsets.values()) == 5

    run(scenario(), 120)


def test_the_broker_asks_a_grpc_producer_about_an_open_transaction(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "b", grpcServerPort="0", transactionTimeOut="500",
                                  transactionCheckInterval="500") as broker:  # fmt: skip
            _topic(broker)
            endpoint = f"127.0.0.1:{broker.broker_config.grpc_server_port}"
            plan = {"produce": [{"topic": TOPIC, "body": "decided later", "tx": "open"}],
                    "checker": "commit", "linger": 20, "checks": 1}  # fmt: skip
            producing = asyncio.ensure_future(_official_client(endpoint, plan, tmp_path / "home"))
            # While it waits, the producer is in the broker's producer table, under its topic.
            for _ in range(100):
                if broker.producer_manager.get_available_channel(TOPIC) is not None:
                    break
                await asyncio.sleep(0.1)
            assert broker.producer_manager.get_available_channel(TOPIC) is not None
            sent = await producing
            assert sent["errors"] == [] and sent["checked"] == ["decided later"]
            # Committed by the check's answer: a consumer gets it. It is in the consumer table while it runs
            # (what consumerConnection lists), and leaves it when it ends.
            consuming = asyncio.ensure_future(_official_client(endpoint, {"consume": {
                "group": "CheckGroup", "topic": TOPIC, "want": 2, "seconds": 6}}, tmp_path / "home"))  # fmt: skip
            seen = False
            while not consuming.done() and not seen:
                group = broker.consumer_manager.consumer_table.get("CheckGroup")
                seen = group is not None and bool(group.channel_info_table)
                await asyncio.sleep(0.05)
            got = await consuming
            assert seen and [m["body"] for m in got["received"]] == ["decided later"]
            assert broker.consumer_manager.consumer_table.get("CheckGroup") is None

    run(scenario(), 120)


def test_the_official_rocketmq5_nodejs_client_through_the_grpc_endpoint(tmp_path: Path) -> None:
    """A second implementation of the protocol: rocketmq-client-nodejs (tests/js/rocketmq5_roundtrip.js)."""
    js_dir = node_packages("rocketmq-client-nodejs")

    async def scenario() -> None:
        async with running_broker(tmp_path / "b", grpcServerPort="0") as broker:
            _topic(broker)
            # One message from the remoting side first: the Node.js consumer gets it too, tag and keys included.
            put = broker.store.put_message(Message(TOPIC, b"from remoting", 0, {"TAGS": "TagN", "KEYS": "r1"}), 2)
            assert put.ok
            endpoint = f"127.0.0.1:{broker.broker_config.grpc_server_port}"
            got = await _client_process(["node", str(js_dir / "rocketmq5_roundtrip.js"), endpoint, TOPIC, "NodeGroup",
                                         "3", "4"], tmp_path / "home", cwd=js_dir)  # fmt: skip
            assert len(got["sent"]) == 3
            assert sorted(m["body"] for m in got["received"]) == ["from remoting", "node 0", "node 1", "node 2"]
            node1 = next(m for m in got["received"] if m["body"] == "node 1")
            assert node1["tag"] == "TagN" and node1["keys"] == ["node-1"] and node1["props"] == {"lang": "js"}
            assert node1["attempt"] == 1 and node1["messageId"] == got["sent"][1]["messageId"]
            assert next(m for m in got["received"] if m["body"] == "from remoting")["keys"] == ["r1"]
            stored = {m.body: m for m in _stored(broker, TOPIC)}
            assert stored[b"node 2"].properties["lang"] == "js"
            assert stored[b"node 2"].properties["UNIQ_KEY"] == got["sent"][2]["messageId"]

    run(scenario(), 120)


# --- the protocol, call by call ---------------------------------------------------------------------------------
class _Stub:
    """Calls of MessagingService through this project's own schema."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel

    async def unary(self, method: str, request: Any, response_type: Any) -> Any:
        call = self.channel.unary_unary(f"/{SERVICE}/{method}", request_serializer=type(request).SerializeToString,
                                        response_deserializer=response_type.FromString)  # fmt: skip
        return await call(request, metadata=(("x-mq-client-id", "test-client"),), timeout=10)

    async def receive(self, request: Any, timeout: float = 30) -> list[Any]:
        call = self.channel.unary_stream(f"/{SERVICE}/ReceiveMessage",
                                         request_serializer=type(request).SerializeToString,
                                         response_deserializer=pb.ReceiveMessageResponse.FromString)  # fmt: skip
        return [r async for r in call(request, metadata=(("x-mq-client-id", "test-client"),), timeout=timeout)]


def _message(body: bytes = b"x", **system: Any) -> Any:
    m = pb.Message(body=body)
    m.topic.name = TOPIC
    m.system_properties.message_id = system.pop("message_id", "01ABCDEF")
    for key, value in system.items():
        setattr(m.system_properties, key, value)
    return m


def test_the_endpoints_answers_to_good_and_bad_requests(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "b", grpcServerPort="0") as broker:
            _topic(broker)
            _topic(broker, "HalfRead", read=4, write=2)
            _topic(broker, "ReadOnly", perm=4)
            disabled = SubscriptionGroupConfig(group_name="Disabled", consume_enable=False)
            broker.subscription_group_manager.update_subscription_group_config(disabled)
            port = broker.broker_config.grpc_server_port
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = _Stub(channel)
                # Routes: this broker's queues, at the address the client used; permissions as the proxy's.
                asked = pb.QueryRouteRequest()
                asked.topic.name = TOPIC
                asked.endpoints.scheme = pb.AddressScheme.DOMAIN_NAME
                asked.endpoints.addresses.add(host="localhost", port=port)
                route = await stub.unary("QueryRoute", asked, pb.QueryRouteResponse)
                assert route.status.code == pb.Code.OK
                assert [(q.id, q.permission) for q in route.message_queues] == \
                    [(i, pb.Permission.READ_WRITE) for i in range(4)]  # fmt: skip
                assert route.message_queues[0].broker.name == "broker-a"
                assert route.message_queues[0].broker.endpoints.addresses[0].host == "localhost"
                assert set(route.message_queues[0].accept_message_types) == \
                    {pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION}
                asked.topic.name = "HalfRead"
                route = await stub.unary("QueryRoute", asked, pb.QueryRouteResponse)
                assert [q.permission for q in route.message_queues] == [pb.Permission.READ] * 2 + \
                    [pb.Permission.READ_WRITE] * 2  # fmt: skip
                asked.topic.name = "NoSuchTopic"
                route = await stub.unary("QueryRoute", asked, pb.QueryRouteResponse)
                assert route.status.code == pb.Code.TOPIC_NOT_FOUND and not route.message_queues
                # Sends the proxy refuses, each with its code; nothing stored.
                bad = {
                    pb.Code.MESSAGE_BODY_EMPTY: _message(b""),
                    pb.Code.ILLEGAL_MESSAGE_ID: _message(message_id=""),
                    pb.Code.ILLEGAL_MESSAGE_TAG: _message(tag="a||b"),
                    pb.Code.ILLEGAL_MESSAGE_GROUP: _message(message_group="g" * 64),
                }
                system_key = _message()
                system_key.user_properties["UNIQ_KEY"] = "mine"
                bad[pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY] = system_key
                # the proxy's own limits: control characters as javaIsoControl (a tab too), at most a day of
                # delay, an hour of transaction recovery
                bad[pb.Code.ILLEGAL_MESSAGE_TAG] = _message(tag="a\tb")
                late = _message()
                late.system_properties.delivery_timestamp.FromMilliseconds(int(time.time() * 1000) + 2 * 86_400_000)
                bad[pb.Code.ILLEGAL_DELIVERY_TIME] = late
                slow_tx = _message(message_type=pb.MessageType.TRANSACTION)
                slow_tx.system_properties.orphaned_transaction_recovery_duration.FromSeconds(3601)
                bad[pb.Code.BAD_REQUEST] = slow_tx
                for code, message in bad.items():
                    answer = await stub.unary("SendMessage", pb.SendMessageRequest(messages=[message]),
                                              pb.SendMessageResponse)  # fmt: skip
                    assert answer.status.code == code, (pb.Code.Name(code), answer)
                no_topic = _message()
                no_topic.topic.name = "NoSuchTopic"
                answer = await stub.unary("SendMessage", pb.SendMessageRequest(messages=[no_topic]),
                                          pb.SendMessageResponse)  # fmt: skip
                assert answer.status.code == pb.Code.TOPIC_NOT_FOUND
                assert broker.store.get_max_phy_offset() == 0
                # A good one: the answer carries the client's id and the queue offset.
                answer = await stub.unary("SendMessage", pb.SendMessageRequest(messages=[_message(b"ok", tag="T")]),
                                          pb.SendMessageResponse)  # fmt: skip
                assert answer.status.code == pb.Code.OK
                assert answer.entries[0].message_id == "01ABCDEF" and answer.entries[0].offset == 0
                # Receive: an invisible time under the proxy's 10 s minimum is refused.
                receive = pb.ReceiveMessageRequest(batch_size=4)
                receive.group.name = "G1"
                receive.message_queue.topic.name = TOPIC
                receive.invisible_duration.FromSeconds(1)
                answers = await stub.receive(receive)
                assert answers[0].status.code == pb.Code.ILLEGAL_INVISIBLE_TIME
                receive.invisible_duration.FromSeconds(30)
                answers = await stub.receive(receive)
                got = [a.message for a in answers if a.HasField("message")]
                assert [m.body for m in got] == [b"ok"]
                assert [a.status.code for a in answers if a.HasField("status")] == [pb.Code.OK]
                assert answers[-1].HasField("delivery_timestamp")
                digest = got[0].system_properties.body_digest
                assert digest.type == pb.DigestType.CRC32 and digest.checksum == f"{zlib.crc32(b'ok'):08X}"
                # As 5.x's proxy: no system topic or system group for a client, a group that may not consume is
                # refused, at most 32 messages a receive, a read-only topic takes no send.
                for system_topic in ("TBW102", "RMQ_SYS_TRANS_HALF_TOPIC", "SCHEDULE_TOPIC_XXXX"):
                    asked.topic.name = system_topic
                    route = await stub.unary("QueryRoute", asked, pb.QueryRouteResponse)
                    assert route.status.code == pb.Code.ILLEGAL_TOPIC and "system topic" in route.status.message
                    sneak = _message(b"no")
                    sneak.topic.name = system_topic
                    answer = await stub.unary("SendMessage", pb.SendMessageRequest(messages=[sneak]),
                                              pb.SendMessageResponse)  # fmt: skip
                    assert answer.status.code == pb.Code.ILLEGAL_TOPIC
                for group, code in (("CID_RMQ_SYS_TRANS", pb.Code.ILLEGAL_CONSUMER_GROUP),
                                    ("Disabled", pb.Code.FORBIDDEN)):  # fmt: skip
                    refused_receive = pb.ReceiveMessageRequest(batch_size=4)
                    refused_receive.group.name = group
                    refused_receive.message_queue.topic.name = TOPIC
                    refused_receive.invisible_duration.FromSeconds(30)
                    assert (await stub.receive(refused_receive))[0].status.code == code, group
                refused_receive.group.name, refused_receive.batch_size = "G1", 33
                assert (await stub.receive(refused_receive))[0].status.code == pb.Code.BAD_REQUEST
                read_only = _message(b"ro")
                read_only.topic.name = "ReadOnly"
                answer = await stub.unary("SendMessage", pb.SendMessageRequest(messages=[read_only]),
                                          pb.SendMessageResponse)  # fmt: skip
                assert answer.status.code == pb.Code.FORBIDDEN and "no writable queue" in answer.status.message
                # a topic of one message type (its message.type attribute) takes no other
                fifo = broker.topic_config_manager.select_topic_config("HalfRead")
                fifo.extra["attributes"] = {"message.type": "FIFO"}
                normal = _message(b"normal", message_type=pb.MessageType.NORMAL)
                normal.topic.name = "HalfRead"
                answer = await stub.unary("SendMessage", pb.SendMessageRequest(messages=[normal]),
                                          pb.SendMessageResponse)  # fmt: skip
                assert answer.status.code == pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
                # Acknowledgements: a made-up handle, then the real one twice.
                ack = pb.AckMessageRequest()
                ack.group.name, ack.topic.name = "G1", TOPIC
                ack.entries.add(message_id="x", receipt_handle="not a handle")
                answer = await stub.unary("AckMessage", ack, pb.AckMessageResponse)
                assert answer.status.code == pb.Code.INVALID_RECEIPT_HANDLE
                del ack.entries[:]
                ack.entries.add(message_id="01ABCDEF", receipt_handle=got[0].system_properties.receipt_handle)
                assert (await stub.unary("AckMessage", ack, pb.AckMessageResponse)).status.code == pb.Code.OK
                assert (await stub.unary("AckMessage", ack, pb.AckMessageResponse)).status.code == \
                    pb.Code.INVALID_RECEIPT_HANDLE  # fmt: skip
                # Settings: a producer is told the body size limit and the retry policy.
                telemetry = channel.stream_stream(f"/{SERVICE}/Telemetry",
                                                  request_serializer=pb.TelemetryCommand.SerializeToString,
                                                  response_deserializer=pb.TelemetryCommand.FromString)  # fmt: skip
                hello = pb.TelemetryCommand()
                hello.settings.client_type = pb.ClientType.PRODUCER
                hello.settings.publishing.topics.add(name=TOPIC)
                stream = telemetry(iter([hello]), metadata=(("x-mq-client-id", "test-client"),))
                reply = await stream.read()
                assert reply.status.code == pb.Code.OK
                assert reply.settings.publishing.max_body_size == 4 * 1024 * 1024
                assert reply.settings.backoff_policy.max_attempts == 3
                assert reply.settings.backoff_policy.HasField("exponential_backoff")
                stream.cancel()
                # What rocketq does not serve says so.
                pull = channel.unary_unary(f"/{SERVICE}/PullMessage", request_serializer=lambda _: b"",
                                           response_deserializer=lambda b: b)  # fmt: skip
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await pull(None, timeout=5)
                assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED

    run(scenario(), 120)


def test_handles_received_with_auto_renew_are_renewed_while_the_client_is_here(tmp_path: Path) -> None:
    """As 5.x's proxy: a receive with auto_renew (the push consumer's) gets 60 s, and the proxy renews the handle
    ahead of its visibility while the client is connected, so a slow listener's message is not delivered again;
    the client acknowledges with the handle it was given. Renewal rounds are run here by hand, at times ahead."""
    async def scenario() -> None:
        async with running_broker(tmp_path / "b", grpcServerPort="0") as broker:
            _topic(broker, read=1, write=1)
            service = broker.grpc_service
            port = broker.broker_config.grpc_server_port
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = _Stub(channel)
                assert (await stub.unary("SendMessage", pb.SendMessageRequest(messages=[_message(b"slow")]),
                                         pb.SendMessageResponse)).status.code == pb.Code.OK  # fmt: skip
                receive = pb.ReceiveMessageRequest(batch_size=1, auto_renew=True)
                receive.group.name, receive.message_queue.topic.name = "G1", TOPIC
                got = [a.message for a in await stub.receive(receive) if a.HasField("message")]
                held = got[0].system_properties.receipt_handle
                assert got[0].system_properties.invisible_duration.seconds == 60
                t0 = int(time.time() * 1000)
                assert service.renew_due(t0 + 20_000) == 0  # not near its visibility yet
                assert service.renew_due(t0 + 55_000) == 1  # renewed: visible at +115 s now, not +60 s
                again, _dead = service.pop.pop("G1", TOPIC, [0], 1, 10_000, t0 + 70_000)
                assert again == []
                ack = pb.AckMessageRequest()
                ack.group.name, ack.topic.name = "G1", TOPIC
                ack.entries.add(message_id="01ABCDEF", receipt_handle=held)  # the handle the client was given
                assert (await stub.unary("AckMessage", ack, pb.AckMessageResponse)).status.code == pb.Code.OK
                assert service.renew_due(t0 + 110_000) == 0 and not service._renewing

    run(scenario(), 60)


def test_a_waiting_receive_is_answered_when_a_message_arrives_and_before_its_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    # A receive looks again on its own only every 10 s here: an answer sooner is the arrival's doing.
    monkeypatch.setattr(grpc_service, "POLL_STEP_S", 10.0)

    async def scenario() -> None:
        async with running_broker(tmp_path / "b", grpcServerPort="0") as broker:
            _topic(broker)
            async with grpc.aio.insecure_channel(f"127.0.0.1:{broker.broker_config.grpc_server_port}") as channel:
                stub = _Stub(channel)
                receive = pb.ReceiveMessageRequest(batch_size=4)
                receive.group.name = "Waiter"
                receive.message_queue.topic.name = TOPIC
                receive.invisible_duration.FromSeconds(30)
                receive.long_polling_timeout.FromSeconds(20)
                # Nothing there: the answer comes before the call's own deadline (which would raise), saying so.
                answers = await stub.receive(receive, timeout=3)
                assert [a.status.code for a in answers if a.HasField("status")] == [pb.Code.MESSAGE_NOT_FOUND]
                # A receive that waits is woken by the message's arrival, not by its polling time.
                waiting = asyncio.ensure_future(stub.receive(receive))
                await asyncio.sleep(0.5)
                sent_at = time.monotonic()
                answer = await stub.unary("SendMessage", pb.SendMessageRequest(messages=[_message(b"wake")]),
                                          pb.SendMessageResponse)  # fmt: skip
                assert answer.status.code == pb.Code.OK
                answers = await asyncio.wait_for(waiting, 15)
                assert [a.message.body for a in answers if a.HasField("message")] == [b"wake"]
                assert time.monotonic() - sent_at < 3

    run(scenario(), 60)


def test_the_grpc_endpoint_is_refused_where_it_cannot_serve(tmp_path: Path) -> None:
    async def scenario() -> None:
        with pytest.raises(BrokerStartError, match="aclEnable"):
            async with running_broker(tmp_path / "acl", grpcServerPort="0", aclEnable="true"):
                pass
        async with running_broker(tmp_path / "first", grpcServerPort="0") as first:
            taken = first.broker_config.grpc_server_port
            with pytest.raises(BrokerStartError, match="grpcServerPort"):
                async with running_broker(tmp_path / "second", grpcServerPort=str(taken)):
                    pass
        async with running_broker(tmp_path / "off") as off:
            assert off.grpc_service is None and off.broker_config.grpc_server_port == -1

    run(scenario(), 60)


def test_children_forked_while_the_endpoint_serves_all_start(tmp_path: Path) -> None:
    """While this process serves gRPC, a child started with fork (a ``preexec_fn``, as pyspark starts its Java
    gateway) runs its program: conftest turns gRPC's fork handlers off. With them on, about 1 child in 100 died
    before its exec (grpc/grpc#43055), so 300 children caught it all but about 5% of the time."""
    assert os.environ.get("GRPC_ENABLE_FORK_SUPPORT", "").lower() in ("0", "false", "no")  # off, as gRPC reads it

    async def scenario() -> None:
        async with running_broker(tmp_path / "store", grpcServerPort="0") as broker:
            port = broker.broker_config.grpc_server_port
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                grpc.channel_ready_future(channel).result(timeout=10)  # gRPC's poller at work in this process

                def spawn_all() -> list[int]:
                    codes = []
                    for _ in range(300):
                        child = subprocess.Popen(["/bin/true"], stdin=subprocess.PIPE, preexec_fn=os.getpid)
                        child.stdin.close()  # type: ignore[union-attr]
                        codes.append(child.wait(30))
                    return codes

                codes = await asyncio.to_thread(spawn_all)
            assert codes.count(0) == len(codes), sorted(set(codes))

    run(scenario(), 120)


# --- POP's bookkeeping ------------------------------------------------------------------------------------------
def _store(root: Path) -> MessageStore:
    store = MessageStore(MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=1 << 20,
                                            mapped_file_size_consume_queue=6000))  # fmt: skip
    store.load()
    store.start()
    return store


def _put(store: MessageStore, n: int, queue_id: int = 0, tag: str = "A") -> None:
    for i in range(n):
        assert store.put_message(Message(TOPIC, b"m%d" % i, 0, {"TAGS": tag}), queue_id).ok
    store.wait_dispatched()


def test_pop_hides_acknowledges_and_delivers_again(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    try:
        _put(store, 5)
        pop = PopService(store, "broker-a")
        got, dead = pop.pop("G", TOPIC, [0], 3, 10_000, now_ms=1_000)
        assert [p.message.queue_offset for p in got] == [0, 1, 2] and dead == []
        assert all(p.attempt == 1 for p in got)
        assert store.consumer_offset_manager.query_offset("G", TOPIC, 0) == 0  # nothing acknowledged yet
        # The rest, and then nothing while the first three are hidden.
        assert [p.message.queue_offset for p in pop.pop("G", TOPIC, [0], 8, 10_000, now_ms=1_500)[0]] == [3, 4]
        assert pop.pop("G", TOPIC, [0], 8, 10_000, now_ms=2_000)[0] == []
        assert pop.ack("G", TOPIC, got[0].receipt_handle, now_ms=2_000) == AckStatus.OK
        assert pop.ack("G", TOPIC, got[0].receipt_handle, now_ms=2_000) == AckStatus.INVALID  # once
        assert pop.ack("Other", TOPIC, got[1].receipt_handle, now_ms=2_000) == AckStatus.INVALID
        assert store.consumer_offset_manager.query_offset("G", TOPIC, 0) == 1  # the lowest not acknowledged
        # Offset 2's time made longer; offset 1's runs out: it comes again, a new handle, attempt 2.
        status, handle = pop.change_invisible("G", TOPIC, got[2].receipt_handle, 60_000, now_ms=2_000)
        assert status == AckStatus.OK and handle != got[2].receipt_handle
        assert pop.ack("G", TOPIC, got[1].receipt_handle, now_ms=11_500) == AckStatus.EXPIRED
        again, _ = pop.pop("G", TOPIC, [0], 8, 10_000, now_ms=11_500)
        assert [(p.message.queue_offset, p.attempt) for p in again] == [(1, 2), (3, 2), (4, 2)]
        assert pop.ack("G", TOPIC, got[1].receipt_handle, now_ms=11_600) == AckStatus.INVALID  # superseded
        for p in again:
            assert pop.ack("G", TOPIC, p.receipt_handle, now_ms=11_600) == AckStatus.OK
        assert store.consumer_offset_manager.query_offset("G", TOPIC, 0) == 2  # offset 2 is still out
        assert pop.ack("G", TOPIC, handle, now_ms=12_000) == AckStatus.OK
        assert store.consumer_offset_manager.query_offset("G", TOPIC, 0) == 5
        # Another group has its own offsets: from the queue's start, its first message still there.
        assert len(pop.pop("G2", TOPIC, [0], 8, 10_000, now_ms=12_000)[0]) == 5
    finally:
        store.close()


def test_pop_gives_up_after_the_last_attempt_keeps_fifo_order_and_survives_a_restart(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    try:
        _put(store, 3, queue_id=0)
        _put(store, 2, queue_id=1, tag="B")
        pop = PopService(store, "broker-a")
        got, _ = pop.pop("G", TOPIC, [0, 1], 1, 5_000, now_ms=0, max_attempts=2)
        assert [p.message.queue_offset for p in got] == [0]
        got, dead = pop.pop("G", TOPIC, [0], 1, 5_000, now_ms=6_000, max_attempts=2)
        assert [(p.message.queue_offset, p.attempt) for p in got] == [(0, 2)] and dead == []
        got, dead = pop.pop("G", TOPIC, [0], 1, 5_000, now_ms=12_000, max_attempts=2)
        assert [m.queue_offset for m, _attempts in dead] == [0]  # to the DLQ, for the caller
        assert [p.message.queue_offset for p in got] == [1]
        # A tag filter skips what it does not take, and the group's offset goes past it.
        from rocketq.store.message_filter import TagFilter

        only_a, _ = pop.pop("F", TOPIC, [1], 8, 5_000, now_ms=0, message_filter=TagFilter("A"))
        assert only_a == [] and store.consumer_offset_manager.query_offset("F", TOPIC, 1) == 2
        # FIFO: nothing more from a queue while one of its messages is out; then in order.
        fifo, _ = pop.pop("O", TOPIC, [0], 1, 5_000, now_ms=0, fifo=True)
        assert [p.message.queue_offset for p in fifo] == [0]
        assert pop.pop("O", TOPIC, [0], 4, 5_000, now_ms=1_000, fifo=True)[0] == []
        back, _ = pop.pop("O", TOPIC, [0], 4, 5_000, now_ms=6_000, fifo=True)
        assert [(p.message.queue_offset, p.attempt) for p in back] == [(0, 2)]
        assert pop.ack("O", TOPIC, back[0].receipt_handle, now_ms=6_100) == AckStatus.OK
        assert [p.message.queue_offset for p in pop.pop("O", TOPIC, [0], 4, 5_000, now_ms=6_200, fifo=True)[0]] \
            == [1, 2]  # fmt: skip
        # A restart forgets what was out: it is delivered again from the lowest offset not acknowledged.
        restarted = PopService(store, "broker-a")
        assert [p.message.queue_offset for p in restarted.pop("O", TOPIC, [0], 4, 5_000, now_ms=7_000)[0]] == [1, 2]
    finally:
        store.close()


def test_consistent_hash_keeps_keys_in_place_as_buckets_grow() -> None:
    """Guava's consistentHash: with one bucket more a key stays where it was or moves to the new bucket, and the
    keys spread over the buckets."""
    keys = [java_string_hash(f"group-{i}") for i in range(2000)]
    for n in range(1, 16):
        for key in keys:
            before, after = consistent_hash(key, n), consistent_hash(key, n + 1)
            assert 0 <= before < n and after in (before, n)
    spread = [consistent_hash(k, 8) for k in keys]
    assert min(spread.count(b) for b in range(8)) > 150
