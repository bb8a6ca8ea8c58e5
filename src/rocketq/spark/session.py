"""The SparkSession rocketq's jobs run in: local by default, a cluster unchanged.

What spec spark-datasource §6–§7 found necessary, done in one place:

- **local by default**: ``local[*]`` unless a master is given, or the job runs
  under ``spark-submit`` (which chose the master already);
- **loopback**: for a local master (or a cluster master on 127.0.0.0/8)
  ``SPARK_LOCAL_IP=127.0.0.1`` and the driver bound to 127.0.0.1, so a host
  name that does not resolve cannot stop the JVM;
- **the workers' Python**: ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON``
  default to this interpreter (PySpark's default is whatever ``python3`` is
  on ``PATH``, often without pyarrow); ``spark.pyspark.python`` follows;
- **the package on executors**: on a cluster the ``rocketq`` package is zipped
  (:func:`package_zip`) and added with ``addPyFile`` (``--py-files`` ignores
  wheels); numpy and pyarrow must be installed on the workers;
- **registration**: :func:`rocketq.spark.register_all` on the session;
- UTC session time zone (dates of exported partitions do not depend on the
  machine), no UI, no console progress bar (the jobs draw their own:
  :class:`JobProgress`).
"""

from __future__ import annotations

import ipaddress
import os
import sys
import tempfile
import threading
import uuid
import zipfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlparse

DEFAULT_MASTER = "local[*]"
_SHIPPED: dict[int, str] = {}


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster")


def _loopback_master(master: str) -> bool:
    host = urlparse(master).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def under_spark_submit() -> bool:
    """Whether this Python process was started by ``spark-submit`` (its JVM is already up)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def configure_environment(master: str | None) -> None:
    """Environment a PySpark driver needs here (see the module doc); values already set are kept."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master is None or is_local_master(master) or _loopback_master(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def package_zip(dest: str | os.PathLike[str] | None = None) -> Path:
    """Zip the installed ``rocketq`` package (sources only) for ``--py-files`` / ``addPyFile``."""
    import rocketq

    src = Path(rocketq.__file__).resolve().parent
    out = Path(dest) if dest is not None else Path(tempfile.mkdtemp(prefix="rocketq-pkg-")) / "rocketq.zip"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(src.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix in (".py", ".pyi", ".typed"):
                z.write(p, Path("rocketq") / p.relative_to(src))
    os.replace(tmp, out)
    return out


def entry_script() -> Path:
    """The script ``spark-submit`` runs for ``rocketq spark <job>``: ``rocketq/spark/__main__.py``."""
    return Path(__file__).resolve().parent / "__main__.py"


def _context_running() -> bool:
    from pyspark import SparkContext

    return getattr(SparkContext, "_active_spark_context", None) is not None


def get_session(master: str | None = None, app_name: str = "rocketq", conf: Mapping[str, str] | None = None,
                ship: bool | None = None) -> tuple[Any, bool]:  # fmt: skip
    """The session to run a job in, and whether it was created here (the caller stops only those).

    An active session (a notebook, a test, spark-submit's) is reused as it is;
    the ``rocketq`` source is registered on it either way.
    """
    from pyspark.sql import SparkSession

    from rocketq.spark import register_all

    active = SparkSession.getActiveSession()
    if active is None and _context_running():
        # A session runs, not this thread's active one (PySpark keeps that per thread, and an interrupted call
        # can leave it unset): that session is used, and not stopped here (it would stop its owner's context).
        active = SparkSession.builder.getOrCreate()
    if active is not None:
        register_all(active)
        return active, False
    if master is None and not under_spark_submit():
        master = DEFAULT_MASTER
    configure_environment(master)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    if not under_spark_submit():  # spark-submit's own --conf / --master stand as given
        settings["spark.ui.enabled"] = "false"
        settings["spark.pyspark.python"] = os.environ["PYSPARK_PYTHON"]
        settings["spark.pyspark.driver.python"] = os.environ["PYSPARK_DRIVER_PYTHON"]
    if master is not None and (is_local_master(master) or _loopback_master(master)):
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        settings["spark.driver.host"] = "127.0.0.1"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("ROCKETQ_SPARK_LOG_LEVEL", "ERROR"))
    register_all(spark)
    actual = spark.sparkContext.master
    if ship if ship is not None else not is_local_master(actual):
        ship_package(spark)
    return spark, True


def ship_package(spark: Any) -> str | None:
    """Add a zip of the ``rocketq`` package to the session's executors (once per SparkContext).

    Nothing is added when ``spark-submit --py-files`` already ships a ``rocketq*.zip``.
    """
    sc = spark.sparkContext
    key = id(sc)
    if key not in _SHIPPED:
        submitted = sc.getConf().get("spark.submit.pyFiles", "") or ""
        if any(Path(p).name.startswith("rocketq") for p in submitted.split(",") if p):
            return None
        path = package_zip(Path(tempfile.mkdtemp(prefix="rocketq-pkg-")) / f"rocketq-{uuid.uuid4().hex[:8]}.zip")
        sc.addPyFile(str(path))
        _SHIPPED[key] = str(path)
    return _SHIPPED[key]


class JobProgress:
    """A tqdm bar of the tasks finished by the Spark jobs run inside the ``with`` block.

    The jobs are tagged with a job group; a thread polls ``statusTracker`` for
    their stages (the Python side of Spark has no task listener).
    """

    def __init__(self, spark: Any, desc: str, total: int, *, enabled: bool = True, unit: str = "task") -> None:
        self.sc = spark.sparkContext
        self.group = f"rocketq-{uuid.uuid4().hex[:12]}"
        self.desc = desc
        self.total = total
        self.enabled = enabled
        self.unit = unit
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar: Any = None

    def __enter__(self) -> JobProgress:
        self.sc.setJobGroup(self.group, self.desc)
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, file=sys.stderr, leave=False)
            self._thread = threading.Thread(target=self._poll, name="rocketq-progress", daemon=True)
            self._thread.start()
        return self

    def _done(self) -> int:
        tracker = self.sc.statusTracker()
        done = 0
        for job_id in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job_id)
            for stage_id in info.stageIds if info is not None else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
        return done

    def _poll(self) -> None:
        while not self._stop.wait(0.25):
            try:
                done = self._done()
            except Exception:  # pragma: no cover - the context may be stopping
                return
            if self._bar is not None and done > self._bar.n:
                self._bar.update(min(done, self.total) - self._bar.n)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        if self._bar is not None:
            if exc_type is None:
                self._bar.update(self.total - self._bar.n)
            self._bar.close()
        self.sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
