"""Options of the ``rocketq`` data source, parsed from the strings Spark hands over.

Spark passes every option as a string under a lower-cased key (spec
spark-datasource §2.2); this module turns them into a :class:`ScanOptions`
(picklable, so it travels to the executors with each partition) and rejects
anything it does not understand with an :class:`OptionError` naming the option.

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
"""

from __future__ import annotations

import datetime as _dt
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


def _bool(options: Mapping[str, str], key: str) -> bool:
    raw = _text(options, key)
    if raw is None:
        return False
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
    if path is None:
        raise OptionError('option path: the store directory is required: .option("path", DIR) or .load(DIR)')
    topics_raw = _text(opts, "topics")
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
    queues = None
    queues_raw = _text(opts, "queues")
    if queues_raw is not None:
        try:
            queues = tuple(sorted({int(q) for q in queues_raw.split(",") if q.strip()}))
        except ValueError:
            raise OptionError(f"option queues: expected comma-separated queue ids, got {queues_raw!r}") from None
        if not queues or min(queues) < 0:
            raise OptionError(f"option queues: expected non-negative queue ids, got {queues_raw!r}")
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
