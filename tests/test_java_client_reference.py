"""The Java client 4.9.4 against rocketq: transactions with check-back, and delayed sends (opt-in).

Runs only where ``RMQ_HOME`` points at an unpacked 4.9.4 binary release (``shared/reference/README.md``):
``tests/java/TxDelayCheck.java`` is compiled against its client jars with ``rmq-reference.sh`` and run
against ``rocketq start`` on free 127.0.0.1 ports. CI has no RocketMQ: skipped there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reference_support import JAVA_DIR, RMQ_HOME, SCRIPT, free_port, wait_listening

pytestmark = pytest.mark.reference


def test_java_transaction_producer_and_delayed_sends(tmp_path: Path) -> None:
    if not RMQ_HOME:
        pytest.skip("RMQ_HOME is not set: the reference RocketMQ 4.9.4 client is not available")
    env = dict(os.environ, RMQ_HOME=RMQ_HOME, RMQ_WORK=str(tmp_path / "rmq"))
    subprocess.run(["bash", str(SCRIPT), "compile-client", str(JAVA_DIR)], env=env, check=True, timeout=180,
                   capture_output=True)  # fmt: skip
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\n"
                    "transactionTimeOut=2000\ntransactionCheckInterval=2000\n")  # fmt: skip
    ns_port, broker_port = free_port(), free_port()
    server = subprocess.Popen([sys.executable, "-m", "rocketq", "start", "-c", str(conf), "--store",
                               str(tmp_path / "store"), "--namesrv-port", str(ns_port), "--broker-port",
                               str(broker_port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_listening(broker_port, time.monotonic() + 30)
        run = subprocess.run(["bash", str(SCRIPT), "java-client", "TxDelayCheck", f"127.0.0.1:{ns_port}"],
                             env=env, timeout=240, capture_output=True, text=True)  # fmt: skip
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        assert "bad=0" in run.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)
