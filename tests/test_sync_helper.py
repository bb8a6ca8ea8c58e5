"""The SYNC_FLUSH helper process (``rocketq.store.sync_helper``) and the group commit rounds it runs for an
event loop: puts acknowledged only once their bytes are synced, failures and timeouts as FLUSH_DISK_TIMEOUT,
a helper that dies handing its waiters to the service thread, one helper per live loop."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rocketq.common.message import Message
from rocketq.store.commit_log import PutMessageStatus
from rocketq.store.flush_service import GroupCommitService
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import SYNC_FLUSH, MessageStoreConfig
from rocketq.store.sync_helper import SyncHelper


def sync_store(root: Path, **kw: Any) -> MessageStore:
    cfg = MessageStoreConfig(store_path_root_dir=str(root), flush_disk_type=SYNC_FLUSH,
                             mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=100 * 20,
                             max_hash_slot_num=100, max_index_num=400, **kw)  # fmt: skip
    return MessageStore(cfg)


def group_commit(store: MessageStore) -> GroupCommitService:
    gc = store.services.group_commit if store.services is not None else None
    assert gc is not None
    return gc


def gone(pid: int, within: float = 10.0) -> bool:
    """Whether process *pid* has ended (and been reaped) within *within* seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def test_the_helper_syncs_the_files_it_is_sent_and_reports_failures(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"x" * 4096)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        reports = asyncio.Queue[None]()
        helper = SyncHelper(loop, lambda: reports.put_nowait(None))
        try:
            assert helper.request(os.fsencode(target)) == 1
            await asyncio.wait_for(reports.get(), 10)
            assert helper.done() == 1 and helper.failed() == (0, 0)
            assert helper.request(os.fsencode(tmp_path / "missing")) == 2
            await asyncio.wait_for(reports.get(), 10)
            assert helper.done() == 2 and helper.failed() == (2, errno.ENOENT)
            assert helper.request(os.fsencode(target)) == 3  # a failure does not stop it
            await asyncio.wait_for(reports.get(), 10)
            assert helper.done() == 3 and helper.failed()[0] == 2
        finally:
            helper.close()
        assert gone(helper.pid)
        with pytest.raises(OSError):
            helper.request(os.fsencode(target))

    asyncio.run(scenario())


def test_asyncio_puts_ride_the_helpers_rounds(tmp_path: Path) -> None:
    """Tasks of one loop: every put returns PUT_OK only once the commit log is synced past it, rounds are
    shared across files rolled, the checkpoint follows, and the helper ends with the store."""
    ends: list[int] = []

    async def writer(w: int) -> None:
        for i in range(40):
            r = await store.aput_message(Message("Aio", f"{w}-{i}".encode() * 40, 0, {"KEYS": f"k{w}-{i}"}), w % 4)
            assert r.ok, r
            end = r.wrote_offset + r.wrote_bytes
            assert store.get_flushed_offset() >= end  # on disk before it was acknowledged
            ends.append(end)

    async def scenario() -> int:
        await asyncio.gather(*(writer(w) for w in range(32)))
        assert gc._helper is not None
        return gc._helper.pid

    with sync_store(tmp_path / "s") as store:
        gc = group_commit(store)
        pid = asyncio.run(scenario())
        assert len(ends) == 32 * 40 and max(ends) > 4 * 64 * 1024  # several files
        assert gc.requests_done >= len(ends) - gc.flush_rounds and gc.flush_rounds < len(ends) / 2
        assert store.checkpoint is not None and store.checkpoint.physic_msg_timestamp > 0
        cl = store.commit_log.mapped_file_queue
        assert all(mf.flushed_position == mf.read_position() for mf in cl.files)
    assert gone(pid)


def test_a_helper_that_dies_hands_its_waiters_to_the_thread(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(store: MessageStore) -> None:
        gc = group_commit(store)
        assert (await store.aput_message(Message("Aio", b"first", 0, {}), 0)).ok
        assert gc._helper is not None
        pid = gc._helper.pid
        os.kill(pid, signal.SIGSTOP)  # the puts below wait on its rounds
        puts = [asyncio.create_task(store.aput_message(Message("Aio", b"w" * 300, 0, {}), i % 2))
                for i in range(20)]  # fmt: skip
        await asyncio.sleep(0.2)
        assert not any(p.done() for p in puts)
        os.kill(pid, signal.SIGKILL)
        results = await asyncio.wait_for(asyncio.gather(*puts), 10)
        assert all(r.ok for r in results)
        assert store.get_flushed_offset() >= max(r.wrote_offset + r.wrote_bytes for r in results)
        assert gc._helper is None and gc._helper_off
        assert (await store.aput_message(Message("Aio", b"after", 0, {}), 0)).ok  # the thread's rounds now

    with sync_store(tmp_path / "s") as store, caplog.at_level(logging.WARNING, logger="rocketq.store.flush_service"):
        asyncio.run(scenario(store))
    assert "went away" in caplog.text


def test_a_failed_sync_is_flush_disk_timeout_and_synced_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    real_request = SyncHelper.request

    def failing(self: SyncHelper, path: bytes) -> int:
        return real_request(self, path + b".missing")  # the helper cannot open it: ENOENT

    async def scenario(store: MessageStore) -> None:
        monkeypatch.setattr(SyncHelper, "request", failing)
        r = await store.aput_message(Message("Aio", b"lost?", 0, {}), 0)
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert store.get_flushed_offset() < r.wrote_offset + r.wrote_bytes
        monkeypatch.setattr(SyncHelper, "request", real_request)
        again = await store.aput_message(Message("Aio", b"next", 0, {}), 0)
        assert again.ok
        assert store.get_flushed_offset() >= r.wrote_offset + r.wrote_bytes  # covered by the next round

    with sync_store(tmp_path / "s") as store, caplog.at_level(logging.ERROR, logger="rocketq.store.flush_service"):
        asyncio.run(scenario(store))
    assert "flushing the commit log failed" in caplog.text


def test_one_helper_per_live_loop_and_blocking_puts_alongside(tmp_path: Path) -> None:
    """A second loop running while the first has the helper waits on the service thread's rounds; a loop
    that comes after the first has ended gets a helper of its own; blocking puts go on meanwhile."""
    first_running = threading.Event()
    release_first = threading.Event()
    pids: list[int] = []

    async def first() -> None:
        assert (await store.aput_message(Message("A", b"1", 0, {}), 0)).ok
        assert gc._helper is not None
        pids.append(gc._helper.pid)
        first_running.set()
        while not release_first.is_set():
            assert (await store.aput_message(Message("A", b"x" * 100, 0, {}), 1)).ok
        assert gc._helper is not None and gc._helper.pid == pids[0]

    async def second() -> None:
        results = await asyncio.gather(*(store.aput_message(Message("B", b"y" * 100, 0, {}), i % 2)
                                         for i in range(50)))  # fmt: skip
        assert all(r.ok for r in results)
        assert gc._helper is not None and gc._helper.loop is not asyncio.get_running_loop()

    async def third() -> None:
        assert (await store.aput_message(Message("D", b"3", 0, {}), 0)).ok
        assert gc._helper is not None
        pids.append(gc._helper.pid)

    with sync_store(tmp_path / "s") as store:
        gc = group_commit(store)
        thread = threading.Thread(target=asyncio.run, args=(first(),))
        thread.start()
        try:
            assert first_running.wait(10)
            asyncio.run(second())
            assert all(store.put_message(Message("C", b"z", 0, {}), 0).ok for _ in range(20))
        finally:
            release_first.set()
            thread.join(10)
        assert not thread.is_alive()
        asyncio.run(third())
        assert pids[1] != pids[0] and gone(pids[0])
    assert gone(pids[-1])


def test_without_the_helper_the_thread_flushes(tmp_path: Path) -> None:
    async def scenario(store: MessageStore) -> None:
        results = await asyncio.gather(*(store.aput_message(Message("T", b"t", 0, {}), 0) for _ in range(30)))
        assert all(r.ok for r in results)

    with sync_store(tmp_path / "s", sync_flush_helper_enable=False) as store:
        asyncio.run(scenario(store))
        assert group_commit(store)._helper is None
