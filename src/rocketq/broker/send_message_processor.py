"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and CONSUMER_SEND_MSG_BACK (36):
RocketMQ's ``broker/processor/SendMessageProcessor`` and ``AbstractSendMessageProcessor`` (spec §6.1, §6.7,
§11.5, §11.6).

Send, in Java's order: the broker must be writable for ordered topics; the topic name must be legal and
not one of the topics nobody may send to; an unknown topic is created from the request's template topic
(``TBW102``) when that template has INHERIT, or, for a ``%RETRY%`` topic, with one queue; the queue id must
exist (negative: a random one). A ``%RETRY%<group>`` send whose ``reconsumeTimes`` has reached the group's
limit, or whose group holds orderly locks, goes to ``%DLQ%<group>``. The broker adds ``CLUSTER`` (and no
``UNIQ_KEY``: a message sent without one, as ali-ons sends, is stored without one); ``TRAN_MSG=true`` makes a
half message in ``RMQ_SYS_TRANS_HALF_TOPIC``. The store's result maps to a response code; a stored message
answers ``msgId`` (the offset id; comma-joined for a batch), ``queueId``, ``queueOffset`` and, when it has a
``UNIQ_KEY``, ``transactionId``, always with ``MSG_REGION`` and ``TRACE_ON``.

Send-back looks the consumed message up by its commit-log offset and stores a copy in ``%RETRY%<group>``
with delay level ``3 + reconsumeTimes`` (or the one asked for) and ``reconsumeTimes + 1``, or in
``%DLQ%<group>`` once ``maxReconsumeTimes`` is reached or when the delay level is negative.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import random
from collections.abc import Awaitable
from typing import TYPE_CHECKING, TypeAlias

from rocketq.broker.protocol import suggest_todo
from rocketq.broker.topic_validator import (
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    RMQ_SYS_TRANS_HALF_TOPIC,
    check_allowed_send_topic,
    get_dlq_topic,
    get_retry_topic,
    is_retry_topic,
    is_writeable,
    validate_topic,
)
from rocketq.common.codec import CorruptRecordError, join_batch_properties_column, split_batch_body
from rocketq.common.javacompat import encode_utf8_java, hashmap_ordered
from rocketq.common.message import (
    MULTI_TAGS_FLAG,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    MessageExt,
    MessageExtBatch,
    delay_level_of,
    properties_of_bytes,
    properties_to_string,
    string_to_properties,
    wait_store_msg_ok,
)
from rocketq.common.mixall import TOPIC_SYS_FLAG_UNIT, TOPIC_SYS_FLAG_UNIT_SUB
from rocketq.remoting.codes import CURRENT_VERSION, FLAG_RESPONSE, LanguageCode, MQVersion, RequestCode, ResponseCode
from rocketq.remoting.command import (
    RemotingCommand,
    UnescapedCommand,
    make_response_for,
    parse_bool,
    plain_json_text,
)
from rocketq.remoting.transport import RemotingConnection, parse_address
from rocketq.store.clean_service import store_path_used_ratio
from rocketq.store.commit_log import PutMessageResult, PutMessageStatus
from rocketq.store.config_json import TopicConfig

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)

DLQ_NUMS_PER_GROUP = 1
#: What a processor gives the transport: the response, none (one-way), or an awaitable of either.
Reply: TypeAlias = "RemotingCommand | Awaitable[RemotingCommand | None] | None"
PROPERTY_POP_CK = "POP_CK"


@dataclasses.dataclass(slots=True)
class SendMessageRequestHeader:
    """``SendMessageRequestHeader`` (long names; the V2 one-letter header is mapped onto it)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    batch: bool = False


#: ``SendMessageRequestHeaderV2``: the same fields under one-letter keys.
V2_KEYS = {
    "producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d", "queueId": "e",
    "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i", "reconsumeTimes": "j", "unitMode": "k",
    "maxReconsumeTimes": "l", "batch": "m",
}  # fmt: skip


_INT_MAX = (1 << 31) - 1
#: The text of the small numbers a send header carries (queue ids, flags, counts): no parse, no check.
_SMALL_INTS = {str(i): i for i in range(-1, 1024)}
_LONG_MAX = (1 << 63) - 1


# Whether a setting written into every answer (the region) is plain JSON text: a few values a broker's life.
_plain_setting = functools.lru_cache(maxsize=16)(plain_json_text)


def _canonical_int(text: str, limit: int) -> int:
    """``text`` as an int when it is written the one way Python would write it back (``5``, ``-12``) and fits;
    anything else (``+5``, ``007``, spaces, too large) raises ``ValueError`` and goes the careful way."""
    value = _SMALL_INTS.get(text)
    if value is not None:
        return value
    # ASCII digits, no leading zero, at most 18 of them (under 2^63 - 1): such a text is its int's own writing
    # (the born timestamp of every send), with no need to write the int back to compare.
    if text.isdigit() and text.isascii() and text[0] != "0" and len(text) <= (18 if limit >= _LONG_MAX else 9):
        return int(text)
    value = int(text)
    if str(value) != text or not -limit - 1 <= value <= limit:
        raise ValueError(text)
    return value


def _parse_v2_fast(f: dict[str, str]) -> SendMessageRequestHeader | None:
    """The V2 header as every client writes it, in one pass; ``None`` for anything unusual."""
    try:
        group, topic, default_topic, props = f["a"], f["b"], f["c"], f.get("i")
        if type(group) is not str or type(topic) is not str or type(default_topic) is not str or \
                (props is not None and type(props) is not str):  # fmt: skip
            return None
        j, k, l_, m = f.get("j"), f.get("k"), f.get("l"), f.get("m")
        texts = (f["d"], f["e"], f["f"], f["h"], "0" if j is None else j, "0" if l_ is None else l_)
        # The small numbers first, by one lookup each in C; _canonical_int for anything else.
        ints = tuple(map(_SMALL_INTS.get, texts))
        if None in ints:
            ints = tuple(_canonical_int(t, _INT_MAX) for t in texts)
        queue_nums, queue_id, sys_flag, flag, reconsume, max_reconsume = ints
        return SendMessageRequestHeader(
            group, topic, default_topic, queue_nums, queue_id, sys_flag, _canonical_int(f["g"], _LONG_MAX), flag, props,
            None if j is None else reconsume, False if k is None else parse_bool(k),
            None if l_ is None else max_reconsume, False if m is None else parse_bool(m),
        )  # fmt: skip
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


#: The codes whose header is ``SendMessageRequestHeaderV2`` (one-letter keys); 10 and 324 use the long names.
_V2_CODES = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2})


def parse_request_header(request: RemotingCommand) -> SendMessageRequestHeader:
    """``parseRequestHeader``: V2 keys for codes 310, 320 and 325, the long names for 10 and 324.

    A missing required field or a value that does not parse raises ``HeaderFieldError`` naming the key the
    request used (``the custom field <b> is null``), which the transport answers with SYSTEM_ERROR.
    """
    v2 = request.code in _V2_CODES
    if v2 and request.ext_fields is not None:
        fast = _parse_v2_fast(request.ext_fields)
        if fast is not None:
            return fast

    def key(name: str) -> str:
        return V2_KEYS[name] if v2 else name

    h = request.header
    return SendMessageRequestHeader(
        producer_group=h.get_str(key("producerGroup")), topic=h.get_str(key("topic")),
        default_topic=h.get_str(key("defaultTopic")), default_topic_queue_nums=h.get_int(key("defaultTopicQueueNums")),
        queue_id=h.get_int(key("queueId")), sys_flag=h.get_int(key("sysFlag")),
        born_timestamp=h.get_long(key("bornTimestamp")), flag=h.get_int(key("flag")),
        properties=h.get_str(key("properties"), None), reconsume_times=h.get_int(key("reconsumeTimes"), None),
        unit_mode=h.get_bool(key("unitMode"), False), max_reconsume_times=h.get_int(key("maxReconsumeTimes"), None),
        batch=h.get_bool(key("batch"), False),
    )  # fmt: skip


#: Put outcomes that stored the message, and the code (a plain int, as a command holds it) each answers.
_SENT_CODES = {
    PutMessageStatus.PUT_OK: int(ResponseCode.SUCCESS),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: int(ResponseCode.FLUSH_DISK_TIMEOUT),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: int(ResponseCode.FLUSH_SLAVE_TIMEOUT),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: int(ResponseCode.SLAVE_NOT_AVAILABLE),
}


def born_host_of(conn: RemotingConnection) -> tuple[str, int]:
    """The producer's address as a born host, parsed once a connection."""
    peer: tuple[str, int] | None = conn.attributes.get("bornHost")
    if peer is None:
        try:
            peer = parse_address(conn.remote_address)
        except ValueError:
            peer = ("127.0.0.1", 0)
        conn.attributes["bornHost"] = peer
    return peer


class SendMessageProcessor:
    """The send processor of a broker."""

    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller

    # --- dispatch -------------------------------------------------------------------------------------
    def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> Reply:
        """The response, or (a SYNC_FLUSH put, a send-back) an awaitable of it: a send under ASYNC_FLUSH runs to
        its answer without a coroutine or a future (the transport takes either)."""
        ctl = self.controller
        if ctl.pending_puts >= ctl.broker_config.send_thread_pool_queue_capacity:
            # Java's answer when the send executor's queue is full (spec §3.6).
            return make_response_for(request, ResponseCode.SYSTEM_BUSY,
                                     "[OVERLOAD]system busy, start flow control for a while")  # fmt: skip
        if request.code == RequestCode.CONSUMER_SEND_MSG_BACK:
            return self.consumer_send_msg_back(conn, request)
        header = parse_request_header(request)
        if header.batch:
            return self.send_batch_message(conn, request, header)
        return self.send_message(conn, request, header)

    # --- checks ---------------------------------------------------------------------------------------
    def _region_and_trace(self) -> tuple[str, str]:
        """The MSG_REGION and TRACE_ON texts every send answer carries (settings, read at each answer)."""
        c = self.controller.broker_config
        return c.region_id, "true" if c.trace_on else "false"

    def response_ext(self) -> dict[str, str]:
        region, trace = self._region_and_trace()
        return {"MSG_REGION": region, "TRACE_ON": trace}

    def _fail(self, request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        return make_response_for(request, code, remark, ext_fields=self.response_ext())

    def msg_check(self, conn: RemotingConnection, request: RemotingCommand, header: SendMessageRequestHeader
                  ) -> RemotingCommand | tuple[TopicConfig, int]:  # fmt: skip
        """``msgCheck``: the topic config and the queue id to use, or the failure response."""
        ctl = self.controller
        cfg = ctl.broker_config
        topic = header.topic
        if not is_writeable(cfg.broker_permission) and ctl.topic_config_manager.is_order_topic(topic):
            return self._fail(request, ResponseCode.NO_PERMISSION,
                              f"the broker[{cfg.broker_ip1}] sending message is forbidden")  # fmt: skip
        problem = validate_topic(topic) or check_allowed_send_topic(topic)
        if problem is not None:
            return self._fail(request, *problem)
        tcm = ctl.topic_config_manager
        topic_config = tcm.select_topic_config(topic)
        if topic_config is None:
            sys_flag = 0
            if header.unit_mode:
                sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if is_retry_topic(topic) else TOPIC_SYS_FLAG_UNIT
            log.warning("the topic %s not exist, producer: %s", topic, conn.remote_address)
            topic_config = tcm.create_topic_in_send_message(topic, header.default_topic, conn.remote_address,
                                                            header.default_topic_queue_nums, sys_flag)  # fmt: skip
            if topic_config is None and is_retry_topic(topic):
                topic_config = tcm.create_topic_in_send_message_back(topic, 1, PERM_WRITE | PERM_READ, sys_flag)
            if topic_config is None:
                return self._fail(request, ResponseCode.TOPIC_NOT_EXIST,
                                  f"topic[{topic}] not exist, apply first please!{suggest_todo()}")  # fmt: skip
        queue_id = header.queue_id
        valid = max(topic_config.write_queue_nums, topic_config.read_queue_nums)
        if queue_id >= valid:
            return self._fail(request, ResponseCode.INVALID_PARAMETER,
                              f"request queueId[{queue_id}] is illegal, {_topic_config_str(topic_config)} "
                              f"Producer: {conn.remote_address}")  # fmt: skip
        if queue_id < 0:
            queue_id = random.randrange(99999999) % max(1, topic_config.write_queue_nums)
        return topic_config, queue_id

    # --- single message -------------------------------------------------------------------------------
    def send_message(self, conn: RemotingConnection, request: RemotingCommand,
                     header: SendMessageRequestHeader) -> Reply:  # fmt: skip
        ctl = self.controller
        checked = self.msg_check(conn, request, header)
        if isinstance(checked, RemotingCommand):
            return checked
        topic_config, queue_id = checked
        topic = header.topic
        props = string_to_properties(header.properties or "")
        props.pop(PROPERTY_POP_CK, None)
        reconsume_times = header.reconsume_times or 0
        if is_retry_topic(topic):
            group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
            sg = ctl.subscription_group_manager.find_subscription_group_config(group)
            if sg is None:
                return self._fail(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                  f"subscription group not exist, {group} {suggest_todo()}")  # fmt: skip
            max_times = sg.retry_max_times
            if request.version >= MQVersion.V3_4_9 and header.max_reconsume_times is not None:
                max_times = header.max_reconsume_times
            # 4.9.4: at the limit (>=); 5.x goes by > but sends a group that holds orderly locks there at once
            orderly = not ctl.rebalance_lock_manager.is_lock_all_expired(group)
            if reconsume_times >= max_times or orderly:
                topic = get_dlq_topic(group)
                queue_id = random.randrange(99999999) % DLQ_NUMS_PER_GROUP
                topic_config = ctl.topic_config_manager.create_topic_in_send_message_back(
                    topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0)
                props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        sys_flag = header.sys_flag
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        delayed = PROPERTY_DELAY_TIME_LEVEL in props and delay_level_of(props) > 0
        transactional = PROPERTY_TRANSACTION_PREPARED in props and parse_bool(props[PROPERTY_TRANSACTION_PREPARED]) \
            and not (reconsume_times > 0 and delayed)  # fmt: skip
        if transactional and ctl.broker_config.reject_transaction_message:
            return self._fail(request, ResponseCode.NO_PERMISSION,
                              f"the broker[{ctl.broker_config.broker_ip1}] sending transaction message is "
                              "forbidden")  # fmt: skip
        # Java drops WAIT from the stored properties, except where it re-encodes the property map later:
        # delayed messages (the schedule rewrite) and half messages.
        msg = ctl.store.message_ext_of(topic, request.body or b"", header.flag, props, queue_id,
                                       born_host=born_host_of(conn), born_timestamp=header.born_timestamp,
                                       sys_flag=sys_flag, keep_wait=transactional or delayed, reput_wait=True,
                                       reconsume_times=reconsume_times, add_uniq_key=False)  # fmt: skip
        if transactional:
            msg = _half_message(msg)
        put = ctl.put_message_now(msg)
        return self._answer(put, request, queue_id,  # the queue asked for (a half message is in queue 0)
                            msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))  # fmt: skip

    # --- batch ----------------------------------------------------------------------------------------
    def send_batch_message(self, conn: RemotingConnection, request: RemotingCommand,
                           header: SendMessageRequestHeader) -> Reply:  # fmt: skip
        ctl = self.controller
        checked = self.msg_check(conn, request, header)
        if isinstance(checked, RemotingCommand):
            return checked
        topic_config, queue_id = checked
        topic = header.topic
        if is_retry_topic(topic):
            return self._fail(request, ResponseCode.MESSAGE_ILLEGAL,
                              f"batch request does not support retry group {topic}")  # fmt: skip
        try:
            flags, bodies, entry_raws = split_batch_body(request.body or b"")
        except CorruptRecordError as exc:
            return self._fail(request, ResponseCode.MESSAGE_ILLEGAL, f"the batch body does not decode: {exc}")
        if not bodies:
            return self._fail(request, ResponseCode.MESSAGE_ILLEGAL, "the batch body holds no message")
        sys_flag = header.sys_flag
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        if sys_flag & TRANSACTION_MASK != TRANSACTION_NOT_TYPE:
            return self._fail(request, ResponseCode.MESSAGE_ILLEGAL, "batch message does not support transaction")
        # The batch's own properties (the header's, plus CLUSTER) follow each entry's properties; the maps are
        # what the stored bytes read back as (dispatch takes them instead of reading each record back).
        batch_props = string_to_properties(header.properties or "")
        batch_props[PROPERTY_CLUSTER] = ctl.broker_config.broker_cluster_name
        stored = join_batch_properties_column(entry_raws, encode_utf8_java(properties_to_string(
            hashmap_ordered(batch_props))))  # fmt: skip
        batch = MessageExtBatch(topic, queue_id, flags, bodies, stored, properties_of_bytes(stored), sys_flag,
                                header.born_timestamp, born_host_of(conn), ctl.store_host, header.reconsume_times or 0,
                                sent_size=len(request.body or b""),
                                wait_store_msg_ok=wait_store_msg_ok(batch_props.get(PROPERTY_WAIT_STORE_MSG_OK)))
        return self._answer(ctl.put_messages_now(batch), request, queue_id, None)

    # --- result ---------------------------------------------------------------------------------------
    def _answer(self, put: PutMessageResult | Awaitable[PutMessageResult], request: RemotingCommand, queue_id: int,
                transaction_id: str | None) -> Reply:  # fmt: skip
        """The answer to a put: at once for a put that is done, else an awaitable of it (one waiting for a flush)."""
        if isinstance(put, PutMessageResult):
            return self._handle_put_result(request, put, queue_id, transaction_id)
        return self._answer_later(put, request, queue_id, transaction_id)

    async def _answer_later(self, put: Awaitable[PutMessageResult], request: RemotingCommand, queue_id: int,
                            transaction_id: str | None) -> RemotingCommand | None:  # fmt: skip
        return self._handle_put_result(request, await put, queue_id, transaction_id)

    def _handle_put_result(self, request: RemotingCommand, result: PutMessageResult, queue_id: int,
                           transaction_id: str | None) -> RemotingCommand | None:  # fmt: skip
        """``handlePutMessageResult``."""
        status = result.status
        code = _SENT_CODES.get(status)
        if code is not None and request.is_oneway:
            return None  # nobody reads the answer to a one-way send: do not build it
        if code is not None:
            # The extFields as text already (in the order Java's HashMap writes them): nothing left to convert.
            region, trace = self._region_and_trace()
            ext = {"queueId": str(queue_id), "MSG_REGION": region, "TRACE_ON": trace, "msgId": result.msg_id,
                   "queueOffset": str(result.logics_offset)}  # fmt: skip
            # Numbers, hex ids and true/false: plain JSON text, but for the region (a setting, checked once per
            # value) and the transaction id (5.x's answer carries it): the message's UNIQ_KEY, when it has one.
            # Clients write it in hex, yet it is the producer's text, so it is checked.
            answer = UnescapedCommand if _plain_setting(region) else RemotingCommand
            if transaction_id:
                ext["transactionId"] = transaction_id
                if not plain_json_text(transaction_id):
                    answer = RemotingCommand
            # Positional: the defaults of language, version and remark, the answer's opaque and flag.
            return answer(code, LanguageCode.JAVA, CURRENT_VERSION, request.opaque, FLAG_RESPONSE, None, ext)
        code, remark = self.put_failure(status, result.error)
        log.warning("put failed: %s (%s)", status.value, result.error)
        return self._fail(request, code, remark)

    def put_failure(self, status: PutMessageStatus, error: str = "") -> tuple[int, str]:
        """The response code and Java's remark for a put that did not store the message."""
        if status is PutMessageStatus.CREATE_MAPEDFILE_FAILED:
            return ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."
        if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
            limit = self.controller.store_config.max_message_size
            detail = f" ({error})" if error else ""
            return (ResponseCode.MESSAGE_ILLEGAL,
                    f"the message is illegal, maybe msg body or properties length not matched. msg body length "
                    f"limit {limit}B, msg properties length limit 32KB.{detail}")  # fmt: skip
        if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
            return (ResponseCode.SERVICE_NOT_AVAILABLE,
                    "service not available now. It may be caused by one of the following reasons: the broker's "
                    f"disk is full [{self._disk_util()}], messages are put to the slave, message store has been "
                    "shut down, etc.")  # fmt: skip
        if status is PutMessageStatus.OS_PAGECACHE_BUSY:
            return ResponseCode.SYSTEM_ERROR, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
        if status is PutMessageStatus.UNKNOWN_ERROR:
            return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"

    def _disk_util(self) -> str:
        """``diskUtil``: the used fraction of each store path's partition (``getDiskPartitionSpaceUsedPercent``)."""
        cfg = self.controller.store_config
        cl, cq, index = (store_path_used_ratio(p, cfg.root) for p in (cfg.commit_log_path, cfg.consume_queue_path,
                                                                       cfg.index_path))  # fmt: skip
        return f"CL: {cl:5.2f} CQ: {cq:5.2f} INDEX: {index:5.2f}"

    # --- send back ------------------------------------------------------------------------------------
    async def consumer_send_msg_back(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """``consumerSendMsgBack``: a consumed message back into the group's retry topic, or its DLQ."""
        ctl = self.controller
        h = request.header
        offset = h.get_long("offset")
        group = h.get_str("group")
        delay_level = h.get_int("delayLevel")
        unit_mode = h.get_bool("unitMode", False)
        header_max_times = h.get_int("maxReconsumeTimes", None)
        sg = ctl.subscription_group_manager.find_subscription_group_config(group)
        if sg is None:
            return make_response_for(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                     f"subscription group not exist, {group} {suggest_todo()}")  # fmt: skip
        if not is_writeable(ctl.broker_config.broker_permission):
            remark = f"the broker[{ctl.broker_config.broker_ip1}] sending message is forbidden"
            return make_response_for(request, ResponseCode.NO_PERMISSION, remark)
        if sg.retry_queue_nums <= 0:
            return make_response_for(request, ResponseCode.SUCCESS)
        new_topic = get_retry_topic(group)
        queue_id = random.randrange(99999999) % sg.retry_queue_nums
        topic_sys_flag = 2 if unit_mode else 0
        tcm = ctl.topic_config_manager
        topic_config = tcm.create_topic_in_send_message_back(new_topic, sg.retry_queue_nums, PERM_WRITE | PERM_READ,
                                                             topic_sys_flag)  # fmt: skip
        if not is_writeable(topic_config.perm):
            return make_response_for(request, ResponseCode.NO_PERMISSION,
                                     f"the topic[{new_topic}] sending message is forbidden")  # fmt: skip
        original = ctl.store.look_message_by_offset(offset)
        if original is None:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        props = dict(original.properties)
        props.setdefault(PROPERTY_RETRY_TOPIC, original.topic)
        props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        max_times = sg.retry_max_times
        if request.version >= MQVersion.V3_4_9 and header_max_times is not None:
            max_times = header_max_times
        if original.reconsume_times >= max_times or delay_level < 0:
            new_topic = get_dlq_topic(group)
            queue_id = random.randrange(99999999) % DLQ_NUMS_PER_GROUP
            tcm.create_topic_in_send_message_back(new_topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0)
            props[PROPERTY_DELAY_TIME_LEVEL] = "0"
        else:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level or 3 + original.reconsume_times)
        props[PROPERTY_ORIGIN_MESSAGE_ID] = original.properties.get(PROPERTY_ORIGIN_MESSAGE_ID) or original.msg_id
        msg = MessageExt(
            topic=new_topic, body=original.body, flag=original.flag,
            properties=hashmap_ordered(props), queue_id=queue_id, sys_flag=original.sys_flag,
            born_timestamp=original.born_timestamp, born_host=original.born_host, store_host=original.store_host,
            reconsume_times=original.reconsume_times + 1, wait_store_msg_ok=False,
        )  # fmt: skip
        result = await ctl.put_message(msg)
        if result.status is PutMessageStatus.PUT_OK:
            return make_response_for(request, ResponseCode.SUCCESS)
        return make_response_for(request, ResponseCode.SYSTEM_ERROR, result.status.value)


def _half_message(msg: MessageExt) -> MessageExt:
    """``TransactionalMessageBridge.parseHalfMessageInner``: park the message in the half topic, queue 0."""
    props = dict(msg.properties)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties = hashmap_ordered(props)
    msg.properties_bytes = None
    msg.sys_flag &= ~TRANSACTION_MASK
    msg.topic = RMQ_SYS_TRANS_HALF_TOPIC
    msg.queue_id = 0
    return msg


def _topic_config_str(cfg: TopicConfig) -> str:
    """Java's ``TopicConfig.toString``."""
    return (f"TopicConfig [topicName={cfg.topic_name}, readQueueNums={cfg.read_queue_nums}, "
            f"writeQueueNums={cfg.write_queue_nums}, perm={_perm_str(cfg.perm)}, "
            f"topicFilterType={cfg.topic_filter_type}, topicSysFlag={cfg.topic_sys_flag}, "
            f"order={'true' if cfg.order else 'false'}]")  # fmt: skip


def _perm_str(perm: int) -> str:
    """``PermName.perm2String``."""
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")
