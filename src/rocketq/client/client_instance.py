"""The connections and the shared state of a client process: Java's ``MQClientInstance`` and
``MQClientManager``.

One instance per client id (``ip@instanceName``) and event loop, shared by every producer and consumer
that uses that id. As in Java 4.9.4, a producer or clustering consumer without an instance name of its own takes
``pid#<a clock reading>`` at start (``changeInstanceNameToPID``), hence an instance of its own: its name servers,
credentials and intervals are its own. Broadcasting consumers keep ``DEFAULT`` and share one. It owns:

- the ``RemotingClient`` (one connection per name server or broker) and the ``MQClientAPI`` over it;
- the route table (topic → ``TopicRouteData``) and the broker address table (broker name → id → address),
  refreshed from the name server every ``poll_name_server_interval`` (30 s) for every topic a producer
  publishes to or a consumer subscribes to;
- heartbeats: every ``heartbeat_broker_interval`` (30 s) a HEART_BEAT with all producer groups and
  consumer subscriptions to every broker of those routes (masters only when there is no consumer);
- offset persistence: every ``persist_consumer_offset_interval`` (5 s) each consumer commits its offsets;
- the rebalance service: every ``rebalance_interval`` (20 s), and at once when a broker pushes
  NOTIFY_CONSUMER_IDS_CHANGED, each consumer re-allocates its queues;
- the inner producer ``CLIENT_INNER_PRODUCER`` that consumers use to send failed messages back;
- the replies awaited by request-reply (``RequestFutureHolder``): a broker pushes a reply
  (PUSH_REPLY_MESSAGE_TO_CLIENT) to the instance named in the request's ``REPLY_TO_CLIENT``, which hands it to
  the request waiting under its ``CORRELATION_ID`` (``ClientRemotingProcessor.receiveReplyMessage``).

Shutting down the last producer or consumer of an instance unregisters from every broker (that is done
by the producer/consumer) and closes the instance's connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from rocketq.client.acl import AclClientRPCHook
from rocketq.client.client_config import ClientConfig
from rocketq.client.errors import ClientError, NoRouteError, log_failure
from rocketq.client.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
)
from rocketq.client.message_queue import MessageQueue
from rocketq.client.mq_client_api import MQClientAPI, decode_records
from rocketq.client.route import (
    MASTER_ID,
    TopicPublishInfo,
    TopicRouteData,
    route_to_publish_info,
    route_to_subscribe_info,
)
from rocketq.client.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_TYPE,
    PROP_NAMESERVER_ADDR,
    ConsumerRunningInfo,
    ConsumerStatsManager,
    GetConsumerStatusBody,
    thread_stacks,
)
from rocketq.common import json_compat
from rocketq.common.aio import wait_event
from rocketq.common.compression import CompressionError, decompress
from rocketq.common.gc_tuning import freeze_startup_objects
from rocketq.common.message import (
    COMPRESSED_FLAG,
    PROPERTY_CORRELATION_ID,
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME,
    MessageExt,
    string_to_properties,
)
from rocketq.common.mixall import AUTO_CREATE_TOPIC_KEY_TOPIC, CLIENT_INNER_PRODUCER_GROUP
from rocketq.remoting.codes import RequestCode, ResponseCode, version_desc
from rocketq.remoting.command import RemotingCommand, make_response_for
from rocketq.remoting.transport import ProcessorTable, RemotingClient, RemotingConnection, parse_address

if TYPE_CHECKING:
    from rocketq.client.producer import Producer

__all__ = ["CLIENT_INNER_PRODUCER_GROUP", "ClientInstance", "ConsumerInner", "ProducerInner", "get_client_instance"]

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 5.0


class ProducerInner(Protocol):
    """What the instance needs of a producer (Java's ``MQProducerInner``)."""

    @property
    def group(self) -> str: ...

    def publish_topics(self) -> Iterable[str]: ...

    def is_publish_topic_need_update(self, topic: str) -> bool: ...

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None: ...


class ConsumerInner(Protocol):
    """What the instance needs of a consumer (Java's ``MQConsumerInner``)."""

    @property
    def group(self) -> str: ...

    @property
    def message_model(self) -> MessageModel: ...

    @property
    def consume_type(self) -> ConsumeType: ...

    @property
    def consume_from_where(self) -> ConsumeFromWhere: ...

    def subscriptions(self) -> list[SubscriptionData]: ...

    def is_subscribe_topic_need_update(self, topic: str) -> bool: ...

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None: ...

    async def do_rebalance(self) -> None: ...

    async def persist_consumer_offset(self) -> None: ...

    async def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None: ...

    def consumer_running_info(self) -> ConsumerRunningInfo: ...


# One registry per event loop: an instance's connections and tasks belong to the loop that made them.
_REGISTRY: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, ClientInstance]] = (
    weakref.WeakKeyDictionary()
)


def get_client_instance(config: ClientConfig, *, producer_group: str | None = None,
                        consumer_group: str | None = None) -> ClientInstance:  # fmt: skip
    """The instance for ``config``'s client id on the running loop (``MQClientManager.getOrCreateMQClientInstance``).

    If that instance already has a producer (or consumer) of the same group (clients of one configured instance
    name), a new instance with a unique instance name is made instead, so that two consumers of one group in one
    process are two members of the group.
    """
    loop = asyncio.get_running_loop()
    table = _REGISTRY.setdefault(loop, {})
    client_id = config.build_client_id()
    instance = table.get(client_id)
    if instance is not None and instance.closed:
        instance = None
    if instance is not None and (
        (producer_group is not None and producer_group in instance.producers)
        or (consumer_group is not None and consumer_group in instance.consumers)
    ):
        config = config.copy(instance_name=f"{config.instance_name}#{time.monotonic_ns()}")
        client_id = config.build_client_id()
        instance = None
    if instance is None:
        instance = ClientInstance(config, client_id)
        table[client_id] = instance
    return instance


def _forget(instance: ClientInstance) -> None:
    for table in list(_REGISTRY.values()):
        if table.get(instance.client_id) is instance:
            del table[instance.client_id]


class ClientInstance:
    def __init__(self, config: ClientConfig, client_id: str) -> None:
        self.config = config
        self.client_id = client_id
        processors = ProcessorTable()
        hook = AclClientRPCHook(config.credentials) if config.credentials is not None else None
        self.remoting = RemotingClient(processors=processors, connect_timeout=config.api_timeout,
                                       name=f"client {client_id}", rpc_hook=hook)  # fmt: skip
        self.api = MQClientAPI(self.remoting, config)
        processors.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed)
        processors.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        processors.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._on_reply_message)
        processors.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_consumer_running_info)
        processors.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_message_directly)
        processors.register(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self._on_get_consumer_status)
        self.consumer_stats = ConsumerStatsManager()
        #: Correlation id -> the future of a request's reply (completed by :meth:`_on_reply_message`).
        self.reply_futures: dict[str, asyncio.Future[MessageExt]] = {}
        self.producers: dict[str, ProducerInner] = {}
        self.consumers: dict[str, ConsumerInner] = {}
        self.topic_route_table: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.broker_version_table: dict[str, int] = {}
        self._route_lock = asyncio.Lock()
        self._heartbeat_lock = asyncio.Lock()
        self._rebalance_wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._oneshots: set[asyncio.Task[None]] = set()
        self._started = False
        self.closed = False
        self.inner_producer: Producer | None = None
        self.boot_timestamp = int(time.time() * 1000)

    def __repr__(self) -> str:
        return f"<ClientInstance {self.client_id} producers={list(self.producers)} consumers={list(self.consumers)}>"

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        if self.closed:
            raise ClientError(f"client instance {self.client_id} is shut down")
        self.api.set_namesrv_addrs(self.config.namesrv_addrs())
        self._started = True
        if self.config.freeze_gc_at_start:
            freeze_startup_objects()
        from rocketq.client.producer import Producer  # the inner producer is a producer like any other

        self.inner_producer = Producer(CLIENT_INNER_PRODUCER_GROUP, config=self.config, _instance=self)
        self.producers[CLIENT_INNER_PRODUCER_GROUP] = self.inner_producer
        cfg = self.config
        self._spawn(self._every(cfg.poll_name_server_interval, self.update_all_topic_routes, 0.01), "routes")
        self._spawn(self._every(cfg.heartbeat_broker_interval, self._heartbeat_tick, 1.0), "heartbeat")
        self._spawn(self._every(cfg.persist_consumer_offset_interval, self.persist_all_consumer_offsets,
                                min(10.0, cfg.persist_consumer_offset_interval)), "persist")  # fmt: skip
        self._spawn(self._rebalance_service(), "rebalance")

    def _spawn(self, coro: Awaitable[None], name: str, *, keep: bool = True) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(f"{self.client_id} {name}")
        if keep:
            self._tasks.append(task)
        else:
            self._oneshots.add(task)
            task.add_done_callback(self._oneshots.discard)
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _every(self, interval: float, job: Callable[[], Awaitable[Any]], first_delay: float) -> None:
        await asyncio.sleep(first_delay)
        while True:
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log_failure(log, exc, "%s: periodic task %s", self.client_id, getattr(job, "__name__", job))
            await asyncio.sleep(interval)

    async def _heartbeat_tick(self) -> None:
        self.clean_offline_brokers()
        await self.send_heartbeat_to_all_brokers()

    async def release(self) -> None:
        """Called by a producer/consumer that shut down: close the instance once nothing else uses it."""
        if self.consumers or any(g != CLIENT_INNER_PRODUCER_GROUP for g in self.producers):
            return
        await self.shutdown()

    async def shutdown(self) -> None:
        if self.closed:
            return
        self.closed = True
        _forget(self)
        tasks, self._tasks = [*self._tasks, *self._oneshots], []
        for task in tasks:
            task.cancel()
        if tasks:
            # Bounded: a task that ignores its cancellation must not hang the caller's shutdown.
            _done, stuck = await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE_S)
            for task in stuck:
                log.warning("%s: task %s did not stop within %.0f s", self.client_id, task.get_name(),
                            SHUTDOWN_GRACE_S)  # fmt: skip
        if self._started and self.broker_addr_table:
            with contextlib.suppress(Exception):
                await self.unregister_client(CLIENT_INNER_PRODUCER_GROUP, None)
        self.producers.clear()
        await self.remoting.close()
        log.info("client instance %s shut down", self.client_id)

    # -- registration -----------------------------------------------------------------------------

    def register_producer(self, group: str, producer: ProducerInner) -> bool:
        if group in self.producers:
            return False
        self.producers[group] = producer
        return True

    def unregister_producer_local(self, group: str) -> None:
        self.producers.pop(group, None)

    def register_consumer(self, group: str, consumer: ConsumerInner) -> bool:
        if group in self.consumers:
            return False
        self.consumers[group] = consumer
        return True

    def unregister_consumer_local(self, group: str) -> None:
        self.consumers.pop(group, None)

    async def unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        """UNREGISTER_CLIENT to every known broker (``MQClientInstance.unregisterClient``)."""
        async with self._heartbeat_lock:
            calls = []
            for addrs in list(self.broker_addr_table.values()):
                for addr in addrs.values():
                    calls.append(self.api.unregister_client(addr, self.client_id, producer_group, consumer_group))
            results = await asyncio.gather(*calls, return_exceptions=True)
        for r in results:
            if isinstance(r, Exception):
                log.info("%s: unregister of %s/%s failed: %s", self.client_id, producer_group, consumer_group, r)

    # -- routes -----------------------------------------------------------------------------------

    def _topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for producer in list(self.producers.values()):
            topics.update(producer.publish_topics())
        for consumer in list(self.consumers.values()):
            topics.update(s.topic for s in consumer.subscriptions())
        return topics

    async def update_all_topic_routes(self) -> None:
        for topic in sorted(self._topics_in_use()):
            try:
                await self.update_topic_route(topic)
            except ClientError as exc:
                log.debug("%s: route of %s not refreshed: %s", self.client_id, topic, exc)

    async def update_topic_route(self, topic: str, *, default_topic_queue_nums: int | None = None) -> bool:
        """Fetch the route of ``topic`` and spread it to producers and consumers; with
        ``default_topic_queue_nums`` the route of ``TBW102`` stands in for a topic the broker will create
        on the first send. ``False`` when there is no route."""
        async with self._route_lock:
            if default_topic_queue_nums is not None:
                route = await self.api.get_topic_route(AUTO_CREATE_TOPIC_KEY_TOPIC)
                if route is not None:
                    route = route.copy_with_queue_nums(default_topic_queue_nums)
            else:
                route = await self.api.get_topic_route(topic)
            if route is None:
                return False
            old = self.topic_route_table.get(topic)
            changed = not route.same_as(old) or self._needs_update(topic)
            if changed:
                known = {addr for addrs in self.broker_addr_table.values() for addr in addrs.values()}
                for bd in route.broker_datas:
                    self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
                new_broker = any(a not in known for bd in route.broker_datas for a in bd.broker_addrs.values())
                if (self.consumers or self.producers) and new_broker:
                    # A broker we never told about our clients (a topic that appeared later): tell it now rather
                    # than at the next 30 s heartbeat, so that it lists us as a group member, and a producer's
                    # requests can have their replies pushed to it (the broker finds it by its heartbeat).
                    self._spawn(self.send_heartbeat_to_all_brokers(), "heartbeat to new broker", keep=False)
                publish = route_to_publish_info(topic, route)
                for producer in list(self.producers.values()):
                    producer.update_topic_publish_info(topic, publish)
                subscribe = route_to_subscribe_info(topic, route)
                for consumer in list(self.consumers.values()):
                    consumer.update_topic_subscribe_info(topic, subscribe)
                self.topic_route_table[topic] = route
            return True

    def _needs_update(self, topic: str) -> bool:
        return any(p.is_publish_topic_need_update(topic) for p in list(self.producers.values())) or any(
            c.is_subscribe_topic_need_update(topic) for c in list(self.consumers.values())
        )

    def clean_offline_brokers(self) -> None:
        """Forget broker addresses that no route mentions any more (``cleanOfflineBroker``)."""
        live: dict[str, set[str]] = {}
        for route in self.topic_route_table.values():
            for bd in route.broker_datas:
                live.setdefault(bd.broker_name, set()).update(bd.broker_addrs.values())
        for name in list(self.broker_addr_table):
            addrs = self.broker_addr_table[name]
            for bid, addr in list(addrs.items()):
                if addr not in live.get(name, set()):
                    del addrs[bid]
            if not addrs:
                del self.broker_addr_table[name]

    async def subscribe_queues(self, topic: str) -> set[MessageQueue]:
        """The readable queues of ``topic`` from a fresh route (``fetchSubscribeMessageQueues``)."""
        if not await self.update_topic_route(topic):
            raise NoRouteError(topic)
        mqs = route_to_subscribe_info(topic, self.topic_route_table[topic])
        if not mqs:
            raise NoRouteError(topic, "the route has no readable queue")
        return mqs

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        addrs = self.broker_addr_table.get(broker_name)
        return addrs.get(MASTER_ID) if addrs else None

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int = MASTER_ID,
                                         only_this_broker: bool = False) -> str | None:  # fmt: skip
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        if addr is None and not only_this_broker and addrs:
            addr = addrs.get(MASTER_ID) or next(iter(addrs.values()))
        return addr

    def find_broker_addr_by_topic(self, topic: str) -> str | None:
        route = self.topic_route_table.get(topic)
        if route is None or not route.broker_datas:
            return None
        return random.choice(route.broker_datas).select_broker_addr()

    async def find_consumer_id_list(self, topic: str, group: str) -> list[str] | None:
        addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            await self.update_topic_route(topic)
            addr = self.find_broker_addr_by_topic(topic)
        if addr is None:
            return None
        try:
            return await self.api.get_consumer_id_list(addr, group)
        except ClientError as exc:
            log.warning("%s: consumer list of %s from %s failed: %s", self.client_id, group, addr, exc)
            return None

    # -- heartbeats -------------------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        data = HeartbeatData(self.client_id)
        for group in self.producers:
            data.producer_data_set.append(ProducerData(group))
        for group, consumer in self.consumers.items():
            data.consumer_data_set.append(ConsumerData(
                group, consumer.consume_type, consumer.message_model, consumer.consume_from_where,
                list(consumer.subscriptions()),
            ))  # fmt: skip
        return data

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT to every broker of the known routes (``sendHeartbeatToAllBrokerWithLock``)."""
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            if not data.producer_data_set and not data.consumer_data_set:
                return
            targets: list[tuple[str, str]] = []
            for name, addrs in list(self.broker_addr_table.items()):
                for bid, addr in addrs.items():
                    if not data.consumer_data_set and bid != MASTER_ID:
                        continue
                    targets.append((name, addr))
            results = await asyncio.gather(*(self.api.send_heartbeat(addr, data) for _, addr in targets),
                                           return_exceptions=True)  # fmt: skip
        for (name, addr), result in zip(targets, results, strict=True):
            if isinstance(result, BaseException):
                log.info("%s: heartbeat to %s (%s) failed: %s", self.client_id, addr, name, result)
            else:
                self.broker_version_table[addr] = result

    # -- offsets and rebalancing ------------------------------------------------------------------

    async def persist_all_consumer_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.persist_consumer_offset()
            except Exception as exc:
                log_failure(log, exc, "%s: persisting offsets of %s", self.client_id, consumer.group)

    def rebalance_immediately(self) -> None:
        self._rebalance_wakeup.set()

    async def do_rebalance(self) -> None:
        for consumer in list(self.consumers.values()):
            try:
                await consumer.do_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log_failure(log, exc, "%s: rebalance of %s", self.client_id, consumer.group)

    async def _rebalance_service(self) -> None:
        while True:
            await wait_event(self._rebalance_wakeup, self.config.rebalance_interval)
            self._rebalance_wakeup.clear()
            await self.do_rebalance()

    # -- requests from brokers --------------------------------------------------------------------

    def _on_consumer_ids_changed(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        group = request.header.get_str("consumerGroup", "")
        log.info("%s: broker %s says the members of %s changed: rebalancing", self.client_id,
                 conn.remote_address, group)  # fmt: skip
        self.rebalance_immediately()
        return None

    def _on_reply_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """PUSH_REPLY_MESSAGE_TO_CLIENT: the reply a broker pushes to the request waiting for it; SUCCESS once
        taken (a reply nobody waits for any more is logged and still taken), SYSTEM_ERROR if it does not read."""
        received = int(time.time() * 1000)
        try:
            msg = _reply_message(request, received)
        except Exception as exc:  # a header that does not read: Java answers SYSTEM_ERROR
            log.warning("%s: unknown err when receiveReplyMsg: %s", self.client_id, exc)
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, "process reply message fail")
        correlation_id = msg.properties.get(PROPERTY_CORRELATION_ID, "")
        future = self.reply_futures.pop(correlation_id, None)
        if future is not None and not future.done():
            future.set_result(msg)
        else:
            log.warning("receive reply message, but not matched any request, CorrelationId: %s , reply from host: "
                        "%s", correlation_id, f"{msg.born_host[0]}:{msg.born_host[1]}")  # fmt: skip
        return make_response_for(request, ResponseCode.SUCCESS)

    def _on_consumer_running_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (``consumerRunningInfo``): the group's consumer here, as the admin tools show
        it; the stacks of this process's threads when ``jstackEnable``."""
        h = request.header
        group = h.get_str("consumerGroup")
        consumer = self.consumers.get(group)
        if consumer is None:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR,
                                     f"The Consumer Group <{group}> not exist in this consumer")  # fmt: skip
        info = consumer.consumer_running_info()
        info.properties[PROP_NAMESERVER_ADDR] = "".join(f"{a};" for a in self.api.namesrv_addrs())
        info.properties[PROP_CONSUME_TYPE] = consumer.consume_type.name
        info.properties[PROP_CLIENT_VERSION] = version_desc(self.config.version)  # what its requests say
        if h.get_bool("jstackEnable", False):
            info.jstack = thread_stacks()
        return make_response_for(request, ResponseCode.SUCCESS, body=json_compat.dumps_bytes(info.sorted()))

    async def _on_consume_message_directly(self, conn: RemotingConnection,
                                           request: RemotingCommand) -> RemotingCommand:  # fmt: skip
        """CONSUME_MESSAGE_DIRECTLY: the record in the body handed to the group's push consumer's listener."""
        h = request.header
        group = h.get_str("consumerGroup")
        consumer = self.consumers.get(group)
        direct = getattr(consumer, "consume_message_directly", None)
        msgs = decode_records(request.body, client=False)
        if direct is None or not msgs:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR,
                                     f"The Consumer Group <{group}> not exist in this consumer")  # fmt: skip
        result = await direct(msgs[0], h.get_str("brokerName", None) or "")
        return make_response_for(request, ResponseCode.SUCCESS, body=json_compat.dumps_bytes(result))

    def _on_get_consumer_status(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_STATUS_FROM_CLIENT (``getConsumerStatus``): the group's offsets of the topic here."""
        h = request.header
        consumer = self.consumers.get(h.get_str("group"))
        store = getattr(consumer, "offset_store", None) if consumer is not None else None
        table = dict(sorted(store.clone_offset_table(h.get_str("topic")).items())) if store is not None else {}
        body = GetConsumerStatusBody(message_queue_table=table)
        return make_response_for(request, ResponseCode.SUCCESS, body=json_compat.dumps_bytes(body))

    async def _on_reset_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        h = request.header
        topic = h.get_str("topic")
        group = h.get_str("group")
        consumer = self.consumers.get(group)
        if consumer is None or not request.body:
            return None
        body = json_compat.loads(request.body)
        table = body.get("offsetTable") if isinstance(body, dict) else None
        offsets: dict[MessageQueue, int] = {}
        if isinstance(table, dict):
            for key, value in table.items():
                mq_obj = json_compat.loads(key) if isinstance(key, str) else key
                offsets[MessageQueue.from_json(mq_obj)] = int(value)
        elif isinstance(table, list):  # the C++ variant
            for item in table:
                offsets[MessageQueue.from_json(item)] = int(item["offset"])
        await consumer.reset_offset(topic, offsets)
        return None


def _reply_message(request: RemotingCommand, received_ms: int) -> MessageExt:
    """The message of a PUSH_REPLY_MESSAGE_TO_CLIENT (``ReplyMessageRequestHeader`` and the body), as
    ``receiveReplyMessage`` builds it: a compressed body inflated, ``ARRIVE_TIME`` added to the properties."""
    h = request.header
    body = request.body or b""
    if h.get_int("sysFlag") & COMPRESSED_FLAG:
        try:
            body = decompress(body, h.get_int("sysFlag"))
        except CompressionError as exc:  # Java logs it and hands the body over as it came
            log.warning("err when uncompress constant: %s", exc)
    props = string_to_properties(h.get_str("properties", None) or "")
    props[PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(received_ms)
    msg = MessageExt(
        topic=h.get_str("topic"), body=body, flag=h.get_int("flag"), properties=props, queue_id=h.get_int("queueId"),
        born_timestamp=h.get_long("bornTimestamp"), store_timestamp=h.get_long("storeTimestamp"),
        reconsume_times=h.get_int("reconsumeTimes", None) or 0,
    )  # fmt: skip
    born, store = h.get_str("bornHost", None), h.get_str("storeHost", None)
    if born:
        msg.born_host = parse_address(born)
    if store:
        msg.store_host = parse_address(store)
    return msg
