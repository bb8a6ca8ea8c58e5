"""A rocketq job on a real standalone Spark cluster, started on loopback from the installed pyspark.

A master and a worker process (``spark-class ...deploy.master.Master`` /
``...deploy.worker.Worker``) run on 127.0.0.1; ``spark-submit`` runs a
driver against them with the package shipped as a zip (``--py-files``, as the
README shows). The executors' Python is started with
``-S`` and only the venv's site-packages on its path, so ``rocketq`` (installed
editable, through a ``.pth`` file) is not importable there except from the
shipped zip: the jobs pass only if shipping works. One driver runs two jobs
through the command line's ``main`` in one session: ``rebuild`` (tasks of its
own, writing files) and ``query`` (the data source: planned on the driver, read
on the executors).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import GOLDEN_STORE, copy_store

pytestmark = pytest.mark.spark

CLEAN = GOLDEN_STORE / "clean"
CONF = str(CLEAN / "broker.conf")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_home() -> Path:
    pyspark = pytest.importorskip("pyspark")
    return Path(pyspark.__file__).resolve().parent


def _without_rocketq(pythonpath: str) -> str:
    """*pythonpath* without the entries rocketq is imported from (a source tree on ``PYTHONPATH``, as the
    tests are run): the cluster must get the package only as shipped."""
    return os.pathsep.join(p for p in pythonpath.split(os.pathsep) if p and not (Path(p) / "rocketq").is_dir())


def _env(*, rocketq: bool = True) -> dict[str, str]:
    """The environment of the Spark processes; without *rocketq*, PYTHONPATH cannot import the package
    (the master, the worker and so the executors)."""
    env = dict(os.environ)
    if not rocketq and "PYTHONPATH" in env:
        env["PYTHONPATH"] = _without_rocketq(env["PYTHONPATH"])
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(_spark_home()), PYSPARK_DRIVER_PYTHON=sys.executable)
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    return env


def _wait_for_worker(ui_port: int, procs: list[subprocess.Popen[bytes]], logs: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                pytest.fail(f"a Spark daemon exited early; logs in {logs}:\n" + "".join(
                    f.read_text(errors="replace")[-2000:] for f in sorted(logs.glob("*.log"))))  # fmt: skip
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
                state = json.loads(r.read())
            if state.get("aliveworkers", 0) >= 1:
                return
        except (OSError, ValueError):  # not up yet, or its UI still answering with the HTML page: look again
            pass
        time.sleep(0.5)
    pytest.fail("the Spark worker did not register with the master in time")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = _spark_home()
    logs = tmp_path_factory.mktemp("spark-logs")
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    while len({port, ui, worker_ui}) < 3:  # each probe closes its socket: the same port can come back
        ui, worker_ui = _free_port(), _free_port()
    spark_class = str(home / "bin" / "spark-class")
    commands = {
        "master": [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                   "--webui-port", str(ui)],
        "worker": [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2",
                   "--memory", "1g", "--webui-port", str(worker_ui), "--work-dir", str(logs / "work"),
                   f"spark://127.0.0.1:{port}"],
    }  # fmt: skip
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name, cmd in commands.items():
            out = open(logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=_env(rocketq=False),
                                          start_new_session=True))  # fmt: skip
            out.close()
            if name == "master":
                time.sleep(1.0)
        _wait_for_worker(ui, procs, logs)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):  # the worker's group holds the executors it launched
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)


def _executor_python(tmp: Path) -> Path:
    """A Python for the executors that sees the venv's packages but not the editable rocketq."""
    site = sysconfig.get_paths()["purelib"]
    script = tmp / "executor-python"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{site}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -S "$@"\n')
    script.chmod(0o755)
    probe = subprocess.run([str(script), "-c", "import pyarrow, numpy, pyspark; import rocketq"], capture_output=True,
                           env=_env(rocketq=False))  # fmt: skip
    assert probe.returncode != 0 and b"No module named 'rocketq'" in probe.stderr, probe.stderr
    return script


JOB = """
import sys
from pyspark.sql import SparkSession
from rocketq.cli.main import main

spark = SparkSession.builder.appName("rocketq cluster test").getOrCreate()
store, conf = sys.argv[1], sys.argv[2]
codes = [
    main(["spark", "rebuild", store, "-c", conf, "-q", "--max-partition-bytes", "400000"]),
    main(["spark", "query", store, "--key", "shared", "--topic", "GoldenTopicB", "--json"]),
]
spark.stop()
sys.exit(max(codes))
"""


def _submit(master: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """spark-submit a driver that runs two rocketq jobs in one session (rebuild: tasks of its own;
    query: the data source), the package shipped with --py-files."""
    from rocketq.spark.session import package_zip

    zipped = package_zip(tmp / "rocketq.zip")
    job = tmp / "job.py"
    job.write_text(JOB)
    cmd = [
        str(_spark_home() / "bin" / "spark-submit"), "--master", master, "--py-files", str(zipped),
        "--conf", f"spark.pyspark.python={_executor_python(tmp)}",
        "--conf", f"spark.pyspark.driver.python={sys.executable}",
        "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
        str(job), *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=240, cwd=tmp)


def _failure(done: subprocess.CompletedProcess[str]) -> str:
    ours = [line for line in (done.stdout + done.stderr).splitlines() if "rocketq" in line or "Error" in line]
    return "\n".join(ours[-40:]) or done.stderr[-4000:]


def test_jobs_on_a_standalone_cluster(cluster: str, tmp_path: Path) -> None:
    store = copy_store(CLEAN / "store", tmp_path / "store")
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    done = _submit(cluster, tmp_path, str(store), CONF)
    assert done.returncode == 0, _failure(done)
    assert "from 1574 records in 12 commit-log ranges" in done.stdout
    for p in sorted((CLEAN / "store" / "consumequeue").rglob("*")):
        if p.is_file():
            assert (store / "consumequeue" / p.relative_to(CLEAN / "store" / "consumequeue")).read_bytes() == \
                p.read_bytes()
    found = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(found) == 120 and all("shared" in m["keys"] for m in found)
