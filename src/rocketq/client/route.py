"""Topic routes as a client uses them: Java's ``TopicRouteData``, ``QueueData``, ``BrokerData`` and
``TopicPublishInfo``, and ``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``…2TopicSubscribeInfo``.

A route (remoting-protocol §7.1, §8.2) says which brokers host a topic (QueueData: read/write queue
counts, permission bits) and where those brokers are (BrokerData: broker id → ``ip:port``, id 0 the
master). Either JSON form (bare or quoted integer broker ids) is read. From a route:

- publish queues: for each QueueData with the WRITE bit whose broker has a master, queues
  ``0 … writeQueueNums−1`` (an ``orderTopicConf`` ``broker:n;broker:n`` replaces this);
- subscribe queues: for each QueueData with the READ bit, queues ``0 … readQueueNums−1``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocketq.client.message_queue import MessageQueue
from rocketq.common import json_compat

__all__ = [
    "MASTER_ID",
    "PERM_INHERIT",
    "PERM_READ",
    "PERM_WRITE",
    "BrokerData",
    "QueueData",
    "TopicPublishInfo",
    "TopicRouteData",
    "parse_topic_route",
    "route_to_publish_info",
    "route_to_subscribe_info",
]

MASTER_ID = 0
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1


@dataclass(slots=True)
class QueueData:
    broker_name: str = ""
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 6
    topic_sys_flag: int = field(default=0, metadata={"aliases": ("topicSynFlag",)})


@dataclass(slots=True)
class BrokerData:
    cluster: str = ""
    broker_name: str = ""
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def select_broker_addr(self) -> str | None:
        """The master's address, else any replica's (``BrokerData.selectBrokerAddr``)."""
        addr = self.broker_addrs.get(MASTER_ID)
        if addr is None and self.broker_addrs:
            return random.choice(list(self.broker_addrs.values()))
        return addr


@dataclass(slots=True)
class TopicRouteData:
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    order_topic_conf: str | None = None
    filter_server_table: dict[str, Any] = field(default_factory=dict)

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


def parse_topic_route(body: bytes) -> TopicRouteData:
    """Read a GET_ROUTEINFO_BY_TOPIC body in either JSON form."""
    route: TopicRouteData = json_compat.from_json(TopicRouteData, json_compat.loads(body))
    return route


@dataclass(slots=True)
class TopicPublishInfo:
    """The writable queues of a topic and the round-robin choice among them (Java's ``TopicPublishInfo``)."""

    message_queues: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    route: TopicRouteData | None = None
    _index: itertools.count[int] = field(default_factory=lambda: itertools.count(random.randrange(1 << 16)))

    @property
    def ok(self) -> bool:
        return bool(self.message_queues)

    def next_index(self) -> int:
        return next(self._index)

    def select_one_message_queue(
        self, last_broker_name: str | None = None, available: Callable[[str], bool] | None = None
    ) -> MessageQueue:
        """The next queue round-robin; a queue of ``last_broker_name`` (the broker that just failed) or of a
        broker ``available`` says is isolated is skipped while any other is left."""
        mqs = self.message_queues
        n = len(mqs)
        if n == 0:
            raise IndexError("no message queue to choose from")
        start = self.next_index()
        fallback: MessageQueue | None = None
        for i in range(n):
            mq = mqs[(start + i) % n]
            if last_broker_name is not None and mq.broker_name == last_broker_name:
                continue
            if available is not None and not available(mq.broker_name):
                fallback = fallback or mq
                continue
            return mq
        if fallback is not None:
            return fallback
        return mqs[start % n]

    def write_queue_nums_of(self, broker_name: str) -> int:
        if self.route is None:
            return -1
        for qd in self.route.queue_datas:
            if qd.broker_name == broker_name:
                return qd.write_queue_nums
        return -1


def route_to_publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    info = TopicPublishInfo(route=route)
    conf = route.order_topic_conf
    if conf:
        for item in conf.split(";"):
            name, _, nums = item.partition(":")
            if name and nums.strip().isdigit():
                info.message_queues.extend(MessageQueue(topic, name, i) for i in range(int(nums)))
        info.order_topic = True
        return info
    masters = {b.broker_name: b for b in route.broker_datas if MASTER_ID in b.broker_addrs}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            info.message_queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums))
    return info


def route_to_subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    result: set[MessageQueue] = set()
    for qd in route.queue_datas:
        if qd.perm & PERM_READ:
            result.update(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
    return result
