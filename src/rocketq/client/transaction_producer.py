"""The transactional producer: Java's ``TransactionMQProducer`` with the transaction parts of
``DefaultMQProducerImpl`` (``sendMessageInTransaction``, ``endTransaction``, ``checkTransactionState``) and of
``ClientRemotingProcessor.checkTransactionState`` (remoting-protocol §6.11, §11.6).

::

    class Orders(TransactionListener):
        def execute_local_transaction(self, msg, arg):      # or async def
            db.insert(arg)
            return LocalTransactionState.COMMIT_MESSAGE
        def check_local_transaction(self, msg):             # or async def; msg.uniq_key is the transaction id
            return LocalTransactionState.COMMIT_MESSAGE if db.has(msg.uniq_key) else LocalTransactionState.UNKNOW

    async with TransactionProducer("TxGroup", "127.0.0.1:9876", listener=Orders()) as producer:
        result = await producer.send_message_in_transaction(new_message("Orders", b"..."), arg=order)
        result.local_transaction_state                      # what the local transaction said

How a transaction goes:

1. The message loses any delay level (as in Java), gains ``TRAN_MSG=true`` and ``PGROUP=<group>``, and is sent
   synchronously; the producer flags it prepared in ``sysFlag`` and the broker keeps it as a half message that
   no consumer sees.
2. If the broker stored it (SEND_OK), the listener's ``execute_local_transaction(msg, arg)`` runs; an exception
   or ``None`` counts as UNKNOW. Any other send status means ROLLBACK_MESSAGE.
3. END_TRANSACTION, one-way, to the broker that has the half message: commit (8), rollback (12) or unknown (0,
   the broker will ask later). A failure here is logged, not raised: the broker's check-back covers it.
4. Later, a broker may ask about a half message it has not had an answer for (CHECK_TRANSACTION_STATE, sent to
   any producer of the group): ``check_local_transaction(msg)`` runs and its answer goes back on the same
   connection as END_TRANSACTION with ``fromTransactionCheck=true``.

Built on :class:`rocketq.client.producer.Producer` by composition: the inner producer does the sending, the
routes and the heartbeats (which tell the broker this client is a producer of the group, and so where to send
checks). The check handler is registered on the client instance's connections when the first transactional
producer of an instance starts; it finds the producer by the ``PGROUP`` of the message asked about.

A plain-function ``execute_local_transaction`` runs on the caller's event loop, as Java runs it on the caller's
thread; a plain-function ``check_local_transaction`` runs on a worker thread, as Java runs it on its check
executor. ``async def`` callbacks are awaited on the loop.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import inspect
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields
from typing import Any, Protocol

from rocketq.client.client_config import ClientConfig
from rocketq.client.client_instance import ClientInstance
from rocketq.client.errors import ClientError, InvalidMessageError
from rocketq.client.mq_client_api import decode_records
from rocketq.client.producer import Producer
from rocketq.client.send_result import SendResult, SendStatus
from rocketq.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Message,
    MessageExt,
)
from rocketq.common.message_id import MessageIdError, decode_offset_message_id
from rocketq.remoting.codes import RequestCode
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.errors import RemotingError
from rocketq.remoting.transport import RemotingConnection

__all__ = [
    "LocalTransactionState",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]

log = logging.getLogger(__name__)

#: The user property Java puts the broker's transaction id under (``sendMessageInTransaction``).
PROPERTY_TRANSACTION_ID = "__transactionId__"


class LocalTransactionState(enum.Enum):
    """``LocalTransactionState``; ``UNKNOW`` is Java's spelling (``UNKNOWN`` is an alias)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
    UNKNOWN = "UNKNOW"

    @property
    def commit_or_rollback(self) -> int:
        """The END_TRANSACTION ``commitOrRollback`` value: 8, 12 or 0."""
        if self is LocalTransactionState.COMMIT_MESSAGE:
            return TRANSACTION_COMMIT_TYPE
        if self is LocalTransactionState.ROLLBACK_MESSAGE:
            return TRANSACTION_ROLLBACK_TYPE
        return TRANSACTION_NOT_TYPE


StateOrAwaitable = LocalTransactionState | None | Awaitable[LocalTransactionState | None]


class TransactionListener(Protocol):
    """``TransactionListener``: the local transaction, and the answer to a broker's check."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> StateOrAwaitable: ...

    def check_local_transaction(self, msg: MessageExt) -> StateOrAwaitable: ...


@dataclass(slots=True)
class TransactionSendResult(SendResult):
    """``TransactionSendResult``: the half message's ``SendResult`` and what the local transaction said."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


class _FunctionListener:
    def __init__(self, execute: Callable[[Message, Any], StateOrAwaitable],
                 check: Callable[[MessageExt], StateOrAwaitable]) -> None:  # fmt: skip
        self.execute_local_transaction = execute
        self.check_local_transaction = check


# Client instance → producer group → transactional producer: where a CHECK_TRANSACTION_STATE goes.
_REGISTRY: weakref.WeakKeyDictionary[ClientInstance, dict[str, TransactionProducer]] = weakref.WeakKeyDictionary()


async def _resolve(value: StateOrAwaitable) -> LocalTransactionState:
    if inspect.isawaitable(value):
        value = await value
    if value is None:
        return LocalTransactionState.UNKNOW
    if not isinstance(value, LocalTransactionState):
        raise ClientError(f"a transaction listener returned {value!r}, not a LocalTransactionState")
    return value


class TransactionProducer:
    """Sends messages in transactions; see the module docstring. ``async with`` or ``start()``/``shutdown()``.

    Give ``listener`` (a :class:`TransactionListener`), or the two callbacks ``execute`` and ``check``. Any other
    keyword goes to the inner :class:`Producer` (``send_timeout``, ``retry_times_when_send_failed``, …).
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *,
                 listener: TransactionListener | None = None,
                 execute: Callable[[Message, Any], StateOrAwaitable] | None = None,
                 check: Callable[[MessageExt], StateOrAwaitable] | None = None,
                 config: ClientConfig | None = None, **producer_options: Any) -> None:  # fmt: skip
        if listener is None and execute is not None and check is not None:
            listener = _FunctionListener(execute, check)
        elif listener is None and (execute is not None or check is not None):
            raise ClientError("a transaction listener needs both execute and check")
        self.listener: TransactionListener | None = listener
        self.producer = Producer(group, namesrv_addr, config=config, **producer_options)
        self._checks: set[asyncio.Task[None]] = set()

    @property
    def group(self) -> str:
        return self.producer.group

    # -- lifecycle --------------------------------------------------------------------------------
    async def start(self) -> TransactionProducer:
        await self.producer.start()
        instance = self.producer.instance
        producers = _REGISTRY.setdefault(instance, {})
        if not producers:
            instance.remoting.register_processor(RequestCode.CHECK_TRANSACTION_STATE,
                                                 functools.partial(_check_transaction_state, instance))  # fmt: skip
        producers[self.group] = self
        return self

    async def shutdown(self) -> None:
        try:
            instance = self.producer.instance
        except ClientError:
            return
        producers = _REGISTRY.get(instance)
        if producers is not None and producers.get(self.group) is self:
            del producers[self.group]
        checks = list(self._checks)
        if checks:
            await asyncio.wait(checks, timeout=5.0)
        await self.producer.shutdown()

    async def __aenter__(self) -> TransactionProducer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # -- sending ----------------------------------------------------------------------------------
    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """``sendMessageInTransaction``: half message, local transaction, END_TRANSACTION (module docstring)."""
        listener = self.listener
        if listener is None:
            raise ClientError("TransactionListener is null")
        msg.properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        if msg.topic.startswith("%RETRY%"):
            raise InvalidMessageError("a transactional message cannot go to a retry topic")
        msg.properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        msg.properties[PROPERTY_PRODUCER_GROUP] = self.group
        try:
            send_result = await self.producer.send(msg)
        except ClientError as exc:
            raise ClientError(f"send message in transaction failed: {exc}") from exc
        state = LocalTransactionState.UNKNOW
        local_exception: BaseException | None = None
        if send_result.status is SendStatus.SEND_OK:
            try:
                if send_result.transaction_id is not None:
                    msg.properties[PROPERTY_TRANSACTION_ID] = send_result.transaction_id
                state = await _resolve(listener.execute_local_transaction(msg, arg))
                if state is not LocalTransactionState.COMMIT_MESSAGE:
                    log.info("executeLocalTransactionBranch return %s, msgId %s", state.value, send_result.msg_id)
            except Exception as exc:
                log.info("executeLocalTransactionBranch exception for %s: %s", send_result.msg_id, exc)
                local_exception = exc
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self.end_transaction(send_result, state, local_exception)
        except Exception as exc:
            log.warning("local transaction %s executed, but END_TRANSACTION failed: %s", state.value, exc)
        values = {f.name: getattr(send_result, f.name) for f in fields(SendResult)}
        return TransactionSendResult(**values, local_transaction_state=state)

    async def end_transaction(self, send_result: SendResult, state: LocalTransactionState,
                              local_exception: BaseException | None = None) -> None:  # fmt: skip
        """``endTransaction``: END_TRANSACTION, one-way, to the master of the half message's broker."""
        instance = self.producer.instance
        try:
            _host, commit_log_offset = decode_offset_message_id(send_result.offset_msg_id or send_result.msg_id)
        except MessageIdError as exc:
            raise ClientError(f"cannot end the transaction of {send_result.msg_id}: {exc}") from None
        addr = instance.find_broker_address_in_publish(send_result.message_queue.broker_name)
        if addr is None:
            raise ClientError(f"no master address of broker {send_result.message_queue.broker_name}")
        fields_ = {
            "producerGroup": self.group, "tranStateTableOffset": send_result.queue_offset,
            "commitLogOffset": commit_log_offset, "commitOrRollback": state.commit_or_rollback,
            "fromTransactionCheck": False, "msgId": send_result.msg_id, "transactionId": send_result.transaction_id,
        }  # fmt: skip
        request = instance.api.request(RequestCode.END_TRANSACTION, fields_, oneway=True)
        if local_exception is not None:
            request.remark = f"executeLocalTransactionBranch exception: {local_exception!r}"
        await instance.api.invoke_oneway(addr, request)

    # -- check-back -------------------------------------------------------------------------------
    def _on_check(self, conn: RemotingConnection, request: RemotingCommand, msg: MessageExt) -> None:
        task = asyncio.ensure_future(self.check_transaction_state(conn, request, msg))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def check_transaction_state(self, conn: RemotingConnection, request: RemotingCommand,
                                      msg: MessageExt) -> None:  # fmt: skip
        """``checkTransactionState``: ask the listener, answer with END_TRANSACTION ``fromTransactionCheck``."""
        listener = self.listener
        if listener is None:
            log.warning("CHECK_TRANSACTION_STATE for group %s, but it has no transaction listener", self.group)
            return
        h = request.header
        state = LocalTransactionState.UNKNOW
        remark: str | None = None
        try:
            check = listener.check_local_transaction
            if inspect.iscoroutinefunction(check):
                state = await _resolve(check(msg))
            else:
                state = await _resolve(await asyncio.to_thread(check, msg))
        except Exception as exc:
            log.error("Broker call checkTransactionState, but checkLocalTransactionState exception: %s", exc)
            remark = f"checkLocalTransactionState Exception: {exc!r}"
        unique_key = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
        fields_ = {
            "producerGroup": self.group, "tranStateTableOffset": h.get_long("tranStateTableOffset"),
            "commitLogOffset": h.get_long("commitLogOffset"), "commitOrRollback": state.commit_or_rollback,
            "fromTransactionCheck": True, "msgId": unique_key, "transactionId": h.get_str("transactionId", None),
        }  # fmt: skip
        instance = self.producer.instance
        answer = instance.api.request(RequestCode.END_TRANSACTION, fields_, oneway=True)
        answer.remark = remark
        hook = instance.remoting.rpc_hook
        if hook is not None:  # sent on the broker's connection, not through the client: signed here
            hook.before_request(conn.remote_address, answer)
        try:
            await conn.invoke_oneway(answer)
        except (RemotingError, OSError) as exc:
            log.warning("endTransactionOneway to %s failed: %s", conn.remote_address, exc)


def _check_transaction_state(instance: ClientInstance, conn: RemotingConnection, request: RemotingCommand) -> None:
    """``ClientRemotingProcessor.checkTransactionState``: hand the check to the producer of the message's group."""
    msgs = decode_records(request.body, client=False)
    if not msgs:
        log.warning("CHECK_TRANSACTION_STATE from %s without a message", conn.remote_address)
        return None
    msg = msgs[0]
    group = msg.properties.get(PROPERTY_PRODUCER_GROUP) or ""
    producer = _REGISTRY.get(instance, {}).get(group)
    if producer is None:
        log.debug("CHECK_TRANSACTION_STATE for group %s: no transactional producer of it here", group)
        return None
    producer._on_check(conn, request, msg)
    return None
