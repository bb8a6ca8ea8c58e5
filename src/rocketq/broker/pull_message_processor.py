"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361): RocketMQ's ``broker/processor/PullMessageProcessor``
(spec §6.2, §11.3, §11.7).

Checks, in Java's order: broker readable; group known (or auto-created) and enabled; topic known and
readable; queue id in range. The subscription is the request's own (SUBSCRIPTION flag) or the one the
group's heartbeat registered for the topic, which must exist and not be older than the request's
``subVersion``. The store reads at most ``maxMsgNums`` records through an :class:`ExpressionMessageFilter`,
and its status maps to a response code exactly as Java maps it:

==========================  =============================================
``FOUND``                   SUCCESS, body = the stored records as they are
``MESSAGE_WAS_REMOVING``    PULL_RETRY_IMMEDIATELY
``NO_MATCHED_LOGIC_QUEUE``  PULL_NOT_FOUND at offset 0, else PULL_OFFSET_MOVED
``NO_MESSAGE_IN_QUEUE``     PULL_NOT_FOUND at offset 0, else PULL_OFFSET_MOVED
``NO_MATCHED_MESSAGE``      PULL_RETRY_IMMEDIATELY
``OFFSET_FOUND_NULL``       PULL_NOT_FOUND
``OFFSET_OVERFLOW_BADLY``   PULL_OFFSET_MOVED
``OFFSET_OVERFLOW_ONE``     PULL_NOT_FOUND
``OFFSET_TOO_SMALL``        PULL_OFFSET_MOVED
==========================  =============================================

with the status name as remark and ``suggestWhichBrokerId``, ``nextBeginOffset``, ``minOffset``,
``maxOffset`` in the header. PULL_NOT_FOUND with the SUSPEND flag is held by the
:class:`PullRequestHoldService` and runs again (without suspending) when a message arrives or the suspend
time is up, and is answered in the callback that wakes it. PULL_OFFSET_MOVED also writes an event to
``OFFSET_MOVED_EVENT``. With the COMMIT_OFFSET flag the first run stores ``commitOffset`` as the group's offset.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rocketq.broker.consumer_filter_manager import compile_expression
from rocketq.broker.expression_message_filter import ExpressionMessageFilter
from rocketq.broker.protocol import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    MessageQueue,
    OffsetMovedEvent,
    encode_body,
    suggest_todo,
)
from rocketq.broker.pull_request_hold_service import WakeReason
from rocketq.broker.topic_validator import RMQ_SYS_OFFSET_MOVED_EVENT, is_readable
from rocketq.common.heartbeat import MessageModel, SubscriptionData, build_subscription_data
from rocketq.common.javacompat import hashmap_ordered
from rocketq.common.message import MessageExt
from rocketq.common.mixall import MASTER_ID, RETRY_GROUP_TOPIC_PREFIX, is_retry_topic
from rocketq.common.sql92 import Selector, SelectorError
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand, make_response_for
from rocketq.remoting.transport import RemotingConnection, parse_address
from rocketq.store.message_store import GetMessageStatus

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)


_STATUS_CODES: dict[GetMessageStatus, int] = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def pull_response_code(status: GetMessageStatus, queue_offset: int) -> int:
    """The response code PullMessageProcessor gives a store status (table in the module docstring)."""
    if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if queue_offset != 0 else ResponseCode.PULL_NOT_FOUND
    return _STATUS_CODES[status]


class _Suspend:
    """What a first run returns instead of a response when the pull is to be held."""

    __slots__ = ("message_filter", "offset", "queue_id", "timeout_s", "topic")

    def __init__(self, topic: str, queue_id: int, offset: int, message_filter: ExpressionMessageFilter,
                 timeout_s: float) -> None:  # fmt: skip
        self.topic = topic
        self.queue_id = queue_id
        self.offset = offset
        self.message_filter = message_filter
        self.timeout_s = timeout_s


class PullMessageProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller

    async def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        first = self.process(conn, request, broker_allow_suspend=True)
        if not isinstance(first, _Suspend):
            return first
        answered = False

        def answer(_reason: str) -> None:
            # executeRequestWhenWakeup, in the callback that wakes the pull: the same request once more, without
            # the right to be held again, answered at once.
            nonlocal answered
            answered = True
            if not conn.closed:
                again = self.process(conn, request, broker_allow_suspend=False)
                if isinstance(again, RemotingCommand):
                    conn.respond(request, again)

        reason = await self.controller.pull_request_hold_service.suspend(
            conn, first.topic, first.queue_id, first.offset, first.message_filter, first.timeout_s, answer)
        if answered or reason == WakeReason.CLOSED or conn.closed:
            return None
        again = self.process(conn, request, broker_allow_suspend=False)  # let through at once: its queue grew
        return again if isinstance(again, RemotingCommand) else None

    def process(self, conn: RemotingConnection, request: RemotingCommand,
                broker_allow_suspend: bool) -> RemotingCommand | _Suspend:  # fmt: skip
        """``processRequest(channel, request, brokerAllowSuspend)``."""
        ctl = self.controller
        cfg = ctl.broker_config
        h = request.header
        group = h.get_str("consumerGroup")
        topic = h.get_str("topic")
        queue_id = h.get_int("queueId")
        queue_offset = h.get_long("queueOffset")
        max_msg_nums = h.get_int("maxMsgNums")
        sys_flag = h.get_int("sysFlag")
        commit_offset = h.get_long("commitOffset")
        suspend_timeout = h.get_long("suspendTimeoutMillis")
        sub_version = h.get_long("subVersion")
        subscription = h.get_str("subscription", None)
        expression_type = h.get_str("expressionType", None)

        def fail(code: int, remark: str) -> RemotingCommand:
            return make_response_for(request, code, remark)

        if not is_readable(cfg.broker_permission):
            return fail(ResponseCode.NO_PERMISSION, f"the broker[{cfg.broker_ip1}] pulling message is forbidden")
        sg = ctl.subscription_group_manager.find_subscription_group_config(group)
        if sg is None:
            return fail(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                        f"subscription group [{group}] does not exist, {suggest_todo()}")  # fmt: skip
        if not sg.consume_enable:
            return fail(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        has_suspend = bool(sys_flag & FLAG_SUSPEND)
        has_commit_offset = bool(sys_flag & FLAG_COMMIT_OFFSET)
        has_subscription = bool(sys_flag & FLAG_SUBSCRIPTION)
        topic_config = ctl.topic_config_manager.select_topic_config(topic)
        if topic_config is None:
            log.error("the topic %s not exist, consumer: %s", topic, conn.remote_address)
            return fail(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {suggest_todo()}")
        if not is_readable(topic_config.perm):
            return fail(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")
        if queue_id < 0 or queue_id >= topic_config.read_queue_nums:
            return fail(ResponseCode.INVALID_PARAMETER,
                        f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                        f"[{topic_config.read_queue_nums}] consumer:[{conn.remote_address}]")  # fmt: skip

        sub: SubscriptionData | None
        selector: Selector | None = None  # an SQL92 subscription's (None: nothing to evaluate)
        if has_subscription:
            sub = build_subscription_data(topic, subscription, expression_type, sub_version)
            # (with property filters off the check below answers first, as 4.9.4's; with them on, an expression
            # that does not compile is refused: 4.9.4 then delivers every message unfiltered)
            if not sub.is_tag_type and cfg.enable_property_filter:
                try:
                    selector = compile_expression(expression_type, subscription)  # cached by expression
                except SelectorError:
                    return fail(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        else:
            group_info = ctl.consumer_manager.get_consumer_group_info(group)
            if group_info is None:
                return fail(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                            f"the consumer's group info not exist{suggest_todo()}")  # fmt: skip
            if not sg.consume_broadcast_enable and group_info.message_model == MessageModel.BROADCASTING.name:
                return fail(ResponseCode.NO_PERMISSION,
                            f"the consumer group[{group}] can not consume by broadcast way")  # fmt: skip
            sub = group_info.find_subscription_data(topic)
            if sub is None:
                return fail(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                            f"the consumer's subscription not exist{suggest_todo()}")  # fmt: skip
            if sub.sub_version < sub_version:
                return fail(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
            if not sub.is_tag_type:
                filter_data = ctl.consumer_filter_manager.get(topic, group)
                if filter_data is None:
                    return fail(ResponseCode.FILTER_DATA_NOT_EXIST, "The broker's consumer filter data is not exist!"
                                                                    "Your expression may be wrong!")  # fmt: skip
                if filter_data.client_version < sub_version:
                    return fail(ResponseCode.FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest")
                selector = filter_data.selector
        if not sub.is_tag_type and not cfg.enable_property_filter:
            return fail(ResponseCode.SYSTEM_ERROR,
                        f"The broker does not support consumer to filter message by {sub.expression_type}")  # fmt: skip
        retry_selector_of: Callable[[str], Selector | None] | None = None
        if cfg.filter_support_retry and is_retry_topic(topic):
            filters, retry_group = ctl.consumer_filter_manager, topic[len(RETRY_GROUP_TOPIC_PREFIX):]

            def retry_selector_of(real_topic: str) -> Selector | None:
                data = filters.get(real_topic, retry_group)
                return data.selector if data is not None else None

        message_filter = ExpressionMessageFilter(sub, selector, retry_selector_of)

        result = ctl.store.get_message(group, topic, queue_id, queue_offset, max_msg_nums, message_filter)
        code = pull_response_code(result.status, queue_offset)
        # Where the consumer's next pull goes: the master, unless slaveReadEnable lets it read a slave (the
        # group's whichBrokerWhenConsumeSlowly once the data has left memory, else its brokerId).
        suggest = MASTER_ID
        if cfg.slave_read_enable:
            suggest = sg.which_broker_when_consume_slowly if result.suggest_pulling_from_slave else sg.broker_id
        ext = {"suggestWhichBrokerId": suggest, "nextBeginOffset": result.next_begin_offset,
               "minOffset": result.min_offset, "maxOffset": result.max_offset}  # fmt: skip
        response: RemotingCommand | _Suspend
        if code == ResponseCode.SUCCESS:
            ctl.stats.on_get(result.message_count)
            ctl.group_get_stats.add(f"{topic}@{group}", result.message_count)
            # Numbers and a status name: plain JSON text.
            response = make_response_for(request, code, result.status.name, ext_fields=ext,
                                         body=b"".join(result.messages), unescaped=True)  # fmt: skip
        elif code == ResponseCode.PULL_NOT_FOUND and broker_allow_suspend and has_suspend:
            timeout_ms = suspend_timeout if cfg.long_polling_enable else cfg.short_polling_time_mills
            response = _Suspend(topic, queue_id, queue_offset, message_filter, timeout_ms / 1000.0)
        else:
            if code == ResponseCode.PULL_OFFSET_MOVED and cfg.broker_role == "SLAVE" and \
                    not ctl.store_config.offset_check_in_slave:  # fmt: skip
                # A slave does not correct offsets (its master does): the consumer asks again.
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
                ext["suggestWhichBrokerId"] = sg.broker_id
            if code == ResponseCode.PULL_OFFSET_MOVED:
                self._generate_offset_moved_event(group, topic, queue_id, queue_offset, result.next_begin_offset)
                log.warning("PULL_OFFSET_MOVED:correction offset. topic=%s, groupId=%s, requestOffset=%d, "
                            "newOffset=%d", topic, group, queue_offset, result.next_begin_offset)  # fmt: skip
            response = make_response_for(request, code, result.status.name, ext_fields=ext)

        if broker_allow_suspend and has_commit_offset and cfg.broker_role != "SLAVE" and commit_offset >= 0:
            ctl.consumer_offset_manager.commit_offset(group, topic, queue_id, commit_offset)
        return response

    def _generate_offset_moved_event(self, group: str, topic: str, queue_id: int, offset_request: int,
                                     offset_new: int) -> None:  # fmt: skip
        """``generateOffsetMovedEvent``: a message in ``OFFSET_MOVED_EVENT`` tagged and keyed by the group."""
        ctl = self.controller
        event = OffsetMovedEvent(group, MessageQueue(topic, ctl.broker_config.broker_name, queue_id),
                                 offset_request, offset_new)  # fmt: skip
        try:
            host = parse_address(ctl.broker_config.broker_addr)
            props = {"TAGS": group, "DELAY": "0", "KEYS": group}
            msg = MessageExt(topic=RMQ_SYS_OFFSET_MOVED_EVENT, body=encode_body(event),
                             properties=hashmap_ordered(props), queue_id=0,
                             born_timestamp=time.time_ns() // 1_000_000, born_host=host, store_host=host)  # fmt: skip
            ctl.put_message_nowait(msg)
        except Exception:
            log.exception("generateOffsetMovedEvent failed, %s", event)
