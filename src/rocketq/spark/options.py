"""Options of the ``rocketq`` data source, parsed from the strings Spark hands over.

Spark passes every option as a string under a lower-cased key (spec
spark-datasource §2.2); this module turns them into picklable option objects
(they travel to the executors with the readers and writers) and rejects anything
it does not understand with an :class:`OptionError` naming the option.

One format serves a store directory and a running broker: :func:`source_kind`
tells them apart by ``path`` (a store) or ``namesrv`` (a broker), never both.

**A store directory** (:class:`ScanOptions`, :func:`parse_options`):

=====================  =====================================================================
option                 meaning
=====================  =====================================================================
``path``               the store directory (``storePathRootDir``); also ``.load(DIR)``
``conf``               a ``broker.conf`` with RocketMQ's property names (``storePathCommitLog`` …)
``topics``             comma-separated topic names
``topicPattern``       a regular expression a whole topic name must match
``queues``             comma-separated queue ids (with the topics, or of every topic)
``startingOffsets``    ``earliest`` (default), ``latest`` or JSON ``{"topic": {"queueId": offset}}``
``endingOffsets``      ``latest`` (default), ``earliest`` or JSON as above; exclusive. In the JSON
                       ``-2`` / ``"earliest"`` and ``-1`` / ``"latest"`` stand for the queue's ends
                       (Kafka's convention); queues not named take the default
``startTime``          store time from (inclusive): ms since the epoch or ISO-8601 (UTC if no zone)
``endTime``            store time until (exclusive), same forms
``mode``               ``FAILFAST`` (default): a corrupt record fails the read with its offset;
                       ``PERMISSIVE``: corrupt records are skipped and counted
``corruptRecordsPath`` with ``PERMISSIVE``: a directory that gets one JSON report per partition
                       that skipped records (see :func:`rocketq.spark.store_scan.corrupt_report`)
``checkCRC``           ``true``: also check each body against BODYCRC (default ``false``)
``maxPartitionBytes``  commit-log bytes per partition of a full scan (default 128 MiB)
``maxUnitsPerPartition``  consume-queue units per partition of a topic read (default 1 000 000)
``batchRows``          rows per Arrow batch (default 32 768)
=====================  =====================================================================

A read restricted by ``topics``, ``topicPattern``, ``queues`` or offsets goes
through the consume queues (one partition per queue-offset range); any other
read is a full scan of the commit log, one partition per file (or per
``maxPartitionBytes`` of a larger file). A store without consume queues is
scanned whole with the topic and queue filters applied per record; offsets then
cannot be honoured and are refused.

**A broker, read** (:class:`BrokerOptions`, :func:`parse_broker_options`):

===========================  ===============================================================
option                       meaning
===========================  ===============================================================
``namesrv``                  name server address(es), ``host:port`` separated by ``;``
``topic``                    the topic to read; several separated by commas
``queues``                   comma-separated queue ids (default: every readable queue)
``startingOffsets``          as for a store; default ``earliest`` for ``read``, ``latest`` for
                             ``readStream`` (Kafka's defaults)
``endingOffsets``            ``read`` only; as for a store, default ``latest`` (the max offsets
                             when the read is planned)
``maxMessagesPerTrigger``    ``readStream``: at most this many messages per micro-batch,
                             shared fairly among the queues that have some
``maxMessagesPerPartition``  ``read``: queue-offset ranges longer than this are split (100 000)
``failOnDataLoss``           ``true`` (default): a range the broker no longer has (expired from
                             the commit log) fails the read; ``false``: skip it with a warning
``consumerGroup``            the group the pulls are made in (``rocketq-spark``); nothing is
                             committed to it
``pullBatchSize``            messages asked per pull (32; the broker caps a pull at 32 too)
``batchRows``                rows per Arrow batch (as for a store)
``brokerRetrySeconds``       how long a call waits for a broker or name server it cannot reach
                             (refused, lost, timed out) before the read fails (60; 0: at once)
===========================  ===============================================================

**A broker, written** (:class:`SinkOptions`, :func:`parse_sink_options`): ``namesrv``;
``topic`` (for rows without a ``topic`` column or with a null one); ``producerGroup``
(``rocketq-spark-writer``); ``sendBatchSize`` (messages per SEND_BATCH_MESSAGE, 32);
``sendTimeout`` (seconds per send, 3); ``sendRetries`` (retries of a send whose outcome is
unknown, after checking that it did not arrive, 3); ``brokerRetrySeconds`` (as for reads: a broker
out of reach is waited for, 60).
"""

from __future__ import annotations

import datetime as _dt
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from rocketq.common.errors import RocketqError

EARLIEST: Final = -2
LATEST: Final = -1
DEFAULT_PARTITION_BYTES: Final = 128 << 20
DEFAULT_PARTITION_UNITS: Final = 1_000_000
DEFAULT_BATCH_ROWS: Final = 32768
MODES: Final = ("FAILFAST", "PERMISSIVE")


class OptionError(RocketqError):
    """An option of the data source that cannot be used; the message names it."""


# The options each use takes (as the module doc lists them). One that only another use takes is refused (a
# store read's startTime on a broker read would be dropped, and every message read); an unknown one that is
# nearly a known one is refused as a typo; others pass (Spark's own, such as checkpointLocation).
_STORE_READ: Final = ("path", "conf", "topics", "topicPattern", "queues", "startingOffsets", "endingOffsets",
                      "startTime", "endTime", "mode", "corruptRecordsPath", "checkCRC", "maxPartitionBytes",
                      "maxUnitsPerPartition", "batchRows")  # fmt: skip
_BROKER_READ: Final = ("namesrv", "topic", "queues", "startingOffsets", "endingOffsets", "maxMessagesPerTrigger",
                       "maxMessagesPerPartition", "failOnDataLoss", "consumerGroup", "pullBatchSize", "batchRows",
                       "brokerRetrySeconds")  # fmt: skip
_BROKER_WRITE: Final = ("namesrv", "topic", "producerGroup", "sendBatchSize", "sendTimeout", "sendRetries",
                        "brokerRetrySeconds")  # fmt: skip
_USES: Final = {"a store read": _STORE_READ, "a broker read": _BROKER_READ, "a write": _BROKER_WRITE}


def _check_names(opts: Mapping[str, str], use: str) -> None:
    """Refuse the options of *opts* (lower-case keys) that *use* does not take but another does, and near misses
    of its own names."""
    own = {name.lower(): name for name in _USES[use]}
    others = {name.lower(): (name, other) for other, names in _USES.items() if other != use for name in names}
    for key in opts:
        if key in own:
            continue
        if key in others:
            name, other = others[key]
            raise OptionError(f"option {name} is an option of {other}; {use} does not take it")
        near = difflib.get_close_matches(key, own, n=1, cutoff=0.85)
        if near:
            raise OptionError(f"option {key}: not an option of {use}; did you mean {own[near[0]]}?")


# Offsets per queue: topic -> queue id -> offset (or EARLIEST / LATEST); None: the default for every queue.
QueueOffsets = dict[str, dict[int, int]]


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """``startingOffsets`` / ``endingOffsets``: a default end and explicit offsets per queue."""

    default: int
    per_queue: QueueOffsets = field(default_factory=dict)

    def for_queue(self, topic: str, queue_id: int) -> int:
        return self.per_queue.get(topic, {}).get(queue_id, self.default)


@dataclass(frozen=True, slots=True)
class ScanOptions:
    path: str
    conf: str | None = None
    topics: tuple[str, ...] | None = None
    topic_pattern: str | None = None
    queues: tuple[int, ...] | None = None
    starting: OffsetSpec = OffsetSpec(EARLIEST)
    ending: OffsetSpec = OffsetSpec(LATEST)
    start_time: int | None = None
    end_time: int | None = None
    permissive: bool = False
    corrupt_records_path: str | None = None
    check_crc: bool = False
    max_partition_bytes: int = DEFAULT_PARTITION_BYTES
    max_partition_units: int = DEFAULT_PARTITION_UNITS
    batch_rows: int = DEFAULT_BATCH_ROWS

    @property
    def through_queues(self) -> bool:
        """Whether the read is restricted to topics / queues / offsets (consume-queue path)."""
        return bool(
            self.topics is not None or self.topic_pattern is not None or self.queues is not None
            or self.starting.per_queue or self.ending.per_queue
            or self.starting.default != EARLIEST or self.ending.default != LATEST
        )  # fmt: skip

    def topic_matches(self, topic: str) -> bool:
        """Whether *topic* is read: named in ``topics`` and matching ``topicPattern`` (when given);
        with neither, every topic, or only those the offsets JSON names."""
        if self.topics is not None and topic not in self.topics:
            return False
        if self.topic_pattern is not None and re.fullmatch(self.topic_pattern, topic) is None:
            return False
        if self.topics is None and self.topic_pattern is None:
            named = self.starting.per_queue.keys() | self.ending.per_queue.keys()
            if named and topic not in named:
                return False
        return True

    def queue_matches(self, queue_id: int) -> bool:
        return self.queues is None or queue_id in self.queues


def _text(options: Mapping[str, str], key: str) -> str | None:
    value = options.get(key.lower())
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _positive(options: Mapping[str, str], key: str, default: int) -> int:
    raw = _text(options, key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {key}: expected a positive integer, got {raw!r}") from None
    if value <= 0:
        raise OptionError(f"option {key}: expected a positive integer, got {raw!r}")
    return value


def _bool(options: Mapping[str, str], key: str, default: bool = False) -> bool:
    raw = _text(options, key)
    if raw is None:
        return default
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise OptionError(f"option {key}: expected true or false, got {raw!r}")


def parse_time(raw: str, key: str) -> int:
    """Milliseconds since the epoch from an integer or an ISO-8601 date/time (UTC when it has no zone)."""
    text = raw.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        t = _dt.datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise OptionError(
            f"option {key}: {raw!r} is neither milliseconds since the epoch nor an ISO-8601 time"
        ) from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return int(t.timestamp() * 1000)


def _offset_value(value: object, key: str, where: str) -> int:
    if isinstance(value, str):
        low = value.strip().lower()
        if low == "earliest":
            return EARLIEST
        if low == "latest":
            return LATEST
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionError(f'option {key}: {where}: expected an offset, -2, -1, "earliest" or "latest", got {value!r}')
    if value < EARLIEST:
        raise OptionError(f"option {key}: {where}: offset {value} is negative")
    return value


def parse_offsets(raw: str | None, key: str, default: int) -> OffsetSpec:
    """``earliest`` / ``latest`` / JSON ``{"topic": {"queueId": offset}}`` (Kafka's form)."""
    if raw is None:
        return OffsetSpec(default)
    low = raw.lower()
    if low == "earliest":
        return OffsetSpec(EARLIEST)
    if low == "latest":
        return OffsetSpec(LATEST)
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {key}: not earliest, latest or JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(doc, dict):
        raise OptionError(f'option {key}: expected a JSON object like {{"TopicA": {{"0": 10}}}}')
    per_queue: QueueOffsets = {}
    for topic, queues in doc.items():
        if not isinstance(queues, dict):
            raise OptionError(f"option {key}: topic {topic!r}: expected an object of queue id -> offset")
        table: dict[int, int] = {}
        for qid, value in queues.items():
            try:
                q = int(qid)
            except ValueError:
                raise OptionError(f"option {key}: topic {topic!r}: queue id {qid!r} is not a number") from None
            table[q] = _offset_value(value, key, f"{topic}/{q}")
        per_queue[topic] = table
    return OffsetSpec(default, per_queue)


def parse_options(options: Mapping[str, str]) -> ScanOptions:
    """A :class:`ScanOptions` from the data source's options (keys are lower-case)."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    path = _text(opts, "path")
    if path is not None and _text(opts, "topic") is None:  # (topic alone gets a hint of its own below)
        _check_names(opts, "a store read")
    if path is None:
        raise OptionError('option path: the store directory is required: .option("path", DIR) or .load(DIR)')
    topics_raw = _text(opts, "topics")
    if topics_raw is None and _text(opts, "topic") is not None:
        # the broker reader's spelling: ignoring it would read every topic of the store
        raise OptionError('option topic is an option of broker reads; a store read takes option topics: '
                          '.option("topics", "TopicA,TopicB")')  # fmt: skip
    topics = None
    if topics_raw is not None:
        topics = tuple(t.strip() for t in topics_raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option topics: no topic named")
    pattern = _text(opts, "topicPattern")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option topicPattern: not a regular expression: {e}") from None
    queues = _queue_ids(opts)
    mode = (_text(opts, "mode") or "FAILFAST").upper()
    if mode not in MODES:
        raise OptionError(f"option mode: expected FAILFAST or PERMISSIVE, got {mode!r}")
    start_raw, end_raw = _text(opts, "startTime"), _text(opts, "endTime")
    start_time = parse_time(start_raw, "startTime") if start_raw is not None else None
    end_time = parse_time(end_raw, "endTime") if end_raw is not None else None
    if start_time is not None and end_time is not None and end_time < start_time:
        raise OptionError(f"options startTime/endTime: the end {end_raw} is before the start {start_raw}")
    return ScanOptions(
        path=path,
        conf=_text(opts, "conf"),
        topics=topics,
        topic_pattern=pattern,
        queues=queues,
        starting=parse_offsets(_text(opts, "startingOffsets"), "startingOffsets", EARLIEST),
        ending=parse_offsets(_text(opts, "endingOffsets"), "endingOffsets", LATEST),
        start_time=start_time,
        end_time=end_time,
        permissive=mode == "PERMISSIVE",
        corrupt_records_path=_text(opts, "corruptRecordsPath"),
        check_crc=_bool(opts, "checkCRC"),
        max_partition_bytes=_positive(opts, "maxPartitionBytes", DEFAULT_PARTITION_BYTES),
        max_partition_units=_positive(opts, "maxUnitsPerPartition", DEFAULT_PARTITION_UNITS),
        batch_rows=_positive(opts, "batchRows", DEFAULT_BATCH_ROWS),
    )


# ============================================================================ which source


def source_kind(options: Mapping[str, str]) -> str:
    """``"store"`` when the options name a store directory (``path``), ``"broker"`` for a name server
    (``namesrv``); anything else is an :class:`OptionError`."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    path, namesrv = _text(opts, "path"), _text(opts, "namesrv")
    if path is not None and namesrv is not None:
        raise OptionError(f"options path and namesrv: give one: path (a store directory, {path!r}) or namesrv "
                          f"(a running broker's name server, {namesrv!r}), not both")  # fmt: skip
    if path is not None:
        return "store"
    if namesrv is not None:
        return "broker"
    raise OptionError('the rocketq format needs option path (a store directory: .load(DIR)) or option namesrv '
                      '(a broker\'s name server: .option("namesrv", "127.0.0.1:9876"))')  # fmt: skip


# ============================================================================ a broker

DEFAULT_CONSUMER_GROUP: Final = "rocketq-spark"
DEFAULT_PRODUCER_GROUP: Final = "rocketq-spark-writer"
DEFAULT_PARTITION_MESSAGES: Final = 100_000
DEFAULT_PULL_BATCH: Final = 32
DEFAULT_SEND_BATCH: Final = 32
DEFAULT_BROKER_RETRY_S: Final = 60.0


@dataclass(frozen=True, slots=True)
class BrokerOptions:
    namesrv: str
    topics: tuple[str, ...]
    queues: tuple[int, ...] | None = None
    starting: OffsetSpec = OffsetSpec(EARLIEST)
    ending: OffsetSpec = OffsetSpec(LATEST)
    max_messages_per_trigger: int | None = None
    max_partition_messages: int = DEFAULT_PARTITION_MESSAGES
    fail_on_data_loss: bool = True
    consumer_group: str = DEFAULT_CONSUMER_GROUP
    pull_batch_size: int = DEFAULT_PULL_BATCH
    batch_rows: int = DEFAULT_BATCH_ROWS
    broker_retry_seconds: float = DEFAULT_BROKER_RETRY_S

    def queue_matches(self, queue_id: int) -> bool:
        return self.queues is None or queue_id in self.queues


@dataclass(frozen=True, slots=True)
class SinkOptions:
    namesrv: str
    topic: str | None = None
    producer_group: str = DEFAULT_PRODUCER_GROUP
    send_batch_size: int = DEFAULT_SEND_BATCH
    send_timeout: float = 3.0
    send_retries: int = 3
    broker_retry_seconds: float = DEFAULT_BROKER_RETRY_S


def _namesrv(opts: Mapping[str, str]) -> str:
    namesrv = _text(opts, "namesrv")
    if namesrv is None:
        raise OptionError('option namesrv: the name server address is required, e.g. "127.0.0.1:9876"')
    for addr in (a.strip() for a in namesrv.replace(",", ";").split(";")):
        host, sep, port = addr.rpartition(":")
        if addr and (not sep or not host or not port.isdigit() or not 0 < int(port) < 65536):
            raise OptionError(f"option namesrv: {addr!r} is not host:port")
    return namesrv


def _queue_ids(opts: Mapping[str, str]) -> tuple[int, ...] | None:
    raw = _text(opts, "queues")
    if raw is None:
        return None
    try:
        queues = tuple(sorted({int(q) for q in raw.split(",") if q.strip()}))
    except ValueError:
        raise OptionError(f"option queues: expected comma-separated queue ids, got {raw!r}") from None
    if not queues or min(queues) < 0:
        raise OptionError(f"option queues: expected non-negative queue ids, got {raw!r}")
    return queues


def parse_broker_options(options: Mapping[str, str], *, streaming: bool) -> BrokerOptions:
    """A :class:`BrokerOptions` for ``read`` (*streaming* false) or ``readStream``."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    namesrv = _namesrv(opts)
    topics_raw = _text(opts, "topic")
    if topics_raw is not None:  # (topics alone gets a hint of its own below)
        _check_names(opts, "a broker read")
    if topics_raw is None:
        hint = " (topics is an option of store reads)" if _text(opts, "topics") is not None else ""
        raise OptionError(f'option topic: the topic to read is required: .option("topic", "TopicA"){hint}')
    topics = tuple(dict.fromkeys(t.strip() for t in topics_raw.split(",") if t.strip()))
    if not topics:
        raise OptionError("option topic: no topic named")
    ending_raw = _text(opts, "endingOffsets")
    if streaming and ending_raw is not None:
        raise OptionError("option endingOffsets: a stream has no end; use it with spark.read, or "
                          "trigger(availableNow=True) to stop at what is there when the query starts")  # fmt: skip
    starting = parse_offsets(_text(opts, "startingOffsets"), "startingOffsets", LATEST if streaming else EARLIEST)
    ending = parse_offsets(ending_raw, "endingOffsets", LATEST)
    for spec, key in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        other = set(spec.per_queue) - set(topics)
        if other:
            raise OptionError(f"option {key}: topic {sorted(other)[0]!r} is not read (option topic: {topics_raw})")
    per_trigger = _text(opts, "maxMessagesPerTrigger")
    return BrokerOptions(
        namesrv=namesrv,
        topics=topics,
        queues=_queue_ids(opts),
        starting=starting,
        ending=ending,
        max_messages_per_trigger=None if per_trigger is None else _positive(opts, "maxMessagesPerTrigger", 1),
        max_partition_messages=_positive(opts, "maxMessagesPerPartition", DEFAULT_PARTITION_MESSAGES),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", default=True),
        consumer_group=_text(opts, "consumerGroup") or DEFAULT_CONSUMER_GROUP,
        pull_batch_size=_positive(opts, "pullBatchSize", DEFAULT_PULL_BATCH),
        batch_rows=_positive(opts, "batchRows", DEFAULT_BATCH_ROWS),
        broker_retry_seconds=_retry_seconds(opts),
    )


def _retry_seconds(opts: Mapping[str, str]) -> float:
    """Option ``brokerRetrySeconds``: seconds >= 0."""
    raw = _text(opts, "brokerRetrySeconds")
    if raw is None:
        return DEFAULT_BROKER_RETRY_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise OptionError(f"option brokerRetrySeconds: expected seconds >= 0, got {raw!r}")
    return value


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """A :class:`SinkOptions` for ``write`` and ``writeStream``."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    _check_names(opts, "a write")
    timeout_raw = _text(opts, "sendTimeout")
    timeout = 3.0
    if timeout_raw is not None:
        try:
            timeout = float(timeout_raw)
        except ValueError:
            timeout = -1.0
        if not timeout > 0:
            raise OptionError(f"option sendTimeout: expected seconds > 0, got {timeout_raw!r}")
    retries_raw = _text(opts, "sendRetries")
    retries = 3
    if retries_raw is not None:
        if not retries_raw.isdigit():
            raise OptionError(f"option sendRetries: expected a count >= 0, got {retries_raw!r}")
        retries = int(retries_raw)
    return SinkOptions(
        namesrv=_namesrv(opts),
        topic=_text(opts, "topic"),
        producer_group=_text(opts, "producerGroup") or DEFAULT_PRODUCER_GROUP,
        send_batch_size=_positive(opts, "sendBatchSize", DEFAULT_SEND_BATCH),
        send_timeout=timeout,
        send_retries=retries,
        broker_retry_seconds=_retry_seconds(opts),
    )
