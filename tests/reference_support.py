"""What the opt-in ``reference`` tests that run the real RocketMQ 4.9.4 Java tools share: where the release and
the reference script are, free ports, and waiting for a listener."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_support import port_free
from conftest import GOLDEN

RMQ_HOME = os.environ.get("RMQ_HOME")
SCRIPT = Path(os.environ.get("ROCKETQ_REFERENCE", GOLDEN.parent / "reference")) / "rmq-reference.sh"
JAVA_DIR = Path(__file__).resolve().parent / "java"


def reference_ports() -> tuple[int, int]:
    """A name-server port and a broker port whose VIP (−2) and HA (+1) ports are free too."""
    import random

    for _ in range(200):
        ns, broker = random.randrange(21000, 29000), random.randrange(31000, 39000)
        if all(port_free(p) for p in (ns, broker, broker - 2, broker + 1)):
            return ns, broker
    raise RuntimeError("no free ports for the reference RocketMQ")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def reference_env(work: Path, **more: str) -> dict[str, str]:
    """The environment of ``rmq-reference.sh`` with its work directory under *work* (the test is skipped where
    ``RMQ_HOME`` is not set)."""
    if not RMQ_HOME:
        pytest.skip("RMQ_HOME is not set: the reference RocketMQ 4.9.4 is not available")
    work.mkdir(parents=True, exist_ok=True)
    return dict(os.environ, RMQ_HOME=RMQ_HOME, RMQ_WORK=str(work), **more)


def script(env: dict[str, str], *args: str, timeout: float = 180) -> str:
    """``rmq-reference.sh ARGS``: its output; a failure is the test's."""
    proc = subprocess.run(["bash", str(SCRIPT), *args], env=env, timeout=timeout, capture_output=True, text=True)
    assert proc.returncode == 0, f"rmq-reference.sh {' '.join(args)}: exit {proc.returncode}\n{proc.stdout[-3000:]}"
    return proc.stdout


def run_script(env: dict[str, str], args: list[str], timeout: float) -> tuple[int, str]:
    """``rmq-reference.sh ARGS`` in the script's work directory (``RMQ_WORK``: mqadmin's consumerStatus writes its
    report files into the working directory): its exit code and output. On timeout the process group is killed
    and its output so far returned with code -9."""
    proc = subprocess.Popen(["bash", str(SCRIPT), *args], env=env, cwd=env["RMQ_WORK"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        return -9, out


def mqadmin(env: dict[str, str], namesrv: str, *args: str, timeout: float = 60) -> str:
    """mqadmin 4.9.4's output of ``ARGS -n NAMESRV``; a failed command is the test's failure."""
    code, out = run_script(env, ["admin", *args, "-n", namesrv], timeout)
    assert code == 0 and "command failed" not in out, f"mqadmin {' '.join(args)}: exit {code}\n{out[-3000:]}"
    return out


@contextlib.contextmanager
def rocketmq_running(work: Path, *conf: str) -> Iterator[tuple[dict[str, str], str, int]]:
    """A 4.9.4 name server and broker (``write-broker-conf`` with the ``key=value`` lines *conf*, store under
    *work*) on free ports: (the script's environment, the name server's address, the broker's port). Everything
    the script started is stopped on the way out."""
    ns_port, broker_port = reference_ports()
    ns = f"127.0.0.1:{ns_port}"
    env = reference_env(work / "rmq", RMQ_NAMESRV_PORT=str(ns_port), NAMESRV_ADDR=ns)
    try:
        script(env, "start-namesrv")
        conf_file = work / "broker.conf"
        script(env, "write-broker-conf", str(conf_file), str(work / "store"), f"listenPort={broker_port}", *conf)
        script(env, "start-broker", str(conf_file))
        yield env, ns, broker_port
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", "all"], env=env, check=False, timeout=180, capture_output=True)


@contextlib.contextmanager
def rocketq_process(args: list[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m rocketq ARGS`` in a process of its own, once *port* listens; stopped with SIGINT (killed after
    30 s) on the way out. Its home is a directory of its own: a name server writes ``~/namesrv`` (its KV config,
    and updateNamesrvConfig's settings), which must not be the user's."""
    home = Path(tempfile.mkdtemp(prefix="rocketq-home-"))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq", *args], env=dict(os.environ, HOME=str(home)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_listening(port, time.monotonic() + 30)
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def rocketq_start(conf: Path, store: Path) -> Iterator[tuple[str, str]]:
    """``rocketq start -c conf`` on free ports in a process of its own: (name server, broker) addresses once the
    broker listens and has registered."""
    ns_port, broker_port = free_port(), free_port()
    with rocketq_process(["start", "-c", str(conf), "--store", str(store), "--namesrv-port", str(ns_port),
                          "--broker-port", str(broker_port)], broker_port):  # fmt: skip
        time.sleep(1.0)  # the broker's first registration with the name server
        yield f"127.0.0.1:{ns_port}", f"127.0.0.1:{broker_port}"


#: ``check(store, conf)``: StoreCheck's report of a store directory, judged with the ``broker.conf`` keys *conf*.
StoreChecker = Callable[[Path, dict[str, object]], dict[str, Any]]


def store_checker(work: Path) -> StoreChecker:
    """StoreCheck (beside the reference script: RocketMQ 4.9.4's own store code judging a store directory offline),
    compiled under *work* with ``tests/java/storecheck/GoldenClient.java``, the helpers it expects beside it.

    The checker asserts that RocketMQ could load the store (exit 0 or 1) and gives the report, a dict with the
    exit status under ``exit``; :func:`assert_clean` holds it to no problem at all."""
    env = reference_env(work / "rmq", RMQ_CLIENT_HEAP="1g")
    src = work / "src"
    src.mkdir(parents=True)
    shutil.copy(SCRIPT.parent / "java" / "StoreCheck.java", src)
    shutil.copy(JAVA_DIR / "storecheck" / "GoldenClient.java", src)
    script(env, "compile-client", str(src))
    runs = [0]

    def check(store: Path, conf: dict[str, object]) -> dict[str, Any]:
        runs[0] += 1
        conf_file = work / f"broker{runs[0]}.conf"
        conf_file.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
        out = work / f"report{runs[0]}.json"
        proc = subprocess.run(["bash", str(SCRIPT), "java-client", "StoreCheck", str(store), "--conf", str(conf_file),
                               "--all-keys", "--no-bodies", "--out", str(out)],
                              env=env, timeout=600, capture_output=True, text=True)  # fmt: skip
        assert proc.returncode in (0, 1) and out.exists(), \
            f"StoreCheck exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"  # fmt: skip
        report: dict[str, Any] = json.loads(out.read_text())
        report["exit"] = proc.returncode
        return report

    return check


def assert_clean(report: dict[str, Any]) -> None:
    """RocketMQ loaded the store, and found no problem in it: records, units, messages served, keys, configs."""
    assert report["load"]["ok"], report["load"]
    assert report["problems"] == [] and report["exit"] == 0, (report["storeDir"], report["problems"][:20])
    assert report["dispatch"]["behindAfter"] == 0
    assert report["commitLog"]["badRecords"] == 0 and report["commitLog"]["walkEnd"] == "end", report["commitLog"]
    cross = report["crossCheck"]
    assert cross["dispatchable"] == cross["dispatchableWithTheirUnit"] == cross["messagesServed"], cross
    index = report["indexCheck"]
    assert index["missing"] == 0 and index["found"] == index["lookups"], index
    for name in ("topics.json", "consumerOffset.json", "subscriptionGroup.json"):
        config = report["config"][name]
        assert not config["exists"] or config["parsed"], config
