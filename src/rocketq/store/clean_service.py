"""Retention and disk-space watch: RocketMQ's ``CleanCommitLogService`` and ``CleanConsumeQueueService``.

Mirrors the two inner services of ``store/DefaultMessageStore.java`` and the
schedule that runs them (store-format §12, §13):

- every ``cleanResourceInterval`` ms (first after 60 s) the commit log's
  oldest files are deleted — never the last one, oldest first, stopping at the
  first file that must stay, at most ``deleteFileBatchMax`` per round,
  ``deleteCommitLogFilesInterval`` ms apart — when (a) the local hour is one of
  ``deleteWhen`` (``"04"``, or several as ``"03;04"``), (b) the disk holding
  the commit log or the consume queues is more than ``diskMaxUsedSpaceRatio``
  % used, or (c) an admin asked (20 rounds). A file goes when its modification
  time + ``fileReservedTime`` hours has passed, or at once ("forcibly") when
  usage is above ``diskSpaceCleanForciblyRatio`` and ``cleanFileForciblyEnable``;
- then, if the commit log's minimum offset moved, consume-queue files whose
  last unit points below it and index files ending below it are deleted, and
  queue minimum offsets recomputed;
- every 10 s (first after 1 s) the disk usage of the commit-log partition is
  checked: above ``diskSpaceWarningLevelRatio`` the store is marked disk-full
  (:class:`~rocketq.store.running_flags.RunningFlags`) and puts are refused with
  ``SERVICE_NOT_AVAILABLE`` until usage drops again.

The two disk ratios are the config's percentages, clamped to 35–90 % and 30–85 % as
5.x clamps them; as in 4.9, an environment entry named like 4.9's system property —
``rocketmq.broker.diskSpaceWarningLevelRatio`` / ``rocketmq.broker.diskSpaceCleanForciblyRatio``,
a fraction such as ``0.95`` — overrides them unclamped (read once, when the store starts), for a
host whose disk is fuller than the defaults allow.

``disk_usage`` (path → used fraction) and ``hour_now`` are attributes so that
tests can stand in a small, full or size-capped disk.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocketq.store.message_store import MessageStore

log = logging.getLogger(__name__)
MAX_MANUAL_DELETE_FILE_TIMES = 20
WARNING_LEVEL_PROPERTY = "rocketmq.broker.diskSpaceWarningLevelRatio"
CLEAN_FORCIBLY_PROPERTY = "rocketmq.broker.diskSpaceCleanForciblyRatio"


def ratio_property(name: str) -> float | None:
    """A 4.9 system-property ratio from the environment entry *name*; None when unset or not a number in 0–1."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        log.warning("ignoring %s=%r: not a fraction between 0 and 1", name, raw)
        return None
    return value


def disk_partition_used_ratio(path: str | os.PathLike[str]) -> float:
    """``UtilAll.getDiskPartitionSpaceUsedPercent``: used / (used + usable), rounded up to 1 %; -1 on error."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return -1.0
    used = total - st.f_bfree * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if entire <= 0:
        return -1.0
    pct = used * 100 // entire + (1 if used * 100 % entire else 0)
    return pct / 100.0


def measured_store_path(path: Path, root: Path) -> Path:
    """Where a store path's partition is measured: the path, or the store's root while the path is not made yet
    (``commitlog`` before the first put; Java makes its paths at start): the same partition, where the path itself
    would measure -1."""
    return path if path.exists() else root


def store_path_used_ratio(path: Path, root: Path) -> float:
    """:func:`disk_partition_used_ratio` of a store path (see :func:`measured_store_path`)."""
    return disk_partition_used_ratio(measured_store_path(path, root))


def is_it_time_to_do(when: str, hour: int) -> bool:
    """``UtilAll.isItTimeToDo``: is *hour* one of the ``;``-separated hours in *when*?"""
    for item in when.split(";"):
        item = item.strip()
        if item.isdigit() and int(item) == hour:
            return True
    return False


class CleanCommitLogService:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.clean_immediately = False
        self.manual_delete_file_several_times = 0
        self.disk_usage: Callable[[Path], float] = disk_partition_used_ratio
        self.hour_now: Callable[[], int] = lambda: datetime.now().hour
        self.deleted_files = 0
        self._warning_override = ratio_property(WARNING_LEVEL_PROPERTY)
        self._forcibly_override = ratio_property(CLEAN_FORCIBLY_PROPERTY)

    # --- thresholds (5.x: config percentages, clamped as Java clamps them; 4.9: the property) --
    def disk_space_warning_level_ratio(self) -> float:
        if self._warning_override is not None:
            return self._warning_override
        return min(0.90, max(0.35, self.store.config.disk_space_warning_level_ratio / 100.0))

    def disk_space_clean_forcibly_ratio(self) -> float:
        if self._forcibly_override is not None:
            return self._forcibly_override
        return min(0.85, max(0.30, self.store.config.disk_space_clean_forcibly_ratio / 100.0))

    def execute_delete_files_manually(self) -> None:
        self.manual_delete_file_several_times = MAX_MANUAL_DELETE_FILE_TIMES

    # --- one round ----------------------------------------------------------------------------
    def run(self) -> int:
        try:
            return self.delete_expired_files()
        except Exception:  # pragma: no cover - logged, the next round tries again
            log.exception("cleaning the commit log failed")
            return 0

    def delete_expired_files(self) -> int:
        cfg = self.store.config
        time_up = is_it_time_to_do(cfg.delete_when, self.hour_now())
        space = self.is_space_to_delete()
        manual = self.manual_delete_file_several_times > 0
        if not (time_up or space or manual):
            return 0
        if manual:
            self.manual_delete_file_several_times -= 1
        clean_at_once = cfg.clean_file_forcibly_enable and self.clean_immediately
        log.info("deleting commit-log files older than %d h (time up: %s, space: %s, manual: %s, forcibly: %s)",
                 cfg.file_reserved_time, time_up, space, manual, clean_at_once)  # fmt: skip
        count = self.store.commit_log.mapped_file_queue.delete_expired_file_by_time(
            cfg.file_reserved_time * 3_600_000, cfg.delete_commit_log_files_interval, clean_at_once,
            cfg.delete_file_batch_max,
        )  # fmt: skip
        if count == 0 and space:
            log.warning("the disk will be full soon, but no commit-log file could be deleted")
        self.deleted_files += count
        return count

    def _check_partition(self, path: Path) -> tuple[float, bool]:
        """Usage of store path *path*'s partition (see :func:`measured_store_path`) and whether it crossed the
        warning level (flags updated)."""
        ratio = self.disk_usage(measured_store_path(path, self.store.config.root))
        flags = self.store.running_flags
        if ratio > self.disk_space_warning_level_ratio():
            if flags.get_and_make_disk_full():
                log.error("disk of %s is %.0f %% used: marked full, puts are refused", path, ratio * 100)
            self.clean_immediately = True
            return ratio, True
        if ratio > self.disk_space_clean_forcibly_ratio():
            self.clean_immediately = True
        elif not flags.get_and_make_disk_ok():
            log.info("disk of %s is %.0f %% used: space OK again, puts are accepted", path, ratio * 100)
        return ratio, False

    def is_space_to_delete(self) -> bool:
        """``isSpaceToDelete``: usage above ``diskMaxUsedSpaceRatio`` (and the disk-full flags updated)."""
        self.clean_immediately = False
        # MessageStoreConfig.getDiskMaxUsedSpaceRatio keeps the setting within 10 and 95 (%).
        limit = min(95, max(10, self.store.config.disk_max_used_space_ratio)) / 100.0
        cfg = self.store.config
        physic, full = self._check_partition(cfg.commit_log_path)
        if full:
            return True
        if physic < 0 or physic > limit:
            return True
        logics, full = self._check_partition(cfg.consume_queue_path)
        return full or logics < 0 or logics > limit

    def is_space_full(self) -> bool:
        """The periodic disk check: mark the store disk-full above the warning level, OK below it."""
        cfg = self.store.config
        _ratio, full = self._check_partition(cfg.commit_log_path)
        return full


class CleanConsumeQueueService:
    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.last_physical_min_offset = 0
        self.deleted_files = 0
        self.deleted_index_files = 0

    def run(self) -> int:
        try:
            return self.delete_expired_files()
        except Exception:  # pragma: no cover
            log.exception("cleaning consume queues failed")
            return 0

    def delete_expired_files(self, sleep: Callable[[float], object] = time.sleep) -> int:
        store = self.store
        min_offset = store.commit_log.get_min_offset()
        if min_offset <= self.last_physical_min_offset:
            return 0
        self.last_physical_min_offset = min_offset
        interval = store.config.delete_consume_queue_files_interval
        count = 0
        for cq in store.consume_queues():
            n = cq.delete_expired_file(min_offset)
            count += n
            if n and interval > 0:
                sleep(interval / 1000)
        self.deleted_files += count
        self.deleted_index_files += store.index_service.delete_expired_file(min_offset)
        return count


class CleanService:
    """The schedule: file cleaning every ``cleanResourceInterval`` and the disk check every 10 s."""

    clean_initial_delay_ms = 60_000
    disk_check_initial_delay_ms = 1_000
    disk_check_interval_ms = 10_000

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.commit_log_cleaner = CleanCommitLogService(store)
        self.consume_queue_cleaner = CleanConsumeQueueService(store)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="CleanService", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(30.0)

    def clean_files_periodically(self) -> None:
        """One cleaning round (``cleanFilesPeriodically``), then close mappings of files deleted earlier."""
        self.commit_log_cleaner.run()
        self.consume_queue_cleaner.run()
        self.store.commit_log.mapped_file_queue.reap_retired()
        for cq in self.store.consume_queues():
            cq.queue.reap_retired()

    def _run(self) -> None:
        start = time.monotonic()
        next_clean = start + self.clean_initial_delay_ms / 1000
        next_check = start + self.disk_check_initial_delay_ms / 1000
        while not self._stopped.is_set():
            now = time.monotonic()
            try:
                if now >= next_check:
                    next_check = now + self.disk_check_interval_ms / 1000
                    self.commit_log_cleaner.is_space_full()
                if now >= next_clean:
                    next_clean = now + self.store.config.clean_resource_interval / 1000
                    self.clean_files_periodically()
            except Exception:  # pragma: no cover
                log.exception("clean service round failed")
            self._stopped.wait(max(0.0, min(next_clean, next_check) - time.monotonic()))
