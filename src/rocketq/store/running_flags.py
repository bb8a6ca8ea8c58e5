"""What the store currently refuses to do: RocketMQ's ``RunningFlags``.

Mirrors ``store/RunningFlags.java``: one bit set per reason. A put is refused
with ``SERVICE_NOT_AVAILABLE`` while any "not writeable" bit is set (4.9
``DefaultMessageStore.checkStoreStatus``); the consume queues ignore the
disk-full bit, so dispatch goes on building units for records already in the
commit log. The clean service sets and clears ``DISK_FULL`` from its disk
usage probe (store-format §12).

The put path tests ``flag_bits & NOT_WRITEABLE_BITS`` (one attribute read and
an ``and``) before every put.
"""

from __future__ import annotations

import threading

NOT_READABLE_BIT = 1
NOT_WRITEABLE_BIT = 1 << 1
WRITE_LOGICS_QUEUE_ERROR_BIT = 1 << 2
WRITE_INDEX_FILE_ERROR_BIT = 1 << 3
DISK_FULL_BIT = 1 << 4
FENCED_BIT = 1 << 5
LOGIC_DISK_FULL_BIT = 1 << 6

# Any of these refuses puts.
NOT_WRITEABLE_BITS = (NOT_WRITEABLE_BIT | WRITE_LOGICS_QUEUE_ERROR_BIT | DISK_FULL_BIT | WRITE_INDEX_FILE_ERROR_BIT
                      | FENCED_BIT | LOGIC_DISK_FULL_BIT)  # fmt: skip
_CQ_NOT_WRITEABLE = NOT_WRITEABLE_BIT | WRITE_LOGICS_QUEUE_ERROR_BIT | WRITE_INDEX_FILE_ERROR_BIT | LOGIC_DISK_FULL_BIT

_NAMES = {
    NOT_READABLE_BIT: "not readable",
    NOT_WRITEABLE_BIT: "not writeable",
    WRITE_LOGICS_QUEUE_ERROR_BIT: "consume queue write error",
    WRITE_INDEX_FILE_ERROR_BIT: "index file write error",
    DISK_FULL_BIT: "disk full",
    FENCED_BIT: "fenced",
    LOGIC_DISK_FULL_BIT: "consume-queue disk full",
}


class RunningFlags:
    def __init__(self) -> None:
        self.flag_bits = 0
        self._lock = threading.Lock()

    def _change(self, set_bits: int = 0, clear_bits: int = 0) -> int:
        """Apply a change; return the bits as they were before it."""
        with self._lock:
            before = self.flag_bits
            self.flag_bits = (before | set_bits) & ~clear_bits
        return before

    # --- queries ------------------------------------------------------------------
    def is_readable(self) -> bool:
        return not self.flag_bits & NOT_READABLE_BIT

    def is_writeable(self) -> bool:
        return not self.flag_bits & NOT_WRITEABLE_BITS

    def is_cq_writeable(self) -> bool:
        return not self.flag_bits & _CQ_NOT_WRITEABLE

    def is_disk_full(self) -> bool:
        return bool(self.flag_bits & DISK_FULL_BIT)

    def reasons(self) -> list[str]:
        """The set bits, in words (for error messages and ``inspect``)."""
        return [name for bit, name in _NAMES.items() if self.flag_bits & bit]

    # --- changes (each returns what Java's getAndMake… returns) --------------------
    def get_and_make_disk_full(self) -> bool:
        """Set DISK_FULL; True if it was not set before."""
        return not self._change(set_bits=DISK_FULL_BIT) & DISK_FULL_BIT

    def get_and_make_disk_ok(self) -> bool:
        """Clear DISK_FULL; True if it was not set before."""
        return not self._change(clear_bits=DISK_FULL_BIT) & DISK_FULL_BIT

    def get_and_make_not_writeable(self) -> bool:
        return not self._change(set_bits=NOT_WRITEABLE_BIT) & NOT_WRITEABLE_BITS

    def get_and_make_writeable(self) -> bool:
        return not self._change(clear_bits=NOT_WRITEABLE_BIT) & NOT_WRITEABLE_BITS

    def make_logics_queue_error(self) -> None:
        self._change(set_bits=WRITE_LOGICS_QUEUE_ERROR_BIT)

    def clear_logics_queue_error(self) -> None:
        self._change(clear_bits=WRITE_LOGICS_QUEUE_ERROR_BIT)

    def make_index_file_error(self) -> None:
        self._change(set_bits=WRITE_INDEX_FILE_ERROR_BIT)
