"""The commit log: RocketMQ's ``CommitLog`` (store-format §3, §10, §11).

Every message of every topic is appended to one run of mapped files under
``commitlog/``. An append that does not leave 8 free bytes behind it in the
current file ends that file with a BLANK record (i32 free length, i32
0xCBD43194) and goes to the next file, so a record never spans two files.

Messages are appended by :meth:`CommitLog._put_one` (one message) and
:meth:`CommitLog._put` (a list of messages): records are encoded by
:func:`rocketq.common.codec.record_parts` (the one encoder) and joined into one
buffer outside the lock; under the put lock the queue offsets are assigned from
the in-memory table ``topic_queue_table`` (``"<topic>-<queueId>"`` → next
offset, rebuilt from the consume queues at start-up), the three append-time
fields are filled in, and the buffer goes into the mapped file with one slice
assignment. A batch send as the broker takes it, column by column
(``MessageExtBatch``), goes through :meth:`CommitLog.put_message_batch`, which
does the same with a pass in C per column instead of a Python step per message
(:class:`rocketq.common.codec.PreparedBatch`, held to ``record_parts`` by test). While dispatch runs, each record
appended also leaves a dispatch row (:mod:`rocketq.store.dispatch`) in
``handoff``, so the reput service need not parse back what was just encoded.
"""

from __future__ import annotations

import logging
import mmap
import struct
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from enum import Enum
from itertools import accumulate, repeat
from operator import methodcaller

import numpy as np

from rocketq.common.codec import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    QUEUE_OFFSET_POS,
    SYSFLAG_POS,
    PreparedBatch,
    PropertiesTooLongError,
    RecordInfo,
    check_record,
    encode_blank,
    encode_one,
    encode_records,
    read_size_and_magic,
    store_timestamp_pos,
)
from rocketq.common.javacompat import (
    decode_utf8_java,
    hashmap_ordered,
    java_hashes_of_ranges,
    java_string_hash,
    parse_java_int,
)
from rocketq.common.message import (
    BORNHOST_V6_FLAG,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    HostPort,
    MessageExt,
    MessageExtBatch,
    producer_batch_size,
    string_to_properties,
    transaction_type,
)
from rocketq.common.message_id import create_offset_message_id
from rocketq.common.mixall import RMQ_SYS_SCHEDULE_TOPIC
from rocketq.store.dispatch import DispatchBatch, DispatchRequest, empty_properties
from rocketq.store.mapped_file import MappedFile
from rocketq.store.mapped_file_queue import MappedFileQueue
from rocketq.store.record_scan import (
    PropertyValues,
    RecordRun,
    find_dispatch_properties,
    pick_dispatch_properties_of_raws,
    same_topic,
    split_key_tokens,
    walk_records,
)
from rocketq.store.recovery import RecoveryDispatch, RecoveryReport, scan_commit_log
from rocketq.store.store_config import MessageStoreConfig

log = logging.getLogger(__name__)

_GET_TAGS = methodcaller("get", PROPERTY_TAGS)
_GET_KEYS = methodcaller("get", PROPERTY_KEYS)
_GET_UNIQ_KEY = methodcaller("get", PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
HANDOFF_LIMIT = 1 << 16  # rows kept for the reput service at most (beyond that it parses the records)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_pack_i64 = _I64.pack_into
_pack_offsets = struct.Struct(">qq").pack_into  # QUEUEOFFSET, PHYSICALOFFSET: adjacent


class PutMessageStatus(Enum):
    # Members hash by identity, in C (Enum's own __hash__ is a call of Python code): a request looks its status
    # up in a dict. They compare by identity already, and each is one object.
    __hash__ = object.__hash__

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


_ID_PREFIXES: dict[HostPort, str] = {}


def offset_message_id(store_host: HostPort, offset: int) -> str:
    """The offset message id (§3.10), with the hex of host and port made once per host."""
    prefix = _ID_PREFIXES.get(store_host)
    if prefix is None:
        prefix = create_offset_message_id(store_host, 0)[:-16]
        if len(_ID_PREFIXES) < 1024:
            _ID_PREFIXES[store_host] = prefix
    return f"{prefix}{offset & 0xFFFFFFFFFFFFFFFF:016X}"


def _offset_id_format(store_host: HostPort) -> str:
    """``%``-format of the offset message ids of *store_host* (for offsets, which are never negative)."""
    return offset_message_id(store_host, 0)[:-16] + "%016X"


class PutMessageResult:
    """Outcome of a put: status plus what ``AppendMessageResult`` reports.

    The offset message ids of appended records are made when first asked for
    (``msg_id``, ``msg_ids``), from the store hosts and offsets kept here.
    """

    __slots__ = ("_ids", "_offsets", "_records", "error", "logics_offset", "msg_num", "status", "store_timestamp",
                 "wait", "wrote_bytes", "wrote_offset")  # fmt: skip

    def __init__(self, status: PutMessageStatus, wrote_offset: int = -1, wrote_bytes: int = 0, msg_id: str = "",
                 store_timestamp: int = 0, logics_offset: int = -1, msg_num: int = 0,
                 msg_ids: list[str] | None = None, error: str = "",
                 records: Sequence[tuple[HostPort, int]] | None = None,
                 offsets: tuple[HostPort, Sequence[int]] | None = None) -> None:  # fmt: skip
        self.status = status
        self.wrote_offset = wrote_offset
        self.wrote_bytes = wrote_bytes
        self.store_timestamp = store_timestamp
        self.logics_offset = logics_offset
        self.msg_num = msg_num
        self.error = error
        self._records = records  # (store host, offset) of each record appended
        self._offsets = offsets  # or: one store host and the offsets of the records (a batch)
        self._ids = msg_ids if msg_ids is not None else ([msg_id] if msg_id else None)
        self.wait = True  # the put waits for its flush and its slave (the message's WAIT; set by the store)

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    @property
    def msg_ids(self) -> list[str]:
        ids = self._ids
        if ids is None:
            if self._offsets is not None:
                host, offsets = self._offsets
                ids = list(map(_offset_id_format(host).__mod__, offsets))
            else:
                ids = [offset_message_id(h, o) for h, o in self._records or ()]
            self._ids = ids
        return ids

    @msg_ids.setter
    def msg_ids(self, ids: list[str]) -> None:
        self._ids = ids

    @property
    def msg_id(self) -> str:
        records = self._records
        if self._ids is None and records is not None and len(records) == 1:  # one record: no list, no join
            return offset_message_id(*records[0])
        return ",".join(self.msg_ids)

    @msg_id.setter
    def msg_id(self, msg_id: str) -> None:
        self._ids = msg_id.split(",") if msg_id else []

    def __repr__(self) -> str:
        return (f"PutMessageResult({self.status.name}, wrote_offset={self.wrote_offset}, "
                f"wrote_bytes={self.wrote_bytes}, logics_offset={self.logics_offset}, msg_num={self.msg_num}"
                + (f", error={self.error!r})" if self.error else ")"))  # fmt: skip


def _unencodable(e: ValueError) -> PutMessageResult:
    """The refusal of a message the codec cannot write: properties over 32 KiB, or anything else illegal."""
    status = PutMessageStatus.PROPERTIES_SIZE_EXCEEDED if isinstance(e, PropertiesTooLongError) \
        else PutMessageStatus.MESSAGE_ILLEGAL  # fmt: skip
    return PutMessageResult(status, error=str(e))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _stored_properties(msg: MessageExt) -> dict[str, str]:
    """The property map a record of *msg* reads back as: its dict when the string is encoded from it (or was parsed
    into it), else the parse of the bytes it carries (kept byte for byte: a delivered delay copy, a committed
    transaction, a send-back). Parsing them here, one string, costs a few µs; reading records back from the file
    costs numpy's fixed cost per call, paid for every run of such records among the handed-over ones."""
    raw = msg.properties_bytes
    if raw is None or msg.properties_parsed:
        return msg.properties
    return string_to_properties(decode_utf8_java(raw)) if raw else {}


class CommitLog:
    def __init__(self, config: MessageStoreConfig, *, read_only: bool = False) -> None:
        self.config = config
        self.read_only = read_only
        self.mapped_file_queue = MappedFileQueue(
            config.commit_log_path, config.mapped_file_size_commit_log, read_only=read_only,
            warm=config.warm_maped_file_enable,
        )  # fmt: skip
        self.topic_queue_table: dict[str, int] = {}
        self.put_lock = threading.Lock()
        # StoreStatsService's putMessageTimesTotal / putMessageSizeTotal since the store opened: messages and
        # record bytes appended (a slave's copies not among them), counted under the put lock.
        self.put_times_total = 0
        self.put_size_total = 0
        self.delay_level_table = config.delay_level_table()
        self.max_delay_level = max(self.delay_level_table, default=0)
        # Dispatch rows of the records just appended, in commit-log order (None: no hand-off);
        # the reput service takes them with take_handoff().
        self.handoff: list[tuple[object, ...]] | None = None
        self._tag_codes: dict[str, int] = {}
        # The same codes, and 0 for no tag, for a column looked up in C (_batch_row_columns).
        self._tag_code_of: dict[str | None, int] = {None: 0, "": 0}
        self._topic_names: dict[bytes, str] = {}  # topic bytes as stored -> topic
        # Called after each successful append with the end offset (flush/dispatch wake-ups).
        self.on_append: Callable[[int], None] | None = None

    # --- load ----------------------------------------------------------------------
    def load(self) -> bool:
        return self.mapped_file_queue.load()

    @property
    def file_size(self) -> int:
        return self.mapped_file_queue.mapped_file_size

    def get_min_offset(self) -> int:
        """Start of the first file, or -1 when the log is empty."""
        first = self.mapped_file_queue.first()
        return first.file_from_offset if first is not None else -1

    def get_max_offset(self) -> int:
        return self.mapped_file_queue.get_max_offset()

    def roll_next_file(self, offset: int) -> int:
        size = self.file_size
        return offset + size - offset % size

    # --- appending -------------------------------------------------------------------
    def _delay_rewrite(self, msg: MessageExt) -> PutMessageResult | None:
        """Turn a delayed message into a ``SCHEDULE_TOPIC_XXXX`` record (§3.7 step 3); a refusal when its
        ``DELAY`` is not a number (4.9.4's ``getDelayTimeLevel`` throws there and the put fails)."""
        if PROPERTY_DELAY_TIME_LEVEL not in msg.properties:
            return None
        tt = transaction_type(msg.sys_flag)
        if tt not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) or msg.topic == RMQ_SYS_SCHEDULE_TOPIC:
            return None
        raw = msg.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        if not raw:
            return None
        level = parse_java_int(raw)
        if level is None:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    error=f"the delay level (property DELAY) {raw!r} is not an integer")  # fmt: skip
        if level <= 0:
            return None
        if level > self.max_delay_level:
            level = self.max_delay_level
            msg.properties[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props = dict(msg.properties)
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties = hashmap_ordered(props)
        msg.properties_bytes = None
        msg.topic = RMQ_SYS_SCHEDULE_TOPIC
        msg.queue_id = level - 1
        return None

    def put_message(self, msg: MessageExt) -> PutMessageResult:
        """Append one message (delayed messages go to ``SCHEDULE_TOPIC_XXXX``)."""
        if self.read_only:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error="store is open read-only")
        if PROPERTY_DELAY_TIME_LEVEL in msg.properties:
            refused = self._delay_rewrite(msg)
            if refused is not None:
                return refused
        return self._put_one(msg)

    def put_messages(self, msgs: list[MessageExt], *, batch: bool = True) -> PutMessageResult:
        """Append a producer batch (one topic and queue) as consecutive records.

        The records share one store timestamp and move to the next file as a
        whole when they do not fit the current one. Batches are never delayed.
        """
        if self.read_only:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error="store is open read-only")
        if not batch and len(msgs) == 1:
            return self.put_message(msgs[0])
        return self._put(msgs)

    def put_message_batch(self, batch: MessageExtBatch) -> PutMessageResult:
        """Append a producer batch held column by column (``MessageExtBatch``) as consecutive records.

        As :meth:`put_messages`, with no Python step per message: the records are worked out outside the lock
        (:class:`PreparedBatch`), and under it their offsets are laid out, their headers packed with them, the
        records copied into the last file in one slice assignment and their dispatch rows left in ``handoff``,
        each a column-wise pass in C. The records never wait in the file for their offsets: a process killed
        mid-append leaves no record that says queue offset 0 at physical offset 0 (see :meth:`_put_one`).
        """
        if self.read_only:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error="store is open read-only")
        n = len(batch.bodies)
        if n == 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error="empty batch")
        try:
            prepared = PreparedBatch(batch)
        except ValueError as e:
            return _unencodable(e)
        sizes, total = prepared.sizes, prepared.total
        refused = self._too_large_batch(batch.wire_size()) or self._refusal(total)
        if refused is not None:
            return refused
        topic, queue_id, sys_flag = batch.topic, batch.queue_id, prepared.sys_flag
        key = f"{topic}-{queue_id}"
        step = 0 if sys_flag & TRANSACTION_PREPARED_TYPE else 1
        # The rows' columns are worked out here, outside the lock (only while someone takes the rows).
        row_columns = self._batch_row_columns(batch) if self.handoff is not None else None
        with self.put_lock:
            store_ts = time.time_ns() // 1_000_000
            mf = self._file_for(total)
            if mf is None:
                return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, error="cannot create a file")
            first_qo = self.topic_queue_table.get(key, 0) if step else 0
            pos = mf.wrote_position
            phys = mf.file_from_offset + pos
            offsets = list(accumulate(sizes[:-1], initial=phys))
            queue_offsets = range(first_qo, first_qo + n) if step else [0] * n  # PREPARED: all 0
            mf.mm[pos : pos + total] = prepared.encode(queue_offsets, offsets, store_ts, batch.flags)
            rows = self.handoff
            if rows is not None and len(rows) < HANDOFF_LIMIT and row_columns is not None:
                codes, keys, uniq_keys = row_columns
                if topic == RMQ_SYS_SCHEDULE_TOPIC:
                    codes = [self._schedule_tags_code(p.get(PROPERTY_DELAY_TIME_LEVEL), store_ts, c)
                             for p, c in zip(batch.properties, codes, strict=True)]  # fmt: skip
                # Rows in DispatchRequest order, made by zip: no Python step per record.
                rows.extend(zip(repeat(topic), repeat(queue_id), offsets, sizes, codes, repeat(store_ts),
                                queue_offsets, keys, uniq_keys,
                                repeat(sys_flag), repeat(0), batch.properties))  # fmt: skip
            mf.wrote_position = mf.committed_position = pos + total
            mf.store_timestamp = store_ts
            if step:
                self.topic_queue_table[key] = first_qo + n
            self.put_times_total += n
            self.put_size_total += total
        if self.on_append is not None:
            self.on_append(phys + total)
        return PutMessageResult(PutMessageStatus.PUT_OK, phys, total, "", store_ts, first_qo, n, None, "", None,
                                (batch.store_host, offsets))  # fmt: skip

    def _batch_row_columns(self, batch: MessageExtBatch) -> tuple[list[int], list[str | None], list[str | None]] | None:
        """Tag codes, keys and ``UNIQ_KEY`` of a batch's records, from the maps its property bytes read back as
        (None when the columns are not whole: the reput service then reads the records back)."""
        props = batch.properties
        if len(props) != len(batch.bodies):
            return None
        tags = list(map(_GET_TAGS, props))
        codes = list(map(self._tag_code_of.get, tags))
        if None in codes:  # a tag seen for the first time (or a cache that is full)
            codes = [self._tag_code(t) if t else 0 for t in tags]
        return codes, list(map(_GET_KEYS, props)), list(map(_GET_UNIQ_KEY, props))

    def _too_large_batch(self, sent_size: int) -> PutMessageResult | None:
        """A batch over ``maxMessageSize``: 4.9.4 holds its size as sent (``checkMessages``), not its messages'
        bodies one by one, nor the records it makes."""
        limit = self.config.max_message_size
        if sent_size > limit:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    error=f"batch of {sent_size} bytes exceeds maxMessageSize {limit}")  # fmt: skip
        return None

    def _refusal(self, total: int) -> PutMessageResult | None:
        """Why records of *total* bytes cannot be appended (or None): no commit-log file can hold them."""
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                error=f"{total} bytes do not fit a commit-log file of {self.file_size} bytes",
            )
        return None

    def _put_one(self, msg: MessageExt) -> PutMessageResult:
        """Append one message: :meth:`_put` without its per-batch lists (the common put, kept short).

        The record is encoded outside the lock; under it the three append-time
        fields are packed into it and its bytes go into the last file, before the
        write position moves (readers never see a record without them, nor does
        recovery after a crash).
        """
        # The row's map is worked out here, outside the lock (only while someone takes the rows), and before
        # encoding, which leaves the message with property bytes.
        body = msg.body
        if body is not None and len(body) > self.config.max_message_size:
            # 4.9.4's encoder limits the body, not the record: a body of exactly maxMessageSize is stored.
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    error=f"body of {len(body)} bytes exceeds maxMessageSize "
                                          f"{self.config.max_message_size}")  # fmt: skip
        row_props = _stored_properties(msg) if self.handoff is not None else None
        try:
            data = encode_one(msg)
        except ValueError as e:
            return _unencodable(e)
        total = len(data)
        key = f"{msg.topic}-{msg.queue_id}"
        step = 0 if msg.sys_flag & TRANSACTION_PREPARED_TYPE else 1
        ts_pos = 68 if msg.sys_flag & BORNHOST_V6_FLAG else 56
        files = self.mapped_file_queue.files
        with self.put_lock:
            store_ts = time.time_ns() // 1_000_000
            mf = files[-1] if files else None
            if mf is None or mf.wrote_position + total + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
                refused = self._refusal(total)  # a record no file can hold
                if refused is not None:
                    return refused
                mf = self._writable_file(total)
                if mf is None:
                    return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, error="cannot create a file")
            qo = self.topic_queue_table.get(key, 0) if step else 0
            pos = mf.wrote_position
            phys = mf.file_from_offset + pos
            end = pos + total
            # The fields go in before the copy, as in a batch: a process killed between the two would leave a
            # whole, CRC-valid record in the page cache that says queue offset 0 at physical offset 0, and
            # recovery would take it for a record of those offsets.
            _pack_offsets(data, QUEUE_OFFSET_POS, qo, phys)
            _pack_i64(data, ts_pos, store_ts)
            mf.mm[pos:end] = data
            msg.queue_offset, msg.commit_log_offset, msg.store_timestamp = qo, phys, store_ts
            rows = self.handoff
            if rows is not None and row_props is not None and len(rows) < HANDOFF_LIMIT:
                rows.append(self._row(msg, total, row_props))
            mf.wrote_position = mf.committed_position = end
            mf.store_timestamp = store_ts
            if step:
                self.topic_queue_table[key] = qo + 1
            self.put_times_total += 1
            self.put_size_total += total
        if self.on_append is not None:
            self.on_append(phys + total)
        return PutMessageResult(PutMessageStatus.PUT_OK, phys, total, "", store_ts, qo, 1, None, "",
                                ((msg.store_host, phys),))  # fmt: skip

    def _put(self, msgs: Sequence[MessageExt]) -> PutMessageResult:
        """Append *msgs* (one topic and queue, one transaction type) as consecutive records.

        The one append path of batches: encode them into one buffer outside the lock; under it
        assign the queue offsets and the store time, fill them in, copy the buffer
        into the last file with one slice assignment and leave the dispatch rows.
        """
        if len(msgs) == 1:
            return self._put_one(msgs[0])
        # Before encoding, which leaves every message with property bytes: a map is not parsed back from its own.
        row_props = list(map(_stored_properties, msgs)) if self.handoff is not None else None
        try:
            enc = encode_records(msgs)
        except ValueError as e:
            return _unencodable(e)
        total = enc.total
        # A batch's size as sent is below its records' (each adds at least 69 bytes): worked out only near the
        # limit. Encoding left every message with its property bytes.
        refused = None
        if total > self.config.max_message_size:
            refused = self._too_large_batch(producer_batch_size((m.body or b"" for m in msgs),
                                                                (m.properties_bytes or b"" for m in msgs)))  # fmt: skip
        refused = refused or self._refusal(total)
        if refused is not None:
            return refused
        first = msgs[0]
        key = f"{first.topic}-{first.queue_id}"
        # PREPARED and ROLLBACK records take queue offset 0 and do not advance the queue.
        step = 0 if first.sys_flag & TRANSACTION_PREPARED_TYPE else 1
        with self.put_lock:
            store_ts = time.time_ns() // 1_000_000
            mf = self._file_for(total)
            if mf is None:
                return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, error="cannot create a file")
            qo = queue_offset = self.topic_queue_table.get(key, 0) if step else 0
            pos = mf.wrote_position
            phys = wrote_offset = mf.file_from_offset + pos
            rows = self.handoff
            if rows is not None and (row_props is None or len(rows) >= HANDOFF_LIMIT):
                rows = None  # the reput service is far behind (or just came): it parses these records
            row = self._row
            data = enc.data
            rel = 0  # where the record starts in data
            # One pass: each record's append-time fields, its message's offsets, its dispatch row.
            for i, (m, size, ts_pos) in enumerate(zip(msgs, enc.sizes, enc.ts_pos, strict=True)):
                _pack_offsets(data, rel + QUEUE_OFFSET_POS, qo, phys)
                _pack_i64(data, rel + ts_pos, store_ts)
                m.queue_offset, m.commit_log_offset, m.store_timestamp = qo, phys, store_ts
                if rows is not None:
                    rows.append(row(m, size, row_props[i]))  # type: ignore[index]
                rel += size
                phys += size
                qo += step
            mf.mm[pos : pos + total] = data
            mf.wrote_position = mf.committed_position = pos + total
            mf.store_timestamp = store_ts
            if step:
                self.topic_queue_table[key] = qo
            self.put_times_total += len(msgs)
            self.put_size_total += total
        if self.on_append is not None:
            self.on_append(phys)
        records = [(m.store_host, m.commit_log_offset) for m in msgs]
        return PutMessageResult(PutMessageStatus.PUT_OK, wrote_offset, total, "", store_ts, queue_offset, len(msgs),
                                None, "", records)  # fmt: skip

    def append_data(self, start_offset: int, data: bytes | bytearray | memoryview) -> bool:
        """A slave's append (``appendData``): *data*, bytes of the master's commit log from *start_offset*, copied
        to the end of this one, which must be at *start_offset* (an empty log starts a file there). The bytes are
        whole or partial records of the master's; dispatch reads them back from the file. False, nothing written,
        when they do not follow on or do not fit the file."""
        n = len(data)
        with self.put_lock:
            mfq = self.mapped_file_queue
            mf = mfq.get_last_mapped_file(start_offset)
            if mf is None:
                return False
            pos = mf.wrote_position
            if mf.file_from_offset + pos != start_offset or pos + n > mf.file_size:
                log.error("slave append of %d bytes at %d refused: this commit log ends at %d of file %s (is "
                          "mappedFileSizeCommitLog the master's, %d here?)", n, start_offset, mf.file_from_offset + pos,
                          mf.path.name, self.file_size)  # fmt: skip
                return False
            mf.mm[pos : pos + n] = data
            mf.wrote_position = mf.committed_position = pos + n
        if self.on_append is not None:
            self.on_append(start_offset + n)
        return True

    def _file_for(self, total: int) -> MappedFile | None:
        """The file to append *total* bytes to (under the put lock): the last one while they fit it with 8 bytes to
        spare, else :meth:`_writable_file`."""
        files = self.mapped_file_queue.files
        mf = files[-1] if files else None
        if mf is None or mf.wrote_position + total + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
            mf = self._writable_file(total)
        return mf

    def _writable_file(self, total: int) -> MappedFile | None:
        """The file to append *total* bytes to (under the put lock).

        When they would not leave 8 free bytes behind them, the current file is
        ended with a BLANK record and the next one is used (§3.6).
        """
        mfq = self.mapped_file_queue
        files = mfq.files
        mf = files[-1] if files else None
        if mf is None or mf.wrote_position >= mf.file_size:
            mf = mfq.get_last_mapped_file(0)
            if mf is None:
                return None
        free = mf.file_size - mf.wrote_position
        if total + END_FILE_MIN_BLANK_LENGTH > free:
            mf.write_at(mf.wrote_position, encode_blank(free))
            mf.fill_to_end()
            mf = mfq.get_last_mapped_file(0)
        return mf

    def _row(self, m: MessageExt, size: int, props: dict[str, str]) -> tuple[object, ...]:
        """The dispatch row of a record just appended, from the message in hand and *props*, the map its
        property string reads back as (:func:`_stored_properties`): identical to what reading the record back
        gives, so dispatch can skip that read.
        """
        tags = props.get(PROPERTY_TAGS)
        code = self._tag_code(tags) if tags else 0
        if m.topic == RMQ_SYS_SCHEDULE_TOPIC:
            code = self._schedule_tags_code(props.get(PROPERTY_DELAY_TIME_LEVEL), m.store_timestamp, code)
        return (m.topic, m.queue_id, m.commit_log_offset, size, code, m.store_timestamp, m.queue_offset,
                props.get(PROPERTY_KEYS), props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), m.sys_flag,
                m.prepared_transaction_offset, props)  # fmt: skip

    def take_handoff(self) -> list[tuple[object, ...]]:
        """The rows left since the last call (the reput service's side of the hand-off)."""
        if not self.handoff:
            return []
        with self.put_lock:
            rows, self.handoff = self.handoff, []
        return rows

    def _tag_code(self, tags: str) -> int:
        code = self._tag_codes.get(tags)
        if code is None:
            code = java_string_hash(tags)
            if len(self._tag_codes) < 4096:
                self._tag_codes[tags] = self._tag_code_of[tags] = code
        return code

    def _schedule_tags_code(self, raw: str | None, store_ts: int, default: int) -> int:
        """Tag code of a ``SCHEDULE_TOPIC_XXXX`` record: its due time (§4.3 step 3); *raw* is its ``DELAY``."""
        if not raw:
            return default
        try:
            level = int(raw)
        except ValueError:
            return default
        level = min(level, self.max_delay_level)
        if level <= 0:
            return default
        return store_ts + self.delay_level_table.get(level, 1000)

    # --- reading ---------------------------------------------------------------------
    def get_message(self, offset: int, size: int) -> bytes | None:
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf.read(offset % self.file_size, size)

    def get_data(self, offset: int) -> tuple[MappedFile, int] | None:
        """The file holding *offset* and the position of *offset* in it."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf, offset % self.file_size

    def is_partial_tail(self, offset: int) -> bool:
        """Whether the record at *offset* is the last file's last and not all there yet: its length runs past what
        is written (a slave between two frames of its master)."""
        mf = self.mapped_file_queue.last()
        if mf is None or mf.mm is None or not mf.file_from_offset <= offset < mf.file_from_offset + mf.read_position():
            return False
        pos = offset - mf.file_from_offset
        end = mf.read_position()
        if end - pos < 4:
            return True
        (size,) = _I32.unpack_from(mf.mm, pos)
        return pos + size > end

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        if offset < self.get_min_offset():
            return -1
        found = self.get_data(offset)
        if found is None:
            return -1
        mf, pos = found
        if pos + 40 > mf.read_position():
            return -1
        sys_flag = _I32.unpack_from(mf.mm, pos + SYSFLAG_POS)[0]
        return _I64.unpack_from(mf.mm, pos + store_timestamp_pos(sys_flag))[0]

    # --- record checking (dispatch and recovery) ----------------------------------------
    def tags_code_of(self, info: RecordInfo) -> int:
        """Consume-queue tag code of a record (§4.3)."""
        props = info.properties or {}
        tags = props.get(PROPERTY_TAGS)
        code = self._tag_code(tags) if tags else 0
        if info.topic == RMQ_SYS_SCHEDULE_TOPIC:
            code = self._schedule_tags_code(props.get(PROPERTY_DELAY_TIME_LEVEL), info.store_timestamp, code)
        return code

    def check_message_and_return_size(
        self, buf: object, pos: int, check_crc: bool
    ) -> tuple[RecordInfo, DispatchRequest | None]:
        info = check_record(buf, pos, check_crc=check_crc)  # type: ignore[arg-type]
        if not info.ok or info.size <= 0:
            return info, None
        props = info.properties or {}
        req = DispatchRequest(
            info.topic, info.queue_id, info.commit_log_offset, info.size, self.tags_code_of(info),
            info.store_timestamp, info.queue_offset, props.get(PROPERTY_KEYS),
            props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), info.sys_flag, info.prepared_transaction_offset,
            props,
        )  # fmt: skip
        return info, req

    # --- dispatch from the file (reput of records not handed off, recovery) ------------------
    def topics_of(self, mm: mmap.mmap, run: RecordRun) -> list[str]:
        """The topic of each record of *run* (read from *mm*), decoded once per distinct topic."""
        names = self._topic_names
        if same_topic(mm, run):
            a, n = int(run.topic_pos[0]), int(run.topic_len[0])
            raw = mm[a : a + n]
            topic = names.get(raw) or decode_utf8_java(raw)
            return [topic] * len(run)
        out: list[str] = []
        append = out.append
        for a, n in zip(run.topic_pos.tolist(), run.topic_len.tolist(), strict=True):
            raw = mm[a : a + n]
            topic = names.get(raw)
            if topic is None:
                topic = decode_utf8_java(raw)
                if len(names) < 4096:
                    names[raw] = topic
            append(topic)
        return out

    def dispatch_batch_of(self, mm: mmap.mmap, run: RecordRun, topics: list[str], *,
                          full_properties: bool = True) -> DispatchBatch:  # fmt: skip
        """The dispatch columns of the records of *run*, read from *mm* (``checkMessageAndReturnSize``).

        With *full_properties* every record's property map is parsed (a message-arrival
        listener or a per-record dispatcher reads the requests). Otherwise ``TAGS``,
        ``KEYS``, ``UNIQ_KEY`` and ``DELAY`` are found in the property bytes of all
        records at once and, for ASCII text, the tag codes and the index keys are
        hashed straight from those bytes: the batch carries ``index_keys`` and its
        ``keys`` and ``uniq_key`` columns stay empty.
        """
        n = len(run)
        store_ts = run.store_timestamp.tolist()
        if full_properties:
            props_col = [string_to_properties(decode_utf8_java(mm[a : a + k])) if k else {}
                         for a, k in zip(run.props_pos.tolist(), run.props_len.tolist(), strict=True)]  # fmt: skip
            tags = [p.get(PROPERTY_TAGS) for p in props_col]
            keys = [p.get(PROPERTY_KEYS) for p in props_col]
            uniqs = [p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for p in props_col]
            delays = [p.get(PROPERTY_DELAY_TIME_LEVEL) for p in props_col]
        else:
            props_col = [empty_properties()] * n
            found = find_dispatch_properties(mm, run)
            if isinstance(found, PropertyValues):
                return self._hashed_batch(run, topics, store_ts, found)
            tags, keys, uniqs, delays = pick_dispatch_properties_of_raws(found)
        codes = {t: self._tag_code(t) if t else 0 for t in set(tags)}
        tags_codes = list(map(codes.__getitem__, tags))
        if RMQ_SYS_SCHEDULE_TOPIC in topics:
            for i, topic in enumerate(topics):
                if topic == RMQ_SYS_SCHEDULE_TOPIC:
                    tags_codes[i] = self._schedule_tags_code(delays[i], store_ts[i], tags_codes[i])
        return DispatchBatch(topics, run.queue_id.tolist(), run.phys, run.size, tags_codes, store_ts,
                             run.queue_offset, keys, uniqs, run.sys_flag, run.prepared_offset, props_col,
                             has_properties=full_properties)  # fmt: skip

    def _hashed_batch(self, run: RecordRun, topics: list[str], store_ts: list[int],
                      found: PropertyValues) -> DispatchBatch:  # fmt: skip
        """:meth:`dispatch_batch_of` for ASCII property text: tag codes and index keys hashed from the bytes."""
        n = len(run)
        data = found.data
        records, starts, ends = found.values["TAGS"]
        tags_codes = np.zeros(n, dtype=np.int64)
        codes = java_hashes_of_ranges(data, starts, ends).astype(np.int64)
        tags_codes[records] = np.where(codes >= 1 << 31, codes - (1 << 32), codes)  # String.hashCode is signed
        if RMQ_SYS_SCHEDULE_TOPIC in topics:
            delays = found.strings("DELAY")
            for i, topic in enumerate(topics):
                if topic == RMQ_SYS_SCHEDULE_TOPIC:
                    tags_codes[i] = self._schedule_tags_code(delays[i], store_ts[i], int(tags_codes[i]))
        uniq_records, uniq_starts, uniq_ends = found.values["UNIQ_KEY"]
        key_records, key_starts, key_ends = split_key_tokens(found, *found.values["KEYS"])
        # Hashed apart: UNIQ_KEYs all have one length, tokens have their own.
        hashes = np.concatenate((java_hashes_of_ranges(data, uniq_starts, uniq_ends),
                                 java_hashes_of_ranges(data, key_starts, key_ends)))  # fmt: skip
        index_keys = (np.concatenate((uniq_records, key_records)), hashes,
                      np.concatenate((uniq_ends - uniq_starts, key_ends - key_starts)))  # fmt: skip
        nothing: list[str | None] = [None] * n
        return DispatchBatch(topics, run.queue_id.tolist(), run.phys, run.size, tags_codes, store_ts,
                             run.queue_offset, nothing, nothing, run.sys_flag, run.prepared_offset,
                             [empty_properties()] * n, index_keys=index_keys, has_properties=False)  # fmt: skip

    def readable_end(self, offset: int, end: int) -> int:
        """*end*, or less: where the readable data of the file holding *offset* ends, when that is before *end*.

        The rows of a hand-off never run on into the next file (a BLANK lies between), so this is where they may
        be dispatched up to. It is the maximum offset but with a transient store pool, whose files are readable
        up to what the commit service has copied into them: the put path may have gone on to other files (pooled,
        or written in place when the pool ran dry, and readable at once) while this one's tail waits."""
        queue = self.mapped_file_queue
        files = queue.files
        if not files or files[-1].file_from_offset <= offset:
            return end  # in the last file (the usual case): its readable end is the maximum offset
        mf = queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return end
        readable = mf.file_from_offset + mf.read_position()
        return readable if readable < end else end

    def read_dispatch_batch(self, offset: int, stop: int, max_records: int, *,
                            full_properties: bool | Collection[str]) -> tuple[DispatchBatch | None, int]:  # fmt: skip
        """Records from *offset* (a record start) up to *stop* or the readable end of that file, at most
        *max_records*, for dispatch (no CRC; a record whose lengths disagree is walked over, as the
        reput does). Returns the batch (None when no record) and the offset after the records walked:
        the next file's start after a BLANK, *offset* itself when a bad record stops the walk.

        *full_properties*, as for :meth:`dispatch_batch_of`; a collection of topics: only when a record of
        one of them is among those read.
        """
        found = self.get_data(offset)
        if found is None:
            return None, offset
        mf, pos = found
        base = mf.file_from_offset
        readable = mf.read_position()
        if pos >= readable:
            return None, self.roll_next_file(offset) if readable >= mf.file_size else offset
        mm = mf.mm
        run = walk_records(mm, pos, min(readable, stop - base), check_crc=False, max_records=max_records,
                           skip_invalid=True, base=base)  # fmt: skip
        end = self.roll_next_file(base + run.end) if run.blank else base + run.end
        if not len(run):
            return None, end
        topics = self.topics_of(mm, run)
        if not isinstance(full_properties, bool):
            wanted = full_properties
            full_properties = bool(wanted) and any(t in wanted for t in (set(topics) if len(topics) > 8 else topics))
        return self.dispatch_batch_of(mm, run, topics, full_properties=full_properties), end

    def scan(
        self, from_offset: int, check_crc: bool = False
    ) -> Iterator[tuple[int, RecordInfo, DispatchRequest | None]]:
        """Walk records from *from_offset* to the end of readable data.

        Yields (offset, info, request); BLANK ends continue in the next file;
        the walk stops after yielding the first bad record.
        """
        offset = from_offset
        while True:
            found = self.get_data(offset)
            if found is None:
                return
            mf, pos = found
            end = mf.read_position()
            if pos >= end:
                if mf.is_full() or end == self.file_size:
                    offset = self.roll_next_file(offset)
                    continue
                return
            info, req = self.check_message_and_return_size(mf.mm, pos, check_crc)
            yield offset, info, req
            if info.ok and info.size > 0:
                offset += info.size
            elif info.ok and info.blank:
                offset = self.roll_next_file(offset)
            else:
                return

    # --- recovery ------------------------------------------------------------------------
    def _recover_from(self, index: int, check_crc: bool, dispatch: RecoveryDispatch | None,
                      progress: Callable[[int], None] | None = None, report: RecoveryReport | None = None,
                      record_offsets: Callable[[int], np.ndarray] | None = None) -> int:  # fmt: skip
        """Scan from file *index* (CRC checked); return the end of valid data (see :mod:`.recovery`).

        *record_offsets* (from the consume queues, see ``MessageStore``) gives, for a
        start offset, the sorted offsets of the records known from there on: hints
        that let the scan follow runs of records with numpy.
        """
        start = self.mapped_file_queue.files[index].file_from_offset
        if report is not None:
            report.scan_start_offset = start
        hints = record_offsets(start) if record_offsets is not None else None
        return scan_commit_log(self, index, check_crc, dispatch, progress, report, hints)

    def recover_normally(self, max_phy_offset_of_cq: int, truncate_cq: Callable[[int], None],
                         destroy_cq: Callable[[], None],
                         progress: Callable[[int], None] | None = None, report: RecoveryReport | None = None,
                         record_offsets: Callable[[int], np.ndarray] | None = None) -> int:  # fmt: skip
        files = self.mapped_file_queue.files
        if not files:
            self.mapped_file_queue.set_flushed_and_committed(0)
            destroy_cq()
            return 0
        index = max(0, len(files) - 3)
        end = self._recover_from(index, self.config.check_crc_on_recover, None, progress, report, record_offsets)
        self._truncate_to(end, report)
        if max_phy_offset_of_cq >= end:
            truncate_cq(end)
        return end

    def is_mapped_file_matched_recover(self, mf: MappedFile, min_timestamp: int) -> bool:
        _size, magic = read_size_and_magic(mf.mm, 0)
        if magic not in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2):
            return False
        sys_flag = _I32.unpack_from(mf.mm, SYSFLAG_POS)[0]
        store_ts = _I64.unpack_from(mf.mm, store_timestamp_pos(sys_flag))[0]
        return store_ts != 0 and store_ts <= min_timestamp

    def abnormal_recovery_start(self, min_timestamp: int) -> int:
        """Index of the file abnormal recovery scans from (§11.4 step 1)."""
        files = self.mapped_file_queue.files
        index = len(files) - 1
        while index >= 0 and not self.is_mapped_file_matched_recover(files[index], min_timestamp):
            index -= 1
        return max(index, 0)

    def recover_abnormally(self, max_phy_offset_of_cq: int, min_timestamp: int,
                           dispatch: RecoveryDispatch,
                           truncate_cq: Callable[[int], None], destroy_cq: Callable[[], None],
                           progress: Callable[[int], None] | None = None, report: RecoveryReport | None = None,
                           record_offsets: Callable[[int], np.ndarray] | None = None) -> int:  # fmt: skip
        files = self.mapped_file_queue.files
        if not files:
            self.mapped_file_queue.set_flushed_and_committed(0)
            destroy_cq()
            return 0
        index = self.abnormal_recovery_start(min_timestamp)
        end = self._recover_from(index, self.config.check_crc_on_recover, dispatch, progress, report,
                                 record_offsets)  # fmt: skip
        self._truncate_to(end, report)
        if max_phy_offset_of_cq >= end:
            truncate_cq(end)
        return end

    def _truncate_to(self, offset: int, report: RecoveryReport | None = None) -> None:
        mfq = self.mapped_file_queue
        if report is not None:
            report.commit_log_files_deleted += [mf.path.name for mf in mfq.files if mf.file_from_offset > offset]
        mfq.set_flushed_and_committed(offset)
        mfq.truncate_dirty_files(offset)
        last = mfq.last()
        if last is not None and not self.read_only and offset >= last.file_from_offset:
            cleared = last.zero_tail(last.wrote_position)
            if report is not None:
                report.commit_log_bytes_cleared = cleared

    # --- flush and close -------------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        return self.mapped_file_queue.flush(least_pages)

    def close(self) -> None:
        self.mapped_file_queue.close()


__all__ = [
    "BLANK_MAGIC_CODE",
    "CommitLog",
    "DispatchRequest",
    "PutMessageResult",
    "PutMessageStatus",
    "offset_message_id",
]
