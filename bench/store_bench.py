"""Store benchmark: puts, reads and key queries of MessageStore against baselines of the same run.

Prints a table and writes JSON (``--out``, default ``bench/results/store_bench.json``). Every
figure is also given as a ratio to a baseline measured in the same run, because the machine is
shared and absolute numbers drift:

- raw floor: records encoded beforehand, copied back to back into a pre-touched mapped file
  (the least any store must do per message);
- persist-queue: ``persistqueue.Queue`` (file queue) put rate, a durable queue a Python user
  might pick instead.

Measured for each body size (100 B, 1 KiB, 4 KiB), single writer:

- puts/s and MB/s, dispatch off (append only) and on (until the consume queues and the index
  have caught up), and batched (``put_messages`` of 32);
- ``get_message`` messages/s (32 per call, every queue read from 0 to the end);
- key query latency p50/p99 (``query_message`` of keys picked at random).

Messages look like a producer's: tags, one key and a ``UNIQ_KEY``, so indexing does real work.

    python bench/store_bench.py [--count N] [--sizes 100,1024,4096] [--out FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rocketq.common.codec import encode_record
from rocketq.common.message import Message, MessageExt
from rocketq.store.mapped_file import MappedFile
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig

TOPIC = "BenchTopic"
QUEUES = 8
BATCH = 32


def settle(store: MessageStore) -> None:
    """Wait until the store has made its first files ready (the file in use and the one made ahead are
    pre-touched on a thread of their own, seconds of work for 1 GiB here), so runs time the steady state."""
    allocate = getattr(store.services, "allocate", None)
    wait_idle = getattr(allocate, "wait_idle", None)
    if wait_idle is not None:
        wait_idle(300)
    else:
        time.sleep(10)  # a store without wait_idle (an older rocketq): give it time


def _config(root: Path, count: int, size: int) -> MessageStoreConfig:
    per_file = 256 * 1024 * 1024
    return MessageStoreConfig(
        store_path_root_dir=str(root), mapped_file_size_commit_log=per_file, warm_maped_file_enable=True,
        max_hash_slot_num=max(1000, count * 2), max_index_num=max(4000, count * 4),
    )  # fmt: skip


def _messages(store: MessageStore, count: int, size: int) -> list[MessageExt]:
    body = random.randbytes(size)
    return [
        store.to_message_ext(Message(TOPIC, body, 0, {"TAGS": f"Tag{i % 4}", "KEYS": f"key-{i}"}), i % QUEUES)
        for i in range(count)
    ]


def bench_raw_floor(root: Path, count: int, size: int) -> float:
    """Pre-encoded records copied into a pre-touched mapped file: messages/s."""
    msg = MessageExt(topic=TOPIC, body=random.randbytes(size), properties={"TAGS": "Tag0", "KEYS": "key-0"})
    rec = bytes(encode_record(msg))
    records = [rec] * count
    mf = MappedFile.create(root, 0, len(rec) * count + 4096, warm=True)
    try:
        mm = mf.mm
        start = time.perf_counter()
        pos = 0
        for r in records:
            end = pos + len(r)
            mm[pos:end] = r
            pos = end
        elapsed = time.perf_counter() - start
    finally:
        mf.destroy()
    return count / elapsed


def bench_persist_queue(root: Path, count: int, size: int) -> float | None:
    try:
        import persistqueue
    except ImportError:
        return None
    q = persistqueue.Queue(str(root / "pq"))
    body = random.randbytes(size)
    start = time.perf_counter()
    for _ in range(count):
        q.put(body)
    elapsed = time.perf_counter() - start
    del q
    return count / elapsed


def bench_puts(root: Path, count: int, size: int, *, dispatch: bool, batch: int = 1) -> dict[str, Any]:
    store = MessageStore(_config(root, count, size), dispatch=dispatch)
    store.load()
    store.start()
    try:
        msgs = _messages(store, count, size)
        # The first put creates and pre-touches the first commit-log file; a running broker
        # allocates files off the put path, so that cost stays out of the timed loop.
        store.put_message(store.to_message_ext(Message(TOPIC, b"warm-up", 0, {}), 0))
        store.wait_dispatched(60)
        settle(store)
        first_offset = store.get_max_phy_offset()  # a stored message's offset is at least this
        gc.collect()
        gc.freeze()  # the prebuilt messages are not garbage; keep the collector off them
        cpu_start = time.process_time()
        start = time.perf_counter()
        if batch == 1:
            put = store.put_message
            for m in msgs:
                put(m)
        else:
            by_queue: dict[int, list[MessageExt]] = {}
            for m in msgs:
                by_queue.setdefault(m.queue_id, []).append(m)
            groups = [q[i : i + batch] for q in by_queue.values() for i in range(0, len(q), batch)]
            for g in groups:
                store.put_messages(g)
        put_done = time.perf_counter()
        if dispatch:
            store.wait_dispatched(600)
        end = time.perf_counter()
        cpu = time.process_time() - cpu_start
        stored = store.get_max_phy_offset()
        # Every put must have stored its message (plus the warm-up's): a store refuses puts when the disk is
        # nearly full (diskMaxUsedSpaceRatio), and a run of refusals would time nothing but failures.
        kept = sum(1 for m in msgs if m.commit_log_offset >= first_offset)
    finally:
        gc.unfreeze()
        store.close()
    if kept != count:
        raise SystemExit(f"store_bench: only {kept:,} of {count:,} puts were stored in {root} (is the disk nearly "
                         f"full? the store refuses puts above diskMaxUsedSpaceRatio); no figure from this run")
    # CPU time of all the store's threads per message: steadier than wall time on a shared machine.
    return {"puts_per_s": count / (end - start), "put_only_per_s": count / (put_done - start),
            "mb_per_s": stored / (end - start) / 1e6, "cpu_us_per_msg": cpu / count * 1e6}  # fmt: skip


def bench_reads_and_queries(root: Path, count: int, reps: int) -> dict[str, Any]:
    """Reads and key queries on the store the dispatch-on run left behind."""
    cfg = _config(root, count, 0)
    with MessageStore(cfg, read_only=True) as store:
        read_s = 0.0
        got = 0
        for _ in range(reps):
            start = time.perf_counter()
            got = 0
            for q in range(QUEUES):
                offset = 0
                while True:
                    r = store.get_message("bench", TOPIC, q, offset, 32)
                    if not r.messages:
                        break
                    got += len(r.messages)
                    offset = r.next_begin_offset
            read_s = max(read_s, got / (time.perf_counter() - start))
        lat = []
        rng = random.Random(7)
        for _ in range(min(2000, count)):
            key = f"key-{rng.randrange(count)}"
            t0 = time.perf_counter()
            found = store.query_message(TOPIC, key, 32)
            lat.append(time.perf_counter() - t0)
            assert len(found.messages) == 1, key
    lat.sort()
    return {"read_msgs_per_s": read_s, "read_count": got,
            "query_p50_ms": statistics.median(lat) * 1e3, "query_p99_ms": lat[int(len(lat) * 0.99)] * 1e3}  # fmt: skip


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Best of the runs (the machine is shared: the best run is the least disturbed)."""
    return max(runs, key=lambda r: r["puts_per_s"])


def run(count: int, sizes: list[int], work: Path, reps: int = 3) -> dict[str, Any]:
    results: dict[str, Any] = {"count": count, "sizes": {}}
    for size in sizes:
        row: dict[str, Any] = {}
        d = Path(tempfile.mkdtemp(dir=work))
        row["raw_floor_per_s"] = max(bench_raw_floor(d, count, size) for _ in range(reps))
        row["persist_queue_per_s"] = bench_persist_queue(d, min(count, 20_000), size)
        off = _best([bench_puts(d / f"off{i}", count, size, dispatch=False) for i in range(reps)])
        on = _best([bench_puts(d / f"on{i}", count, size, dispatch=True) for i in range(reps)])
        batched = _best([bench_puts(d / f"batch{i}", count, size, dispatch=True, batch=BATCH) for i in range(reps)])
        row["dispatch_off"] = off
        row["dispatch_on"] = on
        row["batched"] = batched
        row.update(bench_reads_and_queries(d / "on0", count, reps))
        results["sizes"][str(size)] = row
        shutil.rmtree(d, ignore_errors=True)
        print(f"  {size} B done", file=sys.stderr)
    return results


def print_table(results: dict[str, Any]) -> None:
    print(f"store_bench: {results['count']} messages per run, single writer, {QUEUES} queues, best of runs")
    head = ("body", "raw floor/s", "persist-queue/s", "put (no dispatch)/s", "x floor", "put+dispatch/s",
            "CPU us/msg", "batched+dispatch/s", "batched x floor", "MB/s", "reads/s", "query p50 ms",
            "query p99 ms", "put+disp x pq")  # fmt: skip
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for size, r in results["sizes"].items():
        pq = r["persist_queue_per_s"]
        floor = r["raw_floor_per_s"]
        print(" | ".join([
            f"{size} B", f"{floor:,.0f}", f"{pq:,.0f}" if pq else "n/a",
            f"{r['dispatch_off']['puts_per_s']:,.0f}", f"{r['dispatch_off']['puts_per_s'] / floor:.3f}",
            f"{r['dispatch_on']['puts_per_s']:,.0f}", f"{r['dispatch_on']['cpu_us_per_msg']:.1f}",
            f"{r['batched']['puts_per_s']:,.0f}", f"{r['batched']['puts_per_s'] / floor:.3f}",
            f"{r['dispatch_on']['mb_per_s']:,.1f}", f"{r['read_msgs_per_s']:,.0f}",
            f"{r['query_p50_ms']:.3f}", f"{r['query_p99_ms']:.3f}",
            f"{r['dispatch_on']['puts_per_s'] / pq:.1f}" if pq else "n/a",
        ]))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100_000, help="messages per run (default 100000)")
    ap.add_argument("--sizes", default="100,1024,4096", help="body sizes in bytes, comma-separated")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "store_bench.json")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per figure; the best is kept (default 3)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    work = args.work or Path(tempfile.mkdtemp(prefix="rocketq-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = run(args.count, sizes, work, args.reps)
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
