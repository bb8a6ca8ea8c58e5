"""Reading a running broker in parallel pieces: the broker side of the ``rocketq`` data source.

What a RocketMQ pull consumer does (``DefaultMQPullConsumer``: the topic's route gives its queues,
GET_MIN_OFFSET / GET_MAX_OFFSET bound each queue, PULL_MESSAGE reads from a queue offset), done with
rocketq's own client (:class:`rocketq.client.blocking.BlockingPullConsumer`) and split for Spark:

- **a queue-offset range is the unit of work** (:class:`QueueSlice`): topic, broker, queue id,
  ``[begin, end)``. ``read`` pulls exactly that range (messages past ``end`` in the last pull are
  dropped) and yields Arrow record batches of the store source's schema
  (:data:`rocketq.spark.record_decoder.ARROW_SCHEMA`), so that a range read twice gives the same rows;
- **batch reads** (:class:`BrokerReader`): on the driver, every queue of the topics is bounded by its
  min/max offsets, ``startingOffsets`` / ``endingOffsets`` resolved against them (as for a store,
  Kafka's JSON form), and each range split every ``maxMessagesPerPartition``;
- **streaming reads** (:class:`BrokerStreamReader`): the offset of a micro-batch is a JSON object
  ``{"topic/queueId": next queue offset}`` with its keys sorted (Spark compares offsets as JSON text,
  spec spark-datasource §2.5). ``latestOffset`` asks the broker for each queue's max offset (one
  small request per queue, cheap enough to be polled) and applies the read limit
  (``maxMessagesPerTrigger`` → ``ReadMaxRows``, shared fairly among the queues that have messages);
  ``prepareForTriggerAvailableNow`` fixes the max offsets at the query's start and no batch goes past
  them. A batch reads ``[start[k], end[k])`` per queue: a replayed batch (restart from the
  checkpoint) reads the same ranges, hence the same rows, which with an idempotent sink (Spark's file
  sinks, :mod:`rocketq.spark.broker_sink`) gives every message exactly once in the output;
- **queues that appear later** (a topic whose queue count grew) enter the offsets at their min
  offset in one batch and are read from the next one on, so that no range ever depends on a lookup
  made while planning (which a replay could not repeat).

A range the broker no longer has (expired from the commit log, or a store that lost its tail) fails
the read with :class:`DataLossError` unless ``failOnDataLoss=false``, which skips it with a warning
(Kafka's option). Message bodies arrive inflated (the pull API inflates them); the ``properties``
column holds the stored properties, without the ``MIN_OFFSET``/``MAX_OFFSET`` a pull adds.

Offset keys name a queue by topic and queue id only, as RocketMQ's own consume offsets per broker do;
a topic whose queues live on more than one broker is refused with a clear error (its queue ids
repeat across brokers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from rocketq.client.blocking import BlockingPullConsumer
from rocketq.client.message_queue import MessageQueue
from rocketq.client.pull_result import PullStatus
from rocketq.common.errors import RocketqError
from rocketq.common.javacompat import decode_utf8_java
from rocketq.common.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
    string_to_properties,
)
from rocketq.common.message_json import host_to_string
from rocketq.spark import broker_clients
from rocketq.spark.broker_clients import PatientConsumer
from rocketq.spark.options import EARLIEST, LATEST, BrokerOptions
from rocketq.spark.record_decoder import ARROW_SCHEMA, COLUMNS, timestamp_array
from rocketq.store.dump import PULL_ADDED_PROPERTIES

log = logging.getLogger("rocketq.spark")

#: A queue offset per queue, keys ``"topic/queueId"`` in sorted order.
Offsets = dict[str, int]
ROUTE_TTL = 5.0  # seconds a streaming reader trusts the queues it found (a poll asks only for max offsets)


class DataLossError(RocketqError):
    """Messages a read needs are no longer on the broker (or were never stored there)."""


class OffsetRangeError(RocketqError):
    """An explicit offset past what a queue holds."""


class BrokerLayoutError(RocketqError):
    """A topic the broker source cannot read as asked (no route, queues on several brokers)."""


def queue_key(topic: str, queue_id: int) -> str:
    return f"{topic}/{queue_id}"


def sorted_offsets(offsets: dict[str, int]) -> Offsets:
    """The same offsets with keys in sorted order (Spark compares offsets as JSON text)."""
    return {k: int(offsets[k]) for k in sorted(offsets)}


@dataclass(frozen=True, slots=True)
class QueueSlice:
    """Messages of one queue from queue offset *begin* to *end* (exclusive)."""

    topic: str
    broker: str
    queue_id: int
    begin: int
    end: int

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)

    def describe(self) -> str:
        return f"queue {self.topic}/{self.queue_id} on {self.broker} [{self.begin}, {self.end})"


def consumer_of(opts: BrokerOptions) -> BlockingPullConsumer:
    """The pull consumer of the source's group in this process (:mod:`rocketq.spark.broker_clients`), patient
    with a broker or name server that cannot be reached for a while (:class:`PatientConsumer`)."""
    return PatientConsumer(broker_clients.pull_consumer(opts.namesrv, opts.consumer_group),  # type: ignore[return-value]
                           opts.broker_retry_seconds)  # fmt: skip


# ============================================================================ the queues of the topics


class QueueCatalog:
    """The queues of the source's topics and their offset bounds, asked of the broker (driver side)."""

    def __init__(self, opts: BrokerOptions, consumer: BlockingPullConsumer | None = None) -> None:
        self.opts = opts
        self._consumer = consumer  # None: the process's (tests give their own)

    @property
    def consumer(self) -> BlockingPullConsumer:
        return self._consumer if self._consumer is not None else consumer_of(self.opts)

    def queues(self) -> dict[str, MessageQueue]:
        """``"topic/queueId"`` → queue, for every readable queue of the topics (and option ``queues``)."""
        out: dict[str, MessageQueue] = {}
        for topic in self.opts.topics:
            try:
                mqs = self.consumer.fetch_subscribe_message_queues(topic)
            except (ConnectionError, TimeoutError):
                raise  # out of patience with an unreachable name server or broker: said as it is
            except RocketqError as e:
                raise BrokerLayoutError(f"topic {topic!r}: {e}") from None
            brokers = sorted({mq.broker_name for mq in mqs})
            if len(brokers) > 1:
                raise BrokerLayoutError(
                    f"topic {topic!r} has queues on brokers {', '.join(brokers)}: the rocketq source names a queue "
                    "by topic and queue id (offsets \"topic/queueId\") and reads topics served by one broker"
                )
            for mq in mqs:
                if self.opts.queue_matches(mq.queue_id):
                    out[queue_key(topic, mq.queue_id)] = mq
        return {k: out[k] for k in sorted(out)}

    def max_offsets(self, queues: dict[str, MessageQueue]) -> Offsets:
        return {k: self.consumer.max_offset(mq) for k, mq in queues.items()}

    def min_offsets(self, queues: dict[str, MessageQueue]) -> Offsets:
        return {k: self.consumer.min_offset(mq) for k, mq in queues.items()}

    def resolve(self, queues: dict[str, MessageQueue], spec_of: Any, option: str) -> Offsets:
        """Each queue's offset for a :class:`~rocketq.spark.options.OffsetSpec` of *option*: earliest is the
        first message the broker still has (see :meth:`first_readable`), latest its max offset; an explicit
        offset below the queue's min offset is data loss (failOnDataLoss), one past its max offset an error."""
        out: Offsets = {}
        for key, mq in queues.items():
            wanted = spec_of.for_queue(mq.topic, mq.queue_id)
            if wanted == LATEST:
                out[key] = self.consumer.max_offset(mq)
                continue
            lo, hi = self.consumer.min_offset(mq), self.consumer.max_offset(mq)
            if wanted == EARLIEST:
                out[key] = self.first_readable(mq, lo, hi)
            elif wanted > hi:
                raise OffsetRangeError(f"option {option}: queue {key} ends at offset {hi} on the broker; it cannot "
                                       f"be read from or to {wanted}")  # fmt: skip
            elif wanted < lo:
                text = f"option {option}: queue {key} now starts at offset {lo}: messages [{wanted}, {lo}) are gone"
                if self.opts.fail_on_data_loss:
                    raise DataLossError(f"{text}; read with option failOnDataLoss=false to skip them")
                log.warning("rocketq: %s; reading from %d (failOnDataLoss=false)", text, lo)
                out[key] = lo
            else:
                out[key] = wanted
        return out

    def first_readable(self, mq: MessageQueue, lo: int, hi: int) -> int:
        """The offset of the first message the broker can still serve in [*lo*, *hi*) (*hi* when none). A 4.9.4
        broker whose retention deleted a queue's messages may still report a min offset below them; a read
        from earliest starts past them, as nothing there could be read.

        The messages still there are the queue's last ones: a binary search with one-message pulls finds the
        first (a pull skips at most 800 removed units on a 4.9.4 broker, a queue can have millions), starting
        with a pull at *lo* itself, which settles a healthy queue at once."""
        low, high = lo, hi  # the first readable offset is in [low, high]; high == hi: none is
        mid = lo
        for _ in range(128):
            if low >= high:
                break
            result = self.consumer.pull(mq, "*", mid, 1)
            if result.messages:
                found = min(m.queue_offset for m in result.messages)
                if found > mid:  # [mid, found) gone, found there: the first, since all before mid is gone too
                    return found
                high = mid
            else:
                low = max(mid + 1, result.next_begin_offset)
            mid = (low + high) // 2
        return high


def plan_batch(opts: BrokerOptions) -> list[QueueSlice]:
    """The ranges of a batch read: per queue, ``startingOffsets`` to ``endingOffsets``, split every
    ``maxMessagesPerPartition``."""
    catalog = QueueCatalog(opts)
    queues = catalog.queues()
    begin = catalog.resolve(queues, opts.starting, "startingOffsets")
    end = catalog.resolve(queues, opts.ending, "endingOffsets")
    slices = []
    step = opts.max_partition_messages
    for key, mq in queues.items():
        for b in range(begin[key], end[key], step):
            slices.append(QueueSlice(mq.topic, mq.broker_name, mq.queue_id, b, min(b + step, end[key])))
    return slices


def plan_stream(queues: dict[str, MessageQueue], start: Offsets, end: Offsets) -> list[QueueSlice]:
    """The ranges of a micro-batch: ``[start[k], end[k])`` for every queue that moved. A queue missing from
    *start* entered the offsets with this batch and is read from the next one (see the module doc)."""
    slices = []
    for key in sorted(end):
        begin = start.get(key, end[key])
        if end[key] <= begin:
            continue
        mq = queues.get(key)
        if mq is None:
            raise BrokerLayoutError(f"queue {key} of the offsets is not in the topic's route any more")
        slices.append(QueueSlice(mq.topic, mq.broker_name, mq.queue_id, begin, end[key]))
    return slices


def share_limit(available: dict[str, int], budget: int) -> dict[str, int]:
    """How many of *available* messages per queue fit in *budget*: equal shares, what a queue cannot use
    going to the others (water filling), in key order so that the result is deterministic."""
    take = dict.fromkeys(available, 0)
    pending = [k for k in sorted(available) if available[k] > 0]
    while budget > 0 and pending:
        share = max(1, budget // len(pending))
        still = []
        for k in pending:
            if budget == 0:
                break
            got = min(share, available[k] - take[k], budget)
            take[k] += got
            budget -= got
            if take[k] < available[k]:
                still.append(k)
        pending = still
    return take


# ============================================================================ reading a range


def _loss(opts: BrokerOptions, part: QueueSlice, lo: int, hi: int, why: str) -> None:
    text = (f"{part.describe()}: messages [{lo}, {hi}) cannot be read: {why}")
    if opts.fail_on_data_loss:
        raise DataLossError(f"{text}; read with option failOnDataLoss=false to skip them")
    log.warning("rocketq: %s; skipped (failOnDataLoss=false)", text)


def pull_slice(consumer: BlockingPullConsumer, part: QueueSlice, opts: BrokerOptions) -> Iterator[list[MessageExt]]:
    """The messages of *part* in queue order, a pull at a time; gaps are data loss (see :func:`_loss`)."""
    mq = part.queue
    offset = part.begin
    while offset < part.end:
        result = consumer.pull(mq, "*", offset, min(opts.pull_batch_size, part.end - offset))
        nxt = result.next_begin_offset
        if result.status is PullStatus.FOUND and result.messages:
            msgs = []
            for m in result.messages:
                if m.queue_offset < offset or m.queue_offset >= part.end:
                    continue
                if m.queue_offset > offset:
                    _loss(opts, part, offset, m.queue_offset, "the broker skipped them")
                msgs.append(m)
                offset = m.queue_offset + 1
            if msgs:
                yield msgs
            if nxt > offset and offset < part.end:
                _loss(opts, part, offset, min(nxt, part.end), "the broker skipped them")
                offset = nxt
            continue
        if nxt > offset:
            _loss(opts, part, offset, min(nxt, part.end),
                  f"the broker has them no more (pull status {result.status.name}, next offset {nxt})")  # fmt: skip
            offset = nxt
        elif offset < result.min_offset:
            _loss(opts, part, offset, min(result.min_offset, part.end),
                  f"the queue now starts at {result.min_offset}")  # fmt: skip
            offset = result.min_offset
        else:
            _loss(opts, part, offset, part.end,
                  f"{result.status.name}: the queue ends at {result.max_offset} on the broker")  # fmt: skip
            return


def stored_properties(m: MessageExt) -> dict[str, str]:
    """The properties as stored (a pull adds ``MIN_OFFSET``/``MAX_OFFSET`` to the decoded ones)."""
    if m.properties_bytes is not None:
        return string_to_properties(decode_utf8_java(m.properties_bytes))
    return {k: v for k, v in m.properties.items() if k not in PULL_ADDED_PROPERTIES}


def messages_batch(msgs: list[MessageExt]) -> pa.RecordBatch:
    """The data source's row for each message (:data:`~rocketq.spark.record_decoder.ARROW_SCHEMA`), with the
    store source's conventions: keys split at spaces, hosts as ``ip:port``, timestamps in UTC."""
    props = [stored_properties(m) for m in msgs]
    keys = [p.get(PROPERTY_KEYS) for p in props]
    schema = ARROW_SCHEMA

    def col(name: str, values: Iterable[Any]) -> pa.Array:
        return pa.array(list(values), type=schema.field(name).type)

    def ms(values: Iterable[int]) -> pa.Array:
        return timestamp_array(np.fromiter(values, dtype=np.int64, count=len(msgs)))

    cols = {
        "topic": col("topic", (m.topic for m in msgs)),
        "queueId": col("queueId", (m.queue_id for m in msgs)),
        "queueOffset": col("queueOffset", (m.queue_offset for m in msgs)),
        "commitLogOffset": col("commitLogOffset", (m.commit_log_offset for m in msgs)),
        "storeSize": col("storeSize", (m.store_size for m in msgs)),
        "msgId": col("msgId", (m.offset_msg_id for m in msgs)),
        "uniqKey": col("uniqKey", (p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for p in props)),
        "tags": col("tags", (p.get(PROPERTY_TAGS) for p in props)),
        "keys": col("keys", (None if k is None else [t for t in k.split(" ") if t] for k in keys)),
        "body": col("body", (m.body for m in msgs)),
        "properties": col("properties", (list(p.items()) for p in props)),
        "flag": col("flag", (m.flag for m in msgs)),
        "sysFlag": col("sysFlag", (m.sys_flag for m in msgs)),
        "bodyCRC": col("bodyCRC", (m.body_crc for m in msgs)),
        "reconsumeTimes": col("reconsumeTimes", (m.reconsume_times for m in msgs)),
        "bornTimestamp": ms(m.born_timestamp for m in msgs),
        "storeTimestamp": ms(m.store_timestamp for m in msgs),
        "bornHost": col("bornHost", (host_to_string(m.born_host) for m in msgs)),
        "storeHost": col("storeHost", (host_to_string(m.store_host) for m in msgs)),
    }
    return pa.RecordBatch.from_arrays([cols[c] for c in COLUMNS], schema=schema)


def read_slice(part: QueueSlice | None, opts: BrokerOptions) -> Iterator[pa.RecordBatch]:
    """The rows of one range as Arrow record batches of at most ``batchRows`` rows."""
    if part is None:
        return
    pending: list[MessageExt] = []
    for msgs in pull_slice(consumer_of(opts), part, opts):
        pending.extend(msgs)
        if len(pending) >= opts.batch_rows:
            yield messages_batch(pending[: opts.batch_rows])
            pending = pending[opts.batch_rows :]
    if pending:
        yield messages_batch(pending)


# ============================================================================ streaming offsets


class StreamOffsets:
    """The driver-side state of a streaming read: the broker's queues and where a micro-batch may end."""

    def __init__(self, opts: BrokerOptions) -> None:
        self.opts = opts
        self.catalog = QueueCatalog(opts)
        self.queues: dict[str, MessageQueue] = {}
        self.target: Offsets | None = None  # fixed by Trigger.AvailableNow
        self._routed_at = -ROUTE_TTL

    def refresh(self, force: bool = True) -> dict[str, MessageQueue]:
        """The queues from the topics' routes; without *force*, the ones known if asked for lately
        (``latestOffset`` is polled many times a second while idle: the max offsets are all it needs)."""
        now = time.monotonic()
        if force or now - self._routed_at >= ROUTE_TTL:
            self.queues = self.catalog.queues()
            self._routed_at = now
        return self.queues

    def initial(self) -> Offsets:
        queues = self.refresh()
        return sorted_offsets(self.catalog.resolve(queues, self.opts.starting, "startingOffsets"))

    def fix_target(self) -> None:
        self.target = self.catalog.max_offsets(self.refresh())

    def latest(self, start: Offsets, max_rows: int | None) -> Offsets:
        """The end of the next micro-batch from *start*: every queue's max offset (capped by the
        availableNow target and by *max_rows*); new queues enter at their min offset."""
        queues = self.refresh(force=False)
        known = {k: mq for k, mq in queues.items() if k in start}
        new = {k: mq for k, mq in queues.items() if k not in start}
        top = self.catalog.max_offsets(known)
        if self.target is not None:
            top = {k: min(v, self.target.get(k, start[k])) for k, v in top.items()}
        end: Offsets = dict(start)
        begin = dict(start)
        if max_rows is not None and not self.opts.fail_on_data_loss:
            # A queue whose head retention deleted past where the stream stands: the read skips the gap (with a
            # warning), so the limit counts from the min offset, not one empty batch per limit's worth of it.
            for k, lo in self.catalog.min_offsets(known).items():
                begin[k] = max(begin[k], lo)
        available = {k: max(0, top[k] - begin[k]) for k in top}
        if max_rows is not None:
            available = share_limit(available, max_rows)
        for k, n in available.items():
            end[k] = max(begin[k] + n, start[k]) if n else start[k]
        end.update(self.catalog.min_offsets(new))
        return sorted_offsets(end)
