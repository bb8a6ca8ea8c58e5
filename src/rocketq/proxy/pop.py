"""POP consumption: receive messages, hide them for an invisible time, acknowledge them one by one.

RocketMQ 5's simple and push consumers do not pull from offsets they track; they *pop* (``PopMessageProcessor``):
the broker hands out messages of a group, each with a receipt handle, and hides each from the group for its
invisible time. An acknowledged message is done; one whose invisible time passes without an acknowledgement is
delivered again, its delivery attempt one higher, and after the group's ``retryMaxTimes + 1`` attempts it goes
to the group's dead-letter queue (``%DLQ%<group>``), as 5.x's ``PopMessageResultFilterImpl`` sends it there.

What rocketq keeps, per group, topic and queue (:class:`_QueueState`): the next offset to hand out and the messages
handed out and not acknowledged. RocketMQ keeps the latter as checkpoint records in its revive topic; rocketq keeps
them in memory, and commits the group's consumer offset (``consumerOffset.json``, what ``consumerProgress``
shows) at the lowest offset not acknowledged yet: after a restart every message that was not acknowledged is
delivered again, which keeps POP's at-least-once promise without the revive topic.

A new group starts as ``ConsumeInitMode.MAX`` with ``initPopOffsetByCheckMsgInMem``: at the end of each queue,
or at its start when the queue still begins at offset 0 (its first message still there).

A FIFO group (``consumeMessageOrderly`` in its config, 5.x's ordered groups) gets a queue's messages one batch at
a time: nothing more from that queue while a message of it is out, and a message delivered again comes before
the ones after it.
"""

from __future__ import annotations

import itertools
import logging
import threading
from dataclasses import dataclass, field

from rocketq.common.codec import decode_record
from rocketq.common.message import MessageExt
from rocketq.store.message_filter import MessageFilter
from rocketq.store.message_store import GetMessageStatus, MessageStore

log = logging.getLogger(__name__)

__all__ = ["AckStatus", "PopService", "Popped"]


@dataclass(slots=True)
class _Out:
    """A message handed out and not acknowledged (what 5.x writes as a checkpoint)."""

    offset: int
    handle: str
    deadline_ms: int  # visible again from then on
    attempt: int  # 1 at the first delivery
    commit_log_offset: int


@dataclass(slots=True)
class _QueueState:
    next_offset: int
    out: dict[int, _Out] = field(default_factory=dict)  # by queue offset


@dataclass(slots=True)
class Popped:
    """One message of a receive, with what the client is told about its delivery."""

    message: MessageExt
    receipt_handle: str
    attempt: int
    invisible_ms: int


#: Statuses of a read after which the next one starts where the store says (``next_begin_offset``).
_MOVE_ON = frozenset({GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.OFFSET_TOO_SMALL,
                      GetMessageStatus.OFFSET_OVERFLOW_BADLY, GetMessageStatus.OFFSET_FOUND_NULL,
                      GetMessageStatus.MESSAGE_WAS_REMOVING})  # fmt: skip


class AckStatus:
    OK = "OK"
    INVALID = "INVALID"  # not a handle this broker gave out, or superseded by a later one
    EXPIRED = "EXPIRED"  # its invisible time is over: the message is (or will be) delivered again


class PopService:
    """The POP state of one broker's store (see the module doc). Thread-safe; every call is short."""

    def __init__(self, store: MessageStore, broker_name: str) -> None:
        self.store = store
        self.broker_name = broker_name
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, str, int], _QueueState] = {}
        self._handles: dict[str, tuple[str, str, int, int]] = {}  # handle -> (group, topic, queue id, offset)
        self._nonce = itertools.count(1)

    # --- offsets ------------------------------------------------------------------------------------------------
    def _state(self, group: str, topic: str, queue_id: int) -> _QueueState:
        key = (group, topic, queue_id)
        state = self._queues.get(key)
        if state is None:
            committed = self.store.consumer_offset_manager.query_offset(group, topic, queue_id)
            if committed < 0:  # ConsumeInitMode.MAX, the queue's start while its first message is there
                min_offset = self.store.get_min_offset_in_queue(topic, queue_id)
                committed = 0 if min_offset <= 0 else self.store.get_max_offset_in_queue(topic, queue_id)
            state = self._queues[key] = _QueueState(committed)
            self._commit(group, topic, queue_id, state)
        return state

    def _commit(self, group: str, topic: str, queue_id: int, state: _QueueState) -> None:
        """The group's consumer offset: the lowest offset not acknowledged yet."""
        offset = min(state.out) if state.out else state.next_offset
        self.store.consumer_offset_manager.commit_offset(group, topic, queue_id, offset)

    def _handle(self, group: str, topic: str, queue_id: int, offset: int) -> str:
        # Opaque to clients; unique, so that a handle superseded by a later delivery or a change is refused.
        handle = f"{self.broker_name} {queue_id} {offset} {next(self._nonce):x}"
        self._handles[handle] = (group, topic, queue_id, offset)
        return handle

    def _read(self, group: str, topic: str, queue_id: int, offset: int) -> MessageExt | None:
        got = self.store.get_message(group, topic, queue_id, offset, 1)
        if got.status is not GetMessageStatus.FOUND or not got.messages:
            return None
        return decode_record(got.messages[0])

    # --- receive ------------------------------------------------------------------------------------------------
    def pop(self, group: str, topic: str, queue_ids: list[int], batch: int, invisible_ms: int, now_ms: int,
            message_filter: MessageFilter | None = None, *, max_attempts: int = 17, fifo: bool = False,
            ) -> tuple[list[Popped], list[tuple[MessageExt, int]]]:  # fmt: skip
        """Up to *batch* messages from *queue_ids* in turn: first those whose invisible time is over (delivered
        again), then new ones. Returns them, and the messages past *max_attempts* (``(message, attempts)``) that
        the caller moves to the dead-letter queue: they are no longer out."""
        found: list[Popped] = []
        dead: list[tuple[MessageExt, int]] = []
        with self._lock:
            for queue_id in queue_ids:
                if len(found) >= batch:
                    break
                state = self._state(group, topic, queue_id)
                blocked = self._pop_again(group, topic, queue_id, state, batch, invisible_ms, now_ms,
                                          max_attempts, fifo, found, dead)  # fmt: skip
                if not blocked and len(found) < batch:
                    self._pop_new(group, topic, queue_id, state, batch, invisible_ms, now_ms, message_filter, found)
                self._commit(group, topic, queue_id, state)
        return found, dead

    def _pop_again(self, group: str, topic: str, queue_id: int, state: _QueueState, batch: int, invisible_ms: int,
                   now_ms: int, max_attempts: int, fifo: bool, found: list[Popped],
                   dead: list[tuple[MessageExt, int]]) -> bool:  # fmt: skip
        """Deliver again what is out and visible; True when a FIFO queue has a message out still (nothing new)."""
        for offset in sorted(state.out):
            out = state.out[offset]
            if out.deadline_ms > now_ms:
                if fifo:
                    return True
                continue
            if len(found) >= batch:
                return fifo
            msg = self._read(group, topic, queue_id, offset)
            if msg is None:  # gone (retention): nothing to deliver
                self._drop(state, out)
                continue
            if out.attempt >= max_attempts:
                self._drop(state, out)
                dead.append((msg, out.attempt))
                continue
            self._handles.pop(out.handle, None)
            out.handle = self._handle(group, topic, queue_id, offset)
            out.attempt += 1
            out.deadline_ms = now_ms + invisible_ms
            found.append(Popped(msg, out.handle, out.attempt, invisible_ms))
        return fifo and bool(state.out)

    def _pop_new(self, group: str, topic: str, queue_id: int, state: _QueueState, batch: int, invisible_ms: int,
                 now_ms: int, message_filter: MessageFilter | None, found: list[Popped]) -> None:  # fmt: skip
        got = self.store.get_message(group, topic, queue_id, state.next_offset, batch - len(found), message_filter)
        if got.status is not GetMessageStatus.FOUND:
            if got.status in _MOVE_ON:
                # Past records its filter does not take, or back inside the queue (an offset before its first
                # record, or beyond its end after a recovery cut it): where the store says to go on from.
                state.next_offset = got.next_begin_offset
            return
        for raw, offset in zip(got.messages, got.queue_offsets, strict=True):
            msg = decode_record(raw)
            handle = self._handle(group, topic, queue_id, offset)
            state.out[offset] = _Out(offset, handle, now_ms + invisible_ms, 1, msg.commit_log_offset)
            found.append(Popped(msg, handle, 1, invisible_ms))
        state.next_offset = got.next_begin_offset

    def _drop(self, state: _QueueState, out: _Out) -> None:
        state.out.pop(out.offset, None)
        self._handles.pop(out.handle, None)

    # --- acknowledge --------------------------------------------------------------------------------------------
    def _find(self, group: str, topic: str, handle: str, now_ms: int,
              ) -> tuple[str, tuple[str, str, int, int], _QueueState | None, _Out | None]:  # fmt: skip
        """What *handle* names, if it is this group's on this topic and the message is still out and hidden."""
        where = self._handles.get(handle)
        if where is None or where[0] != group or where[1] != topic:
            return AckStatus.INVALID, ("", "", 0, 0), None, None
        state = self._queues.get(where[:3])  # type: ignore[index]
        out = state.out.get(where[3]) if state is not None else None
        if state is None or out is None or out.handle != handle:
            return AckStatus.INVALID, where, None, None
        if out.deadline_ms <= now_ms:
            return AckStatus.EXPIRED, where, state, out
        return AckStatus.OK, where, state, out

    def ack(self, group: str, topic: str, handle: str, now_ms: int) -> str:
        """Acknowledge a message (``AckMessage``): an :class:`AckStatus`."""
        with self._lock:
            status, where, state, out = self._find(group, topic, handle, now_ms)
            if status is not AckStatus.OK or state is None or out is None:
                return status
            self._drop(state, out)
            self._commit(group, topic, where[2], state)
            return AckStatus.OK

    def change_invisible(self, group: str, topic: str, handle: str, invisible_ms: int, now_ms: int,
                         ) -> tuple[str, str | None]:  # fmt: skip
        """Hide a message for *invisible_ms* from now (``ChangeInvisibleDuration``): the status and its new handle,
        which replaces the old one."""
        with self._lock:
            status, where, state, out = self._find(group, topic, handle, now_ms)
            if status is not AckStatus.OK or state is None or out is None:
                return status, None
            self._handles.pop(out.handle, None)
            out.handle = self._handle(*where)
            out.deadline_ms = now_ms + invisible_ms
            return AckStatus.OK, out.handle

    def take(self, group: str, topic: str, handle: str, now_ms: int) -> tuple[str, int | None]:
        """Take a message out of POP's hands (it goes to the dead-letter queue): the status and its commit-log
        offset."""
        with self._lock:
            status, where, state, out = self._find(group, topic, handle, now_ms)
            if status is not AckStatus.OK or state is None or out is None:
                return status, None
            self._drop(state, out)
            self._commit(group, topic, where[2], state)
            return AckStatus.OK, out.commit_log_offset

    def has_new(self, group: str, topic: str, queue_ids: list[int], now_ms: int) -> bool:
        """Whether a pop of these queues could find something now (a long-polling receive's check)."""
        with self._lock:
            for queue_id in queue_ids:
                state = self._state(group, topic, queue_id)
                if state.next_offset < self.store.get_max_offset_in_queue(topic, queue_id):
                    return True
                if any(out.deadline_ms <= now_ms for out in state.out.values()):
                    return True
        return False

    def forget_group(self, group: str) -> None:
        """Drop a group's state (its subscription deleted); its committed offsets stay as they are."""
        with self._lock:
            for key in [k for k in self._queues if k[0] == group]:
                for out in self._queues.pop(key).out.values():
                    self._handles.pop(out.handle, None)
