"""The ``checkpoint`` file: RocketMQ's ``StoreCheckpoint`` (store-format §6).

One 4096-byte page::

    0   i64  physicMsgTimestamp   store time of the last flushed commit-log record
    8   i64  logicsMsgTimestamp   store time of the last record in a flushed consume queue
    16  i64  indexMsgTimestamp    end time of the last index file flushed when full
    24  i64  masterFlushedOffset  (5.x; 0 in 4.9)
    32  i64  confirmPhyOffset     (5.x; 0 in 4.9)
    40  ...  zeros

Values are held in memory and written with :meth:`flush`; abnormal recovery
derives its start from them (``min_timestamp``).

``logics_msg_timestamp`` follows dispatch in memory; what :meth:`flush` writes
at offset 8 is ``flushed_logics_msg_timestamp``, which the consume-queue flush
service sets only after it has flushed every consume queue (to a value taken
before that flush). So whoever flushes the checkpoint (that service, the index
service when a file is full, shutdown), the file never claims consume-queue
data that is not on disk yet (store-format §6 and §16).
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from rocketq.common.errors import StoreError
from rocketq.store.mapped_file import notify_synced

CHECKPOINT_SIZE = 4096
_FIELDS = struct.Struct(">qqqqq")


class StoreCheckpoint:
    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.flushed_logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        self._mm: mmap.mmap | None = None
        self._fd = -1
        exists = self.path.exists()
        if read_only:
            if exists:
                data = self.path.read_bytes()[:40].ljust(40, b"\0")
                self._set(data)
            return
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            size = os.fstat(self._fd).st_size
            if size < CHECKPOINT_SIZE:
                os.ftruncate(self._fd, CHECKPOINT_SIZE)
            # Its page given its block now: a first write through the mapping on a disk filled since would be a
            # SIGBUS (on tmpfs, say), not an error.
            os.posix_fallocate(self._fd, 0, CHECKPOINT_SIZE)
            self._mm = mmap.mmap(self._fd, CHECKPOINT_SIZE)
        except OSError as e:
            raise StoreError(f"cannot open checkpoint {self.path}: {e.strerror}") from e
        if exists:
            self._set(self._mm[:40])

    def _set(self, data: bytes) -> None:
        (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
         self.master_flushed_offset, self.confirm_phy_offset) = _FIELDS.unpack_from(data, 0)  # fmt: skip
        self.flushed_logics_msg_timestamp = self.logics_msg_timestamp

    @property
    def min_timestamp(self) -> int:
        """``getMinTimestamp``: a safe lower bound of what is flushed everywhere."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    @property
    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp, self.index_msg_timestamp)

    def flush(self) -> None:
        if self._mm is None:
            return
        _FIELDS.pack_into(self._mm, 0, self.physic_msg_timestamp, self.flushed_logics_msg_timestamp,
                          self.index_msg_timestamp, self.master_flushed_offset, self.confirm_phy_offset)  # fmt: skip
        os.fdatasync(self._fd)  # not mmap.flush: that msync holds the GIL (see MappedFile.sync)
        notify_synced(self.path, self._mm, 0, CHECKPOINT_SIZE)

    def close(self) -> None:
        if self._mm is not None:
            self.flush()
            self._mm.close()
            self._mm = None
            os.close(self._fd)
