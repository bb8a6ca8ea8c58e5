"""Rows produced to a running broker: the ``rocketq`` sink of ``write`` and ``writeStream``.

Each row becomes one message, sent with rocketq's own producer
(:class:`rocketq.client.blocking.BlockingProducer`):

=================  =============================================================================
column             meaning
=================  =============================================================================
``topic``          string; rows without the column (or with null) go to option ``topic``
``body``           binary or string (UTF-8), required
``tags``           string, optional
``keys``           string (keys separated by spaces) or array of strings, optional
``properties``     map of string to string, optional: the message's properties; those the sink
                   sets itself (``TAGS``, ``KEYS``, ``UNIQ_KEY``, ``WAIT``) and those a broker
                   keeps for its own bookkeeping are ignored (see below); ``DELAY`` asks for a
                   delay level
``queueId``        integer, optional: that queue of the topic; null or absent: the producer's
                   round robin
=================  =============================================================================

Other columns are ignored, so a DataFrame read with the ``rocketq`` source can be written back as it
is (its ``queueId`` then pins the same queue ids). A stored message's properties say what the broker did
with it, and sent again they would make its copy something else: ``TRAN_MSG`` (with ``PGROUP`` and the
transaction check properties) would park a committed transaction message as a half message nobody
commits, and the ``DELAY`` a delivered delayed or retried message keeps (with ``REAL_TOPIC``) would delay
it again. The sink drops them, and ``CLUSTER``, ``MIN_OFFSET``, ``MAX_OFFSET``: a copy is a plain
message. Transactional messages cannot be produced with the sink.

Every row is checked before a partition sends anything (a body over the producer's limit, a topic
name RocketMQ refuses, a ``queueId`` the topic does not have): a bad row fails the task with nothing of
its partition sent. Consecutive rows of one topic and queue are sent
together (SEND_BATCH_MESSAGE, ``sendBatchSize`` rows) unless a row asks for a delay level.

**Idempotence: a replayed batch does not produce twice.** Spark replays a micro-batch with the same
batch id after a failure or a restart from the checkpoint (spec spark-datasource §2.7), and retries
failed tasks. The sink recognises what an earlier attempt already stored:

1. every row gets a deterministic ``UNIQ_KEY`` (the client message id the broker indexes), 32 hex
   digits: 20 from a hash of (write id, batch id, partition id), 12 for the row's position in its
   partition. The write id of a stream is its query id (``sql.streaming.queryId``, kept in the
   checkpoint, so the same across restarts) and the batch id Spark's (``streaming.sql.batchId``),
   both task-local properties Spark sets; a batch ``write`` makes a random write id when it is
   planned, shared by every attempt of its tasks;
2. a task sends its rows in order, one request after the other, each request stored whole, so what
   an earlier attempt stored is always a prefix of the partition's rows;
3. before sending, the task looks the key of its last row up in the broker's index (QUERY_MESSAGE by
   unique key: :meth:`rocketq.client.pull_consumer.PullConsumer.query_message_by_unique_key`). Found:
   the partition was produced, nothing is sent. Otherwise the key of the first row; if that is found
   too, a binary search over the keys finds where the stored prefix ends, and only the rest is sent
   (usually two lookups per partition and batch);
4. a send whose outcome is unknown (no answer, connection lost) is settled the same way: after a
   short wait its last key is looked up, and the send is repeated only when it is absent (up to
   ``sendRetries`` times). The producer's own retries are off: they would resend blindly.

What this relies on: a replayed batch has the same rows in the same partitions in the same order
(true for deterministic inputs such as the ``rocketq`` broker source or files, not after a shuffle
whose order varies); the broker indexes messages (``messageIndexEnable``, RocketMQ's default), and
its index catches up with the store within the short wait; messages with a delay level are found
only once delivered to their topic. Without these the sink is at least once. The streaming
``commit`` has nothing to do: the messages are in the broker once the tasks end.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rocketq.client.blocking import BlockingProducer, BlockingPullConsumer
from rocketq.client.errors import ClientError, InvalidMessageError, NoRouteError
from rocketq.client.message_queue import MessageQueue
from rocketq.client.producer import new_message
from rocketq.common.errors import RocketqError
from rocketq.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    Message,
)
from rocketq.spark import broker_clients
from rocketq.spark.broker_clients import PatientConsumer
from rocketq.spark.options import OptionError, SinkOptions
from rocketq.store.dump import PULL_ADDED_PROPERTIES

log = logging.getLogger("rocketq.spark")

#: the columns the sink reads, and the Spark type names each accepts
SINK_COLUMNS: dict[str, tuple[str, ...]] = {
    "topic": ("string",),
    "body": ("binary", "string"),
    "tags": ("string",),
    "keys": ("string", "array<string>"),
    "properties": ("map<string,string>",),
    "queueId": ("tinyint", "smallint", "int", "bigint"),
}
#: properties the sink sets from the columns or itself, and those a broker keeps for its own bookkeeping: those
#: of a ``properties`` map are ignored (a row read with the source carries them all; see the module doc)
_SET_BY_SINK = frozenset({PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
                          PROPERTY_WAIT_STORE_MSG_OK, *PULL_ADDED_PROPERTIES, PROPERTY_CLUSTER,
                          PROPERTY_TRANSACTION_PREPARED, PROPERTY_PRODUCER_GROUP, PROPERTY_TRANSACTION_CHECK_TIMES,
                          PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
                          PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS})  # fmt: skip
#: what a message delivered from ``SCHEDULE_TOPIC_XXXX`` (a delayed one, a retry) keeps of its delay: dropped
#: together when ``REAL_TOPIC`` says it was delivered
_DELIVERED_DELAY = (PROPERTY_DELAY_TIME_LEVEL, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)
MAX_REQUEST_BYTES = 1 << 20  # bodies per SEND_BATCH_MESSAGE, well under the broker's 4 MiB
IN_DOUBT_WAIT = 0.5  # seconds for the broker's index to catch up with a send that got no answer
UNREACHABLE_WAIT = 2.0  # seconds between tries while the broker cannot be reached (option brokerRetrySeconds)


class SinkError(RocketqError):
    """A row or a send the sink cannot complete; the message says which."""


def check_sink_schema(fields: Mapping[str, str], opts: SinkOptions) -> None:
    """Refuse, before any task runs, a DataFrame the sink cannot write (*fields*: column → simple type
    string, e.g. ``"binary"``, ``"array<string>"``)."""
    if "body" not in fields:
        raise OptionError(f"the rocketq sink needs a body column (binary or string); the columns are "
                          f"{', '.join(fields) or 'none'}")  # fmt: skip
    if "topic" not in fields and opts.topic is None:
        raise OptionError('the rocketq sink needs a topic column or option topic: .option("topic", "TopicA")')
    for name, accepted in SINK_COLUMNS.items():
        kind = fields.get(name)
        if kind is not None and kind not in accepted:
            raise OptionError(f"column {name}: type {kind} cannot be written; expected {' or '.join(accepted)}")


# ============================================================================ keys


def key_prefix(write_id: str, batch_id: str, partition: int) -> str:
    """The 20 hex digits shared by the keys of one partition of one batch of one write."""
    digest = hashlib.blake2b(f"{write_id}/{batch_id}/{partition}".encode(), digest_size=10).hexdigest()
    return digest.upper()


def row_key(prefix: str, position: int) -> str:
    """The ``UNIQ_KEY`` of the row at *position* of a partition (32 hex digits, like a client message id)."""
    return f"{prefix}{position:012X}"


# ============================================================================ rows → messages


def _text(value: Any, row: int, column: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise SinkError(f"row {row}: column {column} must be a string, got {type(value).__name__}")
    return value


def row_message(row: Mapping[str, Any], position: int, default_topic: str | None, key: str) -> Message:
    """The message of one row (see the module doc), with *key* as its ``UNIQ_KEY``."""
    topic = _text(row.get("topic"), position, "topic") or default_topic
    if not topic:
        raise SinkError(f"row {position}: no topic (a null topic column and no option topic)")
    body = row.get("body")
    if body is None:
        raise SinkError(f"row {position}: the body is null")
    if not isinstance(body, (bytes, bytearray, str)):
        raise SinkError(f"row {position}: the body must be binary or a string, got {type(body).__name__}")
    keys = row.get("keys")
    if keys is not None and not isinstance(keys, str):
        keys = [k for k in keys if k]
    props = row.get("properties") or {}
    props = {str(k): str(v) for k, v in (props.items() if isinstance(props, Mapping) else props)
             if v is not None and k not in _SET_BY_SINK}  # fmt: skip
    if PROPERTY_REAL_TOPIC in props:
        for name in _DELIVERED_DELAY:
            props.pop(name, None)
    try:
        msg = new_message(topic, body if isinstance(body, (bytes, str)) else bytes(body),
                          tags=_text(row.get("tags"), position, "tags"), keys=keys)  # fmt: skip
    except InvalidMessageError as e:
        raise SinkError(f"row {position}: {e}") from None
    # The map with its system names (DELAY asks for a delay level, the rest describe the message): new_message
    # takes user properties only.
    msg.properties.update(props)
    msg.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = key
    return msg


@dataclass(frozen=True, slots=True)
class Request:
    """Rows [first, last] of a partition sent in one request (to *queue_id*, or round robin when None)."""

    first: int
    last: int
    topic: str
    queue_id: int | None


def plan_requests(msgs: Sequence[Message], queue_ids: Sequence[int | None], batch: int) -> list[Request]:
    """Consecutive rows of one topic and queue in requests of at most *batch* rows and
    :data:`MAX_REQUEST_BYTES` of bodies; a delayed message alone (RocketMQ refuses them in batches)."""
    out: list[Request] = []
    i = 0
    n = len(msgs)
    while i < n:
        m = msgs[i]
        j = i + 1
        size = len(m.body)
        if PROPERTY_DELAY_TIME_LEVEL not in m.properties:
            while j < n and j - i < batch and msgs[j].topic == m.topic and queue_ids[j] == queue_ids[i] \
                    and PROPERTY_DELAY_TIME_LEVEL not in msgs[j].properties \
                    and size + len(msgs[j].body) <= MAX_REQUEST_BYTES:  # fmt: skip
                size += len(msgs[j].body)
                j += 1
        out.append(Request(i, j - 1, m.topic, queue_ids[i]))
        i = j
    return out


# ============================================================================ producing a partition


@dataclass
class PartitionReport:
    rows: int = 0
    sent: int = 0
    already: int = 0  # rows an earlier attempt had stored
    lookups: int = 0


class PartitionWriter:
    """Produces one partition of one batch exactly once (see the module doc); the broker is reached with
    the process's producer and, for the lookups, its pull consumer of the producer group."""

    def __init__(self, opts: SinkOptions, write_id: str, batch_id: str, partition: int) -> None:
        self.opts = opts
        self.prefix = key_prefix(write_id, batch_id, partition)
        self.report = PartitionReport()
        self._queues: dict[tuple[str, int], MessageQueue] = {}

    # --- clients (kept by the process: rocketq.spark.broker_clients) -------------------------------------
    @property
    def producer(self) -> BlockingProducer:
        return broker_clients.producer(self.opts.namesrv, self.opts.producer_group, self.opts.send_timeout)

    @property
    def lookup(self) -> BlockingPullConsumer:
        """The lookups' consumer, patient with a broker out of reach (``brokerRetrySeconds``)."""
        consumer = broker_clients.pull_consumer(self.opts.namesrv, self.opts.producer_group)
        return PatientConsumer(consumer, self.opts.broker_retry_seconds)  # type: ignore[return-value]

    # --- the protocol ---------------------------------------------------------------------------------
    def stored(self, msg: Message) -> bool:
        """Whether the broker's index has *msg*'s ``UNIQ_KEY`` in its topic."""
        self.report.lookups += 1
        key = msg.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        try:
            return bool(self.lookup.query_message_by_unique_key(msg.topic, key))
        except NoRouteError:
            return False  # the topic does not exist yet: nothing of it was stored
        except (ConnectionError, TimeoutError) as e:  # out of reach for longer than the lookup waited
            raise SinkError(f"looking up what {msg.topic} holds failed: {e} (for brokerRetrySeconds="
                            f"{self.opts.broker_retry_seconds:g} s)") from e  # fmt: skip

    def stored_prefix(self, msgs: Sequence[Message]) -> int:
        """How many of *msgs*, from the first, an earlier attempt stored (they are always a prefix)."""
        n = len(msgs)
        if n == 0 or self.stored(msgs[-1]):
            return n
        if not self.stored(msgs[0]):
            return 0
        lo, hi = 1, n - 1  # msgs[lo - 1] stored, msgs[hi] not: find the first one not stored
        while lo < hi:
            mid = (lo + hi) // 2
            if self.stored(msgs[mid]):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def write(self, rows: Iterable[Mapping[str, Any]]) -> PartitionReport:
        msgs: list[Message] = []
        queue_ids: list[int | None] = []
        for pos, row in enumerate(rows):
            msgs.append(row_message(row, pos, self.opts.topic, row_key(self.prefix, pos)))
            qid = row.get("queueId")
            queue_ids.append(None if qid is None else int(qid))
        self.report.rows = len(msgs)
        if not msgs:
            return self.report
        self._check(msgs, queue_ids)
        done = self.stored_prefix(msgs)
        self.report.already = done
        if done < len(msgs):
            for req in plan_requests(msgs[done:], queue_ids[done:], self.opts.send_batch_size):
                first, last = req.first + done, req.last + done
                self._send_settled(msgs[first : last + 1], queue_ids[first])
                self.report.sent += last - first + 1
        return self.report

    def _check(self, msgs: Sequence[Message], queue_ids: Sequence[int | None]) -> None:
        """Every row as the producer checks it before a send, and every pinned queue looked up, before anything
        of the partition is sent: a bad row leaves nothing half-written."""
        check = self.producer.producer.check_message
        for pos, msg in enumerate(msgs):
            try:
                check(msg)
            except InvalidMessageError as e:
                raise SinkError(f"row {pos}: {msg.topic}: {e}; nothing of this partition was sent") from None
        for pos, (msg, queue_id) in enumerate(zip(msgs, queue_ids, strict=True)):
            if queue_id is not None and (msg.topic, queue_id) not in self._queues:
                try:
                    self._queue(msg.topic, queue_id)
                except SinkError as e:
                    raise SinkError(f"row {pos}: {e}; nothing of this partition was sent") from None

    def _queue(self, topic: str, queue_id: int) -> MessageQueue:
        mq = self._queues.get((topic, queue_id))
        if mq is None:
            found = [q for q in self.producer.fetch_publish_message_queues(topic) if q.queue_id == queue_id]
            brokers = sorted({q.broker_name for q in found})
            if not found:
                raise SinkError(f"topic {topic!r} has no writable queue {queue_id}")
            if len(brokers) > 1:
                raise SinkError(f"topic {topic!r}: queue {queue_id} exists on brokers {', '.join(brokers)}; "
                                "a queueId column pins queues of topics served by one broker")  # fmt: skip
            mq = self._queues[(topic, queue_id)] = found[0]
        return mq

    def _send(self, msgs: Sequence[Message], queue_id: int | None) -> None:
        queue = None if queue_id is None else self._queue(msgs[0].topic, queue_id)
        if len(msgs) == 1:
            self.producer.send(msgs[0], queue=queue)
        else:
            self.producer.send_batch(list(msgs), queue=queue)

    def _send_settled(self, msgs: Sequence[Message], queue_id: int | None,
                      sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
        """Send one request; when its outcome is unknown, look before sending it again. A broker out of reach
        (connection refused or lost) is waited for up to ``brokerRetrySeconds`` without counting as a retry."""
        attempt = 0
        deadline: float | None = None  # when the broker has been out of reach too long
        while True:
            try:
                self._send(msgs, queue_id)
                return
            except InvalidMessageError as e:
                raise SinkError(f"{msgs[0].topic}: {e}") from None
            except ClientError as e:
                if isinstance(e, ConnectionError):  # refused or lost (a timeout is a send in doubt, below)
                    now = time.monotonic()
                    deadline = now + self.opts.broker_retry_seconds if deadline is None else deadline
                    if now < deadline:
                        log.warning("rocketq sink: a send to %s failed (%s); waiting for the broker",
                                    msgs[0].topic, e)  # fmt: skip
                        sleep(UNREACHABLE_WAIT)
                        if self.stored(msgs[-1]):  # (which waits for the broker too)
                            return
                        continue
                if attempt >= self.opts.send_retries:
                    raise SinkError(f"sending {len(msgs)} messages to {msgs[0].topic} failed {attempt + 1} times: "
                                    f"{e}") from e  # fmt: skip
                attempt += 1
                log.warning("rocketq sink: a send to %s failed (%s); checking whether it arrived", msgs[0].topic, e)
                sleep(IN_DOUBT_WAIT * attempt)
                if self.stored(msgs[-1]):
                    return


def produce_partition(rows: Iterator[Mapping[str, Any]], opts: SinkOptions, write_id: str, batch_id: str,
                      partition: int) -> PartitionReport:  # fmt: skip
    """Produce one partition exactly once (see the module doc) and say what was done."""
    return PartitionWriter(opts, write_id, batch_id, partition).write(rows)
