"""RocketMQ 5's ``MessagingService`` over gRPC, inside the broker (5.x's proxy in "local" mode).

Each call becomes the broker's own work, as 5.x's ``LocalMessageService`` makes it:

- ``QueryRoute``: the topic's queues on this broker (``RouteActivity``: read-only, write-only and read-write
  queues by the topic's permission), reached at the address the client used;
- ``SendMessage``: the message's properties as the proxy builds them (``SendMessageActivity``: tag, keys, the
  client's message id as ``UNIQ_KEY``, the message group as ``__SHARDINGKEY``, the delivery time as
  ``TIMER_DELIVER_MS``, transactions as half messages), then a send through the broker's send processor: every
  check and every kind of message of a remoting send applies;
- ``ReceiveMessage`` / ``AckMessage`` / ``ChangeInvisibleDuration`` / ``ForwardMessageToDeadLetterQueue``: POP
  consumption (:mod:`rocketq.proxy.pop`), with long polling;
- ``EndTransaction``: the broker's end-transaction processor on the half message the send made;
- ``Telemetry``: the client's settings answered with the server's (retry policy, body size limit, batch size);
- ``Heartbeat``, ``QueryAssignment``, ``NotifyClientTermination``.

The clients are in the broker's producer and consumer tables (``consumerConnection``, ``producerConnection``);
the broker's transaction check reaches a gRPC producer on its telemetry stream
(``RecoverOrphanedTransactionCommand``), which answers with ``EndTransaction``.

Not served (the client gets gRPC's UNIMPLEMENTED): the offset-based ``PullMessage`` family, ``RecallMessage``,
lite topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rocketq.broker.consumer_manager import ClientChannelInfo
from rocketq.broker.expression_message_filter import ExpressionMessageFilter
from rocketq.broker.topic_validator import validate_topic
from rocketq.common.codec import decode_record
from rocketq.common.compression import decompress
from rocketq.common.heartbeat import build_subscription_data
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import (
    COMPRESSED_FLAG,
    KEY_SEPARATOR,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RESERVED_PROPERTY_NAMES,
    TRANSACTION_PREPARED_TYPE,
    MessageExt,
    properties_to_string,
)
from rocketq.common.message_id import decode_offset_message_id
from rocketq.common.mixall import CID_RMQ_SYS_PREFIX, PERM_WRITE
from rocketq.proxy.pop import AckStatus, PopService
from rocketq.proxy.schema import SERVICE, pb
from rocketq.remoting.codes import LanguageCode, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request
from rocketq.remoting.errors import RemotingError
from rocketq.store.message_filter import TagFilter

log = logging.getLogger(__name__)

__all__ = ["GrpcMessagingService", "GrpcProxyError"]

# Property names a user may not set (MessageConst.STRING_HASH_SET: 4.9.4's and 5.x's additions) and that are not
# user properties on the way out.
SYSTEM_PROPERTIES = RESERVED_PROPERTY_NAMES | frozenset({
    "1ST_POP_TIME", "BORN_TIMESTAMP", "DLQ_ORIGIN_MESSAGE_ID", "DLQ_ORIGIN_TOPIC", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "POP_CK", "POP_CK_OFFSET", "TIMER_DELAY_LEVEL", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS",
    "TIMER_DEL_UNIQKEY", "TIMER_DEQUEUE_MS", "TIMER_ENQUEUE_MS", "TIMER_OUT_MS", "TIMER_ROLL_TIMES",
    "TRAN_PREPARED_QUEUE_OFFSET", "__BORNHOST", "__CRC32#",
})  # fmt: skip
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
# What a received message's system properties carry besides SYSTEM_PROPERTIES: not user properties either.
_MAPPED = SYSTEM_PROPERTIES | {PROPERTY_SHARDING_KEY, PROPERTY_TRACE_CONTEXT, PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS}

# ProxyConfig's defaults.
MAX_MESSAGE_SIZE = 4 * 1024 * 1024
MAX_USER_PROPERTIES = 128
MAX_USER_PROPERTY_SIZE = 16 * 1024
MAX_MESSAGE_GROUP_SIZE = 64
PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF = (10, 1000, 2)  # initial ms, max ms, multiplier
MIN_LONG_POLLING_MS = 5_000
MAX_LONG_POLLING_MS = 20_000
RECEIVE_BATCH_SIZE = 32
MIN_INVISIBLE_MS = 10_000
MAX_DELAY_MS = 24 * 3600 * 1000  # ProxyConfig.maxDelayTimeMills
MAX_TRANSACTION_RECOVERY_S = 3600  # ProxyConfig.maxTransactionRecoverySecond
DEFAULT_INVISIBLE_MS = 60_000  # ProxyConfig.defaultInvisibleTimeMills: a receive whose handles the proxy renews
#: The proxy's renewal of handles received with auto_renew (DefaultReceiptHandleManager): every
#: renewSchedulePeriodMillis, the handles within renewAheadTimeMillis of visibility get DEFAULT_INVISIBLE_MS
#: more, while their client is connected, for at most renewMaxTimeMillis.
RENEW_PERIOD_S = 5.0
RENEW_AHEAD_MS = 10_000
RENEW_MAX_MS = 3 * 3600 * 1000
MAX_INVISIBLE_MS = 12 * 3600 * 1000
#: What a long-polling receive leaves of the client's deadline for its answer to get there.
POLLING_RESERVE_MS = 300
#: How often a long-polling receive looks again without being woken: for messages whose invisible time ran out.
POLL_STEP_S = 0.5
#: The message types a topic without a ``message.type`` attribute takes: any, as a 4.x topic does.
_ANY_TYPE = (pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION)
_TOPIC_TYPES = {"NORMAL": (pb.MessageType.NORMAL,), "FIFO": (pb.MessageType.FIFO,),
                "DELAY": (pb.MessageType.DELAY,), "TRANSACTION": (pb.MessageType.TRANSACTION,), "MIXED": _ANY_TYPE}
# The remoting answer of a send, as a status of the gRPC answer (convertToSendMessageResponse, and the errors).
_SEND_CODES = {
    ResponseCode.FLUSH_DISK_TIMEOUT: pb.Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: pb.Code.HA_NOT_AVAILABLE,
    ResponseCode.TOPIC_NOT_EXIST: pb.Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: pb.Code.FORBIDDEN,
    ResponseCode.SYSTEM_BUSY: pb.Code.TOO_MANY_REQUESTS,
    ResponseCode.MESSAGE_ILLEGAL: pb.Code.BAD_REQUEST,
    ResponseCode.INVALID_PARAMETER: pb.Code.BAD_REQUEST,
    ResponseCode.SERVICE_NOT_AVAILABLE: pb.Code.INTERNAL_SERVER_ERROR,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.Code.CONSUMER_GROUP_NOT_FOUND,
}  # fmt: skip
_TRANSACTION_COMMIT = 8  # MessageSysFlag.TRANSACTION_COMMIT_TYPE
_TRANSACTION_ROLLBACK = 12  # MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


@dataclass(slots=True)
class _Renewal:
    """A handle received with auto_renew: its group and topic, the handle now valid, the client, since when, and
    when the message becomes visible again unless renewed."""

    group: str
    topic: str
    handle: str
    client_id: str
    started_ms: int
    visible_at: int


class GrpcProxyError(Exception):
    """A call refused with a status of the protocol (``GrpcProxyException``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _status(code: int, message: str | None = None) -> Any:
    return pb.Status(code=code, message=message if message is not None else pb.Code.Name(code))


def _ms(ts: Any) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def _set_ms(ts: Any, ms: int) -> None:
    ts.seconds, ts.nanos = divmod(ms, 1000)
    ts.nanos *= 1_000_000


def _has_control_character(text: str) -> bool:
    """Guava's ``CharMatcher.javaIsoControl`` (the proxy's check): U+0000-001F and U+007F-009F, tab and newlines
    among them."""
    return any(ord(c) < 32 or 127 <= ord(c) <= 159 for c in text)


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash``: which of *buckets* a message group's hash goes to, as the proxy
    chooses a FIFO message's queue (a linear congruential sequence, kept to Java's 64-bit arithmetic)."""
    state = value & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        step = ((state >> 33) + 1) / 2147483648.0
        nxt = int((candidate + 1) / step)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


@dataclass
class _Peer:
    """The gRPC client as the broker's processors see a connection (address, per-connection attributes)."""

    remote_address: str
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class _Client:
    client_id: str
    client_type: int = 0
    group: str = ""
    settings: Any = None
    last_seen: float = 0.0
    outbox: asyncio.Queue[Any] | None = None  # commands for its telemetry stream
    channel: _GrpcChannel | None = None  # how the broker's producer and consumer tables hold it
    address: str = "127.0.0.1:0"
    language: str = ""  # x-mq-language: JAVA, PYTHON, ...


class _GrpcChannel:
    """A gRPC client where the broker's producer and consumer tables keep a connection: the admin tools list it,
    and the transaction check reaches a producer through it (CHECK_TRANSACTION_STATE becomes the telemetry
    stream's ``RecoverOrphanedTransactionCommand``, as 5.x's ``GrpcClientChannel`` turns it)."""

    def __init__(self, service: GrpcMessagingService, client: _Client) -> None:
        self.service = service
        self.client = client
        self.remote_address = client.address
        self.attributes: dict[str, Any] = {}
        self.closed = False

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self.service.recover_orphaned(self.client, request)

    async def invoke(self, request: RemotingCommand, *args: Any, **kwargs: Any) -> RemotingCommand:
        raise RemotingError(f"{self.client.client_id} is a gRPC client: it answers no remoting request")

    def close(self) -> None:
        self.closed = True


@dataclass(slots=True)
class _HalfMessage:
    """What ``EndTransaction`` needs of a half message this endpoint stored (``TransactionData``)."""

    topic: str
    queue_offset: int
    commit_log_offset: int
    offset_msg_id: str
    expires: float


class GrpcMessagingService:
    """The service; :meth:`start` serves it on a port of the broker's host."""

    def __init__(self, controller: Any) -> None:
        self.controller = controller
        self.pop = PopService(controller.store, controller.broker_config.broker_name)
        self.server: Any = None
        self.port = 0
        self.clients: dict[str, _Client] = {}
        self._send_turns: dict[str, int] = {}  # by topic: the next send's queue, in turn
        self._receive_turns: dict[tuple[str, str], int] = {}  # by group and topic: the queue a receive starts at
        self._half: dict[str, _HalfMessage] = {}  # transaction id -> its half message
        self._stopping = asyncio.Event()
        # Long-polling receives by topic, woken by the broker's arrival listener (from whichever thread dispatched).
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        # Handles received with auto_renew, by the handle the client holds: the one now valid, renewed ahead.
        self._renewing: dict[str, _Renewal] = {}
        self._renew_task: asyncio.Task[None] | None = None

    # --- life cycle ---------------------------------------------------------------------------------------------
    async def start(self, host: str, port: int) -> int:
        """Listen on *host*:*port* (0: any free port); the port bound."""
        import grpc  # the extra "grpc": imported only when the endpoint is asked for

        rpcs = (  # name, kind (unary, server stream, both streams), handler, request and response types
            ("QueryRoute", "unary", self.query_route, pb.QueryRouteRequest, pb.QueryRouteResponse),
            ("Heartbeat", "unary", self.heartbeat, pb.HeartbeatRequest, pb.HeartbeatResponse),
            ("SendMessage", "unary", self.send_message, pb.SendMessageRequest, pb.SendMessageResponse),
            ("QueryAssignment", "unary", self.query_assignment, pb.QueryAssignmentRequest,
             pb.QueryAssignmentResponse),
            ("ReceiveMessage", "stream", self.receive_message, pb.ReceiveMessageRequest, pb.ReceiveMessageResponse),
            ("AckMessage", "unary", self.ack_message, pb.AckMessageRequest, pb.AckMessageResponse),
            ("ChangeInvisibleDuration", "unary", self.change_invisible_duration, pb.ChangeInvisibleDurationRequest,
             pb.ChangeInvisibleDurationResponse),
            ("ForwardMessageToDeadLetterQueue", "unary", self.forward_to_dead_letter_queue,
             pb.ForwardMessageToDeadLetterQueueRequest, pb.ForwardMessageToDeadLetterQueueResponse),
            ("EndTransaction", "unary", self.end_transaction, pb.EndTransactionRequest, pb.EndTransactionResponse),
            ("Telemetry", "bidi", self.telemetry, pb.TelemetryCommand, pb.TelemetryCommand),
            ("NotifyClientTermination", "unary", self.notify_client_termination,
             pb.NotifyClientTerminationRequest, pb.NotifyClientTerminationResponse),
        )  # fmt: skip
        kinds = {"unary": grpc.unary_unary_rpc_method_handler, "stream": grpc.unary_stream_rpc_method_handler,
                 "bidi": grpc.stream_stream_rpc_method_handler}  # fmt: skip
        handlers = {name: kinds[kind](handler, request.FromString, response.SerializeToString)
                    for name, kind, handler, request, response in rpcs}  # fmt: skip
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", 2 * MAX_MESSAGE_SIZE + (1 << 20)),
                                          ("grpc.so_reuseport", 0)])  # fmt: skip
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        try:
            bound = server.add_insecure_port(f"{host}:{port}")
        except RuntimeError as exc:  # grpcio raises where older versions answered 0
            raise OSError(f"cannot listen on {host}:{port}: {exc}") from exc
        if not bound:
            raise OSError(f"cannot listen on {host}:{port}")
        await server.start()
        self._loop = asyncio.get_running_loop()
        self.server, self.port = server, bound
        self._stopping.clear()
        self._renew_task = asyncio.create_task(self._renew_loop(), name="grpc-receipt-handle-renewal")
        return bound

    async def stop(self, grace: float = 1.0) -> None:
        self._stopping.set()
        if self._renew_task is not None:
            self._renew_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renew_task
            self._renew_task = None
        for events in self._waiting.values():
            for event in events:
                event.set()
        for client in self.clients.values():
            if client.outbox is not None:
                client.outbox.put_nowait(None)
        if self.server is not None:
            server, self.server = self.server, None
            await server.stop(grace)

    # --- receipt handles the proxy renews -------------------------------------------------------------------------
    async def _renew_loop(self) -> None:
        while not self._stopping.is_set():
            await asyncio.sleep(RENEW_PERIOD_S)
            try:
                self.renew_due(int(time.time() * 1000))
            except Exception:  # one bad round must not end the renewals
                log.exception("renewing receipt handles failed")

    def renew_due(self, now_ms: int) -> int:
        """One round of renewals: the handles near their visibility whose client is still here get more time; the
        others are let go (they become visible and are delivered again). How many were renewed."""
        renewed = 0
        for held, r in list(self._renewing.items()):
            if r.visible_at - now_ms > RENEW_AHEAD_MS:
                continue
            if r.client_id not in self.clients or now_ms - r.started_ms > RENEW_MAX_MS:
                del self._renewing[held]
                continue
            status, handle = self.pop.change_invisible(r.group, r.topic, r.handle, DEFAULT_INVISIBLE_MS, now_ms)
            if status != AckStatus.OK or handle is None:  # acknowledged, or gone: nothing to keep
                del self._renewing[held]
                continue
            r.handle, r.visible_at = handle, now_ms + DEFAULT_INVISIBLE_MS
            renewed += 1
        return renewed

    def _current_handle(self, held: str, *, stop: bool) -> str:
        """The handle now valid for one a client holds (renewals replace it); *stop*: no more renewals of it."""
        r = self._renewing.pop(held, None) if stop else self._renewing.get(held)
        return r.handle if r is not None else held

    # --- arrivals -----------------------------------------------------------------------------------------------
    def waits_on(self, topic: str) -> bool:
        """Whether a receive is waiting for *topic* (the store's ``message_arriving_wanted``, any thread)."""
        return topic in self._waiting

    def on_arrival(self, topic: str) -> None:
        """Messages of *topic* were dispatched (the broker's arrival listener, any thread): wake its receives."""
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(self._wake, topic)

    def _wake(self, topic: str) -> None:
        for event in self._waiting.get(topic, ()):
            event.set()

    def expire_idle_clients(self, max_idle_s: float) -> int:
        """Forget clients silent for *max_idle_s* (no call, no heartbeat): the broker's client housekeeping."""
        now = time.monotonic()
        idle = [cid for cid, c in self.clients.items() if now - c.last_seen > max_idle_s and c.outbox is None]
        for client_id in idle:
            self._unregister(self.clients.pop(client_id))
        return len(idle)

    # --- the caller ---------------------------------------------------------------------------------------------
    @staticmethod
    def _metadata(context: Any, name: str) -> str:
        for key, value in context.invocation_metadata() or ():
            if key == name:
                return str(value)
        return ""

    @classmethod
    def _client_id(cls, context: Any) -> str:
        return cls._metadata(context, "x-mq-client-id")

    def _client(self, context: Any) -> _Client:
        client_id = self._client_id(context)
        client = self.clients.get(client_id)
        if client is None:
            client = self.clients[client_id] = _Client(client_id, address=self._peer(context).remote_address,
                                                       language=self._metadata(context, "x-mq-language"))
        client.last_seen = time.monotonic()
        return client

    def _register(self, client: _Client) -> None:
        """Keep the client in the broker's producer table (a producer, under each topic it publishes to: the
        proxy's producer group is the topic) or consumer table (its group), refreshing its timestamp."""
        ctl = self.controller
        settings = client.settings
        if client.channel is None or client.channel.closed:
            client.channel = _GrpcChannel(self, client)
        info = ClientChannelInfo(client.channel, client.client_id,  # type: ignore[arg-type]
                                 LanguageCode.parse(client.language), 0)
        if settings is not None and settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                ctl.producer_manager.register_producer(topic.name, info)
        elif client.group:
            subs = [build_subscription_data(e.topic.name, e.expression.expression or "*",
                                            "SQL92" if e.expression.type == pb.FilterType.SQL else "TAG")
                    for e in (settings.subscription.subscriptions if settings is not None else ())]  # fmt: skip
            ctl.consumer_manager.register_consumer(client.group, info, "CONSUME_POP", "CLUSTERING",
                                                   "CONSUME_FROM_LAST_OFFSET", subs, notify=False)  # fmt: skip

    def _unregister(self, client: _Client) -> None:
        """Out of the broker's tables: the client ended, or went silent (as the proxy unregisters it)."""
        channel, client.channel = client.channel, None
        if channel is None:
            return
        channel.close()
        ctl = self.controller
        info = ClientChannelInfo(channel, client.client_id)  # type: ignore[arg-type]
        settings = client.settings
        if settings is not None and settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                ctl.producer_manager.unregister_producer(topic.name, info)
        if client.group:
            ctl.consumer_manager.unregister_consumer(client.group, info, notify=False)

    def recover_orphaned(self, client: _Client, request: RemotingCommand) -> None:
        """The broker's transaction check asks a producer about a half message: over its telemetry stream."""
        outbox = client.outbox
        h = request.header
        if outbox is None or not request.body:
            return
        msg = decode_record(request.body)
        transaction_id = h.get_str("transactionId", None) or \
            msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")  # fmt: skip
        self._half[transaction_id] = _HalfMessage(msg.topic, h.get_long("tranStateTableOffset"),
                                                  h.get_long("commitLogOffset"), h.get_str("offsetMsgId", "") or "",
                                                  self._half_expiry())  # fmt: skip
        command = pb.TelemetryCommand()
        recover = command.recover_orphaned_transaction_command
        recover.transaction_id = transaction_id
        recover.message.CopyFrom(self._message_of(msg, "", 1, 0))
        outbox.put_nowait(command)

    @staticmethod
    def _peer(context: Any) -> _Peer:
        peer = context.peer() or ""  # "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000"
        kind, _, address = peer.partition(":")
        if kind == "ipv6" and address.startswith("["):
            host, _, port = address[1:].partition("]:")
            return _Peer(f"{host}:{port}")
        return _Peer(address if kind in ("ipv4", "ipv6") else "127.0.0.1:0")

    def _topic_config(self, resource: Any) -> Any:
        name = resource.name
        problem = validate_topic(name)
        if problem is not None:
            raise GrpcProxyError(pb.Code.ILLEGAL_TOPIC, problem[1])
        tcm = self.controller.topic_config_manager
        if tcm.is_system_topic(name):  # GrpcValidator.validateTopic: the broker's own topics are not a client's
            raise GrpcProxyError(pb.Code.ILLEGAL_TOPIC, f"cannot access system topic: {name}")
        config = tcm.select_topic_config(name)
        if config is None:
            raise GrpcProxyError(pb.Code.TOPIC_NOT_FOUND, f"topic not found: {name}")
        return config

    def _group(self, resource: Any) -> Any:
        name = resource.name
        if not name or validate_topic(name) is not None:  # a group's name follows a topic's rules
            raise GrpcProxyError(pb.Code.ILLEGAL_CONSUMER_GROUP, f"illegal consumer group: {name!r}")
        if name.startswith(CID_RMQ_SYS_PREFIX):  # validateConsumerGroup (MixAll.isSysConsumerGroup)
            raise GrpcProxyError(pb.Code.ILLEGAL_CONSUMER_GROUP, f"cannot use system consumer group: {name}")
        config = self.controller.subscription_group_manager.find_subscription_group_config(name)
        if config is None:
            raise GrpcProxyError(pb.Code.CONSUMER_GROUP_NOT_FOUND, f"consumer group not found: {name}")
        return config

    # --- route --------------------------------------------------------------------------------------------------
    def _endpoints(self, asked: Any) -> Any:
        """Where the client reaches this broker's queues: the address it used (``getTopicRouteDataForProxy``)."""
        endpoints = pb.Endpoints()
        if asked is not None and len(asked.addresses):
            endpoints.CopyFrom(asked)
        else:
            endpoints.scheme = pb.AddressScheme.IPv4
            endpoints.addresses.add(host=self.controller.broker_config.broker_ip1, port=self.port)
        return endpoints

    def _broker(self, asked: Any) -> Any:
        return pb.Broker(name=self.controller.broker_config.broker_name, id=0, endpoints=self._endpoints(asked))

    @staticmethod
    def _accepted_types(config: Any) -> tuple[int, ...]:
        attributes = config.extra.get("attributes") if isinstance(config.extra, dict) else None
        kind = attributes.get("message.type") if isinstance(attributes, dict) else None
        return _TOPIC_TYPES.get(str(kind).upper(), _ANY_TYPE) if kind else _ANY_TYPE

    async def query_route(self, request: Any, context: Any) -> Any:
        self._client(context)
        try:
            config = self._topic_config(request.topic)
        except GrpcProxyError as e:
            return pb.QueryRouteResponse(status=_status(e.code, str(e)))
        broker = self._broker(request.endpoints)
        types = self._accepted_types(config)
        perm = config.perm & self.controller.broker_config.broker_permission
        readable, writable = bool(perm & 4), bool(perm & 2)
        r = w = rw = n = 0
        if readable and writable:
            rw = min(config.write_queue_nums, config.read_queue_nums)
            r, w = config.read_queue_nums - rw, config.write_queue_nums - rw
        elif writable:
            w = config.write_queue_nums
        elif readable:
            r = config.read_queue_nums
        else:
            n = max(1, config.write_queue_nums, config.read_queue_nums)
        response = pb.QueryRouteResponse(status=_status(pb.Code.OK))
        queue_id = 0
        for count, permission in ((r, pb.Permission.READ), (w, pb.Permission.WRITE), (rw, pb.Permission.READ_WRITE),
                                  (n, pb.Permission.NONE)):  # fmt: skip
            for _ in range(count):
                mq = response.message_queues.add(id=queue_id, permission=permission, broker=broker)
                mq.topic.CopyFrom(request.topic)
                mq.accept_message_types.extend(types)
                queue_id += 1
        return response

    async def query_assignment(self, request: Any, context: Any) -> Any:
        self._client(context)
        try:
            config = self._topic_config(request.topic)
            group = self._group(request.group)
        except GrpcProxyError as e:
            return pb.QueryAssignmentResponse(status=_status(e.code, str(e)))
        perm = config.perm & self.controller.broker_config.broker_permission
        if not perm & 4 or config.read_queue_nums <= 0:
            return pb.QueryAssignmentResponse(status=_status(pb.Code.FORBIDDEN, "no readable queue"))
        response = pb.QueryAssignmentResponse(status=_status(pb.Code.OK))
        permission = pb.Permission.READ_WRITE if perm & 2 else pb.Permission.READ
        # A FIFO group is given each queue (one consumer a queue); any other the whole broker (queue id -1).
        ids = range(config.read_queue_nums) if _fifo(group) else (-1,)
        for queue_id in ids:
            mq = response.assignments.add().message_queue
            mq.topic.CopyFrom(request.topic)
            mq.id = queue_id
            mq.permission = permission
            mq.broker.CopyFrom(self._broker(request.endpoints))
        return response

    # --- clients ------------------------------------------------------------------------------------------------
    async def heartbeat(self, request: Any, context: Any) -> Any:
        client = self._client(context)
        client.client_type = request.client_type or client.client_type
        if request.HasField("group") and request.group.name:
            try:
                self._group(request.group)
            except GrpcProxyError as e:
                return pb.HeartbeatResponse(status=_status(e.code, str(e)))
            client.group = request.group.name
        self._register(client)
        return pb.HeartbeatResponse(status=_status(pb.Code.OK))

    async def notify_client_termination(self, request: Any, context: Any) -> Any:
        client = self.clients.pop(self._client_id(context), None)
        if client is not None:
            self._unregister(client)
            if client.outbox is not None:
                client.outbox.put_nowait(None)
        return pb.NotifyClientTerminationResponse(status=_status(pb.Code.OK))

    def _settings_for(self, asked: Any) -> Any:
        """The client's settings with the server's part filled in (``GrpcClientSettingsManager``)."""
        settings = pb.Settings()
        settings.CopyFrom(asked)
        if asked.HasField("publishing"):
            initial, longest, multiplier = PRODUCER_BACKOFF
            policy = settings.backoff_policy
            policy.max_attempts = PRODUCER_MAX_ATTEMPTS
            policy.exponential_backoff.initial.FromMilliseconds(initial)
            policy.exponential_backoff.max.FromMilliseconds(longest)
            policy.exponential_backoff.multiplier = multiplier
            settings.publishing.validate_message_type = True
            settings.publishing.max_body_size = min(MAX_MESSAGE_SIZE, self.controller.store_config.max_message_size)
        elif asked.HasField("subscription"):
            sub = settings.subscription
            sub.receive_batch_size = RECEIVE_BATCH_SIZE
            sub.long_polling_timeout.FromMilliseconds(MAX_LONG_POLLING_MS)
            group = self.controller.subscription_group_manager.table.get(asked.subscription.group.name)
            sub.fifo = bool(group is not None and _fifo(group))
            policy = settings.backoff_policy
            policy.max_attempts = (group.retry_max_times if group is not None else 16) + 1
            # The default GroupRetryPolicy: customized, one step a delay level (1s 5s 10s 30s 1m ... 2h).
            policy.ClearField("exponential_backoff")
            for _level, delay_ms in sorted(self.controller.store_config.delay_level_table().items()):
                policy.customized_backoff.next.add().FromMilliseconds(delay_ms)
        return settings

    async def telemetry(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        """The client's command stream: each settings command is answered with the server's settings."""
        client = self._client(context)
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        client.outbox = outbox

        async def read() -> None:
            try:
                async for command in requests:
                    client.last_seen = time.monotonic()
                    if command.HasField("settings"):
                        client.settings = command.settings
                        if command.settings.HasField("client_type"):
                            client.client_type = command.settings.client_type
                        if command.settings.HasField("subscription") and command.settings.subscription.group.name:
                            client.group = command.settings.subscription.group.name
                        self._register(client)
                        reply = pb.TelemetryCommand(status=_status(pb.Code.OK))
                        reply.settings.CopyFrom(self._settings_for(command.settings))
                        outbox.put_nowait(reply)
            finally:
                outbox.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                command = await outbox.get()
                if command is None:
                    return
                yield command
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            if client.outbox is outbox:
                client.outbox = None

    # --- send ---------------------------------------------------------------------------------------------------
    def _properties(self, message: Any, peer: _Peer) -> dict[str, str]:
        """The stored properties of a message (``SendMessageActivity.buildMessageProperty``)."""
        system = message.system_properties
        user = dict(message.user_properties)
        if len(user) > MAX_USER_PROPERTIES:
            raise GrpcProxyError(pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
                                 f"too many user properties, max is {MAX_USER_PROPERTIES}")  # fmt: skip
        size = 0
        for key, value in user.items():
            if key in SYSTEM_PROPERTIES:
                raise GrpcProxyError(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
            if _has_control_character(key) or _has_control_character(value):
                raise GrpcProxyError(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                     "the key or value of a property cannot contain control characters")  # fmt: skip
            size += len(key.encode()) + len(value.encode())
        props = dict(user)
        tag = system.tag
        if tag:
            if not tag.strip() or "|" in tag or _has_control_character(tag):
                raise GrpcProxyError(pb.Code.ILLEGAL_MESSAGE_TAG, f"illegal tag: {tag!r}")
            props[PROPERTY_TAGS] = tag
            size += len(tag.encode())
        keys = list(system.keys)
        for key in keys:
            if key and (not key.strip() or _has_control_character(key)):
                raise GrpcProxyError(pb.Code.ILLEGAL_MESSAGE_KEY, f"illegal key: {key!r}")
            size += len(key.encode())
        if keys:
            props[PROPERTY_KEYS] = KEY_SEPARATOR.join(keys)
        if size > MAX_USER_PROPERTY_SIZE:
            raise GrpcProxyError(pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
                                 f"the total size of user property is too large, max is {MAX_USER_PROPERTY_SIZE}")
        if not system.message_id.strip():
            raise GrpcProxyError(pb.Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
        props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = system.message_id
        if system.message_type == pb.MessageType.TRANSACTION:
            props[PROPERTY_TRANSACTION_PREPARED] = "true"
            if system.HasField("orphaned_transaction_recovery_duration"):
                seconds = system.orphaned_transaction_recovery_duration.seconds
                if seconds > MAX_TRANSACTION_RECOVERY_S:  # validateTransactionRecoverySecond
                    raise GrpcProxyError(pb.Code.BAD_REQUEST,
                                         f"the max transaction recovery time of message is too large, max is "
                                         f"{MAX_TRANSACTION_RECOVERY_S}")  # fmt: skip
                props[PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
        if system.HasField("delivery_timestamp"):
            due = _ms(system.delivery_timestamp)
            # the proxy's maxDelayTimeMills, then the broker's timer limit
            max_delay_ms = min(MAX_DELAY_MS, self.controller.broker_config.timer_max_delay_sec * 1000 or MAX_DELAY_MS)
            if due - int(time.time() * 1000) > max_delay_ms:
                raise GrpcProxyError(pb.Code.ILLEGAL_DELIVERY_TIME,
                                     f"the max delay time of message is too large, max is {max_delay_ms}")
            props[PROPERTY_TIMER_DELIVER_MS] = str(due)
        props[PROPERTY_RECONSUME_TIME] = str(system.delivery_attempt)
        props[PROPERTY_PRODUCER_GROUP] = message.topic.name  # the proxy's producer group: the topic
        group = system.message_group
        if group:
            if not group.strip() or len(group.encode()) >= MAX_MESSAGE_GROUP_SIZE or _has_control_character(group):
                raise GrpcProxyError(pb.Code.ILLEGAL_MESSAGE_GROUP, f"illegal message group: {group!r}")
            props[PROPERTY_SHARDING_KEY] = group
        if system.trace_context:
            props[PROPERTY_TRACE_CONTEXT] = system.trace_context
        props[PROPERTY_BORN_HOST] = system.born_host.strip() or peer.remote_address
        if system.born_timestamp.seconds or system.born_timestamp.nanos:
            props[PROPERTY_BORN_TIMESTAMP] = str(_ms(system.born_timestamp))
        return props

    def _select_queue(self, config: Any, message_group: str) -> int:
        """``SendMessageQueueSelector``: a message group's queue by its hash, else the next queue in turn."""
        writable = max(1, config.write_queue_nums)
        if message_group:
            return consistent_hash(java_string_hash(message_group), writable)
        turn = self._send_turns.get(config.topic_name, -1) + 1
        self._send_turns[config.topic_name] = turn
        return turn % writable

    async def _send_one(self, message: Any, config: Any, queue_id: int, peer: _Peer) -> Any:
        entry = pb.SendResultEntry()
        try:
            body = message.body
            if not body:
                raise GrpcProxyError(pb.Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
            if message.system_properties.body_encoding == pb.Encoding.GZIP:
                try:  # stored as it is read: a gzip or zlib body, inflated here
                    body = zlib.decompress(body, 47)
                except zlib.error as exc:
                    raise GrpcProxyError(pb.Code.MESSAGE_CORRUPTED, f"body is not gzip: {exc}") from exc
            limit = min(MAX_MESSAGE_SIZE, self.controller.store_config.max_message_size)
            if len(body) > limit:
                raise GrpcProxyError(pb.Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limit}")
            props = self._properties(message, peer)
        except GrpcProxyError as e:
            entry.status.CopyFrom(_status(e.code, str(e)))
            return entry
        system = message.system_properties
        accepted = self._accepted_types(config)
        if accepted is not _ANY_TYPE and system.message_type not in accepted:  # DefaultTopicMessageTypeValidator
            entry.status.CopyFrom(_status(pb.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "current message type not "
                                          f"match with topic accept message types {config.topic_name}"))  # fmt: skip
            return entry
        transactional = system.message_type == pb.MessageType.TRANSACTION
        born = props.get(PROPERTY_BORN_TIMESTAMP)
        request = create_request(RequestCode.SEND_MESSAGE, {
            "producerGroup": props[PROPERTY_PRODUCER_GROUP], "topic": config.topic_name, "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4, "queueId": queue_id,
            "sysFlag": TRANSACTION_PREPARED_TYPE if transactional else 0,
            "bornTimestamp": born or int(time.time() * 1000), "flag": 0,
            "properties": properties_to_string(props), "reconsumeTimes": system.delivery_attempt,
            "unitMode": False, "batch": False,
        }, body)  # fmt: skip
        reply = self.controller.send_message_processor.process_request(peer, request)
        if inspect.isawaitable(reply):
            reply = await reply
        assert isinstance(reply, RemotingCommand)
        ext = reply.ext_fields or {}
        if reply.code != ResponseCode.SUCCESS:
            code = _SEND_CODES.get(reply.code, pb.Code.INTERNAL_SERVER_ERROR)
            entry.status.CopyFrom(_status(code, reply.remark or f"send message failed, code {reply.code}"))
            return entry
        entry.status.CopyFrom(_status(pb.Code.OK))
        entry.message_id = system.message_id
        entry.offset = int(ext.get("queueOffset", 0))
        transaction_id = str(ext.get("transactionId") or system.message_id)
        if transactional:
            entry.transaction_id = transaction_id
            offset_msg_id = str(ext.get("msgId", ""))
            with contextlib.suppress(ValueError):
                _host, commit_log_offset = decode_offset_message_id(offset_msg_id)
                self._expire_half()
                self._half[transaction_id] = _HalfMessage(
                    config.topic_name, entry.offset, commit_log_offset, offset_msg_id,
                    self._half_expiry())
        return entry

    async def send_message(self, request: Any, context: Any) -> Any:
        self._client(context)
        response = pb.SendMessageResponse()
        if not request.messages:
            response.status.CopyFrom(_status(pb.Code.MESSAGE_CORRUPTED, "no message to send"))
            return response
        topic = request.messages[0].topic
        try:
            config = self._topic_config(topic)
            if any(m.topic.name != topic.name for m in request.messages):
                raise GrpcProxyError(pb.Code.MESSAGE_CORRUPTED, "topic in message is not same")
        except GrpcProxyError as e:
            response.status.CopyFrom(_status(e.code, str(e)))
            return response
        peer = self._peer(context)
        # One queue for the request, as the proxy sends its messages as one batch; by the message group of a
        # single message.
        group = request.messages[0].system_properties.message_group if len(request.messages) == 1 else ""
        perm = config.perm & self.controller.broker_config.broker_permission
        if not perm & PERM_WRITE or config.write_queue_nums <= 0:  # no queue the write selector could give
            response.status.CopyFrom(_status(pb.Code.FORBIDDEN, f"no writable queue of {config.topic_name}"))
            return response
        queue_id = self._select_queue(config, group)
        for message in request.messages:
            response.entries.append(await self._send_one(message, config, queue_id, peer))
        codes = {entry.status.code for entry in response.entries}
        if len(codes) > 1:
            response.status.CopyFrom(_status(pb.Code.MULTIPLE_RESULTS))
        else:
            response.status.CopyFrom(response.entries[0].status)
        return response

    # --- transactions -------------------------------------------------------------------------------------------
    def _half_expiry(self) -> float:
        """When a half message is surely ended: the broker's check has asked ``transactionCheckMax`` times (then it
        gives the message up), each ``transactionCheckInterval`` after ``transactionTimeOut``."""
        cfg = self.controller.broker_config
        wait_ms = cfg.transaction_time_out + (cfg.transaction_check_max + 1) * cfg.transaction_check_interval
        return time.monotonic() + wait_ms / 1000

    def _expire_half(self) -> None:
        if len(self._half) > 100_000:  # ended by the broker's check long ago: forget them
            now = time.monotonic()
            for key in [k for k, v in self._half.items() if v.expires < now]:
                del self._half[key]

    async def end_transaction(self, request: Any, context: Any) -> Any:
        self._client(context)
        half = self._half.get(request.transaction_id)
        if half is None or half.topic != request.topic.name:
            return pb.EndTransactionResponse(status=_status(
                pb.Code.INVALID_TRANSACTION_ID, f"unknown transaction id: {request.transaction_id!r}"))
        if request.resolution == pb.TransactionResolution.COMMIT:
            kind = _TRANSACTION_COMMIT
        elif request.resolution == pb.TransactionResolution.ROLLBACK:
            kind = _TRANSACTION_ROLLBACK
        else:
            return pb.EndTransactionResponse(status=_status(pb.Code.BAD_REQUEST, "no transaction resolution"))
        end = create_request(RequestCode.END_TRANSACTION, {
            "producerGroup": half.topic, "tranStateTableOffset": half.queue_offset,
            "commitLogOffset": half.commit_log_offset, "commitOrRollback": kind,
            "fromTransactionCheck": request.source == pb.TransactionSource.SOURCE_SERVER_CHECK,
            "msgId": request.message_id or half.offset_msg_id, "transactionId": request.transaction_id,
        })  # fmt: skip
        reply = self.controller.end_transaction_processor.process_request(self._peer(context), end)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, RemotingCommand) and reply.code != ResponseCode.SUCCESS:
            return pb.EndTransactionResponse(status=_status(pb.Code.INTERNAL_SERVER_ERROR,
                                                            reply.remark or f"end transaction failed: {reply.code}"))
        self._half.pop(request.transaction_id, None)
        return pb.EndTransactionResponse(status=_status(pb.Code.OK))

    # --- receive ------------------------------------------------------------------------------------------------
    def _filter(self, topic: str, expression: Any) -> Any:
        text = expression.expression or "*"
        if expression.type == pb.FilterType.SQL:
            if not self.controller.broker_config.enable_property_filter:
                raise GrpcProxyError(pb.Code.ILLEGAL_FILTER_EXPRESSION,
                                     "the broker does not support consumer to filter message by SQL92")  # fmt: skip
            from rocketq.common.sql92 import SelectorError, compile_selector

            try:
                selector = compile_selector(text)
            except SelectorError as exc:
                raise GrpcProxyError(pb.Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from exc
            return ExpressionMessageFilter(build_subscription_data(topic, text, "SQL92"), selector)
        return TagFilter(text)

    def _message_of(self, msg: MessageExt, handle: str, attempt: int, invisible_ms: int) -> Any:
        """A stored message as the protocol carries it to a consumer (``GrpcConverter.buildMessage``)."""
        out = pb.Message()
        out.topic.name = msg.topic
        body = msg.body
        if msg.sys_flag & COMPRESSED_FLAG:
            body = decompress(body, msg.sys_flag)
        out.body = body
        props = msg.properties
        for key, value in props.items():
            if key not in _MAPPED:
                out.user_properties[key] = value
        system = out.system_properties
        if msg.tags:
            system.tag = msg.tags
        system.keys.extend(msg.key_list())
        system.message_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
        system.body_digest.type = pb.DigestType.CRC32
        system.body_digest.checksum = format(zlib.crc32(body) & 0xFFFFFFFF, "08X")
        system.body_encoding = pb.Encoding.IDENTITY
        if PROPERTY_TRANSACTION_PREPARED in props:
            system.message_type = pb.MessageType.TRANSACTION
        elif PROPERTY_SHARDING_KEY in props:
            system.message_type = pb.MessageType.FIFO
        elif PROPERTY_TIMER_DELIVER_MS in props or "DELAY" in props:
            system.message_type = pb.MessageType.DELAY
        else:
            system.message_type = pb.MessageType.NORMAL
        _set_ms(system.born_timestamp, msg.born_timestamp)
        system.born_host = props.get(PROPERTY_BORN_HOST) or msg.born_host[0]
        _set_ms(system.store_timestamp, msg.store_timestamp)
        system.store_host = f"{msg.store_host[0]}:{msg.store_host[1]}"
        due = props.get(PROPERTY_TIMER_DELIVER_MS)
        if due and due.isdigit():
            _set_ms(system.delivery_timestamp, int(due))
        system.receipt_handle = handle
        system.queue_id = msg.queue_id
        system.queue_offset = msg.queue_offset
        system.invisible_duration.FromMilliseconds(invisible_ms)
        system.delivery_attempt = attempt
        if PROPERTY_SHARDING_KEY in props:
            system.message_group = props[PROPERTY_SHARDING_KEY]
        if PROPERTY_TRACE_CONTEXT in props:
            system.trace_context = props[PROPERTY_TRACE_CONTEXT]
        return out

    async def receive_message(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """POP (``ReceiveMessageActivity``): the messages, then a status, then the delivery time of the batch."""
        client = self._client(context)
        try:
            topic_config = self._topic_config(request.message_queue.topic)
            group_config = self._group(request.group)
            if not group_config.consume_enable:  # the broker's PopMessageProcessor refuses such a group
                raise GrpcProxyError(pb.Code.FORBIDDEN, f"subscription group no permission, {group_config.group_name}")
            if request.batch_size > RECEIVE_BATCH_SIZE:
                raise GrpcProxyError(pb.Code.BAD_REQUEST, f"pop message's num is greater than {RECEIVE_BATCH_SIZE}")
            if request.auto_renew:  # the proxy's defaultInvisibleTimeMills while it renews the handles
                invisible_ms = DEFAULT_INVISIBLE_MS
            else:
                invisible_ms = request.invisible_duration.ToMilliseconds() \
                    if request.HasField("invisible_duration") else 0  # fmt: skip
            if not MIN_INVISIBLE_MS <= invisible_ms <= MAX_INVISIBLE_MS:
                raise GrpcProxyError(pb.Code.ILLEGAL_INVISIBLE_TIME,
                                     f"the invisible time of message must be in [{MIN_INVISIBLE_MS}, "
                                     f"{MAX_INVISIBLE_MS}] ms, but got {invisible_ms}")  # fmt: skip
            message_filter = self._filter(topic_config.topic_name, request.filter_expression)
        except GrpcProxyError as e:
            yield pb.ReceiveMessageResponse(status=_status(e.code, str(e)))
            return
        polling_ms = request.long_polling_timeout.ToMilliseconds() if request.HasField("long_polling_timeout") \
            else MAX_LONG_POLLING_MS  # fmt: skip
        polling_ms = min(max(polling_ms, MIN_LONG_POLLING_MS), MAX_LONG_POLLING_MS)
        remaining = context.time_remaining()
        if remaining is not None:
            # Answered before the client gives up (the proxy keeps 100 ms, longPollingReserveTimeInMillis; a Python
            # server on a busy machine needs more to get its answer out in time).
            polling_ms = min(polling_ms, max(0, int(remaining * 1000) - POLLING_RESERVE_MS))
        batch = request.batch_size or RECEIVE_BATCH_SIZE
        perm = topic_config.perm & self.controller.broker_config.broker_permission
        readable = topic_config.read_queue_nums if perm & 4 else 0
        if readable <= 0:
            forbidden = _status(pb.Code.FORBIDDEN, f"no readable queue of {topic_config.topic_name}")
            yield pb.ReceiveMessageResponse(status=forbidden)
            return
        # The proxy pops from the broker's "acting" queue (id -1): every queue of the topic on this broker,
        # whichever queue of the route the client named. Each receive starts at another: none starves the others.
        queues = list(range(readable))
        if len(queues) > 1:
            key = (group_config.group_name, topic_config.topic_name)
            turn = self._receive_turns.get(key, -1) + 1
            self._receive_turns[key] = turn
            queues = queues[turn % len(queues):] + queues[: turn % len(queues)]
        group = group_config.group_name
        topic = topic_config.topic_name
        fifo = _fifo(group_config)
        max_attempts = group_config.retry_max_times + 1
        deadline = time.monotonic() + polling_ms / 1000
        popped: list[Any] = []
        arrived = asyncio.Event()
        waiting = self._waiting.setdefault(topic, set())
        waiting.add(arrived)  # before the first look: an arrival after it wakes this receive
        try:
            while True:
                now_ms = int(time.time() * 1000)
                popped, dead = self.pop.pop(group, topic, queues, batch, invisible_ms, now_ms, message_filter,
                                            max_attempts=max_attempts, fifo=fifo)  # fmt: skip
                for msg, _attempts in dead:
                    await self._to_dead_letter_queue(group, msg, context)
                if popped or time.monotonic() >= deadline or self._stopping.is_set():
                    break
                while time.monotonic() < deadline and not self._stopping.is_set():
                    arrived.clear()
                    if self.pop.has_new(group, topic, queues, int(time.time() * 1000)):
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(arrived.wait(), min(POLL_STEP_S, deadline - time.monotonic()))
        finally:
            waiting.discard(arrived)
            if not waiting and self._waiting.get(topic) is waiting:
                del self._waiting[topic]
        client.last_seen = time.monotonic()
        delivered_at = int(time.time() * 1000)
        if request.auto_renew:
            for item in popped:
                self._renewing[item.receipt_handle] = _Renewal(group, topic, item.receipt_handle, client.client_id,
                                                               delivered_at, delivered_at + invisible_ms)  # fmt: skip
        for item in popped:
            yield pb.ReceiveMessageResponse(message=self._message_of(item.message, item.receipt_handle, item.attempt,
                                                                     item.invisible_ms))  # fmt: skip
        if popped:
            yield pb.ReceiveMessageResponse(status=_status(pb.Code.OK))
        else:
            yield pb.ReceiveMessageResponse(status=_status(pb.Code.MESSAGE_NOT_FOUND, "no new message"))
        response = pb.ReceiveMessageResponse()
        _set_ms(response.delivery_timestamp, delivered_at)
        yield response

    async def _to_dead_letter_queue(self, group: str, msg: MessageExt, context: Any) -> bool:
        """Send a message to the group's DLQ through the broker's send-back (delay level -1: straight there)."""
        request = create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": msg.commit_log_offset, "group": group, "delayLevel": -1, "originMsgId": msg.msg_id,
            "originTopic": msg.topic, "unitMode": False, "maxReconsumeTimes": 0,
        })  # fmt: skip
        reply = await self.controller.send_message_processor.consumer_send_msg_back(self._peer(context), request)
        if reply.code != ResponseCode.SUCCESS:
            log.warning("moving %s of %s to the DLQ of %s failed: %s", msg.msg_id, msg.topic, group, reply.remark)
            return False
        return True

    # --- acknowledge --------------------------------------------------------------------------------------------
    _ACK_CODES: ClassVar[dict[str, tuple[int, str]]] = {
        AckStatus.INVALID: (pb.Code.INVALID_RECEIPT_HANDLE, "invalid receipt handle"),
        AckStatus.EXPIRED: (pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired"),
    }

    async def ack_message(self, request: Any, context: Any) -> Any:
        self._client(context)
        response = pb.AckMessageResponse()
        try:
            self._topic_config(request.topic)
            self._group(request.group)
        except GrpcProxyError as e:
            response.status.CopyFrom(_status(e.code, str(e)))
            return response
        now_ms = int(time.time() * 1000)
        for entry in request.entries:
            result = response.entries.add(message_id=entry.message_id, receipt_handle=entry.receipt_handle)
            handle = self._current_handle(entry.receipt_handle, stop=True)
            status = self.pop.ack(request.group.name, request.topic.name, handle, now_ms)
            result.status.CopyFrom(_status(pb.Code.OK) if status == AckStatus.OK else _status(*self._ACK_CODES[status]))
        codes = {e.status.code for e in response.entries}
        if len(codes) == 1:
            response.status.CopyFrom(response.entries[0].status)
        elif codes:
            response.status.CopyFrom(_status(pb.Code.MULTIPLE_RESULTS))
        else:
            response.status.CopyFrom(_status(pb.Code.OK))
        return response

    async def change_invisible_duration(self, request: Any, context: Any) -> Any:
        self._client(context)
        try:
            self._topic_config(request.topic)
            self._group(request.group)
            invisible_ms = request.invisible_duration.ToMilliseconds()
            if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
                raise GrpcProxyError(pb.Code.ILLEGAL_INVISIBLE_TIME,
                                     f"the invisible time of message must be in [0, {MAX_INVISIBLE_MS}] ms")
        except GrpcProxyError as e:
            return pb.ChangeInvisibleDurationResponse(status=_status(e.code, str(e)))
        held = self._current_handle(request.receipt_handle, stop=True)  # the client takes the timing over
        status, handle = self.pop.change_invisible(request.group.name, request.topic.name, held,
                                                   invisible_ms, int(time.time() * 1000))  # fmt: skip
        if status != AckStatus.OK or handle is None:
            return pb.ChangeInvisibleDurationResponse(status=_status(*self._ACK_CODES[status]))
        return pb.ChangeInvisibleDurationResponse(status=_status(pb.Code.OK), receipt_handle=handle)

    async def forward_to_dead_letter_queue(self, request: Any, context: Any) -> Any:
        self._client(context)
        try:
            self._topic_config(request.topic)
            self._group(request.group)
        except GrpcProxyError as e:
            return pb.ForwardMessageToDeadLetterQueueResponse(status=_status(e.code, str(e)))
        held = self._current_handle(request.receipt_handle, stop=True)
        status, commit_log_offset = self.pop.take(request.group.name, request.topic.name, held,
                                                  int(time.time() * 1000))  # fmt: skip
        if status != AckStatus.OK or commit_log_offset is None:
            return pb.ForwardMessageToDeadLetterQueueResponse(status=_status(*self._ACK_CODES[status]))
        msg = self.controller.store.look_message_by_offset(commit_log_offset)
        if msg is None or not await self._to_dead_letter_queue(request.group.name, msg, context):
            return pb.ForwardMessageToDeadLetterQueueResponse(
                status=_status(pb.Code.INTERNAL_SERVER_ERROR, "the message could not be moved to the DLQ"))
        return pb.ForwardMessageToDeadLetterQueueResponse(status=_status(pb.Code.OK))


def _fifo(group: Any) -> bool:
    """Whether a subscription group consumes in order (5.x's ``consumeMessageOrderly``, kept as it is read)."""
    extra = getattr(group, "extra", None)
    return bool(isinstance(extra, dict) and extra.get("consumeMessageOrderly"))
