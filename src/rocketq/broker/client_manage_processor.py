"""HEART_BEAT (34), UNREGISTER_CLIENT (35) and CHECK_CLIENT_CONFIG (46): RocketMQ's
``broker/processor/ClientManageProcessor`` (spec §6.5, §6.6).

A heartbeat registers each producer group and each consumer group of the client on this connection. For a
consumer group the broker finds (or auto-creates) the group's config, creates ``%RETRY%<group>`` with the
group's ``retryQueueNums`` queues, and records the consume type, model, start point and subscriptions; a
change of the group's channels or subscribed topics notifies every client of the group
(NOTIFY_CONSUMER_IDS_CHANGED), unless the group disabled that. Unregistering removes the connection from
the named groups (an empty group name, as C++ clients send, means none). CHECK_CLIENT_CONFIG accepts TAG
subscriptions; an SQL92 one when ``enablePropertyFilter`` is on and its expression compiles (its remark then
says what is wrong). Each heartbeat registers the group's SQL92 subscriptions with the
:class:`~rocketq.broker.consumer_filter_manager.ConsumerFilterManager` (through the consumer manager's
REGISTER event, as Java's ``DefaultConsumerIdsChangeListener`` does).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketq.broker.consumer_filter_manager import compile_expression
from rocketq.broker.consumer_manager import ClientChannelInfo
from rocketq.broker.protocol import decode_body, enum_name
from rocketq.broker.topic_validator import PERM_READ, PERM_WRITE, get_retry_topic
from rocketq.common.heartbeat import (
    CheckClientRequestBody,
    ConsumeFromWhere,
    ConsumeType,
    HeartbeatData,
    MessageModel,
)
from rocketq.common.sql92 import SelectorError
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, make_response_for
from rocketq.remoting.transport import RemotingConnection

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)


class ClientManageProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller

    def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.HEART_BEAT:
            return self.heart_beat(conn, request)
        if request.code == RequestCode.UNREGISTER_CLIENT:
            return self.unregister_client(conn, request)
        return self.check_client_config(conn, request)

    def heart_beat(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ctl = self.controller
        try:
            data: HeartbeatData = decode_body(HeartbeatData, request.body)
        except ValueError as exc:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"bad heartbeat body: {exc}")
        info = ClientChannelInfo(conn, data.client_id, request.language, request.version)
        conn.attributes["clientId"] = data.client_id
        for consumer in data.consumer_data_set:
            group = consumer.group_name
            sg = ctl.subscription_group_manager.find_subscription_group_config(group)
            notify = True
            if sg is not None:
                notify = sg.notify_consumer_ids_changed_enable
                topic_sys_flag = 2 if consumer.unit_mode else 0
                ctl.topic_config_manager.create_topic_in_send_message_back(
                    get_retry_topic(group), sg.retry_queue_nums, PERM_WRITE | PERM_READ, topic_sys_flag)
            subscriptions = consumer.subscription_data_set
            if data.without_sub:
                # Heartbeat v2 without subscriptions (this broker never offers v2, but keep what is known).
                known = ctl.consumer_manager.get_consumer_group_info(group)
                subscriptions = list(known.subscription_table.values()) if known is not None else []
            message_model = enum_name(MessageModel, consumer.message_model)
            if message_model == MessageModel.BROADCASTING.name:
                notify = False  # every client of a broadcasting group takes every queue anyway
            changed = ctl.consumer_manager.register_consumer(
                group, info, enum_name(ConsumeType, consumer.consume_type), message_model,
                enum_name(ConsumeFromWhere, consumer.consume_from_where), subscriptions, notify)
            if changed:
                log.info("registerConsumer info changed %s %s", group, conn.remote_address)
        for producer in data.producer_data_set:
            ctl.producer_manager.register_producer(producer.group_name, info)
        return make_response_for(request, ResponseCode.SUCCESS)

    def unregister_client(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ctl = self.controller
        h = request.header
        info = ClientChannelInfo(conn, h.get_str("clientID"), request.language, request.version)
        producer_group = h.get_str("producerGroup", None)
        if producer_group:
            ctl.producer_manager.unregister_producer(producer_group, info)
        consumer_group = h.get_str("consumerGroup", None)
        if consumer_group:
            sg = ctl.subscription_group_manager.find_subscription_group_config(consumer_group)
            notify = sg.notify_consumer_ids_changed_enable if sg is not None else True
            ctl.consumer_manager.unregister_consumer(consumer_group, info, notify)
        return make_response_for(request, ResponseCode.SUCCESS, ext_fields={})

    def check_client_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            body: CheckClientRequestBody | None = decode_body(CheckClientRequestBody, request.body)
        except ValueError:
            body = None
        sub = body.subscription_data if body is not None else None
        if sub is not None and not sub.is_tag_type:
            if not self.controller.broker_config.enable_property_filter:
                return make_response_for(request, ResponseCode.SYSTEM_ERROR,
                                         f"The broker does not support consumer to filter message by "
                                         f"{sub.expression_type}")  # fmt: skip
            try:
                compile_expression(sub.expression_type, sub.sub_string)
            except SelectorError as e:
                log.warning("checkClientConfig: the %s expression %r of %s does not compile: %s", sub.expression_type,
                            sub.sub_string, body.client_id if body is not None else "?", e)  # fmt: skip
                return make_response_for(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(e))
        return make_response_for(request, ResponseCode.SUCCESS)
