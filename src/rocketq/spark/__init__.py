"""rocketq on Apache Spark: the store as a PySpark data source, and jobs over it.

The ``spark`` layer of ARCHITECTURE.md (issue 6, store side). Only this
package imports pyspark; its dependencies are the ``spark`` extra
(``pip install 'rocketq[spark]'``: pyspark, pyarrow, matplotlib).

- :func:`register_all` registers every rocketq data source on a session
  (registration is per SparkSession); today the ``rocketq`` batch source over a
  store directory (:mod:`rocketq.spark.source`). The broker source and sink are
  not built yet.
- Jobs, also ``rocketq spark <job>`` and ``spark-submit .../rocketq/spark/__main__.py <job>``:
  :mod:`~rocketq.spark.rebuild` (consume queues and index from the commit log),
  :mod:`~rocketq.spark.export` (Parquet/JSON by topic and date),
  :mod:`~rocketq.spark.stats` (per topic and queue, with a rate chart),
  :mod:`~rocketq.spark.query` (by key or time range).
- :mod:`~rocketq.spark.session`: the session the jobs run in (local by default).

The decoding itself (:mod:`~rocketq.spark.commit_log_walk`,
:mod:`~rocketq.spark.record_decoder`, :mod:`~rocketq.spark.store_scan`) needs
numpy and pyarrow but not pyspark.
"""

from __future__ import annotations

from typing import Any


def register_all(spark: Any) -> None:
    """Register rocketq's data sources (format ``rocketq``) on *spark*, a ``SparkSession``."""
    from rocketq.spark.source import RocketqDataSource

    spark.dataSource.register(RocketqDataSource)


__all__ = ["register_all"]
