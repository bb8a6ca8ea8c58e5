"""The servers the benchmarks run against, started and stopped by them: ``rocketq start`` (name server and
broker in one process) and ``redis-server`` (the baseline), each on free ports of 127.0.0.1.

Used by ``broker_bench.py``, ``client_bench.py`` and ``java_bench.py`` (imported as a sibling module: the scripts
run from this directory, and so do their worker processes), which also write their JSON reports the same way
(:func:`write_report`).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["RedisServer", "RocketqServer", "free_port", "process_cpu_s", "stop_process"]


def process_cpu_s(pid: int | None) -> float | None:
    """CPU seconds (user + system, all threads) a process has used so far; None where /proc cannot say.

    The benchmarks give a server's CPU time per message next to its throughput: on a shared machine throughput
    moves with what else runs, the CPU a message costs much less."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(also: tuple[int, ...] = ()) -> int:
    """A free port of 127.0.0.1 above 1100 whose neighbours at the offsets ``also`` are free too (a broker
    listens on its port − 2 as well)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port > 1100 and all(_port_free(port + d) for d in also):
            return port
    raise RuntimeError("no free port on 127.0.0.1")


def stop_process(proc: subprocess.Popen[Any] | None, sig: int = signal.SIGTERM) -> None:
    """Signal a server and wait for it (30 s, then it is killed)."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


class RocketqServer:
    """``rocketq start`` with its store in ``workdir``; ``broker_conf`` (``broker.conf`` properties) if given."""

    def __init__(self, workdir: Path, broker_conf: dict[str, str] | None = None,
                 env: dict[str, str] | None = None) -> None:  # fmt: skip
        """*env*: entries added to the server's environment (the broker's disk thresholds, say)."""
        self.workdir = workdir
        self.broker_conf = broker_conf
        self.env = env
        self.namesrv_port = free_port()
        self.broker_port = free_port(also=(-2, 1))
        self.proc: subprocess.Popen[str] | None = None

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def start(self) -> None:
        cmd = [sys.executable, "-m", "rocketq.cli.main", "start", "--store", str(self.workdir / "store"),
               "--namesrv-port", str(self.namesrv_port), "--broker-port", str(self.broker_port)]  # fmt: skip
        if self.broker_conf is not None:
            conf = self.workdir / "broker.conf"
            conf.write_text("".join(f"{k}={v}\n" for k, v in self.broker_conf.items()), encoding="utf-8")
            cmd += ["-c", str(conf)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, env={**os.environ, **(self.env or {})})  # fmt: skip
        assert self.proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "rocketq ready" in line:
                self._drain_log()
                return
        self.stop()
        raise RuntimeError("rocketq start did not come up:\n" + "".join(lines))

    def _drain_log(self) -> None:
        """Keep reading the broker's output after start: a broker whose log nobody reads blocks once the pipe is
        full (64 KiB of warnings, e.g. puts refused on a nearly full disk). Warnings and errors are counted."""
        self.log_counts: dict[str, int] = {"WARNING": 0, "ERROR": 0}
        self.log_tail: list[str] = []
        out = self.proc.stdout if self.proc is not None else None

        def drain() -> None:
            for line in out or ():
                for level in self.log_counts:
                    if f" {level} " in line:
                        self.log_counts[level] += 1
                        self.log_tail = [*self.log_tail[-9:], line.rstrip()]

        threading.Thread(target=drain, name="rocketq log", daemon=True).start()

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None


class RedisServer:
    """``redis-server`` with its files in ``workdir``, no RDB snapshots; ``appendfsync`` ``everysec`` (AOF,
    Redis's "flush about once a second") or ``None`` (no persistence)."""

    def __init__(self, workdir: Path, appendfsync: str | None = None) -> None:
        self.workdir = workdir
        self.appendfsync = appendfsync
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.version = ""

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server not found: install it (Debian: apt-get install -y redis-server)")
        persistence = ["--appendonly", "no"] if self.appendfsync is None else \
            ["--appendonly", "yes", "--appendfsync", self.appendfsync]  # fmt: skip
        cmd = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", *persistence,
               "--dir", str(self.workdir), "--protected-mode", "no"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)  # fmt: skip
        import redis

        client = redis.Redis(host="127.0.0.1", port=self.port)
        deadline = time.monotonic() + 20
        try:
            while True:
                try:
                    self.version = str(client.info("server")["redis_version"])
                    return
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        self.stop()
                        raise
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None


def write_report(out: Path, benchmark: str, body: dict[str, Any]) -> None:
    """Write a benchmark's JSON report to *out*: its name, when it ran and on what machine, then *body*."""
    doc = {
        "benchmark": benchmark,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        **body,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
