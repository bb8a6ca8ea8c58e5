"""Durability: flush modes, crash recovery and retention, proven by breaking things on purpose.

In the manner of LevelDB's ``fault_injection_test`` / ``corruption_test`` and
OpenChaos' checkers (anchors §2.5):

- **kill -9**: a writer process (``durability_writer.py``) puts messages from
  several threads and logs each acknowledged put to a history file; it is
  killed with SIGKILL at a random moment, or kills itself at a chosen point
  (mid-append, at a file roll, between an fdatasync and the acknowledgement,
  in the middle of dispatch). The store is then reopened — abnormal recovery —
  and the history is checked: every acknowledged message present at its
  reported offsets, per-queue order, dense queue offsets, every unit pointing at
  a CRC-valid record, every acknowledged key found through the index.
- **power loss**: the same runs keep a shadow copy holding only what an
  fdatasync made durable (see ``durability_writer.py``). Under SYNC_FLUSH the
  checker must pass on it too; under ASYNC_FLUSH it must *fail* — acknowledged
  messages after the last flush are gone — which proves the checker can fail.
- **corruption**: torn tail, a flipped bit in the middle, a zeroed page, deleted
  consume-queue and index files: recovery keeps the longest valid prefix and
  rebuilds the rest.
- **disk full**: a size-capped store (its disk-usage probe reports the store's
  own bytes against a cap), and a real 4 MiB tmpfs when this machine lets the
  test mount one: puts are refused with a clear status, what was acknowledged
  stays readable.

Every run is bounded in count and time; fault schedules are printed with the verdicts.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import copy_store, load_json
from durability_writer import QUEUES, TOPIC, store_config
from rocketq.cli.main import main as cli_main
from rocketq.common.codec import decode_record
from rocketq.common.errors import CorruptRecordError, StoreError
from rocketq.common.message import Message
from rocketq.store import mapped_file
from rocketq.store.allocate_mapped_file_service import AllocateMappedFileService
from rocketq.store.checkpoint import StoreCheckpoint
from rocketq.store.clean_service import (
    CLEAN_FORCIBLY_PROPERTY,
    WARNING_LEVEL_PROPERTY,
    disk_partition_used_ratio,
    is_it_time_to_do,
)
from rocketq.store.commit_log import PutMessageStatus
from rocketq.store.message_store import GetMessageStatus, MessageStore, ReputMessageService
from rocketq.store.store_config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig, load_broker_conf
from rocketq.store.store_stats import PutGetTimes

WRITER = Path(__file__).with_name("durability_writer.py")
SMALL = dict(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=600, max_hash_slot_num=100,
             max_index_num=400)


def small_config(root: Path, **kw: Any) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(root), **{**SMALL, **kw})


# ============================================================================ history checker


@dataclass(frozen=True)
class Acked:
    tid: int
    seq: int
    queue: int
    queue_offset: int
    phys: int
    size: int

    @property
    def key(self) -> str:
        return f"id-{self.tid}-{self.seq}"


@dataclass
class Verdict:
    acked: int = 0
    lost: list[str] = field(default_factory=list)  # acknowledged, but not in the recovered store
    problems: list[str] = field(default_factory=list)  # anything else that is wrong
    recovered_offset: int = 0
    units: int = 0

    @property
    def ok(self) -> bool:
        return not self.lost and not self.problems

    def summary(self) -> str:
        return (f"{self.acked} acknowledged, {len(self.lost)} lost, {len(self.problems)} other problems, "
                f"{self.units} units, recovered to {self.recovered_offset}; "
                f"first: {(self.lost + self.problems)[:3]}")  # fmt: skip


def read_history(path: Path) -> list[Acked]:
    acked = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 6:  # a line is written with one write(); never torn, but be strict
            acked.append(Acked(*map(int, parts)))
    return acked


def body_id(body: bytes) -> tuple[int, int] | None:
    head = body.split(b":", 2)
    if len(head) < 3:
        return None
    try:
        return int(head[0]), int(head[1])
    except ValueError:
        return None


def check_store(root: Path, acked: list[Acked], flush: str) -> Verdict:
    """Reopen *root* (abnormal recovery: ``abort`` is there) and hold it against the history."""
    root.mkdir(parents=True, exist_ok=True)  # a shadow of a run killed before its first fdatasync is empty
    (root / "abort").touch()
    v = Verdict(acked=len(acked))
    with MessageStore(store_config(root, flush)) as store:
        assert store.wait_dispatched(30)
        v.recovered_offset = store.recovered_offset
        cl = store.commit_log
        seen: dict[tuple[int, int], tuple[int, int]] = {}
        for qid in range(QUEUES):
            cq = store.find_consume_queue(TOPIC, qid, create=False)
            if cq is None:
                continue
            lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            if lo != 0:
                v.problems.append(f"queue {qid}: min offset {lo}, expected 0")
            units = cq.read_units(lo, hi - lo)
            if len(units) != hi - lo:
                v.problems.append(f"queue {qid}: {len(units)} units readable between {lo} and {hi} (not dense)")
            for i, (phys, size, _tags) in enumerate(units.tolist()):
                offset = lo + i
                v.units += 1
                data = cl.get_message(phys, size)
                try:
                    msg = decode_record(data, check_crc=True) if data is not None else None
                except CorruptRecordError as e:
                    v.problems.append(f"queue {qid} offset {offset}: unit points at a bad record ({e})")
                    continue
                if msg is None:
                    v.problems.append(f"queue {qid} offset {offset}: no record at {phys} (size {size})")
                    continue
                if (msg.topic, msg.queue_id, msg.queue_offset, msg.commit_log_offset) != (TOPIC, qid, offset, phys):
                    v.problems.append(f"queue {qid} offset {offset}: record says {msg.topic}/{msg.queue_id}/"
                                      f"{msg.queue_offset} at {msg.commit_log_offset}")  # fmt: skip
                ident = body_id(msg.body)
                if ident is None:
                    v.problems.append(f"queue {qid} offset {offset}: a body the writer never wrote")
                elif ident in seen:
                    v.problems.append(f"message {ident} twice: {seen[ident]} and {(qid, offset)}")
                else:
                    seen[ident] = (qid, offset)
        per_thread_queue: dict[tuple[int, int], list[Acked]] = defaultdict(list)
        for a in acked:
            per_thread_queue[(a.tid, a.queue)].append(a)
            if a.phys + a.size > store.recovered_offset:
                v.lost.append(f"{a.key} at {a.phys} is past the recovered end {store.recovered_offset}")
                continue
            where = seen.get((a.tid, a.seq))
            if where != (a.queue, a.queue_offset):
                v.problems.append(f"{a.key}: acknowledged at queue {a.queue} offset {a.queue_offset}, found at {where}")
                continue
            msg = store.look_message_by_offset(a.phys)
            if msg is None or body_id(msg.body) != (a.tid, a.seq):
                v.problems.append(f"{a.key}: not at its acknowledged commit-log offset {a.phys}")
        for group in per_thread_queue.values():
            offsets = [a.queue_offset for a in sorted(group, key=lambda a: a.seq)]
            if offsets != sorted(set(offsets)):
                v.problems.append(f"thread/queue order broken: {offsets[:10]}")
        present = [a for a in acked if a.phys + a.size <= store.recovered_offset]
        for a in present[:: max(1, len(present) // 400)]:  # key lookups: a spread of up to ~400
            found = store.query_message(TOPIC, a.key, 4).messages
            if a.phys not in {m.commit_log_offset for m in found}:
                v.problems.append(f"{a.key}: key lookup does not find it")
    return v


# ============================================================================== the writer


@dataclass
class WriterRun:
    store: Path
    shadow: Path
    history: Path
    schedule: str
    stderr: str = ""

    def acked(self) -> list[Acked]:
        return read_history(self.history)


def run_writer(base: Path, flush: str, *, kill_after: float | None = None, kill_at: str | None = None,
               threads: int = 4, seconds: float = 4.0, seed: int = 0, tasks: bool = False) -> WriterRun:  # fmt: skip
    """Run the writer process until it is killed; *tasks*: asyncio tasks instead of threads."""
    base.mkdir(parents=True)
    when = f"kill-at={kill_at}" if kill_at else f"kill after {kill_after:.2f} s"
    kind = "tasks" if tasks else "threads"
    run = WriterRun(base / "store", base / "shadow", base / "history", f"{flush} {kind}={threads} {when}")
    argv = [sys.executable, str(WRITER), str(run.store), str(run.history), "--flush", flush, "--shadow",
            str(run.shadow), "--threads", str(threads), "--seconds", str(seconds), "--seed", str(seed)]
    if kill_at:
        argv += ["--kill-at", kill_at]
    if tasks:
        argv += ["--asyncio"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "writer did not start within 60 s"
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.strip() == "READY", (line, proc.stderr.read() if proc.stderr else "")
        if kill_after is not None:
            time.sleep(kill_after)
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=seconds + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    run.stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, run.stderr[-2000:])
    assert not run.stderr.strip() or "Traceback" not in run.stderr, run.stderr[-2000:]
    return run


RNG = random.Random(20240611)
KILL_TIMES = [round(RNG.uniform(0.3, 1.6), 2) for _ in range(5)]


@pytest.mark.parametrize(("kill_after", "tasks"), [*((t, False) for t in KILL_TIMES[:3]), (KILL_TIMES[2], True)])
def test_sync_flush_kill_and_power_loss_lose_nothing_acknowledged(tmp_path: Path, kill_after: float,
                                                                  tasks: bool) -> None:  # fmt: skip
    """SYNC_FLUSH, SIGKILL at a random moment: nothing acknowledged is lost, neither when the page
    cache survives (process crash) nor when only fdatasync'ed bytes do (power loss); writers as threads, or
    as asyncio tasks (the helper process's rounds)."""
    run = run_writer(tmp_path / "run", SYNC_FLUSH, kill_after=kill_after, seed=int(kill_after * 100), tasks=tasks,
                     threads=16 if tasks else 4)  # fmt: skip
    acked = run.acked()
    assert len(acked) > 20, (run.schedule, run.stderr[-500:])
    power = check_store(run.shadow, acked, SYNC_FLUSH)
    assert power.ok, f"{run.schedule}, power loss: {power.summary()}"
    crash = check_store(run.store, acked, SYNC_FLUSH)
    assert crash.ok, f"{run.schedule}, process crash: {crash.summary()}"
    assert crash.recovered_offset >= power.recovered_offset


@pytest.mark.parametrize(("kill_at", "tasks"), [("append:150", False), ("roll:6", False), ("flush:120", False),
                                               ("dispatch:40", False), ("flush:150", True), ("roll:8", True)])
def test_sync_flush_kill_at_dangerous_points(tmp_path: Path, kill_at: str, tasks: bool) -> None:
    """SYNC_FLUSH, the writer kills itself mid-append, at a file roll, between an fdatasync and the
    acknowledgement, in the middle of dispatch: the checker passes after a crash and after a power loss.
    Writers that are asyncio tasks have their rounds flushed by the helper process."""
    run = run_writer(tmp_path / "run", SYNC_FLUSH, kill_at=kill_at, seconds=6.0, tasks=tasks, threads=8 if tasks else 4)
    acked = run.acked()
    assert acked, run.schedule
    power = check_store(run.shadow, acked, SYNC_FLUSH)
    assert power.ok, f"{run.schedule}, power loss: {power.summary()}"
    crash = check_store(run.store, acked, SYNC_FLUSH)
    assert crash.ok, f"{run.schedule}, process crash: {crash.summary()}"


@pytest.mark.parametrize(("kill_after", "kill_at"), [(KILL_TIMES[3], None), (KILL_TIMES[4], None), (None, "roll:12")])
def test_async_flush_process_crash_loses_nothing_but_power_loss_does(tmp_path: Path, kill_after: float | None,
                                                                     kill_at: str | None) -> None:  # fmt: skip
    """ASYNC_FLUSH: after SIGKILL the page cache still holds every acknowledged message, so the
    checker passes; with simulated power loss the unflushed tail is gone and the checker FAILS —
    the negative control (anchors §2.5.6). Recovery still yields a consistent store: the only
    problems are acknowledged messages past the recovered end."""
    run = run_writer(tmp_path / "run", ASYNC_FLUSH, kill_after=kill_after, kill_at=kill_at, seconds=6.0)
    acked = run.acked()
    assert len(acked) > 20, run.schedule
    crash = check_store(run.store, acked, ASYNC_FLUSH)
    assert crash.ok, f"{run.schedule}, process crash: {crash.summary()}"
    power = check_store(run.shadow, acked, ASYNC_FLUSH)
    assert not power.ok and power.lost, f"{run.schedule}: the power-loss run lost nothing ({power.summary()})"
    assert not power.problems, f"{run.schedule}: {power.summary()}"
    assert power.recovered_offset < crash.recovered_offset


# =============================================================================== corruption


def _fill(root: Path, n: int = 120, size: int = 700, **kw: Any) -> list[Any]:
    """A closed, cleanly shut down store with *n* messages over several files and queues."""
    with MessageStore(small_config(root, **kw)) as store:
        results = [store.put_message(Message("Cor", bytes([i % 251]) * size, 0, {"KEYS": f"c{i}"}), i % 3)
                   for i in range(n)]  # fmt: skip
        assert all(r.ok for r in results)
        assert store.wait_dispatched()
    return results


def _consistent(store: MessageStore, expect: int) -> None:
    """Queues dense from 0, every unit a CRC-valid record of its queue, keys found, *expect* messages."""
    total = 0
    for qid in range(3):
        cq = store.find_consume_queue("Cor", qid, create=False)
        assert cq is not None and cq.get_min_offset_in_queue() == 0
        hi = cq.get_max_offset_in_queue()
        units = cq.read_units(0, hi).tolist()
        assert len(units) == hi
        for i, (phys, size, _t) in enumerate(units):
            msg = decode_record(store.commit_log.get_message(phys, size), check_crc=True)
            assert (msg.queue_id, msg.queue_offset, msg.commit_log_offset) == (qid, i, phys)
            assert store.query_message("Cor", msg.properties["KEYS"], 4).messages[0].commit_log_offset == phys
        total += hi
    assert total == expect


@pytest.mark.parametrize("abort", [False, True], ids=["normal", "abnormal"])
def test_torn_tail_keeps_every_whole_record(tmp_path: Path, abort: bool) -> None:
    results = _fill(tmp_path / "s")
    last = results[-1]
    f = tmp_path / "s" / "commitlog" / f"{last.wrote_offset // (64 * 1024) * 64 * 1024:020d}"
    with open(f, "r+b") as fh:  # the last record half written: its second half never reached the disk
        fh.seek(last.wrote_offset % (64 * 1024) + last.wrote_bytes // 2)
        fh.write(bytes(last.wrote_bytes - last.wrote_bytes // 2))
    if abort:
        (tmp_path / "s" / "abort").touch()
    with MessageStore(small_config(tmp_path / "s")) as store:
        rep = store.recovery_report
        assert rep.mode == ("abnormal" if abort else "normal")
        assert store.recovered_offset == last.wrote_offset and "CRC" in rep.stop_reason
        assert rep.commit_log_bytes_cleared > 0 and rep.consume_queue_units_truncated == 1
        _consistent(store, len(results) - 1)
        r = store.put_message(Message("Cor", b"again", 0, {"KEYS": "again"}), last.logics_offset and 2)
        assert r.wrote_offset == last.wrote_offset


def test_flipped_bit_in_the_middle_keeps_the_longest_valid_prefix(tmp_path: Path) -> None:
    results = _fill(tmp_path / "s", n=200)
    victim = results[120]  # in the third-last file or later, where both recoveries scan
    files = sorted((tmp_path / "s" / "commitlog").iterdir())
    name = f"{victim.wrote_offset // (64 * 1024) * 64 * 1024:020d}"
    assert name in [p.name for p in files[-3:]]
    with open(tmp_path / "s" / "commitlog" / name, "r+b") as fh:
        fh.seek(victim.wrote_offset % (64 * 1024) + victim.wrote_bytes - 200)  # a body byte
        b = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([b[0] ^ 0x10]))
    (tmp_path / "s" / "abort").touch()
    with MessageStore(small_config(tmp_path / "s")) as store:
        assert store.recovered_offset == victim.wrote_offset
        rep = store.recovery_report
        assert "CRC" in rep.stop_reason and rep.commit_log_files_deleted  # the files after it are gone
        assert not (tmp_path / "s" / "commitlog" / files[-1].name).exists() or files[-1].name == name
        _consistent(store, 120)
        assert store.query_message("Cor", "c150", 4).messages == []


class _Killed(Exception):
    """The process "dies" here."""


class _DieAfterCopy:
    """A mapping that takes the first slice assignment, then kills the put that made it (a SIGKILL right after
    the record's bytes reached the page cache, before the put returned)."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def __setitem__(self, key: slice, value: bytes) -> None:
        self.real[key] = value
        raise _Killed

    def __getitem__(self, key: Any) -> Any:
        return self.real[key]

    def __len__(self) -> int:
        return len(self.real)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
def test_a_record_is_whole_when_its_bytes_reach_the_file(tmp_path: Path, batch: bool) -> None:
    """Killed right after a put copied its record into the mapped file, the process leaves a record that already
    says its queue offset, physical offset and store time: what recovery after a crash reads is what it is (a
    record that said offset 0 at offset 0 once came back as a stray unit in a kill test)."""
    with MessageStore(small_config(tmp_path / "s")) as store:
        for i in range(3):
            assert store.put_message(Message("Torn", b"before %d" % i, 0, {}), 1).ok
        mf = store.commit_log.mapped_file_queue.files[-1]
        real, pos = mf.mm, mf.wrote_position
        mf.mm = _DieAfterCopy(real)
        try:
            with pytest.raises(_Killed):
                if batch:
                    store.put_messages([Message("Torn", b"batch %d" % i, 0, {}) for i in range(2)], 1)
                else:
                    store.put_message(Message("Torn", b"torn", 0, {}), 1)
        finally:
            mf.mm = real
        assert mf.wrote_position == pos  # the put never finished
        torn = decode_record(real, pos, check_crc=True)
        assert (torn.queue_id, torn.queue_offset, torn.commit_log_offset) == (1, 3, mf.file_from_offset + pos)
        assert torn.store_timestamp >= store.commit_log.mapped_file_queue.files[0].store_timestamp > 0


@pytest.mark.parametrize("abort", [False, True], ids=["normal", "abnormal"])
def test_an_eight_byte_blank_at_the_end_of_a_file_is_read_over(tmp_path: Path, abort: bool) -> None:
    """A record that leaves exactly 8 bytes ends its file with the smallest BLANK (found by the kill tests)."""
    with MessageStore(small_config(tmp_path / "s")) as store:
        first = store.put_message(Message("Fit", bytes(100), 0, {}), 0)
        overhead = first.wrote_bytes - 100
        fits = store.put_message(Message("Fit", bytes(64 * 1024 - first.wrote_bytes - 8 - overhead), 0, {}), 0)
        assert fits.wrote_offset + fits.wrote_bytes == 64 * 1024 - 8
        after = store.put_message(Message("Fit", b"next file", 0, {}), 0)
        assert after.wrote_offset == 64 * 1024
    if abort:
        (tmp_path / "s" / "abort").touch()
    with MessageStore(small_config(tmp_path / "s")) as store:
        assert store.recovered_offset == after.wrote_offset + after.wrote_bytes
        assert store.get_max_offset_in_queue("Fit", 0) == 3


@pytest.mark.parametrize("abort", [False, True], ids=["normal", "abnormal"])
def test_a_log_whose_last_file_ends_in_a_blank_ends_at_the_blank(tmp_path: Path, abort: bool) -> None:
    """The last file ends in a BLANK and no file follows (its successor was lost, or never written): the log ends
    at the BLANK, as 4.9.4's recovery ends it, so a message that fits before the file's end goes there (4.9.4's
    offset, and offset message id) and a bigger one writes a BLANK there again and starts the next file."""
    with MessageStore(small_config(tmp_path / "s")) as store:
        first = store.put_message(Message("Fit", bytes(100), 0, {}), 0)
        big = store.put_message(Message("Fit", bytes(64 * 1024 - 2 * first.wrote_bytes - 200), 0, {}), 0)
        blank_at = big.wrote_offset + big.wrote_bytes
        after = store.put_message(Message("Fit", bytes(500), 0, {}), 0)  # does not fit: a BLANK, the next file
        assert after.wrote_offset == 64 * 1024
    (tmp_path / "s" / "commitlog" / f"{64 * 1024:020d}").unlink()
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    if abort:
        (tmp_path / "s" / "abort").touch()
    with MessageStore(small_config(tmp_path / "s")) as store:
        assert store.get_max_phy_offset() == blank_at
        small = store.put_message(Message("Fit", bytes(100), 0, {}), 0)
        assert (small.wrote_offset, small.logics_offset) == (blank_at, 2)
        again = store.put_message(Message("Fit", bytes(500), 0, {}), 0)
        assert again.wrote_offset == 64 * 1024
        assert store.wait_dispatched() and store.get_max_offset_in_queue("Fit", 0) == 4


def test_a_commit_log_file_missing_behind_the_consume_queues_is_named_not_waited_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Consume queues to rebuild and a commit-log file gone from the middle: dispatch cannot get past the gap
    (4.9.4's start waits for it for ever); the store refuses to start and says which file is missing, at once."""
    results = _fill(tmp_path / "s", n=300)
    root = tmp_path / "s"
    files = sorted((root / "commitlog").iterdir())
    assert len(files) >= 3
    files[1].unlink()
    shutil.rmtree(root / "consumequeue")
    t0 = time.monotonic()
    with pytest.raises(StoreError, match=f"file {files[1].name} is missing"):
        MessageStore.open(config=small_config(root))
    assert time.monotonic() - t0 < 30
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=600\nmaxHashSlotNum=100\n"
                    "maxIndexNum=400\n")  # fmt: skip
    code = cli_main(["store", "recover", str(root), "-c", str(conf)])
    err = capsys.readouterr().err
    assert code == 1 and files[1].name in err and "Traceback" not in err
    assert results  # (the store is left as it was: the files after the gap are the user's to move)
    assert files[2].exists()


def test_recover_refuses_a_commit_log_with_no_files_while_the_queues_hold_units(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """storePathCommitLog pointing at an empty directory (its disk not mounted): recovery would delete every
    consume queue, as RocketMQ's does. ``store recover`` refuses and says why; with --force it goes on and its
    report says what it deleted."""
    _fill(tmp_path / "s", n=60)
    root = tmp_path / "s"
    (tmp_path / "elsewhere").mkdir()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=600\nmaxHashSlotNum=100\n"
                    f"maxIndexNum=400\nstorePathCommitLog={tmp_path / 'elsewhere'}\n")  # fmt: skip
    before = sorted(p.name for p in (root / "consumequeue").rglob("*") if p.is_file())
    assert cli_main(["store", "recover", str(root), "-c", str(conf)]) == 1
    err = capsys.readouterr().err
    assert "holds no commit-log file" in err and "60 units" in err and "--force" in err
    assert sorted(p.name for p in (root / "consumequeue").rglob("*") if p.is_file()) == before
    assert cli_main(["store", "recover", str(root), "-c", str(conf), "--force"]) == 0
    out = capsys.readouterr().out
    assert "all 3 deleted (60 units): the commit log has no files" in out


def test_files_left_empty_by_a_crash_are_dropped(tmp_path: Path) -> None:
    """A crash between creating a file and sizing it leaves 0 bytes: commit log, consume queue, index."""
    results = _fill(tmp_path / "s", n=60)
    root = tmp_path / "s"
    (root / "commitlog" / f"{(results[-1].wrote_offset // (64 * 1024) + 2) * 64 * 1024:020d}").touch()
    last_cq = sorted((root / "consumequeue" / "Cor" / "0").iterdir())[-1]
    (last_cq.parent / f"{int(last_cq.name) + 600:020d}").touch()
    (root / "index" / "99991231235959999").touch()
    (root / "abort").touch()
    empty_log = root / "commitlog" / f"{(results[-1].wrote_offset // (64 * 1024) + 2) * 64 * 1024:020d}"
    with MessageStore(small_config(root)) as store:
        _consistent(store, 60)
        assert store.recovery_report.commit_log_files_deleted == [empty_log.name]  # said (4.9.4 refuses it)
    assert not (root / "index" / "99991231235959999").exists() and not empty_log.exists()


@pytest.mark.parametrize("preallocate", [False, True])
def test_a_new_store_file_is_whole_from_the_moment_it_has_a_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 preallocate: bool) -> None:  # fmt: skip
    """rocketq makes its files unnamed, sizes them, then links them in: a process killed meanwhile leaves nothing,
    never the empty file of the test above, which RocketMQ's loader refuses (a store a killed writer left failed to
    load in RocketMQ 4.9.4 for a consume queue's next file of 0 bytes). Where that cannot be done (no
    ``O_TMPFILE``), files are made in two steps as before."""
    path = tmp_path / "q" / mapped_file.offset_to_file_name(600)
    path.parent.mkdir()
    named_while_sized: list[bool] = []
    ftruncate = os.ftruncate

    def spy(fd: int, size: int) -> None:
        named_while_sized.append(path.exists())
        ftruncate(fd, size)

    monkeypatch.setattr(os, "ftruncate", spy)
    mf = mapped_file.MappedFile(path, 600, create=True, preallocate=preallocate)
    try:
        assert named_while_sized == [False]
        assert path.stat().st_size == 600 and mf.reserved_to == (600 if preallocate else 0)
        mf.append(b"kept")
    finally:
        mf.close()
    assert list(path.parent.iterdir()) == [path]
    again = mapped_file.MappedFile(path, 600, create=True)  # an existing file is opened, not made again
    try:
        assert again.read_through(0, 4) == b"kept"
    finally:
        again.close()
    monkeypatch.delattr(os, "O_TMPFILE")
    named_while_sized.clear()
    other = path.with_name(mapped_file.offset_to_file_name(1200))
    mapped_file.MappedFile(other, 600, create=True, preallocate=preallocate).close()
    assert named_while_sized == [True] and other.stat().st_size == 600


def test_zeroed_page_ends_the_valid_data(tmp_path: Path) -> None:
    results = _fill(tmp_path / "s", n=60)
    last_file = max(r.wrote_offset for r in results) // (64 * 1024) * 64 * 1024
    in_last = [r for r in results if r.wrote_offset >= last_file]
    page = (in_last[len(in_last) // 2].wrote_offset - last_file) // 4096 * 4096
    with open(tmp_path / "s" / "commitlog" / f"{last_file:020d}", "r+b") as fh:
        fh.seek(page)
        fh.write(bytes(4096))
    (tmp_path / "s" / "abort").touch()
    with MessageStore(small_config(tmp_path / "s")) as store:
        cut = store.recovered_offset
        first_hit = min(r.wrote_offset for r in in_last if r.wrote_offset + r.wrote_bytes > last_file + page)
        assert cut == first_hit
        _consistent(store, sum(1 for r in results if r.wrote_offset < cut))
    # The stale records after the zeroed page are cleared too: the search for them does not end at that page.
    data = (tmp_path / "s" / "commitlog" / f"{last_file:020d}").read_bytes()
    assert data[cut - last_file :].count(0) == len(data) - (cut - last_file)


def test_dispatch_skips_an_unreadable_record_to_the_end_of_its_file_as_a_master_does(tmp_path: Path) -> None:
    """Consume queues deleted (to have them rebuilt) and the BLANK at the end of the second commit-log file zeroed:
    normal recovery CRC-checks only the last files, so dispatch meets the damage. As 4.9.4's doReput on a master, it
    goes on from the end of that file's data: every message is served (it stopped there for good, and start() waited
    an hour for it)."""
    results = _fill(tmp_path / "s", n=600, size=750)
    file_size = 64 * 1024
    second = [r for r in results if r.wrote_offset // file_size == 1]
    blank = max(r.wrote_offset + r.wrote_bytes for r in second)
    assert blank % file_size <= file_size - 8  # a BLANK record ends that file
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    with open(tmp_path / "s" / "commitlog" / f"{file_size:020d}", "r+b") as fh:
        fh.seek(blank % file_size)
        fh.write(bytes(8))
    store = MessageStore(small_config(tmp_path / "s"))
    store.load()
    try:  # one dispatch pass by hand (start() would wait for it without end, were it to stop at the damage)
        reput = ReputMessageService(store, 0)
        assert reput.do_reput() and reput.reput_from_offset == store.commit_log.get_max_offset()
    finally:
        store.close()
    with MessageStore(small_config(tmp_path / "s")) as store:
        assert store.dispatch_behind_bytes() == 0
        _consistent(store, 600)


def test_a_zeroed_first_unit_of_a_last_consume_queue_file_keeps_the_units_behind_it(tmp_path: Path) -> None:
    """Normal recovery, a queue whose last consume-queue file begins with a zeroed unit, and another queue that ends
    where the commit log ends (so the dirty units are truncated): as 4.9.4's truncateDirtyLogicFiles, the first unit
    is kept whatever it holds and the valid units behind it too. Before, they were lost, and the next put to that
    queue took a queue offset a stored record already had."""
    cfg = small_config(tmp_path / "s", mapped_file_size_consume_queue=200)  # 10 units a file
    with MessageStore(cfg) as store:
        for i in range(61):  # T/0: 31 units, T/1: 30; the last record is T/0's
            assert store.put_message(Message("T", b"x" * 100, 0, {"KEYS": f"k{i}"}), i % 2).ok
        assert store.wait_dispatched()
    last = sorted((tmp_path / "s" / "consumequeue" / "T" / "1").iterdir())[-1]  # units 20..29
    with open(last, "r+b") as fh:
        fh.write(bytes(20))
    with MessageStore(cfg) as store:
        assert store.get_max_offset_in_queue("T", 1) == 30
        got = store.get_message("g", "T", 1, 21, 32)
        assert got.status is GetMessageStatus.FOUND and got.message_count == 9
        assert store.put_message(Message("T", b"y", 0, {}), 1).logics_offset == 30
        assert last.read_bytes()[:20] == bytes(20)  # (the zero unit stays: a hole in the queue, as in Java)


def test_an_empty_body_is_not_crc_checked(tmp_path: Path) -> None:
    """checkMessageAndReturnSize checks the body CRC only when there is a body: a record with an empty body and a
    non-zero BODYCRC field is kept by recovery, as RocketMQ keeps it (it cut the commit log there)."""
    with MessageStore(small_config(tmp_path / "s")) as store:
        empty = store.put_message(Message("E", b"", 0, {}), 0)
        after = store.put_message(Message("E", b"after", 0, {}), 0)
        assert empty.ok and after.ok
    with open(tmp_path / "s" / "commitlog" / f"{0:020d}", "r+b") as fh:
        fh.seek(empty.wrote_offset + 8)  # BODYCRC
        fh.write((12345).to_bytes(4, "big"))
    (tmp_path / "s" / "abort").touch()  # abnormal recovery: every record CRC-checked
    with MessageStore(small_config(tmp_path / "s")) as store:
        assert store.recovered_offset == after.wrote_offset + after.wrote_bytes
        assert store.get_max_offset_in_queue("E", 0) == 2


def test_deleted_consume_queue_and_index_files_are_rebuilt(tmp_path: Path) -> None:
    results = _fill(tmp_path / "s", n=260)
    cq_dir = tmp_path / "s" / "consumequeue" / "Cor"
    shutil.rmtree(cq_dir / "1")  # a whole queue
    last_cq = sorted((cq_dir / "2").iterdir())[-1]
    last_cq.unlink()  # the last file of another
    index_files = sorted((tmp_path / "s" / "index").iterdir())
    assert len(index_files) >= 2
    index_files[-1].unlink()
    (tmp_path / "s" / "abort").touch()
    with MessageStore(small_config(tmp_path / "s", message_index_safe=True)) as store:
        assert store.wait_dispatched()
        rep = store.recovery_report
        assert rep.consume_queues_rebuilt == 1 and rep.consume_queue_units_rebuilt >= 87
        assert rep.index_keys_rebuilt > 0
        _consistent(store, len(results))


def test_recovery_requests_match_a_full_parse(tmp_path: Path) -> None:
    """The requests recovery builds from the scan equal those a full record parse gives."""
    from rocketq.common.message import MessageExt
    from rocketq.store.recovery import RecoveryDispatch, scan_commit_log

    with MessageStore(small_config(tmp_path / "s")) as store:
        msgs = [
            Message("Req", b"a", 0, {"TAGS": "TagA", "KEYS": "k1 k2"}),
            Message("Req", b"b", 0, {}),
            Message("Req", b"c", 0, {"KEYS": "\u00e9t\u00e9 \u4e2d"}),
            Message("Req", b"d", 0, {"TAGS": "", "KEYS": "only"}),
            Message("Req", b"e", 0, {"DELAY": "2", "TAGS": "Later"}),
        ]
        for i, m in enumerate(msgs):
            assert store.put_message(m, i % 2).ok
        six = MessageExt(topic="Req", body=b"v6", properties={"TAGS": "T6", "UNIQ_KEY": "U6"}, queue_id=1,
                         born_host=("::1", 5000), store_host=("fe80::1", 10911))  # fmt: skip
        assert store.put_message(six).ok
        store.wait_dispatched()
        cl = store.commit_log
        got: dict[bool, list[Any]] = {}
        for full in (True, False):
            out: list[Any] = []
            dispatch = RecoveryDispatch(lambda batch, out=out: out.extend(batch.requests()), {}, 0,
                                        full_properties=full)  # fmt: skip
            scan_commit_log(cl, 0, True, dispatch, None, None)
            got[full] = out
        assert len(got[True]) == len(got[False]) == 6
        assert got[True][0].properties["KEYS"] == "k1 k2" and got[False][0].properties == {}
        for a, b in zip(got[True], got[False], strict=True):
            assert a._replace(properties={}) == b._replace(properties={})
            assert all(type(v) in (int, str, type(None), dict) for v in a)


def test_recovery_reports_progress(tmp_path: Path) -> None:
    _fill(tmp_path / "s", n=200)
    (tmp_path / "s" / "abort").touch()
    seen: list[tuple[str, int, int]] = []
    with MessageStore(small_config(tmp_path / "s"), progress=lambda *a: seen.append(a)):
        pass
    assert seen and all(stage == "recover" for stage, _d, _t in seen)
    assert seen[-1][1] <= seen[-1][2] and len({d for _s, d, _t in seen}) > 1


def test_golden_crashed_store_through_rocketq_store_recover(golden_crashed: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """``rocketq store recover`` on the store RocketMQ 4.9.4 left behind when killed with kill -9:
    every one of its 2227 acknowledged messages is there at its reported queue offset."""
    root = copy_store(golden_crashed / "store", tmp_path / "store")
    conf = golden_crashed / "broker.conf"
    assert cli_main(["store", "recover", str(root), "-c", str(conf), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["abortFileFound"] and info["mode"] == "abnormal" and info["closedCleanly"]
    assert info["recoveredOffset"] == 2940565 and info["commitLogFilesDeleted"] == ["00000000000003145728"]
    assert not (root / "abort").exists()
    manifest = load_json(str(golden_crashed / "manifest.json"))
    acked = manifest["acknowledged"]
    assert len(acked) == 2227
    cfg = load_broker_conf(conf)
    cfg.store_path_root_dir, cfg.store_path_commit_log = str(root), ""
    with MessageStore(cfg) as store:
        assert store.last_exit_ok  # recover closed it cleanly
        for a in acked:
            res = a["result"]
            if a["sent"]["delayTimeLevel"]:
                continue  # its SendResult holds the offset in SCHEDULE_TOPIC_XXXX
            got = store.get_message("g", res["topic"], res["queueId"], res["queueOffset"], 1)
            assert got.status is GetMessageStatus.FOUND, res
            assert got.decode()[0].uniq_key == res["msgId"]
    assert cli_main(["store", "recover", str(root), "-c", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "recovery         normal" in out and "truncated      nothing" in out


def test_a_store_recovered_past_a_zeroed_page_verifies_clean(golden_clean: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Pages zeroed inside a record of the second of four commit-log files: recovery ends the log at that record,
    clears the stale bytes after it to the end of its file (past the zeroed pages) and deletes the later files;
    ``verify`` then finds no problem, the index entries of the truncated records being a note (RocketMQ leaves them
    too)."""
    root = copy_store(golden_clean / "store", tmp_path / "store")
    conf = golden_clean / "broker.conf"
    with open(root / "commitlog" / f"{1 << 20:020d}", "r+b") as fh:
        fh.seek(10 * 4096)
        fh.write(bytes(20 * 4096))
    assert cli_main(["store", "recover", str(root), "-c", str(conf)]) == 0
    capsys.readouterr()
    assert cli_main(["store", "verify", str(root), "-c", str(conf)]) == 0
    out = capsys.readouterr().out
    assert "index entries point past the end of the commit log" in out and out.rstrip().endswith("OK")
    assert (root / "commitlog" / f"{1 << 20:020d}").read_bytes().count(0) == 1 << 20


def test_recover_command_reports_truncation_and_refuses_a_store_in_use(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    results = _fill(tmp_path / "s")
    last = results[-1]
    f = tmp_path / "s" / "commitlog" / f"{last.wrote_offset // (64 * 1024) * 64 * 1024:020d}"
    with open(f, "r+b") as fh:
        fh.seek(last.wrote_offset % (64 * 1024) + last.wrote_bytes - 100)  # in the body: the CRC covers it
        fh.write(b"\xff" * 8)
    (tmp_path / "s" / "abort").touch()
    (tmp_path / "broker.conf").write_text("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=600\n"
                                          "maxHashSlotNum=100\nmaxIndexNum=400\n")  # found beside DIR
    assert cli_main(["store", "recover", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "abnormal" in out and f"stopped at {last.wrote_offset}" in out
    assert "bytes of invalid data after the end cleared" in out and "1 units pointing past the end truncated" in out
    with MessageStore(small_config(tmp_path / "s")):
        assert cli_main(["store", "recover", str(tmp_path / "s")]) == 1
        err = capsys.readouterr().err
        assert "in use" in err
    assert cli_main(["store", "inspect", str(tmp_path / "s"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["commitLog"]
    assert info["flushedOffset"] == info["confirmOffset"] == info["maxOffset"] == last.wrote_offset
    assert info["abnormalRecoveryStartOffset"] >= 0


# ============================================================================== flush modes


class BlockedFlush:
    """Holds every commit-log fdatasync until released (a disk that stops answering)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.gate = threading.Event()
        self.calls = 0
        real = os.fdatasync

        def fdatasync(fd: int) -> None:
            self.calls += 1
            self.gate.wait(10)
            real(fd)

        monkeypatch.setattr(mapped_file.os, "fdatasync", fdatasync)

    def release(self) -> None:
        self.gate.set()


class StoppedHelper:
    """Stops the group commit's helper process (SIGSTOP) until released: the disk stops answering an event
    loop's rounds."""

    def __init__(self, store: MessageStore) -> None:
        gc = store.services.group_commit if store.services is not None else None
        assert gc is not None and gc._helper is not None, "the helper runs once a put of the loop has waited"
        self.pid = gc._helper.pid
        os.kill(self.pid, signal.SIGSTOP)

    def release(self) -> None:
        os.kill(self.pid, signal.SIGCONT)


def stuck_disk(store: MessageStore, monkeypatch: pytest.MonkeyPatch, helper: bool) -> BlockedFlush | StoppedHelper:
    return StoppedHelper(store) if helper else BlockedFlush(monkeypatch)


def test_sync_flush_returns_only_once_on_disk_and_shares_flushes(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path / "s", flush_disk_type=SYNC_FLUSH)) as store:
        r = store.put_message(Message("Sync", b"one", 0, {}), 0)
        assert r.ok and store.get_flushed_offset() >= r.wrote_offset + r.wrote_bytes
        results: list[Any] = []

        def writer(t: int) -> None:
            for i in range(40):
                res = store.put_message(Message("Sync", f"{t}-{i}".encode() * 20, 0, {}), t % 4)
                results.append(res)
                assert store.get_flushed_offset() >= res.wrote_offset + res.wrote_bytes

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 320 and all(r.ok for r in results)
        gc = store.services.group_commit
        assert gc is not None and gc.requests_done >= 321
        assert gc.flush_rounds < gc.requests_done  # some flushes covered several puts


def test_put_and_get_times_as_store_stats_service_reports_them() -> None:
    """``StoreStatsService``'s put-time figures: the 13 ranges of ``putMessageDistributeTime`` and the
    interpolated percentiles of the last whole minute, the longest put and get since start."""
    times = PutGetTimes(now=0.0)
    for _ in range(98):
        times.zero += 1  # as the put path counts a put under 1 ms
    times.put_time(30)
    times.put_time(700)
    times.get_time(3)
    times.get_time(2)
    empty = times.runtime_info()
    assert empty["putMessageDistributeTime"].startswith("[<=0ms]:0 [0~10ms]:0 ")  # nothing before a whole minute
    assert (empty["putLatency99"], empty["putMessageEntireTimeMax"], empty["getMessageEntireTimeMax"]) == \
        ("0.00", "700", "3")  # fmt: skip
    times.roll_if_due(59.0)
    assert times.runtime_info() == empty  # the minute has not ended
    times.roll_if_due(60.0)
    info = times.runtime_info()
    assert info["putMessageDistributeTime"] == ("[<=0ms]:98 [0~10ms]:0 [10~50ms]:1 [50~100ms]:0 [100~200ms]:0 "
                                                "[200~500ms]:0 [500ms~1s]:1 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 "
                                                "[5~10s]:0 [10s~]:0 ")  # fmt: skip
    # the 99th of 100 puts is the 30 ms one, in the bucket (28, 30]: 28 + (30 - 28) * 1/1
    assert (info["putLatency99"], info["putLatency999"]) == ("30.00", "30.00")
    for ms, bucket in ((9, 1), (10, 2), (50, 3), (9999, 11), (10000, 12)):
        t = PutGetTimes(now=0.0)
        t.put_time(ms)
        t.roll_if_due(60.0)
        assert [int(x.split(":")[1]) for x in t.distribution().split()].index(1) == bucket, ms
    t = PutGetTimes(now=0.0)
    for ms in [1] * 10 + [3] * 10:  # ten in (0, 1], ten in (2, 3]: the 15th of 20 is half way through (2, 3]
        t.put_time(ms)
    t.roll_if_due(60.0)
    assert t.latency(0.75) == 2.5
    t.roll_if_due(200.0)
    assert t.runtime_info()["putMessageDistributeTime"].startswith("[<=0ms]:0 [0~10ms]:0 ")  # a quiet minute


def test_a_put_is_timed_once_its_outcome_is_final(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A put that waits for its flush is timed when the flush is done (Java times ``asyncPutMessage``'s future),
    whichever way it was made (blocking, asyncio, future); one that does not wait, when it is stored."""
    with MessageStore(small_config(tmp_path / "s", flush_disk_type=SYNC_FLUSH)) as store:
        assert store.services is not None and store.services.group_commit is not None
        gc = store.services.group_commit
        real = gc.do_commit

        def slow_commit() -> None:
            time.sleep(0.12)
            real()

        monkeypatch.setattr(gc, "do_commit", slow_commit)
        assert store.put_message(Message("Timed", b"x", 0, {}), 0).ok
        assert store.put_messages([Message("Timed", b"y", 0, {})], 0).ok
        assert asyncio.run(store.aput_message(Message("Timed", b"z", 0, {}), 0)).ok
        assert store.put_message_async(Message("Timed", b"w", 0, {}), 0).result(10).ok
        msg = store.to_message_ext(Message("Timed", b"v", 0, {}), 0)
        msg.wait_store_msg_ok = False
        assert store.put_message(msg).ok
        times = store.put_get_times
        times.roll_if_due(time.monotonic() + 60)
        counts = [int(x.split(":")[1]) for x in times.distribution().split()]
        # four waited for a round of 120 ms (or what was left of one when they came), each counted once
        assert sum(counts) == 5 and sum(counts[2:]) == 4, counts
        assert sum(counts[:2]) == 1  # the put that did not wait
        assert int(store.runtime_info()["putMessageEntireTimeMax"]) >= 100
        assert store.get_message("G", "Timed", 0, 0, 32).status is GetMessageStatus.FOUND
        assert store.runtime_info()["getMessageEntireTimeMax"].isdigit()
    with MessageStore(small_config(tmp_path / "a")) as store:  # ASYNC_FLUSH: timed as it is stored
        for i in range(20):
            assert store.put_message(Message("Timed", b"%d" % i, 0, {}), 0).ok
        assert store.put_messages([Message("Timed", b"b", 0, {})] * 3, 0).ok
        store.put_get_times.roll_if_due(time.monotonic() + 60)
        counts = [int(x.split(":")[1]) for x in store.put_get_times.distribution().split()]
        assert sum(counts) == 21 and sum(counts[:2]) >= 19, counts  # a batch is one put


def test_a_put_that_does_not_wait_for_its_store_is_flushed_soon_after(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``WAIT=false`` (Java's waitStoreMsgOK) under SYNC_FLUSH: the put answers at once, not waiting for the
    group commit, which flushes it soon after anyway (``submitFlushRequest`` wakes it), with no one waiting."""
    with MessageStore(small_config(tmp_path / "s", flush_disk_type=SYNC_FLUSH)) as store:
        assert store.services is not None and store.services.group_commit is not None
        gc = store.services.group_commit
        slow = threading.Event()
        real = gc.do_commit

        def held_commit() -> None:
            slow.wait(2)  # a round only once the test lets it: the put cannot have waited for one
            real()

        monkeypatch.setattr(gc, "do_commit", held_commit)
        msg = store.to_message_ext(Message("NoWait", b"x", 0, {}), 0)
        msg.wait_store_msg_ok = False
        t0 = time.monotonic()
        r = store.put_message(msg)
        assert r.ok and time.monotonic() - t0 < 1.0 and store.get_flushed_offset() < r.wrote_offset + r.wrote_bytes
        slow.set()
        deadline = time.monotonic() + 5
        while store.get_flushed_offset() < r.wrote_offset + r.wrote_bytes:
            assert time.monotonic() < deadline, "the put was never flushed"
            time.sleep(0.01)


def test_sync_flush_timeout_and_the_data_stays_queued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with MessageStore(small_config(tmp_path / "s", flush_disk_type=SYNC_FLUSH, sync_flush_timeout=200)) as store:
        blocked = BlockedFlush(monkeypatch)
        t0 = time.monotonic()
        r = store.put_message(Message("Slow", b"x" * 100, 0, {}), 0)
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT and 0.15 < time.monotonic() - t0 < 5
        blocked.release()
        deadline = time.monotonic() + 10
        while store.get_flushed_offset() < r.wrote_offset + r.wrote_bytes and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.get_flushed_offset() >= r.wrote_offset + r.wrote_bytes  # flushed later all the same
        assert store.put_message(Message("Slow", b"y", 0, {}), 0).ok


@pytest.mark.parametrize("helper", [False, True], ids=["thread", "helper"])
def test_waiting_puts_do_not_block_the_event_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  helper: bool) -> None:  # fmt: skip
    """``aput_message`` awaits the group commit: other tasks run while the disk is slow (rounds flushed on the
    service thread, or by the helper process)."""

    async def scenario(store: MessageStore) -> None:
        assert (await store.aput_message(Message("Aio", b"first", 0, {}), 0)).ok
        blocked = stuck_disk(store, monkeypatch, helper)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        tick = asyncio.create_task(ticker())
        puts = [asyncio.create_task(store.aput_message(Message("Aio", f"{i}".encode(), 0, {}), i % 2))
                for i in range(20)]  # fmt: skip
        await asyncio.sleep(0.3)
        assert ticks >= 3 and not any(p.done() for p in puts)  # the loop runs; the puts wait
        blocked.release()
        results = await asyncio.wait_for(asyncio.gather(*puts), 10)
        tick.cancel()
        assert all(r.ok for r in results)
        end = max(r.wrote_offset + r.wrote_bytes for r in results)
        assert store.get_flushed_offset() >= end
        fut = store.put_message_async(Message("Aio", b"future", 0, {}), 0)
        assert (await asyncio.wrap_future(fut)).ok

    cfg = small_config(tmp_path / "s", flush_disk_type=SYNC_FLUSH, sync_flush_helper_enable=helper)
    with MessageStore(cfg) as store:
        asyncio.run(scenario(store))


@pytest.mark.parametrize("helper", [False, True], ids=["thread", "helper"])
def test_awaiting_puts_share_one_future_per_round_and_time_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               helper: bool) -> None:  # fmt: skip
    """Tasks of one loop wait on one future per flush round; with the disk stuck they get
    FLUSH_DISK_TIMEOUT after syncFlushTimeout, the data stays queued and is flushed later."""

    async def scenario(store: MessageStore) -> None:
        gc = store.services.group_commit if store.services is not None else None
        assert gc is not None
        assert (await store.aput_message(Message("Aio", b"first", 0, {}), 0)).ok
        assert (gc._helper is not None) is helper
        blocked = stuck_disk(store, monkeypatch, helper)
        t0 = time.monotonic()
        results = await asyncio.gather(*(store.aput_message(Message("Aio", b"stuck", 0, {}), i % 2)
                                         for i in range(30)))  # fmt: skip
        assert all(r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT for r in results)
        assert 0.25 < time.monotonic() - t0 < 5
        blocked.release()
        end = max(r.wrote_offset + r.wrote_bytes for r in results)
        deadline = time.monotonic() + 10
        while store.get_flushed_offset() < end and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert store.get_flushed_offset() >= end  # flushed later all the same
        rounds, done = gc.flush_rounds, gc.requests_done
        results = await asyncio.gather(*(store.aput_message(Message("Aio", b"free", 0, {}), i % 2)
                                         for i in range(200)))  # fmt: skip
        assert all(r.ok for r in results)
        # Some puts find their record flushed already by a round that began after they appended.
        assert 150 <= gc.requests_done - done <= 200 and gc.flush_rounds - rounds < 50  # rounds were shared

    cfg = small_config(tmp_path / "s", flush_disk_type=SYNC_FLUSH, sync_flush_timeout=300,
                       sync_flush_helper_enable=helper)  # fmt: skip
    with MessageStore(cfg) as store:
        asyncio.run(scenario(store))


def test_async_flush_service_flushes_on_its_interval_and_updates_the_checkpoint(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "s", flush_disk_type=ASYNC_FLUSH, flush_interval_commit_log=50,
                       flush_commit_log_thorough_interval=200, flush_interval_consume_queue=50,
                       flush_consume_queue_thorough_interval=200)  # fmt: skip
    with MessageStore(cfg) as store:
        r = None
        for i in range(30):
            r = store.put_message(Message("Async", bytes(900), 0, {"KEYS": f"a{i}"}), 0)
        assert r is not None and r.ok
        assert store.services.group_commit is None and store.services.flush_real_time is not None
        assert store.wait_dispatched()
        deadline = time.monotonic() + 10
        cp = None
        while time.monotonic() < deadline:
            cp = StoreCheckpoint(tmp_path / "s" / "checkpoint", read_only=True)
            if store.get_flushed_offset() >= r.wrote_offset + r.wrote_bytes and \
                    cp.physic_msg_timestamp >= r.store_timestamp and cp.logics_msg_timestamp >= r.store_timestamp:
                break
            time.sleep(0.05)
        assert cp is not None and cp.physic_msg_timestamp >= r.store_timestamp, "checkpoint physic not persisted"
        assert cp.logics_msg_timestamp >= r.store_timestamp, "checkpoint logics not persisted"
        assert store.get_flushed_offset() >= r.wrote_offset + r.wrote_bytes


def test_checkpoint_never_claims_unflushed_consume_queue_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whoever flushes the checkpoint, offset 8 holds the logics time of the last complete
    consume-queue flush, not what dispatch has reached in memory (store-format §16)."""
    cfg = small_config(tmp_path / "s", flush_interval_consume_queue=60_000, flush_consume_queue_thorough_interval=10**9)
    with MessageStore(cfg) as store:
        flushed = store.checkpoint.flushed_logics_msg_timestamp
        for _ in range(10):
            store.put_message(Message("Cp", b"x", 0, {}), 0)
        assert store.wait_dispatched()
        assert store.checkpoint.logics_msg_timestamp > flushed
        store.checkpoint.flush()  # as the index service does when a file is full
        assert StoreCheckpoint(tmp_path / "s" / "checkpoint", read_only=True).logics_msg_timestamp == flushed
    assert StoreCheckpoint(tmp_path / "s" / "checkpoint", read_only=True).logics_msg_timestamp > flushed


def test_transient_store_pool_reads_see_only_committed_bytes(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "s", flush_disk_type=ASYNC_FLUSH, transient_store_pool_enable=True,
                       transient_store_pool_size=2, commit_interval_commit_log=60_000,
                       commit_commit_log_thorough_interval=10**14, commit_commit_log_least_pages=10**6)  # fmt: skip
    with MessageStore(cfg) as store:
        pool = store.services.pool
        assert pool is not None and store.services.commit is not None  # and it commits only full files
        r = store.put_message(Message("Pool", b"pooled" * 10, 0, {}), 0)  # the first file: from the pool
        assert r.ok
        mf = store.commit_log.mapped_file_queue.last()
        assert type(mf).__name__ == "PooledMappedFile"
        assert store.get_max_phy_offset() == r.wrote_offset  # not committed: invisible
        assert store.get_message("g", "Pool", 0, 0, 32).messages == []
        assert os.pread(os.open(mf.path, os.O_RDONLY), 8, r.wrote_offset % (64 * 1024)) == bytes(8)
        store.services.commit.commit_once(0)
        assert store.get_max_phy_offset() == r.wrote_offset + r.wrote_bytes
        assert store.look_message_by_offset(r.wrote_offset).body == b"pooled" * 10
        # A lookup by offset (END_TRANSACTION's of its half message) commits what it needs at once.
        r = store.put_message(Message("Pool", b"looked up", 0, {}), 0)
        assert store.get_max_phy_offset() == r.wrote_offset
        assert store.look_message_by_offset(r.wrote_offset).body == b"looked up"
        assert store.get_max_phy_offset() == r.wrote_offset + r.wrote_bytes
        assert store.wait_dispatched()
        # Many files through a pool of two buffers: they are given back and reused.
        pool.grace_s = 0
        results = []
        for i in range(120):
            results.append(store.put_message(Message("Pool", bytes([i]) * 3000, 0, {"KEYS": f"p{i}"}), i % 2))
            if i % 10 == 9:
                store.services.commit.commit_once(0)
                assert store.wait_dispatched()
        store.services.commit.commit_once(0)
        assert all(x.ok for x in results) and store.wait_dispatched()
        pooled = [f for f in store.commit_log.mapped_file_queue.files if type(f).__name__ == "PooledMappedFile"]
        assert len(pooled) > 2  # more pooled files than buffers: buffers came back and went out again
    with MessageStore(small_config(tmp_path / "s")) as store:
        assert store.last_exit_ok and store.get_max_phy_offset() == results[-1].wrote_offset + results[-1].wrote_bytes
        for i, x in enumerate(results):
            assert store.look_message_by_offset(x.wrote_offset).body == bytes([i]) * 3000


def test_transient_store_pool_a_file_rolled_before_its_commit_stays_unread(tmp_path: Path) -> None:
    """The put path rolls on while a full pooled file's tail is still in its buffer: to another pooled file, then
    (the pool of two dry) to a file written in place, readable at once. Dispatch stops where the full file's
    committed data ends, so no unit is made for a record that no reader could read (a consumer given such units
    skipped their messages: MESSAGE_WAS_REMOVING, the next offset past them)."""
    cfg = small_config(tmp_path / "s", flush_disk_type=ASYNC_FLUSH, transient_store_pool_enable=True,
                       transient_store_pool_size=2, commit_interval_commit_log=60_000,
                       commit_commit_log_thorough_interval=10**14, commit_commit_log_least_pages=10**6)  # fmt: skip
    with MessageStore(cfg) as store:
        assert store.services.commit is not None
        results = [store.put_message(Message("Roll", bytes([i]) * 3000, 0, {}), 0) for i in range(50)]
        assert all(r.ok for r in results)
        files = store.commit_log.mapped_file_queue.files
        assert [type(f).__name__ for f in files] == ["PooledMappedFile", "PooledMappedFile", "MappedFile"]
        assert files[0].wrote_position == files[0].file_size and files[0].committed_position == 0
        assert files[2].read_position() > 0  # written in place: readable
        assert not store.wait_dispatched(0.3) and store.get_max_offset_in_queue("Roll", 0) == 0
        got = store.get_message("g", "Roll", 0, 0, 32)
        assert (got.messages, got.next_begin_offset) == ([], 0)
        store.services.commit.commit_once(0)
        assert store.get_max_phy_offset() == results[-1].wrote_offset + results[-1].wrote_bytes
        assert store.wait_dispatched()
        bodies: list[bytes] = []
        while got := store.get_message("g", "Roll", 0, len(bodies), 32).messages:
            bodies += (decode_record(bytes(m)).body for m in got)
        assert bodies == [bytes([i]) * 3000 for i in range(50)]


def test_next_file_is_made_ahead_and_deleted_at_shutdown(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path / "s")) as store:
        for _ in range(60):
            store.put_message(Message("Ahead", bytes(1500), 0, {}), 0)
        last = store.commit_log.mapped_file_queue.last()
        ahead = tmp_path / "s" / "commitlog" / f"{last.file_from_offset + 64 * 1024:020d}"
        assert store.services is not None and store.services.allocate.wait_idle(10)  # made on its own thread
        assert ahead.exists() and ahead.stat().st_size == 64 * 1024 and ahead.read_bytes() == bytes(64 * 1024)
        assert store.services.allocate.files_made >= 2
    assert not ahead.exists()


def _resident_fraction(mf: mapped_file.MappedFile) -> float:
    """The share of *mf*'s pages in the page cache (``mincore`` on its mapping)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pages = (mf.file_size + mapped_file.OS_PAGE_SIZE - 1) // mapped_file.OS_PAGE_SIZE
    vec = (ctypes.c_ubyte * pages)()
    anchor = ctypes.c_char.from_buffer(mf.mm)
    try:
        rc = libc.mincore(ctypes.c_void_p(ctypes.addressof(anchor)), ctypes.c_size_t(mf.file_size), vec)
    finally:
        del anchor
    assert rc == 0, os.strerror(ctypes.get_errno())
    return sum(v & 1 for v in vec) / pages


def test_pre_touch_fills_the_page_cache_and_writes_nothing(tmp_path: Path) -> None:
    size = 64 << 20
    mf = mapped_file.MappedFile.create(tmp_path, 0, size, preallocate=True)
    try:
        os.posix_fadvise(mf._fd, 0, size, os.POSIX_FADV_DONTNEED)  # nothing cached: the touch does the work
        assert _resident_fraction(mf) < 0.5
        mtime = mf.path.stat().st_mtime_ns
        mf.pre_touch(0, size // 2)
        assert 0.45 < _resident_fraction(mf) < 0.75  # the range asked for, not the whole file
        mf.pre_touch()
        assert _resident_fraction(mf) > 0.95
        assert mf.path.stat().st_mtime_ns == mtime and mf.mm[: 1 << 20] == bytes(1 << 20)  # nothing written
        mf.close()
        mf.pre_touch()  # a file closed meanwhile (the service touches after handing it over): nothing happens
    finally:
        mf.close()



def test_the_service_touches_a_window_ahead_of_the_appends(tmp_path: Path) -> None:
    """Pages are touched as appends come near them, not the whole of each new file at once: the file handed over
    and the one made ahead each have their first window in the page cache, and the window follows the write
    position; a file of the queue's own (the last one at start) is followed from its write position. (The kernel
    reads ahead up to 8 MiB past what is read here, hence the ranges.)"""
    mib = 1 << 20
    size, window = 128 * mib, 32 * mib
    service = AllocateMappedFileService(touch_ahead=window)
    service.start()
    try:
        first = service(tmp_path, 0, size)
        assert first is not None and service.wait_idle(10)
        ahead = service._requests[(tmp_path, size)].mapped_file
        assert ahead is not None
        for mf in (first, ahead):
            assert 0.24 < _resident_fraction(mf) < 0.4  # 32 MiB of 128, and the read-ahead
        first.wrote_position = 64 * mib
        deadline = time.monotonic() + 10
        while _resident_fraction(first) < 0.74 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert service.wait_idle(10)
        assert 0.74 < _resident_fraction(first) < 0.9  # up to 96 MiB, not further
        assert _resident_fraction(ahead) < 0.4
        own = mapped_file.MappedFile.create(tmp_path / "own", 0, size, preallocate=True)
        try:
            own.wrote_position = 32 * mib
            service.follow(own)
            assert service.wait_idle(10)
            assert 0.24 < _resident_fraction(own) < 0.4  # from 32 MiB to 64 MiB
        finally:
            own.close()
    finally:
        service.shutdown()


# ============================================================================== retention


def _aged(root: Path, hours: float) -> None:
    old = time.time() - hours * 3600
    for p in (root / "commitlog").iterdir():
        os.utime(p, (old, old))


def test_a_store_path_not_made_yet_is_measured_on_its_partition(tmp_path: Path) -> None:
    """Before the first put there is no ``commitlog`` directory (Java makes it at start): its partition's use is
    that of its nearest existing parent, not -1 (mqadmin clusterList showed #SPACE -1.0000 for a new broker)."""
    from rocketq.store.clean_service import store_path_used_ratio

    made = disk_partition_used_ratio(tmp_path)
    assert 0.0 <= made <= 1.0
    assert store_path_used_ratio(tmp_path / "store" / "commitlog", tmp_path) == made
    assert disk_partition_used_ratio(tmp_path / "store" / "commitlog") == -1  # (the Java function's own answer)


def test_disk_max_used_space_ratio_is_kept_within_10_and_95_percent(tmp_path: Path) -> None:
    """MessageStoreConfig.getDiskMaxUsedSpaceRatio: a setting of 5 (%) acts as 10, one of 99 as 95."""
    for setting, usage, expect in [(5, 0.08, False), (5, 0.11, True), (99, 0.96, True), (99, 0.94, False)]:
        with MessageStore(small_config(tmp_path / f"s{setting}{usage}", disk_max_used_space_ratio=setting)) as store:
            cleaner = store.services.clean.commit_log_cleaner
            cleaner.disk_usage = lambda _p, u=usage: u  # type: ignore[misc]
            assert cleaner.is_space_to_delete() is expect, (setting, usage)


def test_retention_deletes_expired_files_at_delete_when_and_everything_below_them(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "s", file_reserved_time=72, delete_when="03;04", delete_commit_log_files_interval=0,
                       delete_consume_queue_files_interval=0)  # fmt: skip
    with MessageStore(cfg) as store:
        results = [store.put_message(Message("Old", bytes(2000), 0, {"KEYS": f"o{i}"}), i % 2) for i in range(150)]
        assert store.wait_dispatched()
        clean = store.services.clean
        cleaner = clean.commit_log_cleaner
        cleaner.disk_usage = lambda _p: 0.10
        cleaner.hour_now = lambda: 4
        files = len(store.commit_log.mapped_file_queue.files)
        assert files >= 4
        clean.clean_files_periodically()
        assert len(store.commit_log.mapped_file_queue.files) == files  # nothing older than 72 h yet
        _aged(tmp_path / "s", 100)
        cleaner.hour_now = lambda: 12
        clean.clean_files_periodically()
        assert len(store.commit_log.mapped_file_queue.files) == files  # not the hour, disk not full
        cleaner.hour_now = lambda: 3
        clean.clean_files_periodically()
        remaining = store.commit_log.mapped_file_queue.files
        assert len(remaining) == 1  # all but the last one
        min_phy = store.get_min_phy_offset()
        assert min_phy == remaining[0].file_from_offset > 0
        for qid in (0, 1):
            cq = store.find_consume_queue("Old", qid)
            lo = cq.get_min_offset_in_queue()
            assert cq.get_unit(lo).phys >= min_phy
            assert store.get_message("g", "Old", qid, 0, 1).status is GetMessageStatus.OFFSET_TOO_SMALL
            got = store.get_message("g", "Old", qid, lo, 1)
            assert got.status is GetMessageStatus.FOUND
        assert len(store.index_service.files) < 3 or store.index_service.files[0].end_phy_offset >= min_phy
        assert store.query_message("Old", "o149", 4).messages[0].commit_log_offset == results[-1].wrote_offset
    with MessageStore(small_config(tmp_path / "s")) as store:  # and it reopens
        assert store.get_min_phy_offset() == min_phy


def test_disk_usage_thresholds_delete_forcibly_and_refuse_puts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WARNING_LEVEL_PROPERTY, raising=False)  # the defaults, as a plain host has them
    monkeypatch.delenv(CLEAN_FORCIBLY_PROPERTY, raising=False)
    with MessageStore(small_config(tmp_path / "s", delete_commit_log_files_interval=0)) as store:
        for _ in range(100):
            store.put_message(Message("Full", bytes(2000), 0, {}), 0)
        clean = store.services.clean
        cleaner = clean.commit_log_cleaner
        cleaner.hour_now = lambda: 12
        files = len(store.commit_log.mapped_file_queue.files)
        cleaner.disk_usage = lambda _p: 0.80  # above diskMaxUsedSpaceRatio (75 %): only expired files go
        clean.clean_files_periodically()
        assert len(store.commit_log.mapped_file_queue.files) == files
        cleaner.disk_usage = lambda _p: 0.87  # above diskSpaceCleanForciblyRatio: regardless of age
        clean.clean_files_periodically()
        assert len(store.commit_log.mapped_file_queue.files) == max(1, files - 10)  # deleteFileBatchMax
        assert store.put_message(Message("Full", b"still", 0, {}), 0).ok
        cleaner.disk_usage = lambda _p: 0.95  # above diskSpaceWarningLevelRatio: disk full
        assert cleaner.is_space_full()
        r = store.put_message(Message("Full", b"refused", 0, {}), 0)
        assert r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "disk full" in r.error
        assert store.put_messages([Message("Full", b"b", 0, {})], 0).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
        cleaner.disk_usage = lambda _p: 0.50
        assert not cleaner.is_space_full()
        assert store.put_message(Message("Full", b"welcome back", 0, {}), 0).ok


def test_disk_ratio_properties_override_the_config_unclamped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(WARNING_LEVEL_PROPERTY, "0.97")
    monkeypatch.setenv(CLEAN_FORCIBLY_PROPERTY, "not a number")
    with MessageStore(small_config(tmp_path / "s", disk_space_warning_level_ratio=50)) as store:
        cleaner = store.services.clean.commit_log_cleaner
        assert cleaner.disk_space_warning_level_ratio() == 0.97  # above 5.x's 90 % clamp, as 4.9 allows
        assert cleaner.disk_space_clean_forcibly_ratio() == 0.85  # ignored: the config's default
        cleaner.disk_usage = lambda _p: 0.95
        assert not cleaner.is_space_full()
        assert store.put_message(Message("Full", b"accepted", 0, {}), 0).ok
        cleaner.disk_usage = lambda _p: 0.98
        assert cleaner.is_space_full()
        assert store.put_message(Message("Full", b"refused", 0, {}), 0).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    monkeypatch.delenv(WARNING_LEVEL_PROPERTY)
    with MessageStore(small_config(tmp_path / "s", disk_space_warning_level_ratio=95)) as store:
        assert store.services.clean.commit_log_cleaner.disk_space_warning_level_ratio() == 0.90  # 5.x's clamp


def test_disk_helpers() -> None:
    assert 0 < disk_partition_used_ratio("/") <= 1
    assert disk_partition_used_ratio("/no/such/path") == -1
    assert is_it_time_to_do("04", 4) and is_it_time_to_do("03;04", 3) and not is_it_time_to_do("04", 5)


# ================================================================================ disk full


class CappedDisk:
    """A disk-usage probe for a store whose disk is *cap* bytes: the store's own allocated bytes over it."""

    def __init__(self, root: Path, cap: int) -> None:
        self.root = root
        self.cap = cap

    def __call__(self, _path: Path) -> float:
        used = sum(p.stat().st_blocks * 512 for p in self.root.rglob("*") if p.is_file())
        return used / self.cap


def test_size_capped_store_refuses_puts_and_stays_consistent(tmp_path: Path) -> None:
    root = tmp_path / "s"
    cfg = small_config(root)
    acked: list[Any] = []
    refused = None
    with MessageStore(cfg) as store:
        cleaner = store.services.clean.commit_log_cleaner
        cleaner.disk_usage = CappedDisk(root, 2 * 1024 * 1024)
        cleaner.hour_now = lambda: 12
        for i in range(3000):
            if i % 20 == 0:
                cleaner.is_space_full()  # the store's periodic disk check, run often
            r = store.put_message(Message("Cap", bytes([i % 256]) * 1500, 0, {"KEYS": f"k{i}"}), i % 2)
            if not r.ok:
                refused = r
                break
            acked.append(r)
        assert refused is not None, "the capped disk never filled"
        assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "disk full" in refused.error
        assert store.running_flags.is_disk_full()
        assert store.wait_dispatched()
        for i, r in enumerate(acked[::25]):  # readable while full
            assert store.look_message_by_offset(r.wrote_offset).body == bytes([(i * 25) % 256]) * 1500
    assert (root / "abort").exists()  # not writeable at shutdown: RocketMQ keeps abort
    with MessageStore(cfg) as store:
        assert not store.last_exit_ok
        assert store.get_max_offset_in_queue("Cap", 0) + store.get_max_offset_in_queue("Cap", 1) == len(acked)
        assert store.look_message_by_offset(acked[-1].wrote_offset) is not None
        assert store.put_message(Message("Cap", b"room again", 0, {}), 0).ok


class ReservingDisk:
    """``os.posix_fallocate`` recorded, and refused with ENOSPC while ``full`` (a disk with no room left)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reserved: list[tuple[int, int]] = []
        self.full = False
        real = os.posix_fallocate

        def fallocate(fd: int, offset: int, length: int) -> None:
            if self.full:
                raise OSError(28, "No space left on device")
            self.reserved.append((offset, length))
            real(fd, offset, length)

        monkeypatch.setattr(os, "posix_fallocate", fallocate)


def test_consume_queue_units_are_copied_into_blocks_reserved_ahead(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Units go into the mapping of a consume-queue file, not through a system call each; the blocks under them
    are reserved ahead (``posix_fallocate``, ``RESERVE_STEP`` bytes at a time), the rest of the file staying
    sparse. A disk with no room for the next step fails that reservation with StoreError and writes nothing
    (never a SIGBUS on a hole of the mapping); the same units go in once there is room."""
    from rocketq.common.errors import StoreError
    from rocketq.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue

    disk = ReservingDisk(monkeypatch)
    monkeypatch.setattr(os, "pwrite", lambda *a: pytest.fail("a unit written with a system call"))
    per_file = 300_000 * CQ_STORE_UNIT_SIZE
    cq = ConsumeQueue("T", 0, tmp_path, per_file)
    step_units = mapped_file.RESERVE_STEP // CQ_STORE_UNIT_SIZE
    for q in range(step_units):  # units one at a time, as a live dispatch of single records puts them
        assert cq.put_message_position_info(q * 100, 100, 7, q)
    assert disk.reserved == [(0, mapped_file.RESERVE_STEP)]
    path = tmp_path / "T" / "0" / f"{0:020d}"
    assert path.stat().st_size == per_file and path.stat().st_blocks * 512 < 4 * mapped_file.RESERVE_STEP

    disk.full = True  # the next unit needs the next step
    with pytest.raises(StoreError, match="cannot reserve space"):
        cq.put_message_position_info(step_units * 100, 100, 7, step_units)
    assert cq.get_max_offset_in_queue() == step_units
    disk.full = False
    assert cq.put_message_position_info(step_units * 100, 100, 7, step_units)
    assert disk.reserved[1][0] == (step_units * CQ_STORE_UNIT_SIZE)
    cq.flush()
    cq.close()
    units = np.frombuffer(path.read_bytes()[: (step_units + 1) * CQ_STORE_UNIT_SIZE], dtype=">i8, >i4, >i8")
    assert units["f0"].tolist() == [q * 100 for q in range(step_units + 1)] and set(units["f1"].tolist()) == {100}


def test_a_new_queues_file_made_ahead_is_touched_or_not_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The reput thread makes a new queue's first file ahead of its first unit (``prepare_file``) and
    writes the pages that unit and the filler before it go to over through the file, keeping their bytes. With
    no room on the disk for them, no file is made (none left behind) and the unit is refused later as usual."""
    from rocketq.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue

    disk = ReservingDisk(monkeypatch)
    per_file = 1000 * CQ_STORE_UNIT_SIZE
    cq = ConsumeQueue("T", 0, tmp_path, per_file)
    disk.full = True
    cq.prepare_file(1007)
    assert cq.queue.files == [] and not (tmp_path / "T" / "0" / f"{per_file:020d}").exists()
    disk.full = False
    writes: list[tuple[int, int]] = []
    real_pwrite = os.pwrite

    def pwrite(fd: int, data: bytes, offset: int) -> int:
        writes.append((offset, len(data)))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    cq.prepare_file(1007)  # the second file: unit 7 of it, after 7 filler units
    assert [f.file_from_offset for f in cq.queue.files] == [per_file]
    assert writes == [(0, 8 * CQ_STORE_UNIT_SIZE)] and disk.reserved[-1][0] == 0
    assert cq.queue.files[0].mm[: 8 * CQ_STORE_UNIT_SIZE] == bytes(8 * CQ_STORE_UNIT_SIZE)  # as they were
    monkeypatch.setattr(os, "pwrite", lambda *a: pytest.fail("a unit written with a system call"))
    assert cq.put_message_position_info(500, 100, 7, 1007)
    assert cq.get_min_offset_in_queue() == 1007 and cq.get_max_offset_in_queue() == 1008
    assert cq.get_index_buffer(1007, 1)[0]["phys"] == 500  # type: ignore[index]
    cq.close()


def test_index_keys_are_written_into_blocks_reserved_before_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """An index file is sparse. Before its first key, its header and slot table get their blocks at once (keys
    land in slots at random); its entries get theirs ahead of them, ``RESERVE_STEP`` bytes at a time. On a disk
    with no room for the next step a key, alone or in a batch, fails with StoreError before anything is written
    (never a SIGBUS on a hole of the mapping), and goes in once there is room."""
    from rocketq.common.errors import StoreError
    from rocketq.store.index_file import INDEX_HEADER_SIZE, INDEX_SIZE, IndexFile, index_key_hashes

    disk = ReservingDisk(monkeypatch)
    slots, entries = 5000, 20000
    path = tmp_path / "20261126000000000"
    index = IndexFile.create(path, slots, entries)
    base = INDEX_HEADER_SIZE + slots * 4
    fit = mapped_file.RESERVE_STEP // INDEX_SIZE  # entries 1..fit are reserved with the first key
    ts = 1_795_000_000_000
    try:
        for n in range(1, fit + 1):
            assert index.put_key(f"T#k{n}", n * 100, ts + n)
        assert (0, base) in disk.reserved and (base + INDEX_SIZE, mapped_file.RESERVE_STEP) in disk.reserved
        assert path.stat().st_blocks * 512 < base + 4 * mapped_file.RESERVE_STEP  # the rest stays sparse
        before = path.read_bytes()
        disk.full = True
        with pytest.raises(StoreError, match="cannot reserve space"):
            index.put_key("T#one", 10**9, ts + 10**6)
        keys = [f"T#b{i}" for i in range(40)]
        hashes = index_key_hashes(keys)
        with pytest.raises(StoreError, match="cannot reserve space"):
            index.put_keys(hashes, np.full(40, 10**9, dtype=np.int64), np.full(40, ts + 10**6, dtype=np.int64))
        assert index.index_count == fit + 1 and path.read_bytes() == before
        disk.full = False
        assert index.put_key("T#one", 10**9, ts + 10**6)
        assert index.put_keys(hashes, np.full(40, 10**9 + 1, dtype=np.int64),
                              np.full(40, ts + 10**6, dtype=np.int64)) == 40  # fmt: skip
        found: list[int] = []
        index.select_phy_offsets(found, "T#b7", 8, 0, ts + 10**7)
        assert found == [10**9 + 1] and index.index_count == fit + 42
    finally:
        index.close()


DISK_FULL_WRITER = r"""
import json, sys
from pathlib import Path
from rocketq.common.message import Message
from rocketq.store.clean_service import CleanService
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig
CleanService.disk_check_initial_delay_ms = 0
CleanService.disk_check_interval_ms = 20
root = Path(sys.argv[1])
cfg = MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=256 * 1024,
                         mapped_file_size_consume_queue=6000, max_hash_slot_num=100, max_index_num=400)
statuses, acked = {}, []
with MessageStore(cfg) as store:
    for i in range(20000):
        r = store.put_message(Message("Tiny", bytes([i % 256]) * 1000, 0, {}), 0)
        statuses[r.status.value] = statuses.get(r.status.value, 0) + 1
        if r.ok:
            acked.append([r.wrote_offset, i % 256])
        elif len(statuses) > 1 and statuses.get(r.status.value, 0) > 50:
            break
    store.wait_dispatched()
    print(json.dumps({"statuses": statuses, "acked": acked}))
"""


def test_a_real_small_filesystem_fills_up(tmp_path: Path) -> None:
    """A 4 MiB tmpfs (when this machine lets the test mount one): the store runs in a subprocess
    (a real ENOSPC on a sparse mapping would be SIGBUS, which must not take pytest down);
    puts stop with a clear status and every acknowledged message reads back."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                             capture_output=True, timeout=30).returncode == 0  # fmt: skip
    if not mounted:
        pytest.skip("cannot mount a tmpfs here (needs root); the size-capped store test covers disk full")
    try:
        proc = subprocess.run([sys.executable, "-c", DISK_FULL_WRITER, str(mnt / "store")], capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert proc.returncode in (0, 1), (proc.returncode, proc.stderr[-2000:])  # 1: close hit ENOSPC
        out = json.loads(proc.stdout.splitlines()[-1])
        statuses = out["statuses"]
        refusals = set(statuses) - {"PUT_OK"}
        assert statuses.get("PUT_OK", 0) > 100 and refusals
        assert refusals <= {"SERVICE_NOT_AVAILABLE", "CREATE_MAPEDFILE_FAILED"}, statuses
        cfg = MessageStoreConfig(store_path_root_dir=str(mnt / "store"), mapped_file_size_commit_log=256 * 1024,
                                 mapped_file_size_consume_queue=6000, max_hash_slot_num=100, max_index_num=400)
        store = MessageStore(cfg, read_only=True)
        store.load()
        try:
            assert store.get_max_offset_in_queue("Tiny", 0) >= len(out["acked"])
            for offset, byte in out["acked"][::20]:
                assert store.look_message_by_offset(offset).body == bytes([byte]) * 1000
        finally:
            store.close()
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


def test_the_checkpoint_and_index_files_are_synced_by_fdatasync_on_their_own_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Their flushes reach the disk with fdatasync of their own descriptors, as the commit log's do, not with
    ``mmap.flush``: CPython runs that msync holding the GIL, so every thread of a broker, its event loop among
    them, would stand still while the disk works (a checkpoint every minute, a whole index file when it fills)."""
    from rocketq.store.index_file import IndexFile

    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    checkpoint = StoreCheckpoint(tmp_path / "checkpoint")
    index = IndexFile.create(tmp_path / "20261126000000000", 100, 400)
    try:
        checkpoint.physic_msg_timestamp = 1_795_000_000_000
        checkpoint.flush()
        assert synced == [checkpoint._fd]
        index.put_key("T#k", 4096, 1_795_000_000_000)
        index.flush()
        assert synced == [checkpoint._fd, index._mapped._fd]
    finally:
        checkpoint.close()
        index.close()
    assert StoreCheckpoint(tmp_path / "checkpoint", read_only=True).physic_msg_timestamp == 1_795_000_000_000
