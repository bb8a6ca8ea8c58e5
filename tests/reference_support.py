"""What the opt-in ``reference`` tests that run the real RocketMQ 4.9.4 Java tools share: where the release and
the reference script are, free ports, and waiting for a listener."""

from __future__ import annotations

import os
import socket
import time
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
