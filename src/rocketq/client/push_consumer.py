"""The push consumer: Java's ``DefaultMQPushConsumer`` and ``DefaultMQPushConsumerImpl`` (remoting-protocol
§6.2, §11.3, §11.4).

::

    async def on_messages(msgs, context):
        for msg in msgs:
            print(msg.topic, msg.queue_offset, msg.body)
        # return nothing (or ConsumeConcurrentlyStatus.CONSUME_SUCCESS); raise to have them retried

    consumer = PushConsumer("CG", "127.0.0.1:9876", listener=on_messages)
    consumer.subscribe("TopicTest", "TagA || TagB")
    async with consumer:
        await asyncio.sleep(60)

The client pulls for the application: each queue the rebalance gives this member (see
:mod:`rocketq.client.rebalance`) has a pull loop that long-polls the broker (PULL_MESSAGE, 32 messages,
the broker holds an empty pull up to 15 s and answers as soon as a message arrives) and hands what it
gets to the consume service — concurrent (:mod:`rocketq.client.consume_concurrently`) or orderly
(:mod:`rocketq.client.consume_orderly`, ``orderly=True``). Flow control: a queue stops pulling while more
than ``pull_threshold_for_queue`` messages (1000) or ``pull_threshold_size_for_queue`` MiB (100) wait in
it, or (concurrently) while its cached offsets span more than ``consume_concurrently_max_span`` (2000).

Message models: CLUSTERING (default) shares the queues among the group's members and keeps offsets on
the brokers; BROADCASTING gives every member every queue and keeps offsets in a local file.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import logging
import time
from collections import Counter
from typing import Any

from rocketq.client.allocate_strategy import AllocateMessageQueueStrategy
from rocketq.client.client_config import ClientConfig
from rocketq.client.consume_concurrently import ConsumeMessageConcurrentlyService
from rocketq.client.consume_orderly import ConsumeMessageOrderlyService
from rocketq.client.consumer_base import ConsumerBase, parse_consume_timestamp
from rocketq.client.errors import ClientError, ClientNotRunningError, InvalidMessageError
from rocketq.client.heartbeat import (
    EXPRESSION_TYPE_TAG,
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
    build_subscription,
)
from rocketq.client.listener import MessageListener
from rocketq.client.message_queue import MessageQueue
from rocketq.client.offset_store import ReadOffsetType
from rocketq.client.process_queue import ProcessQueue
from rocketq.client.pull_api import build_sys_flag
from rocketq.client.pull_result import PullStatus
from rocketq.client.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from rocketq.common.aio import within
from rocketq.common.message import (
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
    MessageExt,
)
from rocketq.common.mixall import get_retry_topic

__all__ = ["PushConsumer", "parse_consume_timestamp"]

log = logging.getLogger(__name__)

BROKER_SUSPEND_MAX_TIME = 15.0
CONSUMER_TIMEOUT_WHEN_SUSPEND = 30.0
PULL_TIME_DELAY_WHEN_FLOW_CONTROL = 0.05
PULL_TIME_DELAY_WHEN_SUSPEND = 1.0
OFFSET_ILLEGAL_REMOVE_DELAY = 10.0


class PushConsumer(ConsumerBase):
    """Consumes subscribed topics through a listener; see the module docstring."""

    consume_type = ConsumeType.CONSUME_PASSIVELY
    kind = "push consumer"

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        listener: MessageListener | None = None,
        orderly: bool = False,
        config: ClientConfig | None = None,
        instance_name: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: int | float | str | _dt.datetime | None = None,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        consume_thread_nums: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_interval: float = 0.0,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100,
        consume_concurrently_max_span: int = 2000,
        max_reconsume_times: int = -1,
        suspend_current_queue_time: float = 1.0,
        consume_timeout: float = 900.0,
        post_subscription_when_pull: bool = False,
        await_termination: float = 10.0,
        offset_store_dir: str | None = None,
    ) -> None:
        super().__init__(group, namesrv_addr, config=config, instance_name=instance_name, message_model=message_model,
                         consume_from_where=consume_from_where, consume_timestamp=consume_timestamp,
                         allocate_strategy=allocate_strategy, offset_store_dir=offset_store_dir)  # fmt: skip
        self._listener = listener
        self.orderly = orderly
        self.consume_thread_nums = consume_thread_nums
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_interval = pull_interval
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        self.consume_concurrently_max_span = consume_concurrently_max_span
        self.max_reconsume_times = max_reconsume_times
        self.suspend_current_queue_time = suspend_current_queue_time
        self.consume_timeout = consume_timeout  # seconds (Java's consumeTimeout, in minutes: 15)
        self.post_subscription_when_pull = post_subscription_when_pull
        self.await_termination = await_termination
        self._paused = False
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self.consume_service: ConsumeMessageConcurrentlyService | ConsumeMessageOrderlyService | None = None
        self.stats: Counter[str] = Counter()

    # -- configuration ----------------------------------------------------------------------------

    @property
    def retry_topic(self) -> str:
        return get_retry_topic(self._group)

    @property
    def concurrent_max_reconsume_times(self) -> int:
        return 16 if self.max_reconsume_times == -1 else self.max_reconsume_times

    @property
    def orderly_max_reconsume_times(self) -> int:
        return 2**31 - 1 if self.max_reconsume_times == -1 else self.max_reconsume_times

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = EXPRESSION_TYPE_TAG) -> None:
        """Subscribe to ``topic``: ``*``, or tags joined by ``||`` (``TagA || TagB``)."""
        self._add_subscription(topic, expression, expression_type)

    def unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)
        if self.rebalance is not None:
            self.rebalance.subscription_inner.pop(topic, None)

    def register_message_listener(self, listener: MessageListener, *, orderly: bool | None = None) -> None:
        self._listener = listener
        if orderly is not None:
            self.orderly = orderly

    # -- ConsumerInner ----------------------------------------------------------------------------

    def subscriptions(self) -> list[SubscriptionData]:
        if self.rebalance is None:
            return list(self._subscriptions.values())
        return list(self.rebalance.subscription_inner.values())  # with the retry topic's

    async def do_rebalance(self) -> None:
        if self._running and not self._paused and not self._stopping:
            await self.rebalance.do_rebalance(self.orderly)

    async def persist_consumer_offset(self) -> None:
        if self._running and self.rebalance is not None:
            await self.offset_store.persist_all(list(self.rebalance.process_queue_table))

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET from a broker: drop the topic's queues, adopt the offsets, rebalance."""
        self._paused = True
        try:
            for mq, pq in list(self.rebalance.process_queue_table.items()):
                if mq.topic == topic:
                    pq.dropped = True
                    pq.clear()
            await asyncio.sleep(0.01)
            for mq, offset in offsets.items():
                if mq.topic == topic:
                    self.offset_store.update_offset(mq, offset, False)
                    await self.offset_store.update_consume_offset_to_broker(mq, offset, False)
            for mq in [m for m in self.rebalance.process_queue_table if m.topic == topic]:
                self.rebalance.process_queue_table.pop(mq, None)
                self.offset_store.remove_offset(mq)
        finally:
            self._paused = False
        self.instance.rebalance_immediately()

    def running_settings(self) -> dict[str, Any]:
        settings = ConsumerBase.running_settings(self)
        settings.update({
            "consumeThreadMin": self.consume_thread_nums, "consumeThreadMax": self.consume_thread_nums,
            "consumeMessageBatchMaxSize": self.consume_message_batch_max_size, "pullBatchSize": self.pull_batch_size,
            "pullInterval": round(self.pull_interval * 1000), "pullThresholdForQueue": self.pull_threshold_for_queue,
            "pullThresholdSizeForQueue": self.pull_threshold_size_for_queue,
            "consumeConcurrentlyMaxSpan": self.consume_concurrently_max_span,
            "maxReconsumeTimes": self.max_reconsume_times,
            "suspendCurrentQueueTimeMillis": round(self.suspend_current_queue_time * 1000),
            "consumeTimeout": round(self.consume_timeout / 60),
            "postSubscriptionWhenPull": self.post_subscription_when_pull,
            "awaitTerminationMillisWhenShutdown": round(self.await_termination * 1000),
        })  # fmt: skip
        return settings

    def consumer_running_info(self) -> ConsumerRunningInfo:
        """``DefaultMQPushConsumerImpl.consumerRunningInfo``: the base's, with whether it consumes orderly, its
        worker count and, per subscribed topic, the pull and consume rates of the last minute."""
        info = ConsumerBase.consumer_running_info(self)
        info.properties[PROP_CONSUME_ORDERLY] = "true" if self.orderly else "false"
        info.properties[PROP_THREADPOOL_CORE_SIZE] = str(self.consume_thread_nums)
        stats = self.instance.consumer_stats
        for sub in info.subscription_set:
            info.status_table[sub.topic] = stats.consume_status(self._group, sub.topic)
        return info

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: *msg* handed to the listener, as the consume service would (no commit)."""
        if self.consume_service is None:
            raise ClientNotRunningError(f"push consumer {self._group} is not started")
        return await self.consume_service.consume_message_directly(msg, broker_name)

    # -- lifecycle --------------------------------------------------------------------------------

    def suspend(self) -> None:
        """Stop pulling (``DefaultMQPushConsumer.suspend``); ``resume()`` goes on."""
        self._paused = True

    def resume(self) -> None:
        self._paused = False

    def _check_config(self) -> None:
        """``checkConfig``'s ranges (times here in seconds, Java's in ms): a setting out of them is refused at
        start with Java's words, before the consumer joins its group."""
        limits = (("consumeThreadNums", self.consume_thread_nums, 1, 1000),
                  ("consumeConcurrentlyMaxSpan", self.consume_concurrently_max_span, 1, 65535),
                  ("pullThresholdForQueue", self.pull_threshold_for_queue, 1, 65535),
                  ("pullThresholdSizeForQueue", self.pull_threshold_size_for_queue, 1, 1024),
                  ("pullInterval", self.pull_interval, 0, 65.535),
                  ("consumeMessageBatchMaxSize", self.consume_message_batch_max_size, 1, 1024),
                  ("pullBatchSize", self.pull_batch_size, 1, 1024))  # fmt: skip
        for name, value, low, high in limits:
            if not low <= value <= high:
                raise InvalidMessageError(f"{name} Out of range [{low}, {high}]: {value}")

    async def start(self) -> PushConsumer:
        if self._running:
            return self
        if self._listener is None:
            raise ClientError("register a message listener before starting the consumer")
        if not self._subscriptions:
            raise ClientError("subscribe to at least one topic before starting the consumer")
        self._check_config()
        subs = dict(self._subscriptions)
        if self._message_model is MessageModel.CLUSTERING:
            subs[self.retry_topic] = build_subscription(self.retry_topic, "*")
        instance = await self._open(rebalanced=True, subscriptions=subs)
        if self.orderly:
            self.consume_service = ConsumeMessageOrderlyService(self, self._listener)
        else:
            self.consume_service = ConsumeMessageConcurrentlyService(self, self._listener)
        self._register(instance)
        try:
            await instance.start()
            self.consume_service.start()
            await self._after_subscription_change()
        except BaseException:
            await self.shutdown()
            raise
        return self

    def _route_topics(self) -> list[str]:
        return list(self.rebalance.subscription_inner)

    async def shutdown(self) -> None:
        if not self._running:
            return
        instance = self._instance
        assert instance is not None
        self._stopping = True
        async with self.rebalance.rebalance_lock:  # let a rebalance in progress finish first
            pass
        tasks = list(self._pull_tasks.values())
        self._pull_tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.consume_service is not None:
            await self.consume_service.shutdown(self.await_termination)
        with contextlib.suppress(Exception):
            await self.offset_store.persist_all(list(self.rebalance.process_queue_table), oneway=False)
        if self.orderly and self._message_model is MessageModel.CLUSTERING:
            with contextlib.suppress(Exception):
                await self.rebalance.unlock_all(False)
        self._running = False
        for task in list(self._background):
            task.cancel()
        self.rebalance.destroy()
        await self._close_instance(instance)

    # -- RebalanceHooks ---------------------------------------------------------------------------

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        if self.orderly and self._message_model is MessageModel.CLUSTERING:
            # Let the batch in hand finish, commit what it consumed, then give the lock back.
            try:
                await within(pq.consume_lock.acquire(), 1.0)
            except TimeoutError:
                pq.try_unlock_times += 1
                log.info("%s: %s is still being consumed: released later", self._group, mq)
                return False
            try:
                await self.offset_store.persist(mq)
                self.offset_store.remove_offset(mq)
                await self.rebalance.unlock(mq, True)
            finally:
                pq.consume_lock.release()
            return True
        await self.offset_store.persist(mq)
        self.offset_store.remove_offset(mq)
        return True

    def dispatch_pull_requests(self, requests: list[tuple[MessageQueue, ProcessQueue, int]]) -> None:
        for mq, pq, offset in requests:
            old = self._pull_tasks.pop(mq, None)
            if old is not None:
                old.cancel()
            task = asyncio.ensure_future(self._pull_loop(mq, pq, offset))
            task.set_name(f"pull {self._group} {mq}")
            self._pull_tasks[mq] = task

    def message_queue_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        self.stats["rebalance_changes"] += 1

    # -- pulling ----------------------------------------------------------------------------------

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """Java's ``pullMessage`` + ``PullCallback`` for one queue, as a loop."""
        delay_on_error = self.config.pull_time_delay_when_exception
        clustering = self._message_model is MessageModel.CLUSTERING
        while self._running and not pq.dropped:
            pq.last_pull_timestamp = time.monotonic()
            if self._paused:
                await asyncio.sleep(PULL_TIME_DELAY_WHEN_SUSPEND)
                continue
            if (pq.msg_count > self.pull_threshold_for_queue
                    or pq.msg_size > self.pull_threshold_size_for_queue * 1024 * 1024):  # fmt: skip
                self.stats["flow_control"] += 1
                await asyncio.sleep(PULL_TIME_DELAY_WHEN_FLOW_CONTROL)
                continue
            if self.orderly:
                if clustering and not pq.locked:
                    await asyncio.sleep(delay_on_error)
                    continue
            elif pq.max_span > self.consume_concurrently_max_span:
                self.stats["flow_control"] += 1
                await asyncio.sleep(PULL_TIME_DELAY_WHEN_FLOW_CONTROL)
                continue
            sub = self.rebalance.subscription_inner.get(mq.topic)
            if sub is None:
                await asyncio.sleep(delay_on_error)
                continue
            commit_offset = 0
            if clustering:
                commit_offset = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            sub_expression = sub.sub_string if self.post_subscription_when_pull and not sub.class_filter_mode else None
            sys_flag = build_sys_flag(commit_offset > 0, True, sub_expression is not None, sub.class_filter_mode)
            pull_began = time.monotonic()
            try:
                result = await self.pull_api.pull_kernel(
                    mq, sub_expression, sub.expression_type, sub.sub_version, next_offset, self.pull_batch_size,
                    sys_flag, max(commit_offset, 0), BROKER_SUSPEND_MAX_TIME, CONSUMER_TIMEOUT_WHEN_SUSPEND,
                )  # fmt: skip
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not mq.topic.startswith("%RETRY%"):
                    log.info("%s: pull of %s failed: %s", self._group, mq, exc)
                self.stats["pull_errors"] += 1
                await asyncio.sleep(delay_on_error)
                continue
            result = self.pull_api.process_pull_result(mq, result, sub)
            if pq.dropped:
                return
            status = result.status
            pq.next_pull_offset = result.next_begin_offset
            if status is PullStatus.FOUND:
                next_offset = result.next_begin_offset
                msgs = result.messages
                self.instance.consumer_stats.pulled(self._group, mq.topic, (time.monotonic() - pull_began) * 1000,
                                                    len(msgs))  # fmt: skip
                if msgs:
                    self.stats["pulled"] += len(msgs)
                    dispatch = pq.put_message(msgs)
                    assert self.consume_service is not None
                    self.consume_service.submit_consume_request(msgs, pq, mq, dispatch)
                if self.pull_interval > 0:
                    await asyncio.sleep(self.pull_interval)
            elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
                next_offset = result.next_begin_offset
                if pq.msg_count == 0:  # correctTagsOffset: nothing in hand, the queue's offset moves on
                    self.offset_store.update_offset(mq, next_offset, True)
            else:  # OFFSET_ILLEGAL
                log.warning("%s: offset %d of %s is illegal; moving to %d", self._group, next_offset, mq,
                            result.next_begin_offset)  # fmt: skip
                next_offset = result.next_begin_offset
                pq.dropped = True
                self._spawn(self._remove_after_offset_moved(mq, next_offset))
                return

    async def _remove_after_offset_moved(self, mq: MessageQueue, offset: int) -> None:
        await asyncio.sleep(OFFSET_ILLEGAL_REMOVE_DELAY)
        self.offset_store.update_offset(mq, offset, False)
        await self.offset_store.persist(mq)
        await self.rebalance.remove_process_queue(mq)

    # -- sending back -----------------------------------------------------------------------------

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None = None) -> bool:
        """CONSUMER_SEND_MSG_BACK; if the broker refuses, a copy goes to the retry topic through the inner
        producer (``DefaultMQPushConsumerImpl.sendMessageBack``). False when both failed."""
        instance = self.instance
        addr = instance.find_broker_address_in_publish(broker_name) if broker_name else None
        if addr is None:
            host, port = msg.store_host
            addr = f"{host}:{port}"
        try:
            await instance.api.consumer_send_message_back(addr, msg, self._group, delay_level,
                                                          self.concurrent_max_reconsume_times)  # fmt: skip
            self.stats["sent_back"] += 1
            return True
        except ClientError as exc:
            log.warning("%s: sending %s back failed (%s): sending a copy to %s", self._group,
                        msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), exc, self.retry_topic)  # fmt: skip
        copy = self._retry_copy(msg, msg.reconsume_times + 1, self.concurrent_max_reconsume_times)
        copy.properties["DELAY"] = str(3 + msg.reconsume_times)
        return await self._send_copy(copy)

    async def send_message_back_by_producer(self, msg: MessageExt) -> bool:
        """Orderly: a message out of local attempts goes to the retry topic with its counters (the broker
        routes it to the dead-letter queue)."""
        copy = self._retry_copy(msg, msg.reconsume_times, self.orderly_max_reconsume_times)
        copy.properties["DELAY"] = str(3 + msg.reconsume_times)
        return await self._send_copy(copy)

    def _retry_copy(self, msg: MessageExt, reconsume_times: int, max_times: int) -> Message:
        props = dict(msg.properties)
        origin = props.get(PROPERTY_ORIGIN_MESSAGE_ID) or props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        props[PROPERTY_ORIGIN_MESSAGE_ID] = origin or msg.msg_id
        props[PROPERTY_RETRY_TOPIC] = msg.topic
        props[PROPERTY_RECONSUME_TIME] = str(reconsume_times)
        props[PROPERTY_MAX_RECONSUME_TIMES] = str(max_times)
        props.pop(PROPERTY_TRANSACTION_PREPARED, None)
        return Message(self.retry_topic, msg.body, msg.flag, props)

    async def _send_copy(self, copy: Message) -> bool:
        producer = self.instance.inner_producer
        if producer is None:
            return False
        try:
            await producer.send(copy)
            self.stats["sent_back"] += 1
            return True
        except ClientError as exc:
            log.warning("%s: sending a retry copy failed: %s", self._group, exc)
            return False

    # -- inspection -------------------------------------------------------------------------------

    def assignment(self) -> set[MessageQueue]:
        """The queues this member works on now."""
        if self.rebalance is None:
            return set()
        return {mq for mq, pq in self.rebalance.process_queue_table.items() if not pq.dropped}

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        await self.instance.update_topic_route(topic)
        return sorted(self.rebalance.topic_subscribe_info_table.get(topic, set()))
