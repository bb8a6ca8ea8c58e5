"""The producer: Java's ``DefaultMQProducer`` and ``DefaultMQProducerImpl`` (remoting-protocol §6.1, §11.2).

::

    async with Producer("PG", namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send(new_message("T", b"hello", tags="TagA", keys="order-1"))
        task = producer.send_async(new_message("T", b"later"))      # an asyncio.Task[SendResult]
        await producer.send_oneway(new_message("T", b"fire and forget"))
        await producer.send_batch([new_message("T", b"1"), new_message("T", b"2")])
        await producer.send(msg, selector=SelectMessageQueueByHash(), arg=order_id)   # ordered by key
        reply = await producer.request(new_message("T", b"question"), timeout=3)      # request-reply

How a message goes out (``sendDefaultImpl`` / ``sendKernelImpl``):

1. The topic's route comes from the name server; a topic it does not know is sent through the route of
   ``TBW102`` (at most ``default_topic_queue_nums`` queues a broker), and the broker creates it where its
   ``autoCreateTopicEnable`` allows.
2. A queue is taken round-robin, skipping the broker that just failed and brokers that failed recently
   (:mod:`rocketq.client.fault_strategy`).
3. The message gets a ``UNIQ_KEY`` (its ``msg_id``); a body of ``compress_over`` bytes or more (4 KiB) is
   compressed with ``compress_type`` (zlib by default, level 5; LZ4 and Zstandard as 4.9.4 and 5.x producers
   may: a 4.9.4 consumer reads LZ4, Zstandard only with zstd-jni, older ones neither) and flagged in ``sysFlag``
   (bit 0, the compression type in bits 8–10).
4. SEND_MESSAGE_V2 (SEND_BATCH_MESSAGE for a batch) goes to the broker's master. A synchronous send that
   times out, loses its connection or gets a retryable answer (SYSTEM_BUSY, SYSTEM_ERROR, TOPIC_NOT_EXIST,
   SERVICE_NOT_AVAILABLE, NO_PERMISSION, …) is tried again on another queue, ``retry_times_when_send_failed``
   (2) more times within ``send_timeout``; an asynchronous one is retried only on transport failures; a
   one-way send and a send to a chosen queue are tried once.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from rocketq.client.client_config import ClientConfig
from rocketq.client.client_instance import ClientInstance, get_client_instance
from rocketq.client.errors import (
    BrokerError,
    BrokerUnreachableError,
    ClientError,
    ClientNotRunningError,
    ClientTimeoutError,
    InvalidMessageError,
    NoRouteError,
    RequestTimeoutError,
)
from rocketq.client.fault_strategy import MQFaultStrategy
from rocketq.client.message_queue import MessageQueue
from rocketq.client.queue_selector import MessageQueueSelector
from rocketq.client.route import MASTER_ID, TopicPublishInfo
from rocketq.client.send_result import SendResult, SendStatus
from rocketq.common.codec import encode_batch_body
from rocketq.common.compression import CompressionType, compress
from rocketq.common.javacompat import hashmap_ordered
from rocketq.common.message import (
    COMPRESSED_FLAG,
    PROPERTY_CLUSTER,
    PROPERTY_CORRELATION_ID,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_MESSAGE_REPLY_TO_CLIENT,
    PROPERTY_MESSAGE_TTL,
    PROPERTY_MESSAGE_TYPE,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    REPLY_MESSAGE_FLAG,
    RESERVED_PROPERTY_NAMES,
    TRANSACTION_PREPARED_TYPE,
    Message,
    MessageExt,
)
from rocketq.common.message_id import UniqueIdGenerator
from rocketq.common.mixall import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    CLIENT_INNER_PRODUCER_GROUP,
    REPLY_TOPIC_POSTFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_legal_name,
)
from rocketq.remoting.codes import ResponseCode

__all__ = [
    "DEFAULT_PRODUCER_GROUP", "Producer", "RequestCallback", "SendCallback", "create_reply_message", "new_message",
]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
TOPIC_MAX_LENGTH = 127
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
_NO_WRITABLE_QUEUE = "its route has no queue to write to (no write permission, or no write queues)"
_NOT_ALLOWED_SEND_TOPICS = frozenset({
    "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
})  # fmt: skip
#: Codes on which a synchronous send moves on to another queue (``retryResponseCodes``).
RETRY_RESPONSE_CODES = frozenset({
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY, ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID,
    ResponseCode.NOT_IN_CURRENT_UNIT, ResponseCode.GO_AWAY,
})  # fmt: skip

SendCallback = Callable[[SendResult | None, BaseException | None], Any]
#: ``callback(reply, exception)`` of :meth:`Producer.request_async`.
RequestCallback = Callable[[MessageExt | None, BaseException | None], Any]

_id_generators: dict[str, UniqueIdGenerator] = {}


def _id_generator(ip: str) -> UniqueIdGenerator:
    gen = _id_generators.get(ip)
    if gen is None:
        gen = _id_generators[ip] = UniqueIdGenerator(ip)
    return gen


def new_message(topic: str, body: bytes | str, *, tags: str | None = None, keys: str | Iterable[str] | None = None,
                properties: dict[str, str] | None = None, flag: int = 0, delay_level: int | None = None,
                wait_store_ok: bool = True) -> Message:  # fmt: skip
    """A message as Java's ``new Message(topic, tags, keys, body)`` builds it: ``TAGS``, ``KEYS`` (several keys
    joined by spaces), ``WAIT``, then the user properties and ``DELAY`` (delay level 1–18)."""
    props: dict[str, str] = {}
    if tags:
        props[PROPERTY_TAGS] = tags
    if keys is not None:
        key_text = keys if isinstance(keys, str) else " ".join(k for k in keys if k)
        if key_text:
            props[PROPERTY_KEYS] = key_text
    props[PROPERTY_WAIT_STORE_MSG_OK] = "true" if wait_store_ok else "false"
    for name, value in (properties or {}).items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidMessageError(f"property {name!r}={value!r}: names and values must be strings")
        # Java's putUserProperty: a system name would change what the message is (TAGS, KEYS, WAIT and DELAY have
        # parameters of their own); a blank one is lost on the way.
        if name in RESERVED_PROPERTY_NAMES:
            raise InvalidMessageError(f"The Property<{name}> is used by system, input another please")
        if not name.strip() or not value.strip():
            raise InvalidMessageError(f"property {name!r}={value!r}: the name or value of property can not be "
                                      "null or blank string")  # fmt: skip
        props[name] = value
    if delay_level is not None and delay_level > 0:
        props[PROPERTY_DELAY_TIME_LEVEL] = str(int(delay_level))
    data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    return Message(topic, data, flag, props)


def properties_string(props: dict[str, str]) -> str:
    """``MessageDecoder.messageProperties2String`` over Java's ``HashMap`` of the properties: the order a
    Java client sends them in."""
    ordered = hashmap_ordered(props)
    try:
        return "\x02".join(map("\x01".join, ordered.items()))  # names and values are strings: joins in C
    except TypeError:
        return "\x02".join(f"{k}\x01{v}" for k, v in ordered.items())


def _check_name(kind: str, name: str, max_length: int, end: str = "") -> None:
    """``Validators``' checks of a topic or group name: not blank, not too long, only ``^[%|a-zA-Z0-9_-]+$``."""
    if not name or not name.strip():
        raise InvalidMessageError(f"the specified {kind} is blank")
    if len(name) > max_length:
        raise InvalidMessageError(f"the specified {kind} is longer than {kind} max length {max_length}{end}")
    if not is_legal_name(name):
        raise InvalidMessageError(
            f"the specified {kind}[{name}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )


def check_topic(topic: str) -> None:
    _check_name("topic", topic, TOPIC_MAX_LENGTH)


GROUP_MAX_LENGTH = 255  # Validators.CHARACTER_MAX_LENGTH
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"


def check_group(group: str, kind: str) -> None:
    """``Validators.checkGroup`` and the ``checkConfig`` of a producer or consumer (*kind*): a group the broker would
    otherwise take as it is (a retry topic named after it, in the consumer's case), refused at start."""
    _check_name("group", group, GROUP_MAX_LENGTH, ".")
    default = DEFAULT_PRODUCER_GROUP if kind == "producer" else DEFAULT_CONSUMER_GROUP
    if group == default:  # the group of anyone who named none: a check-back could reach another application
        raise InvalidMessageError(f"{kind}Group can not equal {default}, please specify another one.")


def create_reply_message(request: Message, body: bytes | str) -> Message:
    """The reply to a request of request-reply (Java's ``MessageUtil.createReplyMessage``): to the topic
    ``<cluster>_REPLY_TOPIC`` of the broker cluster that stored the request, marked ``MSG_TYPE=reply`` and carrying
    the request's ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` and ``TTL``. Send it with :meth:`Producer.send`."""
    props = request.properties
    cluster = props.get(PROPERTY_CLUSTER)
    if cluster is None:
        raise InvalidMessageError(f"create reply message fail, requestMessage error, property[{PROPERTY_CLUSTER}] is "
                                  "null (a message consumed from a broker carries it)")  # fmt: skip
    reply = Message(f"{cluster}_{REPLY_TOPIC_POSTFIX}", body.encode("utf-8") if isinstance(body, str) else bytes(body))
    reply.properties[PROPERTY_MESSAGE_TYPE] = REPLY_MESSAGE_FLAG
    for name in (PROPERTY_CORRELATION_ID, PROPERTY_MESSAGE_REPLY_TO_CLIENT, PROPERTY_MESSAGE_TTL):
        value = props.get(name)
        if value is not None:
            reply.properties[name] = value
    return reply


class CommunicationMode(enum.Enum):
    SYNC = "sync"
    ASYNC = "async"
    ONEWAY = "oneway"


class Producer:
    """Sends messages; see the module docstring. Use as ``async with`` or call ``start()``/``shutdown()``."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        instance_name: str | None = None,
        send_timeout: float = 3.0,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        compress_over: int = 4096,
        compress_level: int = 5,
        compress_type: str | CompressionType = CompressionType.ZLIB,
        max_message_size: int = MAX_MESSAGE_SIZE,
        create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC,
        default_topic_queue_nums: int = 4,
        send_latency_fault_enable: bool = True,
        send_smart_msg: bool = True,
        _instance: ClientInstance | None = None,
    ) -> None:
        self.config = ClientConfig.of(config, namesrv_addr=namesrv_addr, instance_name=instance_name)
        self._group = group
        self.send_timeout = send_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.compress_over = compress_over
        self.compress_level = compress_level
        kind = CompressionType.of(compress_type) if isinstance(compress_type, str) else CompressionType(compress_type)
        compress(b"x", kind)  # a codec that is not installed is an error here, not at the first big body
        self.compress_type = kind
        self.max_message_size = max_message_size
        self.create_topic_key = create_topic_key
        self.default_topic_queue_nums = default_topic_queue_nums
        self.send_smart_msg = send_smart_msg
        self.fault_strategy = MQFaultStrategy(enabled=send_latency_fault_enable)
        self.topic_publish_info_table: dict[str, TopicPublishInfo] = {}
        self._instance = _instance
        self._inner = _instance is not None
        self._running = _instance is not None
        self._pending: set[asyncio.Task[Any]] = set()

    # -- ProducerInner ----------------------------------------------------------------------------

    @property
    def group(self) -> str:
        return self._group

    def publish_topics(self) -> list[str]:
        return list(self.topic_publish_info_table)

    def is_publish_topic_need_update(self, topic: str) -> bool:
        info = self.topic_publish_info_table.get(topic)
        return info is not None and not info.ok

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        if topic in self.topic_publish_info_table:
            self.topic_publish_info_table[topic] = info

    def impl_inner(self) -> Producer:
        return self

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None or not self._running:
            raise ClientNotRunningError(f"producer {self._group} is not started")
        return self._instance

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    async def start(self) -> Producer:
        if self._running:
            return self
        check_group(self._group, "producer")
        if self._group != CLIENT_INNER_PRODUCER_GROUP:
            self.config.change_instance_name_to_pid()
        instance = get_client_instance(self.config, producer_group=self._group)
        if not instance.register_producer(self._group, self):
            raise ClientError(f"the producer group {self._group} is already registered in {instance.client_id}")
        try:
            await instance.start()
        except BaseException:
            instance.unregister_producer_local(self._group)
            await instance.release()
            raise
        self._instance = instance
        self._running = True
        await instance.send_heartbeat_to_all_brokers()
        return self

    async def shutdown(self) -> None:
        if not self._running or self._inner:
            return
        if self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
        self._running = False
        instance = self._instance
        assert instance is not None
        instance.unregister_producer_local(self._group)
        with contextlib.suppress(Exception):
            await instance.unregister_client(self._group, None)
        await instance.release()

    async def __aenter__(self) -> Producer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # -- public sending API -----------------------------------------------------------------------

    async def send(self, msg: Message, *, queue: MessageQueue | None = None,
                   selector: MessageQueueSelector | None = None, arg: object = None,
                   timeout: float | None = None) -> SendResult:  # fmt: skip
        """Send and wait for the broker's answer. ``queue`` pins the queue; ``selector(queues, msg, arg)``
        chooses it (ordered messages); otherwise round-robin with retries on other brokers."""
        result = await self._dispatch(msg, CommunicationMode.SYNC, queue, selector, arg, timeout)
        assert result is not None
        return result

    def send_async(self, msg: Message, callback: SendCallback | None = None, *, queue: MessageQueue | None = None,
                   selector: MessageQueueSelector | None = None, arg: object = None,
                   timeout: float | None = None) -> asyncio.Task[SendResult]:  # fmt: skip
        """Start a send and return at once: the returned task gives the ``SendResult`` (or raises);
        ``callback(result, exception)`` is called when it is done."""
        self.instance  # noqa: B018  (raises when not running)
        task: asyncio.Task[SendResult] = asyncio.ensure_future(
            self._dispatch(msg, CommunicationMode.ASYNC, queue, selector, arg, timeout)  # type: ignore[arg-type]
        )
        return self._track(task, callback)

    def _track(self, task: asyncio.Task[_T], callback: Callable[[_T | None, BaseException | None], Any] | None,
               ) -> asyncio.Task[_T]:  # fmt: skip
        """Keep *task* until it ends (shutdown waits for it) and call ``callback(result, exception)`` then."""
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        if callback is not None:

            def done(t: asyncio.Task[_T]) -> None:
                if t.cancelled():
                    callback(None, asyncio.CancelledError())
                elif t.exception() is not None:
                    callback(None, t.exception())
                else:
                    callback(t.result(), None)

            task.add_done_callback(done)
        else:
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # mark the exception retrieved
        return task

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None,
                          selector: MessageQueueSelector | None = None, arg: object = None) -> None:  # fmt: skip
        """Send without waiting for (or getting) an answer; nothing says whether the broker stored it."""
        await self._dispatch(msg, CommunicationMode.ONEWAY, queue, selector, arg, None)

    async def send_batch(self, msgs: Sequence[Message], *, queue: MessageQueue | None = None,
                         timeout: float | None = None) -> SendResult:  # fmt: skip
        """Send several messages of one topic in one request (SEND_BATCH_MESSAGE); they get consecutive
        offsets in one queue. ``msg_id`` of the result lists every message's id, joined by ``,``."""
        batch = self._make_batch(msgs)
        if queue is not None:
            self._check_queue(batch, queue)
            result = await self._send_kernel(batch, queue, CommunicationMode.SYNC, timeout or self.send_timeout,
                                             batch_items=msgs)  # fmt: skip
        else:
            result = await self._send_default(batch, CommunicationMode.SYNC, timeout, batch_items=msgs)
        assert result is not None
        return result

    async def request(self, msg: Message, timeout: float | None = None, *, queue: MessageQueue | None = None,
                      selector: MessageQueueSelector | None = None, arg: object = None) -> MessageExt:  # fmt: skip
        """Send ``msg`` as a request and return its reply (RocketMQ's request-reply, 4.6+): a consumer of the
        topic answers with :func:`create_reply_message` and ``send``, and the broker pushes that reply here.

        ``timeout`` (seconds, default ``send_timeout``) covers the send and the wait. Raises
        :class:`RequestTimeoutError` when the request went out but no reply came in time, the send's own error
        when it did not go out. The message gets ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` (this client's id) and
        ``TTL`` (the timeout in ms)."""
        budget = timeout or self.send_timeout
        begin = time.monotonic()
        correlation_id = await self._prepare_request(msg, budget)
        instance = self.instance
        future: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        instance.reply_futures[correlation_id] = future
        try:
            try:
                await self._dispatch(msg, CommunicationMode.ASYNC, queue, selector, arg,
                                     max(0.001, budget - (time.monotonic() - begin)))  # fmt: skip
            except ClientError as exc:
                exc.add_note(f"send request message to <{msg.topic}> fail")
                raise
            remaining = budget - (time.monotonic() - begin)
            try:
                if remaining <= 0 and not future.done():
                    raise TimeoutError
                return await asyncio.wait_for(future, max(remaining, 0.001))
            except TimeoutError:
                raise RequestTimeoutError(f"send request message to <{msg.topic}> OK, but wait reply message "
                                          f"timeout, {round(budget * 1000)} ms.") from None  # fmt: skip
        finally:
            if instance.reply_futures.get(correlation_id) is future:
                del instance.reply_futures[correlation_id]

    def request_async(self, msg: Message, callback: RequestCallback | None = None, timeout: float | None = None, *,
                      queue: MessageQueue | None = None, selector: MessageQueueSelector | None = None,
                      arg: object = None) -> asyncio.Task[MessageExt]:  # fmt: skip
        """:meth:`request` as a task started at once; ``callback(reply, exception)`` is called when it is done."""
        self.instance  # noqa: B018  (raises when not running)
        return self._track(asyncio.ensure_future(self.request(msg, timeout, queue=queue, selector=selector, arg=arg)),
                           callback)  # fmt: skip

    async def _prepare_request(self, msg: Message, timeout: float) -> str:
        """``prepareSendRequest``: the request's properties, and, for a topic not routed yet, its route and a
        heartbeat to every broker (the broker that takes the reply must know this client's connection)."""
        self.check_message(msg)
        correlation_id = str(uuid.uuid4())  # CorrelationIdUtil: a random UUID
        instance = self.instance
        msg.properties[PROPERTY_CORRELATION_ID] = correlation_id
        msg.properties[PROPERTY_MESSAGE_REPLY_TO_CLIENT] = instance.client_id
        msg.properties[PROPERTY_MESSAGE_TTL] = str(round(timeout * 1000))
        if msg.topic not in instance.topic_route_table:
            await self._find_publish_info(msg.topic)
            await instance.send_heartbeat_to_all_brokers()
        return correlation_id

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a message to ``topic`` can go to."""
        info = await self._find_publish_info(topic)
        return list(info.message_queues)

    async def create_topic(self, topic: str, queue_nums: int = 4, *, key: str | None = None, perm: int = 6,
                           order: bool = False, wait: float = 10.0) -> None:  # fmt: skip
        """Create ``topic`` on every master broker that hosts ``key`` (``TBW102``) with UPDATE_AND_CREATE_TOPIC
        (Java's ``MQAdmin.createTopic``), then wait up to ``wait`` seconds for the name server to route it."""
        check_topic(topic)
        instance = self.instance
        route = await instance.api.get_topic_route(key or self.create_topic_key)
        if route is None:
            raise NoRouteError(key or self.create_topic_key, "no broker to create the topic on")
        masters = [b.broker_addrs[MASTER_ID] for b in route.broker_datas if MASTER_ID in b.broker_addrs]
        if not masters:
            raise NoRouteError(key or self.create_topic_key, "no master broker to create the topic on")
        for addr in masters:
            await instance.api.create_topic(addr, topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums,
                                            perm=perm, order=order)  # fmt: skip
        deadline = time.monotonic() + wait
        while True:
            new_route = await instance.api.get_topic_route(topic)
            if new_route is not None and sum(q.write_queue_nums for q in new_route.queue_datas) >= queue_nums:
                break
            if time.monotonic() >= deadline:
                raise ClientTimeoutError(f"topic {topic} was created but has no route after {wait:.0f} s")
            await asyncio.sleep(0.1)
        self.topic_publish_info_table.pop(topic, None)

    # -- implementation ---------------------------------------------------------------------------

    def check_message(self, msg: Message, *, topic_checked: bool = False) -> None:
        """Raise :class:`InvalidMessageError` for a message this producer would refuse to send (topic, body,
        size), before anything is sent: what a send checks first."""
        if not topic_checked:
            check_topic(msg.topic)
            if msg.topic in _NOT_ALLOWED_SEND_TOPICS:
                raise InvalidMessageError(f"sending a message to topic {msg.topic} is forbidden")
        if msg.body is None:
            raise InvalidMessageError("the message body is null")
        if not isinstance(msg.body, (bytes, bytearray, memoryview)):
            raise InvalidMessageError(f"the message body must be bytes, not {type(msg.body).__name__} (encode a "
                                      "str first, e.g. body.encode())")  # fmt: skip
        if len(msg.body) == 0:
            raise InvalidMessageError("the message body length is zero")
        if len(msg.body) > self.max_message_size:
            raise InvalidMessageError(f"the message body size over max value, MAX: {self.max_message_size}")

    def _check_queue(self, msg: Message, queue: MessageQueue) -> None:
        if queue.topic != msg.topic:
            raise InvalidMessageError(f"message queue {queue} is not of the message's topic {msg.topic}")

    def _make_batch(self, msgs: Sequence[Message]) -> Message:
        if not msgs:
            raise InvalidMessageError("a batch needs at least one message")
        topic = msgs[0].topic
        self.check_message(msgs[0])
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise InvalidMessageError("retry group topic is not supported for batching")
        without_id: list[Message] = []
        max_size = self.max_message_size
        for m in msgs:
            props = m.properties
            if m.topic != topic:
                raise InvalidMessageError("the topic of the messages in one batch should be the same")
            if PROPERTY_DELAY_TIME_LEVEL in props and int(props[PROPERTY_DELAY_TIME_LEVEL] or 0) > 0:
                raise InvalidMessageError("TimeDelayLevel is not supported for batching")
            body = m.body
            if not body or len(body) > max_size or not isinstance(body, (bytes, bytearray, memoryview)):
                self.check_message(m, topic_checked=True)  # says which
            if PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX not in props:
                without_id.append(m)
        if without_id:
            ids = _id_generator(self.config.ip()).next_ids(len(without_id))
            for m, uniq in zip(without_id, ids, strict=True):
                m.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
        body = _encode_batch(msgs)
        if len(body) > self.max_message_size:
            raise InvalidMessageError(f"the batch body size {len(body)} is over the max value {self.max_message_size}")
        wait = msgs[0].properties.get(PROPERTY_WAIT_STORE_MSG_OK, "true")
        return Message(topic, body, 0, {PROPERTY_WAIT_STORE_MSG_OK: wait})

    async def _dispatch(
        self, msg: Message, mode: CommunicationMode, queue: MessageQueue | None,
        selector: MessageQueueSelector | None, arg: object, timeout: float | None,
    ) -> SendResult | None:  # fmt: skip
        self.instance  # noqa: B018
        self.check_message(msg)
        budget = timeout or self.send_timeout
        if queue is not None:
            self._check_queue(msg, queue)
            return await self._send_kernel(msg, queue, mode, budget)
        if selector is not None:
            begin = time.monotonic()
            info = await self._find_publish_info(msg.topic)
            if not info.ok:
                raise NoRouteError(msg.topic, _NO_WRITABLE_QUEUE)
            try:
                chosen = selector(list(info.message_queues), msg, arg)
            except Exception as e:  # the user's code: said as the client's error, with its cause
                raise ClientError(f"the selector raised {e!r} choosing a queue for topic {msg.topic}") from e
            if chosen is None:
                raise ClientError(f"the selector chose no queue for topic {msg.topic}")
            remaining = budget - (time.monotonic() - begin)
            if remaining <= 0:
                raise ClientTimeoutError(f"send to {msg.topic} timed out choosing a queue")
            return await self._send_kernel(msg, chosen, mode, remaining)
        return await self._send_default(msg, mode, timeout)

    async def _find_publish_info(self, topic: str) -> TopicPublishInfo:
        """``tryToFindTopicPublishInfo``: the topic's route, else the stand-in route of ``TBW102``."""
        table = self.topic_publish_info_table
        info = table.get(topic)
        if info is None or not info.ok:
            table.setdefault(topic, TopicPublishInfo())
            await self.instance.update_topic_route(topic)
            info = table[topic]
        if info.route is not None or info.ok:
            return info
        await self.instance.update_topic_route(topic, default_topic_queue_nums=self.default_topic_queue_nums)
        info = table[topic]
        if not info.ok:
            raise NoRouteError(topic, f"the topic does not exist, and no broker creates topics on first send (their "
                                      f"autoCreateTopicEnable is off: no route for {self.create_topic_key}); create "
                                      "it first, e.g. rocketq admin updateTopic")  # fmt: skip
        return info

    async def _send_default(self, msg: Message, mode: CommunicationMode, timeout: float | None,
                            batch_items: Sequence[Message] | None = None) -> SendResult | None:  # fmt: skip
        budget = timeout or self.send_timeout
        begin = time.monotonic()
        info = await self._find_publish_info(msg.topic)
        if not info.ok:  # routed, but to no queue a message can go to
            raise NoRouteError(msg.topic, _NO_WRITABLE_QUEUE)
        if mode is CommunicationMode.SYNC:
            times_total = 1 + self.retry_times_when_send_failed
        elif mode is CommunicationMode.ASYNC:
            times_total = 1 + self.retry_times_when_send_async_failed
        else:
            times_total = 1
        last_broker: str | None = None
        last_error: ClientError | None = None
        brokers_sent: list[str] = []
        result: SendResult | None = None
        for _ in range(times_total):
            mq = self.fault_strategy.select_one_message_queue(info, last_broker)
            last_broker = mq.broker_name
            remaining = budget - (time.monotonic() - begin)
            if remaining <= 0:
                break
            brokers_sent.append(mq.broker_name)
            start = time.monotonic()
            try:
                result = await self._send_kernel(msg, mq, mode, remaining, batch_items=batch_items)
            except (ClientTimeoutError, BrokerUnreachableError) as exc:
                self.fault_strategy.update_fault_item(mq.broker_name, time.monotonic() - start, True)
                last_error = exc
                continue
            except BrokerError as exc:
                self.fault_strategy.update_fault_item(mq.broker_name, time.monotonic() - start, True)
                if mode is not CommunicationMode.ASYNC and exc.code in RETRY_RESPONSE_CODES:
                    last_error = exc
                    continue
                raise
            self.fault_strategy.update_fault_item(mq.broker_name, time.monotonic() - start, False)
            if (
                mode is CommunicationMode.SYNC
                and result is not None
                and result.status is not SendStatus.SEND_OK
                and self.retry_another_broker_when_not_store_ok
            ):
                continue
            return result
        if result is not None:
            return result
        cost = (time.monotonic() - begin) * 1000
        if last_error is None:
            raise ClientTimeoutError(f"send to topic {msg.topic} timed out after {cost:.0f} ms")
        last_error.add_note(
            f"sent {len(brokers_sent)} time(s) to topic {msg.topic} via brokers {brokers_sent}, still failed, "
            f"cost {cost:.0f} ms"
        )
        raise last_error

    async def _send_kernel(self, msg: Message, mq: MessageQueue, mode: CommunicationMode, timeout: float,
                           batch_items: Sequence[Message] | None = None) -> SendResult | None:  # fmt: skip
        instance = self.instance
        addr = instance.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            await instance.update_topic_route(mq.topic)
            addr = instance.find_broker_address_in_publish(mq.broker_name)
        if addr is None:
            raise BrokerUnreachableError(f"the broker {mq.broker_name} does not exist (no master address)")
        props = msg.properties
        if batch_items is None:
            uniq_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if uniq_id is None:
                uniq_id = props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = _id_generator(self.config.ip()).next_id()
        else:
            uniq_id = ",".join(m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "") for m in batch_items)
        body = msg.body
        sys_flag = 0
        if batch_items is None and len(body) >= self.compress_over:
            body = compress(body, self.compress_type, self.compress_level)
            sys_flag |= COMPRESSED_FLAG | self.compress_type.flag
        if props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
            sys_flag |= TRANSACTION_PREPARED_TYPE
        header: dict[str, object] = {
            "producerGroup": self._group,
            "topic": msg.topic,
            "defaultTopic": self.create_topic_key,
            "defaultTopicQueueNums": self.default_topic_queue_nums,
            "queueId": mq.queue_id,
            "sysFlag": sys_flag,
            "bornTimestamp": int(time.time() * 1000),
            "flag": msg.flag,
            "properties": properties_string(props),
            "reconsumeTimes": 0,
            "unitMode": False,
            "batch": batch_items is not None,
        }
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            reconsume = props.pop(PROPERTY_RECONSUME_TIME, None)
            if reconsume is not None:
                header["reconsumeTimes"] = int(reconsume)
            max_reconsume = props.pop(PROPERTY_MAX_RECONSUME_TIMES, None)
            if max_reconsume is not None:
                header["maxReconsumeTimes"] = int(max_reconsume)
        oneway = mode is CommunicationMode.ONEWAY
        request = instance.api.send_request(header, body, batch=batch_items is not None, smart=self.send_smart_msg,
                                            oneway=oneway,
                                            reply=props.get(PROPERTY_MESSAGE_TYPE) == REPLY_MESSAGE_FLAG)  # fmt: skip
        if oneway:
            await instance.api.invoke_oneway(addr, request)
            return None
        response = await instance.api.invoke(addr, request, timeout)
        return instance.api.process_send_response(response, addr, mq.broker_name, msg.topic, uniq_id)


def _encode_batch(msgs: Sequence[Message]) -> bytes:
    """The batch body (``MessageDecoder.encodeMessages``) with each message's properties in Java's order."""
    return encode_batch_body(msgs, java_order=True)
