"""The client for code without an event loop: blocking producers and consumers over the asyncio ones.

::

    from rocketq.client.blocking import BlockingProducer, BlockingLitePullConsumer
    from rocketq.client import new_message

    with BlockingProducer("PG", "127.0.0.1:9876") as producer:
        print(producer.send(new_message("T", b"hello", tags="TagA")).msg_id)

    with BlockingLitePullConsumer("CG", "127.0.0.1:9876", subscribe={"T": "*"}) as consumer:
        for msg in consumer.iter_messages(idle_timeout=5):
            print(msg.body)

Every blocking client runs its asyncio twin on one shared event loop in a background thread (started
with the first client, stopped after the last one shuts down), so blocking clients get their client
instances exactly as asyncio ones do (one of its own for each producer and clustering consumer). Calls
block the calling thread until the operation is done and raise the same exceptions
(:mod:`rocketq.client.errors`). A push consumer's plain-function listener runs on the consumer's worker
threads. Calling a blocking method from the loop's
own thread (inside an ``async`` listener) would deadlock and raises ``RuntimeError`` instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Awaitable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from rocketq.client.heartbeat import EXPRESSION_TYPE_TAG
from rocketq.client.listener import MessageListener
from rocketq.client.lite_pull_consumer import LitePullConsumer
from rocketq.client.message_queue import MessageQueue
from rocketq.client.producer import Producer, RequestCallback, SendCallback
from rocketq.client.pull_consumer import PullConsumer
from rocketq.client.pull_result import PullResult
from rocketq.client.push_consumer import PushConsumer
from rocketq.client.queue_selector import MessageQueueSelector
from rocketq.client.send_result import SendResult
from rocketq.common.message import Message, MessageExt

__all__ = ["BlockingLitePullConsumer", "BlockingProducer", "BlockingPullConsumer", "BlockingPushConsumer"]

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread, shared by every blocking client while any is alive."""

    _guard = threading.Lock()
    _current: _LoopThread | None = None
    _refs = 0

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name="rocketq-client-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    @classmethod
    def acquire(cls) -> _LoopThread:
        with cls._guard:
            if cls._current is None:
                cls._current = _LoopThread()
            cls._refs += 1
            return cls._current

    @classmethod
    def release(cls) -> None:
        with cls._guard:
            cls._refs -= 1
            if cls._refs > 0 or cls._current is None:
                return
            current, cls._current = cls._current, None
        current.loop.call_soon_threadsafe(current.loop.stop)
        current.thread.join(timeout=10)

    def submit(self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    def run(self, coro: Awaitable[T]) -> T:
        if threading.current_thread() is self.thread:
            close = getattr(coro, "close", None)
            if close is not None:
                close()
            raise RuntimeError("a blocking rocketq call was made on the client's event loop thread; "
                               "use the asyncio API there")  # fmt: skip
        future = self.submit(coro)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            raise


class _Blocking:
    """Lifecycle shared by the blocking clients: ``start``/``shutdown`` and the ``with`` statement."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._loop: _LoopThread | None = None

    def _run(self, coro: Awaitable[T]) -> T:
        if self._loop is None:
            close = getattr(coro, "close", None)
            if close is not None:
                close()
            raise RuntimeError(f"{type(self).__name__} is not started: call start() or use 'with'")
        return self._loop.run(coro)

    def start(self) -> Any:
        if self._loop is not None:
            return self
        self._loop = _LoopThread.acquire()
        try:
            self._loop.run(self._inner.start())
        except BaseException:
            self._loop = None
            _LoopThread.release()
            raise
        return self

    def shutdown(self) -> None:
        if self._loop is None:
            return
        try:
            self._loop.run(self._inner.shutdown())
        finally:
            self._loop = None
            _LoopThread.release()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    @property
    def client_id(self) -> str:
        return str(self._inner.instance.client_id)


class BlockingProducer(_Blocking):
    """A blocking ``Producer``; takes the same arguments."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **options: Any) -> None:
        super().__init__(Producer(group, namesrv_addr, **options))
        self.producer: Producer = self._inner

    def start(self) -> BlockingProducer:
        return super().start()  # type: ignore[no-any-return]

    def __enter__(self) -> BlockingProducer:
        return self.start()

    def send(self, msg: Message, *, queue: MessageQueue | None = None, selector: MessageQueueSelector | None = None,
             arg: object = None, timeout: float | None = None) -> SendResult:  # fmt: skip
        return self._run(self.producer.send(msg, queue=queue, selector=selector, arg=arg, timeout=timeout))

    def send_async(self, msg: Message, callback: SendCallback | None = None, *, queue: MessageQueue | None = None,
                   selector: MessageQueueSelector | None = None, arg: object = None,
                   timeout: float | None = None) -> concurrent.futures.Future[SendResult]:  # fmt: skip
        """Start a send and return a ``concurrent.futures.Future``; ``callback(result, exception)`` runs on
        the client's loop thread when it is done."""
        if self._loop is None:
            raise RuntimeError("BlockingProducer is not started: call start() or use 'with'")

        async def go() -> SendResult:
            return await self.producer.send_async(msg, callback, queue=queue, selector=selector, arg=arg,
                                                  timeout=timeout)  # fmt: skip

        return self._loop.submit(go())

    def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None,
                    selector: MessageQueueSelector | None = None, arg: object = None) -> None:  # fmt: skip
        self._run(self.producer.send_oneway(msg, queue=queue, selector=selector, arg=arg))

    def send_batch(self, msgs: Sequence[Message], *, queue: MessageQueue | None = None,
                   timeout: float | None = None) -> SendResult:  # fmt: skip
        return self._run(self.producer.send_batch(msgs, queue=queue, timeout=timeout))

    def request(self, msg: Message, timeout: float | None = None, *, queue: MessageQueue | None = None,
                selector: MessageQueueSelector | None = None, arg: object = None) -> MessageExt:  # fmt: skip
        """Send ``msg`` as a request and return its reply (see ``Producer.request``)."""
        return self._run(self.producer.request(msg, timeout, queue=queue, selector=selector, arg=arg))

    def request_async(self, msg: Message, callback: RequestCallback | None = None, timeout: float | None = None, *,
                      queue: MessageQueue | None = None, selector: MessageQueueSelector | None = None,
                      arg: object = None) -> concurrent.futures.Future[MessageExt]:  # fmt: skip
        """Start a request and return a ``concurrent.futures.Future`` of its reply; ``callback(reply, exception)``
        runs on the client's loop thread when it is done."""
        if self._loop is None:
            raise RuntimeError("BlockingProducer is not started: call start() or use 'with'")

        async def go() -> MessageExt:
            return await self.producer.request_async(msg, callback, timeout, queue=queue, selector=selector, arg=arg)

        return self._loop.submit(go())

    def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self.producer.fetch_publish_message_queues(topic))

    def create_topic(self, topic: str, queue_nums: int = 4, **options: Any) -> None:
        self._run(self.producer.create_topic(topic, queue_nums, **options))


#: ``subscribe=`` of the blocking consumers: topic → tag expression, or → (expression, expression type).
Subscriptions = Mapping[str, str | tuple[str, str]]


def _subscribe_all(consumer: PushConsumer | LitePullConsumer, subscriptions: Subscriptions | None) -> None:
    for topic, expression in (subscriptions or {}).items():
        if isinstance(expression, tuple):
            consumer.subscribe(topic, *expression)
        else:
            consumer.subscribe(topic, expression)


class BlockingPushConsumer(_Blocking):
    """A blocking ``PushConsumer``: ``start()`` returns once consuming began; the listener runs in the
    background until ``shutdown()``."""

    def __init__(self, group: str, namesrv_addr: str | None = None, *, listener: MessageListener | None = None,
                 subscribe: Subscriptions | None = None, **options: Any) -> None:  # fmt: skip
        super().__init__(PushConsumer(group, namesrv_addr, listener=listener, **options))
        self.consumer: PushConsumer = self._inner
        _subscribe_all(self.consumer, subscribe)

    def start(self) -> BlockingPushConsumer:
        return super().start()  # type: ignore[no-any-return]

    def __enter__(self) -> BlockingPushConsumer:
        return self.start()

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = EXPRESSION_TYPE_TAG) -> None:
        """Subscribe to *topic*: tags (``*``, ``TagA || TagB``) or, with ``expression_type="SQL92"``, a selector."""
        if self._loop is None:
            self.consumer.subscribe(topic, expression, expression_type)
        else:
            self._loop.loop.call_soon_threadsafe(self.consumer.subscribe, topic, expression, expression_type)

    def register_message_listener(self, listener: MessageListener, *, orderly: bool | None = None) -> None:
        self.consumer.register_message_listener(listener, orderly=orderly)

    def suspend(self) -> None:
        self.consumer.suspend()

    def resume(self) -> None:
        self.consumer.resume()

    def assignment(self) -> set[MessageQueue]:
        async def get() -> set[MessageQueue]:
            return self.consumer.assignment()

        return self._run(get())

    @property
    def stats(self) -> dict[str, int]:
        return dict(self.consumer.stats)


class BlockingPullConsumer(_Blocking):
    """A blocking ``PullConsumer``."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **options: Any) -> None:
        super().__init__(PullConsumer(group, namesrv_addr, **options))
        self.consumer: PullConsumer = self._inner

    def start(self) -> BlockingPullConsumer:
        return super().start()  # type: ignore[no-any-return]

    def __enter__(self) -> BlockingPullConsumer:
        return self.start()

    def fetch_subscribe_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self.consumer.fetch_subscribe_message_queues(topic))

    def pull(self, mq: MessageQueue, expression: str | None = "*", offset: int = 0, max_nums: int = 32,
             **options: Any) -> PullResult:  # fmt: skip
        return self._run(self.consumer.pull(mq, expression, offset, max_nums, **options))

    def pull_block_if_not_found(self, mq: MessageQueue, expression: str | None = "*", offset: int = 0,
                                max_nums: int = 32, **options: Any) -> PullResult:  # fmt: skip
        return self._run(self.consumer.pull_block_if_not_found(mq, expression, offset, max_nums, **options))

    def min_offset(self, mq: MessageQueue) -> int:
        return self._run(self.consumer.min_offset(mq))

    def max_offset(self, mq: MessageQueue) -> int:
        return self._run(self.consumer.max_offset(mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(self.consumer.search_offset(mq, timestamp_ms))

    def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        return self._run(self.consumer.fetch_consume_offset(mq, from_store))

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        self._run(self.consumer.update_consume_offset(mq, offset))

    def view_message(self, offset_msg_id: str) -> MessageExt:
        return self._run(self.consumer.view_message(offset_msg_id))

    def query_message(self, topic: str, key: str, max_num: int = 32, begin: int = 0,
                      end: int | None = None) -> list[MessageExt]:  # fmt: skip
        return self._run(self.consumer.query_message(topic, key, max_num, begin, end))

    def query_message_by_unique_key(self, topic: str, uniq_key: str) -> list[MessageExt]:
        return self._run(self.consumer.query_message_by_unique_key(topic, uniq_key))


class BlockingLitePullConsumer(_Blocking):
    """A blocking ``LitePullConsumer``; iterating over it yields messages until it is shut down."""

    def __init__(self, group: str, namesrv_addr: str | None = None, *, subscribe: Subscriptions | None = None,
                 assign: Iterable[MessageQueue] | None = None, **options: Any) -> None:  # fmt: skip
        super().__init__(LitePullConsumer(group, namesrv_addr, **options))
        self.consumer: LitePullConsumer = self._inner
        _subscribe_all(self.consumer, subscribe)
        if assign is not None:
            self.consumer.assign(assign)

    def start(self) -> BlockingLitePullConsumer:
        return super().start()  # type: ignore[no-any-return]

    def __enter__(self) -> BlockingLitePullConsumer:
        return self.start()

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = EXPRESSION_TYPE_TAG) -> None:
        """Subscribe to *topic*: tags (``*``, ``TagA || TagB``) or, with ``expression_type="SQL92"``, a selector."""
        if self._loop is None:
            self.consumer.subscribe(topic, expression, expression_type)
        else:
            self._loop.loop.call_soon_threadsafe(self.consumer.subscribe, topic, expression, expression_type)

    def assign(self, mqs: Iterable[MessageQueue]) -> None:
        wanted = list(mqs)
        if self._loop is None:
            self.consumer.assign(wanted)
        else:
            self._loop.loop.call_soon_threadsafe(self.consumer.assign, wanted)

    def poll(self, timeout: float | None = None, max_messages: int | None = None) -> list[MessageExt]:
        return self._run(self.consumer.poll(timeout, max_messages))

    def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        self._run(self.consumer.commit(offsets))

    def committed(self, mq: MessageQueue) -> int:
        return self._run(self.consumer.committed(mq))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._run(self.consumer.seek(mq, offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        self._run(self.consumer.seek_to_begin(mq))

    def seek_to_end(self, mq: MessageQueue) -> None:
        self._run(self.consumer.seek_to_end(mq))

    def assignment(self) -> set[MessageQueue]:
        async def get() -> set[MessageQueue]:
            return self.consumer.assignment()

        return self._run(get())

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._run(self.consumer.fetch_message_queues(topic))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._run(self.consumer.offset_for_timestamp(mq, timestamp_ms))

    def iter_messages(self, idle_timeout: float | None = None, max_messages: int | None = None,
                      poll_timeout: float = 1.0) -> Iterator[MessageExt]:  # fmt: skip
        """Messages one by one; stops after ``max_messages`` or when none came for ``idle_timeout`` seconds
        (``None``: never). A message counts as consumed once polled: polls never ask for more than
        ``max_messages`` in all, but leaving the loop early leaves the rest of the current poll consumed."""
        count = 0
        last = time.monotonic()
        while self._loop is not None:
            want = None if max_messages is None else max_messages - count
            if want is not None and want <= 0:
                return
            msgs = self.poll(poll_timeout, want)
            if not msgs:
                if idle_timeout is not None and time.monotonic() - last >= idle_timeout:
                    return
                continue
            last = time.monotonic()
            for msg in msgs:
                count += 1
                yield msg

    def __iter__(self) -> Iterator[MessageExt]:
        return self.iter_messages()
