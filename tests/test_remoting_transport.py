"""RemotingServer and RemotingClient over real sockets on 127.0.0.1 (free ports), spec §1 and §3.5–§3.6."""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import pytest

from rocketq.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand, create_request, make_response_for
from rocketq.remoting.errors import HeaderFieldError, RemotingConnectError, RemotingTimeoutError
from rocketq.remoting.transport import RemotingClient, RemotingConnection, RemotingServer, parse_address

HOST = "127.0.0.1"
_T = TypeVar("_T")

Scenario = Callable[[RemotingServer, RemotingClient], Awaitable[None]]


def run(coro: Coroutine[Any, Any, _T], timeout: float = 10.0) -> _T:
    async def bounded() -> _T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def echo(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    return make_response_for(request, remark=f"echo {request.code}", ext_fields=request.ext_fields, body=request.body)


async def with_server(scenario: Scenario, **server_kw: Any) -> None:
    server = RemotingServer(HOST, 0, **server_kw)
    server.register_processor(RequestCode.HEART_BEAT, echo)
    await server.start()
    client = RemotingClient(server.address)
    try:
        await scenario(server, client)
    finally:
        await client.close()
        await server.stop()


async def raw_connection(server: RemotingServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(HOST, server.port)


async def read_command(reader: asyncio.StreamReader) -> RemotingCommand:
    head = await reader.readexactly(4)
    rest = await reader.readexactly(int.from_bytes(head, "big"))
    return RemotingCommand.decode(head + rest)


def test_request_response_and_port_zero() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        assert server.port > 0 and server.address == f"{HOST}:{server.port}"
        request = create_request(RequestCode.HEART_BEAT, {"k": "v"}, body=b"payload")
        response = await client.invoke(request, timeout=2)
        assert response.is_response and response.opaque == request.opaque
        assert (response.code, response.remark, response.ext_fields, response.body) == (
            ResponseCode.SUCCESS,
            "echo 34",
            {"k": "v"},
            b"payload",
        )
        [conn] = server.connections
        assert conn.remote_address == (await client.connect()).local_address

    run(with_server(scenario))


def test_a_reply_comes_in_its_request_s_serialize_type_and_an_error_in_json() -> None:
    """As 4.9.4's ``processRequestCommand``: a processor's answer takes its request's type (a Java client sending
    ROCKETMQ headers reads ROCKETMQ back; the C++ and Node.js clients, which read JSON only, send JSON); what the
    transport answers itself (an unknown code, a processor that failed) is JSON."""
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        seen: list[SerializeType] = []

        def processor(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            seen.append(request.serialize_type)
            if request.header.get_int("queueId") < 0:
                raise HeaderFieldError("queueId", "bad queue")
            return make_response_for(request, ext_fields={"offset": 5})

        server.register_processor(RequestCode.QUERY_CONSUMER_OFFSET, processor)
        binary = RemotingClient(server.address, serialize_type=SerializeType.ROCKETMQ)
        try:
            response = await binary.invoke(create_request(RequestCode.QUERY_CONSUMER_OFFSET, {"queueId": 0}))
            failed = await binary.invoke(create_request(RequestCode.QUERY_CONSUMER_OFFSET, {"queueId": -1}))
            unknown = await binary.invoke(create_request(999))
        finally:
            await binary.close()
        assert seen == [SerializeType.ROCKETMQ, SerializeType.ROCKETMQ]
        assert response.serialize_type == SerializeType.ROCKETMQ and response.header.get_long("offset") == 5
        assert (failed.code, failed.serialize_type) == (ResponseCode.SYSTEM_ERROR, SerializeType.JSON)
        assert (unknown.code, unknown.serialize_type) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, SerializeType.JSON)
        plain = await client.invoke(create_request(RequestCode.QUERY_CONSUMER_OFFSET, {"queueId": 0}))
        assert plain.serialize_type == SerializeType.JSON and plain.header.get_long("offset") == 5

    run(with_server(scenario))


def test_unknown_code_and_default_processor() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        response = await client.invoke(create_request(999))
        assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert response.remark == " request type 999 not supported"
        server.register_default_processor(lambda conn, req: make_response_for(req, remark="default"))
        assert (await client.invoke(create_request(999))).remark == "default"
        assert (await client.invoke(create_request(RequestCode.HEART_BEAT))).remark == "echo 34"

    run(with_server(scenario))


def test_processor_errors_become_system_error() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        def needs_topic(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            return make_response_for(request, remark=request.header.get_str("topic"))

        async def broken(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            raise RuntimeError("disk on fire")

        server.register_processor(RequestCode.GET_ROUTEINFO_BY_TOPIC, needs_topic)
        server.register_processor(RequestCode.GET_MAX_OFFSET, broken)
        response = await client.invoke(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC))
        assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null")
        response = await client.invoke(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}))
        assert (response.code, response.remark) == (ResponseCode.SUCCESS, "T")
        response = await client.invoke(create_request(RequestCode.GET_MAX_OFFSET))
        assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "RuntimeError: disk on fire")
        assert isinstance(HeaderFieldError("x", "m"), ValueError)

    logging.getLogger("rocketq.remoting.transport").disabled = True
    try:
        run(with_server(scenario))
    finally:
        logging.getLogger("rocketq.remoting.transport").disabled = False


def test_oneway_gets_no_reply() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        called = asyncio.Event()

        def processor(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            called.set()
            return make_response_for(request, remark="must not be sent")

        server.register_processor(RequestCode.UPDATE_CONSUMER_OFFSET, processor)
        await client.invoke_oneway(create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {"queueId": 1}))
        await asyncio.wait_for(called.wait(), 2)

        # On a raw socket: after a one-way request, the first frame back answers the next request.
        reader, writer = await raw_connection(server)
        oneway = create_request(RequestCode.UPDATE_CONSUMER_OFFSET, oneway=True)
        normal = create_request(RequestCode.HEART_BEAT)
        writer.write(oneway.encode() + normal.encode())
        await writer.drain()
        first = await asyncio.wait_for(read_command(reader), 2)
        assert first.opaque == normal.opaque
        writer.close()

    run(with_server(scenario))


def test_reads_stay_under_the_mmap_threshold_and_big_frames_arrive_whole() -> None:
    """Both ends read at most 64 KiB a call (a bytes object malloc takes from the heap, not an mmap of its own);
    frames far larger than a read, and many small ones in one, still arrive whole and in order."""
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        conn = await client.connect()
        big = random.Random(3).randbytes(3 * 1024 * 1024 + 7)
        response = await client.invoke(create_request(RequestCode.HEART_BEAT, {"k": "big"}, body=big), timeout=5)
        assert response.body == big
        small = [create_request(RequestCode.HEART_BEAT, {"n": str(i)}, body=bytes([i]) * 700) for i in range(200)]
        answers = await asyncio.gather(*(client.invoke(r, timeout=5) for r in small))
        assert [a.body for a in answers] == [bytes([i]) * 700 for i in range(200)]
        [server_side] = server.connections
        for end in (conn, server_side):
            assert end._transport is not None and end._transport.max_size == 64 * 1024  # type: ignore[attr-defined]

    run(with_server(scenario))


def test_many_concurrent_requests_matched_by_opaque() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        rng = random.Random(7)

        async def slow_echo(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            await asyncio.sleep(rng.random() * 0.02)  # answers come back out of order
            return make_response_for(request, ext_fields={"n": request.header.get_int("n")})

        server.register_processor(RequestCode.QUERY_CONSUMER_OFFSET, slow_echo)
        requests = [create_request(RequestCode.QUERY_CONSUMER_OFFSET, {"n": i}) for i in range(300)]
        responses = await asyncio.gather(*(client.invoke(r, timeout=5) for r in requests))
        for request, response in zip(requests, responses, strict=True):
            assert response.opaque == request.opaque
            assert response.header.get_int("n") == request.header.get_int("n")
        assert len(server.connections) == 1  # all on one connection

    run(with_server(scenario))


def test_a_held_request_does_not_block_the_next_one() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        release = asyncio.Event()

        async def long_poll(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            await release.wait()
            return make_response_for(request, ResponseCode.PULL_NOT_FOUND)

        server.register_processor(RequestCode.PULL_MESSAGE, long_poll)
        held = asyncio.ensure_future(client.invoke(create_request(RequestCode.PULL_MESSAGE), timeout=5))
        await asyncio.sleep(0.05)
        [conn] = server.connections
        assert conn.in_flight == 1
        quick = await client.invoke(create_request(RequestCode.HEART_BEAT), timeout=2)
        assert quick.code == ResponseCode.SUCCESS
        assert not held.done()
        release.set()
        assert (await held).code == ResponseCode.PULL_NOT_FOUND

    run(with_server(scenario))


def test_requests_of_one_read_may_wait_on_one_future() -> None:
    """Processors that await the same future (sends that share a group-commit round), for requests that arrive in
    one read: each takes its first step before it becomes a task, and every one gets the future's value."""

    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        shared: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        started = 0

        async def wait_for_round(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            nonlocal started
            started += 1
            return make_response_for(request, remark=await shared)

        server.register_processor(RequestCode.SEND_MESSAGE, wait_for_round)
        calls = [asyncio.ensure_future(client.invoke(create_request(RequestCode.SEND_MESSAGE), timeout=5))
                 for _ in range(8)]  # fmt: skip
        while started < len(calls):
            await asyncio.sleep(0.01)
        shared.set_result("flushed")
        answers = await asyncio.gather(*calls)
        assert [(r.code, r.remark) for r in answers] == [(ResponseCode.SUCCESS, "flushed")] * len(calls)

    run(with_server(scenario))


def test_timeout_and_late_response_dropped() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        release = asyncio.Event()

        async def stuck(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            await release.wait()
            return make_response_for(request)

        server.register_processor(RequestCode.PULL_MESSAGE, stuck)
        start = time.monotonic()
        with pytest.raises(RemotingTimeoutError, match="PULL_MESSAGE") as info:
            await client.invoke(create_request(RequestCode.PULL_MESSAGE), timeout=0.2)
        assert 0.15 < time.monotonic() - start < 2
        assert isinstance(info.value, TimeoutError)
        release.set()  # the late answer arrives and is dropped
        await asyncio.sleep(0.05)
        assert (await client.invoke(create_request(RequestCode.HEART_BEAT))).code == ResponseCode.SUCCESS

    run(with_server(scenario))


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x08\x07\x00\x00\x00abcd",  # unknown serialize type
        b"\x7f\xff\xff\xff",  # 2 GiB frame
        b"GET / HTTP/1.1\r\n\r\n",
    ],
)
def test_a_bad_frame_closes_only_its_connection(garbage: bytes, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        closed: list[RemotingConnection] = []
        server.add_close_listener(closed.append)
        served: asyncio.Queue[int] = asyncio.Queue()

        def record(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            served.put_nowait(request.opaque)
            return make_response_for(request)

        server.register_processor(RequestCode.GET_MAX_OFFSET, record)
        assert (await client.invoke(create_request(RequestCode.HEART_BEAT))).code == 0
        reader, writer = await raw_connection(server)
        writer.write(create_request(RequestCode.GET_MAX_OFFSET, opaque=1).encode() + garbage)
        await writer.drain()
        assert await asyncio.wait_for(served.get(), 2) == 1  # the good frame before the garbage is handled
        rest = await asyncio.wait_for(reader.read(), 2)  # then EOF (its answer may or may not have made it)
        assert rest == b"" or RemotingCommand.decode(rest).opaque == 1
        writer.close()
        assert len(closed) == 1 and closed[0].closed
        assert (await client.invoke(create_request(RequestCode.HEART_BEAT))).code == 0
        assert len(server.connections) == 1

    with caplog.at_level(logging.WARNING, logger="rocketq.remoting.transport"):
        run(with_server(scenario))
    assert any("bad frame" in r.getMessage() for r in caplog.records)


def test_server_push_to_client() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        connections: list[RemotingConnection] = []

        def heartbeat(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            connections.append(conn)
            return make_response_for(request)

        server.register_processor(RequestCode.HEART_BEAT, heartbeat)
        notified: asyncio.Queue[RemotingCommand] = asyncio.Queue()

        def on_notify(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            notified.put_nowait(request)
            return make_response_for(request)  # dropped: the push is one-way

        async def on_running_info(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            return make_response_for(request, body=b'{"properties":{}}')

        client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
        client.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, on_running_info)
        await client.invoke(create_request(RequestCode.HEART_BEAT))
        [conn] = connections

        await server.invoke_oneway(
            conn, create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"})
        )
        pushed = await asyncio.wait_for(notified.get(), 2)
        assert pushed.is_oneway and pushed.header.get_str("consumerGroup") == "G"
        assert pushed.serialize_type == SerializeType.JSON

        answer = await server.invoke(conn, create_request(RequestCode.GET_CONSUMER_RUNNING_INFO), timeout=2)
        assert answer.body == b'{"properties":{}}'
        # A code the client does not handle is answered by the client as a Java client would.
        answer = await conn.invoke(create_request(RequestCode.CONSUME_MESSAGE_DIRECTLY), timeout=2)
        assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    run(with_server(scenario))


def test_connection_loss_fails_pending_calls() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        server.register_processor(RequestCode.PULL_MESSAGE, lambda conn, req: asyncio.sleep(30))
        closed = asyncio.Event()
        client.add_close_listener(lambda conn: closed.set())
        pending = asyncio.ensure_future(client.invoke(create_request(RequestCode.PULL_MESSAGE), timeout=5))
        await asyncio.sleep(0.05)
        start = time.monotonic()
        await server.stop()
        with pytest.raises(RemotingConnectError):
            await pending
        assert time.monotonic() - start < 2
        await asyncio.wait_for(closed.wait(), 2)
        # The address is dead now: connecting again fails clearly.
        with pytest.raises(RemotingConnectError, match="connect to"):
            await client.invoke(create_request(RequestCode.HEART_BEAT), timeout=1)

    run(with_server(scenario))


def test_client_reconnects_after_the_server_closed_the_connection() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        first = await client.connect()
        await client.invoke(create_request(RequestCode.HEART_BEAT))
        for conn in server.connections:
            await conn.aclose()
        await asyncio.wait_for(first.wait_closed(), 2)
        with pytest.raises(RemotingConnectError):
            await first.invoke(create_request(RequestCode.HEART_BEAT))
        assert (await client.invoke(create_request(RequestCode.HEART_BEAT))).code == 0
        assert await client.connect() is not first

    run(with_server(scenario))


def test_idle_connections_are_closed() -> None:
    async def scenario(server: RemotingServer, client: RemotingClient) -> None:
        conn = await client.connect()
        await client.invoke(create_request(RequestCode.HEART_BEAT))
        await asyncio.wait_for(conn.wait_closed(), 3)
        await asyncio.sleep(0.01)
        assert server.connections == []

    run(with_server(scenario, idle_timeout=0.2))


def test_connect_refused() -> None:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]  # closed again before anyone connects

    async def scenario() -> None:
        async with RemotingClient(f"{HOST}:{port}", connect_timeout=1) as client:
            with pytest.raises(RemotingConnectError, match=f"connect to {HOST}:{port} failed"):
                await client.invoke(create_request(RequestCode.HEART_BEAT))

    run(scenario())


def test_lifecycle_and_addresses() -> None:
    async def scenario() -> None:
        server = RemotingServer(HOST, 0)
        with pytest.raises(RuntimeError):
            _ = server.port
        async with server:
            with pytest.raises(RuntimeError):
                await server.start()
            assert server.started
        assert not server.started
        await server.stop()  # twice is fine
        with pytest.raises(ValueError):
            await RemotingClient().invoke(create_request(34))

    run(scenario())
    assert parse_address("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert parse_address("[::1]:10911") == ("::1", 10911)
    for bad in ("nohost", ":1", "h:x"):
        with pytest.raises(ValueError):
            parse_address(bad)


class _RecordingTransport(asyncio.Transport):
    """A transport that keeps what is written (the protocol object tested without a socket)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5555), "sockname": ("127.0.0.1", 10911)}.get(name, default)


def _frames(data: bytes) -> list[RemotingCommand]:
    from rocketq.remoting.codec import FrameDecoder

    return FrameDecoder().feed(data)


def test_answers_to_one_read_leave_in_one_write_and_need_no_task() -> None:
    async def scenario() -> None:
        from rocketq.remoting.transport import ProcessorTable

        release = asyncio.Event()
        processors = ProcessorTable()
        processors.register(RequestCode.HEART_BEAT, echo)

        async def at_once(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            return make_response_for(request, remark="at once")  # a coroutine that never waits

        async def held(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            await release.wait()
            return make_response_for(request, remark="later")

        processors.register(RequestCode.GET_MAX_OFFSET, at_once)
        processors.register(RequestCode.PULL_MESSAGE, held)
        conn = RemotingConnection(processors=processors, serialize_type=SerializeType.JSON)
        transport = _RecordingTransport()
        conn.connection_made(transport)
        requests = [create_request(RequestCode.HEART_BEAT if i % 2 else RequestCode.GET_MAX_OFFSET) for i in range(10)]
        pull = create_request(RequestCode.PULL_MESSAGE)
        conn.data_received(b"".join(r.encode() for r in [*requests[:5], pull, *requests[5:]]))
        assert len(transport.writes) == 1  # ten answers, one write, before the loop even turned
        answers = _frames(transport.writes[0])
        assert [a.opaque for a in answers] == [r.opaque for r in requests]
        assert conn.in_flight == 1  # only the held pull became a task
        release.set()
        for _ in range(100):
            if len(transport.writes) == 2:
                break
            await asyncio.sleep(0.01)
        [late] = _frames(transport.writes[1])
        assert (late.opaque, late.remark) == (pull.opaque, "later")
        assert conn.in_flight == 0

    run(scenario())


def test_calls_of_one_turn_share_a_write_and_a_sender_that_never_yields_still_writes() -> None:
    async def scenario() -> None:
        from rocketq.remoting.transport import ProcessorTable

        conn = RemotingConnection(processors=ProcessorTable())
        transport = _RecordingTransport()
        conn.connection_made(transport)
        calls = [asyncio.ensure_future(conn.invoke(create_request(RequestCode.HEART_BEAT), timeout=5))
                 for _ in range(20)]  # fmt: skip
        await asyncio.sleep(0)  # the calls queue their frames
        await asyncio.sleep(0)  # the flush
        assert len(transport.writes) == 1 and len(_frames(transport.writes[0])) == 20
        answers = [make_response_for(r).mark_response() for r in _frames(transport.writes[0])]
        conn.data_received(b"".join(a.encode() for a in answers))
        assert [r.code for r in await asyncio.gather(*calls)] == [ResponseCode.SUCCESS] * 20
        # One-way sends in a loop that never gives the loop a turn: frames go out once enough are queued.
        transport.writes.clear()
        body = b"x" * 1024
        for _ in range(1000):
            await conn.invoke_oneway(create_request(RequestCode.UPDATE_CONSUMER_OFFSET, body=body))
        assert transport.writes and sum(len(w) for w in transport.writes) > 512 * 1024
        conn.close()

    run(scenario())
