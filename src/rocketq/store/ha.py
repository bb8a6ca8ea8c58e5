"""Master/slave replication of the commit log: RocketMQ 4.x's ``HAService`` and ``HAConnection`` (the master's
side) and ``HAClient`` (the slave's).

The protocol is not remoting but raw TCP to the master's ``haListenPort`` (the broker's ``listenPort + 1``):

- the slave sends 8-byte big-endian longs, its commit log's max offset: once on connecting (where the master is to
  start), again whenever it has appended, and every ``haSendHeartbeatInterval`` (5 s) otherwise. Each is also the
  master's acknowledgement that the slave holds everything below it;
- the master sends frames: a 12-byte header (the commit-log offset of the data, 8 bytes, and its length, 4 bytes)
  and that many bytes of its commit log, at most ``haTransferBatchSize`` (32 KiB) and never past the end of a
  commit-log file. A frame of length 0 is a heartbeat, sent after ``haSendHeartbeatInterval`` of silence;
- a slave that reports 0 (an empty store) is sent data from the start of the master's last commit-log file; any
  other report is where the master starts. A report past the master's end closes the connection;
- the slave appends each frame's bytes at the end of its commit log, which must be where the frame says (else it
  drops the connection and starts over from what it holds), and its reput service dispatches them as its own;
- either side drops a connection silent for ``haHousekeepingInterval`` (20 s); the slave reconnects every 5 s.

The slave's commit log is thus a byte-for-byte copy of the master's from where it began, BLANK ends of files
included, and its files have the master's names.

``brokerRole=SYNC_MASTER``: a put is answered once a slave has acknowledged its record (``HAService``'s
``GroupTransferService``): ``FLUSH_SLAVE_TIMEOUT`` after ``slaveTimeout`` (3 s), and ``SLAVE_NOT_AVAILABLE`` at
once when no slave is connected or the slaves are ``haSlaveFallbehindMax`` (256 MiB) or more behind. A slave store
refuses puts (``SERVICE_NOT_AVAILABLE``).

Threads, as in Java: one accepting on the master, a reader and a writer for each slave connection, one on the
slave. Socket calls let go of the GIL.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from rocketq.common.net import parse_server_address
from rocketq.store.commit_log import PutMessageResult, PutMessageStatus
from rocketq.store.flush_service import ServiceThread

if TYPE_CHECKING:
    from rocketq.store.message_store import MessageStore

__all__ = ["HEADER_SIZE", "HAClient", "HAConnection", "HAService"]

log = logging.getLogger(__name__)

_OFFSET = struct.Struct(">q")
_HEADER = struct.Struct(">qi")
HEADER_SIZE = _HEADER.size  # 12
#: The slave's receive buffer (``HAClient.READ_MAX_BUFFER_SIZE``): frames are taken out of it as they complete.
CLIENT_READ_SIZE = 4 << 20
#: How long a caught-up writer waits for new data before it looks again (Java: 100 ms); a SYNC_MASTER put wakes it.
WRITER_IDLE_WAIT_S = 0.01
#: Seconds between a slave's attempts to reach its master (Java: 5 s).
RECONNECT_WAIT_S = 5.0
CONNECT_TIMEOUT_S = 3.0
#: How often puts waiting on a slave (asyncio) look at their deadlines when no acknowledgement comes.
ROUND_TICK_S = 0.05


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


# ============================================================================ master


class _TransferWaiters:
    """``GroupTransferService``: puts waiting until a slave has acknowledged their records.

    Waiters are kept in a heap by the offset they need; an acknowledgement releases every waiter at or below it,
    a thread of its own expires the rest at their deadline. Blocking callers wait on an event, the others on a
    ``concurrent.futures.Future`` of their put's result.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._heap: list[tuple[int, int, float, Future[PutMessageResult], PutMessageResult]] = []
        self._seq = itertools.count()
        self._acked = 0
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def _start(self) -> None:
        """Under the lock, with the first waiter: only a SYNC_MASTER has any."""
        if self._thread is None and not self._stopped.is_set():
            self._thread = threading.Thread(target=self._run, name="GroupTransferService", daemon=True)
            self._thread.start()

    def shutdown(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self._expire(float("inf"))  # nobody is left waiting on a store that is going away

    def submit(self, next_offset: int, result: PutMessageResult, timeout_s: float) -> Future[PutMessageResult]:
        fut: Future[PutMessageResult] = Future()
        with self._lock:
            if self._acked >= next_offset:
                fut.set_result(result)
                return fut
            heapq.heappush(self._heap, (next_offset, next(self._seq), time.monotonic() + timeout_s, fut, result))
            self._start()
        self._wake.set()
        return fut

    def acknowledged(self, offset: int) -> None:
        done = []
        with self._lock:
            if offset <= self._acked:
                return
            self._acked = offset
            heap = self._heap
            while heap and heap[0][0] <= offset:
                done.append(heapq.heappop(heap))
        for _, _, _, fut, result in done:
            if not fut.done():
                fut.set_result(result)

    def _expire(self, now: float) -> None:
        expired = []
        with self._lock:
            keep = []
            for item in self._heap:
                (expired if item[2] <= now else keep).append(item)
            if expired:
                heapq.heapify(keep)
                self._heap = keep
        for _, _, _, fut, result in expired:
            if not fut.done():
                result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
                fut.set_result(result)

    def _run(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                soonest = min((item[2] for item in self._heap), default=None)
            wait = 1.0 if soonest is None else max(0.0, soonest - time.monotonic())
            self._wake.wait(min(wait, 1.0))
            self._wake.clear()
            self._expire(time.monotonic())


class HAService:
    """The master's side: accepts slaves, streams its commit log to each (:class:`HAConnection`), and keeps the
    greatest offset a slave has acknowledged (``push2SlaveMaxOffset``) for SYNC_MASTER puts."""

    def __init__(self, store: MessageStore, host: str = "127.0.0.1", port: int = 0) -> None:
        self.store = store
        self.host = host
        self.requested_port = port
        self.port = 0  # bound, once started
        self.connections: list[HAConnection] = []
        self._lock = threading.Lock()
        self.push2slave_max_offset = 0
        self._waiters = _TransferWaiters()
        # Per event loop: the future its waiting puts share until the next acknowledgement (wait_transferred).
        self._loop_rounds: dict[asyncio.AbstractEventLoop, tuple[asyncio.Future[None], asyncio.TimerHandle]] = {}
        self._data = threading.Condition()  # writers waiting for data wait on it
        self._server: socket.socket | None = None
        self._stopped = threading.Event()
        self._accept_thread: threading.Thread | None = None

    # --- life cycle --------------------------------------------------------------------------------------
    def start(self) -> None:
        """Listen (``AcceptSocketService.beginAccept``): a port in use is an OSError here, before anything runs."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        server = socket.socket(family, socket.SOCK_STREAM)
        try:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind((self.host, self.requested_port))
            server.listen(16)
            server.settimeout(1.0)
        except OSError:
            server.close()
            raise
        self._server = server
        self.port = server.getsockname()[1]
        self._accept_thread = threading.Thread(target=self._accept_loop, name="HAAcceptSocketService", daemon=True)
        self._accept_thread.start()
        log.info("HA service listening on %s:%d", self.host, self.port)

    def shutdown(self) -> None:
        self._stopped.set()
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.close()
        if self._accept_thread is not None:
            self._accept_thread.join(5.0)
        with self._lock:
            conns = list(self.connections)
        for conn in conns:
            conn.close()
        for conn in conns:
            conn.join(5.0)
        self.wakeup_all()
        self._waiters.shutdown()

    def _accept_loop(self) -> None:
        server = self._server
        assert server is not None
        while not self._stopped.is_set():
            try:
                sock, addr = server.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stopped.is_set():
                    return
                log.exception("HA accept failed")
                time.sleep(0.1)
                continue
            log.info("HA: slave connected from %s", addr)
            conn = HAConnection(self, sock, f"{addr[0]}:{addr[1]}")
            with self._lock:
                self.connections.append(conn)
            conn.start()

    def remove_connection(self, conn: HAConnection) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self.connections.remove(conn)

    # --- what the puts ask ---------------------------------------------------------------------------------
    @property
    def connection_count(self) -> int:
        return len(self.connections)

    def is_slave_ok(self, master_put_where: int) -> bool:
        """A slave is connected and less than ``haSlaveFallbehindMax`` behind *master_put_where*."""
        return bool(self.connections) and \
            master_put_where - self.push2slave_max_offset < self.store.config.ha_slave_fallbehind_max  # fmt: skip

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged everything below *offset*: every waiting put it covers is answered (one hand-over
        to each event loop with waiting puts, whatever their number)."""
        if offset > self.push2slave_max_offset:
            self.push2slave_max_offset = offset
            self._waiters.acknowledged(offset)
            if self._loop_rounds:
                with self._lock:
                    rounds, self._loop_rounds = self._loop_rounds, {}
                for loop, (fut, timer) in rounds.items():
                    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits there any more
                        loop.call_soon_threadsafe(_end_round, fut, timer)

    async def wait_transferred(self, next_offset: int, timeout_s: float) -> PutMessageStatus:
        """For asyncio code: ``submitReplicaRequest`` without a future of its own per put. PUT_OK once a slave
        holds everything below *next_offset*; ``SLAVE_NOT_AVAILABLE`` at once without a slave that is near
        enough; ``FLUSH_SLAVE_TIMEOUT`` after *timeout_s* (checked every ``ROUND_TICK_S`` at least)."""
        if self.push2slave_max_offset >= next_offset:
            return PutMessageStatus.PUT_OK
        if not self.is_slave_ok(next_offset):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self.wakeup_all()
        while True:
            with self._lock:
                current = self._loop_rounds.get(loop)
                if current is None:
                    fut = loop.create_future()
                    self._loop_rounds[loop] = (fut, loop.call_later(ROUND_TICK_S, _tick_round, self, loop, fut))
                else:
                    fut = current[0]
            if self.push2slave_max_offset >= next_offset:  # acknowledged before the round was in place
                return PutMessageStatus.PUT_OK
            await fut
            if self.push2slave_max_offset >= next_offset:
                return PutMessageStatus.PUT_OK
            if loop.time() >= deadline:
                return PutMessageStatus.FLUSH_SLAVE_TIMEOUT

    def _drop_round(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
        with self._lock:
            current = self._loop_rounds.get(loop)
            if current is not None and current[0] is fut:
                del self._loop_rounds[loop]

    def wakeup_all(self) -> None:
        """New data for the writers (``WaitNotifyObject.wakeupAll``)."""
        with self._data:
            self._data.notify_all()

    def wait_for_data(self, timeout_s: float) -> None:
        with self._data:
            self._data.wait(timeout_s)

    def transfer_future(self, result: PutMessageResult) -> Future[PutMessageResult]:
        """``submitReplicaRequest`` for a put stored by a SYNC_MASTER: a future of *result* once a slave holds its
        records (``FLUSH_SLAVE_TIMEOUT`` after ``slaveTimeout``), or at once ``SLAVE_NOT_AVAILABLE``."""
        next_offset = result.wrote_offset + result.wrote_bytes
        if not self.is_slave_ok(next_offset):
            result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            done: Future[PutMessageResult] = Future()
            done.set_result(result)
            return done
        fut = self._waiters.submit(next_offset, result, self.store.config.slave_timeout / 1000)
        if not fut.done():
            self.wakeup_all()
        return fut

    def runtime_info(self) -> dict[str, str]:
        """What ``brokerStatus`` shows of replication (4.9's ``DefaultMessageStore.getRuntimeInfo``)."""
        return {"haConnectionCount": str(self.connection_count),
                "haPush2SlaveMaxOffset": str(self.push2slave_max_offset)}  # fmt: skip


def _end_round(fut: asyncio.Future[None], timer: asyncio.TimerHandle) -> None:
    """In the loop's thread: an acknowledgement came; the puts waiting on *fut* look again."""
    timer.cancel()
    if not fut.done():
        fut.set_result(None)


def _tick_round(service: HAService, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
    """No acknowledgement for a tick: the waiting puts look at their deadlines (and wait on a new round)."""
    service._drop_round(loop, fut)
    if not fut.done():
        fut.set_result(None)


class HAConnection:
    """One slave of the master: a reader of its acknowledgements and a writer of the commit log to it."""

    def __init__(self, service: HAService, sock: socket.socket, client_addr: str) -> None:
        self.service = service
        self.sock = sock
        self.client_addr = client_addr
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self._request_known = threading.Event()
        self._closed = threading.Event()
        self._last_read_ms = _now_ms()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reader = threading.Thread(target=self._guard, args=(self._read_loop,), name="HAReadSocketService",
                                        daemon=True)  # fmt: skip
        self._writer = threading.Thread(target=self._guard, args=(self._write_loop,), name="HAWriteSocketService",
                                        daemon=True)  # fmt: skip

    def start(self) -> None:
        self._reader.start()
        self._writer.start()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._request_known.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()
        self.service.remove_connection(self)
        self.service.wakeup_all()

    def join(self, timeout: float) -> None:
        for t in (self._reader, self._writer):
            if t.is_alive() and t is not threading.current_thread():
                t.join(timeout)

    def _guard(self, loop: Callable[[], None]) -> None:
        try:
            loop()
        except OSError as exc:
            if not self._closed.is_set():
                log.info("HA connection of slave %s ended: %s", self.client_addr, exc)
        except Exception:
            log.exception("HA connection of slave %s failed", self.client_addr)
        finally:
            self.close()

    def _read_loop(self) -> None:
        """``ReadSocketService``: the slave's reports, 8 bytes each; the last whole one of a read counts."""
        store = self.service.store
        housekeeping_ms = store.config.ha_housekeeping_interval
        self.sock.settimeout(1.0)
        pending = b""
        while not self._closed.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                if _now_ms() - self._last_read_ms > housekeeping_ms:
                    log.warning("HA: slave %s silent for %d ms, connection closed", self.client_addr,
                                _now_ms() - self._last_read_ms)  # fmt: skip
                    return
                continue
            if not data:
                log.info("HA: slave %s closed its connection", self.client_addr)
                return
            self._last_read_ms = _now_ms()
            pending += data
            whole = len(pending) - len(pending) % 8
            if not whole:
                continue
            (offset,) = _OFFSET.unpack_from(pending, whole - 8)
            pending = pending[whole:]
            self.slave_ack_offset = offset
            if self.slave_request_offset < 0:
                self.slave_request_offset = offset
                log.info("HA: slave %s requests offset %d", self.client_addr, offset)
                self._request_known.set()
            elif offset > store.get_max_phy_offset():
                log.warning("HA: slave %s reports offset %d, past this commit log's end %d; connection closed",
                            self.client_addr, offset, store.get_max_phy_offset())  # fmt: skip
                return
            self.service.notify_transfer_some(offset)

    def _start_offset(self) -> int:
        request = self.slave_request_offset
        if request != 0:
            return request
        cl = self.service.store.commit_log
        end = cl.get_max_offset()
        return max(0, end - end % cl.file_size)

    def _write_loop(self) -> None:
        """``WriteSocketService``: frames of the commit log from where the slave asked, heartbeats when idle."""
        while not self._request_known.wait(1.0):
            if self._closed.is_set():
                return
        if self._closed.is_set():
            return
        service = self.service
        store = service.store
        cl = store.commit_log
        cfg = store.config
        batch = max(1, cfg.ha_transfer_batch_size)
        heartbeat_ms = cfg.ha_send_heartbeat_interval
        sock = self.sock
        sock.settimeout(max(1.0, cfg.ha_housekeeping_interval / 1000))
        next_offset = self._start_offset()
        log.info("HA: sending the commit log to slave %s from offset %d (it asked for %d)", self.client_addr,
                 next_offset, self.slave_request_offset)  # fmt: skip
        last_write = _now_ms()
        warned_gone = False
        while not self._closed.is_set():
            found = cl.get_data(next_offset)
            size = 0
            if found is not None and next_offset >= cl.get_min_offset():
                mf, pos = found
                if mf.file_from_offset + pos == next_offset:
                    size = min(batch, mf.read_position() - pos)
            if size > 0:
                try:
                    # A copy (at most a batch), not a view: a send that blocks on a slow slave must not keep the
                    # mapping of a file retention deletes meanwhile from being closed.
                    data = mf.mm[pos : pos + size]
                except (TypeError, ValueError):  # closed under us (deleted by retention): look again
                    continue
                _send_all(sock, [_HEADER.pack(next_offset, size), data])
                next_offset += size
                last_write = _now_ms()
                continue
            if found is None and next_offset < cl.get_min_offset() and not warned_gone:
                warned_gone = True
                log.warning("HA: slave %s asks for offset %d, below this commit log's first %d (deleted)",
                            self.client_addr, next_offset, cl.get_min_offset())  # fmt: skip
            if _now_ms() - last_write > heartbeat_ms:
                _send_all(sock, [_HEADER.pack(next_offset, 0)])
                last_write = _now_ms()
            service.wait_for_data(WRITER_IDLE_WAIT_S)


def _send_all(sock: socket.socket, parts: list[bytes | memoryview]) -> None:
    """``sendmsg`` of *parts* until all of it is out (a partial send goes on from where it stopped)."""
    total = sum(len(p) for p in parts)
    sent = sock.sendmsg(parts)
    while sent < total:
        rest: list[bytes | memoryview] = []
        skip = sent
        for p in parts:
            if skip >= len(p):
                skip -= len(p)
                continue
            rest.append(memoryview(p)[skip:] if skip else p)
            skip = 0
        parts = rest
        total -= sent
        sent = sock.sendmsg(parts)


# ============================================================================ slave


class HAClient(ServiceThread):
    """The slave's side (``HAClient``): connects to the master's HA address, reports its max offset, appends what
    the master sends. Idle while it has no master address."""

    name = "HAClient"

    def __init__(self, store: MessageStore, master_address: str | None = None) -> None:
        super().__init__()
        self.store = store
        self.master_address = master_address
        self._sock: socket.socket | None = None
        self.current_reported_offset = 0
        self._last_write_ms = 0
        self._last_read_ms = 0
        self.connects = 0  # connections made, for tests and status
        self.frames = 0

    def update_master_address(self, addr: str | None) -> None:
        if addr != self.master_address:
            log.info("HA master address: %s -> %s", self.master_address, addr)
            self.master_address = addr
            self._close_master()
            self.wakeup()

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def shutdown(self, timeout: float = 10.0) -> None:
        self._stopped.set()
        self._wake.set()
        self._close_master()
        if self._thread is not None:
            self._thread.join(timeout)

    def _connect(self) -> bool:
        addr = self.master_address
        if not addr:
            return False
        try:
            host, port = parse_server_address(addr)
            sock = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S)
        except (OSError, ValueError) as exc:
            log.info("HA: cannot reach master %s: %s", addr, exc)
            return False
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(1.0)
        self._sock = sock
        self.connects += 1
        self.current_reported_offset = self.store.get_max_phy_offset()
        self._last_read_ms = _now_ms()
        log.info("HA: connected to master %s, from offset %d", addr, self.current_reported_offset)
        if not self._report(self.current_reported_offset):
            self._close_master()
            return False
        return True

    def _close_master(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _report(self, offset: int) -> bool:
        sock = self._sock
        if sock is None:
            return False
        try:
            sock.sendall(_OFFSET.pack(offset))
        except OSError as exc:
            log.info("HA: reporting offset %d to the master failed: %s", offset, exc)
            return False
        self._last_write_ms = _now_ms()
        return True

    def _report_if_grown(self) -> bool:
        current = self.store.get_max_phy_offset()
        if current > self.current_reported_offset:
            self.current_reported_offset = current
            return self._report(current)
        return True

    def run(self) -> None:
        buf = bytearray(CLIENT_READ_SIZE)
        view = memoryview(buf)
        cfg = self.store.config
        while not self._stopped.is_set():
            if self._sock is None:
                if not self._connect():
                    self.wait_for_running(int(RECONNECT_WAIT_S * 1000))
                    continue
                filled = 0
            sock = self._sock
            assert sock is not None
            if _now_ms() - self._last_write_ms > cfg.ha_send_heartbeat_interval and \
                    not self._report(self.current_reported_offset):  # fmt: skip
                self._close_master()
                continue
            try:
                n = sock.recv_into(view[filled:])
            except TimeoutError:
                n = -1
            except OSError as exc:
                if not self._stopped.is_set():
                    log.info("HA: connection to the master lost: %s", exc)
                self._close_master()
                continue
            if n == 0:
                log.info("HA: the master closed the connection")
                self._close_master()
                continue
            if n > 0:
                self._last_read_ms = _now_ms()
                filled += n
                used = self._dispatch(view, filled)
                if used < 0:
                    self._close_master()
                    continue
                if used:
                    buf[: filled - used] = buf[used:filled]
                    filled -= used
                if not self._report_if_grown():
                    self._close_master()
                    continue
            elif _now_ms() - self._last_read_ms > cfg.ha_housekeeping_interval:
                log.warning("HA: master %s silent for %d ms, connection closed", self.master_address,
                            _now_ms() - self._last_read_ms)  # fmt: skip
                self._close_master()
        self._close_master()

    def _dispatch(self, view: memoryview, filled: int) -> int:
        """Append the whole frames in ``view[:filled]``; the bytes used, or -1 when the stream is not this
        store's continuation (``dispatchReadRequest``)."""
        store = self.store
        pos = 0
        appended = False
        while filled - pos >= HEADER_SIZE:
            master_offset, size = _HEADER.unpack_from(view, pos)
            slave_offset = store.get_max_phy_offset()
            if slave_offset != 0 and slave_offset != master_offset:
                log.error("HA: the master sent offset %d, but this commit log ends at %d; reconnecting",
                          master_offset, slave_offset)  # fmt: skip
                return -1
            if size < 0 or size > len(view) - HEADER_SIZE:
                log.error("HA: the master sent a frame of %d bytes; reconnecting", size)
                return -1
            if filled - pos < HEADER_SIZE + size:
                break
            if size:
                if not store.append_to_commit_log(master_offset, view[pos + HEADER_SIZE : pos + HEADER_SIZE + size]):
                    log.error("HA: appending %d bytes at offset %d failed; reconnecting", size, master_offset)
                    return -1
                appended = True
            self.frames += 1
            pos += HEADER_SIZE + size
        if appended:
            store.after_replica_append()
        return pos
