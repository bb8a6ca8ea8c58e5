"""The pull consumer: Java's ``DefaultMQPullConsumer`` / ``DefaultMQPullConsumerImpl``.

The application drives everything: which queue, from which offset, and what to commit::

    async with PullConsumer("PG", "127.0.0.1:9876") as consumer:
        for mq in await consumer.fetch_subscribe_message_queues("T"):
            offset = await consumer.fetch_consume_offset(mq)          # −1: the group never committed one
            result = await consumer.pull_block_if_not_found(mq, "TagA", max(offset, 0))
            for msg in result.messages: ...
            await consumer.update_consume_offset(mq, result.next_begin_offset)

``pull`` answers at once (NO_NEW_MSG when the queue has nothing at that offset); ``pull_block_if_not_found``
lets the broker hold the request up to 20 s and answers as soon as a message arrives (long polling). The
subscription travels with each pull (PullSysFlag 0x4), so the broker needs no heartbeat subscription.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable

from rocketq.client.client_config import ClientConfig
from rocketq.client.consumer_base import ConsumerBase
from rocketq.client.errors import InvalidMessageError, NoRouteError
from rocketq.client.heartbeat import (
    EXPRESSION_TYPE_TAG,
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    build_subscription,
)
from rocketq.client.message_queue import MessageQueue
from rocketq.client.offset_store import ReadOffsetType
from rocketq.client.pull_api import build_sys_flag
from rocketq.client.pull_result import PullResult
from rocketq.client.rebalance import master_addr
from rocketq.common.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageExt
from rocketq.common.message_id import decode_offset_message_id

__all__ = ["PullConsumer"]

BROKER_SUSPEND_MAX_TIME = 20.0
CONSUMER_TIMEOUT_WHEN_SUSPEND = 30.0
CONSUMER_PULL_TIMEOUT = 10.0


class PullConsumer(ConsumerBase):
    consume_type = ConsumeType.CONSUME_ACTIVELY
    kind = "pull consumer"

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        instance_name: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        register_topics: Iterable[str] = (),
        offset_store_dir: str | None = None,
    ) -> None:
        super().__init__(group, namesrv_addr, config=config, instance_name=instance_name, message_model=message_model,
                         consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                         offset_store_dir=offset_store_dir)  # fmt: skip
        self._subscriptions.update((t, build_subscription(t)) for t in register_topics)
        self._subscribe_info: dict[str, set[MessageQueue]] = {}

    # -- ConsumerInner ----------------------------------------------------------------------------

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return topic in self._subscriptions and topic not in self._subscribe_info

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        self._subscribe_info[topic] = set(mqs)

    async def do_rebalance(self) -> None:
        return None

    async def persist_consumer_offset(self) -> None:
        if self._running:
            await self.offset_store.persist_all(list(self.offset_store.clone_offset_table()))

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        for mq, offset in offsets.items():
            self.offset_store.update_offset(mq, offset, False)

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> PullConsumer:
        if self._running:
            return self
        instance = await self._open(rebalanced=False)
        self._register(instance)
        try:
            await instance.start()
            await self._after_subscription_change()
        except BaseException:
            await self.shutdown()
            raise
        return self

    async def shutdown(self) -> None:
        if not self._running:
            return
        instance = self._instance
        assert instance is not None
        with contextlib.suppress(Exception):
            await self.offset_store.persist_all(list(self.offset_store.clone_offset_table()), oneway=False)
        await self._close_instance(instance)

    # -- queues and offsets -----------------------------------------------------------------------

    async def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted."""
        mqs = await self.instance.subscribe_queues(topic)
        return sorted(mqs)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        addr = await master_addr(self.instance, mq)
        return await self.instance.api.get_earliest_msg_storetime(addr, mq.topic, mq.queue_id)

    async def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        """The group's committed offset of ``mq`` (−1: none)."""
        kind = ReadOffsetType.READ_FROM_STORE if from_store else ReadOffsetType.MEMORY_FIRST_THEN_STORE
        return await self.offset_store.read_offset(mq, kind)

    async def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        """Commit ``offset`` for ``mq`` now (a two-way UPDATE_CONSUMER_OFFSET in clustering mode)."""
        self.offset_store.update_offset(mq, offset, False)
        await self.offset_store.update_consume_offset_to_broker(mq, offset, False)

    # -- pulling ----------------------------------------------------------------------------------

    async def pull(self, mq: MessageQueue, expression: str | None = "*", offset: int = 0, max_nums: int = 32,
                   *, timeout: float = CONSUMER_PULL_TIMEOUT,
                   expression_type: str = EXPRESSION_TYPE_TAG) -> PullResult:  # fmt: skip
        """Pull up to ``max_nums`` messages of ``mq`` from ``offset``; answers at once."""
        return await self._pull(mq, expression, expression_type, offset, max_nums, False, timeout)

    async def pull_block_if_not_found(self, mq: MessageQueue, expression: str | None = "*", offset: int = 0,
                                      max_nums: int = 32, *,
                                      expression_type: str = EXPRESSION_TYPE_TAG) -> PullResult:  # fmt: skip
        """Like ``pull``, but the broker holds the request (up to 20 s) until a message arrives."""
        return await self._pull(mq, expression, expression_type, offset, max_nums, True,
                                CONSUMER_TIMEOUT_WHEN_SUSPEND)  # fmt: skip

    async def _pull(self, mq: MessageQueue, expression: str | None, expression_type: str, offset: int,
                    max_nums: int, block: bool, timeout: float) -> PullResult:  # fmt: skip
        if offset < 0:
            raise InvalidMessageError(f"offset {offset} < 0")
        if max_nums <= 0:
            raise InvalidMessageError(f"max_nums {max_nums} <= 0")
        sub = build_subscription(mq.topic, expression, expression_type)
        instance = self.instance
        if mq.broker_name not in instance.broker_addr_table:
            await instance.update_topic_route(mq.topic)
        sys_flag = build_sys_flag(False, block, True)
        sub_version = 0 if sub.expression_type == EXPRESSION_TYPE_TAG else sub.sub_version
        result = await self.pull_api.pull_kernel(mq, sub.sub_string, sub.expression_type, sub_version, offset,
                                                 max_nums, sys_flag, 0, BROKER_SUSPEND_MAX_TIME, timeout)  # fmt: skip
        return self.pull_api.process_pull_result(mq, result, sub)

    # -- lookups ----------------------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message with this offset message id (VIEW_MESSAGE_BY_ID to the broker the id names)."""
        (host, port), offset = decode_offset_message_id(offset_msg_id)
        return await self.instance.api.view_message(f"{host}:{port}", offset)

    async def query_message(self, topic: str, key: str, max_num: int = 32, begin: int = 0,
                            end: int | None = None) -> list[MessageExt]:  # fmt: skip
        """Messages of ``topic`` whose ``KEYS`` hold ``key`` (QUERY_MESSAGE to every broker of the topic)."""
        route = await self.instance.api.get_topic_route(topic)
        if route is None:
            raise NoRouteError(topic)
        end_ms = int(time.time() * 1000) if end is None else end
        found: list[MessageExt] = []
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is not None:
                found.extend(await self.instance.api.query_message(addr, topic, key, max_num, begin, end_ms))
        return [m for m in found if key in (m.properties.get("KEYS") or "").split(" ")][:max_num]

    async def query_message_by_unique_key(self, topic: str, uniq_key: str) -> list[MessageExt]:
        """Messages of ``topic`` whose ``UNIQ_KEY`` is ``uniq_key``: QUERY_MESSAGE with ``_UNIQUE_KEY_QUERY`` to
        every broker of the topic, over all store times (Java's ``MQAdminImpl.queryMessageByUniqKey``, behind
        ``viewMessage(topic, msgId)``). Empty when no broker's index has it."""
        route = await self.instance.api.get_topic_route(topic)
        if route is None:
            raise NoRouteError(topic)
        found: list[MessageExt] = []
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is not None:
                found.extend(await self.instance.api.query_message(addr, topic, uniq_key, 32, 0, 2**63 - 1,
                                                                   unique_key=True))  # fmt: skip
        return [m for m in found if m.topic == topic and m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                == uniq_key]  # fmt: skip

    async def send_message_back(self, msg: MessageExt, delay_level: int = 0, broker_name: str | None = None,
                                max_reconsume_times: int = 16) -> None:  # fmt: skip
        """Return a message for a later retry on ``%RETRY%<group>`` (CONSUMER_SEND_MSG_BACK)."""
        instance = self.instance
        addr = instance.find_broker_address_in_publish(broker_name) if broker_name else None
        if addr is None:
            host, port = msg.store_host
            addr = f"{host}:{port}"
        await instance.api.consumer_send_message_back(addr, msg, self._group, delay_level, max_reconsume_times)
