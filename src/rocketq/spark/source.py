"""The ``rocketq`` Spark data source: a store directory read as one row per message.

The batch read of issue 6 over a RocketMQ store, with PySpark's Python Data
Source API (spec spark-datasource §2)::

    from rocketq.spark import register_all
    register_all(spark)
    df = spark.read.format("rocketq").load("/path/to/store")
    df = (spark.read.format("rocketq").option("topics", "TopicA,TopicB").option("queues", "0")
          .option("startingOffsets", '{"TopicA": {"0": 100}}').load("/path/to/store"))

Options are those of :mod:`rocketq.spark.options`; planning and reading are
:mod:`rocketq.spark.store_scan`; rows are built by
:mod:`rocketq.spark.record_decoder` as Arrow record batches. The columns mirror
RocketMQ's ``MessageExt`` getters and the fields of ``rocketq store dump``
(:data:`SPARK_SCHEMA`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from rocketq.spark.options import ScanOptions, parse_options
from rocketq.spark.store_scan import Partition, plan_scan, scan

FORMAT = "rocketq"

SPARK_SCHEMA = StructType([
    StructField("topic", StringType()),
    StructField("queueId", IntegerType()),
    StructField("queueOffset", LongType()),
    StructField("commitLogOffset", LongType()),
    StructField("storeSize", IntegerType()),
    StructField("msgId", StringType()),
    StructField("uniqKey", StringType()),
    StructField("tags", StringType()),
    StructField("keys", ArrayType(StringType())),
    StructField("body", BinaryType()),
    StructField("properties", MapType(StringType(), StringType())),
    StructField("flag", IntegerType()),
    StructField("sysFlag", IntegerType()),
    StructField("bodyCRC", IntegerType()),
    StructField("reconsumeTimes", IntegerType()),
    StructField("bornTimestamp", TimestampType()),
    StructField("storeTimestamp", TimestampType()),
    StructField("bornHost", StringType()),
    StructField("storeHost", StringType()),
])  # fmt: skip


class StorePartition(InputPartition):
    """One Spark task: a commit-log byte range or a consume-queue offset range (``value``)."""

    def __init__(self, value: Partition | None) -> None:
        super().__init__(value)


class RocketqDataSource(DataSource):
    """``spark.read.format("rocketq")``: the messages of a store directory."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return RocketqReader(parse_options(self.options))


class RocketqReader(DataSourceReader):
    """Plans partitions on the driver (directory listings, consume-queue files) and decodes them on executors."""

    def __init__(self, opts: ScanOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        return [StorePartition(p) for p in plan_scan(self.opts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return scan(partition.value, self.opts)
