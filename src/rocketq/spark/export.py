"""``rocketq spark export DIR OUT``: a store's messages to Parquet or JSON files, partitioned by topic and date.

The ``rocketq`` source read (every column of :data:`rocketq.spark.source.SPARK_SCHEMA`,
bodies inflated) written with Spark's own writers under
``OUT/topic=<topic>/date=<yyyy-mm-dd>/`` (the date of the store timestamp, UTC);
in JSON the body is base64 and timestamps are ISO-8601, as Spark writes them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketq.spark.options import OptionError

FORMATS = ("parquet", "json")


@dataclass(slots=True)
class ExportReport:
    out: str
    format: str
    files: int
    bytes: int
    partitions: int
    rows: int | None  # counted from Parquet metadata; None for JSON

    def lines(self) -> list[str]:
        rows = f"{self.rows} messages, " if self.rows is not None else ""
        return [f"exported {rows}{self.partitions} topic/date partitions, {self.files} {self.format} files, "
                f"{self.bytes} bytes to {self.out}"]  # fmt: skip


def read_store(spark: Any, store: str, conf: str | None = None, options: Mapping[str, str] | None = None) -> Any:
    """The store as a DataFrame (the ``rocketq`` source, registered on *spark*)."""
    reader = spark.read.format("rocketq")
    if conf is not None:
        reader = reader.option("conf", conf)
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    return reader.load(str(store))


def _local_path(out: str) -> Path | None:
    """The local path an output names (a plain path or a ``file:`` URI), None for another file system's URI."""
    if "://" in out and not out.startswith("file:"):
        return None
    return Path(out.removeprefix("file://").removeprefix("file:")).expanduser()


def check_out_apart(store: str, out: str) -> None:
    """Refuse an output directory that is the store, inside it or holds it: writing there (and with overwrite,
    first deleting it) would destroy the store being read. A URI of another file system cannot overlap."""
    local = _local_path(out)
    if local is None:
        return
    out_path = local.resolve()
    store_path = Path(store).expanduser().resolve()
    if out_path == store_path or store_path in out_path.parents or out_path in store_path.parents:
        raise OptionError(f"the output {out} overlaps the store {store} (the same directory, or one inside the "
                          "other): writing there would destroy the store; give another directory")  # fmt: skip


def check_out_free(out: str, overwrite: bool) -> None:
    """Refuse an output directory that exists, unless *overwrite*, saying how to replace it (Spark's own refusal
    speaks of a save mode). An empty directory is taken: one left by an interrupted export, or made beforehand,
    holds nothing to lose, and Spark refuses it as it refuses any that exists."""
    path = _local_path(out)
    if overwrite or path is None or (not path.exists() and not path.is_symlink()):
        return
    if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
        path.rmdir()
        return
    raise OptionError(f"the output {out} already exists: give --overwrite to replace it, or another directory")


def export(spark: Any, store: str, out: str, *, fmt: str = "parquet", conf: str | None = None,
           options: Mapping[str, str] | None = None, overwrite: bool = False,
           progress: bool = False) -> ExportReport:  # fmt: skip
    """Write the store's messages to *out* (see the module doc)."""
    from pyspark.sql import functions as F

    from rocketq.spark.session import JobProgress

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    check_out_apart(store, out)
    check_out_free(out, overwrite)
    df = read_store(spark, store, conf, options)
    df = df.withColumn("date", F.to_date(F.col("storeTimestamp")))
    writer = df.write.partitionBy("topic", "date").mode("overwrite" if overwrite else "errorifexists")
    with JobProgress(spark, f"export to {fmt}", df.rdd.getNumPartitions(), enabled=progress):
        if fmt == "parquet":
            writer.parquet(str(out))
        else:
            writer.json(str(out))
    files = [p for p in Path(out).rglob("*") if p.is_file() and not p.name.startswith((".", "_"))]
    parts = {p.parent for p in files}
    rows = spark.read.parquet(str(out)).count() if fmt == "parquet" and files else (0 if not files else None)
    return ExportReport(str(out), fmt, len(files), sum(os.path.getsize(p) for p in files), len(parts), rows)
