"""The commit log: RocketMQ's ``CommitLog`` (store-format §3, §10, §11).

Every message of every topic is appended to one run of mapped files under
``commitlog/``. An append that does not leave 8 free bytes behind it in the
current file ends that file with a BLANK record (i32 free length, i32
0xCBD43194) and goes to the next file, so a record never spans two files.

Queue offsets are assigned here, under the put lock, from the in-memory table
``topic_queue_table`` (``"<topic>-<queueId>"`` → next offset) that start-up
rebuilds from the consume queues. Records are encoded by
:func:`rocketq.common.codec.encode_record` (the one encoder) outside the lock;
only the three append-time fields are patched under it.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from rocketq.common.codec import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    SYSFLAG_POS,
    PreparedRecord,
    PropertiesTooLongError,
    RecordInfo,
    check_record,
    encode_blank,
    prepare_record,
    read_size_and_magic,
    store_timestamp_pos,
)
from rocketq.common.javacompat import hashmap_order, java_string_hash
from rocketq.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    MessageExt,
    transaction_type,
)
from rocketq.common.message_id import create_offset_message_id
from rocketq.store.mapped_file import MappedFile
from rocketq.store.mapped_file_queue import MappedFileQueue
from rocketq.store.recovery import RecoveryDispatch, RecoveryReport, scan_commit_log
from rocketq.store.store_config import MessageStoreConfig

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
HANDOFF_LIMIT = 1 << 16
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class PutMessageStatus(Enum):
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


@dataclass(slots=True)
class PutMessageResult:
    """Outcome of a put: status plus what ``AppendMessageResult`` reports."""

    status: PutMessageStatus
    wrote_offset: int = -1
    wrote_bytes: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    logics_offset: int = -1
    msg_num: int = 0
    msg_ids: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK


@dataclass(slots=True)
class DispatchRequest:
    """A record as the dispatchers (consume queue, index) see it."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    properties: dict[str, str]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


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
        self.delay_level_table = config.delay_level_table()
        self.max_delay_level = max(self.delay_level_table, default=0)
        # Dispatch requests of records just appended, in commit-log order, for the reput
        # service to take instead of parsing the bytes back (None: reput parses everything).
        self.dispatch_handoff: deque[DispatchRequest] | None = None
        self._tag_codes: dict[str, int] = {}
        self._id_prefixes: dict[tuple[str, int], str] = {}
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
    def _delay_rewrite(self, msg: MessageExt) -> None:
        """Turn a delayed message into a ``SCHEDULE_TOPIC_XXXX`` record (§3.7 step 3)."""
        if PROPERTY_DELAY_TIME_LEVEL not in msg.properties:
            return
        tt = transaction_type(msg.sys_flag)
        if tt not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) or msg.topic == SCHEDULE_TOPIC:
            return
        raw = msg.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        if not raw:
            return
        try:
            level = int(raw)
        except ValueError:
            return
        if level <= 0:
            return
        if level > self.max_delay_level:
            level = self.max_delay_level
            msg.properties[PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props = dict(msg.properties)
        props[PROPERTY_REAL_TOPIC] = msg.topic
        props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties = {k: props[k] for k in hashmap_order(props)}
        msg.properties_bytes = None
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1

    def put_message(self, msg: MessageExt) -> PutMessageResult:
        """Append one message: the common case, without a batch's bookkeeping."""
        if self.read_only:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error="store is open read-only")
        self._delay_rewrite(msg)
        from_dict = msg.properties_bytes is None
        prep = self._prepare(msg)
        if isinstance(prep, PutMessageResult):
            return prep
        total = prep.total
        key = f"{msg.topic}-{msg.queue_id}"
        counts = msg.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
        handoff = self.dispatch_handoff
        with self.put_lock:
            store_ts = now_ms()
            mf = self._writable_file(total)
            if mf is None:
                return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, error="cannot create a file")
            qo = self.topic_queue_table.get(key, 0) if counts else 0
            pos = mf.wrote_position
            phys = mf.file_from_offset + pos
            prep.write_into(mf.mm, pos, qo, phys, store_ts)
            msg.queue_offset, msg.commit_log_offset, msg.store_timestamp = qo, phys, store_ts
            if handoff is not None and from_dict and len(handoff) < HANDOFF_LIMIT:
                handoff.append(self._request_of(msg, total))
            mf.wrote_position = mf.committed_position = pos + total
            mf.store_timestamp = store_ts
            if counts:
                self.topic_queue_table[key] = qo + 1
        if self.on_append is not None:
            self.on_append(phys + total)
        msg_id = self._msg_id(msg.store_host, phys)
        return PutMessageResult(PutMessageStatus.PUT_OK, phys, total, msg_id, store_ts, qo, 1, [msg_id])

    def _prepare(self, m: MessageExt) -> PreparedRecord | PutMessageResult:
        """Encode *m* for appending, or say why it cannot be stored."""
        try:
            prep = prepare_record(m)
        except PropertiesTooLongError as e:
            return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, error=str(e))
        except ValueError as e:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, error=str(e))
        if prep.total > self.config.max_message_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                error=f"message of {prep.total} bytes exceeds maxMessageSize {self.config.max_message_size}",
            )
        if prep.total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                error=f"{prep.total} bytes do not fit a commit-log file of {self.file_size} bytes",
            )
        return prep

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

    def put_messages(self, msgs: list[MessageExt], *, batch: bool = True) -> PutMessageResult:
        """Append a producer batch as consecutive records.

        The records share one store timestamp and move to the next file as a
        whole when they do not fit the current one. Batches are never delayed.
        """
        if self.read_only:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error="store is open read-only")
        if not batch and len(msgs) == 1:
            return self.put_message(msgs[0])
        prepared: list[PreparedRecord] = []
        fast: list[bool] = []
        total = 0
        for m in msgs:
            from_dict = m.properties_bytes is None
            prep = self._prepare(m)
            if isinstance(prep, PutMessageResult):
                return prep
            prepared.append(prep)
            fast.append(from_dict)
            total += prep.total
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                error=f"{total} bytes do not fit a commit-log file of {self.file_size} bytes",
            )
        first = msgs[0]
        key = f"{first.topic}-{first.queue_id}"
        counts = first.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
        handoff = self.dispatch_handoff
        with self.put_lock:
            store_ts = now_ms()
            mf = self._writable_file(total)
            if mf is None:
                return PutMessageResult(PutMessageStatus.CREATE_MAPEDFILE_FAILED, error="cannot create a file")
            queue_offset = self.topic_queue_table.get(key, 0) if counts else 0
            pos = mf.wrote_position
            base_phys = phys = mf.file_from_offset + pos
            mm = mf.mm
            qo = queue_offset
            for m, prep, from_dict in zip(msgs, prepared, fast, strict=True):
                prep.write_into(mm, pos, qo, phys, store_ts)
                m.queue_offset, m.commit_log_offset, m.store_timestamp = qo, phys, store_ts
                if handoff is not None and from_dict and len(handoff) < HANDOFF_LIMIT:
                    handoff.append(self._request_of(m, prep.total))
                pos += prep.total
                phys += prep.total
                if counts:
                    qo += 1
            mf.wrote_position = mf.committed_position = pos
            mf.store_timestamp = store_ts
            if counts:
                self.topic_queue_table[key] = qo
        if self.on_append is not None:
            self.on_append(phys)
        ids = [self._msg_id(m.store_host, m.commit_log_offset) for m in msgs]
        return PutMessageResult(
            PutMessageStatus.PUT_OK, wrote_offset=base_phys, wrote_bytes=total, msg_id=",".join(ids),
            store_timestamp=store_ts, logics_offset=queue_offset, msg_num=len(msgs), msg_ids=ids,
        )  # fmt: skip

    def _request_of(self, m: MessageExt, size: int) -> DispatchRequest:
        """The dispatch request of a record just appended, from the message in hand.

        Identical to what parsing the record back would give (the properties
        were encoded from this very dict), so dispatch can skip that parse.
        """
        props = m.properties
        tags = props.get(PROPERTY_TAGS)
        code = self._tag_code(tags) if tags else 0
        if m.topic == SCHEDULE_TOPIC:
            code = self._schedule_tags_code(props, m.store_timestamp, code)
        return DispatchRequest(
            m.topic, m.queue_id, m.commit_log_offset, size, code, m.store_timestamp, m.queue_offset,
            props.get(PROPERTY_KEYS), props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), m.sys_flag,
            m.prepared_transaction_offset, props,
        )  # fmt: skip

    def _tag_code(self, tags: str) -> int:
        code = self._tag_codes.get(tags)
        if code is None:
            code = java_string_hash(tags)
            if len(self._tag_codes) < 4096:
                self._tag_codes[tags] = code
        return code

    def _msg_id(self, store_host: tuple[str, int], offset: int) -> str:
        """Offset message id, with the hex of host and port computed once per host."""
        prefix = self._id_prefixes.get(store_host)
        if prefix is None:
            prefix = create_offset_message_id(store_host, 0)[:-16]
            self._id_prefixes[store_host] = prefix
        return f"{prefix}{offset & 0xFFFFFFFFFFFFFFFF:016X}"

    def _schedule_tags_code(self, props: dict[str, str], store_ts: int, default: int) -> int:
        raw = props.get(PROPERTY_DELAY_TIME_LEVEL)
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
        if info.topic == SCHEDULE_TOPIC:
            code = self._schedule_tags_code(props, info.store_timestamp, code)
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
    def _recover_from(self, index: int, check_crc: bool,
                      dispatch: Callable[[DispatchRequest], None] | RecoveryDispatch | None,
                      progress: Callable[[int], None] | None = None,
                      report: RecoveryReport | None = None) -> int:  # fmt: skip
        """Scan from file *index* (CRC checked); return the end of valid data (see :mod:`.recovery`)."""
        if report is not None:
            report.scan_start_offset = self.mapped_file_queue.files[index].file_from_offset
        if dispatch is not None and not isinstance(dispatch, RecoveryDispatch):
            one = dispatch
            dispatch = RecoveryDispatch(lambda reqs: [one(r) for r in reqs], {}, 0)  # every record
        return scan_commit_log(self, index, check_crc, dispatch, progress, report)

    def recover_normally(self, max_phy_offset_of_cq: int, truncate_cq: Callable[[int], None],
                         destroy_cq: Callable[[], None],
                         progress: Callable[[int], None] | None = None,
                         report: RecoveryReport | None = None) -> int:  # fmt: skip
        files = self.mapped_file_queue.files
        if not files:
            self.mapped_file_queue.set_flushed_and_committed(0)
            destroy_cq()
            return 0
        index = max(0, len(files) - 3)
        end = self._recover_from(index, self.config.check_crc_on_recover, None, progress, report)
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
                           dispatch: Callable[[DispatchRequest], None] | RecoveryDispatch,
                           truncate_cq: Callable[[int], None], destroy_cq: Callable[[], None],
                           progress: Callable[[int], None] | None = None,
                           report: RecoveryReport | None = None) -> int:  # fmt: skip
        files = self.mapped_file_queue.files
        if not files:
            self.mapped_file_queue.set_flushed_and_committed(0)
            destroy_cq()
            return 0
        index = self.abnormal_recovery_start(min_timestamp)
        end = self._recover_from(index, self.config.check_crc_on_recover, dispatch, progress, report)
        self._truncate_to(end, report)
        if max_phy_offset_of_cq >= end:
            truncate_cq(end)
        return end

    def _truncate_to(self, offset: int, report: RecoveryReport | None = None) -> None:
        mfq = self.mapped_file_queue
        if report is not None:
            report.commit_log_files_deleted = [mf.path.name for mf in mfq.files if mf.file_from_offset > offset]
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
    "SCHEDULE_TOPIC",
    "CommitLog",
    "DispatchRequest",
    "PutMessageResult",
    "PutMessageStatus",
]
