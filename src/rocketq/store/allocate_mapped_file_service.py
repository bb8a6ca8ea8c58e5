"""Commit-log files made ready ahead of time: RocketMQ's ``AllocateMappedFileService``.

Mirrors ``store/AllocateMappedFileService.java`` (store-format §2.5). When the
commit log needs file *n* it asks this service, which hands over *n* (made
earlier if it could) and at once starts making *n + 1* on its own thread, so a
roll costs the put path nothing. Making a file means:

- create it at full size and reserve its blocks (``posix_fallocate``): a full
  disk then shows up here as an error (the put gets ``CREATE_MAPEDFILE_FAILED``)
  rather than as SIGBUS on a write into a hole of the mapping;
- fsync the directory, so the new file's name survives a power loss before
  the first record acknowledged under SYNC_FLUSH lands in it;
- touch its pages off the put path (first touch of a page is the expensive
  part of an append on this machine, anchors §4.1): by reading, which leaves
  no dirty pages, a window (``touch_ahead``, 64 MiB) ahead of the write
  position as appends move it, or all of it by writing zeros before it is used
  with ``warmMapedFileEnable`` (RocketMQ's option; off by default there too);
- with a transient store pool, borrow a write buffer for it.

Touching (read-ahead advice, :meth:`MappedFile.pre_touch`) costs the kernel
about 1.4 µs a 4 KiB page here, a first write into an untouched page some 13 µs;
the window keeps that work in step with the appends instead of a burst for the
whole of a new 1 GiB file, most of which a short run never writes, competing
with the put path for the CPU. The thread looks at the write position every ``TOUCH_POLL_S`` while
appends go on, less often while they have stopped.

The one-ahead file may be left behind by a crash: it holds only zeros, and
recovery deletes it because it lies beyond the recovered end. A clean
shutdown deletes it.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from pathlib import Path

import numpy as np

from rocketq.store.mapped_file import (
    OS_PAGE_SIZE,
    MappedFile,
    PooledMappedFile,
    fsync_dir,
    offset_to_file_name,
)
from rocketq.store.transient_store_pool import TransientStorePool

log = logging.getLogger(__name__)


TOUCH_AHEAD = 64 << 20  # bytes kept touched ahead of the write position of the file being appended to
TOUCH_STEP = 1 << 20  # bytes touched a step (about 0.4 ms of the kernel here): short, and requests go between steps
TOUCH_POLL_S = 0.02  # how often the thread looks at the write position while the window has room to move
TOUCH_POLL_MAX_S = 0.32  # ... backing off to this while appends have stopped


class AllocateRequest:
    __slots__ = ("directory", "done", "error", "mapped_file", "offset", "size", "touched")

    def __init__(self, directory: Path, offset: int, size: int) -> None:
        self.directory = directory
        self.offset = offset
        self.size = size
        self.mapped_file: MappedFile | None = None
        self.error: BaseException | None = None
        self.touched = 0  # bytes of the file touched before it was handed over
        self.done = threading.Event()


class AllocateMappedFileService:
    """Use an instance as ``MappedFileQueue.allocator``."""

    def __init__(self, *, warm: bool = False, preallocate: bool = True, pool: TransientStorePool | None = None,
                 wait_timeout_s: float = 5.0, touch_ahead: int = TOUCH_AHEAD) -> None:  # fmt: skip
        self.warm = warm
        self.preallocate = preallocate
        self.pool = pool
        self.wait_timeout_s = wait_timeout_s
        self.touch_ahead = touch_ahead
        # The file handed over last (the one appends go to) while it has pages to touch, and how far it is touched.
        self._active: MappedFile | None = None
        self._touched = 0
        self._requests: dict[tuple[Path, int], AllocateRequest] = {}
        self._queue: deque[AllocateRequest] = deque()
        self._cond = threading.Condition()
        self._stopped = False
        self._busy = False  # a file is being made or touched
        self._thread: threading.Thread | None = None
        self.files_made = 0

    # --- life cycle ----------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="AllocateMappedFileService", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        """Stop, and delete every file made ahead that was never handed over."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(30.0)
        with self._cond:
            left = list(self._requests.values())
            self._requests.clear()
            self._queue.clear()
        for req in left:
            if req.mapped_file is not None:
                log.info("deleting the file made ahead %s", req.mapped_file.path)
                req.mapped_file.destroy()
                req.mapped_file = None

    # --- requests ----------------------------------------------------------------------
    def prepare(self, directory: Path, offset: int, size: int) -> None:
        """Start making the file at *offset* if nobody asked for it yet."""
        with self._cond:
            if self._stopped or (directory, offset) in self._requests:
                return
            if (directory / offset_to_file_name(offset)).exists():
                return  # already there (loaded by the queue): never touch a live file
            req = AllocateRequest(directory, offset, size)
            self._requests[(directory, offset)] = req
            self._queue.append(req)
            self._cond.notify()

    def __call__(self, directory: Path, offset: int, size: int) -> MappedFile | None:
        """``putRequestAndReturnMappedFile``: the file at *offset*, and the next one started."""
        self.prepare(directory, offset, size)
        self.prepare(directory, offset + size, size)
        with self._cond:
            req = self._requests.get((directory, offset))
        if req is None:
            # Stopped, or the name is taken by a file the queue does not hold: make it here.
            return MappedFile.create(directory, offset, size, preallocate=self.preallocate, sync_dir=True)
        if not req.done.wait(self.wait_timeout_s):
            log.warning("making %s took longer than %.1f s", directory / offset_to_file_name(offset),
                        self.wait_timeout_s)  # fmt: skip
            return None
        with self._cond:
            self._requests.pop((directory, offset), None)
            mf = req.mapped_file
            if mf is not None and self._touches(mf):
                self._active, self._touched = mf, req.touched
                self._cond.notify_all()
        if req.error is not None:
            log.error("cannot make %s: %s", directory / offset_to_file_name(offset), req.error)
            return None
        return mf

    # --- the thread --------------------------------------------------------------------
    def wait_idle(self, timeout: float) -> bool:
        """Block until no file is being made and the touched window is as far ahead as it goes (benchmarks time
        the steady state after it)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._stopped or (not self._queue and not self._busy and self._touch_end() <= self._touched),
                timeout,
            )

    def follow(self, mf: MappedFile) -> None:
        """Keep the window ahead of the appends to *mf*, a file the queue already had (its last one at start)."""
        if self._touches(mf):
            with self._cond:
                self._active, self._touched = mf, mf.wrote_position
                self._cond.notify_all()

    def _touches(self, mf: MappedFile) -> bool:
        """Whether the service touches *mf*'s pages (not with warm files, written whole, nor pooled ones)."""
        return not self.warm and not isinstance(mf, PooledMappedFile)

    def _touch_end(self) -> int:
        """Where the active file should be touched up to now (under the lock)."""
        mf = self._active
        if mf is None or mf.mm is None:
            return 0
        return min(mf.file_size, mf.wrote_position + self.touch_ahead)

    def _run(self) -> None:
        poll = TOUCH_POLL_S
        while True:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
                while not self._queue and not self._stopped and self._touch_end() <= self._touched:
                    active = self._active
                    if active is not None and (active.mm is None or self._touched >= active.file_size):
                        self._active = active = None  # touched to its end, or closed
                    if active is None:
                        self._cond.wait()
                    else:
                        self._cond.wait(poll)
                        poll = min(2 * poll, TOUCH_POLL_MAX_S)  # appends have stopped: look less often
                poll = TOUCH_POLL_S
                if self._stopped:
                    return
                self._busy = True
                req = self._queue.popleft() if self._queue else None
                active, start, end = self._active, self._touched, self._touch_end()
            if req is None:
                # A step of the window, then requests again: a file asked for is never held up for long.
                assert active is not None
                stop = min(end, start + TOUCH_STEP)
                if not self._touch(active, start, stop):
                    stop = active.file_size  # closed meanwhile
                with self._cond:
                    if self._active is active:
                        self._touched = max(self._touched, stop)
                continue
            try:
                req.mapped_file = mf = self._make(req)
                self.files_made += 1
            except Exception as e:  # handed to the caller, who reports it
                req.error = e
                mf = None
            finally:
                req.done.set()
            if mf is not None and self._touches(mf):
                # Its first window now (it is the next file: appends come to its start first); reading is safe
                # while the file is already in use.
                window = min(mf.file_size, self.touch_ahead)
                self._touch(mf, 0, window)
                req.touched = window
                with self._cond:
                    if self._active is mf:
                        self._touched = max(self._touched, window)

    def _touch(self, mf: MappedFile, start: int, end: int, write: bool = False) -> bool:
        """Touch the pages of [start, end) in chunks, giving up when the service stops (shutdown never waits long)
        or the file is closed meanwhile (False then)."""
        chunk = TOUCH_STEP
        for pos in range(start, end, chunk):
            if self._stopped or mf.mm is None:
                return mf.mm is not None
            try:
                if write:
                    view = np.frombuffer(mf.mm, dtype=np.uint8)
                    view[pos : min(end, pos + chunk) : OS_PAGE_SIZE] = 0
                    del view
                else:
                    mf.pre_touch(pos, min(end, pos + chunk))
            except (ValueError, TypeError, OSError):  # closed meanwhile
                return False
        return True

    def _make(self, req: AllocateRequest) -> MappedFile:
        buf = self.pool.borrow_buffer() if self.pool is not None else None
        if buf is not None:
            assert self.pool is not None
            req.directory.mkdir(parents=True, exist_ok=True)
            try:
                mf: MappedFile = PooledMappedFile(req.directory / offset_to_file_name(req.offset), req.size,
                                                  self.pool, buf, preallocate=self.preallocate)  # fmt: skip
            except BaseException:
                self.pool.return_buffer(buf, -1)
                raise
            fsync_dir(req.directory)
            return mf
        mf = MappedFile.create(req.directory, req.offset, req.size, preallocate=self.preallocate, sync_dir=True)
        if self.warm:
            self._touch(mf, 0, mf.file_size, write=True)  # zeros written: only before anybody appends
        return mf
