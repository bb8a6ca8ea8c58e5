"""Every request the client sends, built and answered as the Java client does: ``MQClientAPIImpl``.

One method per call of remoting-protocol §6–§7. Requests carry the header fields of the Java header
classes under their Java names, in the order a Java ``HashMap`` iterates them (so a request is the same
bytes as the 4.9.4 captures), with the client's ``language`` and ``version``. Failures come back as the
exceptions of :mod:`rocketq.client.errors`: a broker's error code as ``BrokerError``, no answer as
``ClientTimeoutError``, a connection that cannot be had as ``BrokerUnreachableError``.

Name servers: the client keeps asking the one that last answered and moves on to the next on a
connection failure or timeout (Java's ``namesrvAddrChoosed``).
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Iterable, Mapping
from typing import Any

from rocketq.client.client_config import ClientConfig
from rocketq.client.errors import BrokerError, BrokerUnreachableError, ClientTimeoutError, broker_error
from rocketq.client.heartbeat import CheckClientRequestBody, HeartbeatData, SubscriptionData
from rocketq.client.message_queue import MessageQueue
from rocketq.client.route import TopicRouteData, parse_topic_route
from rocketq.client.send_result import SendResult, SendStatus
from rocketq.common import json_compat
from rocketq.common.codec import decode_records_of
from rocketq.common.javacompat import hashmap_order
from rocketq.common.message import MessageClientExt, MessageExt
from rocketq.common.mixall import AUTO_CREATE_TOPIC_KEY_TOPIC
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, ext_value, next_opaque
from rocketq.remoting.errors import RemotingConnectError, RemotingTimeoutError
from rocketq.remoting.transport import RemotingClient

__all__ = ["MQClientAPI", "decode_records"]

log = logging.getLogger(__name__)

#: The template topic a broker auto-creates new topics from (``TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC``).

# SendMessageRequestHeader field → SendMessageRequestHeaderV2 key.
_V2_KEYS = {
    "producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d", "queueId": "e",
    "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i", "reconsumeTimes": "j",
    "unitMode": "k", "maxReconsumeTimes": "l", "batch": "m",
}  # fmt: skip


@functools.lru_cache(maxsize=512)
def _java_order(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(hashmap_order(names))


def java_ext_fields(fields: Mapping[str, object]) -> dict[str, str]:
    """``extFields`` as Java's ``makeCustomHeaderToNet`` fills its HashMap: values as text, nulls left out,
    keys in HashMap iteration order."""
    present = {k: text for k, v in fields.items() if (text := ext_value(v)) is not None}
    return {k: present[k] for k in _java_order(tuple(present))}


def decode_records(body: bytes | None, *, client: bool = True) -> list[MessageExt]:
    """The records of a pull/query body, back to back; a record that does not decode ends the list,
    as Java's ``MessageDecoder.decodes`` stops at the first it cannot read.

    As Java's client decodes them: a pulled, queried or viewed message is a :class:`MessageClientExt` (its
    ``msg_id`` the producer's id); a broker's check-back or consume-directly request carries a plain
    :class:`MessageExt` (*client* False)."""
    if not body:
        return []
    msgs, error = decode_records_of(body)
    if error is not None:
        log.warning("dropping the rest of a body: %s", error)
    if client:
        for msg in msgs:
            msg.__class__ = MessageClientExt
    return msgs


class MQClientAPI:
    """The calls of one client instance over its ``RemotingClient``."""

    def __init__(self, remoting: RemotingClient, config: ClientConfig) -> None:
        self.remoting = remoting
        self.config = config
        self._namesrv_addrs: list[str] = []
        self._namesrv_index = random.randrange(1 << 16)
        self._namesrv_chosen: str | None = None

    # -- plumbing ---------------------------------------------------------------------------------

    def request(self, code: int, fields: Mapping[str, object] | None = None, body: bytes | None = None,
                *, oneway: bool = False) -> RemotingCommand:  # fmt: skip
        """A request with a fresh opaque, the client's language and version, Java-ordered header fields."""
        return RemotingCommand(
            code=int(code),
            language=self.config.language,
            version=self.config.version,
            opaque=next_opaque(),
            flag=2 if oneway else 0,
            ext_fields=None if fields is None else java_ext_fields(fields),
            body=body,
        )

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        try:
            return await self.remoting.invoke(request, timeout, addr=addr)
        except RemotingTimeoutError as exc:
            raise ClientTimeoutError(str(exc)) from None
        except RemotingConnectError as exc:
            raise BrokerUnreachableError(str(exc)) from None

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        try:
            await self.remoting.invoke_oneway(request, addr=addr)
        except RemotingConnectError as exc:
            raise BrokerUnreachableError(str(exc)) from None

    @staticmethod
    def _check(response: RemotingCommand, addr: str, *ok: int) -> RemotingCommand:
        if response.code in (ok or (ResponseCode.SUCCESS,)):
            return response
        raise broker_error(response.code, response.remark, addr)

    # -- name server ------------------------------------------------------------------------------

    def set_namesrv_addrs(self, addrs: Iterable[str]) -> None:
        self._namesrv_addrs = list(addrs)

    def namesrv_addrs(self) -> list[str]:
        return list(self._namesrv_addrs)

    async def invoke_namesrv(self, request: RemotingCommand, timeout: float) -> RemotingCommand:
        addrs = self._namesrv_addrs or self.config.namesrv_addrs()
        self._namesrv_addrs = addrs
        order: list[str] = []
        chosen = self._namesrv_chosen
        if chosen is not None and chosen in addrs:
            order.append(chosen)
        for i in range(len(addrs)):
            addr = addrs[(self._namesrv_index + i) % len(addrs)]
            if addr not in order:
                order.append(addr)
        last: Exception | None = None
        for addr in order:
            try:
                response = await self.invoke(addr, request, timeout)
            except (BrokerUnreachableError, ClientTimeoutError) as exc:
                last = exc
                self._namesrv_index += 1
                if self._namesrv_chosen == addr:
                    self._namesrv_chosen = None
                request.opaque = next_opaque()
                continue
            self._namesrv_chosen = addr
            return response
        assert last is not None
        raise type(last)(f"no name server answered ({';'.join(order)}): {last}") from None

    async def get_topic_route(self, topic: str, timeout: float | None = None) -> TopicRouteData | None:
        """The route of ``topic``; ``None`` when the name server has none (TOPIC_NOT_EXIST)."""
        request = self.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        response = await self.invoke_namesrv(request, timeout or self.config.api_timeout)
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        self._check(response, self._namesrv_chosen or "name server")
        if not response.body:
            return None
        return parse_topic_route(response.body)

    # -- sending ----------------------------------------------------------------------------------

    def send_request(self, header: dict[str, object], body: bytes, *, batch: bool, smart: bool = True,
                     oneway: bool = False, reply: bool = False) -> RemotingCommand:  # fmt: skip
        """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE for a batch; SEND_MESSAGE with long keys when ``smart`` is
        off; SEND_REPLY_MESSAGE_V2 / SEND_REPLY_MESSAGE for the reply of a request-reply) from the fields of
        Java's ``SendMessageRequestHeader``."""
        if reply:
            code = RequestCode.SEND_REPLY_MESSAGE_V2 if smart else RequestCode.SEND_REPLY_MESSAGE
            fields: dict[str, object] = {_V2_KEYS[k]: v for k, v in header.items()} if smart else header
        elif smart or batch:
            code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
            fields = {_V2_KEYS[k]: v for k, v in header.items()}
        else:
            code = RequestCode.SEND_MESSAGE
            fields = header
        return self.request(code, fields, body, oneway=oneway)

    def process_send_response(self, response: RemotingCommand, addr: str, broker_name: str, topic: str,
                              uniq_id: str) -> SendResult:  # fmt: skip
        status = SendStatus.from_response_code(response.code)
        if status is None:
            raise broker_error(response.code, response.remark, addr)
        h = response.header
        ext = response.ext_fields or {}
        return SendResult(
            status=status,
            msg_id=uniq_id,
            offset_msg_id=h.get_str("msgId", ""),
            message_queue=MessageQueue(topic, broker_name, h.get_int("queueId", -1)),
            queue_offset=h.get_long("queueOffset", -1),
            transaction_id=h.get_str("transactionId", None),
            region_id=ext.get("MSG_REGION") or "DefaultRegion",
            trace_on=ext.get("TRACE_ON") != "false",
        )

    # -- pulling ----------------------------------------------------------------------------------

    async def pull_message(self, addr: str, fields: Mapping[str, object], timeout: float) -> RemotingCommand:
        """PULL_MESSAGE; the raw response (the caller maps its code to a ``PullStatus``)."""
        request = self.request(RequestCode.PULL_MESSAGE, fields)
        response = await self.invoke(addr, request, timeout)
        if response.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                                 ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED):  # fmt: skip
            raise broker_error(response.code, response.remark, addr)
        return response

    # -- offsets ----------------------------------------------------------------------------------

    async def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int,
                                    timeout: float | None = None, *,
                                    set_zero_if_not_found: bool | None = None) -> int:  # fmt: skip
        """The group's committed offset of a queue; -1 when the broker has none (QUERY_NOT_FOUND).

        A broker that has no offset answers 0 for a queue whose first message is still in memory, unless
        ``set_zero_if_not_found`` is False (a 5.x header field; 4.x brokers ignore it)."""
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id,
                  "setZeroIfNotFound": set_zero_if_not_found}  # fmt: skip
        request = self.request(RequestCode.QUERY_CONSUMER_OFFSET, fields)
        response = await self.invoke(addr, request, timeout or self.config.api_timeout)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        self._check(response, addr)
        return response.header.get_long("offset")

    async def update_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int,
                                     *, oneway: bool = False, timeout: float | None = None) -> None:  # fmt: skip
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset}
        request = self.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields, oneway=oneway)
        if oneway:
            await self.invoke_oneway(addr, request)
            return
        self._check(await self.invoke(addr, request, timeout or self.config.api_timeout), addr)

    async def _offset_call(self, code: int, addr: str, fields: Mapping[str, object], key: str,
                           timeout: float | None) -> int:  # fmt: skip
        response = await self.invoke(addr, self.request(code, fields), timeout or self.config.api_timeout)
        self._check(response, addr)
        return response.header.get_long(key)

    async def get_max_offset(self, addr: str, topic: str, queue_id: int, timeout: float | None = None) -> int:
        fields = {"topic": topic, "queueId": queue_id}
        return await self._offset_call(RequestCode.GET_MAX_OFFSET, addr, fields, "offset", timeout)

    async def get_min_offset(self, addr: str, topic: str, queue_id: int, timeout: float | None = None) -> int:
        fields = {"topic": topic, "queueId": queue_id}
        return await self._offset_call(RequestCode.GET_MIN_OFFSET, addr, fields, "offset", timeout)

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp: int,
                            timeout: float | None = None) -> int:  # fmt: skip
        fields = {"topic": topic, "queueId": queue_id, "timestamp": timestamp}
        return await self._offset_call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, addr, fields, "offset", timeout)

    async def get_earliest_msg_storetime(self, addr: str, topic: str, queue_id: int,
                                         timeout: float | None = None) -> int:  # fmt: skip
        fields = {"topic": topic, "queueId": queue_id}
        return await self._offset_call(RequestCode.GET_EARLIEST_MSG_STORETIME, addr, fields, "timestamp", timeout)

    # -- membership -------------------------------------------------------------------------------

    async def send_heartbeat(self, addr: str, data: HeartbeatData, timeout: float | None = None) -> int:
        """HEART_BEAT; returns the broker's version (from the response header)."""
        request = self.request(RequestCode.HEART_BEAT, None, data.encode())
        response = self._check(await self.invoke(addr, request, timeout or self.config.api_timeout), addr)
        return response.version

    async def check_client_in_broker(self, addr: str, group: str, client_id: str, sub: SubscriptionData,
                                     timeout: float | None = None) -> None:  # fmt: skip
        """CHECK_CLIENT_CONFIG: does the broker take this subscription (an SQL92 one: is the filter on, does the
        expression compile)? Raises :class:`BrokerError` with the broker's remark when not."""
        body = CheckClientRequestBody(client_id=client_id, group=group, subscription_data=sub).encode()
        request = self.request(RequestCode.CHECK_CLIENT_CONFIG, None, body)
        self._check(await self.invoke(addr, request, timeout or self.config.api_timeout), addr)

    async def unregister_client(self, addr: str, client_id: str, producer_group: str | None,
                                consumer_group: str | None, timeout: float | None = None) -> None:  # fmt: skip
        fields = {"clientID": client_id, "producerGroup": producer_group, "consumerGroup": consumer_group}
        request = self.request(RequestCode.UNREGISTER_CLIENT, fields)
        self._check(await self.invoke(addr, request, timeout or self.config.api_timeout), addr)

    async def get_consumer_id_list(self, addr: str, group: str, timeout: float | None = None) -> list[str]:
        request = self.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
        response = self._check(await self.invoke(addr, request, timeout or self.config.api_timeout), addr)
        if not response.body:
            raise BrokerError(response.code, "GET_CONSUMER_LIST_BY_GROUP answered without a body", addr)
        body = json_compat.loads(response.body)
        return [str(c) for c in (body.get("consumerIdList") or [])]

    async def consumer_send_message_back(self, addr: str, msg: MessageExt, group: str, delay_level: int,
                                         max_reconsume_times: int, timeout: float = 5.0) -> None:  # fmt: skip
        """CONSUMER_SEND_MSG_BACK: hand a message the consumer failed on back for a later retry."""
        origin_id = msg.properties.get("UNIQ_KEY") or msg.msg_id
        fields = {
            "offset": msg.commit_log_offset, "group": group, "delayLevel": delay_level, "originMsgId": origin_id,
            "originTopic": msg.topic, "unitMode": False, "maxReconsumeTimes": max_reconsume_times,
        }  # fmt: skip
        request = self.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)
        self._check(await self.invoke(addr, request, timeout), addr)

    # -- orderly locks ----------------------------------------------------------------------------

    @staticmethod
    def _lock_body(group: str, client_id: str, mqs: Iterable[MessageQueue]) -> bytes:
        return json_compat.dumps_bytes({
            "clientId": client_id, "consumerGroup": group, "mqSet": [mq.to_json() for mq in mqs],
        })  # fmt: skip

    async def lock_batch_mq(self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue],
                            timeout: float = 1.0) -> set[MessageQueue]:  # fmt: skip
        """LOCK_BATCH_MQ: the queues this client now holds on that broker."""
        request = self.request(RequestCode.LOCK_BATCH_MQ, None, self._lock_body(group, client_id, mqs))
        response = self._check(await self.invoke(addr, request, timeout), addr)
        if not response.body:
            return set()
        body = json_compat.loads(response.body)
        return {MessageQueue.from_json(mq) for mq in (body.get("lockOKMQSet") or [])}

    async def unlock_batch_mq(self, addr: str, group: str, client_id: str, mqs: Iterable[MessageQueue],
                              *, oneway: bool = False, timeout: float = 1.0) -> None:  # fmt: skip
        request = self.request(RequestCode.UNLOCK_BATCH_MQ, None, self._lock_body(group, client_id, mqs),
                               oneway=oneway)  # fmt: skip
        if oneway:
            await self.invoke_oneway(addr, request)
        else:
            self._check(await self.invoke(addr, request, timeout), addr)

    # -- lookups and admin ------------------------------------------------------------------------

    async def view_message(self, addr: str, phy_offset: int, timeout: float | None = None) -> MessageExt:
        request = self.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy_offset})
        response = self._check(await self.invoke(addr, request, timeout or self.config.api_timeout), addr)
        msgs = decode_records(response.body)
        if not msgs:
            raise BrokerError(response.code, f"no message in the answer for offset {phy_offset}", addr)
        return msgs[0]

    async def query_message(self, addr: str, topic: str, key: str, max_num: int, begin: int, end: int,
                            *, unique_key: bool = False, timeout: float | None = None) -> list[MessageExt]:  # fmt: skip
        fields: dict[str, Any] = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin,
                                  "endTimestamp": end, "_UNIQUE_KEY_QUERY": unique_key}  # fmt: skip
        response = await self.invoke(addr, self.request(RequestCode.QUERY_MESSAGE, fields),
                                     timeout or self.config.api_timeout)  # fmt: skip
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        self._check(response, addr)
        return decode_records(response.body)

    async def create_topic(self, addr: str, topic: str, *, read_queue_nums: int = 8, write_queue_nums: int = 8,
                           perm: int = 6, order: bool = False, timeout: float | None = None) -> None:  # fmt: skip
        """UPDATE_AND_CREATE_TOPIC on one broker (what ``mqadmin updateTopic`` sends)."""
        fields = {
            "topic": topic, "defaultTopic": AUTO_CREATE_TOPIC_KEY_TOPIC, "readQueueNums": read_queue_nums,
            "writeQueueNums": write_queue_nums, "perm": perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
            "order": order,
        }  # fmt: skip
        request = self.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        self._check(await self.invoke(addr, request, timeout or 10.0), addr)
