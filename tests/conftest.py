"""Shared fixtures: the golden data written by Apache RocketMQ 4.9.4, read in place."""

from __future__ import annotations

import json
import os
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(os.environ.get("ROCKETQ_GOLDEN", Path(__file__).resolve().parents[2] / "shared" / "golden"))
GOLDEN_STORE = GOLDEN / "rocketmq-4.9.4"

# A test host's disk may be fuller than RocketMQ's defaults allow (90 % used marks a store disk-full and
# refuses puts; 85 % deletes commit-log files forcibly). Raise both, the way 4.9 does with its system
# properties, for every store of the run and the brokers it starts as subprocesses; tests of the
# thresholds clear them.
os.environ.setdefault("rocketmq.broker.diskSpaceWarningLevelRatio", "0.99")
os.environ.setdefault("rocketmq.broker.diskSpaceCleanForciblyRatio", "0.99")

# gRPC's fork handlers off for this process, before any test module imports grpc (gRPC reads the variable at
# import). test_grpc_proxy serves gRPC in this process; with the handlers on, gRPC 1.81 and later restart their
# poller thread in every child forked afterwards, where subprocess closes the descriptors before the exec, and
# about 1 child in 100 died before it could exec (grpc/grpc#43055): once it was the Java gateway of the Spark
# session, and all the Spark tests failed with it. (Children started with vfork, as most are, never run them.)
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


def pytest_sessionstart(session: pytest.Session) -> None:
    # The golden data is part of the test contract (CI has it beside the clone): a missing
    # copy is an error, never a reason to skip.
    if not (GOLDEN_STORE / "clean" / "store" / "commitlog").is_dir():
        raise pytest.UsageError(f"golden RocketMQ data not found at {GOLDEN_STORE}; set ROCKETQ_GOLDEN")


@cache
def load_json(path: str) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def golden_clean() -> Path:
    d = GOLDEN_STORE / "clean"
    if not d.is_dir():
        pytest.fail(f"golden data missing at {d} (set ROCKETQ_GOLDEN)")
    return d


@pytest.fixture(scope="session")
def golden_crashed() -> Path:
    d = GOLDEN_STORE / "crashed"
    if not d.is_dir():
        pytest.fail(f"golden data missing at {d} (set ROCKETQ_GOLDEN)")
    return d


@pytest.fixture(scope="session")
def clean_manifest(golden_clean: Path) -> dict[str, Any]:
    return load_json(str(golden_clean / "manifest.json"))


@pytest.fixture(scope="session")
def clean_dump(golden_clean: Path) -> dict[str, Any]:
    return load_json(str(golden_clean / "commitlog-dump.json"))


def copy_store(src: Path, dst: Path) -> Path:
    """Copy a golden store (read-only files) to a writable place."""
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


# --- Spark (tests marked ``spark``) -------------------------------------------------------------


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The one local SparkSession of the test run (local[2], loopback, rocketq sources registered)."""
    pytest.importorskip("pyspark")
    from rocketq.spark.session import get_session

    session, created = get_session(
        "local[2]",
        app_name="rocketq-tests",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.warehouse.dir": str(tmp_path_factory.mktemp("warehouse")),
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        },
    )
    session.sparkContext.setLogLevel("OFF")  # intentionally failing tasks would print stack traces
    yield session
    if created:
        session.stop()
