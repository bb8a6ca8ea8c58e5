"""How the members of a consumer group share the queues of a topic: Java's ``AllocateMessageQueueStrategy``
and its ``AllocateMessageQueueAveragely``, ``…AveragelyByCircle``, ``…ByConfig`` and ``…ConsistentHash``
(remoting-protocol §11.3).

Each member computes its own share from the same inputs — every queue of the topic and every member's
client id, both sorted — so all members of a group must use the same strategy (and a Python member the
same arithmetic as a Java one, which these classes reproduce). A strategy is any object with
``allocate(group, current_cid, mq_all, cid_all) → list[MessageQueue]`` and a ``name``.
"""

from __future__ import annotations

import bisect
import hashlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from rocketq.client.message_queue import MessageQueue

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "strategy_by_name",
]

log = logging.getLogger(__name__)


@runtime_checkable
class AllocateMessageQueueStrategy(Protocol):
    name: str

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]: ...  # fmt: skip


def _check(group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """``AbstractAllocateMessageQueueStrategy.check``: bad input raises; a client missing from the member
    list gets nothing (it has not been seen by the broker yet)."""
    if not current_cid:
        raise ValueError("current client id is empty")
    if not mq_all:
        raise ValueError("no message queue to allocate")
    if not cid_all:
        raise ValueError("no consumer id to allocate to")
    if current_cid not in cid_all:
        log.info("consumer %s is not in the member list of %s %s yet", current_cid, group, list(cid_all))
        return False
    return True


class AllocateMessageQueueAveragely:
    """Contiguous blocks: with n queues and c members, member i gets n/c queues, the first n%c members one
    more (queues 0–2 to the first member, 3–5 to the second, …)."""

    name = "AVG"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:  # fmt: skip
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        n, c = len(mq_all), len(cid_all)
        index = list(cid_all).index(current_cid)
        mod = n % c
        if n <= c:
            size = 1
        elif mod > 0 and index < mod:
            size = n // c + 1
        else:
            size = n // c
        start = index * size if mod > 0 and index < mod else index * size + mod
        rng = min(size, n - start)
        return [mq_all[(start + i) % n] for i in range(max(rng, 0))]


class AllocateMessageQueueAveragelyByCircle:
    """Round-robin: queue j goes to member j mod c."""

    name = "AVG_BY_CIRCLE"

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:  # fmt: skip
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return [mq_all[i] for i in range(index, len(mq_all), len(cid_all))]


class AllocateMessageQueueByConfig:
    """A fixed list of queues, whatever the members (each member configured with its own)."""

    name = "CONFIG"

    def __init__(self, message_queues: Iterable[MessageQueue]) -> None:
        self.message_queues = list(message_queues)

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:  # fmt: skip
        return list(self.message_queues)


def md5_hash(key: str) -> int:
    """The ring position Java's ``ConsistentHashRouter.MD5Hash`` gives a key: the first 4 digest bytes."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class AllocateMessageQueueConsistentHash:
    """A hash ring of ``virtual_node_count`` points per member (``<clientId>-<i>``); a queue goes to the first
    point at or after the hash of its ``MessageQueue [topic=…, brokerName=…, queueId=…]`` text. Few queues
    move when a member joins or leaves."""

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_count: int = 10, hash_function: Callable[[str], int] | None = None) -> None:
        if virtual_node_count < 0:
            raise ValueError(f"illegal virtual node count {virtual_node_count}")
        self.virtual_node_count = virtual_node_count
        self.hash_function = hash_function or md5_hash

    def allocate(self, group: str, current_cid: str, mq_all: Sequence[MessageQueue],
                 cid_all: Sequence[str]) -> list[MessageQueue]:  # fmt: skip
        if not _check(group, current_cid, mq_all, cid_all):
            return []
        ring: dict[int, str] = {}
        for cid in cid_all:  # a later point with the same hash replaces an earlier one, as in Java's TreeMap
            for i in range(self.virtual_node_count):
                ring[self.hash_function(f"{cid}-{i}")] = cid
        if not ring:
            return []
        points = sorted(ring)
        result = []
        for mq in mq_all:
            h = self.hash_function(str(mq))
            i = bisect.bisect_left(points, h)
            owner = ring[points[i] if i < len(points) else points[0]]
            if owner == current_cid:
                result.append(mq)
        return result


def strategy_by_name(name: str) -> AllocateMessageQueueStrategy:
    """A strategy from its Java name or a short alias (``averagely``, ``circle``, ``hash``)."""
    key = name.strip().upper().replace("-", "_")
    if key in ("AVG", "AVERAGELY"):
        return AllocateMessageQueueAveragely()
    if key in ("AVG_BY_CIRCLE", "CIRCLE", "BY_CIRCLE"):
        return AllocateMessageQueueAveragelyByCircle()
    if key in ("CONSISTENT_HASH", "HASH"):
        return AllocateMessageQueueConsistentHash()
    raise ValueError(f"unknown allocation strategy {name!r}: AVG, AVG_BY_CIRCLE or CONSISTENT_HASH")
