"""A batch send taken column by column: the body split into entries, the records encoded together, the store's put.

Each column-wise step is held to a plain entry-by-entry (or message-by-message) reference written apart from it:
the split to a reader that walks the body entry by entry, the encoder to :func:`encode_record` of each message with
its append-time fields, the joined properties to :func:`join_batch_properties`, and the put to reading the records
back from the store.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketq.common.codec import (
    PreparedBatch,
    PropertiesTooLongError,
    encode_record,
    join_batch_properties,
    join_batch_properties_column,
    split_batch_body,
)
from rocketq.common.errors import CorruptRecordError
from rocketq.common.javacompat import decode_utf8_java, java_string_hash
from rocketq.common.message import (
    MULTI_TAGS_FLAG,
    TRANSACTION_PREPARED_TYPE,
    MessageExt,
    MessageExtBatch,
    properties_of_bytes,
    string_to_properties,
)
from rocketq.common.message_id import create_offset_message_id
from rocketq.store.commit_log import PutMessageStatus
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig

_props_bytes = st.one_of(
    st.binary(max_size=24),
    st.lists(st.sampled_from([b"KEYS\x01k1 k2", b"TAGS\x01t", b"UNIQ_KEY\x01U1", b"\x01", b"\x02", b"\xe4\xb8",
                              "é".encode(), b"a\x01b\x01c"]), max_size=5).map(b"".join),
)
_entries = st.lists(st.tuples(st.binary(max_size=40), st.integers(-(1 << 31), (1 << 31) - 1), _props_bytes),
                    max_size=6)  # fmt: skip


def _entry(body: bytes, flag: int, props: bytes, slack: bytes = b"") -> bytes:
    """One batch entry as ``MessageDecoder.encodeMessage`` writes it (TOTALSIZE the sum of its parts, plus
    *slack* bytes that a reader must step over)."""
    size = 22 + len(body) + len(props) + len(slack)
    return struct.pack(">iiiii", size, 0, 0, flag, len(body)) + body + struct.pack(">h", len(props)) + props + slack


def _walk(data: bytes) -> list[tuple[int, bytes, bytes]]:
    """The entries of a batch body, one at a time (the reference reader)."""
    out, pos = [], 0
    while pos < len(data):
        size, _, _, flag, body_len = struct.unpack_from(">iiiii", data, pos)
        body = data[pos + 20 : pos + 20 + body_len]
        (props_len,) = struct.unpack_from(">h", data, pos + 20 + body_len)
        props = data[pos + 22 + body_len : pos + 22 + body_len + props_len]
        out.append((flag, body, props))
        pos += size
    return out


@given(_entries, st.lists(st.sampled_from([b"", b"\0\0\0"]), min_size=6, max_size=6))
def test_split_batch_body_reads_each_entry_as_an_entry_by_entry_reader(
        entries: list[tuple[bytes, int, bytes]], slacks: list[bytes]) -> None:  # fmt: skip
    data = b"".join(_entry(b, f, p, s) for (b, f, p), s in zip(entries, slacks, strict=False))
    flags, bodies, raws = split_batch_body(data)
    assert list(zip(flags, bodies, raws, strict=True)) == _walk(data) == [(f, b, p) for b, f, p in entries]
    assert split_batch_body(bytearray(data)) == (flags, bodies, raws)
    # ... and the maps they read back as.
    assert properties_of_bytes(raws) == [string_to_properties(decode_utf8_java(p)) for p in raws]


@pytest.mark.parametrize(("data", "why"), [
    (struct.pack(">iiiii", 21, 0, 0, 0, 0) + b"\0", "size"),  # shorter than the fixed part
    (_entry(b"abc", 0, b"") + b"\0\0", "cut off"),  # a tail too short for a size
    (_entry(b"abc", 0, b"k\x01v")[:-1], "size"),  # the entry runs past the body
    (struct.pack(">iiiii", 22, 0, 0, 0, 5) + b"\0\0", "body"),  # a body longer than the entry
    (struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\0\0", "body"),
    (struct.pack(">iiiii", 24, 0, 0, 0, 0) + struct.pack(">h", 3) + b"ab", "properties"),
    (struct.pack(">iiiii", 24, 0, 0, 0, 0) + struct.pack(">h", -2) + b"ab", "properties"),
])  # fmt: skip
def test_split_batch_body_refuses_malformed_bodies(data: bytes, why: str) -> None:
    with pytest.raises(CorruptRecordError, match=why):
        split_batch_body(data)


def test_split_batch_body_of_nothing() -> None:
    assert split_batch_body(b"") == ([], [], [])


@given(st.lists(_props_bytes, max_size=6), _props_bytes)
def test_properties_joined_column_wise_are_those_joined_one_by_one(entries: list[bytes], batch: bytes) -> None:
    joined = join_batch_properties_column(entries, batch)
    assert joined == [join_batch_properties(e, batch) for e in entries]
    assert properties_of_bytes(joined) == [string_to_properties(decode_utf8_java(j)) for j in joined]


_hosts = st.sampled_from([("127.0.0.1", 10911), ("10.1.2.3", 7), ("::1", 40000), ("fe80::2", 1)])


@st.composite
def _message_batches(draw: st.DrawFn) -> MessageExtBatch:
    n = draw(st.integers(1, 6))
    raws = draw(st.lists(_props_bytes, min_size=n, max_size=n))
    return MessageExtBatch(
        draw(st.sampled_from(["T", "Topic-é", "T" * 200])), draw(st.integers(0, 1 << 20)),
        draw(st.lists(st.integers(-(1 << 31), (1 << 31) - 1), min_size=n, max_size=n)),
        draw(st.lists(st.binary(max_size=50), min_size=n, max_size=n)), raws, properties_of_bytes(raws),
        draw(st.sampled_from([0, MULTI_TAGS_FLAG, 0x10 | 0x20, TRANSACTION_PREPARED_TYPE])),
        draw(st.integers(0, 1 << 42)), draw(_hosts), draw(_hosts), draw(st.integers(0, 16)),
    )  # fmt: skip


@settings(max_examples=150)
@given(_message_batches(), st.integers(0, 1 << 40), st.integers(0, 1 << 40), st.integers(0, 1 << 42))
def test_a_batch_encodes_each_record_as_encode_record_of_its_message(
        batch: MessageExtBatch, first_qo: int, first_phys: int, store_ts: int) -> None:  # fmt: skip
    prepared = PreparedBatch(batch, allow_v2=True)
    want, offsets, phys = [], [], first_phys
    for i, (flag, body, raw) in enumerate(zip(batch.flags, batch.bodies, batch.properties_bytes, strict=True)):
        msg = MessageExt(topic=batch.topic, body=body, flag=flag, queue_id=batch.queue_id, sys_flag=batch.sys_flag,
                         born_timestamp=batch.born_timestamp, born_host=batch.born_host, store_host=batch.store_host,
                         reconsume_times=batch.reconsume_times, properties_bytes=raw, queue_offset=first_qo + i,
                         commit_log_offset=phys, store_timestamp=store_ts)  # fmt: skip
        want.append(bytes(encode_record(msg, allow_v2=True)))
        assert prepared.sizes[i] == msg.store_size == len(want[-1]) and prepared.sys_flag == msg.sys_flag
        offsets.append(phys)
        phys += msg.store_size
    data = prepared.encode(range(first_qo, first_qo + len(batch)), offsets, store_ts, batch.flags)
    assert data == b"".join(want) and prepared.total == len(data)


def test_a_batch_the_codec_cannot_write_is_refused() -> None:
    host = ("127.0.0.1", 1)
    ok = MessageExtBatch("T", 0, [0, 0], [b"a", b"b"], [b"k\x01v", b""], [{"k": "v"}, {}], born_host=host,
                         store_host=host)  # fmt: skip
    PreparedBatch(ok)
    with pytest.raises(PropertiesTooLongError):
        PreparedBatch(MessageExtBatch("T", 0, [0], [b"a"], [b"k\x01" + b"v" * 40_000], [{}]))
    with pytest.raises(ValueError, match="127"):
        PreparedBatch(MessageExtBatch("T" * 128, 0, [0], [b"a"], [b""], [{}]))
    with pytest.raises(ValueError, match="columns"):
        PreparedBatch(MessageExtBatch("T", 0, [0], [b"a", b"b"], [b"", b""], [{}, {}]))


def _store(root: Path, **kw: object) -> MessageStore:
    cfg = MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=64 * 1024,
                             mapped_file_size_consume_queue=20 * 64, **kw)  # type: ignore[arg-type]
    store = MessageStore(cfg)
    store.load()
    store.start()
    return store


def _batch(n: int, start: int, **props: str) -> MessageExtBatch:
    raws = [("\x02".join(f"{k}\x01{v}" for k, v in {"KEYS": f"k{start + i}", "UNIQ_KEY": f"U{start + i}",
                                                     "TAGS": f"t{i % 2}", **props}.items())).encode()
            for i in range(n)]  # fmt: skip
    return MessageExtBatch("Cols", 2, list(range(n)), [b"body-%d" % (start + i) * 40 for i in range(n)], raws,
                           properties_of_bytes(raws), 0, 123, ("127.0.0.1", 5555), ("127.0.0.1", 10911), 1)  # fmt: skip


def test_a_batch_put_stores_records_that_read_back_dispatch_and_roll_as_single_puts_do(tmp_path: Path) -> None:
    """Batches of 5 into 64 KiB files: consecutive queue offsets, the ids of the records, every record readable
    with its fields, in its consume queue and findable by key; a batch that does not fit a file's end goes to the
    next one whole."""
    store = _store(tmp_path)
    try:
        ids: list[str] = []
        for b in range(90):
            r = store.put_messages(_batch(5, 5 * b))
            assert r.ok and r.msg_num == 5 and r.logics_offset == 5 * b
            ids += r.msg_ids
            assert r.msg_id == ",".join(r.msg_ids[-5:])
        assert store.wait_dispatched()
        files = store.commit_log.mapped_file_queue.files
        assert len(files) > 2 and files[0].wrote_position == files[0].file_size  # it rolled, a BLANK at the end
        got = []
        offset = 0
        while True:
            res = store.get_message("g", "Cols", 2, offset, 32)
            if not res.messages:
                break
            got += res.decode()
            offset = res.next_begin_offset
        assert [m.queue_offset for m in got] == list(range(450))
        assert [create_offset_message_id(m.store_host, m.commit_log_offset) for m in got] == ids
        m = got[7]
        assert (m.body, m.flag, m.born_timestamp, m.born_host, m.reconsume_times) == \
            (b"body-7" * 40, 2, 123, ("127.0.0.1", 5555), 1)  # fmt: skip
        assert m.properties == {"KEYS": "k7", "UNIQ_KEY": "U7", "TAGS": "t0"}
        cq = store.find_consume_queue("Cols", 2)
        assert cq is not None
        units = [cq.get_unit(i) for i in (7, 8)]
        assert [u.tags_code for u in units if u is not None] == [java_string_hash("t0"), java_string_hash("t1")]
        assert [x.queue_offset for x in store.query_message("Cols", "k123", 4).messages] == [123]
        assert [x.queue_offset for x in store.query_message("Cols", "U449", 4).messages] == [449]
    finally:
        store.close()


def test_a_batch_the_store_must_refuse_writes_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path, max_message_size=100)
    try:
        end = store.get_max_phy_offset()
        delayed = _batch(3, 0)
        delayed.properties[1]["DELAY"] = "2"
        half = _batch(2, 0)
        half.sys_flag = TRANSACTION_PREPARED_TYPE
        big = _batch(2, 0)
        big.bodies[1] = b"x" * 101
        empty = MessageExtBatch("Cols", 0, [], [], [], [])
        refused = {
            "delayed": store.put_messages(delayed), "half": store.put_messages(half), "big": store.put_messages(big),
            "empty": store.put_messages(empty), "queue": store.put_messages(_batch(2, 0), 1 << 20),
            "topic": store.put_messages(MessageExtBatch("bad topic!", 0, [0], [b"a"], [b""], [{}])),
        }
        assert {k: r.status for k, r in refused.items()} == dict.fromkeys(refused, PutMessageStatus.MESSAGE_ILLEGAL)
        assert "delayed" in refused["delayed"].error and "transactional" in refused["half"].error
        assert "maxMessageSize" in refused["big"].error
        assert store.get_max_phy_offset() == end
    finally:
        store.close()
