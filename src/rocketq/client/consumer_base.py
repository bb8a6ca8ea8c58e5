"""What the three consumers share: the ``MQConsumerInner`` face a client instance sees (Java's
``DefaultMQPushConsumerImpl``, ``DefaultMQPullConsumerImpl`` and ``DefaultLitePullConsumerImpl`` each repeat
it), their setup (configuration, client instance, offset store by message model, pull API), their shutdown
of the instance, and the offset lookups of a queue (Java's ``MQAdmin`` methods of every consumer).

A consumer class sets ``consume_type`` and ``kind`` (its name in messages), builds on :meth:`ConsumerBase._open`
in its ``start`` and :meth:`ConsumerBase._close_instance` in its ``shutdown``. The rebalanced consumers
(push, lite pull) also get their ``RebalanceImpl`` from ``_open`` and use the rebalance hooks defined here.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import logging
import time
from collections.abc import Coroutine
from typing import Any, ClassVar, Self

from rocketq.client.allocate_strategy import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from rocketq.client.client_config import ClientConfig
from rocketq.client.client_instance import ClientInstance, get_client_instance
from rocketq.client.errors import (
    BrokerError,
    BrokerUnreachableError,
    ClientError,
    ClientNotRunningError,
    ClientTimeoutError,
    InvalidMessageError,
)
from rocketq.client.heartbeat import (
    EXPRESSION_TYPE_TAG,
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    SubscriptionData,
    build_subscription,
)
from rocketq.client.message_queue import MessageQueue
from rocketq.client.offset_store import LocalFileOffsetStore, OffsetStore, RemoteBrokerOffsetStore
from rocketq.client.pull_api import PullAPIWrapper
from rocketq.client.rebalance import RebalanceImpl, compute_pull_from_where, max_offset, min_offset, search_offset
from rocketq.client.running_info import (
    PROP_CONSUMER_START_TIMESTAMP,
    ConsumerRunningInfo,
    ProcessQueueInfo,
    running_info_properties,
)
from rocketq.remoting.codes import ResponseCode

__all__ = ["ConsumerBase", "parse_consume_timestamp"]

log = logging.getLogger(__name__)


def parse_consume_timestamp(value: int | float | str | _dt.datetime | None) -> int:
    """Milliseconds since the epoch from ms, a ``datetime``, or Java's ``yyyyMMddHHmmss`` (local time);
    ``None`` is 30 minutes ago (``DefaultMQPushConsumer.consumeTimestamp``)."""
    if value is None:
        return int((time.time() - 1800) * 1000)
    if isinstance(value, _dt.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, int | float):
        return int(value)
    text = value.strip()
    if len(text) == 14 and text.isdigit():
        return int(_dt.datetime.strptime(text, "%Y%m%d%H%M%S").timestamp() * 1000)
    if text.isdigit():
        return int(text)
    raise InvalidMessageError(f"consume timestamp {value!r}: give ms since the epoch or yyyyMMddHHmmss")


class ConsumerBase:
    """The common part of :class:`PushConsumer`, :class:`PullConsumer` and :class:`LitePullConsumer`."""

    consume_type: ClassVar[ConsumeType]
    #: The consumer's name in messages ("push consumer G is not started").
    kind: ClassVar[str] = "consumer"

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None,
        *,
        config: ClientConfig | None,
        instance_name: str | None,
        message_model: MessageModel,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: int | float | str | _dt.datetime | None = None,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        offset_store_dir: str | None = None,
    ) -> None:
        self.config = ClientConfig.of(config, namesrv_addr=namesrv_addr, instance_name=instance_name)
        self._group = group
        self._message_model = message_model
        self._consume_from_where = consume_from_where
        self.consume_timestamp_ms = parse_consume_timestamp(consume_timestamp)
        self.allocate_strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.offset_store_dir = offset_store_dir
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._instance: ClientInstance | None = None
        self._running = False
        self._stopping = False
        self._background: set[asyncio.Task[Any]] = set()
        self.offset_store: OffsetStore = None  # type: ignore[assignment]
        self.rebalance: RebalanceImpl = None  # type: ignore[assignment]
        self.pull_api: PullAPIWrapper = None  # type: ignore[assignment]
        self.start_timestamp = 0  # epoch ms of the last start

    # -- MQConsumerInner --------------------------------------------------------------------------

    def running_settings(self) -> dict[str, Any]:
        """The settings GET_CONSUMER_RUNNING_INFO reports, under Java's property names (``object2Properties`` of
        the consumer); a consumer class adds its own."""
        timestamp = _dt.datetime.fromtimestamp(self.consume_timestamp_ms / 1000) if self.consume_timestamp_ms \
            else None  # fmt: skip
        return {
            "consumerGroup": self._group, "messageModel": self._message_model,
            "consumeFromWhere": self._consume_from_where,
            "consumeTimestamp": timestamp.strftime("%Y%m%d%H%M%S") if timestamp else None,
            "allocateMessageQueueStrategy": type(self.allocate_strategy).__name__,
            "namesrvAddr": ";".join(self.config.namesrv_addrs()) or None,
            "instanceName": self.config.instance_name,
            "clientIP": self.config.ip(), "unitMode": False,
        }  # fmt: skip

    def consumer_running_info(self) -> ConsumerRunningInfo:
        """``consumerRunningInfo``: settings, subscriptions and the queues held (with the committed offset known
        here); a push consumer adds its consume rates."""
        info = ConsumerRunningInfo(properties=running_info_properties(self.running_settings()))
        info.properties[PROP_CONSUMER_START_TIMESTAMP] = str(self.start_timestamp)
        info.subscription_set = list(self.subscriptions())
        table = self.rebalance.process_queue_table if self.rebalance is not None else {}
        offsets = self.offset_store.clone_offset_table() if self.offset_store is not None else {}
        for mq, pq in list(table.items()):
            info.mq_table[mq] = pq.fill_info(ProcessQueueInfo(commit_offset=offsets.get(mq, -1)))
        return info

    @property
    def group(self) -> str:
        return self._group

    @property
    def message_model(self) -> MessageModel:
        return self._message_model

    @property
    def consume_from_where(self) -> ConsumeFromWhere:
        return self._consume_from_where

    def subscriptions(self) -> list[SubscriptionData]:
        return list(self._subscriptions.values())

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        if self.rebalance is None or topic not in self.rebalance.subscription_inner:
            return False
        return topic not in self.rebalance.topic_subscribe_info_table

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if self.rebalance is not None and topic in self.rebalance.subscription_inner:
            self.rebalance.topic_subscribe_info_table[topic] = set(mqs)

    # -- life cycle -------------------------------------------------------------------------------

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None or not self._running:
            raise ClientNotRunningError(f"{self.kind} {self._group} is not started")
        return self._instance

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    async def start(self) -> Self:
        raise NotImplementedError

    async def shutdown(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    async def _open(self, *, rebalanced: bool,
                    subscriptions: dict[str, SubscriptionData] | None = None) -> ClientInstance:  # fmt: skip
        """The first steps of every ``start``: the client instance, the offset store of the message model
        (loaded), the rebalance of a rebalanced consumer (with ``subscriptions``, default the consumer's own),
        the pull API. The caller registers the consumer with :meth:`_register` once its own parts are built."""
        from rocketq.client.producer import check_group

        check_group(self._group, "consumer")
        if self._message_model is MessageModel.CLUSTERING:
            self.config.change_instance_name_to_pid()
        instance = get_client_instance(self.config, consumer_group=self._group)
        if self._message_model is MessageModel.BROADCASTING:
            # by its client id (IP@DEFAULT unless an instance name is set): the next run finds the offsets again
            self.offset_store = LocalFileOffsetStore(self.config.build_client_id(), self._group,
                                                     self.offset_store_dir)  # fmt: skip
        else:
            self.offset_store = RemoteBrokerOffsetStore(instance, self._group)
        await self.offset_store.load()
        if rebalanced:
            self.rebalance = RebalanceImpl(instance, self._group, self._message_model, self.allocate_strategy,
                                           self, self.offset_store)  # type: ignore[arg-type]  # fmt: skip
            self.rebalance.subscription_inner.update(self._subscriptions if subscriptions is None else subscriptions)
        self.pull_api = PullAPIWrapper(instance, self._group)
        return instance

    def _register(self, instance: ClientInstance) -> None:
        """Join ``instance`` as this group's consumer; from now on the consumer is running."""
        if not instance.register_consumer(self._group, self):
            raise ClientError(f"the consumer group {self._group} is already registered in {instance.client_id}")
        self._instance = instance
        self._running = True
        self._stopping = False
        self.start_timestamp = int(time.time() * 1000)

    async def _close_instance(self, instance: ClientInstance) -> None:
        """The last steps of every ``shutdown``: leave the instance, unregister from the brokers, release it."""
        self._running = False
        instance.unregister_consumer_local(self._group)
        with contextlib.suppress(Exception):
            await instance.unregister_client(None, self._group)
        await instance.release()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` in the background (kept referenced; its failure is retrieved, not raised)."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    # -- subscriptions ----------------------------------------------------------------------------

    def _add_subscription(self, topic: str, expression: str, expression_type: str = EXPRESSION_TYPE_TAG) -> None:
        """Subscribe to ``topic`` (``*``, or tags joined by ``||``); a running consumer tells the brokers now."""
        from rocketq.client.producer import check_topic

        check_topic(topic)
        sub = build_subscription(topic, expression, expression_type)
        self._subscriptions[topic] = sub
        if self.rebalance is not None:
            self.rebalance.subscription_inner[topic] = sub
        if self._running:
            self._spawn(self._after_subscription_change())

    def _route_topics(self) -> list[str]:
        """The topics whose routes the consumer needs."""
        return list(self._subscriptions)

    def _rebalances_now(self) -> bool:
        """Whether a change of subscription calls for a rebalance."""
        return self.rebalance is not None

    async def _after_subscription_change(self) -> None:
        """Fetch the routes of the subscribed topics, have the brokers check the SQL92 subscriptions, tell every
        broker (heartbeat), and rebalance."""
        instance = self.instance
        for topic in self._route_topics():
            try:
                await instance.update_topic_route(topic)
            except ClientError as exc:
                log.info("%s: no route for %s yet: %s", self._group, topic, exc)
        await self._check_client_in_broker()
        await instance.send_heartbeat_to_all_brokers()
        if self._rebalances_now():
            instance.rebalance_immediately()

    async def _check_client_in_broker(self) -> None:
        """``MQClientInstance.checkClientInBroker``: every master broker of a topic subscribed with a non-tag
        expression must take it (CHECK_CLIENT_CONFIG), or the consumer does not start: a broker without
        ``enablePropertyFilter=true``, or an expression it cannot compile, would otherwise leave the consumer
        without messages and nothing said."""
        instance = self.instance
        for sub in list(self._subscriptions.values()):
            if sub.is_tag_type:
                continue
            route = instance.topic_route_table.get(sub.topic)
            for bd in route.broker_datas if route is not None else ():
                addr = bd.master_addr
                if addr is None:
                    continue
                try:
                    await instance.api.check_client_in_broker(addr, self._group, instance.client_id, sub)
                except BrokerError as exc:
                    hint = ("; a broker filters by SQL92 with enablePropertyFilter=true in its broker.conf"
                            if exc.code == ResponseCode.SYSTEM_ERROR else "")  # fmt: skip
                    raise ClientError(f"broker {bd.broker_name} ({addr}) does not take the {sub.expression_type} "
                                      f"subscription {sub.sub_string!r} of {sub.topic}: {exc.remark or exc}"
                                      f"{hint}") from exc  # fmt: skip
                except (BrokerUnreachableError, ClientTimeoutError) as exc:  # its heartbeat will fail too; go on
                    log.warning("%s: could not check the %s subscription of %s with %s: %s", self._group,
                                sub.expression_type, sub.topic, addr, exc)  # fmt: skip

    # -- RebalanceHooks (push and lite pull) ------------------------------------------------------

    async def compute_pull_from_where(self, mq: MessageQueue) -> int:
        return await compute_pull_from_where(self.instance, self.offset_store, mq, self._consume_from_where,
                                             self.consume_timestamp_ms)  # fmt: skip

    # -- queue offsets (MQAdmin) ------------------------------------------------------------------

    async def min_offset(self, mq: MessageQueue) -> int:
        return await min_offset(self.instance, mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        return await max_offset(self.instance, mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms`` (SEARCH_OFFSET_BY_TIMESTAMP)."""
        return await search_offset(self.instance, mq, timestamp_ms)
