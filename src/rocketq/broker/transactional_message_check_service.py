"""Check-back of unresolved transactions: RocketMQ 4.9's ``broker/transaction/TransactionalMessageCheckService``,
``AbstractTransactionalMessageCheckListener`` / ``DefaultTransactionalMessageCheckListener`` and
``Broker2Client.checkProducerTransactionState`` (remoting-protocol §6.11, §11.6).

Every ``transactionCheckInterval`` (60 s in 4.9.4's ``BrokerConfig``) the service runs one
:meth:`TransactionalMessageService.check` with ``transactionTimeOut`` (6 s) and ``transactionCheckMax`` (15).
What the check hands over goes to the listener:

- a half message to ask about: CHECK_TRANSACTION_STATE, one-way, to a live connection of its producer group
  (``PGROUP``; none → logged and left to the next check). Header: ``tranStateTableOffset`` and
  ``commitLogOffset`` of the renewed copy, ``msgId`` = ``transactionId`` = ``UNIQ_KEY``, ``offsetMsgId`` = the
  copy's offset id. Body: the message encoded as a record with its real topic and queue
  (``MessageDecoder.encode``). The producer answers with END_TRANSACTION ``fromTransactionCheck=true``.
- a half message checked too often (or too old): discarded as Java does, by storing a copy in
  ``TRANS_CHECK_MAX_TIME_TOPIC`` (created with 1 queue, perm RW) with the half message's body, flag, sysFlag,
  properties, born time and hosts; nothing is done with it afterwards.

The check runs on the broker's event loop, the first one an interval after start, as in Java: after a restart
the producers have that long to connect again before a check that finds none counts towards
``transactionCheckMax``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from typing import TYPE_CHECKING

from rocketq.broker.topic_validator import PERM_READ, PERM_WRITE, RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
from rocketq.broker.transactional_message_service import TransactionalMessageService, with_properties
from rocketq.common.aio import wait_event
from rocketq.common.codec import encode_record
from rocketq.common.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
)
from rocketq.common.message_id import create_offset_message_id
from rocketq.remoting.codes import RequestCode
from rocketq.remoting.command import create_request
from rocketq.remoting.errors import RemotingError
from rocketq.store.commit_log import PutMessageStatus

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)

#: Queues of ``TRANS_CHECK_MAX_TIME_TOPIC`` (``TCMT_QUEUE_NUMS``).
TCMT_QUEUE_NUMS = 1


class TransactionalMessageCheckListener:
    """``DefaultTransactionalMessageCheckListener``: ask the producer, or discard."""

    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller
        self._sends: set[asyncio.Task[None]] = set()
        #: CHECK_TRANSACTION_STATE requests sent since start (for stats and tests).
        self.checks_sent = 0

    def resolve_half_msg(self, msg: MessageExt) -> None:
        """``resolveHalfMsg``: send the check without holding up the walk of the half queue."""
        task = asyncio.ensure_future(self.send_check_message(msg))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def send_check_message(self, msg: MessageExt) -> None:
        """``sendCheckMessage`` + ``Broker2Client.checkProducerTransactionState``."""
        uniq = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = {
            "tranStateTableOffset": msg.queue_offset,
            "commitLogOffset": msg.commit_log_offset,
            "msgId": uniq,
            "transactionId": uniq,
            "offsetMsgId": create_offset_message_id(msg.store_host, msg.commit_log_offset),
        }
        real = MessageExt(topic=msg.properties.get(PROPERTY_REAL_TOPIC, msg.topic), body=msg.body, flag=msg.flag,
                          queue_id=int(msg.properties.get(PROPERTY_REAL_QUEUE_ID, "0") or 0), sys_flag=msg.sys_flag,
                          born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                          store_timestamp=msg.store_timestamp, store_host=msg.store_host,
                          reconsume_times=msg.reconsume_times,
                          prepared_transaction_offset=msg.prepared_transaction_offset)  # fmt: skip
        with_properties(real, dict(msg.properties))
        real.queue_offset = msg.queue_offset
        real.commit_log_offset = msg.commit_log_offset
        body = bytes(encode_record(real))
        group = msg.properties.get(PROPERTY_PRODUCER_GROUP, "")
        conn = self.controller.producer_manager.get_available_channel(group)
        if conn is None:
            log.warning("Check transaction failed, channel is null. groupId=%s", group)
            return
        request = create_request(RequestCode.CHECK_TRANSACTION_STATE, header, body, oneway=True)
        try:
            await conn.invoke_oneway(request)
            self.checks_sent += 1
        except (RemotingError, OSError) as exc:
            log.error("Check transaction failed because invoke producer exception. group=%s, msgId=%s, error=%s",
                      group, uniq, exc)  # fmt: skip

    async def resolve_discard_msg(self, msg: MessageExt) -> None:
        """``resolveDiscardMsg``: move a half message checked too many times to ``TRANS_CHECK_MAX_TIME_TOPIC``."""
        log.error("MsgExt at %d has been checked too many times, so discard it by moving it to system topic "
                  "TRANS_CHECK_MAXTIME_TOPIC", msg.commit_log_offset)  # fmt: skip
        ctl = self.controller
        cfg = ctl.topic_config_manager.create_topic_in_send_message_back(
            RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC, TCMT_QUEUE_NUMS, PERM_READ | PERM_WRITE, 0)
        inner = MessageExt(topic=cfg.topic_name, body=msg.body, flag=msg.flag,
                           queue_id=random.randrange(99999999) % TCMT_QUEUE_NUMS, sys_flag=msg.sys_flag,
                           born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
                           reconsume_times=msg.reconsume_times, wait_store_msg_ok=False)  # fmt: skip
        with_properties(inner, dict(msg.properties))
        result = await ctl.put_message(inner)
        if result.status is PutMessageStatus.PUT_OK:
            log.info("Put checked-too-many-time half message to TRANS_CHECK_MAXTIME_TOPIC OK. Restored in "
                     "queueOffset=%d, commitLogOffset=%d, real topic=%s", msg.queue_offset, msg.commit_log_offset,
                     msg.properties.get(PROPERTY_REAL_TOPIC))  # fmt: skip
        else:
            log.error("Put checked-too-many-time half message to TRANS_CHECK_MAXTIME_TOPIC failed: %s",
                      result.status.value)  # fmt: skip

    async def shutdown(self) -> None:
        sends = list(self._sends)
        for task in sends:
            task.cancel()
        for task in sends:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


class TransactionalMessageCheckService:
    """The periodic check of a broker's half messages."""

    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller
        self.transactional_message_service = TransactionalMessageService(controller)
        self.listener = TransactionalMessageCheckListener(controller)
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="transaction check")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.listener.shutdown()

    def wakeup(self) -> None:
        """Run a check now (admin tools and tests)."""
        if self._wake is not None:
            self._wake.set()

    async def check_once(self) -> None:
        """``onWaitEnd``: one check with the broker's ``transactionTimeOut`` and ``transactionCheckMax``."""
        assert self._lock is not None
        cfg = self.controller.broker_config
        async with self._lock:
            await self.transactional_message_service.check(cfg.transaction_time_out, cfg.transaction_check_max,
                                                           self.listener)  # fmt: skip

    async def _run(self) -> None:
        assert self._wake is not None
        interval = max(0.05, self.controller.broker_config.transaction_check_interval / 1000.0)
        # As Java's service: the first check one interval after start, not at once. After a restart the producers
        # need that long to connect again; a check that finds none still counts towards transactionCheckMax.
        await wait_event(self._wake, interval)
        while True:
            self._wake.clear()
            try:
                await self.check_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction check failed")
            await wait_event(self._wake, interval)
