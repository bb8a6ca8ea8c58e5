"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): RocketMQ's ``broker/processor/ReplyMessageProcessor``,
the broker's half of request-reply (RocketMQ 4.6+).

A requester sends an ordinary message carrying ``CORRELATION_ID``, ``REPLY_TO_CLIENT`` (its client id) and ``TTL``.
The responder consumes it and sends a reply (``MSG_TYPE=reply``, to ``<cluster>_REPLY_TOPIC``) with one of these
codes. The broker then, as Java does:

1. checks the reply as a send is checked (``msgCheck``: topic, permission, queue id);
2. pushes it to the requester: PUSH_REPLY_MESSAGE_TO_CLIENT (326) on the connection of the producer whose client
   id is ``REPLY_TO_CLIENT``, with a ``ReplyMessageRequestHeader`` (the send's fields plus ``bornHost``,
   ``storeHost``, ``storeTimestamp``; ``PUSH_REPLY_TIME`` added to the properties) and the body as sent, and
   waits up to 10 s for the answer. The send is answered SUCCESS when the requester took the reply, otherwise
   SYSTEM_ERROR with Java's remark (no ``REPLY_TO_CLIENT``, no such producer connected, the push failed);
3. with ``storeReplyMessageEnable`` (default true), stores the reply in its topic whatever the push did, with the
   properties exactly as sent; the answer then carries the stored message's ``msgId``, ``queueId`` and
   ``queueOffset`` (``"0"`` and 0 otherwise).

One difference: RocketMQ 4.9.4 stores the reply with sysflag 0 even when its body came compressed (the push keeps
the flag); rocketq stores the flag the send carried, so the stored reply reads back as it was sent.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from rocketq.broker.send_message_processor import (
    SendMessageProcessor,
    SendMessageRequestHeader,
    born_host_of,
    parse_request_header,
)
from rocketq.common.javacompat import encode_utf8_java, hashmap_ordered
from rocketq.common.message import (
    PROPERTY_MESSAGE_REPLY_TO_CLIENT,
    PROPERTY_PUSH_REPLY_TIME,
    MessageExt,
    properties_to_string,
    string_to_properties,
)
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request, make_response_for
from rocketq.remoting.errors import RemotingError
from rocketq.remoting.transport import RemotingConnection

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

__all__ = ["PUSH_REPLY_TIMEOUT_S", "ReplyMessageProcessor"]

log = logging.getLogger(__name__)

#: ``Broker2Client.callClient``: how long the push waits for the requester's answer.
PUSH_REPLY_TIMEOUT_S = 10.0


def _host_text(host: tuple[str, int]) -> str:
    """``getHostAddress() + ":" + port``: an IPv6 address without brackets, as Java writes it."""
    return f"{host[0]}:{host[1]}"


class ReplyMessageProcessor:
    """The reply processor of a broker (module docstring)."""

    def __init__(self, controller: BrokerController, send: SendMessageProcessor) -> None:
        self.controller = controller
        self.send = send  # its msgCheck, header parsing and put-failure texts serve replies too

    async def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ctl = self.controller
        header = parse_request_header(request)
        checked = self.send.msg_check(conn, request, header)
        if isinstance(checked, RemotingCommand):
            return checked
        _topic_config, queue_id = checked
        props = string_to_properties(header.properties or "")
        born_host = born_host_of(conn)
        ok, remark = await self._push(conn, header, props, request.body or b"", born_host)
        ext = self.send.response_ext()
        if ok:
            ext.update(msgId="0", queueId=str(queue_id), queueOffset="0")
        if ctl.broker_config.store_reply_message_enable:
            msg = MessageExt(
                header.topic, request.body or b"", header.flag, props, queue_id, header.sys_flag,
                header.born_timestamp, born_host, 0, ctl.store_host, header.reconsume_times or 0,
            )  # fmt: skip
            # Stored with the properties as the responder sent them (Java's ``setPropertiesString``).
            text = header.properties or ""
            msg.properties_bytes = text.encode("utf-8") if text.isascii() else encode_utf8_java(text)
            msg.properties_parsed = True  # props is what that text reads back as
            result = await ctl.put_message(msg)
            if result.ok:
                ext.update(msgId=result.msg_id, queueId=str(queue_id), queueOffset=str(result.logics_offset))
            else:
                log.warning("reply message to %s not stored: %s (%s)", header.topic, result.status.value, result.error)
        if ok:
            return make_response_for(request, ResponseCode.SUCCESS, None, ext_fields=ext)
        return make_response_for(request, ResponseCode.SYSTEM_ERROR, remark, ext_fields=ext)

    async def _push(self, conn: RemotingConnection, header: SendMessageRequestHeader, props: dict[str, str],
                    body: bytes, born_host: tuple[str, int]) -> tuple[bool, str]:  # fmt: skip
        """``pushReplyMessage``: (whether the requester took the reply, the remark when it did not)."""
        ctl = self.controller
        sender = props.get(PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if sender is None:
            log.warning("%s is null, can not reply message", PROPERTY_MESSAGE_REPLY_TO_CLIENT)
            return False, f"reply message properties[{PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"
        channel = ctl.producer_manager.find_channel(sender)
        if channel is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            log.warning(remark)
            return False, remark
        pushed = dict(props)
        pushed[PROPERTY_PUSH_REPLY_TIME] = str(int(time.time() * 1000))
        fields: dict[str, object] = {
            "producerGroup": header.producer_group, "topic": header.topic, "defaultTopic": header.default_topic,
            "defaultTopicQueueNums": header.default_topic_queue_nums, "queueId": header.queue_id,
            "sysFlag": header.sys_flag, "bornTimestamp": header.born_timestamp, "flag": header.flag,
            "properties": properties_to_string(hashmap_ordered(pushed)), "reconsumeTimes": header.reconsume_times,
            "unitMode": header.unit_mode, "bornHost": _host_text(born_host),
            "storeHost": _host_text(ctl.store_host), "storeTimestamp": int(time.time() * 1000),
        }  # fmt: skip
        # A None (no reconsumeTimes) is left out of the header, as Java leaves out a null field.
        request = create_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, hashmap_ordered(fields), body)
        failed = f"push reply message to {sender}fail."  # sic: Java's text has no space before "fail"
        try:
            answer = await channel.invoke(request, timeout=PUSH_REPLY_TIMEOUT_S)
        except (RemotingError, OSError) as exc:
            log.warning("push reply message to <%s> fail: %s", sender, exc)
            return False, failed
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", sender, answer.remark)
            return False, failed
        return True, ""
