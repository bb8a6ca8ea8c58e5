"""Replication benchmark: master/slave replication of the store (``rocketq.store.ha``), with baselines measured in
the same run. The master's store runs in this process, the slave's in a process of its own (as two brokers would),
both on 127.0.0.1, 1 KiB messages with a tag and a key, dispatch on at both ends.

- **catch-up**: the master holds ``--catchup-mib`` MiB before the slave starts; timed from the slave's start until
  its commit log ends where the master's does and its consume queues are built. Baseline: the same bytes read from
  the master's file and written to a new one, then flushed: what the disk allows without a protocol or a dispatch;
- **SYNC_MASTER**: puts/s and put latency (p50/p99) of 1 and 64 asyncio writers (``aput_message``), each put
  answered once the slave has acknowledged it. Baselines: the same writers on an ASYNC_MASTER with the slave
  connected (answered at once), so the ratio is what waiting for the slave costs.

Prints a table and writes JSON (``--out``, default ``bench/results/ha_bench.json``).

    python bench/ha_bench.py [--seconds S] [--catchup-mib M]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_servers import write_report  # a sibling script: the benches run from this directory
from rocketq.common.message import Message
from rocketq.store.commit_log import PutMessageStatus
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig

TOPIC = "HaBench"
QUEUES = 8
BODY = 1024
FILE_SIZE = 1 << 30  # RocketMQ's default: an empty slave starts at the master's last file, here the only one

SLAVE = r"""
import sys, time
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig
root, master, file_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=file_size, broker_role="SLAVE")
store = MessageStore(cfg)
store.load(); store.start()
t0 = time.perf_counter()
store.start_ha(master_address=master)
sys.stdout.write("started\n"); sys.stdout.flush()
for line in sys.stdin:  # "END <offset>": report when caught up to it (dispatch included)
    end = int(line.split()[1])
    while store.get_max_phy_offset() < end:
        time.sleep(0.002)
    store.wait_dispatched(600)
    sys.stdout.write(f"{time.perf_counter() - t0:.6f}\n"); sys.stdout.flush()
store.close()
"""


def _config(root: Path, role: str) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=FILE_SIZE,
                              broker_role=role)  # fmt: skip


def _message(i: int, body: bytes) -> Message:
    return Message(TOPIC, body, 0, {"TAGS": "TagA", "KEYS": f"k-{i}"})


class Slave:
    """The slave's store in a process of its own."""

    def __init__(self, root: Path, master_port: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", SLAVE, str(root), f"127.0.0.1:{master_port}",
                                      str(FILE_SIZE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "started"

    def caught_up(self, end: int) -> float:
        """Seconds from the slave's start until it holds (and has dispatched) the master's log up to *end*."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"END {end}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def bench_catchup(work: Path, mib: int) -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    master = MessageStore(_config(work / "m", "ASYNC_MASTER"))
    master.load()
    master.start()
    body = os.urandom(BODY)
    i = 0
    while master.get_max_phy_offset() < mib << 20:
        batch = [master.to_message_ext(_message(i + j, body), (i // 64) % QUEUES) for j in range(64)]
        assert master.put_messages(batch).ok
        i += 64
    master.wait_dispatched(600)
    master.flush()
    end = master.get_max_phy_offset()
    # Baseline: the disk's copy of the same bytes, flushed.
    t0 = time.perf_counter()
    with open(work / "m" / "commitlog" / f"{0:020d}", "rb") as src, open(work / "copy", "wb") as dst:
        left = end
        while left > 0:
            left -= dst.write(src.read(min(left, 8 << 20)))
        dst.flush()
        os.fsync(dst.fileno())
    copy_s = time.perf_counter() - t0
    master.start_ha()
    assert master.ha_service is not None
    slave = Slave(work / "s", master.ha_service.port)
    try:
        seconds = slave.caught_up(end)
    finally:
        slave.stop()
        master.close()
    shutil.rmtree(work, ignore_errors=True)
    return {"bytes": end, "messages": i, "seconds": seconds, "mb_per_s": end / seconds / 1e6,
            "copy_seconds": copy_s, "copy_mb_per_s": end / copy_s / 1e6, "x_copy": copy_s / seconds}  # fmt: skip


def bench_puts(work: Path, role: str, writers: int, seconds: float) -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    master = MessageStore(_config(work / "m", role))
    master.load()
    master.start()
    master.start_ha()
    assert master.ha_service is not None
    slave = Slave(work / "s", master.ha_service.port)
    body = os.urandom(BODY)
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    try:
        deadline = time.monotonic() + 10
        while master.ha_service.connection_count == 0 and time.monotonic() < deadline:
            time.sleep(0.01)

        async def writer(w: int, stop: float) -> int:
            n = 0
            while time.perf_counter() < stop:
                t = time.perf_counter()
                r = await master.aput_message(_message(n, body), w % QUEUES)
                latencies.append(time.perf_counter() - t)
                statuses[r.status.name] = statuses.get(r.status.name, 0) + 1
                n += 1
            return n

        async def run() -> tuple[int, float]:
            t0 = time.perf_counter()
            counts = await asyncio.gather(*(writer(w, t0 + seconds) for w in range(writers)))
            return sum(counts), time.perf_counter() - t0

        total, elapsed = asyncio.run(run())
        slave.caught_up(master.get_max_phy_offset())
    finally:
        slave.stop()
        master.close()
    shutil.rmtree(work, ignore_errors=True)
    latencies.sort()
    ok = statuses.get(PutMessageStatus.PUT_OK.name, 0)
    return {"role": role, "writers": writers, "puts": total, "puts_per_s": total / elapsed, "put_ok": ok,
            "statuses": statuses, "p50_ms": latencies[len(latencies) // 2] * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each put run (default 4)")
    ap.add_argument("--catchup-mib", type=int, default=256, help="MiB the slave catches up on (default 256)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "ha_bench.json")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="rocketq-ha-bench-"))
    results: dict[str, Any] = {"body": BODY, "file_size": FILE_SIZE}
    try:
        results["catchup"] = c = bench_catchup(work / "c", args.catchup_mib)
        results["puts"] = rows = []
        for writers in (1, 64):
            base = bench_puts(work / "p", "ASYNC_MASTER", writers, args.seconds)
            sync = bench_puts(work / "p", "SYNC_MASTER", writers, args.seconds)
            sync["x_async"] = sync["puts_per_s"] / base["puts_per_s"]
            rows += [base, sync]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"ha_bench: {BODY} B bodies, {FILE_SIZE >> 20} MiB commit-log files, slave in its own process")
    print(f"catch-up of {c['bytes'] / (1 << 20):,.0f} MiB ({c['messages']:,} messages): {c['seconds']:.2f} s, "
          f"{c['mb_per_s']:,.0f} MB/s; file copy (baseline) {c['copy_seconds']:.2f} s, {c['copy_mb_per_s']:,.0f} "
          f"MB/s; replication at {c['x_copy']:.2f}x the copy's speed")  # fmt: skip
    head = ("role", "writers", "puts/s", "x ASYNC_MASTER", "p50 ms", "p99 ms", "answers")
    print(" | ".join(head))
    print(" | ".join("---" for _ in head))
    for r in rows:
        x = f"{r['x_async']:.2f}" if "x_async" in r else "-"
        print(" | ".join([r["role"], str(r["writers"]), f"{r['puts_per_s']:,.0f}", x, f"{r['p50_ms']:.3f}",
                          f"{r['p99_ms']:.3f}", ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))]))
    write_report(args.out, "ha_bench", results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
