"""rocketq.remoting.eventloop: the choice of event loop (uvloop when installed and wanted) and the transport on it."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from rocketq.remoting import eventloop
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request, make_response_for
from rocketq.remoting.transport import RemotingClient, RemotingConnection, RemotingServer

HAVE_UVLOOP = importlib.util.find_spec("uvloop") is not None


@pytest.mark.parametrize("value", [None, "", "0", "false", "No", " off ", "maybe"])
def test_standard_loop_by_default(monkeypatch: pytest.MonkeyPatch, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(eventloop.ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(eventloop.ENV_VAR, value)
    assert not eventloop.uvloop_wanted()
    assert eventloop.loop_factory() is None
    assert eventloop.uvloop_wanted(True)  # an explicit choice wins over the environment


@pytest.mark.parametrize("value", ["1", "yes", " ON ", "true"])
def test_env_var_turns_uvloop_on(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(eventloop.ENV_VAR, value)
    assert eventloop.uvloop_wanted()
    assert (eventloop.loop_factory() is not None) == HAVE_UVLOOP
    assert not eventloop.uvloop_wanted(False)


async def _round_trip() -> tuple[str, int, bytes | None, int]:
    """A request and a one-way request over a real socket on whatever loop runs this."""
    got_oneway = asyncio.Event()

    def echo(_conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        if request.is_oneway:
            got_oneway.set()
        return make_response_for(request, ResponseCode.SUCCESS, body=request.body)

    async with RemotingServer("127.0.0.1", 0, idle_timeout=None) as server, RemotingClient(server.address) as client:
        server.register_processor(RequestCode.HEART_BEAT, echo)
        big = bytes(range(256)) * 4096  # 1 MiB: many reads and writes
        response = await client.invoke(create_request(RequestCode.HEART_BEAT, {"a": 1}, big), timeout=10)
        await client.invoke_oneway(create_request(RequestCode.HEART_BEAT, {"a": 2}, b"x"))
        await asyncio.wait_for(got_oneway.wait(), 10)
        return eventloop.loop_name(), response.code, response.body, len(big)


@pytest.mark.parametrize("enabled", [True, False])
def test_transport_runs_on_the_chosen_loop(enabled: bool) -> None:
    name, code, body, size = eventloop.run(_round_trip(), enabled=enabled)
    assert name == ("uvloop" if enabled and HAVE_UVLOOP else "asyncio")
    assert code == ResponseCode.SUCCESS and body is not None and len(body) == size


def test_new_event_loop_is_of_the_chosen_kind() -> None:
    loop = eventloop.new_event_loop(False)
    try:
        assert eventloop.loop_name(loop) == "asyncio"
    finally:
        loop.close()
