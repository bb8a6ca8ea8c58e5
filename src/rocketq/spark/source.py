"""The ``rocketq`` Spark data source: a store directory or a running broker, one row per message.

One format name for both, told apart by the options (:func:`rocketq.spark.options.source_kind`):
``path`` (or ``.load(DIR)``) is a store directory, ``namesrv`` a broker's name server; giving both or
neither is an error. PySpark's Python Data Source API (spec spark-datasource §2)::

    from rocketq.spark import register_all
    register_all(spark)

    # a store directory, batch (rocketq.spark.store_scan)
    df = spark.read.format("rocketq").load("/path/to/store")
    df = (spark.read.format("rocketq").option("topics", "TopicA,TopicB").option("queues", "0")
          .option("startingOffsets", '{"TopicA": {"0": 100}}').load("/path/to/store"))

    # a broker, batch and streaming (rocketq.spark.broker_source)
    df = spark.read.format("rocketq").option("namesrv", "127.0.0.1:9876").option("topic", "TopicA").load()
    stream = (spark.readStream.format("rocketq").option("namesrv", "127.0.0.1:9876").option("topic", "TopicA")
              .option("startingOffsets", "earliest").option("maxMessagesPerTrigger", 10000).load())

    # a broker as a sink, batch and streaming (rocketq.spark.broker_sink)
    df.select("topic", "body", "tags").write.format("rocketq").option("namesrv", "127.0.0.1:9876").mode("append").save()
    (stream.selectExpr("'TopicB' AS topic", "body").writeStream.format("rocketq")
     .option("namesrv", "127.0.0.1:9876").option("checkpointLocation", "/tmp/ck").start())

Both sources give the same columns (:data:`SPARK_SCHEMA`), which mirror RocketMQ's ``MessageExt``
getters and the fields of ``rocketq store dump``; options are those of :mod:`rocketq.spark.options`.
A store is read only (no streaming, no writes); a broker is read in batch and streaming and written
in batch and streaming.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
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

from rocketq.spark import broker_clients
from rocketq.spark.broker_sink import PartitionReport, check_sink_schema, produce_partition
from rocketq.spark.broker_source import Offsets, QueueSlice, StreamOffsets, plan_batch, plan_stream, read_slice
from rocketq.spark.options import (
    BrokerOptions,
    OptionError,
    ScanOptions,
    SinkOptions,
    parse_broker_options,
    parse_options,
    parse_sink_options,
    source_kind,
)
from rocketq.spark.store_scan import Partition, plan_scan, scan

FORMAT = "rocketq"
log = logging.getLogger("rocketq.spark")

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


class BrokerPartition(InputPartition):
    """One Spark task: a queue-offset range of a broker (``value``)."""

    def __init__(self, value: QueueSlice | None) -> None:
        super().__init__(value)


class RocketqDataSource(DataSource):
    """``format("rocketq")``: the messages of a store directory (``path``) or of a broker (``namesrv``)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        # Called at load(): the place where option mistakes are reported as themselves (an error raised
        # while Spark builds a stream reader reaches the user as an UnboundLocalError of its runner).
        if source_kind(self.options) == "store":
            parse_options(self.options)
        else:
            parse_broker_options(self.options, streaming=False)
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        if source_kind(self.options) == "store":
            return RocketqReader(parse_options(self.options))
        return BrokerReader(parse_broker_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if source_kind(self.options) == "store":
            raise OptionError("a store directory is read in batch only (spark.read); stream from a broker: "
                              'option("namesrv", ADDR).option("topic", T)')  # fmt: skip
        return BrokerStreamReader(parse_broker_options(self.options, streaming=True))

    def _sink_options(self, schema: StructType, overwrite: bool) -> SinkOptions:
        if source_kind(self.options) == "store":
            raise OptionError("a store directory cannot be written by Spark (write to a broker: option namesrv; "
                              "rebuild a store's consume queues and index: rocketq spark rebuild)")  # fmt: skip
        if overwrite:
            raise OptionError("mode overwrite: messages sent to a broker cannot be taken back; use mode append")
        opts = parse_sink_options(self.options)
        check_sink_schema({f.name: f.dataType.simpleString() for f in schema.fields}, opts)
        return opts

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return BrokerWriter(self._sink_options(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return BrokerStreamWriter(self._sink_options(schema, overwrite))


# ============================================================================ a store directory


class RocketqReader(DataSourceReader):
    """Plans partitions on the driver (directory listings, consume-queue files) and decodes them on executors."""

    def __init__(self, opts: ScanOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        return [StorePartition(p) for p in plan_scan(self.opts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return scan(partition.value, self.opts)


# ============================================================================ a broker, read


class BrokerReader(DataSourceReader):
    """Plans queue-offset ranges on the driver (route, min/max offsets) and pulls them on executors."""

    def __init__(self, opts: BrokerOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        return [BrokerPartition(p) for p in plan_batch(self.opts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_slice(partition.value, self.opts)


class BrokerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of queue-offset ranges (see :mod:`rocketq.spark.broker_source`).

    The driver methods run in one long-lived process per query and keep a broker connection
    (:class:`~rocketq.spark.broker_source.StreamOffsets`); ``read`` runs on executors in another instance
    and needs only what the partition carries.
    """

    def __init__(self, opts: BrokerOptions) -> None:
        self.opts = opts
        self._state: StreamOffsets | None = None

    @property
    def state(self) -> StreamOffsets:
        if self._state is None:
            self._state = StreamOffsets(self.opts)
        return self._state

    def initialOffset(self) -> dict:
        return self.state.initial()

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_messages_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        self.state.fix_target()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return self.state.latest(_offsets(start), max_rows)

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        state = self.state
        begin, stop = _offsets(start), _offsets(end)
        if any(k not in state.queues for k in stop if stop[k] > begin.get(k, stop[k])):
            state.refresh()  # a restarted query plans its replayed batch before any latestOffset
        return [BrokerPartition(p) for p in plan_stream(state.queues, begin, stop)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_slice(partition.value, self.opts)

    def commit(self, end: dict) -> None:
        return None  # nothing to release: ranges are re-read from the broker on replay

    def stop(self) -> None:
        self._state = None
        broker_clients.close_all()  # this process serves the query alone and ends with it


def _offsets(raw: dict) -> Offsets:
    return {str(k): int(v) for k, v in (raw or {}).items()}


# ============================================================================ a broker, written


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one task did: rows seen, sent, and found already stored by an earlier attempt."""

    partition: int
    rows: int
    sent: int
    already: int


def _commit_of(partition: int, report: PartitionReport) -> SinkCommit:
    return SinkCommit(partition, report.rows, report.sent, report.already)


def _task() -> TaskContext:
    ctx = TaskContext.get()
    if ctx is None:  # pragma: no cover - write() always runs in a task
        raise RuntimeError("the rocketq sink's write() ran outside a Spark task")
    return ctx


class BrokerWriter(DataSourceWriter):
    """``df.write.format("rocketq")``: each task produces its partition once, however often it is retried
    (the write id is made here, on the driver, and travels to every attempt)."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.write_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        part = _task().partitionId()
        rows = (r.asDict(recursive=True) for r in iterator)
        return _commit_of(part, produce_partition(rows, self.opts, self.write_id, "batch", part))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit("write", None, messages)


class BrokerStreamWriter(DataSourceStreamWriter):
    """``writeStream.format("rocketq")``: each micro-batch produced once per (query id, batch id)."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        ctx = _task()
        query_id = ctx.getLocalProperty("sql.streaming.queryId")
        batch_id = ctx.getLocalProperty("streaming.sql.batchId")
        if not query_id or batch_id is None:
            raise RuntimeError("the rocketq stream sink found no streaming query id / batch id in its task; "
                               "it cannot make its sends idempotent")  # fmt: skip
        part = ctx.partitionId()
        rows = (r.asDict(recursive=True) for r in iterator)
        return _commit_of(part, produce_partition(rows, self.opts, query_id, batch_id, part))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit("stream batch", batchId, messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        return None  # what was sent stays sent; the replay of batchId recognises it


def _log_commit(what: str, batch_id: int | None, messages: list[WriterCommitMessage | None]) -> None:
    done = [m for m in messages if isinstance(m, SinkCommit)]
    log.info("rocketq sink: %s%s: %d rows, %d sent, %d already stored", what,
             "" if batch_id is None else f" {batch_id}", sum(m.rows for m in done), sum(m.sent for m in done),
             sum(m.already for m in done))  # fmt: skip
