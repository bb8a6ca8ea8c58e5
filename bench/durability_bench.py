"""Durability benchmark: SYNC_FLUSH group commit against flushing every message, and abnormal recovery.

Prints a table and writes JSON (``--out``, default ``bench/results/durability_bench.json``).
The machine is shared and its disk latency drifts (anchors §4.1), so every
SYNC_FLUSH figure comes with a baseline measured in the same run:

- **flush per message**: the store's SYNC_FLUSH before group commit — every put
  flushes the commit log itself before it returns (one fdatasync per message);
  one writer, since that is the only way to get exactly one flush per message.
- **disk floor**: what the disk itself allows a group commit, with no store: records encoded
  beforehand, written back to back into a commit-log file made as the store makes one, and
  ``fdatasync`` after every 1, 8 or 64 of them, the writer waiting for each (as W writers that each
  wait for their message's flush can give a flush at most W messages). A SYNC_FLUSH figure of W
  writers is also given as a fraction of the floor of W messages per flush: that part of the
  ceiling the store reaches, the rest being Python's cost per put;
- **group commit**: SYNC_FLUSH as built — puts hand a request to the group
  commit service and wait; 1, 8 and 64 concurrent writers, as threads
  (``put_message``) and as asyncio tasks on one event loop (``aput_message``).
  Reported: puts/s, messages per flush (requests completed / flush rounds),
  and the ratio to the baseline.

Messages are 1 KiB bodies with a tag and a key, dispatch is on (consume queues
and index are built as the puts go), each run lasts ``--seconds``.

**Abnormal recovery**: a writer process fills a commit log of ``--recovery-gib``
GiB (ASYNC_FLUSH, dispatch on) and is killed with SIGKILL; the store is then
reopened and timed until it serves (recovery + dispatch caught up). Two
layouts: the default 1 GiB files (the log is one file, so the scan covers all
of it and every index key is rebuilt), and 128 MiB files with the checkpoint
persisted every 5 s (``flushConsumeQueueThoroughInterval=5000``, a broker in
its steady state), where recovery starts from the checkpoint-chosen file.
Normal recovery of the same store after a clean close is timed too.

    python bench/durability_bench.py [--seconds S] [--recovery-gib G] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rocketq.common.codec import encode_record
from rocketq.common.message import Message, MessageExt
from rocketq.store.mapped_file import MappedFile
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import SYNC_FLUSH, MessageStoreConfig
from store_bench import settle  # a sibling script: the benches run from this directory

TOPIC = "BenchTopic"
QUEUES = 8
BODY = 1024
WRITERS = (1, 8, 64)


def _config(root: Path, flush: str, **kw: Any) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(root), flush_disk_type=flush, **kw)


def _messages(store: MessageStore, n: int, tag: str) -> list[MessageExt]:
    body = random.randbytes(BODY)
    return [store.to_message_ext(Message(TOPIC, body, 0, {"TAGS": "TagA", "KEYS": f"{tag}-{i}"}), i % QUEUES)
            for i in range(n)]  # fmt: skip


# =========================================================================== SYNC_FLUSH puts


def bench_disk_floor(root: Path, per_flush: int, seconds: float) -> dict[str, Any]:
    """Messages/s of a bare group commit: pre-encoded records copied into a commit-log file (preallocated and
    read into the page cache, as the store makes its files), one ``fdatasync`` every *per_flush* records."""
    shutil.rmtree(root, ignore_errors=True)
    msg = MessageExt(topic=TOPIC, body=random.randbytes(BODY), properties={"TAGS": "TagA", "KEYS": "w0-0"})
    rec = bytes(encode_record(msg))
    size = 1 << 30
    mf = MappedFile.create(root, 0, size, preallocate=True)
    try:
        mf.pre_touch(0, min(size, int(len(rec) * 200_000 * seconds)))
        mm, fd, n = mf.mm, mf._fd, len(rec)
        assert mm is not None
        pos = done = flushes = 0
        start = time.perf_counter()
        deadline = start + seconds
        while pos + n * per_flush <= size:
            for _ in range(per_flush):
                mm[pos : pos + n] = rec
                pos += n
            os.fdatasync(fd)
            done += per_flush
            flushes += 1
            if time.perf_counter() > deadline:
                break
        elapsed = time.perf_counter() - start
    finally:
        mf.destroy()
        shutil.rmtree(root, ignore_errors=True)
    return {"per_flush": per_flush, "puts": done, "seconds": elapsed, "puts_per_s": done / elapsed,
            "flush_ms": elapsed / max(1, flushes) * 1e3}  # fmt: skip


def bench_sync(root: Path, writers: int, seconds: float, *, mode: str, batch: int = 1) -> dict[str, Any]:
    """puts/s of SYNC_FLUSH with *writers* writers; mode: "threads", "asyncio" or "per-message".

    With *batch* > 1 each put is a ``put_messages`` / ``aput_messages`` of that many messages of one queue.
    """
    shutil.rmtree(root, ignore_errors=True)
    store = MessageStore(_config(root, SYNC_FLUSH))
    store.load()
    store.start()
    try:
        assert store.services is not None
        gcs = store.services.group_commit
        assert gcs is not None
        if mode == "per-message":
            store.services.group_commit = None  # puts then flush inline, as before group commit
        per = max(2000, int(80_000 * seconds / max(1, writers)))
        msgs = [_messages(store, per, f"w{w}") for w in range(writers)]
        store.put_message(store.to_message_ext(Message(TOPIC, b"warm", 0, {}), 0))
        store.wait_dispatched()
        settle(store)
        gc.collect()
        gc.freeze()
        done = [0] * writers
        rounds0, reqs0 = gcs.flush_rounds, gcs.requests_done
        deadline = [0.0]
        if mode == "asyncio":
            async def writer(w: int) -> None:
                if batch > 1:
                    for m in msgs[w]:
                        m.queue_id = w % QUEUES
                    for i in range(0, len(msgs[w]) - batch + 1, batch):
                        r = await store.aput_messages(msgs[w][i : i + batch])
                        assert r.ok, r
                        done[w] += batch
                        if time.perf_counter() > deadline[0]:
                            return
                    return
                for m in msgs[w]:
                    r = await store.aput_message(m)
                    assert r.ok, r
                    done[w] += 1
                    if time.perf_counter() > deadline[0]:
                        return

            async def all_writers() -> float:
                t0 = time.perf_counter()
                deadline[0] = t0 + seconds
                await asyncio.gather(*(writer(w) for w in range(writers)))
                return time.perf_counter() - t0

            elapsed = asyncio.run(all_writers())
        else:
            start = threading.Barrier(writers + 1)

            def thread_writer(w: int) -> None:
                start.wait()
                if batch > 1:
                    for m in msgs[w]:
                        m.queue_id = w % QUEUES
                    for i in range(0, len(msgs[w]) - batch + 1, batch):
                        r = store.put_messages(msgs[w][i : i + batch])
                        assert r.ok, r
                        done[w] += batch
                        if time.perf_counter() > deadline[0]:
                            return
                    return
                put = store.put_message
                for m in msgs[w]:
                    r = put(m)
                    assert r.ok, r
                    done[w] += 1
                    if time.perf_counter() > deadline[0]:
                        return

            threads = [threading.Thread(target=thread_writer, args=(w,)) for w in range(writers)]
            for t in threads:
                t.start()
            deadline[0] = time.perf_counter() + seconds
            t0 = time.perf_counter()
            start.wait()
            for t in threads:
                t.join()
            elapsed = time.perf_counter() - t0
        total = sum(done)
        rounds, reqs = gcs.flush_rounds - rounds0, gcs.requests_done - reqs0
        store.wait_dispatched(600)
    finally:
        gc.unfreeze()
        if store.services is not None and store.services.group_commit is None:
            store.services.group_commit = gcs
        store.close()
        shutil.rmtree(root, ignore_errors=True)
    kind = mode if batch == 1 else f"{mode}, batches of {batch}"
    return {
        "writers": writers, "mode": kind, "puts": total, "seconds": elapsed, "puts_per_s": total / elapsed,
        "msgs_per_flush": (reqs * batch / rounds) if rounds else 1.0,
    }  # fmt: skip


# ============================================================================ recovery


FILL = r"""
import random, sys, time
from rocketq.common.message import Message
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig
root, total, file_size, cq_thorough = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cfg = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=file_size,
                         flush_consume_queue_thorough_interval=cq_thorough)
store = MessageStore(cfg)
store.load(); store.start()
body = random.randbytes(1024)
i = 0
while store.get_max_phy_offset() < total:
    batch = [store.to_message_ext(Message("BenchTopic", body, 0, {"TAGS": "TagA", "KEYS": f"k-{i + j}"}), 0)
             for j in range(64)]
    for m in batch:
        m.queue_id = (i // 64) % 8
    r = store.put_messages(batch)
    assert r.ok, r
    i += 64
store.wait_dispatched(600)
time.sleep(cq_thorough / 1000 + 1.5)  # let the flush services run as they would in a live broker
sys.stdout.write(f"{i} {store.get_max_phy_offset()}\n")
sys.stdout.flush()
time.sleep(3600)
"""


def fill_and_kill(root: Path, total: int, file_size: int, cq_thorough_ms: int) -> tuple[int, int, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", FILL, str(root), str(total), str(file_size), str(cq_thorough_ms)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        fill_s = time.perf_counter() - t0
        count, end = map(int, line.split())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    assert (root / "abort").exists()
    return count, end, fill_s


def time_open(root: Path, file_size: int, cq_thorough_ms: int) -> dict[str, Any]:
    cfg = MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=file_size,
                             flush_consume_queue_thorough_interval=cq_thorough_ms)  # fmt: skip
    store = MessageStore(cfg)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    store.load()
    t1 = time.perf_counter()
    store.start()
    t2 = time.perf_counter()
    cpu = time.process_time() - cpu0
    rep = store.recovery_report
    info = {
        "mode": rep.mode, "recover_s": t1 - t0, "catch_up_s": t2 - t1, "total_s": t2 - t0, "cpu_s": cpu,
        "scan_start_offset": rep.scan_start_offset, "scanned_bytes": rep.recovered_offset - rep.scan_start_offset,
        "records_scanned": rep.records_scanned, "records_redispatched": rep.records_redispatched,
        "index_files_dropped": rep.index_files_dropped, "index_keys_rebuilt": rep.index_keys_rebuilt,
        "recovered_offset": rep.recovered_offset, "dispatch_s": rep.dispatch_seconds,
    }  # fmt: skip
    store.close()
    return info


def bench_recovery(work: Path, gib: float, file_size: int, cq_thorough_ms: int) -> dict[str, Any]:
    root = work / f"recovery-{file_size >> 20}m"
    total = int(gib * (1 << 30))
    if total % file_size == 0:
        # Stop short of the last file's end: the batch that crossed it opened a file of its own, and recovery,
        # which starts at the last file whose first record the checkpoint covers, then scanned that file alone
        # whenever the checkpoint had moved past the roll (0.08 s) and the whole log when it had not (1.24 s).
        total -= 256 << 10
    count, end, fill_s = fill_and_kill(root, total, file_size, cq_thorough_ms)
    abnormal = time_open(root, file_size, cq_thorough_ms)
    normal = time_open(root, file_size, cq_thorough_ms)  # the abnormal open closed it cleanly
    shutil.rmtree(root, ignore_errors=True)
    return {"file_size": file_size, "checkpoint_interval_ms": cq_thorough_ms, "messages": count, "log_bytes": end,
            "fill_s": fill_s, "abnormal": abnormal, "normal": normal}  # fmt: skip


# ================================================================================ report


def _best_of(reps: int, fn: Any, *args: Any, **kw: Any) -> dict[str, Any]:
    """Best of *reps* runs: the machine is shared, the best run is the least disturbed (as store_bench)."""
    return max((fn(*args, **kw) for _ in range(reps)), key=lambda r: r["puts_per_s"])


def run(work: Path, seconds: float, gib: float, skip_recovery: bool, skip_sync: bool, reps: int) -> dict[str, Any]:
    results: dict[str, Any] = {"body": BODY, "seconds": seconds, "reps": reps, "sync": [], "recovery": []}
    if not skip_sync:
        base = _best_of(reps, bench_sync, work / "base", 1, seconds, mode="per-message")
        results["baseline"] = base
        print(f"  baseline {base['puts_per_s']:,.0f}/s", file=sys.stderr)
        floors = {w: _best_of(reps, bench_disk_floor, work / f"floor{w}", w, seconds) for w in WRITERS}
        results["disk_floor"] = list(floors.values())
        for w, f in floors.items():
            print(f"  disk floor, {w} per flush: {f['puts_per_s']:,.0f}/s", file=sys.stderr)
        for mode in ("threads", "asyncio"):
            for w in WRITERS:
                r = _best_of(reps, bench_sync, work / f"{mode}{w}", w, seconds, mode=mode)
                r["x_baseline"] = r["puts_per_s"] / base["puts_per_s"]
                r["of_disk_floor"] = r["puts_per_s"] / floors[w]["puts_per_s"]
                results["sync"].append(r)
                print(f"  {mode} {w}: {r['puts_per_s']:,.0f}/s", file=sys.stderr)
        for mode in ("threads", "asyncio"):
            r = _best_of(reps, bench_sync, work / f"batched-{mode}", 64, seconds, mode=mode, batch=16)
            r["x_baseline"] = r["puts_per_s"] / base["puts_per_s"]
            r["of_disk_floor"] = None  # 64 batches of 16 per flush at most: no floor measured for that
            results["sync"].append(r)
    if not skip_recovery:
        results["recovery"].append(bench_recovery(work, gib, 1 << 30, 60_000))
        results["recovery"].append(bench_recovery(work, gib, 128 << 20, 5_000))
    return results


def print_table(results: dict[str, Any]) -> None:
    if results["sync"]:
        base = results["baseline"]
        print(f"durability_bench: SYNC_FLUSH, {results['body']} B bodies, dispatch on, {results['seconds']:.0f} s "
              f"runs, best of {results['reps']}")  # fmt: skip
        print(f"flush per message (baseline, 1 writer): {base['puts_per_s']:,.0f} puts/s")
        floors = results.get("disk_floor", [])
        print("disk floor (no store; x baseline): " + ", ".join(
            f"{f['per_flush']} per flush {f['puts_per_s']:,.0f}/s ({f['puts_per_s'] / base['puts_per_s']:.1f}x, "
            f"{f['flush_ms']:.2f} ms a flush)" for f in floors))  # fmt: skip
        head = ("writers", "kind", "messages/s", "msgs per flush", "x baseline", "of disk floor")
        print(" | ".join(head))
        print(" | ".join("---" for _ in head))
        for r in results["sync"]:
            of_floor = r.get("of_disk_floor")
            print(" | ".join([str(r["writers"]), r["mode"], f"{r['puts_per_s']:,.0f}", f"{r['msgs_per_flush']:.1f}",
                              f"{r['x_baseline']:.1f}", "-" if of_floor is None else f"{of_floor:.2f}"]))  # fmt: skip
    if results["recovery"]:
        print()
        head = ("commit log", "files", "checkpoint every", "abnormal: recover s", "of it dispatch s", "catch-up s",
                "total s", "CPU s", "scanned MiB", "re-dispatched", "normal total s", "normal CPU s")
        print(" | ".join(head))
        print(" | ".join("---" for _ in head))
        for r in results["recovery"]:
            a, n = r["abnormal"], r["normal"]
            print(" | ".join([
                f"{r['log_bytes'] / (1 << 30):.2f} GiB ({r['messages']:,} msgs)", f"{r['file_size'] >> 20} MiB",
                f"{r['checkpoint_interval_ms'] / 1000:.0f} s", f"{a['recover_s']:.2f}", f"{a['dispatch_s']:.2f}",
                f"{a['catch_up_s']:.2f}",
                f"{a['total_s']:.2f}", f"{a['cpu_s']:.2f}", f"{a['scanned_bytes'] / (1 << 20):,.0f}",
                f"{a['records_redispatched']:,}", f"{n['total_s']:.2f}", f"{n['cpu_s']:.2f}",
            ]))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each SYNC_FLUSH run (default 4)")
    ap.add_argument("--recovery-gib", type=float, default=1.0, help="commit log size for recovery (default 1)")
    ap.add_argument("--skip-recovery", action="store_true", help="only the SYNC_FLUSH runs")
    ap.add_argument("--skip-sync", action="store_true", help="only the recovery runs")
    ap.add_argument("--reps", type=int, default=2, help="repetitions of each SYNC_FLUSH figure, best kept")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "durability_bench.json")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="rocketq-durability-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = run(work, args.seconds, args.recovery_gib, args.skip_recovery, args.skip_sync, args.reps)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
