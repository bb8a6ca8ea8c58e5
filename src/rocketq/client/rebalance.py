"""Which queues this consumer works on: Java's ``RebalanceImpl`` (with the parts of ``RebalancePushImpl``
and ``RebalanceLitePullImpl`` that differ left to the consumer, through ``RebalanceHooks``).

For every subscribed topic (remoting-protocol §11.3):

- broadcasting: every readable queue of the topic;
- clustering: the group's members (GET_CONSUMER_LIST_BY_GROUP from one broker of the topic) and the
  topic's queues, both sorted, shared out by the allocation strategy
  (:mod:`rocketq.client.allocate_strategy`).

Queues no longer ours are dropped (their offset committed once more, and for orderly consumers the broker
lock released once the batch in hand is done); new ones get a ``ProcessQueue`` and start pulling from
``compute_pull_from_where``: the committed offset, or, for a group that never committed one, the place
``ConsumeFromWhere`` names (last → the queue's max offset, first → 0, timestamp → the first message stored
at or after the time; a retry topic starts at 0, or at its end for a timestamp). An orderly consumer
takes a queue only when the broker grants it the queue's lock (LOCK_BATCH_MQ), and renews its locks every
20 s (``lock_all``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from rocketq.client.allocate_strategy import AllocateMessageQueueStrategy
from rocketq.client.errors import ClientError, log_failure
from rocketq.client.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel, SubscriptionData
from rocketq.client.message_queue import MessageQueue
from rocketq.client.offset_store import OffsetStore, ReadOffsetType
from rocketq.client.process_queue import ProcessQueue
from rocketq.client.route import MASTER_ID
from rocketq.common.mixall import RETRY_GROUP_TOPIC_PREFIX

if TYPE_CHECKING:
    from rocketq.client.client_instance import ClientInstance

__all__ = ["RebalanceHooks", "RebalanceImpl", "compute_pull_from_where"]

log = logging.getLogger(__name__)

class RebalanceHooks(Protocol):
    """What differs between a push and a lite-pull consumer during a rebalance."""

    consume_type: ConsumeType

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool: ...

    async def compute_pull_from_where(self, mq: MessageQueue) -> int: ...

    def dispatch_pull_requests(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None: ...

    def message_queue_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None: ...


async def master_addr(instance: ClientInstance, mq: MessageQueue) -> str:
    addr = instance.find_broker_address_in_publish(mq.broker_name)
    if addr is None:
        await instance.update_topic_route(mq.topic)
        addr = instance.find_broker_address_in_publish(mq.broker_name)
    if addr is None:
        raise ClientError(f"the broker {mq.broker_name} of {mq} does not exist")
    return addr


async def max_offset(instance: ClientInstance, mq: MessageQueue) -> int:
    return await instance.api.get_max_offset(await master_addr(instance, mq), mq.topic, mq.queue_id)


async def min_offset(instance: ClientInstance, mq: MessageQueue) -> int:
    return await instance.api.get_min_offset(await master_addr(instance, mq), mq.topic, mq.queue_id)


async def search_offset(instance: ClientInstance, mq: MessageQueue, timestamp_ms: int) -> int:
    return await instance.api.search_offset(await master_addr(instance, mq), mq.topic, mq.queue_id, timestamp_ms)


async def compute_pull_from_where(instance: ClientInstance, offset_store: OffsetStore, mq: MessageQueue,
                                  where: ConsumeFromWhere, consume_timestamp_ms: int) -> int:  # fmt: skip
    """``RebalancePushImpl.computePullFromWhereWithException``: where to start pulling ``mq``.

    Raises when the broker cannot be asked; −1 when the offset store failed (the queue is skipped this
    round)."""
    # A broker answers 0 for a group that never committed on a queue still wholly in memory (Java clients
    # then start at 0 whatever they asked); for a timestamp start, ask it not to (rocketq and 5.x honour it).
    exact = where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    last = await offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE, zero_if_not_found=not exact)
    if last >= 0:
        return last
    if last != -1:
        return -1
    is_retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
    if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return 0
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
        if is_retry:
            return await max_offset(instance, mq)
        return await search_offset(instance, mq, consume_timestamp_ms)
    # CONSUME_FROM_LAST_OFFSET and the deprecated MIN/MAX/LAST_AND_MIN variants
    if is_retry:
        return 0
    return await max_offset(instance, mq)


class RebalanceImpl:
    def __init__(self, instance: ClientInstance, group: str, message_model: MessageModel,
                 strategy: AllocateMessageQueueStrategy, hooks: RebalanceHooks,
                 offset_store: OffsetStore) -> None:  # fmt: skip
        self.instance = instance
        self.group = group
        self.message_model = message_model
        self.strategy = strategy
        self.hooks = hooks
        self.offset_store = offset_store
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self.rebalance_lock = asyncio.Lock()
        self.rebalance_count = 0
        self._warned: set[str] = set()
        self.last_allocation: dict[str, list[MessageQueue]] = {}

    # -- the rebalance ----------------------------------------------------------------------------

    async def do_rebalance(self, is_order: bool) -> None:
        async with self.rebalance_lock:
            for topic in list(self.subscription_inner):
                try:
                    await self._rebalance_by_topic(topic, is_order)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    log_failure(log, exc, "%s: rebalance of topic %s", self.group, topic)
            await self._truncate_message_queue_not_my_topic()
            self.rebalance_count += 1

    async def _rebalance_by_topic(self, topic: str, is_order: bool) -> None:
        mq_set = self.topic_subscribe_info_table.get(topic)
        if not mq_set:
            # The retry topic appears only after a broker saw the group's heartbeat: ask again.
            await self.instance.update_topic_route(topic)
            mq_set = self.topic_subscribe_info_table.get(topic)
        if not mq_set:
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and topic not in self._warned:
                self._warned.add(topic)
                log.warning("%s: no route for subscribed topic %s yet", self.group, topic)
            return
        self._warned.discard(topic)
        if self.message_model is MessageModel.BROADCASTING:
            allocated = set(mq_set)
        else:
            cid_all = await self.instance.find_consumer_id_list(topic, self.group)
            if not cid_all:
                log.warning("%s: no member list for topic %s", self.group, topic)
                return
            mq_all = sorted(mq_set)
            cids = sorted(cid_all)
            try:
                chosen = self.strategy.allocate(self.group, self.instance.client_id, mq_all, cids)
            except Exception:
                log.exception("%s: allocation strategy %s failed", self.group, self.strategy.name)
                return
            allocated = set(chosen)
            self.last_allocation[topic] = sorted(allocated)
        if await self._update_process_queue_table(topic, allocated, is_order):
            self.hooks.message_queue_changed(topic, set(mq_set), allocated)

    async def _update_process_queue_table(self, topic: str, mq_set: set[MessageQueue], is_order: bool) -> bool:
        changed = False
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic != topic:
                continue
            expired = self.hooks.consume_type is ConsumeType.CONSUME_PASSIVELY and pq.is_pull_expired()
            if mq not in mq_set or expired:
                pq.dropped = True
                if await self.hooks.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.info("%s: dropped %s%s", self.group, mq, " (no pull for 120 s)" if expired else "")
        requests: list[tuple[MessageQueue, ProcessQueue, int]] = []
        for mq in sorted(mq_set):
            if mq in self.process_queue_table:
                continue
            if is_order and not await self.lock(mq):
                log.info("%s: %s is locked by another consumer; not taken this time", self.group, mq)
                continue
            self.offset_store.remove_offset(mq)
            pq = ProcessQueue()
            try:
                next_offset = await self.hooks.compute_pull_from_where(mq)
            except ClientError as exc:
                log.warning("%s: cannot compute where to start %s: %s", self.group, mq, exc)
                continue
            if next_offset < 0:
                log.warning("%s: no start offset for %s", self.group, mq)
                continue
            if is_order:
                pq.locked = True
                pq.last_lock_timestamp = time.monotonic()
            self.process_queue_table[mq] = pq
            requests.append((mq, pq, next_offset))
            changed = True
            log.info("%s: took %s from offset %d", self.group, mq, next_offset)
        if requests:
            self.hooks.dispatch_pull_requests(requests)
        return changed

    async def _truncate_message_queue_not_my_topic(self) -> None:
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic not in self.subscription_inner:
                pq.dropped = True
                if await self.hooks.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)

    async def remove_process_queue(self, mq: MessageQueue) -> None:
        pq = self.process_queue_table.pop(mq, None)
        if pq is not None:
            pq.dropped = True
            await self.hooks.remove_unnecessary_message_queue(mq, pq)

    def destroy(self) -> None:
        for pq in self.process_queue_table.values():
            pq.dropped = True
        self.process_queue_table.clear()

    # -- broker locks (orderly) -------------------------------------------------------------------

    def _master(self, broker_name: str) -> str | None:
        return self.instance.find_broker_address_in_subscribe(broker_name, MASTER_ID, True)

    async def lock(self, mq: MessageQueue) -> bool:
        addr = self._master(mq.broker_name)
        if addr is None:
            return False
        try:
            locked = await self.instance.api.lock_batch_mq(addr, self.group, self.instance.client_id, [mq])
        except ClientError as exc:
            log.info("%s: locking %s failed: %s", self.group, mq, exc)
            return False
        now = time.monotonic()
        for m in locked:
            pq = self.process_queue_table.get(m)
            if pq is not None:
                pq.locked = True
                pq.last_lock_timestamp = now
        return mq in locked

    def _by_broker(self, mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
        result: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            result.setdefault(mq.broker_name, []).append(mq)
        return result

    async def lock_all(self) -> None:
        """Renew the locks of every queue held (every 20 s); a queue the broker refuses stops consuming."""
        for broker_name, mqs in self._by_broker(list(self.process_queue_table)).items():
            addr = self._master(broker_name)
            if addr is None:
                continue
            try:
                locked = await self.instance.api.lock_batch_mq(addr, self.group, self.instance.client_id, mqs)
            except ClientError as exc:
                log.info("%s: renewing locks on %s failed: %s", self.group, broker_name, exc)
                continue
            now = time.monotonic()
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    pq.locked = True
                    pq.last_lock_timestamp = now
                else:
                    pq.locked = False
                    log.info("%s: lost the lock of %s", self.group, mq)

    async def unlock(self, mq: MessageQueue, oneway: bool) -> None:
        addr = self._master(mq.broker_name)
        if addr is None:
            return
        try:
            await self.instance.api.unlock_batch_mq(addr, self.group, self.instance.client_id, [mq], oneway=oneway)
        except ClientError as exc:
            log.info("%s: unlocking %s failed: %s", self.group, mq, exc)

    async def unlock_all(self, oneway: bool) -> None:
        for broker_name, mqs in self._by_broker(list(self.process_queue_table)).items():
            addr = self._master(broker_name)
            if addr is None:
                continue
            try:
                await self.instance.api.unlock_batch_mq(addr, self.group, self.instance.client_id, mqs,
                                                        oneway=oneway)  # fmt: skip
            except ClientError as exc:
                log.info("%s: unlocking on %s failed: %s", self.group, broker_name, exc)
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False
