"""What the opt-in ``reference`` tests that run the real RocketMQ 4.9.4 Java tools share: where the release and
the reference script are, free ports, and waiting for a listener."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from conftest import GOLDEN

RMQ_HOME = os.environ.get("RMQ_HOME")
SCRIPT = Path(os.environ.get("ROCKETQ_REFERENCE", GOLDEN.parent / "reference")) / "rmq-reference.sh"
JAVA_DIR = Path(__file__).resolve().parent / "java"


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


@contextlib.contextmanager
def rocketq_start(conf: Path, store: Path) -> Iterator[tuple[str, str]]:
    """``rocketq start -c conf`` on free ports in a process of its own: (name server, broker) addresses once the
    broker listens and has registered; stopped with SIGINT (killed after 30 s) on the way out."""
    ns_port, broker_port = free_port(), free_port()
    server = subprocess.Popen([sys.executable, "-m", "rocketq", "start", "-c", str(conf), "--store", str(store),
                               "--namesrv-port", str(ns_port), "--broker-port", str(broker_port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_listening(broker_port, time.monotonic() + 30)
        time.sleep(1.0)  # the broker's first registration with the name server
        yield f"127.0.0.1:{ns_port}", f"127.0.0.1:{broker_port}"
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
