"""Spark benchmark: scanning, rebuilding and exporting a store of at least 1 GiB, against baselines of the same run.

Prints a table and writes JSON (``--out``, default ``bench/results/spark_bench.json``). The
store is generated here with :class:`MessageStore` (RocketMQ's default file sizes: 1 GiB
commit-log files, 300 000-unit consume-queue files, one 5M-slot index file), messages like a
producer's (tags, two keys, ``UNIQ_KEY``, bodies of 200–1800 bytes over 8 topics x 4 queues).
Every figure is measured in this run and given as a ratio to its baseline, because the
machine is shared and absolute numbers drift (the best of ``--reps`` runs is kept):

- **scan**: every message of the store decoded by the ``rocketq`` source and handed to Spark
  (``df.count()``: all 19 columns of every row arrive as Arrow batches) with ``local[1]`` and
  ``local[2]``, against a single-process loop that decodes the same files record by record with
  the codec (``walk`` + ``decode_record``). Also shown: the bulk decoder of the source in one
  process without Spark (what a task does), and the scan with sums over body, keys and
  timestamps (the JVM then turns every Arrow row into a Spark row). Target: local[2] >= 1.6x
  the loop;
- **rebuild**: ``rocketq spark rebuild`` (local[2]) against the store's own single-threaded
  dispatch (``MessageStore.start`` following the whole commit log with consume queues and index
  deleted), the two run alternately (dispatch, rebuild, dispatch, rebuild, ...) so that both meet
  the same load; the files must be byte-identical. Target >= 1.5x;
- **export**: ``rocketq spark export`` to Parquet (local[2]), commit-log MB/s.

    python bench/spark_bench.py [--gib 1.05] [--reps 2] [--work DIR] [--keep] [--reuse]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rocketq.common.codec import decode_record
from rocketq.common.message import Message
from rocketq.spark.commit_log_walk import walk_records
from rocketq.spark.record_decoder import CommitLogFile, RecordBlock
from rocketq.spark.store_scan import list_data_files
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig

TOPICS = 8
QUEUES = 4
BATCH = 32


def _config(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(root))


def generate(root: Path, gib: float) -> dict[str, Any]:
    """Put messages until the commit log holds *gib* GiB (dispatch off: nothing is indexed yet)."""
    target = int(gib * (1 << 30))
    rng = random.Random(11)
    pool = rng.randbytes(1 << 20)
    start = time.perf_counter()
    count = 0
    store = MessageStore(_config(root), dispatch=False)
    store.load()
    store.start()
    try:
        while store.get_max_phy_offset() < target:
            # One topic and queue per batch, round robin over all of them (keyed by the batch, not the message:
            # count advances by BATCH, a multiple of TOPICS, so keying by it put everything in one queue).
            nb = count // BATCH
            topic, queue = f"BenchTopic{nb % TOPICS}", (nb // TOPICS) % QUEUES
            batch = []
            for _ in range(BATCH):
                size = rng.randrange(200, 1800)
                at = rng.randrange(0, len(pool) - size)
                props = {"TAGS": f"Tag{count % 5}", "KEYS": f"order-{count} user-{count % 1000}"}
                batch.append(store.to_message_ext(Message(topic, pool[at : at + size], 0, props), queue))
                count += 1
            assert store.put_messages(batch).ok
        size = store.get_max_phy_offset()
    finally:
        store.close()
    return {"messages": count, "bytes": size, "seconds": time.perf_counter() - start}


# ---------------------------------------------------------------------------------------- scan


def scan_loop(root: Path) -> tuple[float, int]:
    """The baseline: every record of every file decoded by the codec, one at a time."""
    start = time.perf_counter()
    n = body = 0
    for f in list_data_files(root / "commitlog"):
        clf = CommitLogFile(f.path)
        walk = walk_records(clf.mm, 0, clf.size, clf.size)
        for pos in walk.positions:
            m = decode_record(clf.mm, pos)
            body += len(m.body)
            n += 1
        clf.close()
    return time.perf_counter() - start, n


def scan_bulk(root: Path) -> tuple[float, int]:
    """The source's decoder in one process, no Spark: walk + RecordBlock to Arrow batches."""
    start = time.perf_counter()
    n = 0
    for f in list_data_files(root / "commitlog"):
        clf = CommitLogFile(f.path)
        pos = np.frombuffer(walk_records(clf.mm, 0, clf.size, clf.size).positions, dtype=np.int64)
        for s in range(0, len(pos), 32768):
            n += RecordBlock(clf, pos[s : s + 32768]).record_batch().num_rows
        clf.close()
    return time.perf_counter() - start, n


def _session(master: str) -> Any:
    from rocketq.spark.session import get_session

    spark, _ = get_session(master, app_name="rocketq spark_bench", conf={"spark.driver.memory": "2g"})
    return spark


def _scan_query(spark: Any, root: Path, aggregate: bool = False) -> tuple[float, int]:
    """Every message read: ``count()`` (all rows decoded and handed to Spark as Arrow), or with
    *aggregate* also sums over body, keys and timestamps in the JVM."""
    from pyspark.sql import functions as F

    df = spark.read.format("rocketq").load(str(root))
    start = time.perf_counter()
    if not aggregate:
        n = df.count()
        return time.perf_counter() - start, n
    row = df.select(F.count("*").alias("n"), F.sum(F.length("body")), F.sum("storeSize"),
                    F.max("storeTimestamp"), F.sum(F.size("keys"))).collect()[0]  # fmt: skip
    return time.perf_counter() - start, int(row["n"])


def _warm_up(spark: Any) -> None:
    golden = Path(os.environ.get("ROCKETQ_GOLDEN", Path(__file__).resolve().parents[2] / "shared" / "golden"))
    store = golden / "rocketmq-4.9.4" / "clean" / "store"
    if store.is_dir():
        spark.read.format("rocketq").load(str(store)).count()
    else:
        spark.range(1000).count()


# -------------------------------------------------------------------------------------- rebuild


def _move(root: Path, suffix: str, back: bool = False) -> None:
    for name in ("consumequeue", "index"):
        a, b = root / name, root / f"{name}.{suffix}"
        src, dst = (b, a) if back else (a, b)
        if src.exists():
            if dst.exists():
                shutil.rmtree(dst)
            src.rename(dst)


def store_dispatch(root: Path) -> float:
    """The store's own dispatch of the whole commit log (reput from the first record, one thread)."""
    for name in ("consumequeue", "index"):
        shutil.rmtree(root / name, ignore_errors=True)
    store = MessageStore(_config(root))
    store.load()
    try:
        start = time.perf_counter()
        store.start()
        elapsed = time.perf_counter() - start
    finally:
        store.close()
    return elapsed


def _same_files(a: Path, b: Path) -> bool:
    def listing(d: Path) -> list[Path]:
        return sorted(p.relative_to(d) for p in d.rglob("*") if p.is_file())

    la, lb = listing(a), listing(b)
    if a.name.startswith("index"):
        return len(la) == len(lb) and all((a / x).read_bytes() == (b / y).read_bytes() for x, y in zip(la, lb,
                                                                                                       strict=True))
    return la == lb and all((a / x).read_bytes() == (b / x).read_bytes() for x in la)


# ------------------------------------------------------------------------------------------ run


def run(work: Path, gib: float, reps: int, reuse: bool = False) -> dict[str, Any]:
    root = work / "store"
    res: dict[str, Any] = {"cpus": os.cpu_count()}
    made = work / "store.json"
    if reuse and made.exists():
        res["store"] = json.loads(made.read_text())
        _move(root, "ref", back=True)
    else:
        print("generating the store ...", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)
        res["store"] = generate(root, gib)
        made.write_text(json.dumps(res["store"]))
    print(f"  {res['store']}", file=sys.stderr)
    n = res["store"]["messages"]
    mb = res["store"]["bytes"] / 1e6
    _move(root, "ref")
    gc.collect()
    loop = min(scan_loop(root)[0] for _ in range(reps))
    bulk = min(scan_bulk(root)[0] for _ in range(reps))
    res["scan_loop_s"], res["scan_bulk_1proc_s"] = loop, bulk
    print(f"  loop {loop:.1f} s, bulk {bulk:.1f} s", file=sys.stderr)
    for master in ("local[1]", "local[2]"):
        spark = _session(master)
        try:
            _warm_up(spark)
            runs = []
            for _ in range(reps):
                t, rows = _scan_query(spark, root)
                assert rows == n, (rows, n)
                runs.append(t)
            res[f"scan_{master}_s"] = min(runs)
            print(f"  scan {master} {min(runs):.1f} s", file=sys.stderr)
            if master == "local[2]":
                res["scan_aggregate_local[2]_s"] = min(_scan_query(spark, root, aggregate=True)[0]
                                                       for _ in range(reps))  # fmt: skip
                from rocketq.spark.export import export
                from rocketq.spark.rebuild import rebuild

                # The baseline and the job alternate, so that both see the same load of a shared machine; each
                # dispatch leaves the store's own files aside as the reference the rebuilt ones must equal.
                rb, dispatch = [], []
                for _ in range(reps):
                    dispatch.append(store_dispatch(root))
                    _move(root, "ref")
                    print(f"  store dispatch {dispatch[-1]:.1f} s", file=sys.stderr)
                    rb.append(rebuild(spark, _config(root)).seconds)
                    print(f"  rebuild {rb[-1]:.1f} s", file=sys.stderr)
                res["store_dispatch_s"], res["rebuild_s"] = min(dispatch), min(rb)
                res["rebuild_identical"] = all(_same_files(root / d, root / f"{d}.ref")
                                               for d in ("consumequeue", "index"))  # fmt: skip
                ex = []
                for i in range(reps):
                    out = work / f"export{i}"
                    start = time.perf_counter()
                    report = export(spark, str(root), str(out), fmt="parquet")
                    ex.append(time.perf_counter() - start)
                    res["export_parquet_bytes"] = report.bytes
                    shutil.rmtree(out, ignore_errors=True)
                res["export_parquet_s"] = min(ex)
        finally:
            spark.stop()
    res["ratios"] = {
        "scan_local2_vs_loop": loop / res["scan_local[2]_s"],
        "scan_local1_vs_loop": loop / res["scan_local[1]_s"],
        "scan_local2_vs_local1": res["scan_local[1]_s"] / res["scan_local[2]_s"],
        "scan_aggregate_local2_vs_loop": loop / res["scan_aggregate_local[2]_s"],
        "bulk_1proc_vs_loop": loop / bulk,
        "rebuild_vs_store_dispatch": res["store_dispatch_s"] / res["rebuild_s"],
    }
    res["rates"] = {
        "scan_loop_msgs_per_s": n / loop, "scan_bulk_msgs_per_s": n / bulk,
        "scan_local1_msgs_per_s": n / res["scan_local[1]_s"], "scan_local2_msgs_per_s": n / res["scan_local[2]_s"],
        "scan_local2_mb_per_s": mb / res["scan_local[2]_s"], "store_dispatch_msgs_per_s": n / res["store_dispatch_s"],
        "rebuild_msgs_per_s": n / res["rebuild_s"], "export_parquet_mb_per_s": mb / res["export_parquet_s"],
    }  # fmt: skip
    return res


def print_table(r: dict[str, Any]) -> None:
    s, rates, ratios = r["store"], r["rates"], r["ratios"]
    n_msgs = s["messages"]
    print(f"spark_bench: {s['messages']:,} messages, {s['bytes'] / (1 << 30):.2f} GiB of commit log, "
          f"{r['cpus']} CPUs; best of the runs")  # fmt: skip
    head = ("what", "seconds", "messages/s", "MB/s", "vs baseline", "target")
    rows = [
        ("scan: codec loop, 1 process (baseline)", r["scan_loop_s"], rates["scan_loop_msgs_per_s"], None, 1.0, None),
        ("scan: bulk decoder, 1 process, no Spark", r["scan_bulk_1proc_s"], rates["scan_bulk_msgs_per_s"], None,
         ratios["bulk_1proc_vs_loop"], None),
        ("scan: rocketq source, local[1]", r["scan_local[1]_s"], rates["scan_local1_msgs_per_s"], None,
         ratios["scan_local1_vs_loop"], None),
        ("scan: rocketq source, local[2]", r["scan_local[2]_s"], rates["scan_local2_msgs_per_s"],
         rates["scan_local2_mb_per_s"], ratios["scan_local2_vs_loop"], ">= 1.6"),
        ("scan + sums over body/keys/timestamps in the JVM, local[2]", r["scan_aggregate_local[2]_s"],
         n_msgs / r["scan_aggregate_local[2]_s"], None, ratios["scan_aggregate_local2_vs_loop"], None),
        ("store's own dispatch, 1 thread (baseline)", r["store_dispatch_s"], rates["store_dispatch_msgs_per_s"], None,
         1.0, None),
        ("rocketq spark rebuild, local[2]" + (" (identical)" if r["rebuild_identical"] else " (FILES DIFFER)"),
         r["rebuild_s"], rates["rebuild_msgs_per_s"], None, ratios["rebuild_vs_store_dispatch"], ">= 1.5"),
        ("rocketq spark export to Parquet, local[2]", r["export_parquet_s"], None, rates["export_parquet_mb_per_s"],
         None, None),
    ]  # fmt: skip
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for what, secs, rate, mbs, ratio, target in rows:
        print(" | ".join([what, f"{secs:.2f}", f"{rate:,.0f}" if rate else "", f"{mbs:,.1f}" if mbs else "",
                          f"{ratio:.2f}x" if ratio else "", target or ""]))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.05, help="commit-log size to generate in GiB (default 1.05)")
    ap.add_argument("--reps", type=int, default=2, help="repetitions per figure; the best is kept (default 2)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "spark_bench.json")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--reuse", action="store_true", help="reuse the store a --keep run left in --work")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="rocketq-spark-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        results = run(work, args.gib, args.reps, args.reuse)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

