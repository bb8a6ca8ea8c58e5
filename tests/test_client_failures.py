"""What the producer does when things go wrong, against scripted servers on 127.0.0.1: a busy broker (retry
elsewhere, then avoid it), a silent one (timeout), a dead one (no connection), no route (and the ``TBW102``
stand-in route), a dead name server (the next one is asked), and how client instances are shared and
released."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from rocketq.client import (
    BrokerBusyError,
    BrokerUnreachableError,
    ClientConfig,
    ClientNotRunningError,
    ClientTimeoutError,
    LitePullConsumer,
    NoRouteError,
    Producer,
    new_message,
)
from rocketq.client.client_instance import get_client_instance
from rocketq.common import json_compat
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, make_response_for
from rocketq.remoting.transport import RemotingConnection, RemotingServer


@dataclass
class FakeBroker:
    name: str
    mode: str = "ok"  # ok | busy | silent
    server: RemotingServer = field(default_factory=lambda: RemotingServer("127.0.0.1", 0, name="fake-broker"))
    sends: list[RemotingCommand] = field(default_factory=list)
    unregistered: list[dict[str, str]] = field(default_factory=list)

    async def start(self) -> FakeBroker:
        self.server.register_processor(RequestCode.SEND_MESSAGE_V2, self._send)
        self.server.register_processor(RequestCode.HEART_BEAT, lambda c, r: make_response_for(r))
        self.server.register_processor(RequestCode.UNREGISTER_CLIENT, self._unregister)
        await self.server.start()
        return self

    @property
    def addr(self) -> str:
        return self.server.address

    async def _send(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        self.sends.append(request)
        if self.mode == "busy":
            return make_response_for(request, ResponseCode.SYSTEM_BUSY, "[REJECTREQUEST]system busy")
        if self.mode == "silent":
            await asyncio.sleep(30)
            return None
        return make_response_for(request, ext_fields={
            "msgId": "7F00000100002A9F0000000000000000", "queueId": request.header["e"], "queueOffset": "0",
            "MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
        })  # fmt: skip

    def _unregister(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        self.unregistered.append(dict(request.ext_fields or {}))
        return make_response_for(request)


def route_json(brokers: list[FakeBroker], queues: int = 2) -> bytes:
    return json_compat.dumps_bytes({
        "brokerDatas": [{"brokerAddrs": {"0": b.addr}, "brokerName": b.name, "cluster": "C"} for b in brokers],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": b.name, "perm": 6, "readQueueNums": queues, "topicSysFlag": 0,
                        "writeQueueNums": queues} for b in brokers],
    })  # fmt: skip


@dataclass
class FakeNamesrv:
    routes: dict[str, bytes]
    server: RemotingServer = field(default_factory=lambda: RemotingServer("127.0.0.1", 0, name="fake-namesrv"))
    asked: list[str] = field(default_factory=list)

    async def start(self) -> FakeNamesrv:
        self.server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, self._route)
        await self.server.start()
        return self

    def _route(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic = request.header.get_str("topic")
        self.asked.append(topic)
        body = self.routes.get(topic)
        if body is None:
            return make_response_for(request, ResponseCode.TOPIC_NOT_EXIST, f"No topic route info for {topic}")
        return make_response_for(request, body=body)


@asynccontextmanager
async def servers(modes: list[str], topics: Callable[[list[FakeBroker]], dict[str, bytes]] | None = None
                  ) -> AsyncIterator[tuple[FakeNamesrv, list[FakeBroker]]]:  # fmt: skip
    brokers = [await FakeBroker(f"broker-{i}", mode).start() for i, mode in enumerate(modes)]
    routes = topics(brokers) if topics else {"T": route_json(brokers)}
    namesrv = await FakeNamesrv(routes).start()
    try:
        yield namesrv, brokers
    finally:
        for b in brokers:
            await b.server.stop()
        await namesrv.server.stop()


def config(namesrv: FakeNamesrv | str, **changes: Any) -> ClientConfig:
    addr = namesrv if isinstance(namesrv, str) else namesrv.server.address
    return ClientConfig(namesrv_addr=addr, instance_name=f"t{time.monotonic_ns()}", **changes)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 60))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_busy_broker_is_retried_elsewhere_then_avoided() -> None:
    async def go() -> None:
        async with servers(["busy", "ok"]) as (namesrv, (busy, ok)), \
                Producer("PG", config=config(namesrv)) as producer:  # fmt: skip
            for _ in range(6):
                result = await producer.send(new_message("T", b"x"))
                assert result.message_queue.broker_name == "broker-1"
            assert len(busy.sends) == 1  # tried once, then isolated
            assert len(ok.sends) == 6

    run(go())


def test_only_a_busy_broker_raises_broker_busy() -> None:
    async def go() -> None:
        async with servers(["busy"]) as (namesrv, (busy,)), Producer("PG", config=config(namesrv)) as producer:
            with pytest.raises(BrokerBusyError) as info:
                await producer.send(new_message("T", b"x"))
            assert info.value.code == ResponseCode.SYSTEM_BUSY
            assert "system busy" in str(info.value)
            assert any("sent 3 time(s)" in note for note in info.value.__notes__)
            assert len(busy.sends) == 3  # 1 + 2 retries

    run(go())


def test_silent_broker_times_out() -> None:
    async def go() -> None:
        async with servers(["silent"]) as (namesrv, _), \
                Producer("PG", config=config(namesrv), send_timeout=0.5) as producer:  # fmt: skip
            t0 = time.monotonic()
            with pytest.raises(ClientTimeoutError):
                await producer.send(new_message("T", b"x"))
            assert time.monotonic() - t0 < 3
            with pytest.raises(TimeoutError):  # also a builtin TimeoutError
                await producer.send(new_message("T", b"x"), timeout=0.2)

    run(go())


def test_dead_broker_cannot_be_reached() -> None:
    async def go() -> None:
        async with servers(["ok"]) as (namesrv, (broker,)):
            namesrv.routes["T"] = namesrv.routes["T"].replace(broker.addr.encode(),
                                                              f"127.0.0.1:{closed_port()}".encode())  # fmt: skip
            async with Producer("PG", config=config(namesrv), send_timeout=2) as producer:
                with pytest.raises(BrokerUnreachableError, match="connect") as info:
                    await producer.send(new_message("T", b"x"))
                # Said as a person says it, not as the exception's text ("[Errno 111] Connect call failed (...)").
                assert "failed: connection refused" in str(info.value)
                assert "Errno" not in str(info.value) and "ConnectionRefusedError" not in str(info.value)

    run(go())


def test_a_rebalance_without_a_name_server_says_why_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        consumer = LitePullConsumer("CG", config=config(f"127.0.0.1:{closed_port()}"))
        consumer.subscribe("T")
        async with consumer:
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="rocketq.client"):
                await consumer.do_rebalance()
        failed = [r for r in caplog.records if "rebalance of topic T failed" in r.getMessage()]
        assert failed and all(r.levelno == logging.WARNING and r.exc_info is None for r in failed)
        assert "no name server answered" in failed[0].getMessage()
        assert "connection refused" in failed[0].getMessage()

    run(go())


async def _cli(*args: str) -> tuple[int, str]:
    """``rocketq ARGS`` in a child process, without blocking the loop (the fake servers answer it): exit code
    and standard error."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("NAMESRV_ADDR", None)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "rocketq.cli.main", *args, env=env,
                                                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    _out, err = await proc.communicate()
    return proc.returncode or 0, err.decode()


def test_cli_consume_names_an_unreachable_name_server_and_a_topic_without_route() -> None:
    async def go() -> None:
        code, err = await _cli("consume", "-n", f"127.0.0.1:{closed_port()}", "-t", "T", "-g", "CG", "--count", "1",
                               "--timeout", "1")  # fmt: skip
        assert code == 1 and "Traceback" not in err, err
        assert "no name server answered" in err and "connection refused" in err
        async with servers(["ok"]) as (namesrv, _):
            code, err = await _cli("consume", "-n", namesrv.server.address, "-t", "Absent", "-g", "CG", "--count",
                                   "1", "--timeout", "1")  # fmt: skip
        assert code == 1 and "Traceback" not in err, err
        assert "consumed 0 of 1" in err and "the name server has no route for Absent" in err

    run(go())


def test_no_route_and_the_tbw102_stand_in() -> None:
    async def go() -> None:
        async with servers(["ok"], lambda bs: {}) as (namesrv, (broker,)), \
                Producer("PG", config=config(namesrv)) as producer:  # fmt: skip
            with pytest.raises(NoRouteError, match="'New'"):
                await producer.send(new_message("New", b"x"))
            namesrv.routes["TBW102"] = route_json([broker], queues=8)
            result = await producer.send(new_message("Other", b"x"))
            request = broker.sends[-1]
            assert request.header["b"] == "Other" and request.header["c"] == "TBW102"
            assert request.header["d"] == "4" and int(request.header["e"]) < 4  # at most 4 queues a broker
            assert result.message_queue.topic == "Other"

    run(go())


def test_the_next_name_server_is_asked_when_one_is_down() -> None:
    async def go() -> None:
        async with servers(["ok"]) as (namesrv, _):
            addrs = f"127.0.0.1:{closed_port()};{namesrv.server.address}"
            async with Producer("PG", config=config(addrs)) as producer:
                for _ in range(3):
                    assert (await producer.send(new_message("T", b"x"))).ok
            assert "T" in namesrv.asked

    run(go())


def test_instances_are_shared_and_released() -> None:
    async def go() -> None:
        async with servers(["ok"]) as (namesrv, (broker,)):
            cfg = config(namesrv)
            p1 = await Producer("PG1", config=cfg).start()
            p2 = await Producer("PG2", config=cfg).start()
            p3 = await Producer("PG1", config=cfg).start()  # same group: an instance of its own
            assert p1.instance is p2.instance and p3.instance is not p1.instance
            await p1.send(new_message("T", b"x"))
            await p2.send(new_message("T", b"y"))
            shared = p1.instance
            await p1.shutdown()
            assert not shared.closed and (await p2.send(new_message("T", b"z"))).ok
            await p2.shutdown()
            await p3.shutdown()
            assert shared.closed
            assert {u.get("producerGroup") for u in broker.unregistered} >= {"PG1", "PG2", "CLIENT_INNER_PRODUCER"}
            assert get_client_instance(cfg) is not shared  # a new one for the next client
            with pytest.raises(ClientNotRunningError):
                await p1.send(new_message("T", b"x"))

    run(go())
