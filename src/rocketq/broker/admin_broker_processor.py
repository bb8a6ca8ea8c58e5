"""The broker's default processor: RocketMQ's ``broker/processor/AdminBrokerProcessor`` (spec §6.9, §6.12,
§6.13, §6.16).

Answers topic administration (UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER, GET_ALL_TOPIC_CONFIG), the
offset and time queries (GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME), the orderly-consumer locks (LOCK_BATCH_MQ, UNLOCK_BATCH_MQ), consumer-group
administration, the statistics tools print (GET_TOPIC_STATS_INFO, GET_CONSUMER_CONNECTION_LIST,
GET_PRODUCER_CONNECTION_LIST, GET_CONSUME_STATS, GET_BROKER_RUNTIME_INFO, GET_BROKER_CONFIG, …), and passes
GET_BROKER_CLUSTER_INFO through to a name server. Any other code gets REQUEST_CODE_NOT_SUPPORTED with
Java's remark.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketq.broker.protocol import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    OffsetWrapper,
    ProducerConnection,
    TopicOffset,
    TopicStatsTable,
    decode_body,
    encode_body,
)
from rocketq.broker.topic_validator import SYSTEM_TOPICS, check_not_system_topic, validate_topic
from rocketq.common import json_compat
from rocketq.remoting.codes import CURRENT_VERSION, MQVersion, RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request, make_response_for
from rocketq.remoting.errors import RemotingError
from rocketq.remoting.transport import RemotingConnection
from rocketq.store.config_json import SubscriptionGroupConfig, TopicConfig

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)

Handler = Callable[[RemotingConnection, RemotingCommand], "RemotingCommand | None"]


def _version_desc(version: int) -> str:
    try:
        return MQVersion(version).name
    except ValueError:
        return f"V{version}"


class AdminBrokerProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller
        self._handlers: dict[int, Handler] = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
        }

    async def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return await self.get_broker_cluster_info(request)
        handler = self._handlers.get(request.code)
        if handler is None:
            return make_response_for(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                     f" request type {request.code} not supported")  # fmt: skip
        return handler(conn, request)

    # --- topics -----------------------------------------------------------------------------------------
    def update_and_create_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ctl = self.controller
        if ctl.broker_config.broker_role == "SLAVE":
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, "Can't modify topic or subscription group "
                                     "from slave broker, please execute it from master broker.")  # fmt: skip
        h = request.header
        topic = h.get_str("topic")
        problem = validate_topic(topic) or check_not_system_topic(topic, ctl.topic_config_manager.system_topics)
        if problem is not None:
            return make_response_for(request, *problem)
        filter_type = h.get_str("topicFilterType", "SINGLE_TAG")
        if filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            remark = f"topicFilterType must be SINGLE_TAG or MULTI_TAG, not {filter_type!r}"
            return make_response_for(request, ResponseCode.INVALID_PARAMETER, remark)
        cfg = TopicConfig(topic, read_queue_nums=h.get_int("readQueueNums"),
                          write_queue_nums=h.get_int("writeQueueNums"), perm=h.get_int("perm"),
                          topic_filter_type=filter_type, topic_sys_flag=h.get_int("topicSysFlag", 0),
                          order=h.get_bool("order", False))  # fmt: skip
        log.info("updateAndCreateTopic called by %s: %s", conn.remote_address, cfg)
        ctl.topic_config_manager.update_topic_config(cfg)
        # Java answers SUCCESS without replacing the remark of createResponseCommand (golden capture 003).
        return make_response_for(request, ResponseCode.SUCCESS, "not set any response code")

    def delete_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ctl = self.controller
        topic = request.header.get_str("topic")
        problem = validate_topic(topic) or check_not_system_topic(topic, ctl.topic_config_manager.system_topics)
        if problem is not None:
            return make_response_for(request, *problem)
        log.info("deleteTopic %s called by %s", topic, conn.remote_address)
        ctl.delete_topic(topic)
        return make_response_for(request, ResponseCode.SUCCESS)

    def get_all_topic_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        wrapper = self.controller.topic_config_manager.build_topic_config_serialize_wrapper()
        return make_response_for(request, ResponseCode.SUCCESS, ext_fields={}, body=encode_body(wrapper))

    def get_system_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topics = sorted(SYSTEM_TOPICS | self.controller.topic_config_manager.system_topics)
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body({"topicList": topics}))

    # --- offsets and times ----------------------------------------------------------------------------
    def search_offset_by_timestamp(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.header
        offset = self.controller.store.get_offset_in_queue_by_time(h.get_str("topic"), h.get_int("queueId"),
                                                                  h.get_long("timestamp"))  # fmt: skip
        return make_response_for(request, ResponseCode.SUCCESS, ext_fields={"offset": offset})

    def get_max_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.header
        offset = self.controller.store.get_max_offset_in_queue(h.get_str("topic"), h.get_int("queueId"))
        return make_response_for(request, ResponseCode.SUCCESS, ext_fields={"offset": max(offset, 0)})

    def get_min_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.header
        offset = self.controller.store.get_min_offset_in_queue(h.get_str("topic"), h.get_int("queueId"))
        # A Java store creates the queue when asked, so an unknown queue answers 0, not -1.
        return make_response_for(request, ResponseCode.SUCCESS, ext_fields={"offset": max(offset, 0)})

    def get_earliest_msg_storetime(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.header
        ts = self.controller.store.get_earliest_message_time(h.get_str("topic"), h.get_int("queueId"))
        return make_response_for(request, ResponseCode.SUCCESS, ext_fields={"timestamp": ts})

    # --- locks -------------------------------------------------------------------------------------------
    def lock_batch_mq(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            body: LockBatchRequestBody = decode_body(LockBatchRequestBody, request.body)
        except ValueError as exc:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"bad lock body: {exc}")
        locked = self.controller.rebalance_lock_manager.try_lock_batch(body.consumer_group, body.mq_set,
                                                                      body.client_id)  # fmt: skip
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(LockBatchResponseBody(locked)))

    def unlock_batch_mq(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            body: LockBatchRequestBody = decode_body(LockBatchRequestBody, request.body)
        except ValueError as exc:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"bad unlock body: {exc}")
        self.controller.rebalance_lock_manager.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return make_response_for(request, ResponseCode.SUCCESS)

    # --- groups ------------------------------------------------------------------------------------------
    def update_and_create_subscription_group(self, conn: RemotingConnection,
                                             request: RemotingCommand) -> RemotingCommand:  # fmt: skip
        try:
            cfg: SubscriptionGroupConfig = decode_body(SubscriptionGroupConfig, request.body)
        except ValueError as exc:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"bad subscription group body: {exc}")
        self.controller.subscription_group_manager.update_subscription_group_config(cfg)
        return make_response_for(request, ResponseCode.SUCCESS)

    def get_all_subscription_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        table = self.controller.subscription_group_manager.table
        body = encode_body({"dataVersion": table.data_version,
                            "subscriptionGroupTable": dict(table.subscription_group_table)})  # fmt: skip
        return make_response_for(request, ResponseCode.SUCCESS, body=body)

    def delete_subscription_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.header
        group = h.get_str("groupName")
        self.controller.subscription_group_manager.delete_subscription_group_config(group)
        if h.get_bool("removeOffset", False):
            self.controller.consumer_offset_manager.remove_group(group)
        return make_response_for(request, ResponseCode.SUCCESS)

    def get_all_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        mgr = self.controller.consumer_offset_manager
        body = encode_body({"offsetTable": {k: dict(v) for k, v in mgr.offset_table.items()}})
        return make_response_for(request, ResponseCode.SUCCESS, body=body)

    def get_all_delay_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        mgr = self.controller.store.delay_offset_manager
        body = encode_body({"offsetTable": dict(mgr.offset_table)})
        return make_response_for(request, ResponseCode.SUCCESS, body=body)

    def query_topic_consume_by_who(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic = request.header.get_str("topic")
        ctl = self.controller
        groups = ctl.consumer_manager.query_topic_consume_by_who(topic)
        groups.update(ctl.consumer_offset_manager.groups_of_topic(topic))
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body({"groupList": sorted(groups)}))

    # --- statistics --------------------------------------------------------------------------------------
    def get_topic_stats_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ctl = self.controller
        topic = request.header.get_str("topic")
        cfg = ctl.topic_config_manager.select_topic_config(topic)
        if cfg is None:
            return make_response_for(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = ctl.store
        table = TopicStatsTable()
        for i in range(cfg.write_queue_nums):
            lo = max(store.get_min_offset_in_queue(topic, i), 0)
            hi = max(store.get_max_offset_in_queue(topic, i), 0)
            ts = store.get_message_store_timestamp(topic, i, hi - 1) if hi > 0 else 0
            mq = MessageQueue(topic, ctl.broker_config.broker_name, i)
            table.offset_table[mq] = TopicOffset(lo, hi, max(ts, 0))
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(table))

    def get_consumer_connection_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = request.header.get_str("consumerGroup")
        info = self.controller.consumer_manager.get_consumer_group_info(group)
        if info is None:
            remark = f"the consumer group[{group}] not online"
            return make_response_for(request, ResponseCode.CONSUMER_NOT_ONLINE, remark)
        body = ConsumerConnection(
            connection_set=[Connection(c.client_id, c.connection.remote_address, c.language.name, c.version)
                            for c in info.channel_info_table.values()],
            subscription_table=dict(info.subscription_table), consume_type=info.consume_type,
            message_model=info.message_model, consume_from_where=info.consume_from_where,
        )  # fmt: skip
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(body))

    def get_producer_connection_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = request.header.get_str("producerGroup")
        channels = self.controller.producer_manager.group_channel_table.get(group)
        if channels is None:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = ProducerConnection([Connection(c.client_id, c.connection.remote_address, c.language.name, c.version)
                                   for c in channels.values()])  # fmt: skip
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(body))

    def get_consume_stats(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ctl = self.controller
        h = request.header
        group = h.get_str("consumerGroup")
        topic = h.get_str("topic", "")
        topics = [topic] if topic.strip() else ctl.consumer_offset_manager.topics_of_group(group)
        stats = ConsumeStats()
        store = ctl.store
        for t in topics:
            cfg = ctl.topic_config_manager.select_topic_config(t)
            if cfg is None:
                continue
            if (ctl.consumer_manager.find_subscription_data(group, t) is None
                    and ctl.consumer_manager.find_subscription_data_count(group) > 0):  # fmt: skip
                continue
            for i in range(cfg.read_queue_nums):
                broker_offset = max(store.get_max_offset_in_queue(t, i), 0)
                consumer_offset = max(ctl.consumer_offset_manager.query_offset(group, t, i), 0)
                wrapper = OffsetWrapper(broker_offset=broker_offset, consumer_offset=consumer_offset)
                if consumer_offset - 1 >= 0:
                    ts = store.get_message_store_timestamp(t, i, consumer_offset - 1)
                    if ts > 0:
                        wrapper.last_timestamp = ts
                stats.offset_table[MessageQueue(t, ctl.broker_config.broker_name, i)] = wrapper
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(stats))

    def get_broker_runtime_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(KVTable(self.runtime_info())))

    def runtime_info(self) -> dict[str, str]:
        """``prepareRuntimeInfo`` + the store's ``getRuntimeInfo``: the keys tools print."""
        ctl = self.controller
        store = ctl.store
        stats = ctl.stats
        root = ctl.store_config.root
        try:
            usage = shutil.disk_usage(root)
            disk_ratio = usage.used / usage.total if usage.total else 0.0
            capacity = f"Total : {_human(usage.total)}, Free : {_human(usage.free)}."
        except OSError:
            disk_ratio, capacity = 0.0, "unknown"
        now = time.time_ns() // 1_000_000
        info = {
            "brokerVersionDesc": _version_desc(CURRENT_VERSION),
            "brokerVersion": str(CURRENT_VERSION),
            "msgPutTotalYesterdayMorning": str(stats.put_total_yesterday_morning),
            "msgPutTotalTodayMorning": str(stats.put_total_today_morning),
            "msgPutTotalTodayNow": str(stats.put_total),
            "msgGetTotalYesterdayMorning": str(stats.get_total_yesterday_morning),
            "msgGetTotalTodayMorning": str(stats.get_total_today_morning),
            "msgGetTotalTodayNow": str(stats.get_total),
            "sendThreadPoolQueueSize": "0",
            "sendThreadPoolQueueCapacity": "10000",
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": "100000",
            "queryThreadPoolQueueSize": "0",
            "queryThreadPoolQueueCapacity": "20000",
            "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
            "pageCacheLockTimeMills": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "earliestMessageTimeStamp": str(store.get_earliest_message_time()),
            "startAcceptSendRequestTimeStamp": "0",
            "commitLogDirCapacity": capacity,
            "bootTimestamp": str(ctl.boot_timestamp),
            "runtime": _runtime(now - ctl.boot_timestamp),
            "putTps": stats.tps_string("put"),
            "getTransferedTps": stats.tps_string("get"),
            "getTotalTps": stats.tps_string("get"),
            "getFoundTps": stats.tps_string("get"),
            "getMissTps": "0.0 0.0 0.0",
            "commitLogDiskRatio": json_compat.java_double_str(disk_ratio),
            "consumeQueueDiskRatio": json_compat.java_double_str(disk_ratio),
            "commitLogMinOffset": str(store.get_min_phy_offset()),
            "commitLogMaxOffset": str(store.get_max_phy_offset()),
            "brokerRole": ctl.broker_config.broker_role,
            "heldPullRequests": str(ctl.pull_request_hold_service.held_count),
        }
        return info

    def get_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ctl = self.controller
        lines = [f"{k}={v}" for k, v in sorted(ctl.all_config_properties().items())]
        version = json_compat.dumps(ctl.topic_config_manager.data_version)
        return make_response_for(request, ResponseCode.SUCCESS, ext_fields={"version": version},
                                 body=("\n".join(lines) + "\n").encode("utf-8"))  # fmt: skip

    # --- name server pass-through ------------------------------------------------------------------------
    async def get_broker_cluster_info(self, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_INFO asked of a broker: the answer of its first reachable name server."""
        ctl = self.controller
        for addr in ctl.broker_config.namesrv_addrs():
            try:
                answer = await ctl.outer_api.client.invoke(create_request(RequestCode.GET_BROKER_CLUSTER_INFO),
                                                           timeout=3.0, addr=addr)  # fmt: skip
            except (RemotingError, OSError) as exc:
                log.warning("cluster info from %s failed: %s", addr, exc)
                continue
            return make_response_for(request, answer.code, answer.remark, ext_fields=answer.ext_fields,
                                     body=answer.body)  # fmt: skip
        return make_response_for(request, ResponseCode.SYSTEM_ERROR, "no name server answered GET_BROKER_CLUSTER_INFO")


def _human(n: int) -> str:
    """``MixAll.humanReadableByteCount(bytes, false)``."""
    if n < 1024:
        return f"{n} B"
    units = "KMGTPE"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < len(units):
        value /= 1024
        exp += 1
    return f"{value:.1f} {units[exp - 1]}iB"


def _runtime(ms: int) -> str:
    """The store's ``runtime`` text: ``[ d days, h hours, m minutes, s seconds ]``."""
    s = max(ms, 0) // 1000
    return f"[ {s // 86400} days, {s % 86400 // 3600} hours, {s % 3600 // 60} minutes, {s % 60} seconds ]"
