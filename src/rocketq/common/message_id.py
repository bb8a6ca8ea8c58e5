"""Message ids: the offset message id and the client's ``UNIQ_KEY``.

Mirrors ``MessageDecoder.createMessageId`` / ``decodeMessageId`` and
``MessageClientIDSetter`` (store-format §3.10).

Offset message id: upper-case hex of store-host address (4 or 16 bytes),
i32 port, i64 commit-log offset — 32 hex chars for IPv4, 56 for IPv6.

``UNIQ_KEY`` (remoting Java client): upper-case hex of client IP (4 or 16
bytes), i16 low bits of the process id, i32 class-loader hash code, then per
message i32 milliseconds since the start of the current month (local time) and
an i16 counter. The store treats it as an opaque string.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import os
import random
import socket
import struct
import threading
import time
from functools import lru_cache

from rocketq.common.errors import RocketqError
from rocketq.common.message import HostPort

_PORT_OFFSET = struct.Struct(">iq")
_UNIQ_TAIL = struct.Struct(">ih")


class MessageIdError(RocketqError):
    """A message id string that cannot be decoded."""


@lru_cache(maxsize=1024)
def host_to_bytes(ip: str) -> bytes:
    """Address bytes of an IPv4 or IPv6 literal (4 or 16 bytes)."""
    try:
        return socket.inet_pton(socket.AF_INET, ip)
    except OSError:
        pass
    try:
        return socket.inet_pton(socket.AF_INET6, ip.strip("[]"))
    except OSError as e:
        raise MessageIdError(f"not an IP address: {ip!r}") from e


@lru_cache(maxsize=1024)
def bytes_to_host(addr: bytes) -> str:
    if len(addr) == 4:
        return socket.inet_ntop(socket.AF_INET, addr)
    return socket.inet_ntop(socket.AF_INET6, addr)


def create_offset_message_id(store_host: HostPort, commit_log_offset: int) -> str:
    ip, port = store_host
    return (host_to_bytes(ip) + _PORT_OFFSET.pack(port, commit_log_offset)).hex().upper()


def decode_offset_message_id(msg_id: str) -> tuple[HostPort, int]:
    """Return ((ip, port), commit-log offset) of an offset message id."""
    if len(msg_id) not in (32, 56):
        raise MessageIdError(f"an offset message id has 32 or 56 hex digits, got {len(msg_id)}: {msg_id!r}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as e:
        raise MessageIdError(f"not a hex message id: {msg_id!r}") from e
    addr_len = 4 if len(raw) == 16 else 16
    port, offset = _PORT_OFFSET.unpack_from(raw, addr_len)
    return (bytes_to_host(raw[:addr_len]), port), offset


def _start_of_month_ms(now_ms: int) -> tuple[int, int]:
    """Local-time start of the current month and of the next one, in ms."""
    now = _dt.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (start + _dt.timedelta(days=32)).replace(day=1)
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqueIdGenerator:
    """Generates ``UNIQ_KEY`` values in the format of ``MessageClientIDSetter``."""

    def __init__(self, ip: str = "127.0.0.1", pid: int | None = None, loader_hash: int | None = None) -> None:
        pid = os.getpid() if pid is None else pid
        loader_hash = random.getrandbits(31) if loader_hash is None else loader_hash
        self._prefix = (host_to_bytes(ip) + struct.pack(">hi", _to_i16(pid), _to_i32(loader_hash))).hex().upper()
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._month_start, self._next_month = _start_of_month_ms(int(time.time() * 1000))

    def next_id(self) -> str:
        return self.next_ids(1)[0]

    def next_ids(self, count: int) -> list[str]:
        """*count* ids at one time reading and one pass of the lock (a batch's messages)."""
        now = int(time.time() * 1000)
        with self._lock:
            if now >= self._next_month:
                self._month_start, self._next_month = _start_of_month_ms(now)
            first = next(self._counter)
            if count > 1:  # the counter moves past the ids taken here
                self._counter = itertools.count(first + count)
            elapsed = _to_i32(now - self._month_start)
        prefix, pack = self._prefix, _UNIQ_TAIL.pack
        return [prefix + pack(elapsed, _to_i16(n)).hex().upper() for n in range(first, first + count)]


def _to_i16(v: int) -> int:
    v &= 0xFFFF
    return v - 0x10000 if v & 0x8000 else v


def _to_i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v


def uniq_key_client_ip(uniq_key: str) -> str:
    """The client address inside a remoting-client ``UNIQ_KEY`` (32 or 56 hex chars)."""
    if len(uniq_key) not in (32, 56):
        raise MessageIdError(f"not a remoting-client unique key: {uniq_key!r}")
    raw = bytes.fromhex(uniq_key)
    return bytes_to_host(raw[: 4 if len(raw) == 16 else 16])
