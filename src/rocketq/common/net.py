"""``host:port`` addresses as RocketMQ writes them (``127.0.0.1:9876``, ``[::1]:9876``): one parser for the
name-server lists, the broker and HA addresses and the peers of connections, so that each refuses a bad one the
same way."""

from __future__ import annotations

__all__ = ["parse_address"]


def parse_address(addr: str) -> tuple[str, int]:
    """``"127.0.0.1:9876"`` → ``("127.0.0.1", 9876)``; the last colon splits, so ``"[::1]:9876"`` and a bare IPv6
    address with a port work. ``ValueError`` for anything else, a port outside 1..65535 included."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not a host:port address: {addr!r}")
    return host.strip("[]"), int(port)
