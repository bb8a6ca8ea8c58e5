"""The lite pull consumer: Java's ``DefaultLitePullConsumer`` / ``DefaultLitePullConsumerImpl``.

The client pulls in the background; the application polls::

    consumer = LitePullConsumer("CG", "127.0.0.1:9876")
    consumer.subscribe("T", "TagA || TagB")          # or consumer.assign([...queues...])
    async with consumer:
        async for msg in consumer:                   # or: msgs = await consumer.poll(timeout=1.0)
            ...

Queues come from the group's rebalance (``subscribe``, shared with the other members as a push
consumer's are) or from the application (``assign``). Each has a background pull loop (long polling,
``pull_batch_size`` messages a pull) that stops while the queue caches more than
``pull_threshold_for_queue`` messages or the consumer more than ``pull_threshold_for_all``.

Offsets: a message counts as consumed once ``poll`` returned it; the offset of a queue is then the lowest
offset not yet returned. With ``auto_commit`` (default) they are committed every ``auto_commit_interval``
(5 s) and at shutdown; ``commit()`` commits now, and waits for the broker's answer. ``seek`` moves a
queue's pull position (and its consumed offset) anywhere.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as _dt
import logging
import time
from collections.abc import AsyncIterator, Iterable

from rocketq.client.allocate_strategy import AllocateMessageQueueStrategy
from rocketq.client.client_config import ClientConfig
from rocketq.client.consumer_base import ConsumerBase
from rocketq.client.errors import ClientError, InvalidMessageError
from rocketq.client.heartbeat import (
    EXPRESSION_TYPE_TAG,
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    build_subscription,
)
from rocketq.client.message_queue import MessageQueue
from rocketq.client.offset_store import LocalFileOffsetStore, ReadOffsetType
from rocketq.client.process_queue import ProcessQueue
from rocketq.client.pull_api import build_sys_flag
from rocketq.client.pull_result import PullStatus
from rocketq.common.aio import within
from rocketq.common.message import MessageExt

__all__ = ["LitePullConsumer"]

log = logging.getLogger(__name__)

BROKER_SUSPEND_MAX_TIME = 20.0
CONSUMER_TIMEOUT_WHEN_SUSPEND = 30.0
PULL_TIME_DELAY_WHEN_FLOW_CONTROL = 0.05
PULL_TIME_DELAY_WHEN_PAUSE = 1.0


class LitePullConsumer(ConsumerBase):
    consume_type = ConsumeType.CONSUME_ACTIVELY
    kind = "lite pull consumer"

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        instance_name: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: int | float | str | _dt.datetime | None = None,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        auto_commit: bool = True,
        auto_commit_interval: float = 5.0,
        pull_batch_size: int = 10,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        pull_threshold_for_all: int = 10000,
        consume_max_span: int = 2000,
        poll_timeout: float = 5.0,
        offset_store_dir: str | None = None,
    ) -> None:
        super().__init__(group, namesrv_addr, config=config, instance_name=instance_name, message_model=message_model,
                         consume_from_where=consume_from_where, consume_timestamp=consume_timestamp,
                         allocate_strategy=allocate_strategy, offset_store_dir=offset_store_dir)  # fmt: skip
        self.auto_commit = auto_commit
        self.auto_commit_interval = max(1.0, auto_commit_interval)
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.pull_threshold_for_all = pull_threshold_for_all
        self.consume_max_span = consume_max_span
        self.poll_timeout = poll_timeout
        self._assigned: set[MessageQueue] | None = None
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._next_offsets: dict[MessageQueue, int] = {}
        self._consumed: dict[MessageQueue, int] = {}
        self._paused: set[MessageQueue] = set()
        self._buffer: asyncio.Queue[tuple[MessageQueue, ProcessQueue, list[MessageExt]]] | None = None
        self._leftover: collections.deque[tuple[MessageQueue, ProcessQueue, list[MessageExt]]] = collections.deque()
        self._held: collections.deque[tuple[MessageQueue, ProcessQueue, list[MessageExt]]] = collections.deque()
        self._last_commit = time.monotonic()

    # -- configuration ----------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = EXPRESSION_TYPE_TAG) -> None:
        """Let the group's rebalance give this consumer queues of ``topic`` (tags ``TagA || TagB`` or ``*``)."""
        if self._assigned is not None:
            raise ClientError("subscribe and assign are exclusive: this consumer was given queues by assign()")
        self._add_subscription(topic, expression, expression_type)

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        """Consume exactly these queues (no rebalancing)."""
        if self._subscriptions and self._assigned is None:
            raise ClientError("subscribe and assign are exclusive: this consumer subscribed to topics")
        wanted = set(mqs)
        self._assigned = wanted
        for mq in wanted:
            self._subscriptions.setdefault(mq.topic, build_subscription(mq.topic))
        if self.rebalance is not None:
            self.rebalance.subscription_inner.update(self._subscriptions)
        if self._running:
            self._spawn(self._apply_assignment())

    # -- ConsumerInner ----------------------------------------------------------------------------

    async def do_rebalance(self) -> None:
        if self._running and not self._stopping and self._assigned is None:
            await self.rebalance.do_rebalance(False)

    async def persist_consumer_offset(self) -> None:
        if self._running and self.auto_commit:
            self._stage_consumed()
            await self.offset_store.persist_all(list(self.rebalance.process_queue_table))

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for mq, offset in offsets.items():
            if mq.topic == topic and mq in self.rebalance.process_queue_table:
                await self.seek(mq, offset)

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> LitePullConsumer:
        if self._running:
            return self
        instance = await self._open(rebalanced=True)
        self._buffer = asyncio.Queue()
        self._register(instance)
        self._last_commit = time.monotonic()
        try:
            await instance.start()
            if self._assigned is not None:
                await self._apply_assignment()
            await self._after_subscription_change()
        except BaseException:
            await self.shutdown()
            raise
        return self

    def _rebalances_now(self) -> bool:
        return self._assigned is None  # assigned queues are the application's: no rebalance

    async def _apply_assignment(self) -> None:
        assert self._assigned is not None
        table = self.rebalance.process_queue_table
        for mq in [m for m in table if m not in self._assigned]:
            pq = table.pop(mq)
            pq.dropped = True
            await self.remove_unnecessary_message_queue(mq, pq)
        requests = []
        for mq in sorted(self._assigned):
            if mq in table:
                continue
            if mq.broker_name not in self.instance.broker_addr_table:
                with contextlib.suppress(ClientError):
                    await self.instance.update_topic_route(mq.topic)
            offset = await self.compute_pull_from_where(mq)
            if offset < 0:
                log.warning("%s: no start offset for assigned %s", self._group, mq)
                continue
            pq = ProcessQueue()
            table[mq] = pq
            requests.append((mq, pq, offset))
        self.dispatch_pull_requests(requests)

    async def shutdown(self) -> None:
        if not self._running:
            return
        instance = self._instance
        assert instance is not None
        self._stopping = True
        async with self.rebalance.rebalance_lock:
            pass
        tasks = list(self._pull_tasks.values())
        self._pull_tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.auto_commit:
            with contextlib.suppress(Exception):
                await self.commit()
        self._running = False
        self.rebalance.destroy()
        await self._close_instance(instance)

    # -- RebalanceHooks ---------------------------------------------------------------------------

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        consumed = self._consumed.pop(mq, None)
        if consumed is not None and consumed >= 0:
            self.offset_store.update_offset(mq, consumed, False)
        await self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)
        self._next_offsets.pop(mq, None)
        return True

    def dispatch_pull_requests(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        for mq, pq, offset in requests:
            self._next_offsets[mq] = offset
            old = self._pull_tasks.pop(mq, None)
            if old is not None:
                old.cancel()
            task = asyncio.ensure_future(self._pull_loop(mq, pq))
            task.set_name(f"lite pull {self._group} {mq}")
            self._pull_tasks[mq] = task

    def message_queue_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        log.info("%s: queues of %s now %s", self._group, topic, sorted(mq_divided))

    # -- pulling ----------------------------------------------------------------------------------

    def _cached_total(self) -> int:
        return sum(pq.msg_count for pq in self.rebalance.process_queue_table.values())

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        delay_on_error = self.config.pull_time_delay_when_exception
        assert self._buffer is not None
        while self._running and not pq.dropped:
            pq.last_pull_timestamp = time.monotonic()
            if mq in self._paused:
                await asyncio.sleep(PULL_TIME_DELAY_WHEN_PAUSE)
                continue
            if (pq.msg_count > self.pull_threshold_for_queue
                    or pq.msg_size > self.pull_threshold_size_for_queue * 1024 * 1024
                    or pq.max_span > self.consume_max_span
                    or self._cached_total() > self.pull_threshold_for_all):  # fmt: skip
                await asyncio.sleep(PULL_TIME_DELAY_WHEN_FLOW_CONTROL)
                continue
            sub = self._subscriptions.get(mq.topic) or build_subscription(mq.topic)
            offset = self._next_offsets.get(mq, 0)
            sys_flag = build_sys_flag(False, True, True, lite_pull=True)
            sub_version = 0 if sub.expression_type == EXPRESSION_TYPE_TAG else sub.sub_version
            try:
                result = await self.pull_api.pull_kernel(
                    mq, sub.sub_string, sub.expression_type, sub_version, offset, self.pull_batch_size, sys_flag, 0,
                    BROKER_SUSPEND_MAX_TIME, CONSUMER_TIMEOUT_WHEN_SUSPEND,
                )  # fmt: skip
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.info("%s: pull of %s failed: %s", self._group, mq, exc)
                await asyncio.sleep(delay_on_error)
                continue
            result = self.pull_api.process_pull_result(mq, result, sub)
            if pq.dropped:
                return
            self._next_offsets[mq] = pq.next_pull_offset = result.next_begin_offset
            if result.status is PullStatus.FOUND and result.messages:
                pq.put_message(result.messages)
                self._buffer.put_nowait((mq, pq, result.messages))
            elif result.status is not PullStatus.OFFSET_ILLEGAL:
                if pq.msg_count == 0:
                    # Everything pulled was polled, and what lies between was filtered out by tag: the
                    # consumed offset moves on with the pull (the push consumer's correctTagsOffset).
                    self._consumed[mq] = max(self._consumed.get(mq, -1), result.next_begin_offset)
            else:
                log.warning("%s: offset %d of %s is illegal; moving to %d", self._group, offset, mq,
                            result.next_begin_offset)  # fmt: skip

    # -- the application's side -------------------------------------------------------------------

    async def poll(self, timeout: float | None = None, max_messages: int | None = None) -> list[MessageExt]:
        """Messages pulled so far (those of one pull at most), waiting up to ``timeout`` seconds
        (``poll_timeout``, 5 s) for some; ``[]`` when none came. ``max_messages`` caps the count: the rest
        stay for the next poll, and are not counted as consumed."""
        self.instance  # noqa: B018
        assert self._buffer is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.poll_timeout if timeout is None else timeout)
        while True:
            if self._leftover:
                mq, pq, msgs = self._leftover.popleft()
            else:
                remaining = deadline - loop.time()
                if remaining <= 0 and self._buffer.empty():
                    return []
                try:
                    mq, pq, msgs = await within(self._buffer.get(), remaining)
                except TimeoutError:
                    return []
            if pq.dropped:
                continue
            if mq in self._paused:
                self._held.append((mq, pq, msgs))
                continue
            if max_messages is not None and 0 < max_messages < len(msgs):
                self._leftover.appendleft((mq, pq, msgs[max_messages:]))
                msgs = msgs[:max_messages]
            offset = pq.remove_message(msgs)
            if offset >= 0:
                self._consumed[mq] = offset
            if self.auto_commit and time.monotonic() - self._last_commit >= self.auto_commit_interval:
                self._last_commit = time.monotonic()
                self._stage_consumed()
                self._spawn(self.offset_store.persist_all(list(self.rebalance.process_queue_table)))
            return msgs

    async def __aiter__(self) -> AsyncIterator[MessageExt]:
        """Every message, forever (until the consumer is shut down)."""
        while self._running:
            for msg in await self.poll():
                yield msg

    def _stage_consumed(self) -> None:
        for mq, offset in self._consumed.items():
            pq = self.rebalance.process_queue_table.get(mq)
            if pq is not None and not pq.dropped:
                self.offset_store.update_offset(mq, offset, False)

    async def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit the consumed offsets (or the given ones) now, waiting for the brokers to confirm."""
        if offsets is None:
            self._stage_consumed()
            targets = {mq: off for mq, off in self.offset_store.clone_offset_table().items()
                       if mq in self.rebalance.process_queue_table}  # fmt: skip
        else:
            targets = dict(offsets)
            for mq, off in targets.items():
                self.offset_store.update_offset(mq, off, False)
        for mq, off in targets.items():
            await self.offset_store.update_consume_offset_to_broker(mq, off, False)
        if isinstance(self.offset_store, LocalFileOffsetStore):
            await self.offset_store.persist_all(targets)
        self._last_commit = time.monotonic()

    async def committed(self, mq: MessageQueue) -> int:
        """The offset the group has committed for ``mq`` (−1: none)."""
        return await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Pull ``mq`` from ``offset`` on (messages of it not yet polled are dropped)."""
        table = self.rebalance.process_queue_table
        old = table.get(mq)
        if old is None:
            raise ClientError(f"{mq} is not assigned to this consumer: cannot seek it")
        lo, hi = await self.min_offset(mq), await self.max_offset(mq)
        if not lo <= offset <= hi:
            raise InvalidMessageError(f"seek offset {offset} of {mq} is outside [{lo}, {hi}]")
        old.dropped = True
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        pq = ProcessQueue()
        table[mq] = pq
        self._consumed[mq] = offset
        self.dispatch_pull_requests([(mq, pq, offset)])

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.max_offset(mq))

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        self._paused.update(mqs)

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        self._paused.difference_update(mqs)
        held, self._held = self._held, collections.deque()
        for item in held:
            (self._leftover if item[0] not in self._paused else self._held).append(item)

    def assignment(self) -> set[MessageQueue]:
        if self.rebalance is None:
            return set(self._assigned or ())
        return {mq for mq, pq in self.rebalance.process_queue_table.items() if not pq.dropped}

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted."""
        return sorted(await self.instance.subscribe_queues(topic))

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return await self.search_offset(mq, timestamp_ms)
