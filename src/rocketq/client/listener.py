"""What a push consumer's message listener is given and answers: Java's ``MessageListenerConcurrently`` /
``MessageListenerOrderly`` with their ``Consume…Status`` and ``Consume…Context``.

A listener is a function (plain or ``async``) of ``(messages, context)``. It answers with a status; in
the Python way it may also just return (``None`` counts as success) or raise (counts as
RECONSUME_LATER, or SUSPEND_CURRENT_QUEUE_A_MOMENT for an orderly listener). A plain function runs on the
consumer's worker threads, an ``async`` one on the event loop.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from rocketq.client.message_queue import MessageQueue
from rocketq.client.running_info import ConsumeMessageDirectlyResult
from rocketq.common.message import MessageExt

__all__ = [
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "MessageListener",
    "consume_directly",
    "is_async_listener",
    "status_of",
]

_S = TypeVar("_S", bound=enum.Enum)


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = 0
    RECONSUME_LATER = 1


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = 0
    ROLLBACK = 1  # deprecated in Java; treated as SUCCESS when auto-committing
    COMMIT = 2  # deprecated in Java; treated as SUCCESS when auto-committing
    SUSPEND_CURRENT_QUEUE_A_MOMENT = 3


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """``delay_level_when_next_consume``: the delay level of the retry if this batch fails (0: the broker
    picks ``3 + reconsumeTimes``; −1: straight to the dead-letter queue). ``ack_index``: on success, the
    index of the last message that really succeeded (the rest are retried)."""

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """``suspend_current_queue_time_millis``: how long to pause the queue after SUSPEND (−1: the consumer's
    default, 1 s)."""

    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_millis: int = -1


MessageListener: TypeAlias = Callable[[list[MessageExt], Any], Any | Awaitable[Any]]


def is_async_listener(listener: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(listener):
        return True
    call = getattr(listener, "__call__", None)  # noqa: B004
    return call is not None and inspect.iscoroutinefunction(call)


async def call_listener(listener: MessageListener, is_async: bool, msgs: list[MessageExt], context: Any,
                        executor: Any) -> Any:  # fmt: skip
    """Run the listener where it belongs: awaited on the loop, or on ``executor``'s threads."""
    if is_async:
        return await listener(msgs, context)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, listener, msgs, context)


def status_of(result: object, success: _S, later: _S) -> _S:
    """A listener's answer as a status of its kind: ``None`` and ``True`` are *success*, ``False`` is *later*."""
    if result is None or result is True:
        return success
    if result is False:
        return later
    return type(success)(result)


async def consume_directly(listener: MessageListener, is_async: bool, msg: MessageExt, context: Any,
                           executor: Any, verdict: Callable[[object], str], *,
                           order: bool) -> ConsumeMessageDirectlyResult:  # fmt: skip
    """CONSUME_MESSAGE_DIRECTLY (``consumeMessageDirectly``): *msg* alone given to the listener; the answer says
    how it went (*verdict* of the listener's answer, or ``CR_THROW_EXCEPTION``) and how long it took."""
    result = ConsumeMessageDirectlyResult(order=order)
    begin = time.monotonic()
    try:
        result.consume_result = verdict(await call_listener(listener, is_async, [msg], context, executor))
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        result.consume_result = "CR_THROW_EXCEPTION"
        result.remark = f"{type(exc).__name__}: {exc}"
    result.auto_commit = getattr(context, "auto_commit", True)
    result.spent_time_mills = round((time.monotonic() - begin) * 1000)
    return result
