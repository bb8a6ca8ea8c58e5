"""Topic routes: RocketMQ's ``QueueData``, ``BrokerData`` and ``TopicRouteData`` (remoting-protocol §7.1, §8.2).

One definition serves the three parties that handle routes: the name server keeps them in its tables and
writes them as JSON bodies, the client reads them to choose queues and brokers, the admin tool prints them.

A route says which brokers host a topic (``QueueData``: read/write queue counts, permission bits, one per
broker name) and where those brokers are (``BrokerData``: broker id → ``ip:port``, id 0 the master).
Reading is lenient the way fastjson is: broker ids come bare or quoted, ``topicSynFlag`` is the name
``topicSysFlag`` had before 4.9.0, missing fields take Java's defaults. Writing gives the name server's
4.9.4 form: keys in fastjson's alphabetical order.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketq.common import json_compat
from rocketq.common.mixall import MASTER_ID, PERM_INHERIT, PERM_READ, PERM_WRITE

__all__ = [
    "MASTER_ID",
    "PERM_INHERIT",
    "PERM_READ",
    "PERM_WRITE",
    "BrokerData",
    "QueueData",
    "TopicRouteData",
    "as_int",
    "as_mapping",
]



def as_int(value: Any, default: int = 0) -> int:
    """``value`` as an int the way fastjson coerces a JSON number or numeric string; ``default`` otherwise."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def as_mapping(value: Any) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(slots=True)
class QueueData:
    """The queues and permission of a topic on one broker name."""

    broker_name: str = ""
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 6
    topic_sys_flag: int = 0

    @classmethod
    def from_json(cls, obj: Mapping[Any, Any]) -> QueueData:
        flag = obj.get("topicSysFlag", obj.get("topicSynFlag", 0))
        return cls(str(obj.get("brokerName", "")), as_int(obj.get("readQueueNums")),
                   as_int(obj.get("writeQueueNums")), as_int(obj.get("perm"), 6), as_int(flag))  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicSysFlag": self.topic_sys_flag, "writeQueueNums": self.write_queue_nums}  # fmt: skip


@dataclass(slots=True)
class BrokerData:
    """One broker name, its cluster and its addresses by broker id (0 = master)."""

    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[Any, Any]) -> BrokerData:
        addrs = {as_int(k, -1): str(v) for k, v in as_mapping(obj.get("brokerAddrs")).items()}
        return cls(str(obj.get("cluster", "")), str(obj.get("brokerName", "")), dict(sorted(addrs.items())))

    @property
    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def select_broker_addr(self) -> str | None:
        """The master's address, else any replica's (``BrokerData.selectBrokerAddr``)."""
        addr = self.broker_addrs.get(MASTER_ID)
        if addr is None and self.broker_addrs:
            return random.choice(list(self.broker_addrs.values()))
        return addr

    def to_json(self) -> dict[str, Any]:
        # As a 4.9.4 name server writes it (5.x adds enableActingMaster and zoneName).
        return {"brokerAddrs": dict(sorted(self.broker_addrs.items())), "brokerName": self.broker_name,
                "cluster": self.cluster}  # fmt: skip


@dataclass(slots=True)
class TopicRouteData:
    """The route of one topic: its queue data and broker data, both ordered by broker name."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    filter_server_table: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[Any, Any]) -> TopicRouteData:
        queues = [QueueData.from_json(q) for q in obj.get("queueDatas") or () if isinstance(q, Mapping)]
        brokers = [BrokerData.from_json(b) for b in obj.get("brokerDatas") or () if isinstance(b, Mapping)]
        order = obj.get("orderTopicConf")
        return cls(sorted(queues, key=lambda q: q.broker_name), sorted(brokers, key=lambda b: b.broker_name),
                   str(order) if order else None, dict(as_mapping(obj.get("filterServerTable"))))  # fmt: skip

    @classmethod
    def from_body(cls, body: bytes | None) -> TopicRouteData:
        """A GET_ROUTEINFO_BY_TOPIC response body."""
        return cls.from_json(as_mapping(json_compat.loads(body or b"{}")))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"brokerDatas": [b.to_json() for b in self.broker_datas],
                               "filterServerTable": dict(self.filter_server_table),
                               "queueDatas": [q.to_json() for q in self.queue_datas]}  # fmt: skip
        if self.order_topic_conf:
            out["orderTopicConf"] = self.order_topic_conf
        return out

    def broker(self, broker_name: str) -> BrokerData | None:
        return next((b for b in self.broker_datas if b.broker_name == broker_name), None)

    def master_addr(self, broker_name: str) -> str | None:
        b = self.broker(broker_name)
        return b.master_addr if b is not None else None

    def master_addrs(self) -> list[tuple[str, str]]:
        """(broker name, master address) of every broker of the route that has a master."""
        return [(b.broker_name, b.master_addr) for b in self.broker_datas if b.master_addr]

    def write_queues(self, max_per_broker: int | None = None) -> list[tuple[str, int]]:
        """``topicRouteData2TopicPublishInfo``: (broker name, queue id) a producer may write to, in order."""
        out: list[tuple[str, int]] = []
        for q in sorted(self.queue_datas, key=lambda q: q.broker_name):
            if not q.perm & PERM_WRITE or not self.master_addr(q.broker_name):
                continue
            n = q.write_queue_nums if max_per_broker is None else min(q.write_queue_nums, max_per_broker)
            out.extend((q.broker_name, i) for i in range(n))
        return out

    def read_queues(self) -> list[tuple[str, int]]:
        """``topicRouteData2TopicSubscribeInfo``: (broker name, queue id) a consumer may read, in order."""
        out: list[tuple[str, int]] = []
        for q in self.queue_datas:
            if q.perm & PERM_READ:
                out.extend((q.broker_name, i) for i in range(q.read_queue_nums))
        return out

    def same_as(self, other: TopicRouteData | None) -> bool:
        """Whether a refreshed route changed anything a client acts on (``topicRouteDataIsChange``)."""
        if other is None:
            return False

        def key(r: TopicRouteData) -> tuple[Any, ...]:
            qds = sorted((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
                         for q in r.queue_datas)  # fmt: skip
            bds = sorted((b.broker_name, b.cluster, tuple(sorted(b.broker_addrs.items()))) for b in r.broker_datas)
            return (tuple(qds), tuple(bds), r.order_topic_conf or "")

        return key(self) == key(other)

    def copy_with_queue_nums(self, queue_nums: int) -> TopicRouteData:
        """This route with every QueueData capped at ``queue_nums`` queues (the ``TBW102`` stand-in route)."""
        qds = [QueueData(q.broker_name, min(queue_nums, q.read_queue_nums), min(queue_nums, q.read_queue_nums),
                         q.perm, q.topic_sys_flag) for q in self.queue_datas]  # fmt: skip
        bds = [BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs)) for b in self.broker_datas]
        return TopicRouteData(qds, bds, self.order_topic_conf, dict(self.filter_server_table))
