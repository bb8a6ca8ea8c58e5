"""Delivery of delayed messages: RocketMQ's ``ScheduleMessageService`` (``store/schedule`` in 4.9,
``broker/schedule`` in 5.x) (store-format §9.1, remoting-protocol §11.5).

The store parks a message with delay level L in ``SCHEDULE_TOPIC_XXXX`` queue L − 1 and writes its due time
(store time + the level's delay) as the unit's tag code. One task per level walks its queue from the level's
offset in ``delayOffset.json``: a due message is stored again in its real topic and queue (``REAL_TOPIC``,
``REAL_QID``) with the same body, flag, sysFlag, born time, hosts and ``reconsumeTimes``, and with the property
string exactly as stored (``DELAY``, ``REAL_TOPIC`` and ``REAL_QID`` stay in it: Java builds the string before
it drops ``DELAY`` from the map). The map the store acts on has no ``DELAY`` (nor 5.x's ``TIMER_DELIVER_MS`` /
``TIMER_DELAY_SEC``), so the copy is not delayed again, and the copy's tag code comes from ``TAGS``. A message
whose real topic is the half topic is dropped, as Java drops it.

Timing: each level has a thread of its own (Java has a pool of as many threads as levels), so that delivery
does not wait for the broker's busy event loop. A level's thread sleeps until its head unit is due (Java polls
every 100 ms), or until a message arrives in its queue (the store's arrival listener wakes it). A due time
further away than the level's delay is a clock that jumped back: the message is delivered now
(``correctDeliverTimestamp``). The copy is stored with a blocking put (under SYNC_FLUSH it waits for the flush).

Progress: the level's offset moves past a message only once the copy is stored (PUT_OK, or a flush/slave
timeout, where the copy is in the commit log all the same). The table is persisted every
``flushDelayOffsetInterval`` (10 s) and at shutdown, after every task has finished the message in hand, so a
clean restart delivers nothing twice and loses nothing; after a crash, messages delivered since the last
persist are delivered again (as in RocketMQ). At start, an offset outside its queue is corrected to the
queue's bounds (``correctDelayOffset``).

Consumer retries (``%RETRY%<group>``, delay level ``3 + reconsumeTimes``) come back through here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING

from rocketq.broker.topic_validator import RMQ_SYS_TRANS_HALF_TOPIC
from rocketq.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    MessageExt,
)
from rocketq.store.commit_log import SCHEDULE_TOPIC, PutMessageStatus

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)

#: ``DELAY_FOR_A_WHILE``-like: how often an idle level looks again, besides arrival wake-ups.
IDLE_CHECK_S = 1.0
#: The longest sleep of a level waiting for its head message (it wakes earlier on arrivals anyway).
MAX_SLEEP_S = 60.0
#: ``DELAY_FOR_A_PERIOD``: the pause after a failed put, before the same message is tried again.
RETRY_AFTER_FAILURE_S = 10.0
#: ``WAIT_FOR_SHUTDOWN``: how long shutdown waits for the levels to finish the message in hand.
WAIT_FOR_SHUTDOWN_S = 5.0
#: 5.x ``MessageConst`` timer properties that ``messageTimeup`` clears from the map.
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
#: Put outcomes after which the copy is in the commit log (the offset may move on).
STORED = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                    PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE})  # fmt: skip
#: Put outcomes that will never change for this message: it is dropped, as Java drops it.
PERMANENT = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ScheduleMessageService:
    """The delay levels of one broker: a delivering task per level and the persisted offset table."""

    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller
        self.delay_level_table = controller.store_config.delay_level_table()
        self.max_delay_level = max(self.delay_level_table, default=0)
        self._wake: dict[int, threading.Event] = {}
        self._threads: list[threading.Thread] = []
        self._persister: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        #: Messages delivered since start (all levels); for stats and tests.
        self.delivered = 0

    # --- life cycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        self.correct_delay_offset()
        for level in sorted(self.delay_level_table):
            self._wake[level - 1] = threading.Event()
            thread = threading.Thread(target=self._deliver_level, args=(level,), name=f"ScheduleMessageTimer-{level}",
                                      daemon=True)  # fmt: skip
            self._threads.append(thread)
            thread.start()
        interval = max(0.05, self.controller.store_config.flush_delay_offset_interval / 1000.0)
        self._persister = self._loop.create_task(self._persist_every(interval), name="persist delayOffset.json")

    async def shutdown(self) -> None:
        """Let every level finish the message in hand, stop, and persist ``delayOffset.json``."""
        if self._loop is None:
            return
        self._stopping = True
        for event in self._wake.values():
            event.set()
        threads, self._threads = self._threads, []

        def join() -> None:
            deadline = time.monotonic() + WAIT_FOR_SHUTDOWN_S
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))

        await asyncio.to_thread(join)
        if self._persister is not None:
            self._persister.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._persister
            self._persister = None
        self._loop = None
        await asyncio.to_thread(self.persist)

    def persist(self) -> None:
        try:
            self.controller.store.delay_offset_manager.persist()
        except OSError:
            log.exception("cannot persist delayOffset.json")

    async def _persist_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await asyncio.to_thread(self.persist)

    def correct_delay_offset(self) -> None:
        """``correctDelayOffset``: an offset outside its queue's [min, max] is moved to the nearer bound."""
        store = self.controller.store
        offsets = store.delay_offset_manager
        for level in self.delay_level_table:
            current = offsets.offset_table.get(level)
            cq = store.find_consume_queue(SCHEDULE_TOPIC, level - 1, create=False)
            if current is None or cq is None:
                continue
            low, high = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            corrected = min(max(current, low), high)
            if corrected != current:
                log.error("correct delay offset [delayLevel %d] from %d to %d (queue holds %d..%d)", level, current,
                          corrected, low, high)  # fmt: skip
                offsets.update_offset(level, corrected)

    def wake_threadsafe(self, queue_id: int) -> None:
        """Called on the dispatch thread when a message lands in ``SCHEDULE_TOPIC_XXXX`` queue ``queue_id``."""
        event = self._wake.get(queue_id)
        if event is not None:
            event.set()

    def compute_deliver_timestamp(self, level: int, store_timestamp: int) -> int:
        """``computeDeliverTimestamp``: store time + the level's delay (1 s for an unknown level)."""
        return store_timestamp + self.delay_level_table.get(level, 1000)

    # --- delivering -----------------------------------------------------------------------------------
    def _deliver_level(self, level: int) -> None:
        """A level's thread (``DeliverDelayedMessageTimerTask``, rescheduled until shutdown)."""
        event = self._wake[level - 1]
        while not self._stopping:
            event.clear()
            try:
                wait_s = self._deliver_due(level)
            except Exception:
                log.exception("delivering delay level %d failed", level)
                wait_s = RETRY_AFTER_FAILURE_S
            if self._stopping:
                break
            if wait_s > 0:
                event.wait(wait_s)

    def _deliver_due(self, level: int) -> float:
        """Deliver every due message of a level; the seconds until the next one is due (or an idle pause)."""
        ctl = self.controller
        store = ctl.store
        offsets = store.delay_offset_manager
        cq = store.find_consume_queue(SCHEDULE_TOPIC, level - 1, create=False)
        if cq is None:
            return IDLE_CHECK_S
        start = offsets.query_offset(level, 0)
        offset = max(start, cq.get_min_offset_in_queue())
        if offset != start:
            offsets.update_offset(level, offset)
        delay_ms = self.delay_level_table[level]
        while not self._stopping:
            end = cq.get_max_offset_in_queue()
            if offset >= end:
                return IDLE_CHECK_S
            unit = cq.get_unit(offset)
            if unit is None:
                offset += 1
                offsets.update_offset(level, offset)
                continue
            now = _now_ms()
            due = unit.tags_code
            if due > now + delay_ms:  # correctDeliverTimestamp: a due time beyond the delay is a clock jump
                due = now
            if due > now:
                return min((due - now) / 1000.0, MAX_SLEEP_S)
            parked = store.look_message_by_offset(unit.phys, unit.size)
            if parked is not None:
                copy = message_time_up(parked)
                if copy.topic == RMQ_SYS_TRANS_HALF_TOPIC:
                    log.error("[BUG] the real topic of schedule msg is %s, discard the msg at %d", copy.topic,
                              unit.phys)  # fmt: skip
                else:
                    result = ctl.put_message_sync(copy)
                    if result.status in STORED:
                        self.delivered += 1
                    elif result.status in PERMANENT:
                        log.error("delayed message at %d dropped: %s (%s)", unit.phys, result.status.value,
                                  result.error)  # fmt: skip
                    else:
                        log.error("delayed message at %d not delivered: %s; trying again later", unit.phys,
                                  result.status.value)  # fmt: skip
                        return RETRY_AFTER_FAILURE_S
            offset += 1
            offsets.update_offset(level, offset)
        return 0.0


def message_time_up(parked: MessageExt) -> MessageExt:
    """``messageTimeup``: the parked message as it goes back to its real topic and queue.

    The stored property string is the parked one, byte for byte; the map loses ``DELAY`` (and the 5.x timer
    properties) so that the store does not delay the copy again.
    """
    props = dict(parked.properties)
    raw = parked.properties_bytes
    for name in (PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC):
        props.pop(name, None)
    topic = props.get(PROPERTY_REAL_TOPIC, parked.topic)
    try:
        queue_id = int(props.get(PROPERTY_REAL_QUEUE_ID, "0"))
    except ValueError:
        queue_id = 0
    return MessageExt(topic=topic, body=parked.body, flag=parked.flag, properties=props, queue_id=queue_id,
                      sys_flag=parked.sys_flag, born_timestamp=parked.born_timestamp, born_host=parked.born_host,
                      store_host=parked.store_host, reconsume_times=parked.reconsume_times,
                      properties_bytes=raw)  # fmt: skip
