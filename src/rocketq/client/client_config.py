"""What every producer and consumer is configured with: Java's ``ClientConfig``.

Also the two things derived from it that identify a client to the servers:

- the name-server list: the ``namesrv_addr`` argument, else the ``NAMESRV_ADDR`` environment variable,
  else ``rocketmq.namesrv.addr`` (an environment entry of that name; Java reads a system property),
  addresses separated by ``;``;
- the client id ``ip@instanceName[@unitName]`` (``buildMQClientId``) that brokers list as group members
  and that orders the members for queue allocation.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import socket
import time
from dataclasses import dataclass

from rocketq.client.errors import ClientError
from rocketq.common.acl import SessionCredentials
from rocketq.common.net import parse_server_address
from rocketq.remoting.codes import LanguageCode, MQVersion

__all__ = ["DEFAULT_INSTANCE_NAME", "ClientConfig", "local_ip", "resolve_namesrv_addrs"]

DEFAULT_INSTANCE_NAME = "DEFAULT"
NAMESRV_ENV = "NAMESRV_ADDR"
NAMESRV_PROPERTY = "rocketmq.namesrv.addr"


def resolve_namesrv_addrs(addr: str | None = None) -> list[str]:
    """The name servers to use: ``addr``, else ``$NAMESRV_ADDR``, else ``rocketmq.namesrv.addr`` (``;``-separated)."""
    for value in (addr, os.environ.get(NAMESRV_ENV), os.environ.get(NAMESRV_PROPERTY)):
        if value and value.strip():
            addrs = [a.strip() for a in value.replace(",", ";").split(";") if a.strip()]
            for a in addrs:
                try:
                    parse_server_address(a)
                except ValueError:
                    raise ClientError(f"name server address {a!r} is not host:port (e.g. '127.0.0.1:9876')") from None
            if addrs:
                return addrs
    raise ClientError(
        "no name server address: give one (-n 127.0.0.1:9876 on the command line, namesrv_addr in code) or set "
        "NAMESRV_ADDR"
    )


@functools.cache
def local_ip() -> str:
    """This host's IPv4 address as Java's ``RemotingUtil.getLocalAddress`` would pick it: a non-loopback
    address when there is one, else ``127.0.0.1``. Nothing is sent on the network to find it."""
    candidates: list[str] = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: picks the source address of the default route, sends nothing
            candidates.append(s.getsockname()[0])
    except OSError:
        pass
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            candidates.append(str(info[4][0]))
    except OSError:
        pass
    for ip in candidates:
        if not ip.startswith("127.") and ip != "0.0.0.0":
            return ip
    return "127.0.0.1"


@dataclass(slots=True)
class ClientConfig:
    """Settings shared by producers and consumers; times in seconds.

    ``rebalance_interval`` is Java's ``rocketmq.client.rebalance.waitInterval`` (20 s); the other names
    follow ``ClientConfig``. ``language`` and ``version`` are what the request headers say: by default
    those of the Java 4.9.4 client whose frames the protocol captures hold.

    ``freeze_gc_at_start``: when the first client of the process starts, run one full collection and move the
    objects then alive out of the cyclic collector's reach (:mod:`rocketq.common.gc_tuning`), so that a later
    full collection does not stall every message in flight for tens of ms. Objects are still freed by reference
    counting; only a reference cycle among them, dropped later, is never collected. False leaves the collector
    alone.
    """

    namesrv_addr: str | None = None
    instance_name: str = DEFAULT_INSTANCE_NAME
    client_ip: str | None = None
    unit_name: str | None = None
    poll_name_server_interval: float = 30.0
    heartbeat_broker_interval: float = 30.0
    persist_consumer_offset_interval: float = 5.0
    rebalance_interval: float = 20.0
    pull_time_delay_when_exception: float = 1.0
    api_timeout: float = 3.0
    language: LanguageCode = LanguageCode.JAVA
    version: int = int(MQVersion.V4_9_4)
    freeze_gc_at_start: bool = True
    #: An ACL account: every request is signed with it (:mod:`rocketq.client.acl`); None sends no signature.
    credentials: SessionCredentials | None = None

    def namesrv_addrs(self) -> list[str]:
        return resolve_namesrv_addrs(self.namesrv_addr)

    def ip(self) -> str:
        return self.client_ip or local_ip()

    def change_instance_name_to_pid(self) -> None:
        """``changeInstanceNameToPID``: ``DEFAULT`` becomes ``pid#<a clock reading>``, a name of this client alone,
        as a 4.9.4 producer, clustering consumer and admin client take it at start. Each such client then has a
        client instance of its own (its name servers, credentials and intervals are its own), and two processes of
        one pid on one address (a container's pid 1 on a host network, say) are two members of a group, not one
        id consuming twice. A broadcasting consumer keeps ``DEFAULT``: its offset file is found by that id again in
        the next run."""
        if self.instance_name == DEFAULT_INSTANCE_NAME:
            self.instance_name = f"{os.getpid()}#{time.monotonic_ns()}"

    def build_client_id(self) -> str:
        """``buildMQClientId``: ``IP@instanceName[@unitName]``."""
        cid = f"{self.ip()}@{self.instance_name}"
        if self.unit_name:
            cid += f"@{self.unit_name}"
        return cid

    def copy(self, **changes: object) -> ClientConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def of(cls, config: ClientConfig | None, *, namesrv_addr: str | None = None,
           instance_name: str | None = None) -> ClientConfig:  # fmt: skip
        """A client's own config: a copy of *config* (the defaults without one) with the name server address and
        instance name given as a producer's or consumer's own arguments, where given."""
        cfg = config.copy() if config is not None else cls()
        if namesrv_addr is not None:
            cfg.namesrv_addr = namesrv_addr
        if instance_name is not None:
            cfg.instance_name = instance_name
        return cfg
