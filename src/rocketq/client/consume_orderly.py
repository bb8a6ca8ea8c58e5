"""Orderly consumption: Java's ``ConsumeMessageOrderlyService`` (remoting-protocol §11.4).

One stream per queue: a queue's messages reach the listener one batch at a time, in offset order, never
two batches of one queue at once (other queues run in parallel). In clustering mode a queue is consumed
only while this client holds its broker lock (LOCK_BATCH_MQ, renewed every 20 s; a lock not renewed for
30 s counts as lost) — so after a rebalance or a restart a queue is never consumed by two members at a
time, and it resumes from the offset the last holder committed.

A batch that fails (SUSPEND_CURRENT_QUEUE_A_MOMENT, or an exception) is put back and the queue pauses
(``suspend_current_queue_time``, 1 s) before the same messages come again: nothing behind them overtakes
them. A message that failed ``max_reconsume_times`` times (unlimited by default) is sent to the retry
topic with its counters, where the broker, seeing the group hold locks, routes it to the dead-letter
queue; the queue then moves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from rocketq.client.consume_concurrently import reset_retry_topic
from rocketq.client.errors import log_failure
from rocketq.client.heartbeat import MessageModel
from rocketq.client.listener import (
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageListener,
    call_listener,
    consume_directly,
    is_async_listener,
    status_of,
)
from rocketq.client.message_queue import MessageQueue
from rocketq.client.process_queue import ProcessQueue
from rocketq.client.running_info import ConsumeMessageDirectlyResult
from rocketq.common.message import PROPERTY_RECONSUME_TIME, MessageExt

if TYPE_CHECKING:
    from rocketq.client.push_consumer import PushConsumer

__all__ = ["ConsumeMessageOrderlyService", "suspend_seconds"]

log = logging.getLogger(__name__)

REBALANCE_LOCK_INTERVAL = 20.0
MAX_TIME_CONSUME_CONTINUOUSLY = 60.0



def suspend_seconds(context_ms: int, consumer_s: float) -> float:
    """How long a queue rests after SUSPEND_CURRENT_QUEUE_A_MOMENT (``submitConsumeRequestLater``): the listener's
    ``suspend_current_queue_time_millis``, or the consumer's own when that is -1, kept within 10 ms and 30 s."""
    delay = consumer_s if context_ms == -1 else context_ms / 1000
    return min(30.0, max(0.01, delay))

class ConsumeMessageOrderlyService:
    def __init__(self, consumer: PushConsumer, listener: MessageListener) -> None:
        self.consumer = consumer
        self.listener = listener
        self.is_async = is_async_listener(listener)
        self.batch_size = max(1, consumer.consume_message_batch_max_size)
        self._executor: ThreadPoolExecutor | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._queue_locks: dict[MessageQueue, asyncio.Lock] = {}
        self._lock_task: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def clustering(self) -> bool:
        return self.consumer.message_model is MessageModel.CLUSTERING

    def start(self) -> None:
        if not self.is_async:
            name = f"consume-orderly-{self.consumer.group}"
            self._executor = ThreadPoolExecutor(max(1, self.consumer.consume_thread_nums), thread_name_prefix=name)
        if self.clustering:
            self._lock_task = asyncio.ensure_future(self._lock_loop())

    async def _lock_loop(self) -> None:
        await asyncio.sleep(1.0)
        while True:
            try:
                await self.consumer.rebalance.lock_all()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log_failure(log, exc, "%s: renewing queue locks", self.consumer.group)
            await asyncio.sleep(REBALANCE_LOCK_INTERVAL)

    async def shutdown(self, await_termination: float) -> None:
        self._stopped = True
        if self._lock_task is not None:
            self._lock_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lock_task
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, await_termination)
        # Wait for batches being consumed (they hold their queue's consume lock), then stop the rest.
        while any(lock.locked() for lock in self._queue_locks.values()) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def submit_consume_request(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue,
                               dispatch_to_consume: bool) -> None:  # fmt: skip
        if dispatch_to_consume:
            self._spawn(self._consume_queue(pq, mq))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        if self._stopped:
            coro.close()
            return
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _submit_later(self, pq: ProcessQueue, mq: MessageQueue, delay: float) -> None:
        async def later() -> None:
            await asyncio.sleep(delay)
            await self._consume_queue(pq, mq)

        self._spawn(later())

    def _try_lock_later_and_reconsume(self, pq: ProcessQueue, mq: MessageQueue, delay: float) -> None:
        async def later() -> None:
            await asyncio.sleep(delay)
            locked = await self.consumer.rebalance.lock(mq)
            await asyncio.sleep(0.01 if locked else 3.0)
            await self._consume_queue(pq, mq)

        self._spawn(later())

    async def _consume_queue(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        """Java's ``ConsumeRequest.run``: consume this queue's messages in order while allowed."""
        if pq.dropped:
            return
        lock = self._queue_locks.setdefault(mq, asyncio.Lock())
        if lock.locked():
            return  # another task is on this queue; it will see the new messages
        async with lock:
            if self.clustering and (not pq.locked or pq.is_lock_expired()):
                if not pq.dropped:
                    self._try_lock_later_and_reconsume(pq, mq, 0.1)
                return
            begin = time.monotonic()
            while not pq.dropped and not self._stopped:
                if self.clustering and not pq.locked:
                    self._try_lock_later_and_reconsume(pq, mq, 0.01)
                    return
                if self.clustering and pq.is_lock_expired():
                    self._try_lock_later_and_reconsume(pq, mq, 0.01)
                    return
                if time.monotonic() - begin > MAX_TIME_CONSUME_CONTINUOUSLY:
                    self._submit_later(pq, mq, 0.01)
                    return
                msgs = pq.take_messages(self.batch_size)
                if not msgs:
                    return
                reset_retry_topic(msgs, self.consumer.retry_topic)
                context = ConsumeOrderlyContext(mq)
                async with pq.consume_lock:
                    if pq.dropped:
                        return
                    started = time.monotonic()
                    try:
                        result = await call_listener(self.listener, self.is_async, msgs, context, self._executor)
                    except asyncio.CancelledError:
                        pq.rollback()
                        raise
                    except Exception:
                        log.warning("%s: orderly listener failed on %s", self.consumer.group, mq, exc_info=True)
                        result = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                    rt_ms = (time.monotonic() - started) * 1000
                    status = _orderly_status(result)
                    if not await self._process_result(msgs, status, context, pq, mq, rt_ms):
                        return

    async def _process_result(self, msgs: list[MessageExt], status: ConsumeOrderlyStatus,
                              context: ConsumeOrderlyContext, pq: ProcessQueue, mq: MessageQueue,
                              rt_ms: float | None = None) -> bool:  # fmt: skip
        """``processConsumeResult``. With ``context.auto_commit`` (the default) a batch is committed when it
        succeeds (COMMIT and ROLLBACK are taken for SUCCESS, as Java takes them). Without it, SUCCESS commits
        nothing (the batch stays taken), COMMIT commits every batch taken since the last commit, ROLLBACK puts them
        all back to be consumed again after the suspend time. SUSPEND_CURRENT_QUEUE_A_MOMENT retries the batch
        here until it is out of attempts, then sends it back (and, auto-committing, commits it)."""
        consumer = self.consumer
        commit_offset = -1
        continue_consume = True
        stats = consumer.instance.consumer_stats
        if status is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
            consumer.stats["consumed_failed"] += len(msgs)
            stats.consumed(consumer.group, mq.topic, rt_ms, 0, len(msgs))
            if await self._check_reconsume_times(msgs):
                pq.make_message_to_consume_again(msgs)
                delay = suspend_seconds(context.suspend_current_queue_time_millis, consumer.suspend_current_queue_time)
                self._submit_later(pq, mq, delay)
                continue_consume = False
            elif context.auto_commit:
                commit_offset = pq.commit()
        elif not context.auto_commit and status is ConsumeOrderlyStatus.ROLLBACK:
            pq.rollback()
            delay = suspend_seconds(context.suspend_current_queue_time_millis, consumer.suspend_current_queue_time)
            self._submit_later(pq, mq, delay)
            continue_consume = False
        elif not context.auto_commit and status is ConsumeOrderlyStatus.COMMIT:
            commit_offset = pq.commit()
        else:
            if status is not ConsumeOrderlyStatus.SUCCESS:  # COMMIT or ROLLBACK while committing by itself
                log.warning("the message queue consume result is illegal, we think you want to ack these message "
                            "%s", mq)  # fmt: skip
            consumer.stats["consumed_ok"] += len(msgs)
            stats.consumed(consumer.group, mq.topic, rt_ms, len(msgs), 0)
            if context.auto_commit:
                commit_offset = pq.commit()
        if commit_offset >= 0 and not pq.dropped:
            consumer.offset_store.update_offset(mq, commit_offset, False)
        return continue_consume

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """True when the batch should be retried here; messages out of attempts go to the retry topic."""
        suspend = False
        limit = self.consumer.orderly_max_reconsume_times
        for msg in msgs:
            if msg.reconsume_times >= limit:
                msg.properties[PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times)
                if not await self.consumer.send_message_back_by_producer(msg):
                    suspend = True
                    msg.reconsume_times += 1
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY for an orderly listener: the message alone, no queue lock, nothing committed."""
        reset_retry_topic([msg], self.consumer.retry_topic)
        context = ConsumeOrderlyContext(MessageQueue(msg.topic, broker_name, msg.queue_id))
        return await consume_directly(self.listener, self.is_async, msg, context, self._executor,
                                      lambda answer: _VERDICTS[_orderly_status(answer)], order=True)  # fmt: skip


_VERDICTS = {
    ConsumeOrderlyStatus.SUCCESS: "CR_SUCCESS", ConsumeOrderlyStatus.COMMIT: "CR_COMMIT",
    ConsumeOrderlyStatus.ROLLBACK: "CR_ROLLBACK", ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: "CR_LATER",
}  # fmt: skip


def _orderly_status(result: object) -> ConsumeOrderlyStatus:
    return status_of(result, ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT)
