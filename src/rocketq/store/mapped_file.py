"""A memory-mapped, fixed-size data file: RocketMQ's ``MappedFile``.

Mirrors ``store/MappedFile.java`` (5.x ``logfile/DefaultMappedFile``;
store-format §2.5). A file is created at its full size (sparse: unwritten bytes
read as zeros) and named by the 20-digit offset of its first byte in its
logical stream. It keeps three positions, none of them persisted:

- ``wrote_position``: end of the bytes appended so far;
- ``committed_position``: end of the bytes visible to readers (equal to the
  wrote position unless a transient store pool stages writes elsewhere);
- ``flushed_position``: end of the bytes known to be on disk (msync).

Reads return ``bytes`` copies, so no buffer export ever pins the mapping and a
file can always be closed or deleted. Readers of a store opened read-only map
with ``ACCESS_READ`` and never write.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from pathlib import Path

import numpy as np

from rocketq.common.errors import StoreError

OS_PAGE_SIZE = 4096


def offset_to_file_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: 20 decimal digits, zero-padded."""
    return f"{offset:020d}"


class MappedFile:
    """One mapped file of a :class:`MappedFileQueue`."""

    __slots__ = (
        "_fd",
        "_lock",
        "committed_position",
        "file_from_offset",
        "file_size",
        "flushed_position",
        "mm",
        "path",
        "read_only",
        "store_timestamp",
        "wrote_position",
    )

    def __init__(self, path: str | os.PathLike[str], file_size: int, *, read_only: bool = False,
                 create: bool = False) -> None:  # fmt: skip
        self.path = Path(path)
        self.file_size = file_size
        self.read_only = read_only
        try:
            self.file_from_offset = int(self.path.name)
        except ValueError as e:
            raise StoreError(f"{self.path}: file name is not an offset") from e
        self._lock = threading.Lock()
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0  # store time of the last record appended (for the checkpoint)
        flags = os.O_RDONLY if read_only else os.O_RDWR | (os.O_CREAT if create else 0)
        try:
            self._fd = os.open(self.path, flags, 0o644)
        except OSError as e:
            raise StoreError(f"cannot open {self.path}: {e.strerror}") from e
        try:
            size = os.fstat(self._fd).st_size
            if size != file_size:
                if create and not read_only and size == 0:
                    os.ftruncate(self._fd, file_size)
                else:
                    raise StoreError(
                        f"{self.path}: {size} bytes, but files here are {file_size} bytes "
                        "(is the configured file size right?)"
                    )
            access = mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE
            self.mm = mmap.mmap(self._fd, file_size, access=access)
        except BaseException:
            os.close(self._fd)
            raise

    @classmethod
    def create(cls, directory: Path, offset: int, file_size: int, *, warm: bool = False) -> MappedFile:
        directory.mkdir(parents=True, exist_ok=True)
        mf = cls(directory / offset_to_file_name(offset), file_size, create=True)
        if warm:
            mf.warm()
        return mf

    # --- positions -----------------------------------------------------------
    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def read_position(self) -> int:
        """End of the bytes a reader may see."""
        return self.committed_position

    def set_positions(self, pos: int) -> None:
        self.wrote_position = self.committed_position = self.flushed_position = pos

    # --- writing -------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Append *data* at the write position; return where it was written."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            raise StoreError(f"{self.path}: append of {len(data)} bytes past the end of the file")
        self.mm[pos:end] = data
        self.wrote_position = end
        self.committed_position = end
        return pos

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        self.mm[pos : pos + len(data)] = data

    def fill_to_end(self) -> None:
        """Mark the file full without writing (after a BLANK record)."""
        self.wrote_position = self.committed_position = self.file_size

    def warm(self) -> None:
        """Touch every page once so later appends do not pay first-touch faults.

        ``warmMapedFileEnable``: one write per OS page, vectorised.
        """
        if self.read_only:
            return
        view = np.frombuffer(self.mm, dtype=np.uint8)
        try:
            view[self.wrote_position :: OS_PAGE_SIZE] = 0
        finally:
            del view

    def zero_tail(self, pos: int) -> None:
        """Clear stale bytes after a truncation point, up to the first all-zero page.

        Java leaves them; clearing keeps a later scan from mistaking a truncated
        (CRC-valid) record or unit for live data.
        """
        size = self.file_size
        end = pos
        while end < size:
            nxt = min(size, (end // OS_PAGE_SIZE + 1) * OS_PAGE_SIZE)
            chunk = self.mm[end:nxt]
            if chunk.count(0) != len(chunk):
                self.mm[end:nxt] = bytes(nxt - end)
            elif end > pos:
                break
            end = nxt

    def flush(self, least_pages: int = 0) -> int:
        """msync the dirty range when at least *least_pages* pages are dirty.

        Returns the flushed position.
        """
        with self._lock:
            target = self.committed_position
            flushed = self.flushed_position
            if target <= flushed:
                return flushed
            if least_pages > 0 and (target // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE) < least_pages:
                return flushed
            if not self.read_only and self.mm is not None:
                # fdatasync covers pages dirtied through a shared mapping and,
                # unlike mmap.flush (msync), releases the GIL while it waits.
                os.fdatasync(self._fd)
            self.flushed_position = target
            return target

    def is_able_to_flush(self, least_pages: int) -> bool:
        target = self.committed_position
        if self.is_full() and target > self.flushed_position:
            return True
        if least_pages > 0:
            return target // OS_PAGE_SIZE - self.flushed_position // OS_PAGE_SIZE >= least_pages
        return target > self.flushed_position

    # --- reading -------------------------------------------------------------
    def read(self, pos: int, size: int) -> bytes | None:
        """Bytes [pos, pos+size) if they are all readable, else None."""
        if pos < 0 or size < 0 or pos + size > self.read_position():
            return None
        return self.mm[pos : pos + size]

    def read_to_end(self, pos: int) -> bytes:
        return self.mm[pos : self.read_position()]

    # --- life cycle ----------------------------------------------------------
    def last_modified(self) -> float:
        """File modification time in ms, as ``File.lastModified``."""
        try:
            return os.stat(self.path).st_mtime * 1000
        except OSError:
            return 0.0

    def close(self) -> None:
        if self.mm is not None:
            self.mm.close()
            self.mm = None  # type: ignore[assignment]
            os.close(self._fd)

    def destroy(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"
