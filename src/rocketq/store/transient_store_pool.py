"""Write buffers for new commit-log files: RocketMQ's ``TransientStorePool``.

Mirrors ``store/TransientStorePool.java``. With ``transientStorePoolEnable``
(and, as in RocketMQ, only with ASYNC_FLUSH on a master) a new commit-log file
borrows one of ``transientStorePoolSize`` buffers of the file's size; appends
go into it and the commit service copies them into the file (see
:class:`~rocketq.store.mapped_file.PooledMappedFile`). Java keeps the buffers
off-heap and ``mlock``s them; here they are anonymous mappings, touched (zeroed)
by the allocation thread before each use so the put path never pays for a
first-touch page fault (anchors §4.1).

A buffer given back by a full file may still be read by a reader that picked
it up just before (the dispatch thread, a pull); it is handed out again only
when ``reusable(end_offset)`` says readers have moved past the file and at
least ``grace_s`` seconds have passed. Without a free buffer a new file is
written in place, as Java does when its pool runs dry.
"""

from __future__ import annotations

import mmap
import threading
import time
from collections.abc import Callable

import numpy as np


class TransientStorePool:
    def __init__(self, pool_size: int, file_size: int, *, grace_s: float = 1.0) -> None:
        self.pool_size = pool_size
        self.file_size = file_size
        self.grace_s = grace_s
        self._lock = threading.Lock()
        self._available: list[mmap.mmap] = []
        self._returned: list[tuple[float, int, mmap.mmap]] = []  # (time, end offset of its file, buffer)
        self._created = 0
        self.reusable: Callable[[int], bool] = lambda _end: True

    def available_buffer_nums(self) -> int:
        with self._lock:
            self._release_returned()
            return len(self._available) + self.pool_size - self._created

    def _release_returned(self) -> None:
        now = time.monotonic()
        keep = []
        for t, end, buf in self._returned:
            if end < 0 or (now - t >= self.grace_s and self.reusable(end)):
                self._available.append(buf)
            else:
                keep.append((t, end, buf))
        self._returned = keep

    def borrow_buffer(self) -> mmap.mmap | None:
        """A zeroed, touched buffer, or None when all are in use. Call off the put path."""
        with self._lock:
            self._release_returned()
            if self._available:
                buf = self._available.pop()
            elif self._created < self.pool_size:
                buf = mmap.mmap(-1, self.file_size)
                self._created += 1
            else:
                return None
        view = np.frombuffer(buf, dtype=np.uint8)
        try:
            view[:] = 0  # a memset: touches every page and clears the previous file's bytes
        finally:
            del view
        return buf

    def return_buffer(self, buf: mmap.mmap, end_offset: int) -> None:
        """Give a buffer back; *end_offset* is where its file ends (-1: no reader can hold it)."""
        with self._lock:
            self._returned.append((time.monotonic(), end_offset, buf))

    def destroy(self) -> None:
        with self._lock:
            for buf in self._available:
                buf.close()
            self._available = []
            for _t, _end, buf in self._returned:
                buf.close()
            self._returned = []
