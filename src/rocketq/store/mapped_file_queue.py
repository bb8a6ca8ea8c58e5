"""An ordered run of equal-size mapped files: RocketMQ's ``MappedFileQueue``.

Mirrors ``store/MappedFileQueue.java`` (store-format §2.5). File *n* covers the
logical bytes [start, start + file_size) of one stream (the commit log, one
consume queue); file names are the 20-digit start offsets, so name order is
offset order. ``flushed_where`` / ``committed_where`` are absolute offsets.

Files deleted while the store runs (retention) leave the list at once and are
unlinked, but their mappings are closed only after a grace period
(:meth:`reap_retired`), so a reader that picked a file just before can finish.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rocketq.common.errors import StoreError
from rocketq.store.mapped_file import MappedFile

log = logging.getLogger(__name__)
RETIRED_GRACE_S = 5.0


class MappedFileQueue:
    def __init__(self, store_path: str | os.PathLike[str], mapped_file_size: int, *,
                 read_only: bool = False, warm: bool = False, keep_fds: bool = True) -> None:  # fmt: skip
        """*keep_fds*: each file holds a descriptor besides its mapping (see ``MappedFile``'s ``keep_fd``)."""
        if mapped_file_size <= 0:
            raise StoreError(f"mapped file size must be positive, got {mapped_file_size}")
        self.store_path = Path(store_path)
        self.mapped_file_size = mapped_file_size
        self.read_only = read_only
        self.warm = warm
        self.keep_fds = keep_fds
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self.committed_where = 0
        self.store_timestamp = 0
        self._lock = threading.RLock()
        self._commit_lock = threading.Lock()  # the commit service, a flush and a lookup may commit at once
        # Optional hook that hands over a ready (pre-created, pre-touched) file, or None when it cannot.
        self.allocator: Callable[[Path, int, int], MappedFile | None] | None = None
        self.retired: list[tuple[float, MappedFile]] = []  # deleted files whose mappings close later
        self.dropped_at_load: list[str] = []  # an empty last file that load deleted (its name)

    # --- loading ------------------------------------------------------------
    def load(self) -> bool:
        """Open every file in the directory; each must have the configured size."""
        if not self.store_path.is_dir():
            return True
        names = sorted(p for p in self.store_path.iterdir() if p.is_file())
        for p in names:
            if not p.name.isdigit() or len(p.name) != 20:
                raise StoreError(f"{p}: unexpected file in a mapped-file directory")
            size = p.stat().st_size
            if size == 0 and p == names[-1]:
                # An allocated-but-never-mapped last file (RocketMQ 5.x deletes it too; 4.9.4 refuses to load).
                if not self.read_only:
                    p.unlink()
                    self.dropped_at_load.append(p.name)
                continue
            if size != self.mapped_file_size:
                # As RocketMQ's load refuses it ("length not matched message store config value"). Which is wrong,
                # the file or the setting, the sizes of the files beside it may tell.
                others = {q.stat().st_size for q in names if q != p}
                if others == {self.mapped_file_size}:
                    why = "unlike the files beside it: the file is damaged (truncated?)"
                else:
                    why = ("wrong mappedFileSize setting for this store? give its broker.conf with -c; if the "
                           "setting is right, the file is damaged (truncated?)")  # fmt: skip
                raise StoreError(f"{p}: {size} bytes, expected {self.mapped_file_size}: {why}")
            mf = MappedFile(p, self.mapped_file_size, read_only=self.read_only, keep_fd=self.keep_fds)
            mf.set_positions(self.mapped_file_size)
            self.files.append(mf)
        return True

    # --- lookup --------------------------------------------------------------
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def get_last_mapped_file(self, start_offset: int = 0, need_create: bool = True,
                             before_use: Callable[[MappedFile], None] | None = None) -> MappedFile | None:  # fmt: skip
        """The last file; a new one when there is none or it is full (and *need_create*).

        *before_use* is called with a new file before any other thread can see it (say, to fault in the pages
        its first writes go to)."""
        last = self.last()
        if not need_create or (last is not None and not last.is_full()):
            return last
        if self.read_only:
            raise StoreError("store is open read-only")
        with self._lock:
            # Looked at again under the lock: another thread may have made the file meanwhile (a consume
            # queue's files are made ahead by the reput thread).
            last = self.last()
            if last is None:
                create_offset = start_offset - start_offset % self.mapped_file_size
            elif last.is_full():
                create_offset = last.file_from_offset + self.mapped_file_size
            else:
                return last
            try:
                if self.allocator is not None:
                    mf = self.allocator(self.store_path, create_offset, self.mapped_file_size)
                else:
                    mf = MappedFile.create(self.store_path, create_offset, self.mapped_file_size, warm=self.warm,
                                           keep_fd=self.keep_fds)  # fmt: skip
            except (StoreError, OSError) as e:
                # A full disk, for one: the caller reports CREATE_MAPEDFILE_FAILED.
                log.error("cannot create the mapped file at offset %d in %s: %s", create_offset,
                          self.store_path, e)  # fmt: skip
                return None
            if mf is None:
                return None
            if before_use is not None:
                try:
                    before_use(mf)
                except (StoreError, OSError) as e:
                    log.error("cannot prepare the mapped file %s: %s", mf.path, e)
                    mf.destroy()
                    return None
            self.files.append(mf)
        return mf

    def find_mapped_file_by_offset(self, offset: int, return_first_on_not_found: bool = False) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        first = files[0]
        last = files[-1]
        if offset < first.file_from_offset or offset >= last.file_from_offset + self.mapped_file_size:
            return first if return_first_on_not_found else None
        idx = offset // self.mapped_file_size - first.file_from_offset // self.mapped_file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        for mf in files:
            if mf.file_from_offset <= offset < mf.file_from_offset + self.mapped_file_size:
                return mf
        return first if return_first_on_not_found else None

    def get_mapped_file_by_time(self, timestamp: int) -> MappedFile | None:
        """The first file modified at or after *timestamp* (ms), else the last."""
        for mf in self.files:
            if mf.last_modified() >= timestamp:
                return mf
        return self.last()

    # --- offsets -------------------------------------------------------------
    def get_min_offset(self) -> int:
        first = self.first()
        return first.file_from_offset if first is not None else -1

    def get_max_offset(self) -> int:
        """End of readable data (last file start + read position)."""
        last = self.last()
        return last.file_from_offset + last.read_position() if last is not None else 0

    def get_max_wrote_position(self) -> int:
        last = self.last()
        return last.file_from_offset + last.wrote_position if last is not None else 0

    def how_much_fall_behind(self) -> int:
        return self.get_max_wrote_position() - self.flushed_where

    # --- flush ----------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        """Flush the file holding ``flushed_where``; return True if nothing was flushed."""
        mf = self.find_mapped_file_by_offset(self.flushed_where, self.flushed_where == 0)
        if mf is None:
            return True
        ts = mf.store_timestamp
        where = mf.file_from_offset + mf.flush(least_pages)
        result = where == self.flushed_where
        self.flushed_where = where
        if least_pages == 0 and ts:
            self.store_timestamp = ts
        return result

    def mark_flushed(self, offset: int, store_timestamp: int) -> None:
        """Record that everything below *offset* is on disk (its files' positions are marked by the caller);
        *store_timestamp* is the store time of the last record it covers (0: unknown)."""
        if offset > self.flushed_where:
            self.flushed_where = offset
            if store_timestamp:
                self.store_timestamp = store_timestamp

    def flush_all(self) -> None:
        while not self.flush(0):
            pass

    def commit(self, least_pages: int = 0) -> bool:
        """Commit the file holding ``committed_where``; return True if nothing was committed."""
        with self._commit_lock:
            mf = self.find_mapped_file_by_offset(self.committed_where, self.committed_where == 0)
            if mf is None:
                return True
            where = mf.file_from_offset + mf.commit(least_pages)
            result = where == self.committed_where
            self.committed_where = where
            return result

    def commit_all(self) -> None:
        for _ in range(len(self.files) + 1):
            if self.commit(0):
                break

    # --- truncation and deletion ----------------------------------------------
    def set_flushed_and_committed(self, offset: int) -> None:
        self.flushed_where = offset
        self.committed_where = offset

    def truncate_dirty_files(self, offset: int) -> None:
        """Delete files after *offset* and set the positions of the one holding it."""
        with self._lock:
            keep: list[MappedFile] = []
            for mf in self.files:
                tail = mf.file_from_offset + self.mapped_file_size
                if tail > offset:
                    if offset >= mf.file_from_offset:
                        mf.set_positions(offset % self.mapped_file_size)
                        keep.append(mf)
                    else:
                        mf.destroy()
                else:
                    keep.append(mf)
            self.files = keep

    def delete_last_mapped_file(self) -> None:
        with self._lock:
            if self.files:
                self.files.pop().destroy()

    def delete_first_files(self, count: int) -> list[MappedFile]:
        with self._lock:
            gone = self.files[:count]
            self.files = self.files[count:]
        for mf in gone:
            self._retire(mf)
        return gone

    def delete_expired_file_by_time(self, expired_ms: int, interval_ms: int, clean_immediately: bool,
                                    batch_max: int = 10,
                                    sleep: Callable[[float], object] = time.sleep) -> int:  # fmt: skip
        """``deleteExpiredFileByTime``: delete the oldest files, never the last one.

        A file goes when its modification time + *expired_ms* has passed or
        *clean_immediately*; the first file that does not qualify ends the round
        (no holes in the middle); at most *batch_max* files, *interval_ms* apart.
        """
        files = list(self.files[:-1])
        count = 0
        now = time.time() * 1000
        for i, mf in enumerate(files):
            if not (clean_immediately or now >= mf.last_modified() + expired_ms):
                break
            with self._lock:
                if not self.files or self.files[0] is not mf:
                    break
                self.files = self.files[1:]
            log.info("deleting expired file %s", mf.path)
            self._retire(mf)
            count += 1
            if count >= batch_max:
                break
            if interval_ms > 0 and i + 1 < len(files):
                sleep(interval_ms / 1000)
        return count

    def _retire(self, mf: MappedFile) -> None:
        """Unlink now (the space comes back once the mapping is closed); close after a grace period."""
        with contextlib.suppress(FileNotFoundError):
            mf.path.unlink()
        with self._lock:
            self.retired.append((time.monotonic(), mf))

    def reap_retired(self, grace_s: float = RETIRED_GRACE_S) -> int:
        """Close the mappings of files deleted at least *grace_s* ago; return how many."""
        now = time.monotonic()
        with self._lock:
            due = [mf for t, mf in self.retired if now - t >= grace_s]
            self.retired = [(t, mf) for t, mf in self.retired if now - t < grace_s]
        for mf in due:
            mf.close()
        return len(due)

    def reset_to(self, offset: int) -> None:
        self.truncate_dirty_files(offset)
        self.set_flushed_and_committed(offset)

    def destroy(self) -> None:
        with self._lock:
            for mf in self.files:
                mf.destroy()
            self.files = []
            self.flushed_where = self.committed_where = 0
        if self.read_only:
            return
        try:
            if self.store_path.is_dir() and not any(self.store_path.iterdir()):
                self.store_path.rmdir()
        except OSError:
            pass

    def close(self) -> None:
        with self._lock:
            for mf in self.files:
                mf.close()
            self.files = []
            for _t, mf in self.retired:
                mf.close()
            self.retired = []
