"""The asyncio shell around the codec: ``RemotingServer``, ``RemotingClient`` and their connections.

Mirrors RocketMQ's ``remoting/netty`` package: ``NettyRemotingServer`` / ``NettyRemotingClient`` (listen,
connect, connection events, idle close), ``NettyRemotingAbstract`` (``processRequestCommand``,
``processResponseCommand``, ``invokeSyncImpl``, ``invokeOnewayImpl``) and ``NettyRequestProcessor``
(spec: remoting-protocol §1, §3.5, §3.6).

What a peer relies on, and how it is done here:

- A request's processor is called as soon as its frame is read (as Java hands it to its executor at once).
  Most processors never wait: they run to the end right there, with no task. One that has to wait (a
  long-polling pull up to its suspend timeout, a SYNC_FLUSH put) goes on as a task of its own, so it never
  delays the requests behind it on the same connection. A processor therefore starts outside any task:
  before its first ``await`` it must not use ``asyncio.timeout`` (``asyncio.wait_for`` is fine).
- Frames written within one turn of the loop leave in one socket write: the answers to the requests of one
  read, the requests of many concurrent callers. Nothing waits for a write unless the peer stops reading
  (the socket's buffer passes its high-water mark); then ``send`` waits until it drains.
- Responses are matched to calls by ``opaque``; an unmatched response is dropped (ali-ons sends
  "one-way" calls without the one-way bit and ignores the answer). A call times out by a timer of its own.
- A one-way request gets no reply, even when its processor returns one or fails.
- A code with no processor (and no default processor) gets REQUEST_CODE_NOT_SUPPORTED with Java's
  remark; a processor that raises gets SYSTEM_ERROR with a short description (``HeaderFieldError``
  gives the "the custom field <x> is null" text).
- A processor's answer goes out in its request's serialize type, as 4.9.4's (the captures show it; the C++ and
  Node.js clients, which read JSON only, send JSON); what the transport answers itself is JSON, and so are the
  server's own calls.
- A frame that does not decode closes that connection only, with a log line.
- The connection is symmetric: a server pushes requests to a client (``RemotingConnection.invoke`` /
  ``invoke_oneway``), and a client answers them through its own registered processors.
- A server writes every frame with a JSON header, whatever the request used (C++ and Node.js clients
  read nothing else).

Processors are plain callables ``processor(connection, request)`` returning a response, ``None`` (no
reply), or an awaitable of either. Blocking work (store I/O) belongs in ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, Protocol, TypeAlias, cast

from rocketq.common.net import parse_address
from rocketq.remoting.codec import FRAME_MAX_LENGTH, FrameDecoder
from rocketq.remoting.codes import FLAG_ONEWAY, FLAG_RESPONSE, ResponseCode, SerializeType, request_code_name
from rocketq.remoting.command import RemotingCommand, make_response_for
from rocketq.remoting.errors import (
    FrameError,
    HeaderFieldError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    RequestBodyError,
)

_SERIALIZE_JSON = SerializeType.JSON

__all__ = [
    "DEFAULT_TIMEOUT",
    "ConnectionListener",
    "ProcessorTable",
    "RemotingClient",
    "RemotingConnection",
    "RemotingServer",
    "RequestProcessor",
    "RpcHook",
    "connect_failure_reason",
    "parse_address",
]

log = logging.getLogger(__name__)

RequestProcessor: TypeAlias = Callable[
    ["RemotingConnection", RemotingCommand],
    "Awaitable[RemotingCommand | None] | RemotingCommand | None",
]
ConnectionListener: TypeAlias = Callable[["RemotingConnection"], "Awaitable[None] | None"]

#: Java clients wait 3 s for most calls.
DEFAULT_TIMEOUT = 3.0
#: Queued frames are written at once past this many bytes, not only at the end of the loop's turn.
_FLUSH_BYTES = 256 * 1024
#: Bytes a read asks of the socket (asyncio's ``max_size``, 256 KiB by default): under glibc's mmap threshold
#: (128 KiB), so the bytes object of each read comes from the heap. At 256 KiB every read was an mmap, a
#: shrinking mremap and a munmap, with a page fault for each 4 KiB received: 35-50 us more a read of a 34 KB
#: batch than a read into a buffer already there, in system time no profiler of Python code shows.
_READ_SIZE = 64 * 1024


def _format_peer(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = str(peer[0])
        return f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"
    return str(peer)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def connect_failure_reason(exc: OSError) -> str:
    """Why a connect failed, as a person says it (``connection refused``, ``timed out``), not the exception's text
    (``ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 1)``)."""
    if isinstance(exc, TimeoutError) and not exc.errno:
        return "timed out"
    if exc.errno:
        return os.strerror(exc.errno).lower()
    return _describe(exc)


class RpcHook(Protocol):
    """Java's ``RPCHook``: looks at (and may change) every request before it is sent (a client's) or processed
    (a server's). A server's hook that raises refuses the request: it is answered ``SYSTEM_ERROR`` with the
    exception's ``remark`` attribute, or its text, as the remark."""

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None: ...


class ProcessorTable:
    """Request processors by request code, plus an optional default (Java's ``processorTable`` and
    ``defaultRequestProcessor``). One table can serve several servers (a broker's main and VIP ports).

    ``rpc_hooks`` run, in order, before any request the table's servers receive is looked up and processed
    (``registerServerRPCHook``): the broker's ACL check is one."""

    def __init__(self) -> None:
        self._processors: dict[int, RequestProcessor] = {}
        self.default: RequestProcessor | None = None
        self.rpc_hooks: list[RpcHook] = []
        #: Codes whose SUCCESS answers are JSON whatever the request's serialize type: those Java's processors
        #: write themselves with the messages found (QUERY_MESSAGE, VIEW_MESSAGE_BY_ID), not through the callback
        #: that gives an answer its request's type.
        self.json_answers: set[int] = set()

    def register(self, code: int, processor: RequestProcessor) -> None:
        self._processors[int(code)] = processor

    def register_default(self, processor: RequestProcessor | None) -> None:
        self.default = processor

    def lookup(self, code: int) -> RequestProcessor | None:
        return self._processors.get(code, self.default)

    def codes(self) -> list[int]:
        return sorted(self._processors)


_background: set[asyncio.Task[Any]] = set()  # listener tasks, referenced until done


async def _await_listener(result: Awaitable[None], conn: RemotingConnection, what: str) -> None:
    try:
        await result
    except Exception:
        log.exception("%s listener failed for %s", what, conn)


def _notify(listener: ConnectionListener, conn: RemotingConnection, what: str) -> None:
    """Call a connection listener; a coroutine listener runs as a task of its own."""
    try:
        result = listener(conn)
    except Exception:
        log.exception("%s listener failed for %s", what, conn)
        return
    if inspect.isawaitable(result):
        task = asyncio.ensure_future(_await_listener(result, conn, what))
        _background.add(task)
        task.add_done_callback(_background.discard)


class _Resume:
    """Continues a coroutine whose first step already ran by hand, as a task would have run it.

    ``await _Resume(coro, yielded)`` hands ``yielded`` (what the coroutine's first step gave up: a future or
    ``None``) to the awaiting task, then relays every value and exception between the task and the coroutine
    until it returns (what ``yield from`` does).

    A future that the first step gave up carries asyncio's mark of a future being awaited
    (``_asyncio_future_blocking``) until a task takes it up. Until then, another coroutine awaiting the same future
    (the sends that share one group-commit round) would find the mark set and fail with "await wasn't used with
    future": the mark is taken off here and put back in the task's first step, where the task takes it up at once.
    """

    __slots__ = ("_coro", "_marked", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, Any], yielded: Any) -> None:
        self._coro = coro
        self._yielded = yielded
        self._marked = getattr(yielded, "_asyncio_future_blocking", False) is True
        if self._marked:
            yielded._asyncio_future_blocking = False

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        yielded = self._yielded
        if self._marked:
            yielded._asyncio_future_blocking = True
        while True:
            try:
                sent = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:
                try:
                    yielded = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    yielded = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


class RemotingConnection(asyncio.Protocol):
    """One TCP connection, on either side: sends requests and responses, reads and dispatches frames.

    ``attributes`` is free for the layers above (a broker keeps the client id, language and version
    of the peer there). ``closed`` / ``wait_closed()`` tell a held request that its peer is gone.
    Made by ``RemotingServer`` and ``RemotingClient`` as the asyncio protocol of their sockets.
    """

    def __init__(
        self,
        *,
        processors: ProcessorTable,
        max_frame_length: int = FRAME_MAX_LENGTH,
        serialize_type: SerializeType | None = None,
        close_listeners: list[ConnectionListener] | None = None,
        role: str = "remoting",
        on_made: Callable[[RemotingConnection], None] | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._processors = processors
        self._decoder = FrameDecoder(max_frame_length)
        # None: each command keeps its own serialize type; a server forces JSON.
        self.serialize_type = serialize_type
        self._close_listeners = close_listeners if close_listeners is not None else []
        self._on_made = on_made
        self.role = role
        self.remote_address = ""
        self.local_address = ""
        self.attributes: dict[str, Any] = {}
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = asyncio.Event()
        self._lost: asyncio.Future[None] = self._loop.create_future()
        self._out: list[bytes] = []  # frames waiting for the next flush
        self._out_bytes = 0
        self._flush_scheduled = False
        self._dispatching = False  # inside data_received: its frames' answers are flushed at its end
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self.last_activity = self._loop.time()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<RemotingConnection {self.role} {self.local_address} -> {self.remote_address} {state}>"

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def in_flight(self) -> int:
        """Requests from the peer still being processed (held ones: a processor that had to wait)."""
        return len(self._tasks)

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # -- asyncio.Protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's TCP transport has the methods of asyncio.Transport, not the class.
        self._transport = cast(asyncio.Transport, transport)
        if hasattr(transport, "max_size"):  # asyncio's selector transport (uvloop reads its own way)
            transport.max_size = _READ_SIZE  # type: ignore[attr-defined]
        self.remote_address = _format_peer(transport.get_extra_info("peername"))
        self.local_address = _format_peer(transport.get_extra_info("sockname"))
        if self._on_made is not None:
            self._on_made(self)

    def data_received(self, data: bytes) -> None:
        self.last_activity = self._loop.time()
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            log.warning("%s: closing connection from %s: bad frame: %s", self.role, self.remote_address, exc)
            self._dispatch(exc.decoded)  # the frames before the bad one are handled, as Java would
            self._teardown(f"bad frame: {exc}")
            return
        if commands:
            self._dispatch(commands)

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._teardown("closed by peer" if exc is None else f"connection error: {exc}")
        if not self._lost.done():
            self._lost.set_result(None)

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drain_waiters(None)

    # -- reading ----------------------------------------------------------------------------------

    def _dispatch(self, commands: list[RemotingCommand]) -> None:
        """Handle the commands of one read; the answers they produce at once go out in one write."""
        self._dispatching = True
        try:
            for cmd in commands:
                if cmd.is_response:
                    self._on_response(cmd)
                else:
                    self._on_request(cmd)
        finally:
            self._dispatching = False
        if self._out:
            self._flush()

    def _on_response(self, cmd: RemotingCommand) -> None:
        future = self._pending.pop(cmd.opaque, None)
        if future is not None and not future.done():
            future.set_result(cmd)
        else:
            log.debug("%s: dropping unmatched response opaque=%d from %s", self.role, cmd.opaque, self.remote_address)

    def _on_request(self, request: RemotingCommand) -> None:
        """Run the request's processor at once (no task for the usual processor that never waits); one that
        has to wait (a held pull, a disk flush) goes on as a task, so it holds up nothing behind it."""
        table = self._processors
        if table.rpc_hooks:
            try:
                for hook in table.rpc_hooks:
                    hook.before_request(self.remote_address, request)
            except Exception as exc:
                remark = getattr(exc, "remark", None) or _describe(exc)
                log.debug("%s: request %d from %s refused: %s", self.role, request.code, self.remote_address, remark)
                self._respond(request, make_response_for(request, ResponseCode.SYSTEM_ERROR, remark), False)
                return
        processor = table.lookup(request.code)
        if processor is None:
            log.debug("%s: request code %d from %s not supported", self.role, request.code, self.remote_address)
            self._respond(
                request,
                make_response_for(
                    request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
                ),
                False,
            )
            return
        try:
            result = processor(self, request)
            if result is None or isinstance(result, RemotingCommand):
                pass  # the usual answer, at once: no awaitable to look for
            elif inspect.iscoroutine(result):
                try:
                    yielded = result.send(None)
                except StopIteration as stop:
                    result = stop.value
                else:
                    self._spawn(self._finish(request, _Resume(result, yielded)))
                    return
            elif inspect.isawaitable(result):
                self._spawn(self._finish(request, result))
                return
        except asyncio.CancelledError:
            return
        except Exception as exc:
            self._respond(request, self._failure_response(request, exc), False)
            return
        self._respond(request, result)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, request: RemotingCommand, pending: Awaitable[RemotingCommand | None]) -> None:
        try:
            response = await pending
        except Exception as exc:
            self._respond(request, self._failure_response(request, exc), False)
            return
        self._respond(request, response)

    def _failure_response(self, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        if isinstance(exc, HeaderFieldError):
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if isinstance(exc, RequestBodyError):
            log.warning("%s: %s from %s refused: %s", self.role, request_code_name(request.code), self.remote_address,
                        exc)  # fmt: skip
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, str(exc))
        log.exception(
            "%s: processing %s from %s failed",
            self.role,
            request_code_name(request.code),
            self.remote_address,
            exc_info=exc,
        )
        return make_response_for(request, ResponseCode.SYSTEM_ERROR, _describe(exc))

    def _respond(self, request: RemotingCommand, response: object, answered: bool = True) -> None:
        """Send *response* to *request*; *answered*: a processor's answer, in the request's serialize type as
        Java's ``processRequestCommand`` callback writes it (an error of the transport's own stays JSON)."""
        if response is None or request.flag & FLAG_ONEWAY:  # is_oneway, inline: once per request
            return
        if not isinstance(response, RemotingCommand):
            log.error("%s: processor of %s returned %r, not a command", self.role,
                      request_code_name(request.code), response)  # fmt: skip
            response = make_response_for(request, ResponseCode.SYSTEM_ERROR, "processor returned no command")
        elif request.serialize_type is not _SERIALIZE_JSON and answered and (
                request.code not in self._processors.json_answers or response.code != ResponseCode.SUCCESS):
            response.serialize_type = request.serialize_type
        response.opaque = request.opaque
        response.flag |= FLAG_RESPONSE
        try:
            self._enqueue(response)
        except RemotingConnectError as exc:
            log.debug("%s: response to %s lost: %s", self.role, self.remote_address, exc)

    def respond(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Answer ``request`` from outside its processor, and write the answer now.

        For a held request that an event answers in the callback that wakes it (a long-polling pull woken by an
        arriving message): its processor then returns ``None``. Written at once, as the answers to one read are,
        not in a later turn of the loop."""
        self._respond(request, response)
        if self._out and not self._dispatching:
            self._flush()

    # -- writing ----------------------------------------------------------------------------------

    def _enqueue(self, cmd: RemotingCommand) -> None:
        """Queue a frame for the next flush: the frames written within one turn of the loop (the answers to one
        read, the calls of many senders) leave in one write."""
        if self._closed.is_set() or self._transport is None or self._transport.is_closing():
            raise RemotingConnectError(f"connection to {self.remote_address} is closed")
        parts = cmd.encode_parts(self.serialize_type)
        self._out += parts
        self._out_bytes += len(parts[0]) + (len(parts[1]) if len(parts) > 1 else 0)
        if self._out_bytes >= _FLUSH_BYTES:
            self._flush()  # a caller that never yields (a loop of one-way sends) must not pile frames up here
        elif not self._flush_scheduled and not self._dispatching:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if not out or self._transport is None:
            return
        self._out = []
        self._out_bytes = 0
        try:
            self._transport.write(out[0] if len(out) == 1 else b"".join(out))
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.debug("%s: write to %s failed: %s", self.role, self.remote_address, exc)
            self._teardown(f"write failed: {exc}")
            return
        self.last_activity = self._loop.time()

    async def _drain(self) -> None:
        """Wait while the socket's send buffer is over its high-water mark (the peer reads slower than we write)."""
        if self._write_paused and not self._closed.is_set():
            waiter: asyncio.Future[None] = self._loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def _wake_drain_waiters(self, error: BaseException | None) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                if error is None:
                    waiter.set_result(None)
                else:
                    waiter.set_exception(error)

    async def send(self, cmd: RemotingCommand) -> None:
        """Write one command as it is (a response, or a request whose answer is not awaited); waits only while
        the peer is not keeping up."""
        self._enqueue(cmd)
        if self._write_paused:
            await self._drain()

    async def invoke(self, request: RemotingCommand, timeout: float = DEFAULT_TIMEOUT) -> RemotingCommand:
        """Send a request and wait for the response with its opaque.

        Raises ``RemotingTimeoutError`` after ``timeout`` seconds (a late response is dropped) and
        ``RemotingConnectError`` when the connection is or gets closed before the response.
        """
        if request.is_response or request.is_oneway:
            raise ValueError("invoke() takes a request that wants a response; use invoke_oneway()")
        opaque = request.opaque
        pending = self._pending
        if opaque in pending:
            raise RemotingError(f"opaque {opaque} is already waiting for a response on {self.remote_address}")
        loop = self._loop
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        pending[opaque] = future
        # One timer a call (Java scans its response table instead); cheaper than asyncio.timeout().
        timer = loop.call_at(loop.time() + timeout, self._expire, future, request.code, opaque, timeout)
        try:
            self._enqueue(request)
            return await future
        finally:
            timer.cancel()
            if pending.get(opaque) is future:
                del pending[opaque]

    def _expire(self, future: asyncio.Future[RemotingCommand], code: int, opaque: int, timeout: float) -> None:
        if not future.done():
            future.set_exception(RemotingTimeoutError(
                f"no response from {self.remote_address} within {timeout * 1000:.0f} ms "
                f"to {request_code_name(code)} (opaque {opaque})"))  # fmt: skip

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send a request with the one-way bit set; nothing comes back."""
        request.mark_oneway()
        await self.send(request)

    # -- closing ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (what is queued is still written): pending calls fail with
        ``RemotingConnectError``. Safe to call twice."""
        if self._out:
            self._flush()
        self._teardown("closed")

    async def aclose(self) -> None:
        """``close()`` and wait until the socket is closed (at most 5 s, then it is cut)."""
        self.close()
        if self._transport is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._lost), 5.0)
        except TimeoutError:
            self._transport.abort()

    def cancel_requests(self) -> None:
        """Cancel the peer's requests still being processed (a stopping server does this)."""
        for task in list(self._tasks):
            task.cancel()

    def _teardown(self, reason: str) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._out = []
        self._out_bytes = 0
        if self._transport is not None:
            self._transport.close()
        error = RemotingConnectError(f"connection to {self.remote_address} {reason}")
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        self._wake_drain_waiters(error)
        for listener in self._close_listeners:
            _notify(listener, self, "close")


class RemotingServer:
    """Listens on ``host:port`` (port 0: a free port, read back from ``port`` after ``start()``) and serves
    requests through its ``ProcessorTable`` (Java's ``NettyRemotingServer``).

    A connection idle (nothing read or written) for ``idle_timeout`` seconds is closed, as a Java
    server does after 120 s. Close listeners let a broker forget the producers and consumers of a
    closed connection.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        processors: ProcessorTable | None = None,
        max_frame_length: int = FRAME_MAX_LENGTH,
        idle_timeout: float | None = 120.0,
        name: str = "remoting-server",
    ) -> None:
        self.host = host
        self._requested_port = port
        self.processors = processors if processors is not None else ProcessorTable()
        self.max_frame_length = max_frame_length
        self.idle_timeout = idle_timeout
        self.name = name
        self._server: asyncio.Server | None = None
        self._connections: set[RemotingConnection] = set()
        self._connect_listeners: list[ConnectionListener] = []
        self._close_listeners: list[ConnectionListener] = [self._forget]
        self._idle_task: asyncio.Task[None] | None = None
        self._port: int | None = None

    # -- configuration ----------------------------------------------------------------------------

    def register_processor(self, code: int, processor: RequestProcessor) -> None:
        self.processors.register(code, processor)

    def register_default_processor(self, processor: RequestProcessor | None) -> None:
        self.processors.register_default(processor)

    def add_connect_listener(self, listener: ConnectionListener) -> None:
        """Called with each new connection (Java's ``onChannelConnect``)."""
        self._connect_listeners.append(listener)

    def add_close_listener(self, listener: ConnectionListener) -> None:
        """Called once with each connection that closed, for whatever reason (``onChannelClose``)."""
        self._close_listeners.append(listener)

    # -- state ------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"{self.name} is not started")
        return self._port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connections(self) -> list[RemotingConnection]:
        return [c for c in self._connections if not c.closed]

    @property
    def started(self) -> bool:
        return self._server is not None

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._server is not None:
            raise RuntimeError(f"{self.name} is already started")
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_connection, self.host, self._requested_port, backlog=1024)
        self._port = self._server.sockets[0].getsockname()[1]
        if self.idle_timeout is not None:
            self._idle_task = asyncio.get_running_loop().create_task(self._close_idle(self.idle_timeout))
        log.info("%s listening on %s", self.name, self.address)

    async def stop(self) -> None:
        """Stop listening, close every connection and cancel the requests still being processed."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        if self._idle_task is not None:
            self._idle_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._idle_task
            self._idle_task = None
        connections = list(self._connections)
        for conn in connections:
            conn.cancel_requests()
        await asyncio.gather(*(conn.aclose() for conn in connections), return_exceptions=True)
        await server.wait_closed()
        log.info("%s on %s:%s stopped", self.name, self.host, self._port)

    async def __aenter__(self) -> RemotingServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _new_connection(self) -> RemotingConnection:
        return RemotingConnection(
            processors=self.processors,
            max_frame_length=self.max_frame_length,
            serialize_type=None,  # each frame its own: an answer its request's (see _respond), a call JSON
            close_listeners=self._close_listeners,
            role=self.name,
            on_made=self._on_connect,
        )

    def _on_connect(self, conn: RemotingConnection) -> None:
        if self._server is None:  # stopping
            conn.close()
            return
        self._connections.add(conn)
        log.debug("%s: connection from %s", self.name, conn.remote_address)
        for listener in self._connect_listeners:
            _notify(listener, conn, "connect")

    def _forget(self, conn: RemotingConnection) -> None:
        self._connections.discard(conn)
        log.debug("%s: connection from %s closed", self.name, conn.remote_address)

    async def _close_idle(self, idle_timeout: float) -> None:
        loop = asyncio.get_running_loop()
        interval = max(0.05, min(idle_timeout / 4, 10.0))
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for conn in list(self._connections):
                # A connection with requests in progress (long polling) is not idle.
                if not conn.closed and conn.in_flight == 0 and now - conn.last_activity > idle_timeout:
                    log.info(
                        "%s: closing connection from %s idle for %.0f s",
                        self.name,
                        conn.remote_address,
                        now - conn.last_activity,
                    )
                    conn.close()

    # -- pushing to clients -----------------------------------------------------------------------

    async def invoke(
        self, conn: RemotingConnection, request: RemotingCommand, timeout: float = DEFAULT_TIMEOUT
    ) -> RemotingCommand:
        """Send a request to a client on its connection and wait for the answer."""
        return await conn.invoke(request, timeout)

    async def invoke_oneway(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        """Push a one-way request to a client (e.g. NOTIFY_CONSUMER_IDS_CHANGED)."""
        await conn.invoke_oneway(request)


class RemotingClient:
    """Connections to servers by ``"host:port"``, one per address, opened on first use
    (Java's ``NettyRemotingClient``).

    ``invoke``/``invoke_oneway`` go to ``addr`` or, without it, to the address given at construction.
    Requests the server sends on these connections (CHECK_TRANSACTION_STATE,
    NOTIFY_CONSUMER_IDS_CHANGED, …) are answered by the client's own processors. ``serialize_type``
    forces the header encoding of everything sent (``None``: each command's own, JSON by default).
    """

    def __init__(
        self,
        addr: str | None = None,
        *,
        connect_timeout: float = DEFAULT_TIMEOUT,
        processors: ProcessorTable | None = None,
        max_frame_length: int = FRAME_MAX_LENGTH,
        serialize_type: SerializeType | None = None,
        name: str = "remoting-client",
        rpc_hook: RpcHook | None = None,
    ) -> None:
        if addr is not None:
            parse_address(addr)
        self.addr = addr
        #: Runs on every request before it is sent (Java's client ``RPCHook``: the ACL signature is one).
        self.rpc_hook = rpc_hook
        self.connect_timeout = connect_timeout
        self.processors = processors if processors is not None else ProcessorTable()
        self.max_frame_length = max_frame_length
        self.serialize_type = serialize_type
        self.name = name
        self._connections: dict[str, RemotingConnection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._close_listeners: list[ConnectionListener] = []
        self._closed = False

    def register_processor(self, code: int, processor: RequestProcessor) -> None:
        self.processors.register(code, processor)

    def register_default_processor(self, processor: RequestProcessor | None) -> None:
        self.processors.register_default(processor)

    def add_close_listener(self, listener: ConnectionListener) -> None:
        self._close_listeners.append(listener)

    def _target(self, addr: str | None) -> str:
        target = addr if addr is not None else self.addr
        if target is None:
            raise ValueError("no address: pass addr or give one to RemotingClient()")
        return target

    async def connect(self, addr: str | None = None) -> RemotingConnection:
        """The open connection to ``addr``, connecting first if there is none."""
        target = self._target(addr)
        if self._closed:
            raise RemotingConnectError(f"{self.name} is closed")
        conn = self._connections.get(target)
        if conn is not None and not conn.closed:
            return conn
        lock = self._locks.setdefault(target, asyncio.Lock())
        async with lock:
            conn = self._connections.get(target)
            if conn is not None and not conn.closed:
                return conn
            host, port = parse_address(target)

            def new_connection() -> RemotingConnection:
                return RemotingConnection(
                    processors=self.processors,
                    max_frame_length=self.max_frame_length,
                    serialize_type=self.serialize_type,
                    close_listeners=[*self._close_listeners, self._forget],
                    role=self.name,
                )

            loop = asyncio.get_running_loop()
            try:
                # wait_for, not asyncio.timeout: a processor may connect before it ever waited (outside a task).
                _, conn = await asyncio.wait_for(loop.create_connection(new_connection, host, port),
                                                 self.connect_timeout)  # fmt: skip
            except (OSError, TimeoutError) as exc:
                raise RemotingConnectError(f"connect to {target} failed: {connect_failure_reason(exc)}") from exc
            self._connections[target] = conn
            conn.attributes["addr"] = target
            return conn

    def _forget(self, conn: RemotingConnection) -> None:
        target = conn.attributes.get("addr")
        if target is not None and self._connections.get(target) is conn:
            del self._connections[target]

    async def invoke(
        self, request: RemotingCommand, timeout: float = DEFAULT_TIMEOUT, *, addr: str | None = None
    ) -> RemotingCommand:
        """Send ``request`` and return the response matched by opaque (see ``RemotingConnection.invoke``)."""
        conn = await self.connect(addr)
        if self.rpc_hook is not None:
            self.rpc_hook.before_request(conn.remote_address, request)
        return await conn.invoke(request, timeout)

    async def invoke_oneway(self, request: RemotingCommand, *, addr: str | None = None) -> None:
        conn = await self.connect(addr)
        if self.rpc_hook is not None:
            self.rpc_hook.before_request(conn.remote_address, request)
        await conn.invoke_oneway(request)

    async def close_connection(self, addr: str) -> None:
        conn = self._connections.pop(addr, None)
        if conn is not None:
            await conn.aclose()

    async def close(self) -> None:
        """Close every connection; calls still waiting fail with ``RemotingConnectError``."""
        self._closed = True
        connections = list(self._connections.values())
        self._connections.clear()
        for conn in connections:
            conn.cancel_requests()
        await asyncio.gather(*(conn.aclose() for conn in connections), return_exceptions=True)

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
