"""A store opened to be read, never written: what ``rocketq store`` and the Spark jobs read a store through.

A :class:`~rocketq.store.message_store.MessageStore` opened ``read_only`` runs recovery as a broker's start would
(store-format §11), in memory: what recovery would truncate is only left out of what is read, on disk nothing
changes. A store left by a crash (an ``abort`` file) may end in a record torn by the crash; recovery ends the log
before it (4.9.4's ``recoverAbnormally``), and :func:`readable_end` says where, for readers that walk the files
themselves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocketq.common.errors import StoreError
from rocketq.common.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, transaction_type
from rocketq.store.commit_log import DispatchRequest
from rocketq.store.mapped_file_queue import MappedFileQueue
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig
from rocketq.store.store_lock import StoreLock

__all__ = ["ReadOnlyStore", "readable_end", "unrecovered_data"]


def _protect_queue(mfq: MappedFileQueue) -> None:
    """Make a read-only queue drop files from memory instead of deleting them.

    ``MappedFileQueue.truncate_dirty_files`` / ``delete_last_mapped_file`` call
    ``MappedFile.destroy`` (unlink) even for a queue opened read-only, which
    recovery of a store left by a crash does; these stand-ins only close.
    """

    def truncate_dirty_files(offset: int) -> None:
        keep = []
        for mf in mfq.files:
            if mf.file_from_offset > offset:
                mf.close()  # wholly past the cut: dropped from memory, left on disk
                continue
            if offset < mf.file_from_offset + mfq.mapped_file_size:
                mf.set_positions(offset % mfq.mapped_file_size)
            keep.append(mf)
        mfq.files = keep

    def delete_last_mapped_file() -> None:
        if mfq.files:
            mfq.files.pop().close()

    def delete_first_files(count: int) -> list[Any]:
        gone, mfq.files = mfq.files[:count], mfq.files[count:]
        for mf in gone:
            mf.close()
        return gone

    def destroy() -> None:
        for mf in mfq.files:
            mf.close()
        mfq.files = []

    mfq.truncate_dirty_files = truncate_dirty_files  # type: ignore[method-assign]
    mfq.delete_last_mapped_file = delete_last_mapped_file  # type: ignore[method-assign]
    mfq.delete_first_files = delete_first_files  # type: ignore[method-assign]
    mfq.destroy = destroy  # type: ignore[method-assign]


class ReadOnlyStore(MessageStore):
    """A :class:`MessageStore` opened ``read_only`` that never touches the files.

    Two things differ from the plain read-only store: recovery truncation only
    drops files from memory (see :func:`_protect_queue`), and the dispatch that
    abnormal recovery runs does not write into consume queues or the index
    (a read-only store cannot); it only notes the records that a broker would
    still have to add to their consume queue (``undispatched``).
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> None:
        if not callable(getattr(MessageStore, "_load_consume_queues", None)):
            # The hook below is how consume queues get protected; without it, refuse rather than risk deletes.
            raise StoreError("internal: MessageStore changed, cannot open a store read-only safely")
        super().__init__(config, read_only=True, progress=progress)
        self.undispatched: list[int] = []
        _protect_queue(self.commit_log.mapped_file_queue)

    def _load_consume_queues(self) -> None:
        super()._load_consume_queues()
        for cq in self.consume_queues():
            _protect_queue(cq.queue)

    def do_dispatch(self, req: DispatchRequest) -> None:
        if transaction_type(req.sys_flag) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            return
        cq = self.find_consume_queue(req.topic, req.queue_id, create=False)
        if cq is None or req.commit_log_offset + req.msg_size > cq.max_physic_offset:
            self.undispatched.append(req.commit_log_offset)


def unrecovered_data(store: MessageStore) -> int | None:
    """The recovered end of the commit log when data follows it on disk, else None.

    Recovery stops at the first record it cannot read (CRC, length); what lies
    behind is invisible to every reader and a broker would overwrite it.
    """
    cl = store.commit_log
    size = cl.file_size
    last = cl.mapped_file_queue.last()
    next_start = 0
    if last is not None:
        pos = last.read_position()
        if pos + 8 <= size and last.mm[pos : pos + 8] != bytes(8):
            return cl.get_max_offset()
        next_start = last.file_from_offset + size
    path = store.config.commit_log_path
    for p in sorted(path.iterdir()) if path.is_dir() else []:
        if p.is_file() and p.name.isdigit() and int(p.name) >= next_start:
            with open(p, "rb") as f:
                if f.read(8).strip(b"\0"):
                    return cl.get_max_offset()
    return None


def readable_end(config: MessageStoreConfig) -> int | None:
    """For a store left by a crash (``abort`` present, no broker holding its ``lock``), the commit-log offset
    where recovery ends the log: data on disk past it (a record torn by the crash) is what a broker would
    truncate. None otherwise: after a clean shutdown the files are read as they are (damage is an error), and a
    running broker's log is whole up to its end. Worked out once per state of the files (a streaming read asks
    at every batch)."""
    root = config.root
    if not (root / "abort").exists() or StoreLock(root).held_elsewhere():
        return None
    files = sorted(config.commit_log_path.iterdir()) if config.commit_log_path.is_dir() else []
    key = (str(root.resolve()), tuple((f.name, *_stamp(f)) for f in files if f.name.isdigit()))
    with _ENDS_GUARD:
        end = _ENDS.get(key)
    if end is None:
        store = ReadOnlyStore(config)
        try:
            store.load()
            end = store.commit_log.get_max_offset()
        finally:
            store.close()
        with _ENDS_GUARD:
            if len(_ENDS) >= 16:
                _ENDS.pop(next(iter(_ENDS)))
            _ENDS[key] = end
    return end


#: Recovered ends by (store root, the commit-log files' names, sizes and modification times).
_ENDS: dict[tuple[str, tuple[tuple[str, int, int], ...]], int] = {}
_ENDS_GUARD = threading.Lock()


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns
