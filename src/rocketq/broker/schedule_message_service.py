"""Delivery of delayed messages: RocketMQ's ``ScheduleMessageService`` (``store/schedule`` in 4.9,
``broker/schedule`` in 5.x) (store-format §9.1, remoting-protocol §11.5).

The store parks a message with delay level L in ``SCHEDULE_TOPIC_XXXX`` queue L − 1 and writes its due time
(store time + the level's delay) as the unit's tag code. One task per level walks its queue from the level's
offset in ``delayOffset.json``: a due message is stored again in its real topic and queue (``REAL_TOPIC``,
``REAL_QID``) by ``messageTimeup`` (:func:`message_time_up`, built on the restoring step shared with the timer,
:mod:`rocketq.broker.delayed_delivery`): same body, flag, sysFlag, born time, hosts and ``reconsumeTimes``, and
the property string exactly as stored (``DELAY``, ``REAL_TOPIC`` and ``REAL_QID`` stay in it: Java builds the
string before it drops ``DELAY`` from the map). The map the store acts on has no ``DELAY`` (nor 5.x's
``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC``, nor their aliases that rocketq's timer accepts), so the copy is not
delayed again, and the copy's tag code comes from ``TAGS``. A message whose real topic is the half topic is
dropped, as Java drops it.

Timing: each level has a thread of its own (Java has a pool of as many threads as levels), so that delivery
does not wait for the broker's busy event loop. A level's thread sleeps until its head unit is due (Java polls
every 100 ms). An arriving message wakes it only if it is due sooner than that, which for a level happens
only when the level had nothing pending (its messages come due in the order they arrive). A due time
further away than the level's delay means the clock jumped back: the message is delivered now
(``correctDeliverTimestamp``).

Progress: the level's offset moves past a message only once the copy is stored (PUT_OK, or a flush/slave
timeout, where the copy is in the commit log all the same). The table is persisted every
``flushDelayOffsetInterval`` (10 s) and at shutdown, after every task has finished the message in hand, so a
clean restart delivers nothing twice and loses nothing; after a crash, messages delivered since the last
persist are delivered again (as in RocketMQ). At start, an offset outside its queue is corrected to the
queue's bounds (``correctDelayOffset``).

Consumer retries (``%RETRY%<group>``, delay level ``3 + reconsumeTimes``) come back through here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketq.broker.delayed_delivery import DelayedDeliveryService, now_ms, restore_real_message
from rocketq.broker.timer_message_service import PROPERTY_START_DELIVER_TIME, TIMER_PROPERTIES
from rocketq.common.message import PROPERTY_DELAY_TIME_LEVEL, MessageExt
from rocketq.common.mixall import RMQ_SYS_SCHEDULE_TOPIC

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)

#: What ``messageTimeup`` removes from the copy's map (not from its string): the delay level, and the timer
#: properties (5.x clears ``TIMER_DELIVER_MS`` and ``TIMER_DELAY_SEC``; rocketq's timer also reads the others).
HIDDEN_ON_DELIVERY = (PROPERTY_DELAY_TIME_LEVEL, *TIMER_PROPERTIES, PROPERTY_START_DELIVER_TIME)


class ScheduleMessageService(DelayedDeliveryService):
    """The delay levels of one broker: a delivering thread per level and the persisted offset table."""

    progress_file = "delayOffset.json"

    def __init__(self, controller: BrokerController) -> None:
        super().__init__(controller)
        self.delay_level_table = controller.store_config.delay_level_table()
        self.max_delay_level = max(self.delay_level_table, default=0)

    # --- DelayedDeliveryService -----------------------------------------------------------------------
    def _keys(self) -> list[int]:
        return sorted(self.delay_level_table)

    def _thread_name(self, key: int) -> str:
        return f"ScheduleMessageTimer-{key}"

    def _prepare(self) -> None:
        self.correct_delay_offset()

    def _persist(self) -> None:
        self.controller.store.delay_offset_manager.persist()

    def correct_delay_offset(self) -> None:
        """``correctDelayOffset``: an offset outside its queue's [min, max] is moved to the nearer bound."""
        store = self.controller.store
        offsets = store.delay_offset_manager
        for level in self.delay_level_table:
            current = offsets.offset_table.get(level)
            cq = store.find_consume_queue(RMQ_SYS_SCHEDULE_TOPIC, level - 1, create=False)
            if current is None or cq is None:
                continue
            low, high = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            corrected = min(max(current, low), high)
            if corrected != current:
                log.error("correct delay offset [delayLevel %d] from %d to %d (queue holds %d..%d)", level, current,
                          corrected, low, high)  # fmt: skip
                offsets.update_offset(level, corrected)

    def running_stats(self) -> dict[str, str]:
        """``buildRunningStats``: ``scheduleMessageOffset_<level>`` = ``<delivered>,<parked>`` (the level's delay
        offset and its queue's max offset) for each level that has an offset, as brokerStatus shows them."""
        store = self.controller.store
        return {f"scheduleMessageOffset_{level}":
                f"{offset},{store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, level - 1)}"
                for level, offset in sorted(store.delay_offset_manager.offset_table.items())}  # fmt: skip

    def notify_parked(self, queue_id: int, due_ms: int) -> None:
        """Called on the dispatch thread when a message due at *due_ms* (its tag code) lands in
        ``SCHEDULE_TOPIC_XXXX`` queue ``queue_id``."""
        self.notify_arrival(queue_id + 1, due_ms)

    def compute_deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        """``computeDeliverTimestamp``: store time + the level's delay (1 s for an unknown level)."""
        return store_timestamp + self.delay_level_table.get(level, 1000)

    # --- delivering -----------------------------------------------------------------------------------
    def _deliver_due(self, level: int) -> float | None:
        """``DeliverDelayedMessageTimerTask.executeOnTimeup``: deliver every due message of a level; the time
        its head comes due (None when the level has nothing pending)."""
        store = self.controller.store
        offsets = store.delay_offset_manager
        cq = store.find_consume_queue(RMQ_SYS_SCHEDULE_TOPIC, level - 1, create=False)
        if cq is None:
            return None
        start = offsets.query_offset(level, 0)
        offset = max(start, cq.get_min_offset_in_queue())
        if offset != start:
            offsets.update_offset(level, offset)
        delay_ms = self.delay_level_table[level]
        while not self._stopping:
            if offset >= cq.get_max_offset_in_queue():
                return None
            unit = cq.get_unit(offset)
            if unit is None:
                offset += 1
                offsets.update_offset(level, offset)
                continue
            now = now_ms()
            due = unit.tags_code
            if due > now + delay_ms:  # correctDeliverTimestamp: a due time beyond the delay is a clock jump
                due = now
            if due > now:
                return due
            parked = store.look_message_by_offset(unit.phys, unit.size)
            retry_at = self.deliver(message_time_up(parked), unit.phys) if parked is not None else None
            if retry_at is not None:
                return retry_at
            offset += 1
            offsets.update_offset(level, offset)
        return None


def message_time_up(parked: MessageExt) -> MessageExt:
    """``messageTimeup``: the parked message as it goes back to its real topic and queue.

    The stored property string is the parked one, byte for byte; the map loses ``DELAY`` and the timer
    properties so that the store does not delay the copy again.
    """
    return restore_real_message(parked, hide=HIDDEN_ON_DELIVERY)
