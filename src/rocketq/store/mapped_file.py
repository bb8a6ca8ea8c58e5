"""A memory-mapped, fixed-size data file: RocketMQ's ``MappedFile``.

Mirrors ``store/MappedFile.java`` (5.x ``logfile/DefaultMappedFile``;
store-format §2.5). A file is created at its full size (sparse: unwritten bytes
read as zeros), gets its name only once it has that size (:func:`_create_sized`),
and is named by the 20-digit offset of its first byte in its logical stream.
It keeps three positions, none of them persisted:

- ``wrote_position``: end of the bytes appended so far;
- ``committed_position``: end of the bytes visible to readers (equal to the
  wrote position unless a transient store pool stages writes elsewhere);
- ``flushed_position``: end of the bytes known to be on disk (msync).

Reads return ``bytes`` copies, so no buffer export ever pins the mapping and a
file can always be closed or deleted. Readers of a store opened read-only map
with ``ACCESS_READ`` and never write.

:class:`PooledMappedFile` is the ``transientStorePoolEnable`` variant: appends
go to a buffer borrowed from the :class:`~rocketq.store.transient_store_pool.TransientStorePool`,
``commit`` copies them into the file, and readers see only committed bytes.

``sync_listener`` is a test hook: when set, it is called after every
fdatasync/msync of a store file with the range that is now known to be on disk
(fault tests use it to keep a copy of exactly what a power loss would leave).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import mmap
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rocketq.common.errors import StoreError

if TYPE_CHECKING:
    from rocketq.store.transient_store_pool import TransientStorePool

OS_PAGE_SIZE = 4096
PRE_TOUCH_STEP = 256 << 10  # bytes a pre_touch call brings in: the kernel is not preempted inside a call
RESERVE_STEP = 64 << 10  # bytes reserved at a time ahead of write_reserved (3,276 consume-queue units)


def _read_ahead(fd: int, start: int, end: int) -> None:
    """Have the kernel bring [start, end) of *fd* into the page cache (``posix_fadvise(WILLNEED)``)."""
    pos = start
    while pos < end:
        n = min(PRE_TOUCH_STEP, end - pos)
        os.posix_fadvise(fd, pos, n, os.POSIX_FADV_WILLNEED)
        pos += n


def _read_through_sendfile(fd: int, start: int, end: int) -> None:
    """Read [start, end) of *fd* into the page cache by splicing it to ``/dev/null``."""
    sink = os.open(os.devnull, os.O_WRONLY)
    try:
        pos = start
        while pos < end:
            n = os.sendfile(sink, fd, pos, min(PRE_TOUCH_STEP, end - pos))
            if n <= 0:
                return
            pos += n
    finally:
        os.close(sink)


def _read_through_buffer(fd: int, start: int, end: int) -> None:
    """Read [start, end) of *fd* into the page cache through a scratch buffer."""
    scratch = memoryview(bytearray(1 << 20))
    pos = start
    while pos < end:
        n = os.preadv(fd, [scratch[: min(len(scratch), end - pos)]], pos)
        if n <= 0:
            return
        pos += n
log = logging.getLogger(__name__)

# Test hook: (path, mapping, start, end) after bytes [start, end) of a file were synced to disk.
sync_listener: Callable[[Path, mmap.mmap, int, int], None] | None = None


def notify_synced(path: Path, mm: mmap.mmap, start: int, end: int) -> None:
    """Tell the test hook (if any) that [start, end) of *path* is on disk."""
    listener = sync_listener
    if listener is not None and end > start:
        listener(path, mm, start, end)


def fsync_dir(path: Path) -> None:
    """Make the directory entries under *path* durable (a new file survives a power loss)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_sized(path: Path, size: int, preallocate: bool) -> int | None:
    """A descriptor of a new file at *path* that is *size* bytes long from the moment its name exists (its blocks
    reserved with *preallocate*), or None where it cannot be made that way (no ``O_TMPFILE`` here, nor in this
    file system, or no ``/proc`` to link it through): the caller then creates and sizes it in two steps.

    The file is made unnamed in its directory, sized, and then linked in. A process killed meanwhile leaves
    nothing; one killed between a plain create and its ``ftruncate`` would leave an empty file, and RocketMQ's
    loader refuses a directory holding a file whose length is not the configured size (a consume queue's next
    file, made ahead by the reput thread, was found so after a SIGKILL). Raises OSError from the reservation
    (a full disk) and FileExistsError when *path* appeared meanwhile."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag:
        return None
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        try:
            fd = os.open(".", flag | os.O_RDWR, 0o644, dir_fd=dir_fd)
        except OSError:  # not supported by this file system (EOPNOTSUPP, EISDIR, EINVAL)
            return None
        try:
            os.ftruncate(fd, size)
            if preallocate:
                os.posix_fallocate(fd, 0, size)
            # linkat(..., AT_SYMLINK_FOLLOW) through the descriptor's /proc link: os.link makes that call only when
            # given a directory descriptor (plain link() does not follow the link, and fails with EXDEV).
            os.link(f"/proc/self/fd/{fd}", path.name, dst_dir_fd=dir_fd)
        except OSError as e:
            os.close(fd)  # the unnamed file goes with its descriptor
            if isinstance(e, FileExistsError) or (preallocate and e.errno in (errno.ENOSPC, errno.EDQUOT)):
                raise
            return None
        return fd
    finally:
        os.close(dir_fd)


def offset_to_file_name(offset: int) -> str:
    """``UtilAll.offset2FileName``: 20 decimal digits, zero-padded."""
    return f"{offset:020d}"


_ZERO_STEP = 1 << 20  # zero_tail reads (and clears) this much at a time
_ZERO_VIEW = memoryview(bytes(_ZERO_STEP))


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
        "reserved_to",
        "store_timestamp",
        "wrote_position",
    )

    def __init__(self, path: str | os.PathLike[str], file_size: int, *, read_only: bool = False,
                 create: bool = False, preallocate: bool = False, keep_fd: bool = True) -> None:  # fmt: skip
        """Map *path*. Without *keep_fd* no descriptor is held once it is mapped (the mapping holds one of its
        own): the rare calls that need one open it for their time. A store of thousands of consume queues
        then holds one descriptor a file, as RocketMQ does, not two."""
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
        # Blocks given to [0, this) by reserve (or a whole preallocated file); below where a writer upward began
        # (reserve_ahead), what is written has its blocks.
        self.reserved_to = 0
        flags = os.O_RDONLY if read_only else os.O_RDWR | (os.O_CREAT if create else 0)
        made = None
        if create and not read_only and not self.path.exists():
            try:
                made = _create_sized(self.path, file_size, preallocate)
            except FileExistsError:
                pass  # made by someone else meanwhile: opened below, and its size checked
            except OSError as e:
                raise StoreError(f"cannot map {self.path}: {e.strerror}") from e
        try:
            self._fd = made if made is not None else os.open(self.path, flags, 0o644)
        except OSError as e:
            raise StoreError(f"cannot open {self.path}: {e.strerror}") from e
        if made is not None and preallocate:
            self.reserved_to = file_size
        size = -1
        try:
            size = os.fstat(self._fd).st_size
            if size != file_size:
                if create and not read_only and size == 0:
                    os.ftruncate(self._fd, file_size)
                    if preallocate:
                        # Reserve the blocks now: a full disk then fails here, with an error,
                        # instead of as SIGBUS on a later write into a hole of the mapping.
                        os.posix_fallocate(self._fd, 0, file_size)
                        self.reserved_to = file_size
                else:
                    raise StoreError(
                        f"{self.path}: {size} bytes, but files here are {file_size} bytes "
                        "(is the configured file size right?)"
                    )
            access = mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE
            self.mm = mmap.mmap(self._fd, file_size, access=access)
            if not keep_fd:
                os.close(self._fd)
                self._fd = -1
        except OSError as e:
            os.close(self._fd)
            if create and size == 0:
                with contextlib.suppress(OSError):
                    self.path.unlink()
            raise StoreError(f"cannot map {self.path}: {e.strerror}") from e
        except BaseException:
            os.close(self._fd)
            raise

    @classmethod
    def create(cls, directory: Path, offset: int, file_size: int, *, warm: bool = False,
               preallocate: bool = False, sync_dir: bool = False, keep_fd: bool = True) -> MappedFile:  # fmt: skip
        directory.mkdir(parents=True, exist_ok=True)
        mf = cls(directory / offset_to_file_name(offset), file_size, create=True, preallocate=preallocate,
                 keep_fd=keep_fd)  # fmt: skip
        if sync_dir:
            fsync_dir(directory)
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

    def reserve(self, start: int, end: int) -> None:
        """Give bytes [start, end) of the file their blocks now (``posix_fallocate``): on a full disk this
        raises :class:`StoreError`, where touching those pages through the mapping later would be a SIGBUS.

        Their pages are then brought into the page cache by read-ahead advice (see :meth:`pre_touch`): the
        writes through the mapping that follow (consume-queue units, index slots and entries) find them there
        instead of each first write allocating its page inside a page fault, which costs more and can stall."""
        try:
            with self._descriptor() as fd:
                os.posix_fallocate(fd, start, end - start)
                with contextlib.suppress(OSError, AttributeError):  # advice: without it the writes fault them in
                    _read_ahead(fd, start - start % OS_PAGE_SIZE, end)
        except OSError as e:
            raise StoreError(f"cannot reserve space in {self.path}: {e.strerror}") from e
        if start <= self.reserved_to < end:
            self.reserved_to = end

    def reserve_ahead(self, pos: int, end: int) -> None:
        """Reserve the blocks under [pos, end) of a sparse file written upward (consume-queue units, index
        entries) unless they are already, :data:`RESERVE_STEP` bytes past *pos* at a time.

        Done before a write through the mapping, it makes a full disk a :class:`StoreError` here, never a
        SIGBUS on a hole of the mapping; a writer checks ``end > reserved_to`` before the call (one comparison a write).
        """
        if end > self.reserved_to:
            reserve_to = min(self.file_size, max(end, pos + RESERVE_STEP))
            self.reserve(pos, reserve_to)
            # Below pos the writer has written (its blocks are given) or never will.
            self.reserved_to = max(self.reserved_to, reserve_to)

    def write_reserved(self, pos: int, data: bytes | bytearray) -> None:
        """Write *data* at *pos* through the mapping, into blocks reserved first (:meth:`reserve_ahead`).

        For a sparse file (a consume queue): a write is a copy into memory, where a write through the file is a
        system call each (10 µs, more than the copy of a unit by a hundred times).
        """
        end = pos + len(data)
        if end > self.reserved_to:
            self.reserve_ahead(pos, end)
        self.mm[pos:end] = data

    def fill_to_end(self) -> None:
        """Mark the file full without writing (after a BLANK record)."""
        self.wrote_position = self.committed_position = self.file_size

    def warm(self) -> None:
        """Touch every page once so later appends do not pay first-touch faults.

        ``warmMapedFileEnable``: one write per OS page, vectorised (numpy lets go
        of the GIL meanwhile, so a background thread can do it off the put path).
        """
        if self.read_only:
            return
        view = np.frombuffer(self.mm, dtype=np.uint8)
        try:
            view[self.wrote_position :: OS_PAGE_SIZE] = 0
        finally:
            del view

    def touch_for_write(self, start: int, end: int) -> None:
        """Reserve the blocks of [start, end) and write those bytes over with what they hold, through the file.

        For a file nobody else writes yet. The first write through the mapping of a new file costs milliseconds
        here (2.4 ms, the page fault's file-system work, with the GIL held by whoever writes), where a write
        through the descriptor first costs 20 µs, the GIL let go, and the mapping's first write then 8 µs. A new
        consume queue's first unit was such a write on the broker's event loop, 1,024 of them for a topic of
        1,024 queues; made ahead by the reput thread, its file comes touched here.
        """
        if self.read_only or start >= end:
            return
        self.reserve_ahead(start, end)
        try:
            with self._descriptor() as fd:
                os.pwrite(fd, os.pread(fd, end - start, start), start)
        except OSError as e:
            raise StoreError(f"cannot write to {self.path}: {e.strerror}") from e

    def pre_touch(self, start: int = 0, end: int | None = None) -> None:
        """Bring the pages of [start, end) into the page cache (no dirty pages, no disk writes).

        The page-cache pages exist afterwards, so an append no longer pays for
        allocating them (anchors §4.1); unlike :meth:`warm` nothing is written
        back, and it is safe while appends go on. Each call lets go of the GIL.
        (Faulting the pages in through the mapping, e.g. a numpy sum over one byte
        a page, holds the GIL for the whole call: tens of ms of a stalled event
        loop per 64 MiB while the next commit-log file was made.)

        The kernel is asked to read ahead (``posix_fadvise(WILLNEED)``), 256 KiB a
        call. Reading the file instead (``sendfile`` to ``/dev/null``, ``pread``), the
        way this did before, costs 6-10 µs a page on this kind of VM against 1.4 µs,
        and every few MiB one call ran 20-30 ms inside the kernel, which does not
        preempt (PREEMPT_NONE): a core gone for that long under load, the 99th
        percentile of the broker's born-to-consume latency (client_bench), and of a
        sleeping process's wake-up. The advice brought none of those in the same
        test. Where the advice is refused (not Linux), the file is read through.
        """
        end = self.file_size if end is None else min(end, self.file_size)
        if self.mm is None or start >= end:
            return
        with self._descriptor() as fd:
            try:
                _read_ahead(fd, start, end)
                return
            except (OSError, AttributeError):  # no posix_fadvise here, or refused: read the pages in
                pass
            try:
                _read_through_sendfile(fd, start, end)
            except OSError:
                _read_through_buffer(fd, start, end)

    def read_through(self, pos: int, size: int) -> bytes:
        """Bytes [pos, pos + size) of the file (fewer at its end), read through the descriptor, not the mapping:
        for recovery's scans (see ``ConsumeQueue._reader``)."""
        try:
            with self._descriptor() as fd:
                return os.pread(fd, max(0, min(size, self.file_size - pos)), pos)
        except OSError as e:
            raise StoreError(f"cannot read {self.path}: {e.strerror}") from e

    def zero_tail(self, pos: int) -> int:
        """Clear the stale bytes after a truncation point, to the end of the file.

        Java leaves them; clearing keeps a later scan from mistaking a truncated (CRC-valid) record or unit
        for live data. Every byte after *pos* is looked at (a zeroed page inside the stale data, from a crash
        or a damaged disk, does not end the search), a megabyte at a time, skipping the file's holes
        (``SEEK_DATA``); only the parts that hold something are written. Returns the number of bytes cleared.
        Read and written through the descriptor (:meth:`read_through`), as recovery reads.
        """
        try:
            with self._descriptor() as fd:
                return self._zero_tail(fd, pos)
        except OSError as e:
            raise StoreError(f"cannot clear the tail of {self.path}: {e.strerror}") from e

    def _zero_tail(self, fd: int, pos: int) -> int:
        size = self.file_size
        end = pos
        cleared = 0
        while end < size:
            try:
                data = os.lseek(fd, end, os.SEEK_DATA)
                hole = min(size, os.lseek(fd, data, os.SEEK_HOLE))
            except OSError as e:
                if e.errno == errno.ENXIO:  # nothing but holes from here (they read as zeros)
                    break
                data, hole = end, size  # SEEK_DATA not to be had here: all of it is looked at
            if data >= size:
                break
            while data < hole:
                nxt = min(hole, (data // _ZERO_STEP + 1) * _ZERO_STEP)
                if os.pread(fd, nxt - data, data) != _ZERO_VIEW[: nxt - data]:  # a memcmp, not a count
                    try:
                        os.pwrite(fd, bytes(nxt - data), data)
                    except OSError as e:
                        raise StoreError(f"cannot write to {self.path}: {e.strerror}") from e
                    cleared += nxt - data
                data = nxt
            end = hole
        return cleared

    def commit(self, least_pages: int = 0) -> int:
        """Make appended bytes visible in the file; plain files write in place, so nothing to do."""
        return self.committed_position

    def flush(self, least_pages: int = 0) -> int:
        """fdatasync the file when at least *least_pages* pages are dirty (or the file is full).

        Returns the flushed position.
        """
        with self._lock:
            target = self.committed_position
            flushed = self.flushed_position
            if target <= flushed:
                return flushed
            if least_pages > 0 and target < self.file_size and \
                    (target // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE) < least_pages:  # fmt: skip
                return flushed
            mm = self.mm
            if not self.read_only and mm is not None:
                self.sync()
                if sync_listener is not None:
                    notify_synced(self.path, mm, flushed, target)
            self.flushed_position = target
            return target

    def mark_flushed(self, end: int) -> None:
        """Record that the bytes up to *end* are on disk, synced by someone else (the group commit's helper
        process, :mod:`rocketq.store.sync_helper`). The flushed position only moves forward."""
        with self._lock:
            start = self.flushed_position
            if end <= start:
                return
            mm = self.mm
            if sync_listener is not None and mm is not None:
                notify_synced(self.path, mm, start, end)
            self.flushed_position = end

    def sync(self) -> None:
        """fdatasync the whole file. It covers the pages dirtied through the shared mapping and, unlike
        ``mmap.flush`` (an msync that CPython makes holding the GIL, which stops every thread of the process,
        the broker's event loop among them, for as long as the disk takes), releases the GIL while it waits."""
        if not self.read_only and self.mm is not None:
            try:
                with self._descriptor() as fd:
                    os.fdatasync(fd)
            except FileNotFoundError:  # (only a file that holds no descriptor opens one here)
                pass  # deleted meanwhile (retention): nobody reads it any more

    @contextlib.contextmanager
    def _descriptor(self) -> Iterator[int]:
        """The file's descriptor: the one held, else one opened for the caller's time (see ``keep_fd``)."""
        if self._fd >= 0:
            yield self._fd
            return
        fd = os.open(self.path, os.O_RDONLY if self.read_only else os.O_RDWR)
        try:
            yield fd
        finally:
            os.close(fd)

    def is_able_to_flush(self, least_pages: int) -> bool:
        target = self.committed_position
        if self.is_full() and target > self.flushed_position:
            return True
        if least_pages > 0:
            return target // OS_PAGE_SIZE - self.flushed_position // OS_PAGE_SIZE >= least_pages
        return target > self.flushed_position

    # --- reading -------------------------------------------------------------
    def read(self, pos: int, size: int) -> bytes | None:
        """Bytes [pos, pos+size) if they are all readable, else None (also once the file is closed)."""
        mm = self.mm
        if pos < 0 or size < 0 or pos + size > self.read_position() or mm is None:
            return None
        try:
            return mm[pos : pos + size]
        except ValueError:  # closed under us (deleted by the clean service)
            return None

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
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def destroy(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"


class PooledMappedFile(MappedFile):
    """A new commit-log file whose appends go to a pool buffer first (``transientStorePoolEnable``).

    As Java's ``MappedFile`` with a ``writeBuffer``: the put path writes into
    ``mm`` (here the borrowed buffer) and advances ``wrote_position`` only —
    assignments to ``committed_position`` from the put path are ignored —
    ``commit`` copies [committed, wrote) into the file with ``pwrite`` (which
    lets go of the GIL while the page cache is filled), and readers see only
    committed bytes. Once the file is full and wholly committed, ``mm`` becomes
    the file's own mapping and the buffer goes back to the pool, which hands it
    out again only after readers have moved past (see the pool).
    """

    __slots__ = ("_committed", "_file_mm", "_pool", "write_buffer")

    def __init__(self, path: str | os.PathLike[str], file_size: int, pool: TransientStorePool,
                 buffer: mmap.mmap, *, preallocate: bool = False) -> None:  # fmt: skip
        self._committed = 0
        super().__init__(path, file_size, create=True, preallocate=preallocate)
        self._file_mm = self.mm
        self._pool = pool
        self.write_buffer: mmap.mmap | None = buffer
        self.mm = buffer

    @property  # type: ignore[override]
    def committed_position(self) -> int:
        return self._committed

    @committed_position.setter
    def committed_position(self, _value: int) -> None:
        """Appends do not commit here; :meth:`commit` does."""

    def set_positions(self, pos: int) -> None:
        self.wrote_position = self._committed = self.flushed_position = pos

    def commit(self, least_pages: int = 0) -> int:
        """Copy [committed, wrote) from the buffer into the file; return the committed position."""
        buf = self.write_buffer
        committed = self._committed
        if buf is None:
            return committed
        wrote = self.wrote_position
        size = self.file_size
        if wrote > committed and (least_pages <= 0 or wrote >= size
                                  or wrote // OS_PAGE_SIZE - committed // OS_PAGE_SIZE >= least_pages):  # fmt: skip
            with memoryview(buf) as view:
                pos = committed
                while pos < wrote:
                    pos += os.pwrite(self._fd, view[pos:wrote], pos)
            self._committed = committed = wrote
        if committed >= size:
            # Wholly committed: readers switch to the file; the buffer goes back to the pool.
            self.mm = self._file_mm
            self.write_buffer = None
            self._pool.return_buffer(buf, self.file_from_offset + size)
        return committed

    def close(self) -> None:
        buf = self.write_buffer
        if buf is not None:
            self.write_buffer = None
            self.mm = self._file_mm
            self._pool.return_buffer(buf, -1)
        super().close()
