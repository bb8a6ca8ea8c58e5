"""Concurrent consumption: Java's ``ConsumeMessageConcurrentlyService``.

Pulled messages are cut into batches of ``consume_message_batch_max_size`` and handed to a pool of
``consume_thread_nums`` workers (asyncio tasks; a plain-function listener runs on a thread pool of the
same size), in no particular order across or within queues.

After a batch:

- success: the messages leave their ``ProcessQueue`` and the queue's offset becomes the lowest offset
  still in it (a slow message holds the committed offset back; nothing is ever skipped);
- failure (RECONSUME_LATER or an exception), clustering: each message goes back to the broker
  (CONSUMER_SEND_MSG_BACK) to come again on ``%RETRY%<group>`` after a growing delay (level
  ``3 + reconsumeTimes`` unless the context asks otherwise), and to ``%DLQ%<group>`` once it failed
  ``max_reconsume_times`` (16) times; a message the broker would not take back is retried here 5 s later;
- failure, broadcasting: the messages are dropped (logged).

A message taken from the retry topic is handed over with its original topic (``RETRY_TOPIC``).

Each message is stamped ``CONSUME_START_TIME`` as its batch goes to the listener. Every ``consume_timeout``
(15 minutes, Java's ``consumeTimeout``) a queue whose oldest message has been in the listener longer than that
has it sent back for retry (delay level 3) and let go, up to 16 a queue (``ProcessQueue.cleanExpiredMsg``): a
listener that hangs holds the committed offset back for that long at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocketq.client.heartbeat import MessageModel
from rocketq.client.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageListener,
    call_listener,
    consume_directly,
    is_async_listener,
    status_of,
)
from rocketq.client.message_queue import MessageQueue
from rocketq.client.process_queue import ProcessQueue
from rocketq.client.running_info import ConsumeMessageDirectlyResult
from rocketq.common.message import PROPERTY_CONSUME_START_TIMESTAMP, PROPERTY_RETRY_TOPIC, MessageExt

if TYPE_CHECKING:
    from rocketq.client.push_consumer import PushConsumer

__all__ = ["ConsumeMessageConcurrentlyService", "reset_retry_topic"]

log = logging.getLogger(__name__)

SEND_BACK_FAILED_RETRY_DELAY = 5.0
EXPIRED_DELAY_LEVEL = 3  # the delay level of a message sent back for taking too long (cleanExpiredMsg)
EXPIRED_PER_QUEUE = 16  # ... at most this many of a queue a look


def reset_retry_topic(msgs: list[MessageExt], retry_topic: str) -> None:
    """``resetRetryAndNamespace``: a message of the group's retry topic gets its original topic back."""
    for msg in msgs:
        if msg.topic == retry_topic:
            original = msg.properties.get(PROPERTY_RETRY_TOPIC)
            if original:
                msg.topic = original


@dataclass(slots=True)
class ConsumeRequest:
    msgs: list[MessageExt]
    pq: ProcessQueue
    mq: MessageQueue


class ConsumeMessageConcurrentlyService:
    def __init__(self, consumer: PushConsumer, listener: MessageListener) -> None:
        self.consumer = consumer
        self.listener = listener
        self.is_async = is_async_listener(listener)
        self.batch_size = max(1, consumer.consume_message_batch_max_size)
        self.workers = max(1, consumer.consume_thread_nums)
        self._queue: asyncio.Queue[ConsumeRequest] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._later: set[asyncio.Task[None]] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._busy = 0

    def start(self) -> None:
        if not self.is_async:
            self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix=f"consume-{self.consumer.group}")
        self._tasks = [asyncio.ensure_future(self._worker()) for _ in range(self.workers)]
        self._tasks.append(asyncio.ensure_future(self._clean_expired_periodically()))

    async def shutdown(self, await_termination: float) -> None:
        """Stop taking work; wait up to ``await_termination`` seconds for the batches in hand and queued."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, await_termination)
        while (self._busy or not self._queue.empty()) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for task in [*self._tasks, *self._later]:
            task.cancel()
        for task in [*self._tasks, *self._later]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def submit_consume_request(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
                               dispatch_to_consume: bool) -> None:  # fmt: skip
        size = self.batch_size
        if len(msgs) <= size:
            self._queue.put_nowait(ConsumeRequest(msgs, pq, mq))
            return
        for i in range(0, len(msgs), size):
            self._queue.put_nowait(ConsumeRequest(msgs[i : i + size], pq, mq))

    def _submit_later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        async def later() -> None:
            await asyncio.sleep(SEND_BACK_FAILED_RETRY_DELAY)
            self.submit_consume_request(msgs, pq, mq, True)

        task = asyncio.ensure_future(later())
        self._later.add(task)
        task.add_done_callback(self._later.discard)

    async def _clean_expired_periodically(self) -> None:
        timeout = self.consumer.consume_timeout
        while True:
            await asyncio.sleep(timeout)
            try:
                await self.clean_expired(timeout)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: sending expired messages back failed", self.consumer.group)

    async def clean_expired(self, timeout: float) -> int:
        """``cleanExpireMsg``: in each queue, the messages at its head that have been with the listener longer than
        *timeout* seconds are sent back for retry and let go (clustering; broadcasting has no retry). The count
        let go."""
        consumer = self.consumer
        if consumer.message_model is MessageModel.BROADCASTING or consumer.rebalance is None:
            return 0
        timeout_ms = timeout * 1000
        done = 0
        for mq, pq in list(consumer.rebalance.process_queue_table.items()):
            for _ in range(EXPIRED_PER_QUEUE):
                msg = pq.first_expired(int(time.time() * 1000), timeout_ms)
                if msg is None or pq.dropped:
                    break
                if not await consumer.send_message_back(msg, EXPIRED_DELAY_LEVEL, mq.broker_name):
                    break  # (logged there) tried again at the next look
                log.info("%s: %s of %s was with the listener longer than %.0f s: sent back for retry",
                         consumer.group, msg.msg_id, mq, timeout)  # fmt: skip
                if pq.first_expired(int(time.time() * 1000), timeout_ms) is msg:
                    pq.remove_message([msg])
                    done += 1
        return done

    async def _worker(self) -> None:
        while True:
            request = await self._queue.get()
            self._busy += 1
            try:
                await self._consume(request)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: consuming a batch of %s failed", self.consumer.group, request.mq)
            finally:
                self._busy -= 1

    async def _consume(self, request: ConsumeRequest) -> None:
        if request.pq.dropped:
            return
        consumer = self.consumer
        reset_retry_topic(request.msgs, consumer.retry_topic)
        started = str(int(time.time() * 1000))
        for msg in request.msgs:
            msg.properties[PROPERTY_CONSUME_START_TIMESTAMP] = started
        context = ConsumeConcurrentlyContext(request.mq)
        begin = time.monotonic()
        try:
            result = await call_listener(self.listener, self.is_async, request.msgs, context, self._executor)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("%s: listener failed on %d message(s) of %s", consumer.group, len(request.msgs),
                        request.mq, exc_info=True)  # fmt: skip
            result = ConsumeConcurrentlyStatus.RECONSUME_LATER
        rt_ms = (time.monotonic() - begin) * 1000
        status = _concurrently_status(result)
        if request.pq.dropped:
            log.info("%s: %s was dropped while its batch was consumed: result not applied", consumer.group,
                     request.mq)  # fmt: skip
            return
        await self._process_result(status, context, request, rt_ms)

    async def _process_result(self, status: ConsumeConcurrentlyStatus, context: ConsumeConcurrentlyContext,
                              request: ConsumeRequest, rt_ms: float | None = None) -> None:  # fmt: skip
        consumer = self.consumer
        msgs = request.msgs
        ok = status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        ack_index = min(context.ack_index, len(msgs) - 1) if ok else -1
        consumer.stats["consumed_ok"] += ack_index + 1
        consumer.stats["consumed_failed"] += len(msgs) - ack_index - 1
        consumer.instance.consumer_stats.consumed(consumer.group, request.mq.topic, rt_ms, ack_index + 1,
                                                  len(msgs) - ack_index - 1)  # fmt: skip
        failed = msgs[ack_index + 1 :]
        keep = msgs
        if failed:
            if consumer.message_model is MessageModel.BROADCASTING:
                for msg in failed:
                    log.warning("%s: broadcasting consumption failed, dropping %s", consumer.group, msg.msg_id)
            else:
                back_failed = []
                for msg in failed:
                    if not await consumer.send_message_back(msg, context.delay_level_when_next_consume,
                                                            request.mq.broker_name):  # fmt: skip
                        msg.reconsume_times += 1
                        back_failed.append(msg)
                if back_failed:
                    ids = {id(m) for m in back_failed}
                    keep = [m for m in msgs if id(m) not in ids]
                    self._submit_later(back_failed, request.pq, request.mq)
        offset = request.pq.remove_message(keep)
        if offset >= 0 and not request.pq.dropped:
            consumer.offset_store.update_offset(request.mq, offset, True)

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: *msg* handed to the listener alone, outside the queues; nothing is committed or
        sent back."""
        reset_retry_topic([msg], self.consumer.retry_topic)
        context = ConsumeConcurrentlyContext(MessageQueue(msg.topic, broker_name, msg.queue_id))
        return await consume_directly(self.listener, self.is_async, msg, context, self._executor, _verdict, order=False)


def _concurrently_status(result: object) -> ConsumeConcurrentlyStatus:
    return status_of(result, ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeConcurrentlyStatus.RECONSUME_LATER)


def _verdict(answer: object) -> str:
    return "CR_SUCCESS" if _concurrently_status(answer) is ConsumeConcurrentlyStatus.CONSUME_SUCCESS else "CR_LATER"
