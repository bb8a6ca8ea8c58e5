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

import inspect
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rocketq.broker.plain_acl import AclError, PlainAccessConfig, PlainPermissionManager, acl_config_body
from rocketq.broker.protocol import (
    Connection,
    ConsumeQueueData,
    ConsumerConnection,
    ConsumeStats,
    ConsumeStatsList,
    GetConsumerStatusBody,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    MessageQueueForC,
    OffsetWrapper,
    ProducerConnection,
    ProducerInfo,
    ProducerTableInfo,
    QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody,
    QueueTimeSpan,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    TopicOffset,
    TopicStatsTable,
    decode_body,
    encode_body,
)
from rocketq.broker.query_message_processor import select_one_message_by_offset
from rocketq.broker.topic_validator import SYSTEM_TOPICS, check_not_system_topic, validate_topic
from rocketq.common import json_compat
from rocketq.common.codec import decode_record
from rocketq.common.errors import RocketqError
from rocketq.common.javacompat import hashmap_ordered
from rocketq.common.message import PROPERTY_REAL_TOPIC, PROPERTY_TRANSACTION_CHECK_TIMES, MessageExt
from rocketq.common.message_id import MessageIdError, decode_offset_message_id
from rocketq.common.mixall import RMQ_SYS_TRANS_HALF_TOPIC, human_byte_count
from rocketq.remoting.codes import CURRENT_VERSION, LanguageCode, MQVersion, RequestCode, ResponseCode, version_desc
from rocketq.remoting.command import RemotingCommand, create_request, make_response_for
from rocketq.remoting.errors import RemotingError, RemotingTimeoutError
from rocketq.remoting.transport import RemotingConnection
from rocketq.store.clean_service import store_path_used_ratio
from rocketq.store.commit_log import PutMessageStatus
from rocketq.store.config_json import SubscriptionGroupConfig, TopicConfig
from rocketq.store.store_config import parse_properties

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)

# 4.x response codes of the ACL admin codes (209-211 were given other names in 5.x).
ACL_UPDATE_FAILED = 209  # UPDATE_AND_CREATE_ACL_CONFIG_FAILED
ACL_DELETE_FAILED = 210  # DELETE_ACL_CONFIG_FAILED
ACL_WHITE_FAILED = 211  # UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED


def _split_list(text: str | None) -> list[str] | None:
    """``UtilAll.split(text, ",")``: items trimmed, blanks dropped; None stays None."""
    if text is None:
        return None
    return [item.strip() for item in text.split(",") if item.strip()]

_LONG_MAX = (1 << 63) - 1  # Java's Long.MAX_VALUE

Handler = Callable[[RemotingConnection, RemotingCommand], "RemotingCommand | Awaitable[RemotingCommand] | None"]

#: ``Broker2Client.callClient``'s wait for a consumer's answer (seconds).
CALL_CLIENT_TIMEOUT = 10.0
#: ``Broker2Client.getConsumeStatus``: how long each consumer has to give its offsets.
GET_CONSUMER_STATUS_TIMEOUT = 5.0

#: Settings ``UPDATE_BROKER_CONFIG`` leaves alone: they were used at start (sockets, files, identity), and
#: rocketq derives its announced address from some of them, where Java's copies just go stale.
FIXED_AT_START = frozenset({"listenPort", "haListenPort", "brokerIP1", "brokerIP2", "brokerName",
                            "brokerClusterName", "brokerId", "storePathRootDir", "storePathCommitLog",
                            "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "namesrvAddr"})  # fmt: skip



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
            RequestCode.QUERY_CORRECTION_OFFSET: self.query_correction_offset,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_CONSUME_STATS: self.fetch_all_consume_stats_in_broker,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
            RequestCode.QUERY_CONSUME_TIME_SPAN: self.query_consume_time_span,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.get_consumer_status,
            RequestCode.RESUME_CHECK_HALF_MESSAGE: self.resume_check_half_message,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
            RequestCode.GET_ALL_PRODUCER_INFO: self.get_all_producer_info,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_and_create_access_config,
            RequestCode.DELETE_ACL_CONFIG: self.delete_access_config,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.get_broker_acl_config_version,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white_addrs_config,
            RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: self.get_broker_cluster_acl_config,
        }

    async def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.GET_BROKER_CLUSTER_INFO:
            return await self.get_broker_cluster_info(request)
        handler = self._handlers.get(request.code)
        if handler is None:
            return make_response_for(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                     f" request type {request.code} not supported")  # fmt: skip
        answer = handler(conn, request)
        if inspect.isawaitable(answer):
            return await answer
        return answer

    # --- topics -----------------------------------------------------------------------------------------
    async def update_and_create_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ctl = self.controller
        refused = self._refused_on_slave(request)
        if refused is not None:
            return refused
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
        ctl.topic_config_manager.update_topic_config(cfg, announce=False)
        # As Java: the name servers have the topic's route before the answer (registerIncrementBrokerData).
        await ctl.register_increment_broker_data(cfg)
        # Java answers SUCCESS without replacing the remark of createResponseCommand (golden capture 003).
        return make_response_for(request, ResponseCode.SUCCESS, "not set any response code")

    def _refused_on_slave(self, request: RemotingCommand) -> RemotingCommand | None:
        """``validateSlave``: a slave's topics and groups are its master's copies (SlaveSynchronize)."""
        if self.controller.broker_config.broker_role != "SLAVE":
            return None
        return make_response_for(request, ResponseCode.SYSTEM_ERROR, "Can't modify topic or subscription group "
                                 "from slave broker, please execute it from master broker.")  # fmt: skip

    def delete_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        refused = self._refused_on_slave(request)
        if refused is not None:
            return refused
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
        refused = self._refused_on_slave(request)
        if refused is not None:
            return refused
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

    def query_correction_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """QUERY_CORRECTION_OFFSET (``MQClientAPIImpl.queryCorrectionOffset``, from the days of filter servers):
        per queue of ``topic``, the lowest committed offset of its groups other than the comma-separated
        ``filterGroups`` (an offset below the queue's min offset does not count), replaced by Long.MAX_VALUE where
        ``compareGroup`` is behind it.

        Two differences from 4.9.4, on purpose: Java computes this over the live key set of its offset table and so
        deletes the filter groups' offsets (of every topic) from the table; here they stay. And a queue that only
        the compare group has makes Java fail (a NullPointerException); here it is left out."""
        ctl = self.controller
        h = request.header
        topic = h.get_str("topic")
        compare = h.get_str("compareGroup", "") or ""
        filtered = {g for g in (h.get_str("filterGroups", "") or "").split(",") if g}
        store = ctl.store
        table = ctl.consumer_offset_manager.offset_table
        correction: dict[int, int] = {}
        for key, offsets in list(table.items()):
            key_topic, _, group = key.partition("@")
            if key_topic != topic or group in filtered:
                continue
            for queue_id, offset in list(offsets.items()):
                if offset >= store.get_min_offset_in_queue(topic, queue_id):
                    correction[queue_id] = min(offset, correction.get(queue_id, _LONG_MAX))
        for queue_id, offset in list((table.get(f"{topic}@{compare}") or {}).items()):
            if queue_id in correction and correction[queue_id] > offset:
                correction[queue_id] = _LONG_MAX
        return make_response_for(request, ResponseCode.SUCCESS,
                                 body=encode_body({"correctionOffsets": dict(sorted(correction.items()))}))  # fmt: skip

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
        for t in topics:
            cfg = ctl.topic_config_manager.select_topic_config(t)
            if cfg is None or self._not_subscribed(group, t):
                continue
            self._add_queue_stats(stats, group, t, cfg.read_queue_nums)
            # consumeTps: the last minute's TPS of GROUP_GET_NUMS (topic@group), summed over the topics
            stats.consume_tps += ctl.group_get_stats.snapshot(f"{t}@{group}")[0][1]
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(stats))

    def _not_subscribed(self, group: str, topic: str) -> bool:
        """The group is online with subscriptions, none of them to *topic*: its stats leave the topic out."""
        cm = self.controller.consumer_manager
        return cm.find_subscription_data(group, topic) is None and cm.find_subscription_data_count(group) > 0

    def _add_queue_stats(self, stats: ConsumeStats, group: str, topic: str, queue_nums: int) -> None:
        """The broker and consumer offsets (and the time of the last consumed message) of the first
        *queue_nums* queues of *topic* for *group*, into *stats*."""
        ctl = self.controller
        store = ctl.store
        for i in range(queue_nums):
            broker_offset = max(store.get_max_offset_in_queue(topic, i), 0)
            consumer_offset = max(ctl.consumer_offset_manager.query_offset(group, topic, i), 0)
            wrapper = OffsetWrapper(broker_offset=broker_offset, consumer_offset=consumer_offset)
            if consumer_offset - 1 >= 0:
                ts = store.get_message_store_timestamp(topic, i, consumer_offset - 1)
                if ts > 0:
                    wrapper.last_timestamp = ts
            stats.offset_table[MessageQueue(topic, ctl.broker_config.broker_name, i)] = wrapper

    def fetch_all_consume_stats_in_broker(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS (mqadmin brokerConsumeStats): every subscription group's stats of each topic
        it has offsets of (``isOrder``: of order topics only)."""
        ctl = self.controller
        is_order = request.header.get_bool("isOrder", False)
        result = ConsumeStatsList(broker_addr=ctl.broker_addr)
        for group in list(ctl.subscription_group_manager.table.subscription_group_table):
            per_group: list[ConsumeStats] = []
            for topic in ctl.consumer_offset_manager.topics_of_group(group):
                cfg = ctl.topic_config_manager.select_topic_config(topic)
                if cfg is None or (is_order and not cfg.order) or self._not_subscribed(group, topic):
                    continue
                stats = ConsumeStats()
                self._add_queue_stats(stats, group, topic, cfg.write_queue_nums)
                result.total_diff += sum(w.broker_offset - w.consumer_offset for w in stats.offset_table.values())
                per_group.append(stats)
            result.consume_stats_list.append({group: per_group})
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(result))

    def query_consume_time_span(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """QUERY_CONSUME_TIME_SPAN: per queue, the first and last store times and where the group is."""
        ctl = self.controller
        h = request.header
        topic, group = h.get_str("topic"), h.get_str("group")
        cfg = ctl.topic_config_manager.select_topic_config(topic)
        if cfg is None:
            return make_response_for(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = ctl.store
        spans: list[QueueTimeSpan] = []
        now = time.time_ns() // 1_000_000
        for i in range(cfg.write_queue_nums):
            min_time = store.get_earliest_message_time(topic, i)
            max_offset = store.get_max_offset_in_queue(topic, i)
            mq = MessageQueue(topic, ctl.broker_config.broker_name, i)
            max_time = store.get_message_store_timestamp(topic, i, max_offset - 1)
            span = QueueTimeSpan(mq, min_time_stamp=min_time, max_time_stamp=max_time)
            consumer_offset = ctl.consumer_offset_manager.query_offset(group, topic, i)
            span.consume_time_stamp = (store.get_message_store_timestamp(topic, i, consumer_offset - 1)
                                       if consumer_offset > 0 else min_time)  # fmt: skip
            if consumer_offset < max_offset:
                span.delay_time = now - store.get_message_store_timestamp(topic, i, consumer_offset)
            spans.append(span)
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(QueryConsumeTimeSpanBody(spans)))

    def get_broker_runtime_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(KVTable(self.runtime_info())))

    def runtime_info(self) -> dict[str, str]:
        """``prepareRuntimeInfo`` + the store's ``getRuntimeInfo``: the keys tools print."""
        ctl = self.controller
        store = ctl.store
        stats = ctl.stats
        cfg = ctl.store_config
        try:
            usage = shutil.disk_usage(cfg.root)
            capacity = f"Total : {human_byte_count(usage.total)}, Free : {human_byte_count(usage.free)}."
        except OSError:
            capacity = "unknown"
        now = time.time_ns() // 1_000_000
        disk_ratio = json_compat.java_double_str(store_path_used_ratio(cfg.commit_log_path, cfg.root))
        info = {
            **store.runtime_info(),
            "brokerVersionDesc": version_desc(CURRENT_VERSION),
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
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": ctl.broker_config.java_only["endTransactionPoolQueueCapacity"],
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
            "commitLogDiskRatio": disk_ratio,
            f"commitLogDiskRatio_{cfg.commit_log_path}": disk_ratio,
            "consumeQueueDiskRatio": json_compat.java_double_str(store_path_used_ratio(cfg.consume_queue_path,
                                                                                      cfg.root)),
            "commitLogMinOffset": str(store.get_min_phy_offset()),
            "commitLogMaxOffset": str(store.get_max_phy_offset()),
            "brokerRole": ctl.broker_config.broker_role,
            "heldPullRequests": str(ctl.pull_request_hold_service.held_count),
            **ctl.schedule_message_service.running_stats(),
        }
        return info

    def get_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ctl = self.controller
        lines = [f"{k}={v}" for k, v in sorted(ctl.all_config_properties().items())]
        version = json_compat.dumps(ctl.topic_config_manager.data_version)
        return make_response_for(request, ResponseCode.SUCCESS, ext_fields={"version": version},
                                 body=("\n".join(lines) + "\n").encode("utf-8"))  # fmt: skip

    # --- plain ACL ----------------------------------------------------------------------------------------------
    def _acl(self, request: RemotingCommand, failed: int) -> tuple[PlainPermissionManager | None, RemotingCommand]:
        """The ACL's accounts, or the answer when ACL is off (Java fails on a missing validator)."""
        manager = self.controller.acl
        if manager is None:
            return None, make_response_for(request, failed, "ACL is not enabled on this broker: set aclEnable=true "
                                           "in its broker.conf")  # fmt: skip
        return manager, make_response_for(request, ResponseCode.SUCCESS)

    def update_and_create_access_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_AND_CREATE_ACL_CONFIG (mqadmin updateAclConfig): an account added or replaced."""
        manager, answer = self._acl(request, ACL_UPDATE_FAILED)
        if manager is None:
            return answer
        h = request.header
        config = PlainAccessConfig(
            access_key=h.get_str("accessKey", None), secret_key=h.get_str("secretKey", None),
            white_remote_address=h.get_str("whiteRemoteAddress", None), admin=h.get_bool("admin", False),
            default_topic_perm=h.get_str("defaultTopicPerm", None),
            default_group_perm=h.get_str("defaultGroupPerm", None),
            topic_perms=_split_list(h.get_str("topicPerms", None)),
            group_perms=_split_list(h.get_str("groupPerms", None)),
        )  # fmt: skip
        log.info("updateAndCreateAccessConfig %s called by %s", config.access_key, conn.remote_address)
        try:
            manager.update_access_config(config)
        except AclError as e:
            return make_response_for(request, ACL_UPDATE_FAILED, str(e))
        return answer

    def delete_access_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """DELETE_ACL_CONFIG (mqadmin deleteAccessConfig)."""
        manager, answer = self._acl(request, ACL_DELETE_FAILED)
        if manager is None:
            return answer
        access_key = request.header.get_str("accessKey", None)
        log.info("deleteAccessConfig %s called by %s", access_key, conn.remote_address)
        try:
            deleted = manager.delete_access_config(access_key)
        except AclError as e:
            return make_response_for(request, ACL_DELETE_FAILED, str(e))
        if not deleted:
            return make_response_for(request, ACL_DELETE_FAILED, f"The accesskey[{access_key}] corresponding to "
                                     "accessConfig has been deleted failed.")  # fmt: skip
        return answer

    def update_global_white_addrs_config(self, conn: RemotingConnection,
                                         request: RemotingCommand) -> RemotingCommand:  # fmt: skip
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (mqadmin updateGlobalWhiteAddr)."""
        manager, answer = self._acl(request, ACL_WHITE_FAILED)
        if manager is None:
            return answer
        h = request.header
        addrs = h.get_str("globalWhiteAddrs", None)
        log.info("updateGlobalWhiteAddrsConfig %s called by %s", addrs, conn.remote_address)
        try:
            done = manager.update_global_white_addrs(_split_list(addrs) or [], h.get_str("aclFileFullPath", None))
        except AclError as e:
            return make_response_for(request, ACL_WHITE_FAILED, str(e))
        if not done:
            return make_response_for(request, ACL_WHITE_FAILED,
                                     f"The globalWhiteAddresses[{addrs}] has been updated failed.")  # fmt: skip
        return answer

    def get_broker_acl_config_version(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_INFO (mqadmin clusterAclConfigVersion)."""
        manager, answer = self._acl(request, ResponseCode.SYSTEM_ERROR)
        if manager is None:
            return answer
        cfg = self.controller.broker_config
        answer.ext_fields = {"version": json_compat.dumps(manager.data_version()),
                             "allAclFileVersion": json_compat.dumps(manager.data_versions()),
                             "brokerName": cfg.broker_name,
                             "brokerAddr": self.controller.broker_addr,
                             "clusterName": cfg.broker_cluster_name}  # fmt: skip
        answer.remark = None
        return answer

    def get_broker_cluster_acl_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CLUSTER_ACL_CONFIG (mqadmin getAccessConfigSubCommand): every file's white list and accounts."""
        manager, answer = self._acl(request, ResponseCode.SYSTEM_ERROR)
        if manager is None:
            return answer
        answer.body = acl_config_body(manager)
        answer.remark = None
        return answer

    # --- store housekeeping --------------------------------------------------------------------------------
    def clean_expired_consume_queue(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE (mqadmin cleanExpiredCQ)."""
        log.warning("cleanExpiredConsumeQueue called by %s: %d consume queues destroyed", conn.remote_address,
                    self.controller.store.clean_expired_consumer_queue())  # fmt: skip
        return make_response_for(request, ResponseCode.SUCCESS)

    def delete_expired_commit_log(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG (mqadmin deleteExpiredCommitLog): expired files go in the next cleaning
        rounds, whatever the hour (``executeDeleteFilesManually``)."""
        log.warning("deleteExpiredCommitLog called by %s", conn.remote_address)
        self.controller.store.execute_delete_files_manually()
        return make_response_for(request, ResponseCode.SUCCESS)

    def clean_unused_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC (mqadmin cleanUnusedTopic): consume queues of topics the broker has no config of."""
        ctl = self.controller
        in_use = set(ctl.topic_config_manager.topic_config_table())
        log.warning("cleanUnusedTopic called by %s: %d consume queues destroyed", conn.remote_address,
                    ctl.store.clean_unused_topics(in_use))  # fmt: skip
        return make_response_for(request, ResponseCode.SUCCESS)

    def query_consume_queue(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE (mqadmin queryCq): ``count`` units of a consume queue from ``index``."""
        ctl = self.controller
        h = request.header
        topic, queue_id = h.get_str("topic"), h.get_int("queueId")
        cq = ctl.store.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        body = QueryConsumeQueueResponseBody(max_queue_index=cq.get_max_offset_in_queue(),
                                             min_queue_index=cq.get_min_offset_in_queue())  # fmt: skip
        group = h.get_str("consumerGroup", None)
        if group is not None:
            body.subscription_data = ctl.consumer_manager.find_subscription_data(group, topic)
            # a tag subscription has no filter data: Java writes JSON.toJSONString(null)
            body.filter_data = f"{group}@{topic} is not online!" if body.subscription_data is None else "null"
        index, count = h.get_long("index"), h.get_int("count")
        units = cq.get_index_buffer(index, max(count, 0))
        if units is None:
            remark = f"Index {index} of {queue_id}@{topic} is not exist!"
            return make_response_for(request, ResponseCode.SUCCESS, remark, body=encode_body(body))
        body.queue_data = [ConsumeQueueData(int(u["phys"]), int(u["size"]), int(u["tags"])) for u in units]
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(body))

    def view_broker_stats_data(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA (mqadmin statsAll, exportMetrics): sum and TPS of the last minute, hour and
        day of TOPIC_PUT_NUMS (key: topic) or GROUP_GET_NUMS (key: topic@group), for a key that has counted
        something since start (Java has no stats item before); other stats are not kept."""
        ctl = self.controller
        h = request.header
        name, key = h.get_str("statsName"), h.get_str("statsKey")
        if name == "TOPIC_PUT_NUMS" and key in ctl.store.consume_queue_table:
            ctl.topic_put_stats.totals[key] = ctl.topic_put_total(key)  # Java's item exists from the first put on
        if name == "TOPIC_PUT_NUMS" and ctl.topic_put_stats.exists(key):
            stats = ctl.topic_put_stats
        elif name == "GROUP_GET_NUMS" and ctl.group_get_stats.exists(key):
            stats = ctl.group_get_stats
        else:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        minute, hour, day = ({"sum": total, "tps": tps, "avgpt": 0.0} for total, tps in stats.snapshot(key))
        body = {"statsMinute": minute, "statsHour": hour, "statsDay": day}
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(body))

    def get_all_producer_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_PRODUCER_INFO (mqadmin producer): every producer connection, by group."""
        table = ProducerTableInfo()
        for group, channels in list(self.controller.producer_manager.group_channel_table.items()):
            table.data[group] = [ProducerInfo(c.client_id, "/" + c.connection.remote_address, c.language.name,
                                              c.version, c.last_update_timestamp)
                                 for c in list(channels.values())]  # fmt: skip
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(table))

    # --- configuration -----------------------------------------------------------------------------------
    def update_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG (mqadmin updateBrokerConfig): a properties body applied to the running configs.

        As Java's ``Configuration.update``: unknown keys and values that do not parse are skipped, the answer
        is SUCCESS; a ``brokerPermission`` change is announced to the name servers at once; what was taken is
        written to the broker's config file, so it outlives a restart (the settings used at start only, such as
        ``listenPort``, take effect then).
        """
        if request.body:
            props = parse_properties(request.body.decode("utf-8", "replace"))
            log.info("updateBrokerConfig called by %s: %s", conn.remote_address, props)
            taken = self.controller.update_config(props, FIXED_AT_START)
            fixed = sorted(k for k in taken if k in FIXED_AT_START)
            if fixed:
                log.warning("updateBrokerConfig: %s cannot change while the broker runs: written to the config "
                            "file, they take effect at the next start", fixed)  # fmt: skip
            if taken:
                try:
                    path = self.controller.persist_config(taken)
                    log.info("updateBrokerConfig: %s written to %s", sorted(taken), path)
                except RocketqError as exc:  # as Java's persist: logged, the running broker keeps the change
                    log.error("updateBrokerConfig: %s", exc)
        return make_response_for(request, ResponseCode.SUCCESS)

    # --- offsets of groups --------------------------------------------------------------------------------
    def clone_group_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """CLONE_GROUP_OFFSET (mqadmin cloneGroupOffset): copy a group's offsets of a topic (or of all its
        topics) to another group."""
        ctl = self.controller
        h = request.header
        src, dest = h.get_str("srcGroup"), h.get_str("destGroup")
        topic = h.get_str("topic", "")
        topics = [topic] if topic.strip() else ctl.consumer_offset_manager.topics_of_group(src)
        offsets = ctl.consumer_offset_manager
        for t in topics:
            if ctl.topic_config_manager.select_topic_config(t) is None:
                log.warning("cloneGroupOffset: topic %s does not exist", t)
                continue
            if (not h.get_bool("offline", False) and ctl.consumer_manager.find_subscription_data(src, t) is None
                    and ctl.consumer_manager.find_subscription_data_count(src) > 0):  # fmt: skip
                log.warning("cloneGroupOffset: the consumer group[%s] does not consume %s", src, t)
                continue
            with offsets._lock:  # the manager's own lock: the periodic persist may be reading the table
                table = offsets.offset_table.get(offsets.key(t, src))
                if table is not None:
                    offsets.offset_table[offsets.key(t, dest)] = dict(table)
        return make_response_for(request, ResponseCode.SUCCESS)

    async def reset_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET (mqadmin resetOffsetByTime): ``Broker2Client.resetOffset``.

        The offsets at the time (``-1``: the max offsets) go to every online consumer of the group in a
        one-way RESET_CONSUMER_CLIENT_OFFSET; the consumers adopt and commit them. A group with no consumer
        online gets CONSUMER_NOT_ONLINE, on which the tool falls back to committing offsets itself.
        """
        ctl = self.controller
        h = request.header
        topic, group = h.get_str("topic"), h.get_str("group")
        timestamp, force = h.get_long("timestamp"), h.get_bool("isForce", True)
        cfg = ctl.topic_config_manager.select_topic_config(topic)
        if cfg is None:
            remark = f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, remark)
        table: dict[MessageQueue, int] = {}
        for i in range(cfg.write_queue_nums):
            consumer_offset = ctl.consumer_offset_manager.query_offset(group, topic, i)
            if consumer_offset == -1:
                return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            if timestamp == -1:
                offset = ctl.store.get_max_offset_in_queue(topic, i)
            else:
                offset = ctl.store.get_offset_in_queue_by_time(topic, i, timestamp)
            offset = max(offset, 0)
            mq = MessageQueue(topic, ctl.broker_config.broker_name, i)
            table[mq] = offset if force or offset < consumer_offset else consumer_offset
        if request.language == LanguageCode.CPP:
            body = encode_body(ResetOffsetBodyForC([MessageQueueForC(mq.topic, mq.broker_name, mq.queue_id, off)
                                                    for mq, off in table.items()]))  # fmt: skip
        else:
            body = encode_body(ResetOffsetBody(table))
        info = ctl.consumer_manager.get_consumer_group_info(group)
        channels = list(info.channel_info_table.values()) if info is not None else []
        if not channels:
            remark = (f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                      f"Timestamp: {timestamp}")  # fmt: skip
            return make_response_for(request, ResponseCode.CONSUMER_NOT_ONLINE, remark)
        for channel in channels:
            if channel.version < MQVersion.V3_0_7_SNAPSHOT:
                return make_response_for(request, ResponseCode.SYSTEM_ERROR, "the client does not support this "
                                         f"feature. version={version_desc(channel.version)}")  # fmt: skip
        header = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": force}
        for channel in channels:
            try:
                await channel.connection.invoke_oneway(create_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                                                                      header, body, oneway=True))  # fmt: skip
                log.info("[reset-offset] topic=%s group=%s sent to %s", topic, group, channel.client_id)
            except (RemotingError, OSError) as exc:
                log.warning("[reset-offset] topic=%s group=%s to %s failed: %s", topic, group, channel.client_id, exc)
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(ResetOffsetBody(table)))

    # --- transactions ----------------------------------------------------------------------------------
    async def resume_check_half_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """RESUME_CHECK_HALF_MESSAGE (``DefaultMQAdminExt.resumeCheckHalfMessage``): the half message at the offset
        id ``msgId`` put again at the end of RMQ_SYS_TRANS_HALF_TOPIC with TRANSACTION_CHECK_TIMES 0, so that the
        check service asks its producer about it again (one that gave up after ``transactionCheckMax``)."""
        ctl = self.controller
        try:
            _host, offset = decode_offset_message_id(request.header.get_str("msgId"))
            raw = select_one_message_by_offset(ctl.store, offset)
            if raw is None:
                raise ValueError(f"no message at commit-log offset {offset}")
            msg = decode_record(raw, 0)
            props = dict(msg.properties)
            props[PROPERTY_TRANSACTION_CHECK_TIMES] = "0"
            again = MessageExt(RMQ_SYS_TRANS_HALF_TOPIC, msg.body, msg.flag, hashmap_ordered(props), 0, msg.sys_flag,
                               msg.born_timestamp, msg.born_host, 0, msg.store_host, msg.reconsume_times)  # fmt: skip
            again.wait_store_msg_ok = False  # toMessageExtBrokerInner: it waits for no flush and no slave
            result = await ctl.put_message(again)
        except Exception as exc:  # Java answers any failure here with one remark
            log.warning("resumeCheckHalfMessage %s failed: %s", request.header.get_str("msgId", None), exc)
            return make_response_for(request, ResponseCode.SYSTEM_ERROR,
                                     "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC.")
        if result.status is not PutMessageStatus.PUT_OK:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR,
                                     "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")  # fmt: skip
        log.info("Put message back to RMQ_SYS_TRANS_HALF_TOPIC. real topic=%s", props.get(PROPERTY_REAL_TOPIC))
        return make_response_for(request, ResponseCode.SUCCESS)

    # --- calls passed on to a consumer ------------------------------------------------------------------
    async def get_consumer_status(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (``mqadmin getConsumerStatus``, ``Broker2Client.getConsumeStatus``):
        GET_CONSUMER_STATUS_FROM_CLIENT to each consumer of the group (or only to ``clientAddr``, a client id), and
        their offset tables by client id. A client that does not answer in 5 s is left out."""
        h = request.header
        topic, group, only = h.get_str("topic"), h.get_str("group"), h.get_str("clientAddr", None)
        info = self.controller.consumer_manager.get_consumer_group_info(group)
        channels = list(info.channel_info_table.values()) if info is not None else []
        if not channels:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR,
                                     f"No Any Consumer online in the consumer group: [{group}]")  # fmt: skip
        table: dict[str, dict[MessageQueue, int]] = {}
        for channel in channels:
            if channel.version < MQVersion.V3_0_7_SNAPSHOT:
                return make_response_for(request, ResponseCode.SYSTEM_ERROR, "the client does not support this "
                                         f"feature. version={version_desc(channel.version)}")  # fmt: skip
            if only and only != channel.client_id:
                continue
            ask = create_request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": topic, "group": group})
            try:
                answer = await channel.connection.invoke(ask, timeout=GET_CONSUMER_STATUS_TIMEOUT)
                if answer.code == ResponseCode.SUCCESS and answer.body:
                    got = json_compat.loads(answer.body).get("messageQueueTable") or {}
                    table[channel.client_id] = {
                        MessageQueue(str(k["topic"]), str(k["brokerName"]), int(k["queueId"])): int(v)
                        for k, v in got.items()
                    }  # fmt: skip
            except (RemotingError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("getConsumeStatus: %s of group %s did not answer: %s", channel.client_id, group, exc)
            if only:
                break
        body = GetConsumerStatusBody(consumer_table={cid: dict(sorted(t.items())) for cid, t in table.items()})
        return make_response_for(request, ResponseCode.SUCCESS, body=encode_body(body))

    async def get_consumer_running_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO (mqadmin consumerStatus): asked of the consumer itself."""
        h = request.header
        return await self._call_consumer(RequestCode.GET_CONSUMER_RUNNING_INFO, request, h.get_str("consumerGroup"),
                                         h.get_str("clientId"), request.body)  # fmt: skip

    async def consume_message_directly(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """CONSUME_MESSAGE_DIRECTLY (queryMsgByUniqueKey/queryMsgById with -g -d): the message the offset id
        names, handed to one consumer's listener."""
        ctl = self.controller
        h = request.header
        body = request.body
        try:
            _host, offset = decode_offset_message_id(h.get_str("msgId"))
        except (ValueError, KeyError, MessageIdError) as exc:
            log.warning("consumeMessageDirectly: bad msgId: %s", exc)
        else:
            body = select_one_message_by_offset(ctl.store, offset) or body
        fields = dict(request.ext_fields or {})
        fields["brokerName"] = ctl.broker_config.broker_name
        return await self._call_consumer(RequestCode.CONSUME_MESSAGE_DIRECTLY, request, h.get_str("consumerGroup"),
                                         h.get_str("clientId"), body, fields)  # fmt: skip

    async def _call_consumer(self, code: int, request: RemotingCommand, group: str, client_id: str,
                             body: bytes | None, fields: dict[str, str] | None = None) -> RemotingCommand:  # fmt: skip
        """``callConsumer``: the request, under ``code``, to the client's connection; its answer is ours."""
        channel = self.controller.consumer_manager.find_channel(group, client_id)
        if channel is None:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR,
                                     f"The Consumer <{group}> <{client_id}> not online")  # fmt: skip
        if channel.version < MQVersion.V3_1_8_SNAPSHOT:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR,
                                     f"The Consumer <{client_id}> Version <{version_desc(channel.version)}> too low "
                                     "to finish, please upgrade it to V3_1_8_SNAPSHOT")  # fmt: skip
        forward = create_request(code, dict(request.ext_fields or {}) if fields is None else fields, body)
        try:
            answer = await channel.connection.invoke(forward, timeout=CALL_CLIENT_TIMEOUT)
        except RemotingTimeoutError as exc:
            return make_response_for(request, ResponseCode.CONSUME_MSG_TIMEOUT,
                                     f"consumer <{group}> <{client_id}> Timeout: {exc}")  # fmt: skip
        except (RemotingError, OSError) as exc:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR,
                                     f"invoke consumer <{group}> <{client_id}> Exception: {exc}")  # fmt: skip
        return make_response_for(request, answer.code, answer.remark, ext_fields=answer.ext_fields, body=answer.body)

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


def _runtime(ms: int) -> str:
    """The store's ``runtime`` text: ``[ d days, h hours, m minutes, s seconds ]``."""
    s = max(ms, 0) // 1000
    return f"[ {s // 86400} days, {s % 86400 // 3600} hours, {s % 3600 // 60} minutes, {s % 60} seconds ]"
