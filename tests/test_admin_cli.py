"""``rocketq admin`` against an in-process name server and broker: every verb, tables and ``--json``, errors.

The servers run on an event loop of their own in a background thread (``ServersInThread``), so that the
command line (``rocketq.cli.main.main``, which runs ``asyncio.run``) is called exactly as a user calls it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from broker_support import HOST, Recorder, broker_properties, heartbeat
from conftest import GOLDEN_STORE
from rocketq.broker.broker_config import broker_config_from_properties
from rocketq.broker.broker_controller import BrokerController
from rocketq.cli.main import main
from rocketq.common import json_compat
from rocketq.namesrv.namesrv_controller import NamesrvController
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import create_request, make_response_for
from rocketq.remoting.transport import RemotingClient

_T = TypeVar("_T")
GOLDEN_QUERY = GOLDEN_STORE / "clean" / "mqadmin-queryMsgByKey-shared.txt"


class ServersInThread:
    """A name server and one broker registered with it, served by a loop in a daemon thread."""

    def __init__(self, store: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="admin-test-servers", daemon=True)
        self.thread.start()
        self.store = store
        self.namesrv: NamesrvController | None = None
        self.broker: BrokerController | None = None
        self.client: RemotingClient | None = None

    def call(self, coro: Coroutine[Any, Any, _T], timeout: float = 30.0) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self) -> None:
        self.namesrv = NamesrvController(HOST, 0, kv_config_path=self.store.parent / "kvConfig.json")
        await self.namesrv.start()
        props = broker_properties(self.store, namesrvAddr=self.namesrv.address, brokerName="broker-a")
        self.broker = BrokerController(*broker_config_from_properties(props))
        await self.broker.start()
        self.client = RemotingClient(self.broker.broker_addr)

    async def _stop(self) -> None:
        if self.client is not None:
            await self.client.close()
        if self.broker is not None:
            await self.broker.shutdown()
        if self.namesrv is not None:
            await self.namesrv.stop()

    def start(self) -> None:
        self.call(self._start())

    def stop(self) -> None:
        try:
            self.call(self._stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

    @property
    def ns(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.address

    @property
    def broker_addr(self) -> str:
        assert self.broker is not None
        return self.broker.broker_addr


@pytest.fixture()
def servers(tmp_path: Path) -> Iterator[ServersInThread]:
    s = ServersInThread(tmp_path / "store")
    try:
        s.start()
        yield s
    finally:
        s.stop()


def admin(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["admin", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def admin_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    code, out, err = admin(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_topics_send_query_consume(servers: ServersInThread, capsys: pytest.CaptureFixture[str]) -> None:
    ns = servers.ns
    code, out, err = admin(capsys, "-n", ns, "updateTopic", "-c", "DefaultCluster", "-t", "AdminT", "-r", "3",
                           "-w", "3")  # fmt: skip
    assert code == 0, err
    assert f"create topic to {servers.broker_addr} success." in out and "readQueueNums=3" in out
    route = admin_json(capsys, "-n", ns, "topicRoute", "-t", "AdminT")
    assert route["queueDatas"] == [{"brokerName": "broker-a", "perm": 6, "readQueueNums": 3, "topicSysFlag": 0,
                                    "writeQueueNums": 3}]  # fmt: skip
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": servers.broker_addr}
    code, out, _ = admin(capsys, "-n", ns, "topicRoute", "-t", "AdminT", "-l")
    assert out.splitlines()[0].startswith("#ClusterName") and "broker-a" in out and "Total: 1 broker(s)" in out

    sent = admin_json(capsys, "-n", ns, "sendMessage", "-t", "AdminT", "-p", "héllo", "-c", "TagA", "-k", "k1 k2",
                      "--property", "color=red", "--count", "6")["results"]  # fmt: skip
    assert len(sent) == 6 and {r["sendStatus"] for r in sent} == {"SEND_OK"}
    assert sorted(r["queueId"] for r in sent) == [0, 0, 1, 1, 2, 2]  # round robin over the 3 queues
    code, out, _ = admin(capsys, "-n", ns, "sendMessage", "-t", "AdminT", "-p", "one", "-b", "broker-a", "-i", "2")
    assert out.splitlines()[0].split() == ["#Broker", "Name", "#QID", "#Send", "Result", "#MsgId"]
    assert out.splitlines()[1].split()[:3] == ["broker-a", "2", "SEND_OK"]
    assert servers.call(asyncio.to_thread(servers.broker.store.wait_dispatched, 5.0))  # type: ignore[union-attr]

    stats = admin_json(capsys, "-n", ns, "topicStatus", "-t", "AdminT")["queues"]
    assert [(q["queueId"], q["minOffset"], q["maxOffset"]) for q in stats] == [(0, 0, 2), (1, 0, 2), (2, 0, 3)]
    code, out, _ = admin(capsys, "-n", ns, "topicStatus", "-t", "AdminT")
    assert out.splitlines()[0].split()[:4] == ["#Broker", "Name", "#QID", "#Min"] and len(out.splitlines()) == 4

    msgs = admin_json(capsys, "-n", ns, "consumeMessage", "-t", "AdminT")["messages"]
    assert len(msgs) == 7
    first = next(m for m in msgs if m["uniqKey"] == sent[0]["msgId"])
    assert (first["tags"], first["keys"], first["properties"]["color"]) == ("TagA", "k1 k2", "red")
    assert first["msgId"] == sent[0]["offsetMsgId"]
    import base64

    assert base64.b64decode(first["body"]).decode() == "héllo"
    assert len(admin_json(capsys, "-n", ns, "consumeMessage", "-t", "AdminT", "-c", "2")["messages"]) == 2
    only = admin_json(capsys, "-n", ns, "consumeMessage", "-t", "AdminT", "-b", "broker-a", "-i", "2", "-o", "2")
    assert [m["body"] for m in only["messages"]] == [base64.b64encode(b"one").decode()]
    code, out, _ = admin(capsys, "-n", ns, "consumeMessage", "-t", "AdminT")
    assert "7 message(s)" in out and "héllo" in out and "TagA" in out
    # -e: up to and with the message the end time finds, as mqadmin reads [begin, end]
    last = max(msgs, key=lambda m: m["storeTimestamp"])
    upto = admin_json(capsys, "-n", ns, "consumeMessage", "-t", "AdminT", "-e", str(last["storeTimestamp"]))
    assert last["uniqKey"] in [m["uniqKey"] for m in upto["messages"]] and len(upto["messages"]) == 7

    by_key = admin_json(capsys, "-n", ns, "queryMsgByKey", "-t", "AdminT", "-k", "k2")["messages"]
    assert sorted(m["uniqKey"] for m in by_key) == sorted(r["msgId"] for r in sent)
    code, out, _ = admin(capsys, "-n", ns, "queryMsgByKey", "-t", "AdminT", "-k", "k1")
    golden_header = GOLDEN_QUERY.read_text().splitlines()[0]
    assert out.splitlines()[0] == golden_header  # mqadmin 4.9.4's layout
    assert len(out.splitlines()) == 7

    by_offset_id = admin_json(capsys, "-n", ns, "queryMsgById", "-i", sent[1]["offsetMsgId"])["messages"]
    assert by_offset_id[0]["uniqKey"] == sent[1]["msgId"]
    by_uniq = admin_json(capsys, "-n", ns, "queryMsgById", "-t", "AdminT", "-i", sent[2]["msgId"])["messages"]
    assert [m["msgId"] for m in by_uniq] == [sent[2]["offsetMsgId"]]
    code, out, _ = admin(capsys, "-n", ns, "queryMsgById", "-i", sent[3]["offsetMsgId"])
    assert "Topic:               AdminT" in out and "Message Body:        héllo" in out
    assert "Tags:                [TagA]" in out

    at = admin_json(capsys, "-n", ns, "queryMsgByOffset", "-t", "AdminT", "-b", "broker-a", "-i", "2", "-o", "2")
    assert base64.b64decode(at["messages"][0]["body"]) == b"one"
    code, _, err = admin(capsys, "-n", ns, "queryMsgByOffset", "-t", "AdminT", "-b", "broker-a", "-i", "2", "-o", "9")
    assert code == 1 and err.startswith("rocketq: error: no message at AdminT broker-a:2 offset 9")

    assert "AdminT" in admin_json(capsys, "-n", ns, "topicList")["topicList"]
    code, out, _ = admin(capsys, "-n", ns, "topicList")
    assert "AdminT" in out.splitlines()

    code, out, err = admin(capsys, "-n", ns, "deleteTopic", "-c", "DefaultCluster", "-t", "AdminT")
    assert code == 0, err
    code, _, err = admin(capsys, "-n", ns, "topicRoute", "-t", "AdminT")
    assert code == 1 and err == "rocketq: error: topic 'AdminT' not found: the name server has no route for it\n"

    # A topic the broker holds but the name server does not route (gone from it, the broker not registered
    # again yet) is deleted from the broker too.
    admin(capsys, "-n", ns, "updateTopic", "-c", "DefaultCluster", "-t", "Unrouted")

    async def unroute() -> None:
        assert servers.namesrv is not None
        servers.namesrv.routes.delete_topic("Unrouted")

    servers.call(unroute())
    code, _, err = admin(capsys, "-n", ns, "topicRoute", "-t", "Unrouted")
    assert code == 1 and "has no route" in err
    code, out, err = admin(capsys, "-n", ns, "deleteTopic", "-c", "DefaultCluster", "-t", "Unrouted")
    assert code == 0 and "delete topic [Unrouted] from cluster [DefaultCluster] success." in out, err
    assert servers.broker is not None and servers.broker.topic_config_manager.select_topic_config("Unrouted") is None


def test_ordered_topic_writes_order_conf(servers: ServersInThread, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = admin(capsys, "-n", servers.ns, "updateTopic", "-c", "DefaultCluster", "-t", "OrderT", "-o",
                         "true", "-r", "2", "-w", "2")  # fmt: skip
    assert code == 0, err
    route = admin_json(capsys, "-n", servers.ns, "topicRoute", "-t", "OrderT")
    assert "orderTopicConf" not in route  # as a Java name server: orderMessageEnable is off by default
    assert servers.namesrv is not None
    servers.namesrv.processor.update({"orderMessageEnable": "true"})
    try:
        route = admin_json(capsys, "-n", servers.ns, "topicRoute", "-t", "OrderT")
        assert route["orderTopicConf"] == "broker-a:2"  # the ORDER_TOPIC_CONFIG KV entry, served with the route
    finally:
        servers.namesrv.processor.update({"orderMessageEnable": "false"})
    code, _, err = admin(capsys, "-n", servers.ns, "updateTopic", "-c", "DefaultCluster", "-t", "T", "-o", "maybe")
    assert code == 2 and "expected true or false" in err


def test_send_auto_creates_topic(servers: ServersInThread, capsys: pytest.CaptureFixture[str]) -> None:
    sent = admin_json(capsys, "-n", servers.ns, "sendMessage", "-t", "Fresh", "-p", "x", "--count", "5")["results"]
    assert len(sent) == 5 and all(r["sendStatus"] == "SEND_OK" for r in sent)
    route = admin_json(capsys, "-n", servers.ns, "topicRoute", "-t", "Fresh")
    assert route["queueDatas"][0]["writeQueueNums"] == 4  # TBW102 route, defaultTopicQueueNums 4
    assert len({r["queueId"] for r in sent}) > 1


def test_cluster_broker_and_groups(servers: ServersInThread, capsys: pytest.CaptureFixture[str]) -> None:
    ns = servers.ns
    info = admin_json(capsys, "-n", ns, "clusterList")
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    assert info["brokers"][0]["addr"] == servers.broker_addr and info["brokers"][0]["version"].startswith("V")
    code, out, _ = admin(capsys, "-n", ns, "clusterList")
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["#Cluster", "Name", "#Broker"] and lines[1].split()[:4] == [
        "DefaultCluster", "broker-a", "0", servers.broker_addr]  # fmt: skip
    code, out, _ = admin(capsys, "-n", ns, "clusterList", "-m")
    assert "#InTotalToday" in out and "broker-a" in out
    code, _, err = admin(capsys, "-n", ns, "clusterList", "-c", "Other")
    assert code == 1 and "cluster 'Other' not found" in err

    status = admin_json(capsys, "-n", ns, "brokerStatus", "-b", servers.broker_addr)
    assert status[servers.broker_addr]["brokerRole"] == "ASYNC_MASTER"
    code, out, _ = admin(capsys, "-n", ns, "brokerStatus", "-c", "DefaultCluster")
    assert f"{servers.broker_addr:<24} brokerRole" in out

    code, out, err = admin(capsys, "-n", ns, "updateSubGroup", "-b", servers.broker_addr, "-g", "AdminG", "-r", "3")
    assert code == 0, err
    groups = servers.broker.subscription_group_manager.table.subscription_group_table  # type: ignore[union-attr]
    assert groups["AdminG"].retry_max_times == 3

    # A live consumer of group AdminG (heartbeat on a connection held in the server thread) with offsets.
    async def consumer() -> None:
        assert servers.client is not None
        await servers.client.invoke(create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "GT", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}))  # fmt: skip
        r = await servers.client.invoke(heartbeat("127.0.0.1@admin-test", "AdminG", {"GT": "TagA || TagB"}))
        assert r.code == ResponseCode.SUCCESS
        for q, off in ((0, 0), (1, 0)):
            await servers.client.invoke(create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "AdminG", "topic": "GT", "queueId": q, "commitOffset": off}))  # fmt: skip

    servers.call(consumer())
    admin(capsys, "-n", ns, "sendMessage", "-t", "GT", "-p", "a", "--count", "4")
    deadline = time.monotonic() + 5
    while True:
        progress = admin_json(capsys, "-n", ns, "consumerProgress", "-g", "AdminG")
        if progress["diffTotal"] == 4 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [(q["topic"], q["queueId"], q["brokerOffset"], q["consumerOffset"]) for q in progress["queues"]] == [
        ("GT", 0, 2, 0), ("GT", 1, 2, 0)]  # fmt: skip
    code, out, _ = admin(capsys, "-n", ns, "consumerProgress", "-g", "AdminG")
    assert "Diff Total: 4" in out and out.splitlines()[0].startswith("#Topic")
    everyone = admin_json(capsys, "-n", ns, "consumerProgress")["groups"]
    row = next(g for g in everyone if g["group"] == "AdminG")
    assert (row["count"], row["model"], row["type"], row["diffTotal"]) == (1, "CLUSTERING", "PUSH", 4)

    cc = admin_json(capsys, "-n", ns, "consumerConnection", "-g", "AdminG")
    assert [c["clientId"] for c in cc["connectionSet"]] == ["127.0.0.1@admin-test"]
    assert cc["subscriptionTable"]["GT"]["subString"] == "TagA || TagB"
    code, out, _ = admin(capsys, "-n", ns, "consumerConnection", "-g", "AdminG")
    assert "127.0.0.1@admin-test" in out and "MessageModel: CLUSTERING" in out and "TagA || TagB" in out
    code, _, err = admin(capsys, "-n", ns, "consumerConnection", "-g", "Nobody")
    assert code == 1 and err == "rocketq: error: consumer group 'Nobody' is not online\n"

    # What each group did with a message (mqadmin's MessageTrack lines): AdminG is online with offset 0 on GT's
    # queue 0, GoneG only has an offset there.
    sent = admin_json(capsys, "-n", ns, "sendMessage", "-t", "GT", "-p", "t", "-c", "TagC", "-b", "broker-a",
                      "-i", "0")["results"][0]  # fmt: skip

    async def commit(group: str, offset: int) -> None:
        assert servers.client is not None
        r = await servers.client.invoke(create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": "GT", "queueId": 0, "commitOffset": offset}))  # fmt: skip
        assert r.code == ResponseCode.SUCCESS

    servers.call(commit("GoneG", 0))
    found = admin_json(capsys, "-n", ns, "queryMsgById", "-i", sent["offsetMsgId"])["messages"]
    assert found[0]["messageTracks"] == [
        {"consumerGroup": "AdminG", "trackType": "NOT_CONSUME_YET", "exceptionDesc": None},
        {"consumerGroup": "GoneG", "trackType": "NOT_ONLINE",
         "exceptionDesc": "CODE:206 DESC:the consumer group[GoneG] not online"}]  # fmt: skip
    servers.call(commit("AdminG", sent["queueOffset"] + 1))
    code, out, _ = admin(capsys, "-n", ns, "queryMsgById", "-i", sent["offsetMsgId"])
    # consumed, but AdminG subscribes to TagA || TagB: the message was filtered out
    assert "MessageTrack [consumerGroup=AdminG, trackType=CONSUMED_BUT_FILTERED, exceptionDesc=null]" in out
    assert out.startswith(f"{'OffsetID:':<20} {sent['offsetMsgId']}\n")
    code, out, err = admin(capsys, "-n", ns, "queryMsgByUniqueKey", "-t", "GT", "-i", sent["msgId"])
    assert code == 0 and "OffsetID:" not in out and f"{'Tags:':<20} [TagC]" in out, err
    assert "trackType=CONSUMED_BUT_FILTERED" in out and "trackType=NOT_ONLINE" in out
    code, out, _ = admin(capsys, "-n", ns, "queryMsgByOffset", "-t", "GT", "-b", "broker-a", "-i", "0", "-o",
                         str(sent["queueOffset"]))  # fmt: skip
    assert "trackType=CONSUMED_BUT_FILTERED" in out
    # sent again (queryMsgById -s true): the same client id, stored twice; -a shows both
    code, out, err = admin(capsys, "-n", ns, "queryMsgById", "-i", sent["offsetMsgId"], "-s", "true", "-u", "unitX")
    assert code == 0 and f"prepare resend msg. originalMsgId={sent['offsetMsgId']}" in out, err
    assert f"SendResult [sendStatus=SEND_OK, msgId={sent['msgId']}, " in out
    again = admin_json(capsys, "-n", ns, "queryMsgByUniqueKey", "-t", "GT", "-i", sent["msgId"], "-a")["messages"]
    assert len(again) == 2 and {m["body"] for m in again} == {"dA=="} and again[0]["tags"] == again[1]["tags"] == "TagC"
    assert again[0]["storeTimestamp"] <= again[1]["storeTimestamp"]
    assert again[0]["commitLogOffset"] == int(sent["offsetMsgId"][-16:], 16)
    code, _, err = admin(capsys, "-n", ns, "queryMsgByUniqueKey", "-t", "GT", "-i", "0" * 32)
    assert code == 1 and "no message of topic 'GT' has the client message id" in err

    # The fake consumer answers as a client does: what it holds (mqTable), and offsets the broker pushes.
    pushed = Recorder()
    held = b'{"mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"GT"}:{"commitOffset":0}},"properties":{}}'
    assert servers.client is not None
    servers.client.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                      Recorder(lambda r: make_response_for(r, body=held)))  # fmt: skip
    servers.client.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, pushed)
    code, out, err = admin(capsys, "-n", ns, "consumerProgress", "-g", "AdminG", "-s", "true")
    assert code == 0 and "#Client IP" in out.splitlines()[0], err
    assert [(q["queueId"], q["clientIP"]) for q in admin_json(capsys, "-n", ns, "consumerProgress", "-g", "AdminG",
                                                              "-s", "true")["queues"]] == [(0, "127.0.0.1"), (1, None)]
    row = next(line.split() for line in out.splitlines() if line.startswith("GT ") and line.split()[2] == "1")
    assert row[5] == "N/A"  # the queue nobody holds
    code, out, err = admin(capsys, "-n", ns, "consumerStatus", "-g", "AdminG", "-b", servers.broker_addr)
    assert code == 0 and "127.0.0.1@admin-test" in out, err
    # resetOffsetByTime -c: the broker pushes the offsets in the C++ clients' layout (a list), else a map
    for cplus, layout in ((["-c"], list), ([], dict)):
        del pushed.requests[:]
        code, out, err = admin(capsys, "-n", ns, "resetOffsetByTime", "-g", "AdminG", "-t", "GT", "-s", "-1", *cplus)
        assert code == 0, err
        deadline = time.monotonic() + 5
        while not pushed.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert isinstance(json_compat.loads(pushed.requests[0].body or b"")["offsetTable"], layout)
    # clusterList -i: printed again every interval (--count bounds it)
    begin = time.monotonic()
    code, out, err = admin(capsys, "-n", ns, "clusterList", "-i", "1", "--count", "2")
    assert code == 0 and out.count("#Cluster Name") == 2 and time.monotonic() - begin >= 1, err
    code, _, err = admin(capsys, "-n", ns, "clusterList", "--count", "2")
    assert code == 1 and "--count goes with -i" in err


def test_errors_are_one_line(servers: ServersInThread, capsys: pytest.CaptureFixture[str]) -> None:
    cases: list[tuple[list[str], str]] = [
        (["-n", "127.0.0.1:1", "topicList"], "rocketq: error: cannot reach name server 127.0.0.1:1: "),
        (["-n", "nohost", "topicList"], "rocketq: error: not a name server address (host:port): 'nohost'"),
        (["-n", "127.0.0.1:99999", "topicList"], "rocketq: error: not a name server address (host:port): "),
        (["-n", servers.ns, "topicStatus", "-t", "Nope"], "rocketq: error: topic 'Nope' not found"),
        (["-n", servers.ns, "queryMsgByKey", "-t", "Nope", "-k", "k"], "rocketq: error: topic 'Nope' not found"),
        (["-n", servers.ns, "queryMsgByKey", "-t", "TBW102", "-k", "no-such-key"],
         "rocketq: error: no message of topic 'TBW102' has key 'no-such-key'"),
        (["-n", servers.ns, "consumeMessage", "-t", "Nope"], "rocketq: error: topic 'Nope' not found"),
        (["-n", servers.ns, "deleteTopic", "-c", "DefaultCluster", "-t", "Nope"], "rocketq: error: topic 'Nope'"),
        (["-n", servers.ns, "updateTopic", "-c", "NoCluster", "-t", "T"], "rocketq: error: cluster 'NoCluster'"),
        (["-n", servers.ns, "updateTopic", "-b", "127.0.0.1:1", "-t", "T"], "rocketq: error: cannot reach broker"),
        (["-n", servers.ns, "updateTopic", "-b", servers.broker_addr, "-t", "TBW102"],
         "rocketq: error: create topic 'TBW102' on"),
        (["-n", servers.ns, "queryMsgById", "-i", "00"], "rocketq: error: message 00 not found"),
        (["-n", servers.ns, "consumerProgress", "-g", "Nobody"], "rocketq: error: no consume stats for group"),
        (["-n", servers.ns, "sendMessage", "-t", "T", "-p", "x", "-i", "1"], "rocketq: error: a queue (-i) needs"),
    ]  # fmt: skip
    for argv, prefix in cases:
        code, out, err = admin(capsys, *argv)
        assert code == 1 and out == "" and err.startswith(prefix) and err.count("\n") == 1, (argv, err)
    code, _, err = admin(capsys, "-n", servers.ns, "updateTopic", "-t", "T")  # neither -b nor -c
    assert code == 2 and err.startswith("rocketq: error: one of the arguments -b/--brokerAddr -c/--clusterName")
    code, _, err = admin(capsys, "-n", servers.ns)
    assert code == 2 and "choose a verb" in err  # a usage error, as others


def test_help_of_every_verb(capsys: pytest.CaptureFixture[str]) -> None:
    from rocketq.cli.admin_cmd import _VERBS

    assert len(_VERBS) == 28  # the 15 of the issue, consumerStatus, 7 more of mqadmin, the 5 of the plain ACL
    for name in _VERBS:
        code, out, _ = admin(capsys, name, "--help")
        assert code == 0 and "example:\n  rocketq admin -n 127.0.0.1:9876 " + name in out, name


def test_namesrv_addr_from_environment(servers: ServersInThread, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("NAMESRV_ADDR", f"127.0.0.1:1;{servers.ns}")  # the first one is down: the second answers
    code, out, err = admin(capsys, "topicList")
    assert code == 0 and "TBW102" in out.splitlines(), err


def test_group_offset_and_config_verbs(servers: ServersInThread, capsys: pytest.CaptureFixture[str]) -> None:
    ns, broker = servers.ns, servers.broker_addr
    assert servers.broker is not None
    code, out, err = admin(capsys, "-n", ns, "sendMessage", "-t", "ResetT", "-p", "x", "--count", "6")
    assert code == 0, err
    time.sleep(0.3)  # a search by time takes the unit nearest in time: t_mid is nearer the second batch
    t_mid = int(time.time() * 1000)
    admin(capsys, "-n", ns, "sendMessage", "-t", "ResetT", "-p", "y", "--count", "6")
    code, out, err = admin(capsys, "-n", ns, "updateSubGroup", "-b", broker, "-g", "ResetG")
    assert code == 0, err
    code, _, err = admin(capsys, "-n", ns, "resetOffsetByTime", "-g", "ResetG", "-t", "ResetT", "-s", "now")
    assert code == 1 and "THe consumer group <ResetG> not exist" in err  # no offsets yet: refused, as by 4.9.4

    async def commit_zero() -> None:
        assert servers.client is not None
        for q in range(8):
            await servers.client.invoke(create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "ResetG", "topic": "ResetT", "queueId": q, "commitOffset": 0}))  # fmt: skip

    servers.call(commit_zero())
    # No consumer online: the offsets are committed by the tool itself (ResetOffsetByTimeOldCommand).
    offsets = admin_json(capsys, "-n", ns, "resetOffsetByTime", "-g", "ResetG", "-t", "ResetT", "-s", str(t_mid))
    stored = {q: servers.broker.store.get_max_offset_in_queue("ResetT", q) for q in range(8)}
    assert sum(o["offset"] for o in offsets["offsets"]) == sum(stored.values()) // 2  # the first half is skipped
    com = servers.broker.consumer_offset_manager
    assert [com.query_offset("ResetG", "ResetT", o["queueId"]) for o in offsets["offsets"]] == [
        o["offset"] for o in offsets["offsets"]]  # fmt: skip
    # what the tool saw, queue by queue: the max offset, the group's before, the one the time found
    assert [(o["brokerOffset"], o["consumerOffset"], o["timestampOffset"]) for o in offsets["offsets"]] == [
        (stored[o["queueId"]], 0, o["offset"]) for o in offsets["offsets"]]  # fmt: skip
    before = {o["queueId"]: o["offset"] for o in offsets["offsets"]}
    code, out, err = admin(capsys, "-n", ns, "resetOffsetByTime", "-g", "ResetG", "-t", "ResetT", "-s", "-1")
    assert code == 0 and "rollback consumer offset by specified consumerGroup[ResetG]" in out, err
    assert out.splitlines()[1].split() == ["#brokerName", "#queueId", "#brokerOffset", "#consumerOffset",
                                           "#timestampOffset", "#rollbackOffset"]  # fmt: skip
    assert sorted(tuple(map(int, line.split()[1:])) for line in out.splitlines()[2:]) == [
        (q, stored[q], before[q], stored[q], stored[q]) for q in sorted(before)]  # fmt: skip
    assert sum(com.query_offset("ResetG", "ResetT", q) for q in range(8)) == sum(stored.values())  # the end
    admin(capsys, "-n", ns, "resetOffsetByTime", "-g", "ResetG", "-t", "ResetT", "-s", str(t_mid))
    assert sum(com.query_offset("ResetG", "ResetT", q) for q in range(8)) == sum(stored.values()) // 2
    when = admin_json(capsys, "-n", ns, "resetOffsetByTime", "-g", "ResetG", "-t", "ResetT", "-s", "now")["timestamp"]
    # now: -1, the end of every queue, as mqadmin reads it (the current time would find each queue's last message)
    assert when == -1 and [com.query_offset("ResetG", "ResetT", q) for q in range(8)] == [stored[q] for q in range(8)]
    code, out, err = admin(capsys, "-n", ns, "resetOffsetByTime", "-g", "ResetG", "-t", "ResetT", "-s", "0",
                           "-f", "false")  # fmt: skip
    assert code == 0 and sum(com.query_offset("ResetG", "ResetT", q) for q in range(8)) == 0, err
    # not forced: an offset the time finds ahead of the group's is not taken
    kept = admin_json(capsys, "-n", ns, "resetOffsetByTime", "-g", "ResetG", "-t", "ResetT", "-s", "-1", "-f",
                      "false")["offsets"]  # fmt: skip
    assert [(o["consumerOffset"], o["timestampOffset"], o["offset"]) for o in kept] == [
        (0, stored[o["queueId"]], 0) for o in kept]  # fmt: skip
    assert sum(com.query_offset("ResetG", "ResetT", q) for q in range(8)) == 0
    code, _, err = admin(capsys, "-n", ns, "resetOffsetByTime", "-g", "ResetG", "-t", "ResetT", "-s", "yesterday")
    assert code == 1 and "not a timestamp" in err
    when = admin_json(capsys, "-n", ns, "resetOffsetByTime", "-g", "ResetG", "-t", "ResetT", "-s",
                      "2020-01-02#03:04:05:678")["timestamp"]  # fmt: skip
    assert when == int(time.mktime((2020, 1, 2, 3, 4, 5, 0, 0, -1)) * 1000) + 678

    code, out, err = admin(capsys, "-n", ns, "deleteSubGroup", "-b", broker, "-g", "ResetG", "-r", "true")
    assert code == 0 and f"delete subscription group [ResetG] from broker [{broker}] success." in out, err
    groups = servers.broker.subscription_group_manager.table.subscription_group_table
    assert "ResetG" not in groups and com.query_offset("ResetG", "ResetT", 0) == -1
    # -c: the group's retry and dead-letter topics go too, as mqadmin deletes them
    admin(capsys, "-n", ns, "updateSubGroup", "-c", "DefaultCluster", "-g", "DelG")
    for topic in ("%RETRY%DelG", "%DLQ%DelG"):
        code, _, err = admin(capsys, "-n", ns, "updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", "1", "-w", "1")
        assert code == 0, err
    code, out, err = admin(capsys, "-n", ns, "deleteSubGroup", "-c", "DefaultCluster", "-g", "DelG")
    assert code == 0 and "delete topic [%DLQ%DelG] from cluster [DefaultCluster] success." in out, err
    topics = servers.broker.topic_config_manager
    assert topics.select_topic_config("%RETRY%DelG") is None and topics.select_topic_config("%DLQ%DelG") is None

    code, out, err = admin(capsys, "-n", ns, "updateBrokerConfig", "-c", "DefaultCluster", "-k", "fileReservedTime",
                           "-v", "33")  # fmt: skip
    assert code == 0 and f"update broker config success, {broker}" in out, err
    config = admin_json(capsys, "-n", ns, "getBrokerConfig", "-b", broker)[broker]
    assert config["fileReservedTime"] == "33" and config["brokerName"] == "broker-a"
    code, out, _ = admin(capsys, "-n", ns, "getBrokerConfig", "-c", "DefaultCluster")
    assert f"============{broker}============" in out and any(
        line.split() == ["fileReservedTime", "=", "33"] for line in out.splitlines())  # fmt: skip
    # the broker answers success whatever it made of it (as Java's): the tool reads it back and says
    code, _, err = admin(capsys, "-n", ns, "updateBrokerConfig", "-b", broker, "-k", "nonsenseKey", "-v", "1")
    assert code == 1 and "nonsenseKey is not a setting of this broker" in err
    code, _, err = admin(capsys, "-n", ns, "updateBrokerConfig", "-b", broker, "-k", "maxMessageSize", "-v", "abc")
    assert code == 1 and "maxMessageSize is still 4194304: 'abc' does not parse" in err
    code, out, _ = admin(capsys, "-n", ns, "updateBrokerConfig", "-b", broker, "-k", "checkCRCOnRecover", "-v",
                         "TRUE")  # fmt: skip
    assert code == 0 and "success" in out

    code, out, _ = admin(capsys, "-n", ns, "topicClusterList", "-t", "ResetT")
    assert out.split() == ["DefaultCluster"]
    code, _, err = admin(capsys, "-n", ns, "producerConnection", "-g", "NoSuchGroup", "-t", "ResetT")
    assert code == 1 and "is not online" in err
