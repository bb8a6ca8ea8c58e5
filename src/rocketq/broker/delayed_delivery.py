"""What the delay levels (:mod:`rocketq.broker.schedule_message_service`) and the timer
(:mod:`rocketq.broker.timer_message_service`) share: putting a parked message back into its real topic, and the
delivery threads that sleep until the next due time.

Restoring (:func:`restore_real_message`). RocketMQ has this step twice, with one shape: ``messageTimeup`` of
``ScheduleMessageService`` (4.9 ``store/schedule``, 5.x ``broker/schedule``) and ``convert`` / ``convertMessage``
of 5.x's ``store/timer/TimerMessageStore``. The copy has the parked record's body, flag, sysFlag, born time, born
host, store host and reconsume times. Its property string is built from the parked properties, with the names
the caller adds (the timer adds ``TIMER_ENQUEUE_MS`` and ``TIMER_DEQUEUE_MS``). Then some names leave the map but
stay in the string: the delay levels drop ``DELAY`` and the timer properties, so the store does not delay the
copy again, and the timer drops ``REAL_TOPIC`` and ``REAL_QID``. The copy's topic and queue come from
``REAL_TOPIC`` and ``REAL_QID``. Its tag code is the hash of ``TAGS``, which the store works out from the map.
When nothing is added, the stored string is kept byte for byte: the golden copies that RocketMQ 4.9.4 delivered
carry the parked string unchanged. When names are added, the string is encoded from the map in Java ``HashMap``
order.

Putting (:meth:`DelayedDeliveryService.deliver`). A delivery thread puts the copy and waits for the result
(under SYNC_FLUSH it waits for the flush). What happens next depends on the result:

- stored (PUT_OK, or a flush or slave timeout, where the copy is in the commit log all the same): the caller's
  progress moves past the parked message;
- illegal (MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED), or a real topic that is the half topic (Java's "[BUG]"
  case): the message is logged and dropped, and the progress moves on;
- anything else (the store refuses puts for now: disk full, page cache busy, …): the same message is tried
  again after the service's pause, as Java does: 100 ms for a delay level (``DELAY_FOR_A_WHILE``), half the
  timer precision for the timer (5.x sleeps ``500 * precisionMs / 1000`` ms; at least 100 ms here). Unlike
  5.x, which drops the message after three tries unless ``timerEnableRetryUntilSuccess``, both keep trying: an
  acknowledged message is never lost.

An unexpected error in a delivery round is logged and the round runs again after ``RETRY_AFTER_ERROR_S``
(``DELAY_FOR_A_PERIOD``).

Waking (:class:`DueTimeWakeup`). Each delivery thread delivers what is due, then sleeps until its next due
time. The store's arrival listener (on the dispatch thread) reports each parked message with its due time, and
the thread is woken only when that message is due before the time it sleeps until. So a busy level does not
wake its thread once per message, and a message due sooner than the one being waited for (a timer message, or
the first message of an idle level) is still delivered on time. Java instead polls every 100 ms. A thread with
nothing pending also looks again every ``IDLE_CHECK_S``, in case it missed an arrival (the listener is attached
after the threads start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from rocketq.broker.topic_validator import RMQ_SYS_TRANS_HALF_TOPIC
from rocketq.common.javacompat import encode_utf8_java, hashmap_ordered
from rocketq.common.message import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, MessageExt, properties_to_string
from rocketq.store.commit_log import PutMessageStatus

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

log = logging.getLogger(__name__)

#: ``DELAY_FOR_A_WHILE``-like: how often a thread with nothing pending looks again, besides arrival wake-ups.
IDLE_CHECK_S = 1.0
#: The longest sleep before a thread looks again, whatever it waits for.
MAX_SLEEP_S = 60.0
#: ``DELAY_FOR_A_PERIOD``: the pause after an unexpected error in a delivery round.
RETRY_AFTER_ERROR_S = 10.0
#: ``DELAY_FOR_A_WHILE``: the shortest pause after a put the store refused, before the same message is tried again.
RETRY_AFTER_REFUSED_PUT_S = 0.1
#: ``WAIT_FOR_SHUTDOWN``: how long shutdown waits for the threads to finish the message in hand.
WAIT_FOR_SHUTDOWN_S = 5.0
#: Put outcomes after which the copy is in the commit log (the progress may move on).
STORED = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                    PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE})  # fmt: skip
#: Put outcomes that will never change for this message: it is dropped, as Java drops it.
PERMANENT = frozenset({PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED})


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def restore_real_message(parked: MessageExt, *, add: Mapping[str, str] | None = None,
                         hide: Iterable[str] = ()) -> MessageExt:  # fmt: skip
    """The parked message as it goes back to its real topic and queue (module docstring).

    *add*: names put into the properties before the string is built; *hide*: names then removed from the map
    only (they stay in the stored string).
    """
    props = dict(parked.properties)
    raw = parked.properties_bytes
    if add:
        props.update(add)
        props = hashmap_ordered(props)
        raw = encode_utf8_java(properties_to_string(props))
    topic = props.get(PROPERTY_REAL_TOPIC, parked.topic)
    try:
        queue_id = int(props.get(PROPERTY_REAL_QUEUE_ID, "0"))
    except ValueError:
        queue_id = 0
    for name in hide:
        props.pop(name, None)
    return MessageExt(topic=topic, body=parked.body, flag=parked.flag, properties=props, queue_id=queue_id,
                      sys_flag=parked.sys_flag, born_timestamp=parked.born_timestamp, born_host=parked.born_host,
                      store_host=parked.store_host, reconsume_times=parked.reconsume_times,
                      properties_bytes=raw)  # fmt: skip


class DueTimeWakeup:
    """A delivery thread's sleep: until its next due time, or until a message due before that arrives.

    ``until`` is +inf while the thread is awake or has nothing pending. In that state every arrival sets the
    event, because the thread may have read its queue before the message came, and its next sleep must not
    miss it.
    """

    __slots__ = ("_event", "until")

    def __init__(self) -> None:
        self._event = threading.Event()
        self.until = math.inf

    def awake(self) -> None:
        """Called before the thread reads its queue: later arrivals will be seen or will cut the next sleep short."""
        self.until = math.inf
        self._event.clear()

    def sleep(self, until_ms: float | None) -> None:
        """Sleep until epoch *until_ms* (None: nothing pending, look again after ``IDLE_CHECK_S``), or until an
        arrival due before it."""
        if until_ms is None:
            timeout = IDLE_CHECK_S
        else:
            self.until = until_ms
            timeout = min(MAX_SLEEP_S, (until_ms - now_ms()) / 1000.0)
        if timeout > 0:
            self._event.wait(timeout)

    def arrived(self, due_ms: int | None) -> None:
        """Thread-safe: a message due at *due_ms* (None: unknown) is parked; wake the thread if it sleeps past it."""
        if due_ms is None or due_ms < self.until:
            self._event.set()

    def wake(self) -> None:
        self._event.set()


class DelayedDeliveryService:
    """Delivery threads (one per key: a delay level, or the timer) and the periodic persisting of their progress.

    A subclass says which keys it has, delivers what is due for a key (:meth:`_deliver_due`) and persists its
    progress (:meth:`_persist`).
    """

    #: The progress file (for thread names and logs).
    progress_file = ""
    #: The pause after a put the store refused (a subclass may say otherwise).
    retry_after_refused_put_s = RETRY_AFTER_REFUSED_PUT_S

    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller
        self._wakeups: dict[int, DueTimeWakeup] = {}
        self._threads: list[threading.Thread] = []
        self._persister: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False
        self._count_lock = threading.Lock()
        #: Messages delivered since start; for stats and tests.
        self.delivered = 0

    # --- what a subclass provides --------------------------------------------------------------------
    def _keys(self) -> list[int]:
        raise NotImplementedError

    def _thread_name(self, key: int) -> str:
        raise NotImplementedError

    def _prepare(self) -> None:
        """Runs at start, before the threads (corrections of the progress)."""

    def _deliver_due(self, key: int) -> float | None:
        """Deliver every due message of *key*; the epoch ms to look again at (None: nothing pending)."""
        raise NotImplementedError

    def _persist(self) -> None:
        raise NotImplementedError

    # --- life cycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = False
        self._prepare()
        for key in self._keys():
            self._wakeups[key] = DueTimeWakeup()
            thread = threading.Thread(target=self._run, args=(key,), name=self._thread_name(key), daemon=True)
            self._threads.append(thread)
            thread.start()
        interval = max(0.05, self.controller.store_config.flush_delay_offset_interval / 1000.0)
        self._persister = self._loop.create_task(self._persist_every(interval), name=f"persist {self.progress_file}")

    async def shutdown(self) -> None:
        """Let every thread finish the message in hand, stop, and persist the progress."""
        if self._loop is None:
            return
        self._stopping = True
        for wakeup in self._wakeups.values():
            wakeup.wake()
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
        self._wakeups = {}
        await asyncio.to_thread(self.persist)

    def persist(self) -> None:
        try:
            self._persist()
        except OSError:
            log.exception("cannot persist %s", self.progress_file)

    async def _persist_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await asyncio.to_thread(self.persist)

    def notify_arrival(self, key: int, due_ms: int | None) -> None:
        """Thread-safe (the dispatch thread): a message due at *due_ms* was parked for *key*."""
        wakeup = self._wakeups.get(key)
        if wakeup is not None:
            wakeup.arrived(due_ms)

    # --- delivering -----------------------------------------------------------------------------------
    def _run(self, key: int) -> None:
        wakeup = self._wakeups[key]
        while not self._stopping:
            wakeup.awake()
            try:
                next_ms = self._deliver_due(key)
            except Exception:
                log.exception("%s: delivering failed", self._thread_name(key))
                next_ms = now_ms() + RETRY_AFTER_ERROR_S * 1000
            if self._stopping:
                break
            wakeup.sleep(next_ms)

    def deliver(self, copy: MessageExt, parked_at: int) -> float | None:
        """Put *copy* (restored from the parked record at commit-log offset *parked_at*); None when the progress
        may move past the parked message (stored, or dropped for good), else the epoch ms to try it again at."""
        if copy.topic == RMQ_SYS_TRANS_HALF_TOPIC:
            log.error("[BUG] the real topic of the parked message at %d is %s: discarded", parked_at, copy.topic)
            return None
        copy.wait_store_msg_ok = False  # messageTimeup: a delivery waits for no flush and no slave
        result = self.controller.put_message_sync(copy)
        if result.status in STORED:
            with self._count_lock:
                self.delivered += 1
            return None
        if result.status in PERMANENT:
            log.error("parked message at %d dropped: %s (%s)", parked_at, result.status.value, result.error)
            return None
        pause = self.retry_after_refused_put_s
        log.error("parked message at %d not delivered: %s (%s); trying again in %.1f s", parked_at,
                  result.status.value, result.error, pause)  # fmt: skip
        return now_ms() + pause * 1000
