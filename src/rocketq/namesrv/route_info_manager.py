"""The name server's route table: RocketMQ's ``RouteInfoManager`` (remoting spec §7).

Tables (remoting-protocol §7.0)::

    topic_queue_table   topic       -> {broker name -> QueueData}
    broker_addr_table   broker name -> BrokerData (cluster, name, {broker id -> "ip:port"})
    cluster_addr_table  cluster     -> {broker names}
    broker_live_table   broker addr -> BrokerLiveInfo (last update, timeout, data version, HA addr, connection)
    filter_server_table broker addr -> [filter server addresses] (4.x class filters; routes carry them)

Nothing here does I/O: the processors call these methods and serialise the
plain dicts they return (``route_data``, ``cluster_info``) into JSON bodies.
Only masters (broker id 0) carry topic queue data. A broker that stops
registering within its timeout, or whose connection closes, is removed with
everything that only it held.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from rocketq.common.route import MASTER_ID, PERM_READ, PERM_WRITE, BrokerData, QueueData

DEFAULT_BROKER_TIMEOUT_MS = 120_000


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    timeout_ms: int
    data_version: dict[str, Any] | None
    ha_server_addr: str
    connection: Hashable | None


@dataclass(slots=True)
class RegisterBrokerResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _same_version(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.get("counter") == b.get("counter") and a.get("timestamp") == b.get("timestamp")


class RouteInfoManager:
    def __init__(self) -> None:
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}
        self._lock = threading.RLock()

    # --- registration ------------------------------------------------------------------
    def register_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                        ha_server_addr: str, topic_config_wrapper: dict[str, Any] | None,
                        connection: Hashable | None = None, timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS,
                        filter_server_list: list[str] | None = None) -> RegisterBrokerResult:  # fmt: skip
        """``registerBroker``: record the broker and, for a master, its topics' queue data.

        *topic_config_wrapper* is the ``topicConfigSerializeWrapper`` of the request body:
        ``{"dataVersion": {...}, "topicConfigTable": {name: TopicConfig JSON}}``. *filter_server_list*: the
        body's ``filterServerList`` (None: not given, nothing changes; empty: the broker has none now).
        """
        with self._lock:
            self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)
            data = self.broker_addr_table.get(broker_name)
            register_first = data is None
            if data is None:
                data = self.broker_addr_table[broker_name] = BrokerData(cluster, broker_name)
            # One address has one id: a slave promoted to master drops its old id.
            for bid in [bid for bid, addr in data.broker_addrs.items() if addr == broker_addr and bid != broker_id]:
                del data.broker_addrs[bid]
            old = data.broker_addrs.get(broker_id)
            data.broker_addrs[broker_id] = broker_addr
            register_first = register_first or old is None
            version = (topic_config_wrapper or {}).get("dataVersion")
            if topic_config_wrapper is not None and broker_id == MASTER_ID:
                prev = self.broker_live_table.get(broker_addr)
                if register_first or prev is None or not _same_version(prev.data_version, version):
                    for name, cfg in (topic_config_wrapper.get("topicConfigTable") or {}).items():
                        self._create_and_update_queue_data(broker_name, str(cfg.get("topicName", name)), cfg)
            self.broker_live_table[broker_addr] = BrokerLiveInfo(_now_ms(), timeout_ms, version, ha_server_addr,
                                                                 connection)  # fmt: skip
            if filter_server_list is not None:
                if filter_server_list:
                    self.filter_server_table[broker_addr] = list(filter_server_list)
                else:
                    self.filter_server_table.pop(broker_addr, None)
            result = RegisterBrokerResult()
            if broker_id != MASTER_ID:
                master = data.broker_addrs.get(MASTER_ID)
                if master is not None:
                    live = self.broker_live_table.get(master)
                    if live is not None:
                        result.ha_server_addr = live.ha_server_addr
                        result.master_addr = master
            return result

    def _create_and_update_queue_data(self, broker_name: str, topic: str, cfg: dict[str, Any]) -> None:
        qd = QueueData(broker_name, int(cfg.get("readQueueNums", 16)), int(cfg.get("writeQueueNums", 16)),
                       int(cfg.get("perm", PERM_READ | PERM_WRITE)),
                       int(cfg.get("topicSysFlag", cfg.get("topicSynFlag", 0))))  # fmt: skip
        self.topic_queue_table.setdefault(topic, {})[broker_name] = qd

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        with self._lock:
            self.broker_live_table.pop(broker_addr, None)
            self.filter_server_table.pop(broker_addr, None)
            data = self.broker_addr_table.get(broker_name)
            if data is None:
                return
            data.broker_addrs.pop(broker_id, None)
            if not data.broker_addrs:
                self._remove_broker_name(cluster, broker_name)

    def _remove_broker_name(self, cluster: str | None, broker_name: str) -> None:
        self.broker_addr_table.pop(broker_name, None)
        for name, names in list(self.cluster_addr_table.items()):
            if (cluster is None or name == cluster) and broker_name in names:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[name]
        for topic, queues in list(self.topic_queue_table.items()):
            queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]

    # --- liveness ------------------------------------------------------------------------
    def scan_not_active_brokers(self, now_ms: int | None = None) -> list[str]:
        """Remove brokers whose last registration is older than their timeout."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            expired = [addr for addr, live in self.broker_live_table.items()
                       if live.last_update_ms + live.timeout_ms < now]  # fmt: skip
            for addr in expired:
                self._destroy_broker_addr(addr)
            return expired

    def on_connection_closed(self, connection: Hashable) -> list[str]:
        """A broker's connection closed: forget every address it registered over it."""
        with self._lock:
            gone = [addr for addr, live in self.broker_live_table.items() if live.connection == connection]
            for addr in gone:
                self._destroy_broker_addr(addr)
            return gone

    def _destroy_broker_addr(self, broker_addr: str) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        for name, data in list(self.broker_addr_table.items()):
            for bid in [bid for bid, addr in data.broker_addrs.items() if addr == broker_addr]:
                del data.broker_addrs[bid]
            if not data.broker_addrs:
                self._remove_broker_name(None, name)

    def update_live(self, broker_addr: str) -> bool:
        """Refresh a broker's liveness (BROKER_HEARTBEAT, QUERY_DATA_VERSION)."""
        with self._lock:
            live = self.broker_live_table.get(broker_addr)
            if live is None:
                return False
            live.last_update_ms = _now_ms()
            return True

    def is_data_version_changed(self, broker_addr: str, data_version: dict[str, Any] | None) -> bool:
        live = self.broker_live_table.get(broker_addr)
        return live is None or not _same_version(live.data_version, data_version)

    def data_version_of(self, broker_addr: str) -> dict[str, Any] | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live is not None else None

    # --- queries ----------------------------------------------------------------------------
    def route_data(self, topic: str) -> dict[str, Any] | None:
        """``pickupTopicRouteData``: the TopicRouteData JSON object, or None if unknown."""
        with self._lock:
            queues = self.topic_queue_table.get(topic)
            if not queues:
                return None
            datas = [self.broker_addr_table[n] for n in queues if n in self.broker_addr_table]
            if not datas:
                return None
            filter_servers = {addr: list(self.filter_server_table[addr]) for data in datas
                              for addr in data.broker_addrs.values() if addr in self.filter_server_table}  # fmt: skip
            return {"brokerDatas": [data.to_json() for data in datas], "filterServerTable": filter_servers,
                    "queueDatas": [q.to_json() for q in queues.values()]}  # fmt: skip

    def cluster_info(self) -> dict[str, Any]:
        with self._lock:
            return {
                "brokerAddrTable": {n: d.to_json() for n, d in self.broker_addr_table.items()},
                "clusterAddrTable": {c: sorted(names) for c, names in self.cluster_addr_table.items()},
            }

    def all_topics(self) -> list[str]:
        with self._lock:
            return list(self.topic_queue_table)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        with self._lock:
            names = self.cluster_addr_table.get(cluster, set())
            return [t for t, queues in self.topic_queue_table.items() if any(n in names for n in queues)]

    def topics_whose_first_queue_data(self, wanted: Callable[[int], bool]) -> list[str]:
        """``topicQueueTableIter``: the topics whose first queue data's ``topicSysFlag`` is *wanted* (Java looks
        at one queue data a topic)."""
        with self._lock:
            return [t for t, queues in self.topic_queue_table.items()
                    if queues and wanted(next(iter(queues.values())).topic_sys_flag)]  # fmt: skip

    def system_topics(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (the topics brokers create for themselves) and one broker address."""
        with self._lock:
            names: list[str] = []
            addr = None
            for cluster, brokers in self.cluster_addr_table.items():
                names.append(cluster)
                names.extend(brokers)
            for data in self.broker_addr_table.values():
                if data.broker_addrs:
                    addr = next(iter(data.broker_addrs.values()))
                    break
            return names, addr

    # --- topic edits ---------------------------------------------------------------------------
    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """``deleteTopic``: from the brokers of *cluster*, or from all (no cluster, or an empty name, as Java
        takes it)."""
        with self._lock:
            if not cluster:
                self.topic_queue_table.pop(topic, None)
                return
            queues = self.topic_queue_table.get(topic)
            if queues is None:
                return
            for name in self.cluster_addr_table.get(cluster, set()):
                queues.pop(name, None)
            if not queues:
                del self.topic_queue_table[topic]

    def register_topic(self, topic: str, queue_datas: list[dict[str, Any]]) -> None:
        with self._lock:
            for qd in queue_datas:
                name = str(qd.get("brokerName", ""))
                if name in self.broker_addr_table:
                    self._create_and_update_queue_data(name, topic, qd)

    def _change_write_perm(self, broker_name: str, add: bool) -> int:
        """``operateWritePermOfBroker``: wiping clears the write bit; adding sets read and write, and only those
        (another bit, as TBW102's inherit, is gone until the broker registers its topics again)."""
        count = 0
        with self._lock:
            for queues in self.topic_queue_table.values():
                qd = queues.get(broker_name)
                if qd is not None:
                    qd.perm = PERM_READ | PERM_WRITE if add else qd.perm & ~PERM_WRITE
                    count += 1
        return count

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        return self._change_write_perm(broker_name, add=False)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._change_write_perm(broker_name, add=True)
