"""RocketMQ's own benchmark producer against ``rocketq start`` and against the real Apache RocketMQ 4.9.4 broker,
in turns, in one run: issue #4's yardstick ("RocketMQ 4.9.4 with its own benchmark tool does 13-22k send TPS on
this kind of machine") measured against the real broker on the same machine at the same time.

Opt-in, like the ``reference`` tests: it needs the 4.9.4 binary release (``RMQ_HOME``) and the reference script
``rmq-reference.sh`` (in ``$ROCKETQ_REFERENCE``, by default ``../shared/reference`` beside the repository; its
README says how to get the release). Nothing of RocketMQ is part of the project.

Each round runs, for each system in turn, on free ports of 127.0.0.1:

- the server: ``rocketq start`` (name server and broker, ASYNC_FLUSH, store in a temporary directory), or the
  real name server and broker with the same file sizes (RocketMQ's defaults: 1 GiB commit-log files);
- ``org.apache.rocketmq.example.benchmark.Producer -w THREADS -s SIZE``: synchronous sends of SIZE-byte
  messages from THREADS threads, auto-creating its topic; it prints its send TPS for every 10 s.

The first ``--warmup`` seconds are left out (topic creation, the JIT); of the windows after them come the send
TPS (median), the average response time, failed sends, and the server process's CPU time (all its threads) per
message sent: throughput on a shared machine moves with what else runs, the CPU a message costs much less.

Prints a table and writes ``bench/results/java_bench.json``.

    RMQ_HOME=<the release> python bench/java_bench.py --rounds 3 --seconds 30
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_servers import RocketqServer, free_port, process_cpu_s, write_report

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "java_bench.json"
REFERENCE = Path(os.environ.get("ROCKETQ_REFERENCE", ROOT.parent / "shared" / "reference"))
SCRIPT = REFERENCE / "rmq-reference.sh"
BENCH_CLASS = "org.apache.rocketmq.example.benchmark.Producer"
WINDOW_S = 10.0  # the benchmark prints one line per 10 s window
MIN_WARMUP_S = 15.0  # the first line comes a window after the JVM has started (a few seconds)
_LINE = re.compile(r"Send TPS: (\d+) Max RT\(ms\): (\d+) Average RT\(ms\):\s*([\d.]+) Send Failed: (\d+)")
# RocketMQ's default file sizes (MessageStoreConfig), which rocketq start uses too; the script's own are tiny.
_REAL_BROKER_SIZES = ("mappedFileSizeCommitLog=1073741824", "mappedFileSizeConsumeQueue=6000000",
                      "maxHashSlotNum=5000000", "maxIndexNum=20000000")  # fmt: skip


class RealRocketMQ:
    """The real name server and broker, started and stopped through the reference script."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.namesrv_port = free_port()
        self.broker_port = free_port(also=(-2, 1))
        self.env = {**os.environ, "RMQ_WORK": str(workdir / "w"), "RMQ_NAMESRV_PORT": str(self.namesrv_port),
                    "NAMESRV_ADDR": self.namesrv}  # fmt: skip

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def _script(self, *args: str) -> None:
        subprocess.run(["bash", str(SCRIPT), *args], env=self.env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=180)  # fmt: skip

    def start(self) -> None:
        conf = self.workdir / "broker.conf"
        self._script("start-namesrv")
        self._script("write-broker-conf", str(conf), str(self.workdir / "store"), f"listenPort={self.broker_port}",
                     *_REAL_BROKER_SIZES)  # fmt: skip
        self._script("start-broker", str(conf))

    @property
    def pid(self) -> int | None:
        try:
            return int((self.workdir / "w" / "run" / "broker.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self._script("stop", "all")


def run_producer(namesrv: str, work: Path, server_pid: int | None, args: argparse.Namespace) -> dict[str, Any]:
    """Run the Java benchmark producer against *namesrv* for warm-up + seconds; its windows after the warm-up."""
    env = {**os.environ, "NAMESRV_ADDR": namesrv, "RMQ_WORK": str(work / "client")}
    cmd = ["bash", str(SCRIPT), "java-client", BENCH_CLASS, "-t", "BenchmarkTest", "-w", str(args.threads),
           "-s", str(args.size)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # fmt: skip
    windows: list[dict[str, Any]] = []
    start = time.monotonic()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = _LINE.search(line)
            if m:
                windows.append({"at": time.monotonic() - start, "tps": int(m[1]), "avg_rt_ms": float(m[3]),
                                "failed": int(m[4]), "server_cpu_s": process_cpu_s(server_pid)})  # fmt: skip

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = start + args.warmup + args.seconds + WINDOW_S / 2
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)  # the script's shell and the JVM it started
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    reader.join(10)
    before = [w for w in windows if w["at"] <= args.warmup]
    after = [w for w in windows if w["at"] > args.warmup]
    if not before or not after:
        # Its CPU per message needs a line at or before the end of the warm-up and one after it.
        raise SystemExit(f"java_bench: the benchmark producer printed {len(windows)} window(s) in "
                         f"{args.warmup + args.seconds:.0f} s, {len(before)} by the end of the warm-up "
                         "(did the JVM start? a longer --warmup or --seconds may help)")  # fmt: skip
    sent = sum(w["tps"] * WINDOW_S for w in after)
    cpu0, cpu1 = before[-1]["server_cpu_s"], after[-1]["server_cpu_s"]
    return {
        "send_tps": statistics.median(w["tps"] for w in after),
        "windows_tps": [w["tps"] for w in after],
        "avg_rt_ms": round(statistics.mean(w["avg_rt_ms"] for w in after), 3),
        "send_failed": after[-1]["failed"],
        "server_cpu_us_per_msg": round((cpu1 - cpu0) / sent * 1e6, 1) if cpu0 is not None and cpu1 is not None
        and sent else None,
    }


def run_round(system: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="java-bench-") as tmp:
        work = Path(tmp)
        server = RocketqServer(work) if system == "rocketq" else RealRocketMQ(work)
        try:
            server.start()
            if isinstance(server, RocketqServer):
                pid = server.proc.pid if server.proc is not None else None
            else:
                pid = server.pid
            return {"system": system, **run_producer(server.namesrv, work, pid, args)}
        finally:
            server.stop()


def table(rows: list[dict[str, Any]]) -> str:
    head = ["round", "system", "send TPS (median)", "10 s windows", "avg RT ms", "failed", "server CPU us/msg"]
    lines = [head]
    for r in rows:
        cpu = r["server_cpu_us_per_msg"]
        windows = " ".join(map(str, r["windows_tps"]))
        lines.append([str(r["round"]), r["system"], f"{r['send_tps']:,.0f}", windows, f"{r['avg_rt_ms']:.2f}",
                      str(r["send_failed"]), "-" if cpu is None else f"{cpu:.1f}"])  # fmt: skip
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in lines)


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the rounds, and rocketq's ratios to the real broker, round by round (the same conditions)."""
    by = {s: [r for r in rows if r["system"] == s] for s in ("rocketq", "rocketmq-4.9.4")}
    out: dict[str, Any] = {}
    for s, rs in by.items():
        cpus = [r["server_cpu_us_per_msg"] for r in rs if r["server_cpu_us_per_msg"] is not None]
        out[s] = {"send_tps": statistics.median(r["send_tps"] for r in rs) if rs else None,
                  "server_cpu_us_per_msg": statistics.median(cpus) if cpus else None}  # fmt: skip
    pairs = list(zip(by["rocketq"], by["rocketmq-4.9.4"], strict=False))
    out["tps_ratio_by_round"] = [round(a["send_tps"] / b["send_tps"], 3) for a, b in pairs if b["send_tps"]]
    out["cpu_ratio_by_round"] = [round(a["server_cpu_us_per_msg"] / b["server_cpu_us_per_msg"], 2) for a, b in pairs
                                 if a["server_cpu_us_per_msg"] and b["server_cpu_us_per_msg"]]  # fmt: skip
    tps = out["rocketq"]["send_tps"]
    out["target_13k_met"] = tps is not None and tps >= 13_000
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each system once a round (default 3)")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds a run (default 30)")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds left out at a run's start (default 20)")
    parser.add_argument("--threads", type=int, default=64, help="sending threads (default 64)")
    parser.add_argument("--size", type=int, default=1024, help="message size in bytes (default 1024)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.warmup < MIN_WARMUP_S or args.seconds < WINDOW_S:
        parser.error(f"--warmup must be at least {MIN_WARMUP_S:.0f} s (the JVM's start and a first 10 s window) and "
                     f"--seconds at least {WINDOW_S:.0f} s (one window)")  # fmt: skip
    if not os.environ.get("RMQ_HOME") or not SCRIPT.is_file() or shutil.which("java") is None:
        print(f"java_bench needs Java, RMQ_HOME (the RocketMQ 4.9.4 binary release) and {SCRIPT.name} "
              f"(set ROCKETQ_REFERENCE to its directory); see the reference README", file=sys.stderr)  # fmt: skip
        return 2
    rows: list[dict[str, Any]] = []
    for i in range(1, args.rounds + 1):
        for system in ("rocketq", "rocketmq-4.9.4"):
            row = {"round": i, **run_round(system, args)}
            rows.append(row)
            print(f"round {i} {system}: {row['send_tps']:,.0f} send TPS, {row['server_cpu_us_per_msg']} us CPU/msg",
                  flush=True)  # fmt: skip
    print()
    print(table(rows))
    result = summary(rows)
    print(f"\nrocketq / RocketMQ 4.9.4, round by round: send TPS {result['tps_ratio_by_round']}, "
          f"server CPU per message {result['cpu_ratio_by_round']}")  # fmt: skip
    write_report(args.out, "java_bench", {"settings": {k: v for k, v in vars(args).items() if k != "out"},
                                          "results": rows, "summary": result})  # fmt: skip
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
