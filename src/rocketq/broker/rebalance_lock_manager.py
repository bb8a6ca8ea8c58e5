"""Queue locks of orderly consumers: RocketMQ's ``broker/client/rebalance/RebalanceLockManager`` (spec §6.12).

(group, MessageQueue) → (clientId, last renewal). A client gets a queue that is unlocked, already its own, or
whose lock was not renewed for ``REBALANCE_LOCK_MAX_LIVE_TIME`` (60 s); locking renews. Unlocking releases
only the caller's own locks. As in Java, the locks of a client that disconnects simply expire.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from rocketq.broker.protocol import MessageQueue

log = logging.getLogger(__name__)

REBALANCE_LOCK_MAX_LIVE_TIME_MS = 60_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class LockEntry:
    client_id: str
    last_update_timestamp: int = field(default_factory=_now_ms)

    def is_expired(self, now: int, max_live_ms: int) -> bool:
        return now - self.last_update_timestamp > max_live_ms

    def is_locked(self, client_id: str, now: int, max_live_ms: int) -> bool:
        return self.client_id == client_id and not self.is_expired(now, max_live_ms)


class RebalanceLockManager:
    def __init__(self, max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS) -> None:
        self.max_live_ms = max_live_ms
        self.mq_lock_table: dict[str, dict[MessageQueue, LockEntry]] = {}
        self._lock = threading.Lock()

    def try_lock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> list[MessageQueue]:
        """``tryLockBatch``: the queues of ``mqs`` this client holds after the call (granted or renewed)."""
        locked: list[MessageQueue] = []
        now = _now_ms()
        with self._lock:
            table = self.mq_lock_table.setdefault(group, {})
            for mq in dict.fromkeys(mqs):
                entry = table.get(mq)
                if entry is None:
                    table[mq] = LockEntry(client_id, now)
                    log.info("tryLockBatch, message queue not locked, I got it. Group: %s NewClientId: %s %s",
                             group, client_id, mq)  # fmt: skip
                    locked.append(mq)
                elif entry.is_locked(client_id, now, self.max_live_ms):
                    entry.last_update_timestamp = now
                    locked.append(mq)
                elif entry.is_expired(now, self.max_live_ms):
                    log.warning("tryLockBatch, message queue lock expired, I got it. Group: %s OldClientId: %s "
                                "NewClientId: %s %s", group, entry.client_id, client_id, mq)  # fmt: skip
                    entry.client_id = client_id
                    entry.last_update_timestamp = now
                    locked.append(mq)
                else:
                    log.warning("tryLockBatch, message queue locked by other client. Group: %s OtherClientId: %s "
                                "NewClientId: %s %s", group, entry.client_id, client_id, mq)  # fmt: skip
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        with self._lock:
            table = self.mq_lock_table.get(group)
            if table is None:
                return
            for mq in mqs:
                entry = table.get(mq)
                if entry is None:
                    log.warning("unlockBatch, but mq not locked, Group: %s ClientId: %s %s", group, client_id, mq)
                elif entry.client_id == client_id:
                    del table[mq]
                    log.info("unlockBatch, Group: %s %s %s", group, mq, client_id)
                else:
                    log.warning("unlockBatch, but mq locked by other client: %s, Group: %s %s %s",
                                entry.client_id, group, mq, client_id)  # fmt: skip

    def is_lock_all_expired(self, group: str) -> bool:
        """``isLockAllExpired``: True when the group holds no live lock (spec §6.1 step 5 uses it)."""
        now = _now_ms()
        with self._lock:
            table = self.mq_lock_table.get(group)
            if not table:
                return True
            return all(entry.is_expired(now, self.max_live_ms) for entry in table.values())
