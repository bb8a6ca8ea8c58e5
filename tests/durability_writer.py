"""A writer process for the fault tests in ``test_durability.py``: puts messages until it is killed.

    python durability_writer.py STORE HISTORY --flush SYNC_FLUSH|ASYNC_FLUSH [--shadow DIR]
                                [--threads N] [--asyncio] [--seconds S] [--kill-at WHERE:N] [--seed N]

Each of ``--threads`` threads (with ``--asyncio``: tasks of one event loop, ``aput_message``, whose SYNC_FLUSH
rounds the group commit's helper process flushes) puts messages whose body starts with
``"<thread>:<seq>:"`` and whose key is ``id-<thread>-<seq>`` to topic ``Dur``.
Only after ``put_message`` returned ``PUT_OK`` does the thread append one line
``thread seq queue queueOffset commitLogOffset size`` to HISTORY, with one
``os.write`` on an unbuffered descriptor: the line is in the kernel at once, so
it survives the process being killed (the test kills processes, not the
kernel; a simulated power loss never applies to the history).

``READY`` on stdout means the store is open and writing starts.

``--kill-at WHERE:N`` makes the writer SIGKILL itself at the N-th passage of a
chosen point, so the dangerous moments are hit on purpose, not only by chance:

- ``append``: a record's bytes are in the mapping, its put has not returned;
- ``roll``: the current commit-log file has just been ended with a BLANK
  record and the next one is being asked for;
- ``flush``: a commit-log fdatasync has returned, the puts it covers are not
  acknowledged yet;
- ``dispatch``: consume-queue units of a batch are written, its index keys not.

``--shadow DIR`` simulates a power loss: every range the store reports synced
(``rocketq.store.mapped_file.sync_listener``: commit log, consume queues,
index files, checkpoint) is copied into DIR at the same place, before the
flush is allowed to acknowledge anything. DIR then holds exactly what an
fdatasync made durable — and nothing that only reached the page cache.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rocketq.common.message import Message
from rocketq.store import mapped_file
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig

TOPIC = "Dur"
QUEUES = 4


def store_config(root: Path, flush: str) -> MessageStoreConfig:
    """Small files, so that a run of a second rolls files of every kind many times."""
    return MessageStoreConfig(
        store_path_root_dir=str(root), flush_disk_type=flush, mapped_file_size_commit_log=128 * 1024,
        mapped_file_size_consume_queue=30 * 20, max_hash_slot_num=200, max_index_num=800,
        message_index_safe=True, flush_interval_commit_log=100, flush_commit_log_thorough_interval=1000,
        flush_interval_consume_queue=200, flush_consume_queue_thorough_interval=300,
    )  # fmt: skip


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Shadow:
    """Copies synced ranges of store files into a shadow directory (see the module doc)."""

    def __init__(self, root: Path, shadow: Path) -> None:
        self.root = root.resolve()
        self.shadow = shadow
        self.lock = threading.Lock()
        self.fds: dict[Path, int] = {}

    def __call__(self, path: Path, mm: Any, start: int, end: int) -> None:
        rel = path.resolve().relative_to(self.root)
        data = mm[start:end]
        with self.lock:
            fd = self.fds.get(rel)
            if fd is None:
                target = self.shadow / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                # Whole-sized from the moment it has a name, as the store makes its files: a kill between a
                # create and its ftruncate would leave an empty file no power loss leaves.
                made = None if target.exists() else mapped_file._create_sized(target, len(mm), False)
                fd = made if made is not None else os.open(target, os.O_RDWR | os.O_CREAT, 0o644)
                if os.fstat(fd).st_size < len(mm):
                    os.ftruncate(fd, len(mm))
                self.fds[rel] = fd
            os.pwrite(fd, data, start)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("history")
    ap.add_argument("--flush", required=True)
    ap.add_argument("--shadow")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--asyncio", action="store_true")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--kill-at")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    root = Path(args.store)
    if args.shadow:
        mapped_file.sync_listener = Shadow(root, Path(args.shadow))
    store = MessageStore(store_config(root, args.flush))
    store.load()
    store.start()
    where, count = [*args.kill_at.split(":"), "1"][:2] if args.kill_at else ("", "0")
    left = [int(count)]
    lock = threading.Lock()

    def passage() -> None:
        with lock:
            left[0] -= 1
            if left[0] == 0:
                die()

    if where == "append":
        chained = store.commit_log.on_append

        def on_append(end: int) -> None:
            passage()
            if chained is not None:
                chained(end)

        store.commit_log.on_append = on_append
    elif where == "roll":
        queue = store.commit_log.mapped_file_queue
        allocator = queue.allocator
        assert allocator is not None

        def allocate(directory: Path, offset: int, size: int) -> Any:
            passage()
            return allocator(directory, offset, size)

        queue.allocator = allocate
    elif where == "flush":
        shadow = mapped_file.sync_listener
        commit_log_dir = store.config.commit_log_path.resolve()

        def synced(path: Path, mm: Any, start: int, end: int) -> None:
            if shadow is not None:
                shadow(path, mm, start, end)
            if path.resolve().parent == commit_log_dir:
                passage()

        mapped_file.sync_listener = synced
    elif where == "dispatch":
        index = store.index_service
        build_batch, build_one = index.build_index_batch, index.build_index

        def batch(*a: Any, **kw: Any) -> None:
            passage()
            build_batch(*a, **kw)

        def one(*a: Any, **kw: Any) -> None:
            passage()
            build_one(*a, **kw)

        index.build_index_batch = batch  # type: ignore[method-assign]
        index.build_index = one  # type: ignore[method-assign]
    elif where:
        raise SystemExit(f"unknown kill point {where}")

    fd = os.open(args.history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    deadline = time.monotonic() + args.seconds
    failures: list[str] = []

    def record(tid: int, seq: int, queue_id: int, r: Any) -> None:
        if r.ok:
            os.write(fd, f"{tid} {seq} {queue_id} {r.logics_offset} {r.wrote_offset} {r.wrote_bytes}\n".encode())
        else:
            failures.append(f"{tid}:{seq} {r.status.value} {r.error}")

    def next_message(tid: int, seq: int, rnd: random.Random) -> tuple[int, Message]:
        body = f"{tid}:{seq}:".encode() + rnd.randbytes(rnd.randrange(200, 3000))
        return rnd.randrange(QUEUES), Message(TOPIC, body, 0, {"KEYS": f"id-{tid}-{seq}"})

    def writer(tid: int) -> None:
        rnd = random.Random(args.seed * 1000 + tid)
        seq = 0
        while time.monotonic() < deadline:
            queue_id, msg = next_message(tid, seq, rnd)
            record(tid, seq, queue_id, store.put_message(msg, queue_id))
            seq += 1

    async def task_writer(tid: int) -> None:
        rnd = random.Random(args.seed * 1000 + tid)
        seq = 0
        while time.monotonic() < deadline:
            queue_id, msg = next_message(tid, seq, rnd)
            record(tid, seq, queue_id, await store.aput_message(msg, queue_id))
            seq += 1

    async def task_writers() -> None:
        await asyncio.gather(*(task_writer(t) for t in range(args.threads)))

    sys.stdout.write("READY\n")
    sys.stdout.flush()
    if args.asyncio:
        asyncio.run(task_writers())
    else:
        threads = [threading.Thread(target=writer, args=(t,)) for t in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if failures:
        sys.stderr.write("\n".join(failures[:10]) + "\n")
    # Not killed within the time given: a hard stop anyway (the test expects SIGKILL).
    die()
    return 0


if __name__ == "__main__":
    sys.exit(main())
