"""``rocketq store …``: look into, export, import and check a RocketMQ store directory.

Subcommands (each takes ``-c/--conf broker.conf`` with RocketMQ's property names):

- ``inspect DIR``   files, offsets, topics and queues, time range, shutdown state, checkpoint;
- ``dump DIR``      every message in commit-log order (``--json``: JSON lines, see
  :mod:`rocketq.store.dump`);
- ``import DIR FILE`` JSON lines of the dump's shape, put through the store as a broker would;
- ``query DIR``     messages by key through the index; ``get DIR`` one message by id or offset;
- ``verify DIR``    every record, consume-queue unit and index entry checked against the commit log;
- ``recover DIR``   run a broker's start-up recovery for real and report what it truncated and rebuilt.

Every command but ``import`` and ``recover`` opens the store read-only: nothing
under DIR is written or deleted, and a store left by a crash is recovered in
memory only.

Without ``-c`` the file sizes come from the files themselves: the commit-log
and consume-queue file sizes from the files' lengths. The index slot and entry
counts are not recoverable from a length alone; they are taken, in this order,
from the RocketMQ defaults when the files have the default size, from a
``broker.conf`` next to DIR (``DIR/../broker.conf``), or from a full index file
(its indexCount is maxIndexNum); otherwise ``-c`` is required.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import mmap
import os
import shutil
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from rocketq.cli.args import non_negative, positive
from rocketq.common.codec import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    SYSFLAG_POS,
    RecordInfo,
    check_record,
    decode_record,
    store_timestamp_pos,
)
from rocketq.common.errors import CorruptRecordError, RocketqError, StoreError
from rocketq.common.message import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
    transaction_type,
)
from rocketq.common.message_id import decode_offset_message_id
from rocketq.store.consume_queue import FILLER_SIZE
from rocketq.store.dump import MessageDictError, dict_to_message, message_to_dict
from rocketq.store.index_file import INDEX_HEADER_SIZE, index_file_size, index_key_hash
from rocketq.store.message_store import MessageStore
from rocketq.store.read_only import ReadOnlyStore, unrecovered_data
from rocketq.store.store_config import MessageStoreConfig
from rocketq.store.store_settings import (
    INDEX_HEADER,
    StoreSettings,
    index_files,
    read_index_header,
    store_directory,
    store_settings,
)

_LEN_MAGIC = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_INDEX_ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phys", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
_MESSAGE_MAGICS = (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
_ZERO_CHUNK = 1 << 20
_NO_END = 2**63 - 1  # no upper bound on store time (mqadmin queries up to Long.MAX_VALUE)


class CommandError(RocketqError):
    """A command that cannot do what was asked; ``exit_code`` is the process status."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# ============================================================================ settings


# ======================================================================= opening stores


class _Progress:
    """tqdm bars on stderr for the store's ``progress(stage, done, total)`` callback."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bars: dict[str, Any] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        bar = self._bars.get(stage)
        if bar is None:
            from tqdm import tqdm

            bar = tqdm(total=total, desc=stage, unit="B", unit_scale=True, file=sys.stderr, leave=False)
            self._bars[stage] = bar
        bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()


def open_read_only(args: argparse.Namespace) -> tuple[ReadOnlyStore, StoreSettings]:
    """Open DIR read-only and recovered in memory; the caller closes the store."""
    store_dir = store_directory(args.dir)
    settings = store_settings(store_dir, args.conf)
    progress = _Progress(sys.stderr.isatty())
    store = ReadOnlyStore(settings.config, progress=progress)
    try:
        store.load()
    finally:
        progress.close()
    return store, settings


def _iso(ms: int) -> str:
    if ms <= 0:
        return "-"
    try:
        t = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _emit(out: IO[str], lines: list[str]) -> None:
    if lines:
        out.write("\n".join(lines) + "\n")


# ============================================================================= inspect


@dataclass
class _LogWalk:
    messages: int = 0
    blanks: int = 0
    earliest: int = 0
    latest: int = 0
    end: int = 0
    stopped_at: int | None = None
    flushed_end: int = 0  # end of the last record stored at or before the checkpoint's physicMsgTimestamp


def _walk_headers(store: MessageStore) -> _LogWalk:
    """Count records and store times of the recovered commit log, reading only record heads."""
    w = _LogWalk()
    cp = store.checkpoint
    flushed_ts = cp.physic_msg_timestamp if cp is not None else 0
    for mf in store.commit_log.mapped_file_queue.files:
        mm, end, pos = mf.mm, mf.read_position(), 0
        while pos + 8 <= end:
            total, magic = _LEN_MAGIC.unpack_from(mm, pos)
            if magic == BLANK_MAGIC_CODE:
                w.blanks += 1
                break
            if magic not in _MESSAGE_MAGICS or total <= 0 or pos + total > end:
                if total != 0 or magic != 0:
                    w.stopped_at = mf.file_from_offset + pos
                break
            sys_flag = _I32.unpack_from(mm, pos + SYSFLAG_POS)[0]
            ts = _I64.unpack_from(mm, pos + store_timestamp_pos(sys_flag))[0]
            w.earliest = ts if not w.earliest else min(w.earliest, ts)
            w.latest = max(w.latest, ts)
            w.messages += 1
            pos += total
            w.end = mf.file_from_offset + pos
            if ts <= flushed_ts:
                w.flushed_end = w.end
        if w.stopped_at is not None:
            break
    return w


def _durability_offsets(store: MessageStore, walk: _LogWalk) -> dict[str, Any]:
    """Flushed and confirm offsets of the commit log, and where an abnormal recovery would scan from.

    After a clean shutdown everything was flushed at close. After a crash the
    checkpoint only proves that records stored up to its physicMsgTimestamp
    reached the disk; later ones may have too (and recovery keeps whatever is
    valid), but nothing records it.
    """
    cl = store.commit_log
    files = cl.mapped_file_queue.files
    start = -1
    if files:
        start = files[cl.abnormal_recovery_start(store.abnormal_recovery_min_timestamp())].file_from_offset
    return {
        "flushedOffset": cl.get_max_offset() if store.last_exit_ok else walk.flushed_end,
        "confirmOffset": store.get_confirm_offset(),
        "abnormalRecoveryStartOffset": start,
    }


def inspect_store(store: ReadOnlyStore, settings: StoreSettings) -> dict[str, Any]:
    """Everything ``inspect`` reports, as a JSON-ready dict."""
    cfg = store.config
    cl = store.commit_log
    loaded = {mf.path.name: mf for mf in cl.mapped_file_queue.files}
    cl_files = []
    if cfg.commit_log_path.is_dir():
        for p in sorted(cfg.commit_log_path.iterdir()):
            if not p.is_file():
                continue
            mf = loaded.get(p.name)
            entry: dict[str, Any] = {"name": p.name, "size": p.stat().st_size}
            if mf is not None:
                entry.update(fromOffset=mf.file_from_offset, readPosition=mf.read_position())
            else:
                entry["note"] = "beyond the recovered end (a broker would delete it)"
            cl_files.append(entry)
    walk = _walk_headers(store)
    topics: dict[str, Any] = {}
    for topic in sorted(store.consume_queue_table):
        queues: dict[str, Any] = {}
        total = 0
        for qid in sorted(store.consume_queue_table[topic]):
            cq = store.consume_queue_table[topic][qid]
            lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            queues[str(qid)] = {
                "minOffset": lo,
                "maxOffset": hi,
                "count": hi - lo,
                "files": len(cq.queue.files),
            }
            total += hi - lo
        topics[topic] = {"queues": queues, "count": total}
    loaded_index = {f.name: f for f in store.index_service.files}
    index_entries: list[dict[str, Any]] = []
    for p in index_files(cfg.index_path):
        f = loaded_index.get(p.name)
        if f is not None:
            head = (
                f.begin_timestamp,
                f.end_timestamp,
                f.begin_phy_offset,
                f.end_phy_offset,
                f.hash_slot_count,
                f.index_count,
            )
        else:
            head = read_index_header(p)
        entry = dict(
            zip(
                (
                    "beginTimestamp",
                    "endTimestamp",
                    "beginPhyOffset",
                    "endPhyOffset",
                    "hashSlotCount",
                    "indexCount",
                ),
                head,
                strict=True,
            )
        )
        entry = {"name": p.name, "size": p.stat().st_size, **entry, "loaded": f is not None}
        cp_index = store.checkpoint.index_msg_timestamp if store.checkpoint is not None else 0
        if not store.last_exit_ok and entry["endTimestamp"] > cp_index:
            entry["note"] = "ends after the checkpoint's indexMsgTimestamp: a broker would rebuild it"
        index_entries.append(entry)
    cp = store.checkpoint
    checkpoint = (
        {}
        if cp is None
        else {
            "physicMsgTimestamp": cp.physic_msg_timestamp,
            "logicsMsgTimestamp": cp.logics_msg_timestamp,
            "indexMsgTimestamp": cp.index_msg_timestamp,
            "masterFlushedOffset": cp.master_flushed_offset,
            "confirmPhyOffset": cp.confirm_phy_offset,
        }
    )
    return {
        "store": str(store.root),
        "cleanShutdown": store.last_exit_ok,
        "abortFile": store.abort_file.exists(),
        "config": {
            "mappedFileSizeCommitLog": cfg.mapped_file_size_commit_log,
            "mappedFileSizeConsumeQueue": cfg.mapped_file_size_consume_queue,
            "maxHashSlotNum": cfg.max_hash_slot_num,
            "maxIndexNum": cfg.max_index_num,
            "from": settings.sources,
        },
        "commitLog": {
            "path": str(cfg.commit_log_path),
            "minOffset": cl.get_min_offset(),
            "maxOffset": cl.get_max_offset(),
            "recoveredOffset": store.recovered_offset,
            **_durability_offsets(store, walk),
            "unrecoveredDataAfter": unrecovered_data(store),
            "messages": walk.messages,
            "blankEnds": walk.blanks,
            "files": cl_files,
            "undispatched": len(store.undispatched),
        },
        "timeRange": {
            "earliestStoreTimestamp": walk.earliest,
            "latestStoreTimestamp": walk.latest,
            "earliest": _iso(walk.earliest),
            "latest": _iso(walk.latest),
        },
        "consumeQueue": {
            "path": str(cfg.consume_queue_path),
            "queues": sum(len(q) for q in store.consume_queue_table.values()),
            "files": sum(len(cq.queue.files) for cq in store.consume_queues()),
        },
        "topics": topics,
        "index": {"path": str(cfg.index_path), "files": index_entries},
        "checkpoint": checkpoint,
    }


def _count(n: int, noun: str) -> str:
    """``1 message``, ``2 messages``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _inspect_text(info: dict[str, Any]) -> list[str]:
    cfg, cl, tr = info["config"], info["commitLog"], info["timeRange"]
    lines = [
        f"store            {info['store']}",
        f"last shutdown    {'clean' if info['cleanShutdown'] else 'NOT clean (abort file present)'}",
        f"sizes            commit-log files {cfg['mappedFileSizeCommitLog']} B, consume-queue files "
        f"{cfg['mappedFileSizeConsumeQueue']} B, index {cfg['maxHashSlotNum']} slots x "
        f"{cfg['maxIndexNum']} entries",
        f"commit log       {cl['path']}: "
        + (f"offsets {cl['minOffset']}..{cl['maxOffset']}, " if cl["minOffset"] >= 0 else "empty, ")
        + f"{_count(cl['messages'], 'message')}, {cl['blankEnds']} BLANK ends",
    ]
    for f in cl["files"]:
        extra = f" read position {f['readPosition']}" if "readPosition" in f else f"  ({f.get('note', '')})"
        lines.append(f"  {f['name']}  {f['size']} B{extra}")
    if cl["undispatched"]:
        lines.append(
            f"  {cl['undispatched']} records are not in their consume queue yet (a broker would add them)"
        )
    how = "all flushed at the clean shutdown" if info["cleanShutdown"] else "known flushed by the checkpoint"
    lines.append(
        f"durability       flushed offset {cl['flushedOffset']} ({how}), confirm offset {cl['confirmOffset']}"
        + (f"; an abnormal recovery would scan from offset {cl['abnormalRecoveryStartOffset']}"
           if cl["abnormalRecoveryStartOffset"] >= 0 else "")
    )
    lines.append(
        f"store time       {tr['earliest']} .. {tr['latest']}  ({tr['earliestStoreTimestamp']} .. "
        f"{tr['latestStoreTimestamp']})"
    )
    cq = info["consumeQueue"]
    lines.append(f"consume queues   {cq['path']}: {cq['queues']} queues in {cq['files']} files")
    lines.append(f"topics           {len(info['topics'])}")
    for topic, t in info["topics"].items():
        lines.append(f"  {topic}  {_count(t['count'], 'message')} in {_count(len(t['queues']), 'queue')}")
        for qid, q in t["queues"].items():
            lines.append(
                f"    queue {qid:>3}  offsets {q['minOffset']}..{q['maxOffset']}  ({_count(q['count'], 'message')})"
            )
    lines.append(f"index files      {len(info['index']['files'])}")
    for f in info["index"]["files"]:
        keys = max(f["indexCount"] - 1, 0)
        lines.append(
            f"  {f['name']}  {keys} keys, {f['hashSlotCount']} slots used,"
            f" time {_iso(f['beginTimestamp'])}..{_iso(f['endTimestamp'])}, offsets {f['beginPhyOffset']}.."
            f"{f['endPhyOffset']}" + ("" if f["loaded"] else f"  ({f['note']})")
        )
    cp = info["checkpoint"]
    if cp:
        lines.append("checkpoint")
        for k, v in cp.items():
            lines.append(f"  {k:<20} {v}" + (f"  {_iso(v)}" if k.endswith("Timestamp") and v > 0 else ""))
    return lines


def cmd_inspect(args: argparse.Namespace) -> int:
    store, settings = open_read_only(args)
    try:
        info = inspect_store(store, settings)
    finally:
        store.close()
    if args.json:
        sys.stdout.write(json.dumps(info, indent=1) + "\n")
    else:
        _emit(sys.stdout, _inspect_text(info))
    return 0


# ================================================================================ dump


def iter_messages(
    store: MessageStore,
    topic: str | None = None,
    queue_id: int | None = None,
) -> Iterator[MessageExt]:
    """Every message of the (recovered) commit log in offset order, optionally of one topic / queue id.

    Raises :class:`CommandError` when a record cannot be read before the end.
    """
    cl = store.commit_log
    start = cl.get_min_offset()
    if start < 0:
        return
    for offset, info, _req in cl.scan(start, check_crc=False):
        if not info.ok:
            raise CommandError(
                f"unreadable record at commit-log offset {offset}; the dump stops here "
                "(run 'rocketq store verify' for details)"
            )
        if info.blank or info.size <= 0:
            continue
        if (topic is not None and info.topic != topic) or (
            queue_id is not None and info.queue_id != queue_id
        ):
            continue
        data = cl.get_message(offset, info.size)
        if data is None:
            raise CommandError(f"record at commit-log offset {offset} cannot be read")
        try:
            yield decode_record(data)
        except CorruptRecordError as e:
            raise CommandError(f"commit-log offset {offset}: {e}") from None


def _summary_line(msg: MessageExt) -> str:
    keys = msg.keys
    parts = [
        f"{msg.commit_log_offset:>12}",
        f"{msg.topic}/{msg.queue_id}#{msg.queue_offset}",
        msg.msg_id,
        _iso(msg.store_timestamp),
        f"tags={msg.tags or '-'}",
        f"keys=[{keys}]" if keys else "keys=-",
        f"uniq={msg.uniq_key or '-'}",
        f"size={msg.store_size}",
        f"body={len(msg.body)}B" + (" (compressed)" if msg.sys_flag & 1 else ""),
    ]
    if msg.sys_flag & ~1:
        parts.append(f"sysFlag={msg.sys_flag}")
    return "  ".join(parts)


def _write_messages(msgs: Iterator[MessageExt] | list[MessageExt], as_json: bool) -> int:
    out = sys.stdout
    n = 0
    batch: list[str] = []
    for msg in msgs:
        batch.append(json.dumps(message_to_dict(msg)) if as_json else _summary_line(msg))
        n += 1
        if len(batch) >= 256:
            _emit(out, batch)
            batch = []
    _emit(out, batch)
    return n


def cmd_dump(args: argparse.Namespace) -> int:
    store, _ = open_read_only(args)
    try:
        n = _write_messages(iter_messages(store, args.topic, args.queue), args.json)
        if n == 0 and args.topic is not None and args.topic not in store.consume_queue_table:
            topics = sorted(store.consume_queue_table)
            shown = ", ".join(topics[:20]) + (f", ... ({len(topics)} in all)" if len(topics) > 20 else "")
            raise CommandError(f"topic {args.topic!r} is not in this store (its topics: {shown or 'none'})")
        lost = unrecovered_data(store)
        clean = store.last_exit_ok
    finally:
        store.close()
    if not args.json:
        sys.stderr.write(f"{_count(n, 'message')}\n")
    if lost is not None:
        why = f"commit-log data after offset {lost} is not dumped: recovery stops at a damaged record there"
        if clean:
            raise CommandError(f"{why} (run 'rocketq store verify {args.dir}')")
        sys.stderr.write(f"rocketq: warning: {why} (a torn write left by the crash)\n")
    return 0


# ============================================================================== import


def _open_input(path: str) -> tuple[IO[bytes], int | None, str]:
    if path == "-":
        return sys.stdin.buffer, None, "<stdin>"
    p = Path(path).expanduser()
    if p.is_dir():
        raise CommandError(f"{path}: is a directory, not a file of JSON lines")
    f = open(p, "rb")  # noqa: SIM115 - closed by the caller
    return f, os.fstat(f.fileno()).st_size, path


def _check_import_target(store_dir: Path) -> None:
    if store_dir.exists() and not store_dir.is_dir():
        raise StoreError(f"{store_dir}: exists and is not a directory")
    if store_dir.is_dir():
        markers = ("commitlog", "consumequeue", "index", "checkpoint", "config", "abort", "lock")
        if any(store_dir.iterdir()) and not any((store_dir / m).exists() for m in markers):
            raise StoreError(f"{store_dir}: not empty and not a RocketMQ store; refusing to write into it")


def cmd_import(args: argparse.Namespace) -> int:
    store_dir = Path(args.dir).expanduser()
    _check_import_target(store_dir)
    made_here = not store_dir.exists()  # a store this import makes is removed again when nothing went in
    settings = store_settings(store_dir, args.conf)
    src, total, name = _open_input(args.file)
    show = not args.quiet and sys.stderr.isatty()
    progress = _Progress(show)
    imported = failed = blank = 0
    try:
        store = MessageStore(settings.config, read_only=False, progress=progress)
        store.load()
        try:
            store.start()
            progress.close()
            from tqdm import tqdm

            with tqdm(
                total=total,
                desc="import",
                unit="B",
                unit_scale=True,
                file=sys.stderr,
                leave=False,
                disable=not show,
            ) as bar:
                done = 0  # lines handled to the end
                try:
                    for lineno, raw in enumerate(src, 1):
                        bar.update(len(raw))
                        error = _import_line(store, raw)
                        done = lineno
                        if error is None:
                            imported += 1
                            continue
                        if error == "":
                            blank += 1
                            continue
                        failed += 1
                        where = f"{name}:{lineno}: {error}"
                        if args.strict:
                            raise CommandError(f"{where} (--strict: stopped after {imported} messages)")
                        sys.stderr.write(f"rocketq: {where} (skipped)\n")
                except KeyboardInterrupt:
                    # An import is not idempotent: say where it stopped, so that the rest can be imported alone.
                    bar.close()
                    sys.stderr.write(f"rocketq: interrupted: {imported} messages imported from the first {done} lines "
                                     f"of {name}; to go on, import from line {done + 1} (tail -n +{done + 1}; line "
                                     f"{done + 1} may have been stored as the import stopped: check it)\n")  # fmt: skip
                    raise
        finally:
            if imported and not store.wait_dispatched(max(60.0, imported / 1000)):
                sys.stderr.write("rocketq: warning: dispatch to consume queues and index did not catch up\n")
            store.close()
    finally:
        progress.close()
        if src is not sys.stdin.buffer:
            src.close()
        if made_here and imported == 0 and (failed or sys.exc_info()[0] is not None) and store_dir.is_dir():
            shutil.rmtree(store_dir, ignore_errors=True)  # a failed import leaves no half-made, empty store
    summary = f"imported {imported} messages into {store_dir}"
    if failed:
        summary += f"; {failed} lines failed and were skipped"
    sys.stdout.write(summary + "\n")
    return 1 if failed else 0


def _import_line(store: MessageStore, raw: bytes) -> str | None:
    """Put one line; None when stored, "" for a blank line, else what was wrong."""
    if not raw.strip():
        return ""
    try:
        obj = json.loads(raw)
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except json.JSONDecodeError as e:
        return f"not JSON: {e.msg} at column {e.colno}"
    try:
        rec = dict_to_message(obj)
    except MessageDictError as e:
        return str(e)
    result = store.put_message(rec.to_message_ext(store))
    if not result.ok:
        return f"not stored: {result.status.value}" + (f": {result.error}" if result.error else "")
    return None


# ========================================================================= query / get


def cmd_query(args: argparse.Namespace) -> int:
    store, _ = open_read_only(args)
    try:
        end = args.end if args.end is not None else _NO_END
        found = store.query_message(args.topic, args.key, args.max, args.begin, end).messages
        n = _write_messages(found, args.json)
        cap = store.config.max_msgs_num_batch
    finally:
        store.close()
    if n == 0:
        raise CommandError(f"no message of topic {args.topic} with key {args.key!r}")
    if args.max > cap and n >= cap:
        sys.stderr.write(f"rocketq: note: a key query gives at most maxMsgsNumBatch={cap} messages, as RocketMQ's; "
                         "there may be more: narrow it with --begin/--end\n")  # fmt: skip
    return 0


def _describe(msg: MessageExt) -> list[str]:
    d = message_to_dict(msg)
    lines = []
    for k, v in d.items():
        if k in ("properties", "body"):
            continue
        lines.append(f"{k:<26} {v}")
        if k in ("bornTimestamp", "storeTimestamp"):
            lines.append(f"{'':<26} {_iso(v)}")
    lines.append("properties")
    lines.extend(f"  {k} = {v}" for k, v in msg.properties.items())
    body = msg.body
    try:
        text = body.decode("utf-8")
        printable = text.isprintable() or all(c.isprintable() or c in "\r\n\t" for c in text)
    except UnicodeDecodeError:
        printable = False
    if printable:
        lines.append("body (text)")
        lines.append("  " + (text if len(text) <= 2000 else text[:2000] + f"... ({len(text)} characters)"))
    else:
        lines.append(f"body ({len(body)} bytes, hex)")
        lines.append("  " + body[:256].hex() + ("..." if len(body) > 256 else ""))
    return lines


def cmd_get(args: argparse.Namespace) -> int:
    store, _ = open_read_only(args)
    try:
        msg: MessageExt | None = None
        if args.offset is not None:
            msg = store.look_message_by_offset(args.offset)
            missing = f"no message starts at commit-log offset {args.offset}"
        else:
            msg_id = args.msg_id.strip()
            try:
                _host, offset = decode_offset_message_id(msg_id)
            except RocketqError:
                offset = -1
            if offset >= 0:
                msg = store.look_message_by_offset(offset)
            if msg is None and args.topic:
                hits = store.query_message(args.topic, msg_id, 32, 0, _NO_END)
                msg = next((m for m in hits.messages if m.uniq_key == msg_id), None)
            missing = f"no message with id {msg_id}" + (
                "" if args.topic else " (for a unique key / client msgId give --topic too)"
            )
        if msg is None:
            raise CommandError(missing)
        if args.json:
            sys.stdout.write(json.dumps(message_to_dict(msg)) + "\n")
        else:
            _emit(sys.stdout, _describe(msg))
    finally:
        store.close()
    return 0


# ============================================================================== verify


_EARLIEST_TIME_MS = 946_684_800_000  # 2000-01-01: a store time before that is no store's


class _Verifier:
    """Checks a store file by file; problems carry the commit-log offset they concern."""

    def __init__(self, store: ReadOnlyStore, max_shown: int) -> None:
        self.store = store
        self.cfg = store.config
        self.cl = store.commit_log
        self.clean = store.last_exit_ok
        self.end = store.recovered_offset
        self.undispatched = set(store.undispatched)
        self.max_shown = max_shown
        self.problems: list[tuple[int, str]] = []
        self.notes: list[str] = []
        self.report: list[str] = []
        self.maps: dict[int, mmap.mmap] = {}
        self.fds: dict[int, int] = {}
        self._stack = contextlib.ExitStack()

    # --- helpers --------------------------------------------------------------
    def problem(self, offset: int, text: str) -> None:
        self.problems.append((offset, text))

    def _tail_problem(self, offset: int, text: str) -> None:
        """A problem at or after the recovered end of a store left by a crash is only a note."""
        if not self.clean and offset >= self.end:
            self.notes.append(f"{text} (after the recovered end {self.end}: recovery discards it)")
        else:
            self.problem(offset, text)

    def _nonzero_at(self, mm: mmap.mmap, start: int, stop: int) -> int:
        """First non-zero byte position in [start, stop), or -1; holes of a sparse file are skipped."""
        fd = self.fds.get(id(mm), -1)
        pos = start
        while pos < stop:
            end = stop
            if fd >= 0 and hasattr(os, "SEEK_DATA"):
                try:
                    pos = max(pos, os.lseek(fd, pos, os.SEEK_DATA))
                    end = min(stop, os.lseek(fd, pos, os.SEEK_HOLE))
                except OSError:  # ENXIO: nothing but a hole after pos
                    return -1
                if pos >= stop:
                    return -1
            while pos < end:
                nxt = min(end, pos + _ZERO_CHUNK)
                chunk = mm[pos:nxt]
                if chunk.count(0) != len(chunk):
                    return pos + len(chunk) - len(chunk.lstrip(b"\0"))
                pos = nxt
        return -1

    # --- commit log -------------------------------------------------------------
    def check_commit_log(self) -> None:
        size = self.cfg.mapped_file_size_commit_log
        path = self.cfg.commit_log_path
        files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else []
        records = blanks = unit_checked = pending = beyond = 0
        data_end = -1
        expected_start: int | None = None
        for i, p in enumerate(files):
            if not (p.name.isdigit() and len(p.name) == 20):
                self.problem(0, f"commit log: unexpected file {p.name}")
                continue
            start = int(p.name)
            if start % size:
                self.problem(start, f"commit log: file {p.name} does not start at a multiple of {size}")
            if expected_start is not None and start != expected_start:
                self.problem(
                    start, f"commit log: file {p.name} follows a gap (expected {expected_start:020d})"
                )
            expected_start = start + size
            actual = p.stat().st_size
            if actual != size:
                if not (actual == 0 and i == len(files) - 1):
                    self.problem(start, f"commit log: file {p.name} is {actual} bytes, expected {size}")
                continue
            last_file = i == len(files) - 1
            mm = self._map(p)
            self.maps[start] = mm
            pos = 0
            while True:
                offset = start + pos
                if pos + 8 > size:
                    if not last_file:
                        self._tail_problem(offset, f"commit log: file {p.name} ends without a BLANK record")
                    break
                total, magic = _LEN_MAGIC.unpack_from(mm, pos)
                if total == 0 and magic == 0:
                    nz = self._nonzero_at(mm, pos, size)
                    if nz >= 0:
                        self._tail_problem(
                            start + nz,
                            f"commit log: non-zero bytes at {start + nz} after the last record ({offset})",
                        )
                    if data_end < 0:
                        data_end = offset
                    break
                if data_end >= 0:
                    self._tail_problem(
                        offset, f"commit log: data at {offset} after the end of the log ({data_end})"
                    )
                    break
                if magic == BLANK_MAGIC_CODE:
                    blanks += 1
                    if total != size - pos:
                        self.problem(
                            offset,
                            f"commit log: BLANK record at {offset} says {total} free bytes, "
                            f"the file has {size - pos}",
                        )
                    nz = self._nonzero_at(mm, pos + 8, size)
                    if nz >= 0:
                        self.problem(
                            start + nz,
                            f"commit log: non-zero bytes at {start + nz} after the BLANK record at {offset}",
                        )
                    break
                if magic not in _MESSAGE_MAGICS:
                    self._tail_problem(
                        offset, f"commit log: bad magic code 0x{magic & 0xFFFFFFFF:08X} at {offset}"
                    )
                    break
                if total < 8 or pos + total > size:
                    self._tail_problem(
                        offset, f"commit log: record at {offset} has an impossible TOTALSIZE {total}"
                    )
                    break
                info = check_record(mm, pos, check_crc=True)
                if not info.ok:
                    plain = check_record(mm, pos, check_crc=False)
                    if plain.ok:
                        self._tail_problem(offset, f"commit log: body CRC mismatch in the record at {offset}")
                        info = plain
                    else:
                        written = len(mm[pos : pos + total].rstrip(b"\0"))
                        if written < total and self._nonzero_at(mm, pos + total, size) < 0:
                            # The log ends inside this record: nothing but zeros from there on.
                            self.notes.append(
                                f"commit log: the record at {offset} is cut short where the log ends ({written} of "
                                f"its {total} bytes written): a slave stopped between two frames of its master, or "
                                f"an append cut by a crash; recovery drops it (a slave's master sends it again)"
                            )
                            break
                        self._tail_problem(
                            offset,
                            f"commit log: record at {offset}: its field lengths do not "
                            f"add up to TOTALSIZE {total}",
                        )
                        pos += total
                        continue
                records += 1
                if info.commit_log_offset != offset:
                    self.problem(
                        offset,
                        f"commit log: record at {offset} says PHYSICALOFFSET {info.commit_log_offset}",
                    )
                if offset + total <= self.end:
                    state = self._check_has_unit(
                        offset, total, info.topic, info.queue_id, info.queue_offset, info.sys_flag
                    )
                    unit_checked += state == 1
                    pending += state == 2
                else:
                    beyond += 1
                pos += total
        if not files:
            self.report.append("commit log      no files")
            return
        if self.clean and data_end >= 0 and data_end != self.end and not self.problems:
            self.problem(
                min(data_end, self.end),
                f"commit log: records end at {data_end} but recovery ends at {self.end}",
            )
        self.report.append(
            f"commit log      {len(files)} files, {records} records, {blanks} BLANK ends, data ends "
            f"at {data_end if data_end >= 0 else 'the end of the last file'}"
        )
        self.report.append(
            f"queue units     {unit_checked} records found in their consume queue"
            + (f", {pending} not yet dispatched (a broker would add them)" if pending else "")
        )
        if pending:
            self.notes.append(
                f"{pending} records after the end of their consume queue: a broker would dispatch them"
            )
        if beyond:
            self.notes.append(
                f"{beyond} records after the recovered end {self.end} were not checked against consume queues"
            )

    def _check_has_unit(
        self, offset: int, size: int, topic: str, queue_id: int, queue_offset: int, sys_flag: int
    ) -> int:
        """0 = not applicable or a problem, 1 = unit found and right, 2 = pending dispatch."""
        if transaction_type(sys_flag) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            return 0
        cq = self.store.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            if not self.clean and offset in self.undispatched:
                return 2
            self.problem(offset, f"record at {offset}: no consume queue {topic}/{queue_id}")
            return 0
        unit = cq.get_unit(queue_offset)
        if unit is None:
            if queue_offset >= cq.get_max_offset_in_queue() and not self.clean:
                return 2
            if queue_offset < cq.get_min_offset_in_queue():
                return 0
            self.problem(offset, f"record at {offset}: no unit at {topic}/{queue_id}#{queue_offset}")
            return 0
        if unit.phys != offset or unit.size != size:
            self.problem(
                offset,
                f"record at {offset} ({size} B): unit {topic}/{queue_id}#{queue_offset} points at "
                f"{unit.phys} ({unit.size} B)",
            )
            return 0
        return 1

    def _map(self, path: Path) -> mmap.mmap:
        fd = os.open(path, os.O_RDONLY)
        self._stack.callback(os.close, fd)
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        self._stack.callback(mm.close)
        self.fds[id(mm)] = fd
        return mm

    def _record_at(self, phys: int) -> RecordInfo | None:
        """The record starting at *phys* in the files on disk (not only the recovered part), or None."""
        size = self.cfg.mapped_file_size_commit_log
        mm = self.maps.get(phys - phys % size)
        pos = phys % size
        if mm is None or pos + 8 > size:
            return None
        info = check_record(mm, pos, check_crc=False)
        if not info.ok or info.size <= 0:
            return None
        return info

    # --- consume queues -----------------------------------------------------------
    def check_consume_queues(self) -> None:
        cl_min = self.cl.get_min_offset()
        queues = units_ok = expired = 0
        for topic in sorted(self.store.consume_queue_table):
            for qid in sorted(self.store.consume_queue_table[topic]):
                cq = self.store.consume_queue_table[topic][qid]
                queues += 1
                lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
                q = lo
                while q < hi:
                    units = cq.read_units(q, min(4096, hi - q))
                    if len(units) == 0:
                        self.problem(
                            max(cl_min, 0), f"consume queue {topic}/{qid}: units {q}..{hi} cannot be read"
                        )
                        break
                    rows = zip(
                        units["phys"].tolist(), units["size"].tolist(), units["tags"].tolist(), strict=True
                    )
                    for j, (phys, size, tags) in enumerate(rows):
                        qo = q + j
                        where = f"consume queue {topic}/{qid}#{qo}"
                        if size == FILLER_SIZE and phys == 0:
                            continue
                        if phys < cl_min:
                            expired += 1
                            continue
                        if size <= 0 or phys + size > self.end:
                            self.problem(
                                phys,
                                f"{where}: unit ({phys}, {size} B) is past the commit log end {self.end}",
                            )
                            continue
                        rec = self._record_at(phys)
                        if rec is None:
                            self.problem(phys, f"{where}: no readable record starts at {phys}")
                            continue
                        info = rec
                        bad = []
                        if info.commit_log_offset != phys:
                            bad.append(f"record says PHYSICALOFFSET {info.commit_log_offset}")
                        if info.size != size:
                            bad.append(f"size {size} but the record has {info.size}")
                        if info.topic != topic or info.queue_id != qid:
                            bad.append(f"record is {info.topic}/{info.queue_id}")
                        if info.queue_offset != qo:
                            bad.append(f"record has queue offset {info.queue_offset}")
                        code = self.cl.tags_code_of(info)
                        if code != tags:
                            bad.append(f"tag code {tags} but the record's is {code}")
                        if transaction_type(info.sys_flag) not in (
                            TRANSACTION_NOT_TYPE,
                            TRANSACTION_COMMIT_TYPE,
                        ):
                            bad.append(f"record has sysFlag {info.sys_flag} (prepared/rollback)")
                        if bad:
                            self.problem(phys, f"{where} -> {phys}: " + "; ".join(bad))
                        else:
                            units_ok += 1
                    q += len(units)
        self.report.append(
            f"consume queues  {queues} queues, {units_ok} units match their record"
            + (f", {expired} below the commit log's start" if expired else "")
        )

    # --- index -------------------------------------------------------------------------
    def check_index(self) -> None:
        slots, num = self.cfg.max_hash_slot_num, self.cfg.max_index_num
        expected_size = index_file_size(slots, num)
        files = index_files(self.cfg.index_path)
        entries_ok = past_end = 0
        for p in files:
            actual = p.stat().st_size
            if actual != expected_size:
                self.problem(0, f"index file {p.name}: {actual} bytes, expected {expected_size}")
                continue
            with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                ok, past = self._check_index_file(p.name, mm, slots, num)
            entries_ok += ok
            past_end += past
        self.report.append(
            f"index           {len(files)} files, {entries_ok} entries point at a record with their key"
        )
        if past_end and not self.clean:
            self.notes.append(
                f"{past_end} index entries point past the recovered end (a broker re-indexes them)"
            )
        elif past_end:
            self.notes.append(f"{past_end} index entries point past the end of the commit log, at records an earlier "
                              "recovery truncated (RocketMQ leaves them too; a key lookup checks the record it finds)")

    def _index_structure(self, name: str, ent: np.ndarray, heads: np.ndarray, slots: int) -> None:
        """Chains: each entry links to an older one of the same slot; each slot heads an entry of its own."""
        count = len(ent)
        hashes = ent["hash"].astype(np.int64)
        prev = ent["prev"].astype(np.int64)
        slot_of = np.where(hashes >= 0, hashes % slots, -1)
        bad_prev = (prev < 0) | ((prev >= np.arange(count)) & (prev != 0))
        bad_prev[0] = False
        linked = (prev > 0) & ~bad_prev
        bad_chain = np.zeros(count, dtype=bool)
        bad_chain[linked] = slot_of[prev[linked]] != slot_of[linked]
        bad = bad_prev | bad_chain | (hashes < 0) | (ent["diff"] < 0)
        bad[0] = False
        for n in np.nonzero(bad)[0][: self.max_shown].tolist():
            if hashes[n] < 0:
                what = "negative key hash"
            elif ent["diff"][n] < 0:
                what = "negative time difference"
            elif bad_prev[n]:
                what = f"chain link {int(prev[n])} is not an older entry"
            else:
                what = f"chain link {int(prev[n])} belongs to another slot"
            self.problem(int(ent["phys"][n]), f"index file {name}: entry {n}: {what}")
        used = np.nonzero(heads)[0]
        out_of_range = used[(heads[used] < 0) | (heads[used] >= count)]
        for s in out_of_range[: self.max_shown].tolist():
            self.problem(0, f"index file {name}: slot {s} points at entry {int(heads[s])} of {count}")
        in_range = used[(heads[used] > 0) & (heads[used] < count)]
        for s in in_range[slot_of[heads[in_range]] != in_range][: self.max_shown].tolist():
            n = int(heads[s])
            self.problem(int(ent["phys"][n]), f"index file {name}: slot {s} heads entry {n} of another slot")

    def _check_index_file(self, name: str, mm: mmap.mmap, slots: int, num: int) -> tuple[int, int]:
        """(entries that point at a record carrying their key, entries past the recovered end)."""
        *_, count = INDEX_HEADER.unpack_from(mm, 0)
        if count > num or count < 0:
            self.problem(0, f"index file {name}: indexCount {count} is outside 0..{num}")
            return 0, 0
        if count <= 1:
            return 0, 0
        base = INDEX_HEADER_SIZE + slots * 4
        ent = np.frombuffer(mm[base : base + count * 20], dtype=_INDEX_ENTRY_DTYPE)
        heads = np.frombuffer(mm[INDEX_HEADER_SIZE:base], dtype=">i4").astype(np.int64)
        self._index_structure(name, ent, heads, slots)
        cl_min = self.cl.get_min_offset()
        ok = past_end = 0
        cache_phys = -1
        cache_keys: set[int] | None = None
        for n, (key_hash, phys) in enumerate(zip(ent["hash"].tolist(), ent["phys"].tolist(), strict=True)):
            if n == 0 or phys < cl_min:
                continue
            if phys >= self.end:  # re-indexed by a broker (unclean), or left by a truncation (as Java leaves them)
                past_end += 1
                continue
            if phys != cache_phys:
                cache_phys = phys
                cache_keys = self._index_keys_at(phys)
            where = f"index file {name}: entry {n} -> {phys}"
            if cache_keys is None:
                self.problem(phys, f"{where}: no readable record starts there")
            elif key_hash not in cache_keys:
                self.problem(phys, f"{where}: hash {key_hash} is none of the record's keys")
            else:
                ok += 1
        return ok, past_end

    def _index_keys_at(self, phys: int) -> set[int] | None:
        info = self._record_at(phys)
        if info is None:
            return None
        if info.commit_log_offset != phys:
            return None
        if transaction_type(info.sys_flag) == TRANSACTION_ROLLBACK_TYPE:
            return set()
        props = info.properties or {}
        prefix = info.topic + "#"
        keys = set()
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq is not None:
            keys.add(index_key_hash(prefix + uniq))
        for token in (props.get(PROPERTY_KEYS) or "").split(KEY_SEPARATOR):
            if token:
                keys.add(index_key_hash(prefix + token))
        return keys

    # --- all --------------------------------------------------------------------------
    def run(self) -> bool:
        self.report.append(
            f"verify          {self.store.root} (last shutdown "
            f"{'clean' if self.clean else 'NOT clean: checked after in-memory recovery'})"
        )
        with self._stack:
            self.check_commit_log()
            self.check_consume_queues()
            self.check_index()
            self.check_checkpoint()
        return not self.problems

    def check_checkpoint(self) -> None:
        """The checkpoint's three times are times: abnormal recovery picks the file it starts from with them, so a
        damaged checkpoint (garbage, an empty file) misleads it."""
        path = self.store.root / "checkpoint"
        if not path.exists():
            self.notes.append("no checkpoint file (a store never started by a broker)")
            return
        data = path.read_bytes()
        if len(data) < 24:
            self.problem(-1, f"checkpoint: {len(data)} bytes, too short for its three times (24 bytes)")
            return
        latest = int(time.time() * 1000) + 86_400_000
        before = len(self.problems)
        names = ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp")
        for name, value in zip(names, struct.unpack_from(">qqq", data), strict=True):
            if value != 0 and not _EARLIEST_TIME_MS <= value <= latest:
                self.problem(-1, f"checkpoint: {name} {value} is not a time (the file is damaged; abnormal "
                                "recovery chooses the file it starts from with it)")  # fmt: skip
        if len(self.problems) == before:
            self.report.append("checkpoint      times plausible")


def cmd_verify(args: argparse.Namespace) -> int:
    store, _ = open_read_only(args)
    try:
        v = _Verifier(store, args.max_problems)
        ok = v.run()
    finally:
        store.close()
    lines = list(v.report)
    if v.notes:
        lines.append(f"notes ({len(v.notes)})")
        lines.extend(f"  {n}" for n in v.notes[: args.max_problems])
    if ok:
        lines.append("OK")
        _emit(sys.stdout, lines)
        return 0
    problems = sorted(v.problems, key=lambda x: x[0])
    lines.append(f"problems ({len(problems)})")
    lines.extend(f"  {text}" for _off, text in problems[: args.max_problems])
    if len(problems) > args.max_problems:
        lines.append(f"  ... and {len(problems) - args.max_problems} more")
    in_log = [(off, text) for off, text in problems if off >= 0]  # (-1: a problem of no commit-log offset)
    first = in_log[0] if in_log else problems[0]
    where = f"first bad commit-log offset {first[0]}" if in_log else "none in the commit log"
    lines.append(f"FAILED: {where}")
    _emit(sys.stdout, lines)
    raise CommandError(f"{args.dir}: verification failed, {len(problems)} problems; {where}: {first[1]}")


# ============================================================================= recover


def recover_store(store_dir: Path, settings: StoreSettings, show_progress: bool) -> dict[str, Any]:
    """Open DIR writable (recovery runs as at a broker's start), let dispatch catch up, close cleanly."""
    progress = _Progress(show_progress)
    store = MessageStore(settings.config, progress=progress)
    try:
        store.load()
        abort_before = not store.last_exit_ok
        store.start()
        caught_up = store.wait_dispatched(3600.0)
    finally:
        progress.close()
        store.close()  # nothing to do if load failed (it let go of the lock itself)
    report = store.recovery_report.to_dict()
    return {
        "store": str(store_dir),
        "abortFileFound": abort_before,
        **{_camel_key(k): v for k, v in report.items()},
        "dispatchCaughtUp": caught_up,
        "closedCleanly": not store.abort_file.exists(),
    }


def _camel_key(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _recover_text(info: dict[str, Any]) -> list[str]:
    mode = info["mode"]
    why = "abort file found: the last shutdown was not clean" if info["abortFileFound"] else "clean last shutdown"
    lines = [
        f"store            {info['store']}",
        f"recovery         {mode} ({why})",
        f"commit log       CRC-checked scan from offset {info['scanStartOffset']}: {info['recordsScanned']} records"
        f" valid, stopped at {info['recoveredOffset']} ({info['stopReason']})",
    ]
    cut = []
    if info["commitLogBytesCleared"]:
        cut.append(f"{info['commitLogBytesCleared']} bytes of invalid data after the end cleared")
    if info["commitLogFilesDeleted"]:
        cut.append(f"{len(info['commitLogFilesDeleted'])} files after the end deleted "
                   f"({', '.join(info['commitLogFilesDeleted'])})")  # fmt: skip
    lines.append(f"  truncated      {'; '.join(cut) if cut else 'nothing'}")
    if mode == "abnormal":
        lines.append(f"  re-dispatched  {info['recordsRedispatched']} records whose unit or index keys were missing")
    deleted, cut_units = info["consumeQueuesDeleted"], info["consumeQueueUnitsTruncated"]
    if deleted:
        lines.append(f"consume queues   all {deleted} deleted ({cut_units} units): the commit log has no files")
    else:
        rebuilt = info["consumeQueuesRebuilt"]
        lines.append(
            f"consume queues   {cut_units} units pointing past the end truncated, "
            f"{info['consumeQueueUnitsRebuilt']} units rebuilt"
            + (f" ({rebuilt} queues rebuilt from nothing)" if rebuilt else "")
        )
    lines.append(
        f"index            {info['indexFilesDropped']} files newer than the checkpoint dropped, "
        f"{info['indexKeysRebuilt']} keys rebuilt"
    )
    state = "closed cleanly (abort file removed)" if info["closedCleanly"] else "NOT closed cleanly"
    lines.append(f"done             in {info['seconds']:.2f} s of recovery; store {state}")
    return lines


def _refuse_an_empty_commit_log(cfg: MessageStoreConfig) -> None:
    """Recovery of a commit log with no files deletes every consume queue, as RocketMQ's does. Where the queues
    hold units, the log's files are more likely somewhere else (a disk not mounted, a storePathCommitLog that
    is not the broker's) than gone: say so, and go on only when told (--force)."""
    log_dir = cfg.commit_log_path
    if log_dir.is_dir() and any(p.name.isdigit() and p.is_file() and p.stat().st_size for p in log_dir.iterdir()):
        return
    cq_dir = cfg.consume_queue_path
    units = 0
    for f in cq_dir.glob("*/*/*") if cq_dir.is_dir() else ():
        if f.is_file() and f.name.isdigit():
            data = np.fromfile(f, dtype=np.uint8)
            units += int(data[: len(data) // 20 * 20].reshape(-1, 20).any(axis=1).sum())  # units written
    if units:
        raise CommandError(f"{log_dir} holds no commit-log file, but the consume queues in {cq_dir} hold {units} "
                           "units: is the commit log elsewhere (its disk not mounted, another storePathCommitLog)? "
                           "Recovery would delete every consume queue, as RocketMQ does; give --force to let it")


def cmd_recover(args: argparse.Namespace) -> int:
    store_dir = store_directory(args.dir)
    if not (store_dir / "commitlog").exists() and not (store_dir / "consumequeue").exists():
        raise StoreError(f"{store_dir}: not a RocketMQ store (no commitlog or consumequeue)")
    settings = store_settings(store_dir, args.conf)
    if not args.force:
        _refuse_an_empty_commit_log(settings.config)
    info = recover_store(store_dir, settings, not args.quiet and sys.stderr.isatty())
    if args.json:
        sys.stdout.write(json.dumps(info, indent=1) + "\n")
    else:
        _emit(sys.stdout, _recover_text(info))
    return 0


# ============================================================================== parser

_CONF_HELP = (
    "broker.conf with RocketMQ's property names (mappedFileSizeCommitLog, mappedFileSizeConsumeQueue, "
    "maxHashSlotNum, maxIndexNum, brokerIP1, ...); without it sizes are inferred from the files"
)

_COMMANDS: dict[str, tuple[str, str, str]] = {
    "inspect": (
        "show a store's files, offsets, topics, queues, time range and shutdown state",
        "Open DIR read-only and report its commit-log files and offsets, every topic and queue with its\n"
        "min/max offsets and message count, the index files with their header fields, the earliest and\n"
        "latest store time, whether the last shutdown was clean (no abort file), and the checkpoint.",
        "example:\n  rocketq store inspect ~/store\n  rocketq store inspect ~/store -c broker.conf --json",
    ),
    "dump": (
        "print every message in commit-log order",
        "Print the messages of DIR in commit-log order, one a line: a readable summary, or with --json\n"
        "one JSON object a line (topic, queueId, queueOffset, commitLogOffset, storeSize, msgId, uniqKey,\n"
        "tags, keys, sysFlag, flag, bodyCRC, reconsumeTimes, preparedTransactionOffset, bornTimestamp,\n"
        "bornHost, storeTimestamp, storeHost, properties, bodyLength, bodyCrc32, body in base64 as stored).",
        "example:\n  rocketq store dump ~/store --json > messages.jsonl\n"
        "  rocketq store dump ~/store --topic TopicTest --queue 0",
    ),
    "import": (
        "put JSON lines of messages into a store",
        "Read JSON lines of the dump's shape from FILE ('-' for stdin) and put each message into DIR as a\n"
        "broker would (DIR is created if needed); consume queues and index are built. Required per line:\n"
        "topic and body (base64); optional: queueId (0), properties, tags, keys, uniqKey, flag, sysFlag,\n"
        "bornTimestamp, bornHost, reconsumeTimes, preparedTransactionOffset. A bad line is reported with\n"
        "its number and skipped (exit status 1 at the end), or with --strict stops the import.",
        "example:\n  rocketq store dump old-store --json | rocketq store import new-store - -c broker.conf",
    ),
    "query": (
        "find messages by key through the index",
        "Look KEY up in the index of DIR (a KEYS token or a UNIQ_KEY) for messages of TOPIC stored\n"
        "between --begin and --end (ms since the epoch). Exit status 1 when nothing is found.",
        "example:\n  rocketq store query ~/store --topic TopicTest --key order-42 --json",
    ),
    "get": (
        "show one message by offset message id or commit-log offset",
        "Show the message of DIR whose offset message id (store host + commit-log offset, as returned by\n"
        "a send) is ID, or which starts at commit-log offset N. With --topic, ID may also be a unique key\n"
        "(the client's msgId), looked up through the index. Exit status 1 when there is no such message.",
        "example:\n  rocketq store get ~/store --msg-id 7F00000100002A9F0000000000000000\n"
        "  rocketq store get ~/store --offset 272 --json",
    ),
    "verify": (
        "check every record, consume-queue unit and index entry",
        "Check DIR read-only: every commit-log record (magic, length, CRC, position; each file but the\n"
        "last ends with a BLANK record, zeros after the last record), that each record has its consume-\n"
        "queue unit, every unit against its record (size, topic, queue, queue offset, tag code), and every\n"
        "index entry (points at a record carrying a key of that hash; chains stay in their slot). A store\n"
        "left by a crash is checked after in-memory recovery. Exit status 1, naming the first bad\n"
        "commit-log offset, when anything is wrong.",
        "example:\n  rocketq store verify ~/store -c broker.conf",
    ),
    "recover": (
        "run start-up recovery on a store and report what it truncated and rebuilt",
        "Open DIR as a broker does at start-up (it must not be in use): normal recovery after a clean\n"
        "shutdown, abnormal recovery when the abort file is there. The commit log is scanned with CRC\n"
        "checks and cut at the last valid record, consume-queue units pointing past it are truncated,\n"
        "and dispatch builds the units and index keys of the records after the consume queues' end (after\n"
        "an abnormal exit also those the scan dispatches again); then the store is closed cleanly. A queue\n"
        "or index file deleted from the middle is not rebuilt here (as at a broker's start): 'rocketq spark\n"
        "rebuild' rebuilds them all. A commit log with no files while the queues hold units is refused\n"
        "(see --force).\n"
        "Reports where the scan began and why it stopped, and what was cut off and rebuilt.\n"
        "This writes to DIR; use inspect or verify to look without changing anything.",
        "example:\n  rocketq store recover ~/store\n  rocketq store recover ~/store -c broker.conf --json",
    ),
}


def register(groups: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``store`` group and its subcommands to the top-level parser's subcommands."""
    store = groups.add_parser(
        "store",
        help="look into, dump, import and verify a RocketMQ store directory",
        description="Work on a RocketMQ store directory (commitlog/, consumequeue/, index/, checkpoint).",
        epilog="example:\n  rocketq store inspect ~/store\n  rocketq store verify ~/store -c broker.conf",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    store.set_defaults(func=lambda _a: _missing_command(store))
    sub = store.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-c", "--conf", metavar="FILE", help=_CONF_HELP)
    parsers: dict[str, argparse.ArgumentParser] = {}
    for name, (short, long, example) in _COMMANDS.items():
        parsers[name] = sub.add_parser(
            name,
            help=short,
            description=long,
            epilog=example,
            parents=[common],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parsers[name].add_argument("dir", metavar="DIR", help="the store directory (storePathRootDir)")
    p = parsers["inspect"]
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_inspect)
    p = parsers["dump"]
    p.add_argument("--topic", metavar="T", help="only messages of topic T")
    p.add_argument("--queue", metavar="Q", type=non_negative, help="only messages of queue id Q")
    p.add_argument("--json", action="store_true", help="JSON lines instead of a readable summary")
    p.set_defaults(func=cmd_dump)
    p = parsers["import"]
    p.add_argument("file", metavar="FILE", help="JSON lines, or - for stdin")
    p.add_argument("--strict", action="store_true", help="stop at the first bad line (exit status 1)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_import)
    p = parsers["query"]
    p.add_argument("--topic", metavar="T", required=True, help="the topic")
    p.add_argument("--key", metavar="K", required=True, help="a key (KEYS token) or unique key (UNIQ_KEY)")
    p.add_argument("--max", metavar="N", type=positive, default=32,
                   help="at most N messages (default 32; a query gives at most maxMsgsNumBatch, 64 by default)")
    p.add_argument("--begin", metavar="MS", type=non_negative, default=0, help="stored at or after MS")
    p.add_argument("--end", metavar="MS", type=non_negative, help="stored at or before MS (default: now)")
    p.add_argument("--json", action="store_true", help="JSON lines")
    p.set_defaults(func=cmd_query)
    p = parsers["get"]
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--msg-id", metavar="ID", help="offset message id (or unique key, with --topic)")
    which.add_argument("--offset", metavar="N", type=non_negative, help="commit-log offset of the record")
    p.add_argument("--topic", metavar="T", help="topic for a unique-key lookup")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_get)
    p = parsers["verify"]
    p.add_argument(
        "--max-problems", metavar="N", type=positive, default=20, help="show at most N problems (default 20)"
    )
    p.set_defaults(func=cmd_verify)
    p = parsers["recover"]
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--force", action="store_true",
                   help="recover even a commit log with no files while consume queues hold units (they are then "
                        "all deleted, as RocketMQ deletes them)")  # fmt: skip
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_recover)


def _missing_command(parser: argparse.ArgumentParser) -> int:
    raise CommandError(f"choose a command: {', '.join(_COMMANDS)} (see '{parser.prog} --help')", exit_code=2)
