"""Broker settings under RocketMQ's own names: ``common/BrokerConfig`` (+ ``listenPort`` of ``NettyServerConfig``).

One ``broker.conf`` configures both the broker and its store, as in RocketMQ: :func:`load_broker_config`
reads the file once and returns a :class:`BrokerConfig` and the store's ``MessageStoreConfig``, with the
values the two share (``brokerIP1``, ``listenPort``, ``brokerClusterName``, ``autoCreateTopicEnable``,
``defaultTopicQueueNums``, ``brokerRole``) kept equal. Keys that belong to neither are ignored, as
``MixAll.properties2Object`` ignores them. Defaults are those of RocketMQ 4.9, except ``brokerIP1`` and
``brokerIP2`` (127.0.0.1 instead of the first non-loopback address: rocketq listens on ``brokerIP1``).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketq.common.errors import RocketqError
from rocketq.common.java_settings import broker_java_only_settings, parse_like
from rocketq.common.net import parse_server_address
from rocketq.store.store_config import PROPERTY_ALIASES, MessageStoreConfig, parse_properties

log = logging.getLogger(__name__)

__all__ = ["BrokerConfig", "BrokerConfigError", "broker_config_from_properties", "java_only_settings_in",
           "load_broker_config", "unused_settings"]

#: Values BrokerConfig and MessageStoreConfig both hold (attribute names are the same in both).
SHARED_WITH_STORE = ("broker_ip1", "listen_port", "broker_cluster_name", "auto_create_topic_enable",
                     "default_topic_queue_nums")  # fmt: skip


class BrokerConfigError(RocketqError):
    """A ``broker.conf`` that cannot be read or holds a value of the wrong type."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _prop(name: str) -> dict[str, str]:
    """Field metadata for a property whose Java name is not the camelCase of the attribute."""
    return {"prop": name}


def _default_broker_name() -> str:
    # BrokerConfig.localHostName(): the host name, "DEFAULT_BROKER" when it cannot be had.
    try:
        return socket.gethostname() or "DEFAULT_BROKER"
    except OSError:  # pragma: no cover
        return "DEFAULT_BROKER"


@dataclass
class BrokerConfig:
    """``BrokerConfig``: attribute ``x_y`` is property ``xY`` unless its metadata names it (``brokerIP1``)."""

    namesrv_addr: str | None = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR"))
    broker_ip1: str = field(default="127.0.0.1", metadata=_prop("brokerIP1"))
    broker_ip2: str = field(default="127.0.0.1", metadata=_prop("brokerIP2"))
    listen_port: int = 10911
    broker_name: str = field(default_factory=_default_broker_name)
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    broker_permission: int = 6
    default_topic_queue_nums: int = 8
    auto_create_topic_enable: bool = True
    cluster_topic_enable: bool = True
    broker_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    trace_topic_enable: bool = False
    flush_consumer_offset_interval: int = 5000
    send_thread_pool_queue_capacity: int = 10_000
    reject_transaction_message: bool = False
    store_reply_message_enable: bool = True  # a request-reply reply is stored in its topic as well as pushed
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    notify_consumer_ids_changed_enable: bool = True
    transfer_msg_by_heap: bool = True
    region_id: str = "DefaultRegion"
    register_broker_timeout_mills: int = 6000
    slave_read_enable: bool = False
    trace_on: bool = True
    enable_property_filter: bool = False
    filter_data_clean_time_span: int = 24 * 3600 * 1000
    filter_support_retry: bool = False
    compressed_register: bool = False
    force_register: bool = True
    register_name_server_period: int = 30_000
    transaction_time_out: int = field(default=6000, metadata=_prop("transactionTimeOut"))
    transaction_check_max: int = 15
    transaction_check_interval: int = 60_000
    # MessageStoreConfig's timer settings of 5.x (rocketq's timer: broker/timer_message_service.py).
    timer_wheel_enable: bool = True
    timer_max_delay_sec: int = 3 * 24 * 3600
    timer_precision_ms: int = 1000
    # MessageStoreConfig values the broker reads itself.
    broker_role: str = "ASYNC_MASTER"
    default_query_max_num: int = 32
    ha_listen_port: int = 0  # 0: listenPort + 1, as BrokerStartup sets it
    # RocketMQ 5's gRPC endpoint (rocketq.proxy; the proxy's grpcServerPort, 8081 in 5.x): -1 off, 0 any free port.
    grpc_server_port: int = -1
    # NettyServerConfig.serverChannelMaxIdleTimeSeconds and the client expiry of ClientHousekeepingService.
    server_channel_max_idle_time_seconds: int = 120
    # The plain ACL (broker/plain_acl.py): its files are under rocketmqHome/conf (the store root when unset).
    acl_enable: bool = False
    rocketmq_home: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_HOME", ""))
    #: 4.9.4's settings rocketq keeps and lists but does not act on (common/java_settings.py), by Java name.
    java_only: dict[str, str] = field(default_factory=broker_java_only_settings, metadata={"internal": True})

    # --- derived -------------------------------------------------------------------------------
    @property
    def broker_addr(self) -> str:
        """``getBrokerAddr``: brokerIP1:listenPort, the address clients and records carry."""
        return f"{self.broker_ip1}:{self.listen_port}"

    @property
    def ha_server_addr(self) -> str:
        """``getHAServerAddr``: brokerIP2:haListenPort."""
        return f"{self.broker_ip2}:{self.ha_listen_port or self.listen_port + 1}"

    @property
    def vip_port(self) -> int:
        """The "fast" listener of old clients: listenPort − 2 (0 stays 0: any free port)."""
        return self.listen_port - 2 if self.listen_port else 0

    def namesrv_addrs(self) -> list[str]:
        """``namesrvAddr`` split on ``;`` (RocketMQ's separator), blanks dropped."""
        if not self.namesrv_addr:
            return []
        return [a.strip() for a in self.namesrv_addr.replace(",", ";").split(";") if a.strip()]

    # --- loading ---------------------------------------------------------------------------------
    @classmethod
    def property_names(cls) -> dict[str, dataclasses.Field[Any]]:
        """Java property name → field."""
        return {f.metadata.get("prop", _camel(f.name)): f for f in dataclasses.fields(cls)
                if not f.metadata.get("internal")}  # fmt: skip

    def apply_properties(self, props: dict[str, str]) -> None:
        fields = self.property_names()
        for key, raw in props.items():
            f = fields.get(key)
            if f is not None:
                setattr(self, f.name, _convert(key, raw, f))
            elif key in self.java_only:
                try:
                    self.java_only[key] = parse_like(raw, self.java_only[key])
                except ValueError as exc:  # as Java's properties2Object skips it; rocketq acts on none of these
                    log.warning("%s: %s; kept at %s", key, exc, self.java_only[key])


def _convert(key: str, raw: str, f: dataclasses.Field[Any]) -> Any:
    value = raw.strip()
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    if kind == "bool":
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise BrokerConfigError(f"{key}: expected true or false, got {raw!r}")
    if kind == "int":
        try:
            return int(value)
        except ValueError:
            raise BrokerConfigError(f"{key}: expected an integer, got {raw!r}") from None
    return value


def broker_config_from_properties(props: dict[str, str], **overrides: Any
                                  ) -> tuple[BrokerConfig, MessageStoreConfig]:  # fmt: skip
    """Both configs from parsed ``broker.conf`` properties; ``overrides`` (snake_case) win over the file
    and go to whichever of the two configs has the attribute."""
    _refuse_unbuilt(props)
    broker = BrokerConfig()
    broker.apply_properties(props)
    try:
        store = MessageStoreConfig.from_properties(props)
    except RocketqError as exc:
        raise BrokerConfigError(str(exc)) from None
    for name, value in overrides.items():
        if value is None:
            continue
        found = False
        if hasattr(broker, name):
            setattr(broker, name, value)
            found = True
        if hasattr(store, name):
            setattr(store, name, value)
            found = True
        if not found:
            raise BrokerConfigError(f"unknown broker setting {name!r}")
    sync_store_config(broker, store)
    _check_ports(broker)
    _check_namesrv_addrs(broker)
    check_role(broker)
    return broker, store


#: Settings that turn on what rocketq does not build; a broker would otherwise run without it and say nothing.
_UNBUILT = {
    "enableDLegerCommitLog": "DLedger (a commit log replicated by Raft, with leader election) is not built in "
                             "rocketq; replicate with brokerRole=SYNC_MASTER or ASYNC_MASTER and a SLAVE instead",
    "enableControllerMode": "5.x's controller (automatic master switch) is not built in rocketq; replicate with "
                            "brokerRole=SYNC_MASTER or ASYNC_MASTER and a SLAVE instead",
}


def _refuse_unbuilt(props: dict[str, str]) -> None:
    for key, why in _UNBUILT.items():
        if props.get(key, "").strip().lower() == "true":
            raise BrokerConfigError(f"{key}=true: {why}")


def check_role(broker: BrokerConfig) -> None:
    """``BrokerStartup``: a master's ``brokerId`` is 0 whatever the file says; a slave's must be above 0."""
    if broker.broker_role == "SLAVE":
        if broker.broker_id <= 0:
            raise BrokerConfigError(f"brokerId: a slave's must be > 0 (brokerRole=SLAVE), got {broker.broker_id}")
    else:
        broker.broker_id = 0


def _check_ports(broker: BrokerConfig) -> None:
    """A port a socket cannot bind is refused here, with the setting's name, rather than by ``bind``."""
    if not -1 <= broker.grpc_server_port <= 65535:
        raise BrokerConfigError(f"grpcServerPort: not a port (-1 for none, 0 for any, up to 65535): "
                                f"{broker.grpc_server_port}")  # fmt: skip
    if not 0 <= broker.listen_port <= 65535:
        raise BrokerConfigError(f"listenPort: not a port (0 to 65535): {broker.listen_port}")
    if broker.listen_port and broker.vip_port <= 0:
        raise BrokerConfigError(f"listenPort: {broker.listen_port} leaves no port for old clients (listenPort - 2)")
    if not 0 <= broker.ha_listen_port <= 65535:
        raise BrokerConfigError(f"haListenPort: not a port (0 to 65535): {broker.ha_listen_port}")


def _check_namesrv_addrs(broker: BrokerConfig) -> None:
    for addr in broker.namesrv_addrs():
        try:
            parse_server_address(addr)
        except ValueError:
            raise BrokerConfigError(f"namesrvAddr: {addr!r} is not host:port (name servers are separated by ';', "
                                    "e.g. 127.0.0.1:9876;127.0.0.1:9877)") from None


def sync_store_config(broker: BrokerConfig, store: MessageStoreConfig) -> None:
    """Make the values both configs hold equal, the broker's winning (``brokerRole`` from the store)."""
    for name in SHARED_WITH_STORE:
        if hasattr(store, name):
            setattr(store, name, getattr(broker, name))
    broker.broker_role = store.broker_role


def unused_settings(props: dict[str, str]) -> list[str]:
    """The keys of *props* that neither the broker's settings nor the store's take, each followed by the setting
    it nearly spells when there is one (``mapedFileSizeCommitLog (mappedFileSizeCommitLog?)``).

    RocketMQ ignores keys it does not know, as rocketq does; saying which were ignored shows a misspelt key or an
    older name. Settings of 4.9.4 that rocketq keeps without acting on are not among them: see
    :func:`java_only_settings_in`."""
    known = set(BrokerConfig.property_names()) | set(MessageStoreConfig.field_names()) | set(PROPERTY_ALIASES) \
        | set(_UNBUILT) | set(broker_java_only_settings())  # (_UNBUILT: read, refused when true)
    out = []
    for key in props:
        if key in known:
            continue
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.85)
        out.append(f"{key} ({near[0]}?)" if near else key)
    return out


def java_only_settings_in(props: dict[str, str]) -> list[str]:
    """The keys of *props* that are 4.9.4 settings rocketq keeps and lists but does not act on (thread pools,
    Netty buffers, ...)."""
    java_only = broker_java_only_settings()
    return [key for key in props if key in java_only and key not in _UNBUILT]


def load_broker_config(path: str | os.PathLike[str] | None = None, **overrides: Any
                       ) -> tuple[BrokerConfig, MessageStoreConfig]:  # fmt: skip
    """Read a ``broker.conf`` (or nothing: all defaults) into the broker's and the store's configs."""
    props: dict[str, str] = {}
    if path is not None:
        p = Path(path).expanduser()
        try:
            props = parse_properties(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BrokerConfigError(f"{p}: no such config file") from None
        except IsADirectoryError:
            raise BrokerConfigError(f"{p}: is a directory, not a config file") from None
        except OSError as exc:
            raise BrokerConfigError(f"{p}: cannot read: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise BrokerConfigError(f"{p}: not a text properties file") from None
        unused = unused_settings(props)
        if unused:
            log.warning("%s: unknown settings, ignored: %s", p, ", ".join(unused))
        kept = java_only_settings_in(props)
        if kept:
            log.warning("%s: RocketMQ settings rocketq has no use for (kept for getBrokerConfig, not acted on): %s",
                        p, ", ".join(kept))  # fmt: skip
    return broker_config_from_properties(props, **overrides)
