"""END_TRANSACTION (37): RocketMQ's ``broker/processor/EndTransactionProcessor`` with the commit and rollback
parts of ``TransactionalMessageServiceImpl`` / ``TransactionalMessageBridge`` (spec §6.11, §11.6).

Commit: the half message at ``commitLogOffset`` (in ``RMQ_SYS_TRANS_HALF_TOPIC``) is checked against the
request (producer group, queue offset, commit-log offset), then stored again in its real topic and queue
(``REAL_TOPIC`` / ``REAL_QID``) with the commit type in ``sysFlag`` and the half message's offset as the
prepared-transaction offset, and an op message (tag ``d``, body = the half message's queue offset) goes to
``RMQ_SYS_TRANS_OP_HALF_TOPIC`` to mark it resolved. Rollback writes only the op message. ``unknown`` (0)
is ignored, as Java ignores it. The stored properties of a committed message are those of the half message,
as Java writes them (``REAL_TOPIC``, ``REAL_QID`` and ``TRAN_MSG`` included); the map the broker acts on has
none of the three (a committed message that asks for a due time goes through the timer like any other).

The check-back of half messages left unresolved is :mod:`rocketq.broker.transactional_message_check_service`;
the producer's answer to a check arrives here, with ``fromTransactionCheck=true``, and is handled the same way.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketq.common.javacompat import encode_utf8_java
from rocketq.common.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
    properties_to_string,
    wait_store_msg_ok,
)
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.command import RemotingCommand, make_response_for
from rocketq.remoting.errors import HeaderFieldError
from rocketq.remoting.transport import RemotingConnection
from rocketq.store.commit_log import PutMessageStatus

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)


class EndTransactionProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller

    async def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        ctl = self.controller
        h = request.header
        producer_group = h.get_str("producerGroup")
        tran_state_table_offset = h.get_long("tranStateTableOffset")
        commit_log_offset = h.get_long("commitLogOffset")
        commit_or_rollback = h.get_int("commitOrRollback")
        from_check = h.get_bool("fromTransactionCheck", False)
        if commit_or_rollback not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            raise HeaderFieldError("commitOrRollback", "commitOrRollback field wrong")  # the header's checkFields
        if ctl.broker_config.broker_role == "SLAVE":
            return make_response_for(request, ResponseCode.SLAVE_NOT_AVAILABLE)
        if commit_or_rollback not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            log.info("transaction %s of %s stays unknown (check=%s)", h.get_str("msgId", "?"), producer_group,
                     from_check)  # fmt: skip
            return None
        half = ctl.store.look_message_by_offset(commit_log_offset)
        problem = _check_prepare_message(half, producer_group, tran_state_table_offset, commit_log_offset)
        if problem is not None:
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, problem)
        assert half is not None
        if commit_or_rollback == TRANSACTION_COMMIT_TYPE:
            final = _end_message_transaction(half)
            final.sys_flag = (final.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT_TYPE
            final.prepared_transaction_offset = commit_log_offset
            result = await ctl.put_message(final)
            if result.status not in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                                     PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE):
                code, remark = ctl.send_message_processor.put_failure(result.status, result.error)
                return make_response_for(request, code, remark)
        await ctl.transactional_message_service.delete_prepare_message(half)
        if commit_or_rollback == TRANSACTION_ROLLBACK_TYPE:
            # Java answers a rollback with checkPrepareMessage's response, made with createResponseCommand(null):
            # its code set to SUCCESS later, its default remark left.
            return make_response_for(request, ResponseCode.SUCCESS, "not set any response code")
        return make_response_for(request, ResponseCode.SUCCESS)


def _check_prepare_message(half: MessageExt | None, producer_group: str, queue_offset: int,
                           commit_log_offset: int) -> str | None:  # fmt: skip
    """``checkPrepareMessage``: None when the half message matches the request, else Java's remark."""
    if half is None:
        return "Find prepared transaction message failed"
    if half.properties.get(PROPERTY_PRODUCER_GROUP) != producer_group:
        return "The producer group wrong"
    if half.queue_offset != queue_offset:
        return "The transaction state table offset wrong"
    if half.commit_log_offset != commit_log_offset:
        return "The commit log offset wrong"
    return None


def _end_message_transaction(half: MessageExt) -> MessageExt:
    """``endMessageTransaction``: the real message, with the half message's property string kept as stored."""
    topic = half.properties.get(PROPERTY_REAL_TOPIC, "")
    try:
        queue_id = int(half.properties.get(PROPERTY_REAL_QUEUE_ID, "0"))
    except ValueError:
        queue_id = 0
    props = dict(half.properties)
    for name in (PROPERTY_TRANSACTION_PREPARED, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID):
        props.pop(name, None)
    raw = half.properties_bytes
    if raw is None:
        raw = encode_utf8_java(properties_to_string(props))
    # Java sets waitStoreMsgOK false, then replaces the property map with the half message's: its WAIT decides.
    return MessageExt(topic=topic, body=half.body, flag=half.flag, properties=props, queue_id=queue_id,
                      sys_flag=half.sys_flag & ~TRANSACTION_MASK | TRANSACTION_NOT_TYPE,
                      born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
                      reconsume_times=half.reconsume_times, properties_bytes=raw,
                      wait_store_msg_ok=wait_store_msg_ok(props.get(PROPERTY_WAIT_STORE_MSG_OK)))  # fmt: skip
