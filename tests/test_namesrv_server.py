"""The name server over a real socket (127.0.0.1, free port), fed with captured RocketMQ 4.9.4 frames."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from conftest import GOLDEN
from rocketq.common import json_compat
from rocketq.namesrv.namesrv_controller import NamesrvController
from rocketq.remoting.codes import RequestCode, ResponseCode
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


def test_rocketq_namesrv_command_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketq.cli.main", "namesrv", "--port", "0", "--kv-config", str(tmp_path / "kv.json")],
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
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
