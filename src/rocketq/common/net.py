"""``host:port`` addresses as RocketMQ writes them (``127.0.0.1:9876``, ``[::1]:9876``): one parser for the
name-server lists, the broker and HA addresses and the peers of connections, so that each refuses a bad one the
same way."""

from __future__ import annotations

__all__ = ["parse_address", "parse_server_address"]


def parse_address(addr: str) -> tuple[str, int]:
    """``"127.0.0.1:9876"`` → ``("127.0.0.1", 9876)``; the last colon splits, so ``"[::1]:9876"`` and a bare IPv6
    address with a port work. ``ValueError`` for anything else, a port outside 0..65535 included (0 can name a
    peer, as a host tuple of a record can say it)."""
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"not a host:port address: {addr!r}")
    return host.strip("[]"), int(port)


def parse_server_address(addr: str) -> tuple[str, int]:
    """:func:`parse_address` of a server to connect to (a name server, a broker): its port is 1..65535."""
    host, port = parse_address(addr)
    if port == 0:
        raise ValueError(f"not a host:port address of a server (port 0): {addr!r}")
    return host, port
