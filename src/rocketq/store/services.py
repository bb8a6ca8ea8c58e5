"""The background services of a running store, started and stopped in RocketMQ's order.

``DefaultMessageStore.start`` / ``shutdown`` (store-format §11.1, §12): after
recovery and dispatch have caught up, a writable store runs

- the allocation service (:mod:`~rocketq.store.allocate_mapped_file_service`)
  as the commit log's ``MappedFileQueue.allocator``, with a transient store
  pool when ``transientStorePoolEnable`` (ASYNC_FLUSH only, as in RocketMQ);
- the commit service (pool only), then the commit-log flush service: group
  commit for SYNC_FLUSH, interval flush for ASYNC_FLUSH
  (:mod:`~rocketq.store.flush_service`);
- the consume-queue flush service, which also persists the checkpoint;
- the clean service (:mod:`~rocketq.store.clean_service`).

Shutdown runs the other way round in two steps: :meth:`StoreServices.shutdown_intake`
(cleaning stops, every write buffer is committed, so dispatch can catch up with
all of it), then, after dispatch has stopped, :meth:`StoreServices.shutdown`
(final flushes; files made ahead are deleted).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketq.store.allocate_mapped_file_service import AllocateMappedFileService
from rocketq.store.clean_service import CleanService
from rocketq.store.flush_service import (
    CommitRealTimeService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitService,
)
from rocketq.store.store_config import ASYNC_FLUSH, SYNC_FLUSH
from rocketq.store.transient_store_pool import TransientStorePool

if TYPE_CHECKING:
    from rocketq.store.message_store import MessageStore

log = logging.getLogger(__name__)


def transient_store_pool_enabled(store: MessageStore) -> bool:
    """``MessageStoreConfig.isTransientStorePoolEnable``: the pool only with ASYNC_FLUSH on a master."""
    cfg = store.config
    return cfg.transient_store_pool_enable and cfg.flush_disk_type == ASYNC_FLUSH and cfg.broker_role != "SLAVE"


class StoreServices:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        cfg = store.config
        cl_queue = store.commit_log.mapped_file_queue
        assert store.checkpoint is not None
        self.pool: TransientStorePool | None = None
        if transient_store_pool_enabled(store):
            self.pool = TransientStorePool(cfg.transient_store_pool_size, cfg.mapped_file_size_commit_log)
            self.pool.reusable = self._readers_past
        self.allocate = AllocateMappedFileService(warm=cfg.warm_maped_file_enable, pool=self.pool)
        self.group_commit: GroupCommitService | None = None
        self.flush_real_time: FlushRealTimeService | None = None
        if cfg.flush_disk_type == SYNC_FLUSH:
            self.group_commit = GroupCommitService(cl_queue, store.checkpoint, use_helper=cfg.sync_flush_helper_enable)
        else:
            self.flush_real_time = FlushRealTimeService(cl_queue, cfg, store.checkpoint)
        self.commit: CommitRealTimeService | None = None
        if self.pool is not None:
            wake = [self._wake_flush, self._wake_reput]
            self.commit = CommitRealTimeService(cl_queue, cfg, wake)
        self.flush_consume_queue = FlushConsumeQueueService(store.consume_queues, cfg, store.checkpoint)
        self.clean = CleanService(store)
        self._started = False

    def _readers_past(self, end_offset: int) -> bool:
        reput = self.store.reput
        return reput is None or reput.reput_from_offset >= end_offset

    def _wake_flush(self) -> None:
        if self.flush_real_time is not None:
            self.flush_real_time.wakeup()

    def _wake_reput(self) -> None:
        reput = self.store.reput
        if reput is not None:
            reput.wakeup()

    def start(self) -> None:
        store = self.store
        cl_queue = store.commit_log.mapped_file_queue
        self.allocate.start()
        cl_queue.allocator = self.allocate
        last = cl_queue.last()
        if last is not None and not last.is_full():
            self.allocate.follow(last)
        cl_queue.committed_where = max(cl_queue.committed_where, cl_queue.get_max_wrote_position())
        if self.commit is not None:
            self.commit.start()
        if self.group_commit is not None:
            self.group_commit.start()
        if self.flush_real_time is not None:
            self.flush_real_time.start()
        self.flush_consume_queue.start()
        self.clean.start()
        self._started = True

    def shutdown_intake(self) -> None:
        """Stop cleaning and commit every write buffer (before dispatch is stopped)."""
        if not self._started:
            return
        self.clean.shutdown()
        if self.commit is not None:
            self.commit.shutdown()
            self.store.commit_log.mapped_file_queue.commit_all()

    def shutdown(self) -> None:
        """Final flushes, then the files made ahead are deleted (after dispatch has stopped)."""
        if not self._started:
            return
        self._started = False
        if self.group_commit is not None:
            self.group_commit.shutdown()
        if self.flush_real_time is not None:
            self.flush_real_time.shutdown()
        self.flush_consume_queue.shutdown()
        cl_queue = self.store.commit_log.mapped_file_queue
        self.allocate.shutdown()
        cl_queue.allocator = None

    def close_pool(self) -> None:
        """Unmap the pool's buffers (after the commit log's files are closed)."""
        if self.pool is not None:
            self.pool.destroy()
