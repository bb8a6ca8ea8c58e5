"""The ``lock`` file of a store directory: one writer at a time (``DefaultMessageStore``'s file lock).

RocketMQ's ``DefaultMessageStore.start`` opens ``<storePathRootDir>/lock``, takes an exclusive
``FileChannel.tryLock(0, 1, false)`` on its first byte, writes ``lock`` into it and forces it to disk; a
second broker on the same directory fails to start. :class:`StoreLock` does the same with a POSIX record
lock (``fcntl.lockf``), so RocketMQ and rocketq exclude each other.

POSIX record locks belong to the process, not to the file descriptor: a second lock taken by the same
process would succeed, and closing either descriptor would drop both. A process-wide table of the roots
held here refuses that second lock instead. Everything that writes a store directory takes this lock:
:class:`~rocketq.store.message_store.MessageStore` while it is open, the Spark ``rebuild`` job while it
replaces the consume queues and the index.
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
from pathlib import Path
from types import TracebackType

from rocketq.common.errors import StoreError

__all__ = ["StoreLock"]

_FLOCK = "hhqqi"  # struct flock: l_type, l_whence, l_start, l_len, l_pid (native alignment)
_HELD: set[str] = set()  # real paths of the roots whose lock this process holds
_HELD_GUARD = threading.Lock()


class StoreLock:
    """The exclusive lock of the store under *root*; :meth:`acquire` raises :class:`StoreError` when it is
    held elsewhere (another process, or another open of the same store in this process)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._fd = -1
        self._key = ""

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def acquire(self) -> None:
        if self._fd >= 0:
            return
        key = os.path.realpath(self.root)
        with _HELD_GUARD:
            if key in _HELD:
                raise StoreError(f"{self.root}: the store is in use (already open in this process)")
            _HELD.add(key)
        path = self.root / "lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            self._forget(key)
            raise StoreError(f"cannot open {path}: {e.strerror}") from e
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:
            os.close(fd)
            self._forget(key)
            raise StoreError(f"{self.root}: the store is in use by another process (lock is held)") from None
        os.pwrite(fd, b"lock", 0)
        os.fsync(fd)
        self._fd = fd
        self._key = key

    def release(self) -> None:
        if self._fd < 0:
            return
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
        finally:
            os.close(self._fd)
            self._fd = -1
            self._forget(self._key)

    def held_elsewhere(self) -> bool:
        """Whether a process holds the lock now (a broker runs on the store), asked without taking it
        (``F_GETLK``); an open of the store in this process counts too."""
        with _HELD_GUARD:
            if os.path.realpath(self.root) in _HELD:
                return True
        try:
            fd = os.open(self.root / "lock", os.O_RDONLY)
        except OSError:
            return False  # no lock file: nobody ever took it
        try:
            asked = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, asked)
            return struct.unpack(_FLOCK, answer)[0] != fcntl.F_UNLCK
        except OSError:
            return False
        finally:
            os.close(fd)

    @staticmethod
    def _forget(key: str) -> None:
        with _HELD_GUARD:
            _HELD.discard(key)

    def __enter__(self) -> StoreLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        self.release()
