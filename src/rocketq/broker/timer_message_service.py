"""Messages due at an arbitrary time, beyond RocketMQ 4.9's delay levels: what RocketMQ 5.x's
``HookUtils.transformTimerMessage`` accepts and its ``store/timer/TimerMessageStore`` delivers, built on a
simpler structure of our own (store-format §9.1, remoting-protocol §11.5).

Accepting (:func:`transform_timer_message`, applied to every put of the broker, as 5.x's put hook is): a message
of transaction type NOT or COMMIT with one of

- ``TIMER_DELAY_SEC`` — due now + that many seconds;
- ``TIMER_DELAY_MS`` — due now + that many milliseconds;
- ``TIMER_DELIVER_MS`` — due at that epoch time in milliseconds;
- ``__STARTDELIVERTIME`` — the same, under the name Aliyun ONS clients use (not 5.x; read last)

is a timer message, unless it also has a delay level (``DELAY`` wins and the ``TIMER_*`` properties are
dropped, as 5.x does), or already has ``TIMER_OUT_MS`` (a delivered copy). A value that does not parse, or a
due time more than ``timerMaxDelaySec`` (3 days) ahead, is refused with MESSAGE_ILLEGAL. A due time in the past
is stored at once, unchanged. Otherwise the due time is rounded down to ``timerPrecisionMs`` (1 s; an exact
multiple goes one step lower, as 5.x does), and the message is stored instead in topic ``rmq_sys_wheel_timer``
queue 0 with ``TIMER_OUT_MS`` = that time, ``REAL_TOPIC`` and ``REAL_QID`` — the record 5.x writes.

Delivering (:class:`TimerMessageService`): when due, the parked record is stored again in its real topic and
queue as 5.x's ``convert`` / ``convertMessage`` do (:func:`convert_message`, built on the restoring step shared
with the delay levels, :mod:`rocketq.broker.delayed_delivery`): same body, flag, sysFlag, born time and hosts,
reconsume times; the map gains ``TIMER_ENQUEUE_MS`` (the parked record's store time) and ``TIMER_DEQUEUE_MS``
(now), the property string is built from it, and ``REAL_TOPIC``/``REAL_QID`` are then dropped from the map only
(so they stay in the stored string, like the delay levels' copies).

On disk — the structure that survives restarts:

- the timer log is the commit log itself: parked records in topic ``rmq_sys_wheel_timer`` queue 0, with an
  ordinary consume queue (tag code = hash of ``TAGS``), so recovery, cleaning and every reader treat them as
  any topic's messages. A RocketMQ 4.9 broker opening the store loads it as it is: the topic is just a topic
  to it (it does not deliver the parked messages; rocketq does when it runs the store again);
- the progress is ``config/timerOffset.json``, a file of rocketq's own beside the broker's, written every
  ``flushDelayOffsetInterval`` and at shutdown (atomically, with a ``.bak``, as every config file)::

      {
          "cursor":120,                    every queue offset below this one is resolved
          "doneRanges":[[125,130],[131,140]]   resolved offsets at or above it, as [start, end) ranges
      }

  "Resolved" means delivered (or dropped as illegal). The ranges lie between pending offsets, so there are
  never more of them than messages still waiting.

In memory: a heap of the pending messages (due time, queue offset), rebuilt at start by reading the timer
queue from ``cursor``, skipping the resolved offsets. Messages parked since come with their due time from the
store's arrival listener, so their records are not read back until they are delivered; a scan of the timer
queue before each delivery round reads only what the listener did not report. One thread (not the broker's
busy event loop, so that nothing waits for it) delivers every due message in due-time order with a blocking
put, then sleeps until the next one is due. A new message wakes it only if it is due before that, so a
message due in 300 ms is delivered on time while the thread waits for one due in an hour. Across a clean
restart nothing is delivered twice and nothing is lost; after a crash, what was
delivered since the last persist is delivered again (the delay levels behave the same).
"""

from __future__ import annotations

import bisect
import collections
import heapq
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from rocketq.broker.delayed_delivery import (
    RETRY_AFTER_REFUSED_PUT_S,
    DelayedDeliveryService,
    now_ms,
    restore_real_message,
)
from rocketq.broker.topic_validator import RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC
from rocketq.common.javacompat import hashmap_ordered
from rocketq.common.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    MessageExt,
    delay_level_of,
    transaction_type,
)
from rocketq.common.mixall import RMQ_SYS_SCHEDULE_TOPIC
from rocketq.store.commit_log import PutMessageResult, PutMessageStatus
from rocketq.store.config_json import ConfigManager, _as_mapping

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)

TIMER_TOPIC = "rmq_sys_wheel_timer"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_START_DELIVER_TIME = "__STARTDELIVERTIME"
TIMER_PROPERTIES = (PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS)
_NOT_TIMED_TOPICS = frozenset({TIMER_TOPIC, RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC,
                               RMQ_SYS_TRANS_OP_HALF_TOPIC})

#: Parked records read per round of the start-up (and catch-up) scan before the loop is let go.
SCAN_BATCH = 2048


# --- accepting -------------------------------------------------------------------------------------------
def deliver_time_of(props: dict[str, str], now: int) -> int | None:
    """The due time a timer message asks for (``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``, ``TIMER_DELIVER_MS``,
    ``__STARTDELIVERTIME``, in 5.x's order of precedence); None when it asks for none. Raises ValueError."""
    if PROPERTY_TIMER_DELAY_SEC in props:
        return now + int(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
    if PROPERTY_TIMER_DELAY_MS in props:
        return now + int(props[PROPERTY_TIMER_DELAY_MS])
    if PROPERTY_TIMER_DELIVER_MS in props:
        return int(props[PROPERTY_TIMER_DELIVER_MS])
    if PROPERTY_START_DELIVER_TIME in props:
        return int(props[PROPERTY_START_DELIVER_TIME])
    return None


#: The properties that ask for a due time.
_DUE_TIME_PROPERTIES = frozenset({PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS,
                                  PROPERTY_START_DELIVER_TIME})  # fmt: skip


def transform_timer_message(msg: MessageExt, *, enabled: bool = True, max_delay_sec: int = 3 * 86400,
                            precision_ms: int = 1000, now: int | None = None) -> PutMessageResult | None:  # fmt: skip
    """``HookUtils.handleScheduleMessage``'s timer part: park *msg* in the timer topic when it asks for a due
    time (it is changed in place); a result when it must be refused, else None."""
    props = msg.properties
    if _DUE_TIME_PROPERTIES.isdisjoint(props):
        return None  # the common case, first
    if transaction_type(msg.sys_flag) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        return None
    if msg.topic in _NOT_TIMED_TOPICS or PROPERTY_TIMER_OUT_MS in props:
        return None
    if delay_level_of(props) > 0:
        if any(name in props for name in TIMER_PROPERTIES):
            for name in TIMER_PROPERTIES:
                props.pop(name, None)
            msg.properties_bytes = None
        return None
    now = now_ms() if now is None else now
    try:
        deliver_ms = deliver_time_of(props, now)
    except ValueError:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error="timer message illegal: bad due time")
    if not enabled:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                error="accurate timer message is not enabled, timerWheelEnable is false")  # fmt: skip
    if deliver_ms is None or deliver_ms <= now:
        return None
    if deliver_ms - now > max_delay_sec * 1000:
        return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                error=f"timer message illegal, the delay time should not be bigger than the max "
                                      f"delay {max_delay_sec * 1000}ms")  # fmt: skip
    precision = max(1, precision_ms)
    if deliver_ms % precision == 0:
        deliver_ms -= precision
    else:
        deliver_ms = deliver_ms // precision * precision
    new = dict(props)
    new[PROPERTY_TIMER_OUT_MS] = str(deliver_ms)
    new[PROPERTY_REAL_TOPIC] = msg.topic
    new[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties = hashmap_ordered(new)
    msg.properties_bytes = None
    msg.topic = TIMER_TOPIC
    msg.queue_id = 0
    return None


def convert_message(parked: MessageExt, now: int) -> MessageExt:
    """``TimerMessageStore.convert`` / ``convertMessage``: the parked record as it goes to its real topic."""
    return restore_real_message(parked, add={PROPERTY_TIMER_ENQUEUE_MS: str(parked.store_timestamp),
                                             PROPERTY_TIMER_DEQUEUE_MS: str(now)},
                                hide=(PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID))  # fmt: skip


# --- progress ----------------------------------------------------------------------------------------------
class TimerOffsetManager(ConfigManager):
    """``config/timerOffset.json``: which queue offsets of ``rmq_sys_wheel_timer`` queue 0 are resolved."""

    file_name = "timerOffset.json"

    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        super().__init__(store_root)
        self.cursor = 0
        self._starts: list[int] = []
        self._ends: list[int] = []

    # ranges [start, end), sorted, disjoint, not touching each other nor the cursor
    @property
    def done_ranges(self) -> list[tuple[int, int]]:
        return list(zip(self._starts, self._ends, strict=True))

    def is_done(self, offset: int) -> bool:
        if offset < self.cursor:
            return True
        i = bisect.bisect_right(self._starts, offset) - 1
        return i >= 0 and offset < self._ends[i]

    def mark_done(self, offset: int) -> None:
        with self._lock:
            if self.is_done(offset):
                return
            starts, ends = self._starts, self._ends
            i = bisect.bisect_right(starts, offset)  # ranges[i-1] starts at or before offset
            joins_left = i > 0 and ends[i - 1] == offset
            joins_right = i < len(starts) and starts[i] == offset + 1
            if joins_left and joins_right:
                ends[i - 1] = ends[i]
                del starts[i], ends[i]
            elif joins_left:
                ends[i - 1] = offset + 1
            elif joins_right:
                starts[i] = offset
            else:
                starts.insert(i, offset)
                ends.insert(i, offset + 1)
            if offset == self.cursor:
                self.cursor = offset + 1
            if starts and starts[0] <= self.cursor:
                self.cursor = max(self.cursor, ends[0])
                del starts[0], ends[0]

    def reset(self, cursor: int) -> None:
        """Everything below *cursor* resolved, nothing above (a queue whose start moved past the cursor)."""
        with self._lock:
            self.cursor = cursor
            keep = [(s, e) for s, e in zip(self._starts, self._ends, strict=True) if e > cursor]
            self._starts = [max(s, cursor) for s, _ in keep]
            self._ends = [e for _, e in keep]
            if self._starts and self._starts[0] <= self.cursor:
                self.cursor = self._ends[0]
                del self._starts[0], self._ends[0]

    def _to_json(self) -> dict[str, object]:
        return {"cursor": self.cursor, "doneRanges": [[s, e] for s, e in zip(self._starts, self._ends, strict=True)]}

    def _decode(self, obj: object) -> None:
        root = _as_mapping(obj, self.file_name)
        cursor = int(root.get("cursor") or 0)  # type: ignore[call-overload]
        pairs: list[tuple[int, int]] = []
        for item in root.get("doneRanges") or []:  # type: ignore[union-attr]
            start, end = int(item[0]), int(item[1])
            if end > start:
                pairs.append((start, end))
        pairs.sort()
        starts: list[int] = []
        ends: list[int] = []
        for s, e in pairs:
            if e <= cursor:
                continue
            s = max(s, cursor)
            if starts and s <= ends[-1]:
                ends[-1] = max(ends[-1], e)
            else:
                starts.append(s)
                ends.append(e)
        if starts and starts[0] <= cursor:
            cursor = ends[0]
            del starts[0], ends[0]
        self.cursor, self._starts, self._ends = cursor, starts, ends


# --- delivering --------------------------------------------------------------------------------------------
class TimerMessageService(DelayedDeliveryService):
    """The timer messages of one broker: the pending heap, the delivering thread and ``timerOffset.json``."""

    progress_file = "timerOffset.json"

    def __init__(self, controller: BrokerController) -> None:
        super().__init__(controller)
        self.offsets = TimerOffsetManager(controller.store_config.root)
        self._heap: list[tuple[int, int]] = []  # (due ms, queue offset)
        self._queued: set[int] = set()
        self._scanned = 0
        # (due ms, queue offset) of arrivals, from the dispatch thread: the heap takes them without reading the
        # parked records back (deque appends and pops are thread-safe).
        self._arrived: collections.deque[tuple[int, int]] = collections.deque()

    @property
    def enabled(self) -> bool:
        return self.controller.broker_config.timer_wheel_enable

    @property
    def retry_after_refused_put_s(self) -> float:
        """5.x sleeps ``500 * timerPrecisionMs / 1000`` ms before it puts a refused message again."""
        return max(RETRY_AFTER_REFUSED_PUT_S, 0.5 * self.controller.broker_config.timer_precision_ms / 1000.0)

    @property
    def pending(self) -> int:
        return len(self._heap)

    def transform(self, msg: MessageExt) -> PutMessageResult | None:
        if _DUE_TIME_PROPERTIES.isdisjoint(msg.properties):
            return None  # no due time asked for: most messages, spared the call below
        c = self.controller.broker_config
        return transform_timer_message(msg, enabled=c.timer_wheel_enable, max_delay_sec=c.timer_max_delay_sec,
                                       precision_ms=c.timer_precision_ms)  # fmt: skip

    def load(self) -> None:
        self.offsets.load(strict=False)

    # --- DelayedDeliveryService -----------------------------------------------------------------------
    def _keys(self) -> list[int]:
        return [0]

    def _thread_name(self, key: int) -> str:
        return "TimerMessageDelivery"

    def _prepare(self) -> None:
        cq = self.controller.store.find_consume_queue(TIMER_TOPIC, 0, create=False)
        if cq is not None and cq.get_min_offset_in_queue() > self.offsets.cursor:
            log.warning("timer queue starts at %d, past the cursor %d: the messages between were cleaned",
                        cq.get_min_offset_in_queue(), self.offsets.cursor)  # fmt: skip
            self.offsets.reset(cq.get_min_offset_in_queue())
        self._scanned = self.offsets.cursor

    def _persist(self) -> None:
        self.offsets.persist()

    def notify_parked(self, queue_offset: int, properties: Mapping[str, str] | None) -> None:
        """Called on the dispatch thread when a message lands in the timer queue at *queue_offset* (its
        properties, if known)."""
        due = _parse_int(properties.get(PROPERTY_TIMER_OUT_MS)) if properties is not None else None
        if due is not None:
            self._arrived.append((due, queue_offset))
        self.notify_arrival(0, due)

    # --- delivering -----------------------------------------------------------------------------------
    def _deliver_due(self, key: int) -> float | None:
        self._take_arrivals()
        more = self._scan()
        next_ms = self._deliver_heap()
        return now_ms() if more else next_ms

    def _take_arrivals(self) -> None:
        """Put the reported arrivals on the heap; the scan then passes over them without reading them. Without
        this, a thread woken when its head is due would first read back every record parked since it slept
        (a second's worth at the default precision), and deliver late by that much."""
        arrived = self._arrived
        while arrived:
            due, offset = arrived.popleft()
            if offset not in self._queued and not self.offsets.is_done(offset):
                heapq.heappush(self._heap, (due, offset))
                self._queued.add(offset)

    def _scan(self) -> bool:
        """Add the parked messages not seen yet to the heap; True when more are left than one round reads."""
        store = self.controller.store
        cq = store.find_consume_queue(TIMER_TOPIC, 0, create=False)
        if cq is None:
            return False
        self._scanned = max(self._scanned, cq.get_min_offset_in_queue())
        end = min(cq.get_max_offset_in_queue(), self._scanned + SCAN_BATCH)
        offset = self._scanned
        while offset < end:
            if not self.offsets.is_done(offset) and offset not in self._queued:
                unit = cq.get_unit(offset)
                parked = store.look_message_by_offset(unit.phys, unit.size) if unit is not None else None
                due = _parse_int(parked.properties.get(PROPERTY_TIMER_OUT_MS)) if parked is not None else None
                if due is None:
                    log.error("timer queue offset %d holds no readable timer message: skipped", offset)
                    self.offsets.mark_done(offset)
                else:
                    heapq.heappush(self._heap, (due, offset))
                    self._queued.add(offset)
            offset += 1
        self._scanned = end
        return end < cq.get_max_offset_in_queue()

    def _deliver_heap(self) -> float | None:
        """Deliver the due messages in due-time order; the time the next one comes due (None: none pending)."""
        store = self.controller.store
        cq = store.find_consume_queue(TIMER_TOPIC, 0, create=False)
        heap = self._heap
        while heap and not self._stopping:
            due, offset = heap[0]
            if due > now_ms():
                return due
            unit = cq.get_unit(offset) if cq is not None else None
            parked = store.look_message_by_offset(unit.phys, unit.size) if unit is not None else None
            if unit is None or parked is None:
                log.error("timer message at queue offset %d is gone: skipped", offset)
            else:
                retry_at = self.deliver(convert_message(parked, now_ms()), unit.phys)
                if retry_at is not None:
                    return retry_at
            heapq.heappop(heap)
            self._queued.discard(offset)
            self.offsets.mark_done(offset)
        return None


def _parse_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None
