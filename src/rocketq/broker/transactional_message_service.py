"""Half messages and their op records: RocketMQ 4.9's ``broker/transaction/queue/TransactionalMessageServiceImpl``
with ``TransactionalMessageBridge`` and ``TransactionalMessageUtil`` (store-format §9.3, remoting-protocol §6.11,
§11.6).

Names: half topic ``RMQ_SYS_TRANS_HALF_TOPIC``, op topic ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, the checker's group
``CID_RMQ_SYS_TRANS``, op tag ``d``.

- A half message is an ordinary record of the half topic, queue 0 (the send processor parks it there).
- Resolving one (commit or rollback, :meth:`TransactionalMessageService.delete_prepare_message`) appends an op
  record to the op topic's queue of the same id: tag ``d``, body = the half message's queue offset in ASCII
  (4.9's format), born and store host = the broker, properties ``WAIT=true`` and ``TAGS=d``.
- :meth:`TransactionalMessageService.check` is ``check()``: for each half queue it reads from the half and op
  offsets the group ``CID_RMQ_SYS_TRANS`` has committed in ``consumerOffset.json`` (the queue's minimum when it
  has none), learns from the op records which half offsets are resolved, and walks the half queue:

  * resolved → skipped;
  * checked ``transactionCheckMax`` times already (``TRANSACTION_CHECK_TIMES``), or older than the commit
    log's ``fileReservedTime`` → discarded: copied to ``TRANS_CHECK_MAX_TIME_TOPIC`` (the listener);
  * stored after this check began, or younger than ``transactionTimeOut`` (or its own
    ``CHECK_IMMUNITY_TIME_IN_SECONDS``) → the walk stops there, to go on at the next check;
  * otherwise, once no op record says otherwise, a renewed copy with ``TRANSACTION_CHECK_TIMES`` + 1 is
    appended to the half queue and the producer group is asked about that copy (CHECK_TRANSACTION_STATE,
    the listener); the producer's END_TRANSACTION then names the copy's offsets.

  Then the half offset moves past what was walked and the op offset past the contiguous op records used:
  that progress is what makes check-back survive a restart (the offsets are persisted with the consumer
  offsets, every ``flushConsumerOffsetInterval`` and at shutdown).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from rocketq.broker.topic_validator import (
    PERM_READ,
    PERM_WRITE,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from rocketq.common.codec import decode_record
from rocketq.common.javacompat import encode_utf8_java, hashmap_ordered
from rocketq.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageExt,
    properties_to_string,
)
from rocketq.store.commit_log import PutMessageStatus
from rocketq.store.message_store import GetMessageStatus

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)

CID_RMQ_SYS_TRANS = "CID_RMQ_SYS_TRANS"
REMOVE_TAG = "d"
#: ``MAX_PROCESS_TIME_LIMIT``: how long one check may walk one half queue.
MAX_PROCESS_TIME_LIMIT_MS = 60_000
#: ``MAX_RETRY_COUNT_WHEN_HALF_NULL``.
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
#: Op records read at a time (``fillOpRemoveMap`` pulls 32).
OP_PULL_NUMS = 32


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _java_long(value: str | None) -> int:
    """``getLong``: -1 when the text is not a number."""
    try:
        return int(value or "")
    except ValueError:
        return -1


def with_properties(msg: MessageExt, props: dict[str, str]) -> None:
    """Give *msg* a new property map, in Java ``HashMap`` order, and the string built from it."""
    ordered = hashmap_ordered(props)
    msg.properties = ordered
    msg.properties_bytes = encode_utf8_java(properties_to_string(ordered))


@dataclass
class PullResult:
    """What ``TransactionalMessageBridge.getMessage`` makes of a store read."""

    status: str  # FOUND, NO_NEW_MSG, NO_MATCHED_MSG, OFFSET_ILLEGAL
    next_begin_offset: int
    msgs: list[MessageExt] | None = None


@dataclass
class GetResult:
    pull: PullResult
    msg: MessageExt | None = None


class CheckListener(Protocol):
    """``AbstractTransactionalMessageCheckListener``: what becomes of a half message the check looked at."""

    async def resolve_discard_msg(self, msg: MessageExt) -> None: ...

    def resolve_half_msg(self, msg: MessageExt) -> None: ...


@dataclass
class CheckStats:
    """What the last checks did (for logs and tests)."""

    checks: int = 0
    renewed: int = 0
    discarded: int = 0
    last_offsets: dict[str, int] = field(default_factory=dict)


class TransactionalMessageService:
    """The half and op queues of one broker, read and written as ``TransactionalMessageServiceImpl`` does."""

    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller
        self.stats = CheckStats()

    # --- bridge: offsets ------------------------------------------------------------------------------
    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        offset = self.controller.consumer_offset_manager.query_offset(CID_RMQ_SYS_TRANS, topic, queue_id)
        if offset == -1:
            cq = self.controller.store.find_consume_queue(topic, queue_id, create=False)
            offset = cq.get_min_offset_in_queue() if cq is not None else 0  # Java's lookup makes the queue
        return offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.controller.consumer_offset_manager.commit_offset(CID_RMQ_SYS_TRANS, topic, queue_id, offset)

    def half_queue_ids(self) -> list[int]:
        """``fetchMessageQueues``: the half topic's read queues (the topic is made with 1 queue if missing)."""
        tcm = self.controller.topic_config_manager
        cfg = tcm.select_topic_config(RMQ_SYS_TRANS_HALF_TOPIC)
        if cfg is None:
            cfg = tcm.create_topic_in_send_message_back(RMQ_SYS_TRANS_HALF_TOPIC, 1, PERM_WRITE | PERM_READ, 0)
        return list(range(cfg.read_queue_nums))

    # --- bridge: reading ------------------------------------------------------------------------------
    def _get_message(self, topic: str, queue_id: int, offset: int, nums: int) -> PullResult:
        result = self.controller.store.get_message(CID_RMQ_SYS_TRANS, topic, queue_id, offset, nums)
        status = result.status
        if status is GetMessageStatus.FOUND:
            return PullResult("FOUND", result.next_begin_offset, [decode_record(m) for m in result.messages])
        if status is GetMessageStatus.NO_MATCHED_MESSAGE:
            return PullResult("NO_MATCHED_MSG", result.next_begin_offset)
        if status in (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE):
            return PullResult("NO_NEW_MSG", result.next_begin_offset)
        return PullResult("OFFSET_ILLEGAL", result.next_begin_offset)

    def get_half_message(self, queue_id: int, offset: int, nums: int = 1) -> PullResult:
        return self._get_message(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, offset, nums)

    def get_op_message(self, queue_id: int, offset: int, nums: int = OP_PULL_NUMS) -> PullResult:
        return self._get_message(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, offset, nums)

    # --- bridge: writing ------------------------------------------------------------------------------
    def renew_half_message(self, msg: MessageExt) -> MessageExt:
        """``renewHalfMessageInner``: a copy of a half message for the end of the half queue.

        Java's copy shares *msg*'s property map and sets ``WAIT=false`` in it after the copy's properties string
        was made: the stored copy keeps *msg*'s value, while *msg* itself now says false, and so does what is
        made of it afterwards (the check request's message, an immunity copy). So here too."""
        copy = MessageExt(topic=msg.topic, body=msg.body, flag=msg.flag, queue_id=msg.queue_id, sys_flag=msg.sys_flag,
                          born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
                          reconsume_times=msg.reconsume_times)  # fmt: skip
        with_properties(copy, dict(msg.properties))
        with_properties(msg, {**msg.properties, PROPERTY_WAIT_STORE_MSG_OK: "false"})
        copy.wait_store_msg_ok = False
        return copy

    def renew_immunity_half_message(self, msg: MessageExt) -> MessageExt:
        """``renewImmunityHalfMessageInner``: the copy remembers the first half message's queue offset; its
        properties string is made again, from the shared map (``WAIT=false``)."""
        copy = self.renew_half_message(msg)
        props = dict(msg.properties)
        props[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = msg.properties.get(
            PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, str(msg.queue_offset))
        with_properties(copy, props)
        return copy

    async def put_back_half_msg_queue(self, msg: MessageExt) -> bool:
        """``putBackHalfMsgQueue``: append a renewed copy; *msg* then names the copy (offsets and id)."""
        result = await self.controller.put_message(self.renew_half_message(msg))
        if result.status is not PutMessageStatus.PUT_OK:
            log.error("PutBackToHalfQueueReturnResult write failed, topic: %s, queueId: %d, msgId: %s", msg.topic,
                      msg.queue_id, msg.msg_id)  # fmt: skip
            return False
        msg.queue_offset = result.logics_offset
        msg.commit_log_offset = result.wrote_offset
        return True

    async def put_immunity_msg_back_to_half_queue(self, msg: MessageExt) -> bool:
        result = await self.controller.put_message(self.renew_immunity_half_message(msg))
        return result.status is PutMessageStatus.PUT_OK

    async def delete_prepare_message(self, half: MessageExt) -> bool:
        """``deletePrepareMessage``: the op record that marks a half message resolved."""
        ctl = self.controller
        host = ctl.store_host
        op = MessageExt(topic=RMQ_SYS_TRANS_OP_HALF_TOPIC, body=str(half.queue_offset).encode(), queue_id=half.queue_id,
                        born_timestamp=_now_ms(), born_host=host, store_host=host)  # fmt: skip
        props = {PROPERTY_TAGS: REMOVE_TAG, PROPERTY_WAIT_STORE_MSG_OK: "true"}
        op.properties = hashmap_ordered(props)
        op.wait_store_msg_ok = False  # makeOpMessageInner: the stored WAIT is the Message's, the put waits not
        result = await ctl.put_message(op)
        if result.status is not PutMessageStatus.PUT_OK:
            log.error("Transaction op message write failed. half offset %d, queueId %d: %s", half.queue_offset,
                      half.queue_id, result.status.value)  # fmt: skip
            return False
        return True

    # --- check ----------------------------------------------------------------------------------------
    async def check(self, transaction_timeout: int, transaction_check_max: int, listener: CheckListener) -> None:
        """One round of ``check()`` over every half queue (see the module docstring)."""
        self.stats.checks += 1
        for queue_id in self.half_queue_ids():
            try:
                await self._check_queue(queue_id, transaction_timeout, transaction_check_max, listener)
            except Exception:
                log.exception("Check error on half queue %d", queue_id)

    async def _check_queue(self, queue_id: int, timeout: int, check_max: int, listener: CheckListener) -> None:
        start_time = _now_ms()
        half_offset = self.fetch_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, queue_id)
        op_offset = self.fetch_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id)
        log.debug("Before check, the queue=%d msgOffset=%d opOffset=%d", queue_id, half_offset, op_offset)
        if half_offset < 0 or op_offset < 0:
            log.error("half queue %d illegal offset read: %d, op offset: %d, skip this queue", queue_id, half_offset,
                      op_offset)  # fmt: skip
            return
        done_op_offset: list[int] = []
        remove_map: dict[int, int] = {}
        pull = self._fill_op_remove_map(remove_map, queue_id, op_offset, half_offset, done_op_offset)
        get_message_null_count = 1
        new_offset = half_offset
        i = half_offset
        failed_puts = 0
        while True:
            if _now_ms() - start_time > MAX_PROCESS_TIME_LIMIT_MS:
                log.info("half queue %d process time reach max=%d", queue_id, MAX_PROCESS_TIME_LIMIT_MS)
                break
            if i in remove_map:
                done_op_offset.append(remove_map.pop(i))
            else:
                got = self._get_half_msg(queue_id, i)
                msg = got.msg
                if msg is None:
                    get_message_null_count += 1
                    if get_message_null_count - 1 > MAX_RETRY_COUNT_WHEN_HALF_NULL:
                        break
                    if got.pull.status == "NO_NEW_MSG":
                        break
                    log.info("Illegal offset, the miss offset=%d in half queue %d, pull result=%s", i, queue_id,
                             got.pull.status)  # fmt: skip
                    i = got.pull.next_begin_offset
                    new_offset = i
                    continue
                if self._need_discard(msg, check_max) or self._need_skip(msg):
                    await listener.resolve_discard_msg(msg)
                    self.stats.discarded += 1
                    new_offset = i + 1
                    i += 1
                    continue
                if msg.store_timestamp >= start_time:
                    log.debug("Fresh stored. the miss offset=%d, check it later", i)
                    break
                value_of_current_minus_born = _now_ms() - msg.born_timestamp
                check_immunity_time = timeout
                immunity = msg.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
                if immunity is not None:
                    check_immunity_time = self._get_immunity_time(immunity, timeout)
                    if value_of_current_minus_born < check_immunity_time and \
                            await self._check_prepare_queue_offset(remove_map, done_op_offset, msg):
                        new_offset = i + 1
                        i += 1
                        continue
                elif 0 <= value_of_current_minus_born < check_immunity_time:
                    log.debug("New arrived, the miss offset=%d, check it later checkImmunity=%d", i,
                              check_immunity_time)  # fmt: skip
                    break
                op_msgs = pull.msgs
                is_need_check = (
                    (op_msgs is None and value_of_current_minus_born > check_immunity_time)
                    or (op_msgs is not None and op_msgs[-1].born_timestamp - start_time > timeout)
                    or value_of_current_minus_born <= -1
                )  # fmt: skip
                if is_need_check:
                    if not await self.put_back_half_msg_queue(msg):
                        failed_puts += 1
                        if failed_puts > 3:  # Java would retry this offset until the time limit
                            break
                        continue
                    self.stats.renewed += 1
                    listener.resolve_half_msg(msg)
                else:
                    pull = self._fill_op_remove_map(remove_map, queue_id, pull.next_begin_offset, half_offset,
                                                    done_op_offset)  # fmt: skip
                    continue
            new_offset = i + 1
            i += 1
        if new_offset != half_offset:
            self.update_consume_offset(RMQ_SYS_TRANS_HALF_TOPIC, queue_id, new_offset)
        new_op_offset = self._calculate_op_offset(done_op_offset, op_offset)
        if new_op_offset != op_offset:
            self.update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, new_op_offset)
        self.stats.last_offsets = {"half": new_offset, "op": new_op_offset}

    def _fill_op_remove_map(self, remove_map: dict[int, int], queue_id: int, pull_offset_of_op: int,
                            mini_offset: int, done_op_offset: list[int]) -> PullResult:  # fmt: skip
        """``fillOpRemoveMap``: op records from *pull_offset_of_op*; half offset → op offset of each."""
        pull = self.get_op_message(queue_id, pull_offset_of_op)
        if pull.status in ("OFFSET_ILLEGAL", "NO_MATCHED_MSG"):
            log.warning("The miss op offset=%d in op queue %d is illegal (%s)", pull_offset_of_op, queue_id,
                        pull.status)  # fmt: skip
            self.update_consume_offset(RMQ_SYS_TRANS_OP_HALF_TOPIC, queue_id, pull.next_begin_offset)
            return pull
        if pull.status == "NO_NEW_MSG" or pull.msgs is None:
            return pull
        for op in pull.msgs:
            queue_offset = _java_long(op.body.decode("utf-8", "replace"))
            if op.properties.get(PROPERTY_TAGS) == REMOVE_TAG:
                if queue_offset < mini_offset:
                    done_op_offset.append(op.queue_offset)
                else:
                    remove_map[queue_offset] = op.queue_offset
            else:
                log.error("Found a illegal tag in op message at %d", op.commit_log_offset)
        return pull

    def _get_half_msg(self, queue_id: int, offset: int) -> GetResult:
        pull = self.get_half_message(queue_id, offset, 1)
        return GetResult(pull, pull.msgs[0] if pull.msgs else None)

    @staticmethod
    def _need_discard(msg: MessageExt, transaction_check_max: int) -> bool:
        """``needDiscard``: checked often enough already; else count this check in the message's map."""
        check_times = msg.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)
        check_time = 1
        if check_times is not None:
            check_time = _java_long(check_times)
            if check_time >= transaction_check_max:
                return True
            check_time += 1
        props = dict(msg.properties)
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_time)
        with_properties(msg, props)
        return False

    def _need_skip(self, msg: MessageExt) -> bool:
        """``needSkip``: older than the commit log keeps files (``fileReservedTime`` hours)."""
        reserved_ms = self.controller.store_config.file_reserved_time * 3600 * 1000
        if _now_ms() - msg.born_timestamp > reserved_ms:
            log.info("Half message exceed file reserved time, so skip it. messageId %s, bornTime %d", msg.msg_id,
                     msg.born_timestamp)  # fmt: skip
            return True
        return False

    @staticmethod
    def _get_immunity_time(text: str, transaction_timeout: int) -> int:
        value = _java_long(text)
        return transaction_timeout if value == -1 else value * 1000

    async def _check_prepare_queue_offset(self, remove_map: dict[int, int], done_op_offset: list[int],
                                          msg: MessageExt) -> bool:  # fmt: skip
        """``checkPrepareQueueOffset``: True when the half message may be passed over."""
        prepare = msg.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if prepare is None:
            return await self.put_immunity_msg_back_to_half_queue(msg)
        prepare_offset = _java_long(prepare)
        if prepare_offset == -1:
            return False
        if prepare_offset in remove_map:
            done_op_offset.append(remove_map.pop(prepare_offset))
            return True
        return await self.put_immunity_msg_back_to_half_queue(msg)

    @staticmethod
    def _calculate_op_offset(done_offsets: list[int], old_offset: int) -> int:
        new_offset = old_offset
        for value in sorted(done_offsets):
            if value == new_offset:
                new_offset += 1
            else:
                break
        return new_offset
