"""Topic routes as a client uses them: Java's ``TopicPublishInfo`` and
``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``…2TopicSubscribeInfo``.

The route data itself (``TopicRouteData``, ``QueueData``, ``BrokerData``) is defined once in
:mod:`rocketq.common.route` and re-exported here. From a route:

- publish queues: for each QueueData with the WRITE bit whose broker has a master, queues
  ``0 … writeQueueNums−1`` (an ``orderTopicConf`` ``broker:n;broker:n`` replaces this);
- subscribe queues: for each QueueData with the READ bit, queues ``0 … readQueueNums−1``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketq.client.message_queue import MessageQueue
from rocketq.common.route import (
    MASTER_ID,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    QueueData,
    TopicRouteData,
)

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

def parse_topic_route(body: bytes) -> TopicRouteData:
    """Read a GET_ROUTEINFO_BY_TOPIC body in either JSON form."""
    return TopicRouteData.from_body(body)


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
    info.message_queues.extend(MessageQueue(topic, name, qid) for name, qid in route.write_queues())
    return info


def route_to_subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    return {MessageQueue(topic, name, qid) for name, qid in route.read_queues()}
