"""rocketq on Apache Spark: the store as a PySpark data source, and jobs over it.

The ``spark`` layer of ARCHITECTURE.md (issue 6). Only this package imports
pyspark; its dependencies are the ``spark`` extra (``pip install 'rocketq[spark]'``:
pyspark, pyarrow, matplotlib).

- :func:`register_all` registers the rocketq data source on a session
  (registration is per SparkSession), format ``rocketq``
  (:mod:`rocketq.spark.source`): a store directory read in batch (option
  ``path``, :mod:`~rocketq.spark.store_scan`), a running broker read in batch
  and streaming (option ``namesrv``, :mod:`~rocketq.spark.broker_source`) and
  written in batch and streaming, idempotently per micro-batch
  (:mod:`~rocketq.spark.broker_sink`).
- Jobs, also ``rocketq spark <job>`` and ``spark-submit .../rocketq/spark/__main__.py <job>``:
  :mod:`~rocketq.spark.rebuild` (consume queues and index from the commit log),
  :mod:`~rocketq.spark.export` (Parquet/JSON by topic and date),
  :mod:`~rocketq.spark.stats` (per topic and queue, with a rate chart),
  :mod:`~rocketq.spark.query` (by key or time range).
- :mod:`~rocketq.spark.session`: the session the jobs run in (local by default).

The reading and writing themselves (:mod:`~rocketq.spark.commit_log_walk`,
:mod:`~rocketq.spark.record_decoder`, :mod:`~rocketq.spark.store_scan`,
:mod:`~rocketq.spark.broker_source`, :mod:`~rocketq.spark.broker_sink`) need
numpy and pyarrow but not pyspark.
"""

from __future__ import annotations

from typing import Any


def register_all(spark: Any) -> None:
    """Register rocketq's data source, format ``rocketq`` (a store with ``path``, a broker with ``namesrv``),
    on *spark*, a ``SparkSession``."""
    from rocketq.spark.source import RocketqDataSource

    spark.dataSource.register(RocketqDataSource)


__all__ = ["register_all"]
