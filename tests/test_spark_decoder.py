"""The bulk decoder of the Spark source against the codec's own per-record decoder, without Spark.

Records are made with :func:`rocketq.common.codec.encode_record` (the one encoder)
and cover what a store can hold: IPv4 and IPv6 hosts, the v2 magic (topics over
127 bytes), zlib-compressed bodies, property strings with duplicate names, bytes
that are not UTF-8, a trailing separator, keys with runs of spaces, non-ASCII
topics and keys, transactions. Every column must equal what ``decode_record`` +
``message_to_dict`` say; the dispatch fields what ``CommitLog`` and
``IndexService`` compute.
"""

from __future__ import annotations

import base64
import zlib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")

from rocketq.common.codec import check_record, decode_record, encode_blank, encode_record
from rocketq.common.compression import CompressionType, compress, decompress
from rocketq.common.message import (
    COMPRESSED_FLAG,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
)
from rocketq.spark.commit_log_walk import END_BLANK, END_CORRUPT, END_ZEROS, find_record_start, walk_records
from rocketq.spark.options import EARLIEST, LATEST, OptionError, ScanOptions, parse_options
from rocketq.spark.record_decoder import ARROW_SCHEMA, CommitLogFile, RecordBlock, java_hashes
from rocketq.spark.store_scan import TAIL_PROBE_BYTES, Damage, commit_log_positions, commit_log_ranges, list_data_files
from rocketq.store.commit_log import CommitLog
from rocketq.store.dump import message_to_dict
from rocketq.store.index_file import index_key_hash
from rocketq.store.store_config import MessageStoreConfig

pytestmark = pytest.mark.spark

FILE_SIZE = 1 << 16


def _messages() -> list[MessageExt]:
    big = b"compress me " * 600
    out = [
        MessageExt("TopicA", b"hello", 7, {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1", "a": "b"},
                   queue_id=1, queue_offset=0, born_timestamp=1_700_000_000_123, store_timestamp=1_700_000_000_456,
                   born_host=("10.1.2.3", 40000), store_host=("127.0.0.1", 10911), reconsume_times=2),
        MessageExt("TopicA", b"", 0, {}, queue_id=2, queue_offset=5, store_timestamp=1_700_000_001_000),
        MessageExt("TopicV6", b"six", 0, {"TAGS": "t6", "UNIQ_KEY": "U6"}, born_host=("::1", 1234),
                   store_host=("2001:db8::5", 10911), store_timestamp=1_700_000_002_000),
        MessageExt("TopicBornV6", b"b6", 0, {"KEYS": "only"}, born_host=("fe80::1", 9), store_timestamp=3),
        MessageExt("T" * 200, b"v2 body", 0, {"TAGS": "long", "KEYS": "x"}, store_timestamp=4),
        MessageExt("TopicZ", zlib.compress(big), 0, {"TAGS": "TagZ", "UNIQ_KEY": "UZ"},
                   sys_flag=COMPRESSED_FLAG | (3 << 8), store_timestamp=5),
        MessageExt("TopicZ", compress(big, CompressionType.LZ4), 0, {"TAGS": "TagL"},
                   sys_flag=COMPRESSED_FLAG | CompressionType.LZ4.flag, store_timestamp=5),
        MessageExt("TopicZ", compress(big, CompressionType.ZSTD), 0, {"TAGS": "TagS"},
                   sys_flag=COMPRESSED_FLAG | CompressionType.ZSTD.flag, store_timestamp=5),
        MessageExt("TopicP", b"p", 0, {}, properties_bytes=b"TAGS\x01first\x02KEYS\x01a b\x02TAGS\x01second",
                   store_timestamp=6),
        MessageExt("TopicP", b"p", 0, {}, properties_bytes=b"KEYS\x01bad\xff\xfeutf\x02UNIQ_KEY\x01U\xe9",
                   store_timestamp=7),
        MessageExt("TopicP", b"p", 0, {}, properties_bytes=b"TAGS\x01t\x02KEYS\x01  sp  aced \x02\x02=\x01\x02",
                   store_timestamp=8),
        MessageExt("TópicÜ", "ü".encode(), 0, {"KEYS": "clé 键", "UNIQ_KEY": "Ü"}, store_timestamp=9),
        MessageExt("TopicTx", b"tx", 0, {"KEYS": "rolled", "UNIQ_KEY": "UR"}, sys_flag=TRANSACTION_ROLLBACK_TYPE),
        MessageExt("TopicTx", b"tx", 0, {"KEYS": "prep", "UNIQ_KEY": "UP"}, sys_flag=TRANSACTION_PREPARED_TYPE),
        MessageExt("SCHEDULE_TOPIC_XXXX", b"d", 0, {"DELAY": "3", "REAL_TOPIC": "A", "TAGS": "TagD"}, queue_id=2,
                   store_timestamp=1_000),
    ]  # fmt: skip
    return out


def _write_log(directory: Path, msgs: list[MessageExt], *, blank: bool = True) -> tuple[Path, list[int]]:
    buf = bytearray(FILE_SIZE)
    pos = 0
    positions = []
    for m in msgs:
        m.commit_log_offset = pos
        rec = encode_record(m, allow_v2=True)
        buf[pos : pos + len(rec)] = rec
        positions.append(pos)
        pos += len(rec)
    if blank:
        buf[pos : pos + 8] = encode_blank(FILE_SIZE - pos)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{0:020d}"
    path.write_bytes(bytes(buf))
    return path, positions


def _expected(buf: bytes, pos: int) -> dict[str, object]:
    m = decode_record(buf, pos)
    d = message_to_dict(m)
    body = base64.b64decode(d["body"])
    body = decompress(body, m.sys_flag)
    d["body"] = body
    d["keys"] = m.key_list() if m.keys is not None else None
    d["properties"] = list(m.properties.items())
    return d


def test_columns_equal_decode_record(tmp_path: Path) -> None:
    path, positions = _write_log(tmp_path / "commitlog", _messages())
    f = CommitLogFile(path)
    walk = walk_records(f.mm, 0, f.size, f.size)
    assert list(walk.positions) == positions and walk.stop == END_BLANK
    blk = RecordBlock(f, np.array(positions))
    assert not blk.bad.any(), blk.corrupt()
    batch = blk.record_batch()
    assert batch.schema.equals(ARROW_SCHEMA)
    data = path.read_bytes()
    for pos, row in zip(positions, batch.to_pylist(), strict=True):
        exp = _expected(data, pos)
        for name in ARROW_SCHEMA.names:
            got = row[name]
            if name in ("bornTimestamp", "storeTimestamp"):
                got = int(got.timestamp() * 1000)
            assert got == exp[name], (name, pos, got, exp[name])


def test_dispatch_fields_equal_the_stores(tmp_path: Path) -> None:
    path, positions = _write_log(tmp_path / "commitlog", _messages())
    f = CommitLogFile(path)
    blk = RecordBlock(f, np.array(positions))
    cl = CommitLog(MessageStoreConfig(store_path_root_dir=str(tmp_path)), read_only=True)
    codes = blk.tag_codes(cl.tags_code_of)
    data = path.read_bytes()
    expected_keys = []
    for i, pos in enumerate(positions):
        info = check_record(data, pos, check_crc=True)
        assert info.ok
        assert codes[i] == cl.tags_code_of(info)
        if info.sys_flag & 0xC == TRANSACTION_ROLLBACK_TYPE:
            continue
        props = info.properties or {}
        for key in ([props["UNIQ_KEY"]] if "UNIQ_KEY" in props else []) + [
            k for k in (props.get("KEYS") or "").split(" ") if k
        ]:
            expected_keys.append((index_key_hash(f"{info.topic}#{key}"), pos, info.store_timestamp))
    h, phys, times, _rows = blk.index_keys()
    assert list(zip(h.tolist(), phys.tolist(), times.tolist(), strict=True)) == expected_keys


def test_java_hashes() -> None:
    import pyarrow as pa

    from rocketq.common.javacompat import java_string_hash

    words = ["", "a", "TagA", "x" * 40, "日本", "😀x", "order-17", "C000020251525FFD2B276C3D550D0000"]
    got = java_hashes(pa.array(words)).tolist()
    assert got == [java_string_hash(w) & 0xFFFFFFFF for w in words]


def test_walk_resync_and_corruption(tmp_path: Path) -> None:
    msgs = [MessageExt(f"T{i % 3}", bytes(50 + i), 0, {"KEYS": f"k{i}"}, store_timestamp=i) for i in range(60)]
    path, positions = _write_log(tmp_path / "commitlog", msgs, blank=False)
    f = CommitLogFile(path)
    # A range starting anywhere begins at the next record start.
    for start in (1, positions[10] - 1, positions[10], positions[10] + 1, positions[-1] + 1):
        found = find_record_start(f.mm, 0, start, f.size, f.size)
        nxt = [p for p in positions if p >= start]
        assert found == (nxt[0] if nxt else -1)
    walk = walk_records(f.mm, 0, f.size, f.size)
    assert walk.stop == END_ZEROS and list(walk.positions) == positions
    # Break the magic of record 20: the walk stops there, a resync finds record 21.
    data = bytearray(path.read_bytes())
    data[positions[20] + 4] ^= 0xFF
    path.write_bytes(bytes(data))
    f = CommitLogFile(path)
    walk = walk_records(f.mm, 0, f.size, f.size)
    assert walk.stop == END_CORRUPT and walk.end == positions[20] and "magic" in walk.reason
    assert find_record_start(f.mm, 0, walk.end + 1, f.size, f.size) == positions[21]
    # A record whose lengths disagree with TOTALSIZE is rejected in bulk, with its offset.
    data[positions[20] + 4] ^= 0xFF
    data[positions[30] + 84 + 3] ^= 0x01  # BODYLENGTH
    path.write_bytes(bytes(data))
    f = CommitLogFile(path)
    blk = RecordBlock(f, np.array(positions))
    bad = blk.corrupt()
    assert [c.offset for c in bad] == [positions[30]]
    # A body bit flip is found by the CRC check only.
    data[positions[30] + 84 + 3] ^= 0x01
    data[positions[40] + 100] ^= 0x01
    path.write_bytes(bytes(data))
    f = CommitLogFile(path)
    assert not RecordBlock(f, np.array(positions)).corrupt()
    assert [c.offset for c in RecordBlock(f, np.array(positions), check_crc=True).corrupt()] == [positions[40]]


def test_ranges_merge_the_zero_tail(tmp_path: Path) -> None:
    """The unwritten (zero) tail of a file is one range; a zero run inside the data (a body of zeros longer
    than the probe) splits nothing; every record is read once either way."""
    size, step = 1 << 21, 1 << 16
    buf = bytearray(size)
    pos = 0
    positions = []
    for i in range(40):
        body = bytes(3 * TAIL_PROBE_BYTES) if i == 5 else bytes([1 + i % 200]) * (900 + 37 * i)
        m = MessageExt(f"T{i % 3}", body, 0, {"KEYS": f"k{i}"}, store_timestamp=i, commit_log_offset=pos)
        rec = encode_record(m)
        buf[pos : pos + len(rec)] = rec
        positions.append(pos)
        pos += len(rec)
    d = tmp_path / "commitlog"
    d.mkdir()
    (d / f"{0:020d}").write_bytes(bytes(buf))
    files = list_data_files(d)
    ranges = list(commit_log_ranges(files, step))
    data_ranges = -(-pos // step)
    assert len(ranges) == data_ranges + 1
    assert [(r.begin, r.end) for r in ranges[:-1]] == [(b, b + step) for b in range(0, data_ranges * step, step)]
    assert (ranges[-1].begin, ranges[-1].end) == (data_ranges * step, size)
    f = CommitLogFile(files[0].path)
    found = [p for r in ranges for a in commit_log_positions(f, r, Damage(ScanOptions(path=str(tmp_path)), r))
             for p in a.tolist()]  # fmt: skip
    assert found == positions


def test_options() -> None:
    o = parse_options({"path": "/s", "topics": "A, B", "queues": "1,0", "mode": "permissive",
                       "startingOffsets": '{"A": {"0": 5, "1": "latest"}}',
                       "endTime": "2026-11-22T00:00:00Z"})  # fmt: skip
    assert o.topics == ("A", "B") and o.queues == (0, 1) and o.permissive and o.through_queues
    assert o.starting.for_queue("A", 0) == 5 and o.starting.for_queue("A", 1) == LATEST
    assert o.starting.for_queue("B", 0) == EARLIEST and o.ending.for_queue("A", 0) == LATEST
    assert o.end_time == 1795305600000
    assert not parse_options({"path": "/s"}).through_queues
    assert parse_options({"path": "/s", "topicPattern": "Golden.*"}).topic_matches("GoldenA")
    assert not parse_options({"path": "/s", "topicPattern": "Golden.*"}).topic_matches("XGoldenA")
    named = parse_options({"path": "/s", "endingOffsets": '{"A": {"0": 3}}'})
    assert named.topic_matches("A") and not named.topic_matches("B")
    for bad, word in [({}, "path"), ({"path": "/s", "mode": "x"}, "mode"), ({"path": "/s", "queues": "a"}, "queues"),
                      ({"path": "/s", "startingOffsets": "{"}, "startingOffsets"),
                      ({"path": "/s", "startTime": "yesterday"}, "startTime"),
                      ({"path": "/s", "topicPattern": "("}, "topicPattern"),
                      ({"path": "/s", "maxPartitionBytes": "0"}, "maxPartitionBytes"),
                      ({"path": "/s", "topic": "A"}, "a store read takes option topics")]:  # fmt: skip
        with pytest.raises(OptionError, match=word):
            parse_options(bad)
