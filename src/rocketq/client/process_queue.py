"""The messages of one queue between pull and consumption: Java's ``ProcessQueue``.

Pulled messages wait here by queue offset until they are consumed. What it answers:

- the offset a consumer may commit: the lowest offset still in the queue (a message still being worked
  on), or where the pulls go on from when nothing is left (``remove_message``);
- flow control: how many messages and bytes are cached, and the span between lowest and highest offset;
- for orderly consumption, the messages taken for consumption in offset order (``take_messages``), given
  back for a retry (``make_message_to_consume_again``) or committed (``commit``), and whether the broker
  lock on the queue is held and fresh (locks older than 30 s count as lost);
- ``dropped``: the queue was taken away by a rebalance; nothing of it is committed any more.

Offsets are kept sorted in a list beside a dict: pulls append in increasing order, and the few
out-of-order inserts (retries given back) go through ``bisect``.
"""

from __future__ import annotations

import asyncio
import bisect
import operator
import time
from collections.abc import Iterable

from rocketq.client.running_info import ProcessQueueInfo, epoch_ms
from rocketq.common.message import PROPERTY_CONSUME_START_TIMESTAMP, MessageExt

__all__ = ["ProcessQueue"]

_QUEUE_OFFSET = operator.attrgetter("queue_offset")
_BODY = operator.attrgetter("body")
REBALANCE_LOCK_MAX_LIVE_TIME = 30.0
PULL_MAX_IDLE_TIME = 120.0


class ProcessQueue:
    def __init__(self) -> None:
        self._msgs: dict[int, MessageExt] = {}
        self._offsets: list[int] = []  # sorted keys of _msgs
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not yet committed
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.next_pull_offset = -1  # where the pull loop goes on from (messages before it are here or done)
        self.dropped = False
        self.locked = False
        self.last_lock_timestamp = time.monotonic()
        self.last_pull_timestamp = time.monotonic()
        self.last_consume_timestamp = time.monotonic()
        self.consuming = False  # orderly: a consume task owns this queue
        self.try_unlock_times = 0
        self.msg_acc_cnt = 0
        self.consume_lock = asyncio.Lock()  # orderly: held while a batch of this queue is being consumed

    def fill_info(self, info: ProcessQueueInfo) -> ProcessQueueInfo:
        """``fillProcessQueueInfo``: the cache, the orderly batch in hand, the lock and the times (epoch ms)."""
        if self._offsets:
            info.cached_msg_min_offset = self._offsets[0]
            info.cached_msg_max_offset = self._offsets[-1]
            info.cached_msg_count = len(self._offsets)
            info.cached_msg_size_in_mib = self.msg_size // (1024 * 1024)
        if self._consuming:
            info.transaction_msg_min_offset = min(self._consuming)
            info.transaction_msg_max_offset = max(self._consuming)
            info.transaction_msg_count = len(self._consuming)
        info.locked = self.locked
        info.try_unlock_times = self.try_unlock_times
        info.last_lock_timestamp = epoch_ms(self.last_lock_timestamp)
        info.droped = self.dropped
        info.last_pull_timestamp = epoch_ms(self.last_pull_timestamp)
        info.last_consume_timestamp = epoch_ms(self.last_consume_timestamp)
        return info

    def __repr__(self) -> str:
        return (f"<ProcessQueue count={self.msg_count} span={self.max_span} locked={self.locked} "
                f"dropped={self.dropped}>")  # fmt: skip

    # -- pull side --------------------------------------------------------------------------------

    def put_message(self, msgs: Iterable[MessageExt]) -> bool:
        """Add pulled messages; True when an orderly consumer should be started on this queue."""
        if type(msgs) is not list:
            msgs = list(msgs)
        offs = list(map(_QUEUE_OFFSET, msgs))
        if offs and offs[0] > (self._offsets[-1] if self._offsets else -1) and sorted(set(offs)) == offs:
            # A pull's messages: increasing, all past those in hand. Taken in bulk.
            self._msgs.update(zip(offs, msgs, strict=True))
            self._offsets += offs
            self.msg_count += len(offs)
            self.msg_size += sum(map(len, filter(None, map(_BODY, msgs))))
            if offs[-1] > self.queue_offset_max:
                self.queue_offset_max = offs[-1]
            msgs = []
        added = 0
        for msg in msgs:
            off = msg.queue_offset
            if off in self._msgs:
                continue
            self._msgs[off] = msg
            if not self._offsets or off > self._offsets[-1]:
                self._offsets.append(off)
            else:
                bisect.insort(self._offsets, off)
            added += 1
            self.msg_size += len(msg.body or b"")
            if off > self.queue_offset_max:
                self.queue_offset_max = off
        self.msg_count += added
        if self._msgs and not self.consuming:
            self.consuming = True
            return True
        return False

    @property
    def max_span(self) -> int:
        return self._offsets[-1] - self._offsets[0] if self._offsets else 0

    def has_temp_message(self) -> bool:
        return bool(self._msgs)

    def is_lock_expired(self) -> bool:
        return time.monotonic() - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME

    def is_pull_expired(self) -> bool:
        return time.monotonic() - self.last_pull_timestamp > PULL_MAX_IDLE_TIME

    def _discard(self, off: int) -> MessageExt | None:
        msg = self._msgs.pop(off, None)
        if msg is not None:
            i = bisect.bisect_left(self._offsets, off)
            if i < len(self._offsets) and self._offsets[i] == off:
                del self._offsets[i]
        return msg

    # -- concurrent consumption -------------------------------------------------------------------

    def remove_message(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; the offset to commit (−1 when the queue was already empty)."""
        if not self._msgs:
            return -1
        result = self.queue_offset_max + 1
        if type(msgs) is not list:
            msgs = list(msgs)
        offs = list(map(_QUEUE_OFFSET, msgs))
        offsets = self._offsets
        i = bisect.bisect_left(offsets, offs[0]) if offs else 0
        if offs and offsets[i : i + len(offs)] == offs:
            # A run of the offsets in hand (a batch consumed whole, the usual case): removed in bulk.
            del offsets[i : i + len(offs)]
            gone = list(map(self._msgs.pop, offs))
            self.msg_size -= sum(map(len, filter(None, map(_BODY, gone))))
            self.msg_count -= len(gone)
            msgs = []
        removed = 0
        for msg in msgs:
            gone_one = self._discard(msg.queue_offset)
            if gone_one is not None:
                removed += 1
                self.msg_size -= len(gone_one.body or b"")
        self.msg_count -= removed
        self.last_consume_timestamp = time.monotonic()
        if self._offsets:
            result = self._offsets[0]
        elif self.next_pull_offset > result:
            result = self.next_pull_offset  # what the pull skipped past was filtered out by tag
        return result

    def first_expired(self, now_ms: int, timeout_ms: float) -> MessageExt | None:
        """The message at the head of the queue when its consumption began more than *timeout_ms* before
        *now_ms* (its ``CONSUME_START_TIME``); else None (``cleanExpiredMsg``'s test)."""
        if not self._offsets:
            return None
        msg = self._msgs[self._offsets[0]]
        started = msg.properties.get(PROPERTY_CONSUME_START_TIMESTAMP)
        if started and started.isdigit() and now_ms - int(started) > timeout_ms:
            return msg
        return None

    # -- orderly consumption ----------------------------------------------------------------------

    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Up to ``batch_size`` messages in offset order, moved to the consuming set; empty (and the
        queue marked not consuming) when there is none."""
        taken: list[MessageExt] = []
        self.last_consume_timestamp = time.monotonic()
        while self._offsets and len(taken) < batch_size:
            off = self._offsets.pop(0)
            msg = self._msgs.pop(off)
            self._consuming[off] = msg
            taken.append(msg)
        if not taken:
            self.consuming = False
        return taken

    def commit(self) -> int:
        """The taken messages are consumed: the offset after the highest of them (−1 if none)."""
        if not self._consuming:
            return -1
        offset = max(self._consuming)
        self.msg_count -= len(self._consuming)
        for msg in self._consuming.values():
            self.msg_size -= len(msg.body or b"")
        self._consuming.clear()
        return offset + 1

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        for msg in msgs:
            self._consuming.pop(msg.queue_offset, None)
            if msg.queue_offset not in self._msgs:
                self._msgs[msg.queue_offset] = msg
                bisect.insort(self._offsets, msg.queue_offset)

    def rollback(self) -> None:
        self.make_message_to_consume_again(list(self._consuming.values()))

    def clear(self) -> None:
        self._msgs.clear()
        self._offsets.clear()
        self._consuming.clear()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
