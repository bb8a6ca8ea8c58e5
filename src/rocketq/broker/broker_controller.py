"""The broker process: RocketMQ's ``broker/BrokerController`` (with ``ClientHousekeepingService``,
``DefaultConsumerIdsChangeListener`` and ``Broker2Client.notifyConsumerIdsChanged``) (spec §1, §11.1).

``start()``:

1. opens the store (load + recovery + dispatch, on a worker thread) and adds the built-in topics and groups;
2. listens on ``brokerIP1:listenPort`` and on ``listenPort − 2`` (the "VIP" port of clients before 4.5.1),
   both served by one processor table, except that the pull family is served on the main port only, as
   Java registers it; with ``listenPort`` 0 both take free ports, and the main one becomes ``listenPort``
   (and the port in every stored record and offset message id);
3. registers with every name server, then again every ``registerNameServerPeriod`` (30 s) and whenever a
   topic is created or changed;
4. delivers delayed messages when due (:class:`ScheduleMessageService`; its offsets are persisted every
   ``flushDelayOffsetInterval``), timer messages when due (:class:`TimerMessageService`), checks back
   unresolved transactions (:class:`TransactionalMessageCheckService`), persists consumer offsets every
   ``flushConsumerOffsetInterval`` (5 s), drops clients silent for 120 s (every 10 s), and re-checks held
   pulls every 5 s.

``shutdown()`` stops taking requests (held pulls are dropped), unregisters from the name servers, persists
the offsets and closes the store cleanly. Everything runs on one asyncio loop; store calls that may block on
disk run on worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from rocketq.broker.admin_broker_processor import AdminBrokerProcessor
from rocketq.broker.broker_config import BrokerConfig, sync_store_config
from rocketq.broker.broker_outer_api import BrokerOuterAPI
from rocketq.broker.broker_stats import BrokerStats, KeyedStats
from rocketq.broker.client_manage_processor import ClientManageProcessor
from rocketq.broker.consumer_filter_manager import ConsumerFilterManager
from rocketq.broker.consumer_manage_processor import ConsumerManageProcessor
from rocketq.broker.consumer_manager import ConsumerGroupEvent, ConsumerManager
from rocketq.broker.end_transaction_processor import EndTransactionProcessor
from rocketq.broker.loop_dispatch import LoopDispatcher
from rocketq.broker.plain_acl import PlainAccessValidator, PlainPermissionManager
from rocketq.broker.producer_manager import ProducerManager
from rocketq.broker.pull_message_processor import PullMessageProcessor
from rocketq.broker.pull_request_hold_service import PullRequestHoldService
from rocketq.broker.query_message_processor import QueryMessageProcessor
from rocketq.broker.rebalance_lock_manager import RebalanceLockManager
from rocketq.broker.reply_message_processor import ReplyMessageProcessor
from rocketq.broker.schedule_message_service import ScheduleMessageService
from rocketq.broker.send_message_processor import SendMessageProcessor
from rocketq.broker.slave_synchronize import SLAVE_SYNC_DELAY_S, SLAVE_SYNC_INTERVAL_S, SlaveSynchronize
from rocketq.broker.subscription_group_manager import BrokerSubscriptionGroupManager
from rocketq.broker.timer_message_service import TIMER_TOPIC, TimerMessageService
from rocketq.broker.topic_config_manager import BrokerTopicConfigManager
from rocketq.broker.topic_validator import PERM_READ, PERM_WRITE
from rocketq.broker.transactional_message_check_service import TransactionalMessageCheckService
from rocketq.common import json_compat
from rocketq.common.errors import RocketqError
from rocketq.common.message import MessageExt, MessageExtBatch
from rocketq.common.mixall import RMQ_SYS_SCHEDULE_TOPIC
from rocketq.remoting.codes import RequestCode
from rocketq.remoting.command import RemotingCommand, create_request
from rocketq.remoting.errors import RemotingError
from rocketq.remoting.transport import ProcessorTable, RemotingConnection, RemotingServer, RequestProcessor
from rocketq.store.commit_log import PutMessageResult
from rocketq.store.config_json import TopicConfig, write_config_file
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import PROPERTY_ALIASES, MessageStoreConfig, update_properties_text

log = logging.getLogger(__name__)

HOUSEKEEPING_INTERVAL_S = 10.0
FIND_MASTER_INTERVAL_S = 3.0
#: The first retry of a registration a name server did not take (doubling up to the registration period).
REGISTER_RETRY_FIRST_S = 1.0


class BrokerStartError(RocketqError):
    """The broker cannot start as configured (a port it cannot listen on, say)."""

STATS_INTERVAL_S = 5.0
#: Codes Java serves on the main port only (NettyRemotingServer without the fast server's registration).
MAIN_PORT_ONLY = frozenset({RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE})


class _VipProcessorTable(ProcessorTable):
    """The VIP listener's view of the main table: the same processors, without the pull family."""

    def __init__(self, main: ProcessorTable) -> None:
        super().__init__()
        self._main = main
        self.rpc_hooks = main.rpc_hooks  # the same list: a hook registered once checks both listeners

    def register(self, code: int, processor: RequestProcessor) -> None:
        self._main.register(code, processor)

    def lookup(self, code: int) -> RequestProcessor | None:
        if code in MAIN_PORT_ONLY:
            return self._main.default
        return self._main.lookup(code)

    def codes(self) -> list[int]:
        return [c for c in self._main.codes() if c not in MAIN_PORT_ONLY]


class BrokerController:
    """One broker: its store, managers, processors, listeners and periodic services."""

    def __init__(self, broker_config: BrokerConfig, store_config: MessageStoreConfig | None = None) -> None:
        self.broker_config = broker_config
        self.store_config = store_config if store_config is not None else MessageStoreConfig()
        sync_store_config(broker_config, self.store_config)
        self.store = MessageStore(self.store_config)
        #: Where UPDATE_BROKER_CONFIG writes its changes (BrokerPathConfigHelper.brokerConfigPath): the broker.conf
        #: it was started with (the CLI sets it), else ``<storePathRootDir>/config/broker.properties``.
        self.config_file: Path | None = None
        self.store.check_topic_configs = False  # the send processors check queues against the topic configs
        self.stats = BrokerStats(lambda: self.store.put_message_times_total)
        #: VIEW_BROKER_STATS_DATA's TOPIC_PUT_NUMS (by topic; filled at start) and GROUP_GET_NUMS (topic@group)
        self.topic_put_stats = KeyedStats()
        self.group_get_stats = KeyedStats()
        self.boot_timestamp = time.time_ns() // 1_000_000
        self.topic_config_manager = BrokerTopicConfigManager(
            self.store.topic_config_manager, broker_config,
            schedule_queue_nums=len(self.store_config.delay_level_table()))  # fmt: skip
        self.topic_config_manager.on_change = self._on_topic_change
        self.subscription_group_manager = BrokerSubscriptionGroupManager(self.store.subscription_group_manager,
                                                                         broker_config)  # fmt: skip
        self.consumer_offset_manager = self.store.consumer_offset_manager
        self.consumer_manager = ConsumerManager(self._on_consumer_ids_change)
        self.consumer_filter_manager = ConsumerFilterManager(broker_config.filter_data_clean_time_span)
        self.producer_manager = ProducerManager()
        self.rebalance_lock_manager = RebalanceLockManager()
        self.pull_request_hold_service = PullRequestHoldService(self.store.get_max_offset_in_queue)
        self.schedule_message_service = ScheduleMessageService(self)
        self.timer_message_service = TimerMessageService(self)
        self.transactional_message_check_service = TransactionalMessageCheckService(self)
        self.transactional_message_service = self.transactional_message_check_service.transactional_message_service
        self.outer_api = BrokerOuterAPI(broker_config)
        self.slave_synchronize = SlaveSynchronize(self)
        self._loop_dispatcher: LoopDispatcher | None = None
        #: The plain ACL's accounts while ``aclEnable`` is on (made at start).
        self.acl: PlainPermissionManager | None = None
        self.grpc_service: Any = None  # rocketq.proxy.grpc_service.GrpcMessagingService, with grpcServerPort

        self.send_message_processor = SendMessageProcessor(self)
        self.reply_message_processor = ReplyMessageProcessor(self, self.send_message_processor)
        self.pull_message_processor = PullMessageProcessor(self)
        self.query_message_processor = QueryMessageProcessor(self)
        self.client_manage_processor = ClientManageProcessor(self)
        self.consumer_manage_processor = ConsumerManageProcessor(self)
        self.end_transaction_processor = EndTransactionProcessor(self)
        self.admin_broker_processor = AdminBrokerProcessor(self)
        self.processors = ProcessorTable()
        self._register_processors()
        idle = float(broker_config.server_channel_max_idle_time_seconds) or None
        host = broker_config.broker_ip1
        self.remoting_server = RemotingServer(host, broker_config.listen_port, processors=self.processors,
                                              idle_timeout=idle, name="broker")  # fmt: skip
        self.fast_remoting_server = RemotingServer(host, broker_config.vip_port,
                                                   processors=_VipProcessorTable(self.processors),
                                                   idle_timeout=idle, name="broker-vip")  # fmt: skip
        for server in (self.remoting_server, self.fast_remoting_server):
            server.add_close_listener(self._on_connection_closed)

        #: Puts waiting for their flush (SYNC_FLUSH): the send "queue" that flow control watches.
        self.pending_puts = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._periodic: list[asyncio.Task[None]] = []
        self._register_lock: asyncio.Lock | None = None
        self._register_pending = False
        self._started = False
        self._store_open = False
        self._serving = False

    # --- wiring ---------------------------------------------------------------------------------------
    def _register_processors(self) -> None:
        t = self.processors
        send = self.send_message_processor.process_request
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                     RequestCode.CONSUMER_SEND_MSG_BACK):  # fmt: skip
            t.register(code, send)
        for code in MAIN_PORT_ONLY:
            t.register(code, self.pull_message_processor.process_request)
        for code in (RequestCode.QUERY_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID):
            t.register(code, self.query_message_processor.process_request)
            t.json_answers.add(code)
        for code in (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT, RequestCode.CHECK_CLIENT_CONFIG):
            t.register(code, self.client_manage_processor.process_request)
        for code in (RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.UPDATE_CONSUMER_OFFSET,
                     RequestCode.QUERY_CONSUMER_OFFSET):  # fmt: skip
            t.register(code, self.consumer_manage_processor.process_request)
        for code in (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
            t.register(code, self.reply_message_processor.process_request)
        t.register(RequestCode.END_TRANSACTION, self.end_transaction_processor.process_request)
        t.register_default(self.admin_broker_processor.process_request)

    # --- addresses ------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self.remoting_server.port

    @property
    def vip_port(self) -> int:
        return self.fast_remoting_server.port

    @property
    def broker_addr(self) -> str:
        return self.broker_config.broker_addr

    @property
    def store_host(self) -> tuple[str, int]:
        return (self.broker_config.broker_ip1, self.broker_config.listen_port)

    # --- life cycle -----------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            raise RuntimeError("broker already started")
        self._started = True
        self._register_lock = asyncio.Lock()
        if self.broker_config.acl_enable:
            self.acl = await asyncio.to_thread(PlainPermissionManager, self.acl_home())
            self.processors.rpc_hooks.append(PlainAccessValidator(self.acl))
            log.info("ACL enabled: accounts from %s", self.acl.default_file.parent)
        await asyncio.to_thread(self._open_store)
        self._store_open = True
        self.topic_put_stats = KeyedStats(self.topic_put_totals())  # what the store held before counts not
        try:
            self.topic_config_manager.add_builtin_topics()
            self.subscription_group_manager.add_builtin_groups()
            self.pull_request_hold_service.start()
            if not self.is_slave:  # a slave's copies come from its master (handleScheduleMessageService)
                self.schedule_message_service.start()
                self.timer_message_service.start()
                self.transactional_message_check_service.start()
            self.store.message_arriving_wanted = self._arrival_wanted
            self.store.message_arriving_property_topics = frozenset({TIMER_TOPIC})  # its due time
            self.store.message_arriving_listener = self._on_message_arriving
            hold = self.pull_request_hold_service
            self._loop_dispatcher = LoopDispatcher(self.store, asyncio.get_running_loop(), hold.drain_arrivals,
                                                   lambda: bool(hold.pull_request_table))  # fmt: skip
            self._loop_dispatcher.install()
            await self.remoting_server.start()
            try:
                await self.fast_remoting_server.start()
            except OSError as exc:
                log.warning("VIP listener on port %d not started: %s", self.broker_config.vip_port, exc)
            if self.broker_config.listen_port == 0:
                ha_port = self.broker_config.ha_listen_port  # 0 (listenPort + 1) stays "any free port" here
                self.broker_config.listen_port = self.remoting_server.port
                self.store_config.listen_port = self.remoting_server.port
            else:
                ha_port = self.broker_config.ha_listen_port or self.broker_config.listen_port + 1
            await asyncio.to_thread(self._start_ha, ha_port)
            await self._start_grpc()
            self._serving = True
            await self.register_broker_all()
        except BaseException:
            await self.shutdown()
            raise
        period = max(10.0, min(self.broker_config.register_name_server_period / 1000.0, 60.0))
        if self.is_slave:
            self._periodic += [
                self._every(SLAVE_SYNC_INTERVAL_S, self.slave_synchronize.sync_all, "slave synchronize",
                            delay=SLAVE_SYNC_DELAY_S),
                self._every(FIND_MASTER_INTERVAL_S, self._find_master, "find the master"),
            ]  # fmt: skip
        self._periodic += [
            self._every(self._registration_waits(period), self.register_broker_all, "register broker"),
            self._every(self.broker_config.flush_consumer_offset_interval / 1000.0, self._persist_offsets,
                        "persist consumer offsets", delay=10.0),
            self._every(HOUSEKEEPING_INTERVAL_S, self._scan_not_active_channels, "client housekeeping"),
            self._every(STATS_INTERVAL_S, self._sample_stats, "broker stats"),
        ]  # fmt: skip
        log.info("The broker[%s, %s] boot success. serializeType=JSON and name server is %s",
                 self.broker_config.broker_name, self.broker_addr, self.broker_config.namesrv_addr)  # fmt: skip

    @property
    def is_slave(self) -> bool:
        return self.store_config.broker_role == "SLAVE"

    def _start_ha(self, port: int) -> None:
        """Replication (``HAService.start``): a master listens for slaves on brokerIP2 (its address in
        ``haServerAddr``); a slave follows ``haMasterAddress``, else the master its name servers name."""
        cfg = self.broker_config
        master_address = self.store_config.ha_master_address or None
        try:
            self.store.start_ha(cfg.broker_ip2, port, master_address)
        except OSError as exc:
            if cfg.ha_listen_port or not port:  # a port asked for by name, or none free at all
                raise BrokerStartError(f"cannot listen for slaves on {cfg.broker_ip2}:{port} (haListenPort): "
                                       f"{exc.strerror or exc}") from exc  # fmt: skip
            # listenPort + 1 by default only: slaves learn the port from the name servers (haServerAddr).
            log.warning("port %d (listenPort + 1) is taken (%s): listening for slaves on another port, announced "
                        "to the name servers; set haListenPort to choose one", port, exc.strerror or exc)  # fmt: skip
            self.store.start_ha(cfg.broker_ip2, 0, master_address)
        if self.store.ha_service is not None:
            cfg.ha_listen_port = self.store.ha_service.port

    async def _start_grpc(self) -> None:
        """RocketMQ 5's gRPC endpoint (``grpcServerPort``), for 5.x clients: rocketq.proxy."""
        cfg = self.broker_config
        if cfg.grpc_server_port < 0:
            return
        if cfg.acl_enable:
            raise BrokerStartError("grpcServerPort: the gRPC endpoint does not check ACL yet; it cannot run with "
                                   "aclEnable=true")  # fmt: skip
        if self.is_slave:
            raise BrokerStartError("grpcServerPort: a slave serves no gRPC clients (5.x's proxy sends to masters)")
        try:
            from rocketq.proxy.grpc_service import GrpcMessagingService
        except ImportError as exc:
            raise BrokerStartError(f"grpcServerPort: the gRPC endpoint needs grpcio and protobuf "
                                   f"(pip install 'rocketq[grpc]'): {exc}") from exc  # fmt: skip
        service = GrpcMessagingService(self)
        try:
            cfg.grpc_server_port = await service.start(cfg.broker_ip1, cfg.grpc_server_port)
        except OSError as exc:
            raise BrokerStartError(f"grpcServerPort: {exc}") from exc
        self.grpc_service = service
        log.info("gRPC endpoint for RocketMQ 5 clients on %s:%d", cfg.broker_ip1, cfg.grpc_server_port)

    def acl_home(self) -> str:
        """Where the ACL files are (``conf/plain_acl.yml``, ``conf/acl/``): ``rocketmqHome`` (``ROCKETMQ_HOME``),
        else the store's root directory."""
        return self.broker_config.rocketmq_home or str(self.store_config.root)

    def _open_store(self) -> None:
        self.store.load()
        self.consumer_filter_manager.attach(self.store.consumer_filter_manager)
        self.timer_message_service.load()
        self.store.start()

    async def shutdown(self) -> None:
        """Stop serving, unregister, persist and close the store (safe to call twice)."""
        for task in self._periodic:
            task.cancel()
        for task in self._periodic:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._periodic = []
        await self.transactional_message_check_service.shutdown()
        await self.schedule_message_service.shutdown()
        await self.timer_message_service.shutdown()
        await self.pull_request_hold_service.shutdown()
        if self.grpc_service is not None:
            grpc_service, self.grpc_service = self.grpc_service, None
            await grpc_service.stop()
        await self.remoting_server.stop()
        await self.fast_remoting_server.stop()
        if self.acl is not None:
            self.acl.shutdown()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._serving:
            self._serving = False
            await self.outer_api.unregister_broker_all()
        await self.outer_api.close()
        if self._store_open:
            self._store_open = False
            if self._loop_dispatcher is not None:
                self._loop_dispatcher.uninstall()
                self._loop_dispatcher = None
            self.store.message_arriving_listener = None
            self.store.message_arriving_wanted = None
            self.consumer_filter_manager.to_file()  # the store writes consumerFilter.json as it closes
            await asyncio.to_thread(self.store.close)
        self._started = False

    async def __aenter__(self) -> BrokerController:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # --- periodic services ----------------------------------------------------------------------------
    def _every(self, interval: float | Callable[[], float], job: Callable[[], Awaitable[None] | None], what: str,
               delay: float | None = None) -> asyncio.Task[None]:  # fmt: skip
        """Run *job* every *interval* seconds (a function: asked before each wait), the first time after *delay*
        (default: the interval), until cancelled; a failure is logged and the job runs again at its time."""
        next_wait = interval if callable(interval) else lambda: interval

        async def loop() -> None:
            await asyncio.sleep(next_wait() if delay is None else delay)
            while True:
                try:
                    result = job()
                    if asyncio.iscoroutine(result):
                        await result
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s failed", what)
                await asyncio.sleep(next_wait())

        return asyncio.get_running_loop().create_task(loop(), name=f"broker {what}")

    def _registration_waits(self, period: float) -> Callable[[], float]:
        """The waits between periodic registrations: *period* seconds, the first after 10 s (Java's schedule).
        While a name server has not taken the last registration (it was not up yet, as when both are started
        together), it is asked again sooner: after 1 s, then 2, 4, ... up to *period*, so that clients find the
        broker within seconds of its name server coming up, not half a minute later."""
        retry = REGISTER_RETRY_FIRST_S
        first = min(10.0, period)

        def wait() -> float:
            nonlocal retry, first
            if not self.outer_api.not_registered():
                retry, waited = REGISTER_RETRY_FIRST_S, first
            else:
                waited, retry = min(retry, period), min(2 * retry, period)
            first = period
            return waited

        return wait

    async def _persist_offsets(self) -> None:
        await asyncio.to_thread(self.consumer_offset_manager.persist)
        if self.consumer_filter_manager.dirty:  # Java persists it on the same schedule
            await asyncio.to_thread(self.consumer_filter_manager.persist)

    def _scan_not_active_channels(self) -> None:
        for conn in self.consumer_manager.scan_not_active_channel() + self.producer_manager.scan_not_active_channel():
            conn.close()
        if self.grpc_service is not None:
            self.grpc_service.expire_idle_clients(self.broker_config.server_channel_max_idle_time_seconds or 120)

    def _sample_stats(self, now: float | None = None) -> None:
        """Every few seconds: the broker's TPS samples, the snapshots of the keyed stats that are due and the
        store's minute of put times (*now*: a ``time.monotonic()`` value, for tests)."""
        self.stats.sample(now)
        self.store.put_get_times.roll_if_due(now)
        self.topic_put_stats.totals = self.topic_put_totals()
        self.topic_put_stats.sample(now)
        self.group_get_stats.sample(now)

    def topic_put_totals(self) -> dict[str, int]:
        """Messages each topic's consume queues hold up to now (their max offsets): puts are counted here, at
        dispatch, rather than on the send path."""
        return {topic: self.topic_put_total(topic) for topic in list(self.store.consume_queue_table)}

    def topic_put_total(self, topic: str) -> int:
        queues = self.store.consume_queue_table.get(topic, {})
        return sum(cq.get_max_offset_in_queue() for cq in list(queues.values()))

    def _spawn(self, coro: Awaitable[Any], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- name servers ---------------------------------------------------------------------------------
    def topic_config_wrapper(self, only: TopicConfig | None = None) -> dict[str, object]:
        """``registerBrokerAll``'s wrapper (``registerIncrementBrokerData``'s with *only*: that topic alone); a
        broker without read or write permission announces its own perm."""
        wrapper = self.topic_config_manager.build_topic_config_serialize_wrapper(only)
        perm = self.broker_config.broker_permission
        if perm & (PERM_READ | PERM_WRITE) != PERM_READ | PERM_WRITE:
            table = wrapper["topicConfigTable"]
            assert isinstance(table, dict)
            wrapper["topicConfigTable"] = {name: dataclasses.replace(cfg, perm=perm) for name, cfg in table.items()}
        return wrapper

    async def register_increment_broker_data(self, cfg: TopicConfig) -> None:
        """``registerIncrementBrokerData``: REGISTER_BROKER to every name server with just *cfg* (this broker's
        perm when it lacks read or write) and the current data version, awaited: a name server adds or updates the
        topics a registration names and keeps the others, so one topic is all it needs for a new or changed one
        (the whole table of a broker with thousands of topics cost tens of ms to write and to read each time)."""
        lock = self._register_lock
        if lock is None:
            return
        async with lock:
            answers = await self.outer_api.register_broker_all(self.topic_config_wrapper(cfg))
            if answers:
                self._on_registered(answers[0])

    async def register_broker_all(self) -> None:
        """REGISTER_BROKER to every name server (one registration at a time; a change during one queues another)."""
        lock = self._register_lock
        if lock is None:
            return
        if lock.locked():
            self._register_pending = True
            return
        async with lock:
            while True:
                self._register_pending = False
                answers = await self.outer_api.register_broker_all(self.topic_config_wrapper())
                if answers:
                    self._on_registered(answers[0])
                if not self._register_pending:
                    break

    async def _find_master(self) -> None:
        """A slave that registered before its master knows no master until a name server names it: it asks again
        every few seconds instead of at the next periodic registration (30 s; Java waits for that)."""
        if self.slave_synchronize.master_addr is None:
            await self.register_broker_all()

    def _on_registered(self, answer: RemotingCommand) -> None:
        """A name server's answer to REGISTER_BROKER (the first that answered, as in Java): its
        ``ORDER_TOPIC_CONFIG`` table says which topics are ordered (``updateOrderTopicConfig``; no table, no
        change), and a slave learns its master's addresses from it (the HA one unless ``haMasterAddress`` is set,
        and the remoting one for :class:`SlaveSynchronize`)."""
        order_topics = _kv_table_keys(answer.body)
        if order_topics is not None:
            self.topic_config_manager.update_order_topic_config(order_topics)
        if not self.is_slave:
            return
        ext = answer.ext_fields or {}
        ha_addr = ext.get("haServerAddr") or None
        configured = self.store_config.ha_master_address
        if ha_addr and not (configured and len(configured) >= 6):
            self.store.update_ha_master_address(str(ha_addr))
        self.slave_synchronize.master_addr = str(ext.get("masterAddr") or "") or None

    def _on_topic_change(self, cfg: TopicConfig) -> None:
        if self._started and self._register_lock is not None:
            self._spawn(self.register_broker_all(), f"register after topic change {cfg.topic_name}")

    def _arrival_wanted(self, topic: str, queue_id: int) -> bool:
        """The store's ``message_arriving_wanted`` (dispatch thread): the delay and timer queues, and the queues
        a pull is held on; the records of any other queue need not be told one by one."""
        if topic in (RMQ_SYS_SCHEDULE_TOPIC, TIMER_TOPIC):
            return True
        grpc = self.grpc_service
        return self.pull_request_hold_service.is_held_on(topic, queue_id) or \
            (grpc is not None and grpc.waits_on(topic))  # fmt: skip

    def _on_message_arriving(self, topic: str, queue_id: int, max_offsets: Sequence[int], tags_codes: Sequence[int],
                             store_timestamps: Sequence[int],
                             properties: Sequence[dict[str, str] | None] | None) -> None:  # fmt: skip
        """The store's arrival listener (the dispatching thread), once a queue and dispatch batch: wake held pulls,
        and the delivery thread of a parked message when it is due before the time that thread sleeps until."""
        if topic == RMQ_SYS_SCHEDULE_TOPIC:
            for code in tags_codes:  # a parked unit's tag code: its due time
                self.schedule_message_service.notify_parked(queue_id, code)
        elif topic == TIMER_TOPIC:
            for i, offset in enumerate(max_offsets):
                self.timer_message_service.notify_parked(offset - 1, properties[i] if properties is not None else None)
        self.pull_request_hold_service.notify_messages_arriving_threadsafe(topic, queue_id, max_offsets, tags_codes,
                                                                           properties)  # fmt: skip
        grpc = self.grpc_service
        if grpc is not None and grpc.waits_on(topic):
            grpc.on_arrival(topic)

    # --- clients --------------------------------------------------------------------------------------
    def _on_connection_closed(self, conn: RemotingConnection) -> None:
        """``ClientHousekeepingService.onChannelClose``."""
        self.pull_request_hold_service.on_connection_closed(conn)
        self.producer_manager.do_channel_close_event(conn)
        self.consumer_manager.do_channel_close_event(conn)

    def _on_consumer_ids_change(self, event: ConsumerGroupEvent, group: str, *args: Any) -> None:
        """``DefaultConsumerIdsChangeListener``: on CHANGE, NOTIFY_CONSUMER_IDS_CHANGED to each channel; on REGISTER
        (every heartbeat) and UNREGISTER (the group's last client left), the group's SQL92 filters."""
        if event is ConsumerGroupEvent.REGISTER and args:
            self.consumer_filter_manager.register_group(group, args[0])
            return
        if event is ConsumerGroupEvent.UNREGISTER:
            self.consumer_filter_manager.unregister(group)
            return
        enabled = self.broker_config.notify_consumer_ids_changed_enable
        if event is not ConsumerGroupEvent.CHANGE or not args or not enabled:
            return
        for conn in args[0]:
            if not conn.closed:
                self._spawn(self.notify_consumer_ids_changed(conn, group), f"notify {group}")

    async def notify_consumer_ids_changed(self, conn: RemotingConnection, group: str) -> None:
        """``Broker2Client.notifyConsumerIdsChanged``: a one-way request on the client's connection."""
        request = create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True)
        try:
            await conn.invoke_oneway(request)
        except (RemotingError, OSError) as exc:
            log.warning("notifyConsumerIdsChanged to %s failed: %s", conn.remote_address, exc)

    # --- store helpers --------------------------------------------------------------------------------
    async def put_message(self, msg: MessageExt) -> PutMessageResult:
        """Store one message; a timer message goes to the timer topic first (5.x's put hook)."""
        put = self.put_message_now(msg)
        return put if isinstance(put, PutMessageResult) else await put

    def put_message_now(self, msg: MessageExt) -> PutMessageResult | Awaitable[PutMessageResult]:
        """:meth:`put_message` for a caller that does not wait when it need not: the message is appended at once;
        under ASYNC_FLUSH this returns its result, under SYNC_FLUSH an awaitable of it (done once flushed)."""
        refused = self.timer_message_service.transform(msg)
        if refused is not None:
            return refused
        put = self.store.put_message_then(msg)  # appended now; a wait for the flush or a slave comes back
        return put if isinstance(put, PutMessageResult) else self._counted(put)

    def put_message_sync(self, msg: MessageExt) -> PutMessageResult:
        """:meth:`put_message` from a service thread (delay and timer delivery): blocks until stored (and, under
        SYNC_FLUSH, flushed)."""
        refused = self.timer_message_service.transform(msg)
        if refused is not None:
            return refused
        return self.store.put_message(msg)

    async def put_messages(self, msgs: list[MessageExt] | MessageExtBatch) -> PutMessageResult:
        put = self.put_messages_now(msgs)
        return put if isinstance(put, PutMessageResult) else await put

    def put_messages_now(self, msgs: list[MessageExt] | MessageExtBatch,
                         ) -> PutMessageResult | Awaitable[PutMessageResult]:  # fmt: skip
        """A producer batch, as :meth:`put_message_now` stores one message."""
        batch = msgs if isinstance(msgs, MessageExtBatch) else list(msgs)
        put = self.store.put_messages_then(batch)
        return put if isinstance(put, PutMessageResult) else self._counted(put)

    async def _counted(self, put: Awaitable[PutMessageResult]) -> PutMessageResult:
        """A put's wait for its flush (or its slave), counted in ``pending_puts`` meanwhile."""
        self.pending_puts += 1
        try:
            return await put
        finally:
            self.pending_puts -= 1

    def put_message_nowait(self, msg: MessageExt) -> None:
        """A put whose outcome nobody waits for (offset-moved events)."""
        self.store.put_message_async(msg)

    def delete_topic(self, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER: forget the topic, its consumer offsets and its consume queues."""
        self.topic_config_manager.delete_topic_config(topic)
        offsets = self.consumer_offset_manager
        with offsets._lock:  # the manager's own lock: the periodic persist may be reading the table
            for group in offsets.groups_of_topic(topic):
                offsets.offset_table.pop(offsets.key(topic, group), None)
        self.store.delete_topics([topic])

    def update_config(self, props: dict[str, str], fixed: frozenset[str] = frozenset()) -> dict[str, str]:
        """UPDATE_BROKER_CONFIG's changes, as Java's ``Configuration.update``: each setting the broker or its
        store knows takes the new value, one that is unknown or does not parse is skipped; a ``brokerPermission``
        change is announced to the name servers at once. The settings named in *fixed* are used at start only:
        they are checked but left as they are until a restart. Returns the settings taken (fixed ones included),
        as :meth:`persist_config` writes them."""
        known = self.all_config_properties()
        taken: dict[str, str] = {}
        for key, raw in props.items():
            if key not in known and PROPERTY_ALIASES.get(key) not in known:
                log.warning("updateBrokerConfig: %s is not a broker setting: skipped", key)
                continue
            ok = True
            for cfg in (self.broker_config, self.store_config):
                try:
                    (dataclasses.replace(cfg) if key in fixed else cfg).apply_properties({key: raw})
                except RocketqError as exc:
                    log.warning("updateBrokerConfig: %s=%r skipped: %s", key, raw, exc)
                    ok = False
            if ok:
                taken[PROPERTY_ALIASES.get(key, key)] = raw.strip()
        sync_store_config(self.broker_config, self.store_config)
        now = self.all_config_properties()  # a running setting as it was taken (Java persists the objects' values)
        taken = {k: v if k in fixed else now[k] for k, v in taken.items()}
        if "brokerPermission" in taken:
            self.topic_config_manager.data_version.next_version()
            if self._started and self._register_lock is not None:
                self._spawn(self.register_broker_all(), "register after a brokerPermission change")
        return taken

    def persist_config(self, changes: dict[str, str]) -> Path:
        """``Configuration.persist`` of UPDATE_BROKER_CONFIG's *changes*: written into :attr:`config_file`, so a
        restart keeps them. Unlike 4.9.4, which rewrites the file with every setting it has, the file's own lines
        and comments stay; a changed setting's line is replaced and a new one appended. Returns the file."""
        path = self.config_file or self.store_config.root / "config" / "broker.properties"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        write_config_file(path, update_properties_text(text, changes))
        return path

    def all_config_properties(self) -> dict[str, str]:
        """Every broker and store setting under its ``broker.conf`` name (GET_BROKER_CONFIG)."""
        props: dict[str, str] = {}
        for name, f in MessageStoreConfig.field_names().items():
            value = getattr(self.store_config, f.name)
            if value is not None:  # Java's Properties leave a null out
                props[name] = _text(value)
        props["storePathCommitLog"] = str(self.store_config.commit_log_path)  # the path in use, when one is set
        for name, f in BrokerConfig.property_names().items():
            value = getattr(self.broker_config, f.name)
            if value is not None:
                props[name] = _text(value)
        # the HA port in use (a master's), else listenPort + 1, as BrokerStartup sets it (a slave's shows it too)
        props["haListenPort"] = str(self.broker_config.ha_listen_port or self.broker_config.listen_port + 1)
        # Java's settings rocketq has no use for, as set or at their 4.9.4 defaults: tools read them (mqadmin
        # exportConfigs fails with a NullPointerException on a missing one).
        for name, value in self.broker_config.java_only.items():
            props.setdefault(name, value)
        return props


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _kv_table_keys(body: bytes | None) -> set[str] | None:
    """The keys of a ``KVTable`` body (``{"table":{...}}``), or None when there is none (or it does not parse)."""
    if not body:
        return None
    try:
        table = json_compat.loads(body).get("table")
    except (json_compat.JsonDecodeError, AttributeError):
        return None
    return {str(k) for k in table} if hasattr(table, "keys") else None
