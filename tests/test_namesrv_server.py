"""The name server over a real socket (127.0.0.1, free port), fed with captured RocketMQ 4.9.4 frames."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conftest import GOLDEN
from rocketq.common import json_compat
from rocketq.namesrv.namesrv_controller import NamesrvController
from rocketq.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand, create_request
from rocketq.remoting.transport import RemotingClient

FRAMES = GOLDEN / "remoting-4.9.4"


def frame(name: str) -> RemotingCommand:
    return RemotingCommand.decode((FRAMES / name).read_bytes())


def captured_body(name: str) -> object:
    cmd = frame(name)
    assert cmd.body is not None
    return json_compat.loads(cmd.body)


@pytest.fixture
def namesrv(tmp_path: Path) -> AsyncIterator[tuple[NamesrvController, RemotingClient]]:
    async def make() -> tuple[NamesrvController, RemotingClient]:
        ctl = NamesrvController("127.0.0.1", 0, kv_config_path=tmp_path / "kvConfig.json")
        await ctl.start()
        return ctl, RemotingClient(ctl.address)

    return make  # type: ignore[return-value]


def run(coro: object) -> object:
    return asyncio.run(asyncio.wait_for(coro, 30))  # type: ignore[arg-type]


def test_golden_registration_gives_the_captured_answers(namesrv) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        ctl, client = await namesrv()
        try:
            reg = frame("000-json-REGISTER_BROKER-request.bin")
            reg.opaque = 1
            resp = await client.invoke(reg, 5)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            # Route of TBW102: byte for byte what the 4.9.4 name server answered.
            route = await client.invoke(frame("002-json-GET_ROUTEINFO_BY_TOPIC-ok-request.bin"), 5)
            assert route.code == ResponseCode.SUCCESS
            assert route.body == frame("002-json-GET_ROUTEINFO_BY_TOPIC-ok-response.bin").body
            info = await client.invoke(frame("001-json-GET_BROKER_CLUSTER_INFO-request.bin"), 5)
            assert info.body == frame("001-json-GET_BROKER_CLUSTER_INFO-response.bin").body
            topics = await client.invoke(frame("004-json-GET_ALL_TOPIC_LIST_FROM_NAMESERVER-request.bin"), 5)
            want = captured_body("004-json-GET_ALL_TOPIC_LIST_FROM_NAMESERVER-response.bin")
            got = json_compat.loads(topics.body or b"")
            # WireTopic was created (and registered again) after the captured registration.
            assert set(got["topicList"]) == set(want["topicList"]) - {"WireTopic"}  # type: ignore[index]
            # The binary-header variant of the same questions.
            route2 = await client.invoke(frame("026-rocketmq-GET_ROUTEINFO_BY_TOPIC-ok-request.bin"), 5)
            assert route2.body == frame("026-rocketmq-GET_ROUTEINFO_BY_TOPIC-ok-response.bin").body
            assert route2.serialize_type is SerializeType.ROCKETMQ  # answered in the request's type, as 4.9.4
            missing = await client.invoke(frame("010-json-GET_ROUTEINFO_BY_TOPIC-TOPIC_NOT_EXIST-request.bin"), 5)
            want_missing = frame("010-json-GET_ROUTEINFO_BY_TOPIC-TOPIC_NOT_EXIST-response.bin")
            assert (missing.code, missing.remark) == (want_missing.code, want_missing.remark)
            unreg = await client.invoke(frame("025-json-UNREGISTER_BROKER-request.bin"), 5)
            assert unreg.code == ResponseCode.SUCCESS
            gone = await client.invoke(frame("002-json-GET_ROUTEINFO_BY_TOPIC-ok-request.bin"), 5)
            assert gone.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await client.close()
            await ctl.stop()

    run(scenario())


def test_broker_connection_loss_and_kv_and_errors(namesrv) -> None:  # type: ignore[no-untyped-def]
    async def scenario() -> None:
        ctl, client = await namesrv()
        other = RemotingClient(ctl.address)
        try:
            reg = frame("000-json-REGISTER_BROKER-request.bin")
            assert (await client.invoke(reg, 5)).code == ResponseCode.SUCCESS
            bad_crc = frame("000-json-REGISTER_BROKER-request.bin")
            assert bad_crc.ext_fields is not None
            bad_crc.ext_fields["bodyCrc32"] = "1"
            resp = await other.invoke(bad_crc, 5)
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
            missing_field = await other.invoke(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}), 5)
            assert missing_field.code == ResponseCode.SYSTEM_ERROR and "topic" in (missing_field.remark or "")
            ok = await other.invoke(create_request(RequestCode.PUT_KV_CONFIG,
                                                   {"namespace": "ns", "key": "k", "value": "v"}), 5)  # fmt: skip
            assert ok.code == ResponseCode.SUCCESS
            got = await other.invoke(create_request(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}), 5)
            assert got.header.get_str("value") == "v"
            nf = await other.invoke(create_request(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "x"}), 5)
            assert (nf.code, nf.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: ns Key: x")
            kvl = await other.invoke(create_request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"}), 5)
            assert json_compat.loads(kvl.body or b"") == {"table": {"k": "v"}}
            # The broker's connection closes: its routes go at once.
            await client.close()
            for _ in range(100):
                route = await other.invoke(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}), 5)
                if route.code == ResponseCode.TOPIC_NOT_EXIST:
                    break
                await asyncio.sleep(0.02)
            assert route.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await other.close()
            await ctl.stop()

    run(scenario())


def test_a_registration_body_that_does_not_decode_is_refused_without_a_traceback(
        namesrv, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    """As 4.9.4's "Failed to decode RegisterBrokerBody": SYSTEM_ERROR, nothing registered, one log line (a stray
    client's bytes are not the server's fault), and the connection still served."""
    header = {"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "haServerAddr": "", "brokerId": 0}
    bodies = [(b"notzlib", True), (b"not json", False), (b'{"topicConfigSerializeWrapper":1}', False),
              (b'{"topicConfigTable":5}', False), (b'{"topicConfigTable":{"T":{"readQueueNums":"x"}}}', False),
              (b'{"topicConfigTable":{"T":7}}', False), (b'{"dataVersion":3,"topicConfigTable":{}}', False)]

    async def scenario() -> None:
        ctl, client = await namesrv()
        try:
            for body, compressed in bodies:
                r = await client.invoke(create_request(RequestCode.REGISTER_BROKER, {**header,
                                                                                     "compressed": compressed}, body))
                assert r.code == ResponseCode.SYSTEM_ERROR, body
                assert (r.remark or "").startswith("Failed to decode RegisterBrokerBody"), (body, r.remark)
            assert ctl.routes.broker_addr_table == {}
            r = await client.invoke(create_request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
            assert r.code == ResponseCode.SUCCESS
        finally:
            await client.close()
            await ctl.stop()

    run(scenario())
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert sum("Failed to decode RegisterBrokerBody" in r.getMessage() for r in caplog.records) == len(bodies)


def test_rocketq_namesrv_command_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    conf = tmp_path / "namesrv.properties"
    conf.write_text("orderMessageEnable=false\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketq.cli.main", "namesrv", "--port", "0", "--kv-config", str(tmp_path / "kv.json"),
         "-c", str(conf)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("rocketq name server listening on 127.0.0.1:"), line
        addr = line.rsplit(" ", 1)[1].strip()

        async def ask() -> int:
            client = RemotingClient(addr)
            try:
                resp = await client.invoke(create_request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
                return resp.code
            finally:
                await client.close()

        assert run(ask()) == ResponseCode.SUCCESS

        async def update(body: bytes) -> int:
            client = RemotingClient(addr)
            try:
                return (await client.invoke(create_request(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body), 5)).code
            finally:
                await client.close()

        # an update is written back to the -c file (Configuration.persist); the paths it writes to are refused
        assert run(update(b"orderMessageEnable=true\n")) == ResponseCode.SUCCESS
        saved = dict(line.split("=", 1) for line in conf.read_text().splitlines() if "=" in line)
        assert saved["orderMessageEnable"] == "true" and saved["configStorePath"] == str(conf.resolve())
        assert run(update(f"kvConfigPath={tmp_path / 'elsewhere'}\n".encode())) == ResponseCode.NO_PERMISSION
        assert run(update(b"configStorePath=/tmp/x\norderMessageEnable=false\n")) == ResponseCode.NO_PERMISSION
        assert "orderMessageEnable=true" in conf.read_text() and not (tmp_path / "elsewhere").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def _compressed_register_body(version: dict[str, int], topics: list[str], filter_servers: list[str]) -> bytes:
    """``RegisterBrokerBody.encode(true)``: zlib of length-prefixed parts."""
    import struct
    import zlib

    def part(raw: bytes) -> bytes:
        return struct.pack(">i", len(raw)) + raw

    raw = part(json_compat.dumps_bytes(version)) + struct.pack(">i", len(topics))
    raw += b"".join(part(f"{t} 4 4 6 SINGLE_TAG".encode()) for t in topics)
    return zlib.compress(raw + part(json_compat.dumps_bytes(filter_servers)))


def test_kv_namespaces_versions_unit_topics_and_filter_servers(namesrv) -> None:  # type: ignore[no-untyped-def]
    """What 4.9.4's name server answers beyond plain routes: an emptied KV namespace (and the order table a
    registration gets back) listed as an empty table; a bodiless registration at data version 0; a data version
    query that says changed refreshes no liveness; unit topic lists by topicSysFlag; filter servers of a
    compressed registration in routes."""

    def register(addr: str, name: str, body: bytes | None, compressed: bool = False) -> RemotingCommand:
        header = {"brokerAddr": addr, "brokerName": name, "brokerId": 0, "clusterName": "C", "haServerAddr": "",
                  "compressed": compressed, "bodyCrc32": 0}  # fmt: skip
        return create_request(RequestCode.REGISTER_BROKER, header, body)

    async def scenario() -> None:
        ctl, client = await namesrv()
        try:
            async def call(code: int, header: dict[str, object], body: bytes | None = None) -> RemotingCommand:
                return await client.invoke(create_request(code, header, body), 5)

            order = {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1"}
            assert (await call(RequestCode.PUT_KV_CONFIG, {**order, "value": "b:4"})).code == ResponseCode.SUCCESS
            answer = await client.invoke(register("127.0.0.1:1", "b", None), 5)
            assert json_compat.loads(answer.body or b"") == {"table": {"T1": "b:4"}}
            assert (await call(RequestCode.DELETE_KV_CONFIG, order)).code == ResponseCode.SUCCESS
            kvl = await call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"})
            assert kvl.code == ResponseCode.SUCCESS and json_compat.loads(kvl.body or b"") == {"table": {}}
            answer = await client.invoke(register("127.0.0.1:1", "b", None), 5)
            assert json_compat.loads(answer.body or b"") == {"table": {}}  # a broker then unmarks ordered topics
            # the bodiless registration holds data version 0 at time 0
            query = {"brokerAddr": "127.0.0.1:1", "brokerName": "b", "brokerId": 0, "clusterName": "C"}
            zero = json_compat.dumps_bytes({"counter": 0, "timestamp": 0})
            same = await call(RequestCode.QUERY_DATA_VERSION, query, zero)
            assert same.header.get_bool("changed") is False
            assert json_compat.loads(same.body or b"") == {"counter": 0, "timestamp": 0}
            live = ctl.routes.broker_live_table["127.0.0.1:1"]
            live.last_update_ms -= 60_000
            before = live.last_update_ms
            other = json_compat.dumps_bytes({"counter": 5, "timestamp": 1})
            assert (await call(RequestCode.QUERY_DATA_VERSION, query, other)).header.get_bool("changed") is True
            assert live.last_update_ms == before  # changed: alive only once it registers again
            await call(RequestCode.QUERY_DATA_VERSION, query, zero)
            assert live.last_update_ms > before
            # a compressed registration with filter servers; unit topics by flag
            body = _compressed_register_body({"counter": 1, "timestamp": 2}, ["F1"], ["127.0.0.1:7"])
            assert (await client.invoke(register("127.0.0.1:2", "f", body, True), 5)).code == ResponseCode.SUCCESS
            route = await call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "F1"})
            assert json_compat.loads(route.body or b"")["filterServerTable"] == {"127.0.0.1:2": ["127.0.0.1:7"]}
            ctl.routes.topic_queue_table["F1"]["f"].topic_sys_flag = 1
            units = await call(RequestCode.GET_UNIT_TOPIC_LIST, {})
            assert json_compat.loads(units.body or b"") == {"topicList": ["F1"]}
            subs = await call(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST, {})
            assert json_compat.loads(subs.body or b"") == {"topicList": []}
        finally:
            await client.close()
            await ctl.stop()

    run(scenario())
