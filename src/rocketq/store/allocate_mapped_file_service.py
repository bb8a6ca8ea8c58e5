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
- touch every page once, off the put path (first touch of a page is the
  expensive part of an append on this machine, anchors §4.1): by reading,
  which leaves no dirty pages, or by writing zeros with ``warmMapedFileEnable``;
- with a transient store pool, borrow a write buffer for it.

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


class AllocateRequest:
    __slots__ = ("directory", "done", "error", "mapped_file", "offset", "size")

    def __init__(self, directory: Path, offset: int, size: int) -> None:
        self.directory = directory
        self.offset = offset
        self.size = size
        self.mapped_file: MappedFile | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()


class AllocateMappedFileService:
    """Use an instance as ``MappedFileQueue.allocator``."""

    def __init__(self, *, warm: bool = False, preallocate: bool = True, pool: TransientStorePool | None = None,
                 wait_timeout_s: float = 5.0) -> None:  # fmt: skip
        self.warm = warm
        self.preallocate = preallocate
        self.pool = pool
        self.wait_timeout_s = wait_timeout_s
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
        if req.error is not None:
            log.error("cannot make %s: %s", directory / offset_to_file_name(offset), req.error)
            return None
        return req.mapped_file

    # --- the thread --------------------------------------------------------------------
    def wait_idle(self, timeout: float) -> bool:
        """Block until no file is being made or touched (benchmarks time the steady state after it)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._stopped or (not self._queue and not self._busy), timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                req = self._queue.popleft()
                self._busy = True
            try:
                req.mapped_file = mf = self._make(req)
                self.files_made += 1
            except Exception as e:  # handed to the caller, who reports it
                req.error = e
                mf = None
            finally:
                req.done.set()
            if mf is not None and not self.warm and not isinstance(mf, PooledMappedFile):
                # Reading is safe while the file is already in use: touch after handing it over.
                self._touch(mf)

    def _touch(self, mf: MappedFile, write: bool = False) -> None:
        """Touch every page in chunks, giving up when the service stops (shutdown never waits long)."""
        chunk = 64 << 20
        for start in range(0, mf.file_size, chunk):
            if self._stopped or mf.mm is None:
                return
            try:
                if write:
                    view = np.frombuffer(mf.mm, dtype=np.uint8)
                    view[start : start + chunk : OS_PAGE_SIZE] = 0
                    del view
                else:
                    mf.pre_touch(start, min(mf.file_size, start + chunk))
            except (ValueError, TypeError, OSError):  # closed meanwhile
                return

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
            self._touch(mf, write=True)  # zeros written: only before anybody appends
        return mf
