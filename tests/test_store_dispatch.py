"""Columnar dispatch: the batch paths build exactly the bytes the one-record-at-a-time rules build.

Dispatch takes records a batch at a time (rows handed over by the put path, or
records read back from the commit log with numpy) and writes consume-queue
units and index keys in blocks. These tests hold every such path against a
reference: RocketMQ's own files (golden), the per-record path of the same code
(``do_dispatch`` with one request), and the scalar property and hash rules.
"""

from __future__ import annotations

import itertools
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import copy_store
from rocketq.common.codec import join_batch_properties, join_batch_properties_column
from rocketq.common.javacompat import (
    decode_utf8_java,
    encode_utf8_java,
    java_hashes_of_ranges,
    java_string_hash,
    java_string_hashes,
    java_string_hashes_after,
)
from rocketq.common.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    Message,
    MessageExt,
    MessageExtBatch,
    properties_of_bytes,
    properties_to_string,
    string_to_properties,
)
from rocketq.common.mixall import RMQ_SYS_SCHEDULE_TOPIC
from rocketq.store.consume_queue import CQ_DTYPE, SMALL_RUN, ConsumeQueue
from rocketq.store.dispatch import DispatchBatch
from rocketq.store.message_store import SCALAR_DISPATCH, MessageStore
from rocketq.store.record_scan import pick_dispatch_properties_of, walk_records
from rocketq.store.store_config import MessageStoreConfig, load_broker_conf

SMALL = dict(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=600, max_hash_slot_num=100,
             max_index_num=400)


def small_config(root: Path, **kw: Any) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(root), **{**SMALL, **kw})


def tree_bytes(root: Path, sub: str) -> dict[str, bytes]:
    """Every file under root/sub by its path below sub."""
    return {str(p.relative_to(root / sub)): p.read_bytes() for p in sorted((root / sub).rglob("*")) if p.is_file()}


def index_contents(root: Path) -> list[bytes]:
    """The index files in name order (names are creation times, so only contents compare)."""
    return [p.read_bytes() for p in sorted((root / "index").iterdir())]


def fill(store: MessageStore, seed: int, ascii_only: bool) -> int:
    """A mix of what dispatch must get right: single puts and batches over several topics and queues,
    delayed and transactional records, keys with spaces, records without keys, and (unless
    *ascii_only*) non-ASCII text, which sends reading from the file down its record-by-record path."""
    rng = random.Random(seed)
    n = 0
    other = ("T1", "k2") if ascii_only else ("T\u00e9", "\u4e2d\u6587")
    for i in range(240):
        topic = rng.choice(["DispA", "DispB", "DispA"])
        props: dict[str, str] = {}
        if rng.random() < 0.8:
            props["TAGS"] = rng.choice(["TagA", "TagB", "", other[0]])
        if rng.random() < 0.8:
            props["KEYS"] = rng.choice([f"k{i}", f"k{i} shared", f" spaced  k{i} ", other[1], ""])
        if rng.random() < 0.3:
            batch = [Message(topic, rng.randbytes(rng.randrange(0, 300)), 0, dict(props)) for _ in range(5)]
            assert store.put_messages(batch, rng.randrange(4)).ok
            n += 5
            continue
        if rng.random() < 0.15:
            assert store.put_messages(broker_batch(store, topic, rng, other), rng.randrange(4)).ok
            n += 4
            continue
        if rng.random() < 0.15:
            assert store.put_messages(column_batch(store, topic, rng, other), rng.randrange(4)).ok
            n += 4
            continue
        if i % 29 == 7:  # bytes kept as they were, with names (and keys) the map does not have
            text = properties_to_string({**props, "KEYS": f"kept{i} {other[1]}", "REAL_TOPIC": "Half"})
            raw = encode_utf8_java(text)
            kept = MessageExt(topic=topic, body=b"kept", properties=dict(props), queue_id=rng.randrange(4),
                              store_host=("127.0.0.1", 10911), properties_bytes=raw)
            assert store.put_message(kept).ok
            n += 1
            continue
        if i % 37 == 5:
            props["DELAY"] = "3"
        msg = store.to_message_ext(Message(topic, rng.randbytes(rng.randrange(0, 3000)), 0, props), rng.randrange(4))
        if i % 41 == 3:
            msg.sys_flag |= TRANSACTION_PREPARED_TYPE
        elif i % 43 == 4:
            msg.sys_flag |= TRANSACTION_COMMIT_TYPE
        assert store.put_message(msg).ok
        n += 1
    return n


def broker_batch(store: MessageStore, topic: str, rng: random.Random, other: tuple[str, str]) -> list[MessageExt]:
    """Records as a broker's batch of MessageExt used to be built: each entry's property bytes as the producer
    wrote them (any order, a name twice, a trailing 0x02), then the batch's, with the map they read back as
    vouched for."""
    batch_raw = f"CLUSTER\x01{store.config.broker_cluster_name}\x02TAGS\x01Batch".encode()
    batch_props = string_to_properties(batch_raw.decode())
    out = []
    for entry in _batch_entries(rng, other):
        raw, props = join_batch_properties(entry, batch_raw), {**string_to_properties(entry.decode()), **batch_props}
        out.append(MessageExt(topic=topic, body=rng.randbytes(50), properties=props, queue_id=0,
                              store_host=("127.0.0.1", 10911), properties_bytes=raw, properties_parsed=True))
    return out


def _batch_entries(rng: random.Random, other: tuple[str, str]) -> list[bytes]:
    return [rng.choice([
        f"KEYS\x01bk{j} {other[1]}\x02UNIQ_KEY\x01{rng.randrange(1 << 60):016X}\x02KEYS\x01again{j}",
        f"TAGS\x01{other[0]}\x02KEYS\x01only{j}\x02",
        "",
        "junk\x02\x01novalue\x02KEYS\x01x y",
        f"UNIQ_KEY\x01U{j}\x02TAGS\x01{other[0]}\x02KEYS\x01c{j}",
    ]).encode() for j in range(4)]


def column_batch(store: MessageStore, topic: str, rng: random.Random, other: tuple[str, str]) -> MessageExtBatch:
    """A batch send as the broker now takes it (split_batch_body, the batch's properties joined column-wise)."""
    entries = _batch_entries(rng, other)
    stored = join_batch_properties_column(entries, f"CLUSTER\x01{store.config.broker_cluster_name}".encode())
    return MessageExtBatch(topic, 0, [rng.randrange(3) for _ in entries], [rng.randbytes(rng.randrange(60))
                           for _ in entries], stored, properties_of_bytes(stored), 0, 5, ("127.0.0.1", 40000),
                           ("127.0.0.1", 10911))  # fmt: skip


@pytest.mark.parametrize("ascii_only", [True, False], ids=["ascii", "non-ascii"])
def test_hand_off_file_and_per_record_dispatch_build_identical_files(tmp_path: Path, ascii_only: bool) -> None:
    """The same records dispatched three ways: rows handed over at put time, records read back
    from the commit log in batches (keys hashed from the bytes when the text is ASCII), and one
    do_dispatch call per record. Records that keep their property bytes reach dispatch as rows too: with their
    map when it is vouched for (a broker's batch entries), else with what their bytes read back as (a committed
    transaction's copy, whose map leaves out names its bytes keep)."""
    rows: list[tuple[Any, ...]] = []
    with MessageStore(small_config(tmp_path / "handoff")) as store:
        log = store.commit_log
        take = log.take_handoff
        log.take_handoff = lambda: rows.extend(taken := take()) or taken  # type: ignore[method-assign]
        total = fill(store, 1, ascii_only)
        assert store.wait_dispatched()
    assert len(rows) == total  # every record was handed over, the broker's batch entries too
    for name in ("file", "each"):
        shutil.copytree(tmp_path / "handoff", tmp_path / name)
        shutil.rmtree(tmp_path / name / "consumequeue")
        shutil.rmtree(tmp_path / name / "index")
    with MessageStore(small_config(tmp_path / "file")):
        pass  # start-up dispatches every record from the file, a batch at a time

    class PerRecord(MessageStore):
        def do_dispatch_batch(self, batch: DispatchBatch) -> None:
            for req in batch.requests():
                super().do_dispatch_batch(DispatchBatch.from_rows([req]))

    each = PerRecord(small_config(tmp_path / "each"))
    each.message_arriving_listener = lambda *_: None  # with property maps for its topics: no hashed batches
    each.message_arriving_property_topics = frozenset({"DispA", "DispB", RMQ_SYS_SCHEDULE_TOPIC})
    with each:
        pass
    reference = tree_bytes(tmp_path / "each", "consumequeue")
    assert len(reference) > 8
    for name in ("handoff", "file"):
        assert tree_bytes(tmp_path / name, "consumequeue") == reference, name
        assert index_contents(tmp_path / name) == index_contents(tmp_path / "each"), name
    assert len(index_contents(tmp_path / "each")) > 2


def _listen(store: MessageStore) -> tuple[list[tuple[Any, ...]], set[tuple[str, int]]]:
    """Attach an arrival listener that wants every queue but those of ``Ignored`` and maps for ``Maps``."""
    heard: list[tuple[Any, ...]] = []
    asked: set[tuple[str, int]] = set()

    def wanted(topic: str, queue_id: int) -> bool:
        asked.add((topic, queue_id))
        return topic != "Ignored"

    store.message_arriving_wanted = wanted
    store.message_arriving_property_topics = frozenset({"Maps"})

    def listener(t: str, q: int, offsets: Any, tags: Any, _ts: Any, props: Any) -> None:
        heard.extend((t, q, o, tags[i], props[i] if props is not None else None) for i, o in enumerate(offsets))

    store.message_arriving_listener = listener
    return heard, asked


def test_the_arrival_listener_hears_a_dispatch_batch_once_a_queue(tmp_path: Path) -> None:
    """A dispatch batch is told once a queue (a held pull is woken once, not once a record), with that queue's
    records in queue order: offsets + 1, tag codes, store times; a record with no unit (a PREPARED half) is left
    out, and a batch of one queue is told whole."""
    calls: list[tuple[Any, ...]] = []
    store = MessageStore(small_config(tmp_path / "s"))
    store.message_arriving_listener = lambda t, q, offsets, tags, stamps, props: calls.append(
        (t, q, list(offsets), list(tags), list(stamps), props))
    n = 2 * SCALAR_DISPATCH + 2
    with store:
        rows: list[tuple[Any, ...]] = []
        next_offset = [0, 0]
        for i in range(n):
            q, prepared = i % 2, i == 5  # a PREPARED half takes no queue offset
            rows.append(("Told", q, 4096 + 64 * i, 64, 100 + i, 5000 + i, 0 if prepared else next_offset[q], None,
                         None, TRANSACTION_PREPARED_TYPE if prepared else 0, 0, {}))  # fmt: skip
            next_offset[q] += not prepared
        store.do_dispatch_batch(DispatchBatch.from_rows(rows))
        even, odd = list(range(0, n, 2)), [i for i in range(1, n, 2) if i != 5]
        assert calls == [
            ("Told", 0, list(range(1, len(even) + 1)), [100 + i for i in even], [5000 + i for i in even],
             [{}] * len(even)),
            ("Told", 1, list(range(1, len(odd) + 1)), [100 + i for i in odd], [5000 + i for i in odd],
             [{}] * len(odd)),
        ]  # fmt: skip
        calls.clear()
        one = [("One", 3, (1 << 20) + 64 * i, 64, 7, 9000 + i, i, None, None, 0, 0, {}) for i in range(n)]
        store.do_dispatch_batch(DispatchBatch.from_rows(one))
        assert [(c[0], c[1], c[2]) for c in calls] == [("One", 3, list(range(1, n + 1)))]


def test_arrival_listener_hears_wanted_queues_with_property_maps_only_for_its_topics(tmp_path: Path) -> None:
    """The arrival listener hears of every unit of the queues it wants, in queue order, with the record's
    property map for the topics it asked maps for (None for the others, where the map was not read),
    both live (single puts handed over, a batch put) and when the records are dispatched again from the file."""
    store = MessageStore(small_config(tmp_path / "live"))
    live = _listen(store)
    with store:
        for i in range(30):
            props = {"TAGS": f"t{i % 3}", "KEYS": f"k{i}"}
            assert store.put_message(Message("Heard", b"h%d" % i, 0, props), i % 2).ok
            assert store.put_message(Message("Maps", b"m%d" % i, 0, props), 0).ok
            assert store.put_message(Message("Ignored", b"i%d" % i, 0, props), 0).ok
        assert store.put_messages([Message("Heard", b"b%d" % i, 0, {"TAGS": "tb"}) for i in range(20)], 1).ok
        assert store.put_messages([Message("Maps", b"b%d" % i, 0, {"KEYS": f"b{i}"}) for i in range(20)], 0).ok
        assert store.wait_dispatched()
    shutil.copytree(tmp_path / "live", tmp_path / "file")
    shutil.rmtree(tmp_path / "file" / "consumequeue")
    shutil.rmtree(tmp_path / "file" / "index")
    store = MessageStore(small_config(tmp_path / "file"))
    again = _listen(store)
    with store:
        assert store.wait_dispatched()
    for way, (heard, asked) in (("live", live), ("file", again)):
        assert ("Ignored", 0) in asked and not [h for h in heard if h[0] == "Ignored"], way
        for topic, queue_id, count in (("Heard", 0, 15), ("Heard", 1, 35), ("Maps", 0, 50)):
            mine = [h for h in heard if h[:2] == (topic, queue_id)]
            assert [h[2] for h in mine] == list(range(1, count + 1)), (way, topic, queue_id)  # in queue order
        maps = [h[4] for h in heard if h[0] == "Maps"]
        assert all(m is not None for m in maps), way
        assert [m["KEYS"] for m in maps] == [f"k{i}" for i in range(30)] + [f"b{i}" for i in range(20)], way
        codes = {h[3] for h in heard if h[:2] == ("Heard", 0)}
        assert codes == {java_string_hash("t0"), java_string_hash("t2"), java_string_hash("t1")}, way
    shutil.rmtree(tmp_path / "file" / "consumequeue")
    shutil.rmtree(tmp_path / "file" / "index")
    store = MessageStore(small_config(tmp_path / "file"))
    bare, _ = _listen(store)
    store.message_arriving_property_topics = frozenset()
    with store:
        assert store.wait_dispatched()
    assert len(bare) == 100 and all(h[4] is None for h in bare)  # read back without maps: none parsed


def test_records_without_keys_still_make_the_index_file(tmp_path: Path) -> None:
    """As IndexService.buildIndex, dispatch makes the last index file (a new one when the last is full)
    before it looks at the keys: a store of records without keys has one empty index file, and a batch
    after an exactly full file starts the next one, keys or not (rocketq.spark.rebuild relies on it)."""
    cfg = small_config(tmp_path / "s", max_index_num=3)
    with MessageStore(cfg) as store:
        for i in range(40):
            assert store.put_message(MessageExt(topic="NoKeys", body=b"x%d" % i, properties={"TAGS": "T"})).ok
        assert store.wait_dispatched()
        assert [f.index_count for f in store.index_service.files] == [1]  # one file, no entries
        assert store.put_message(MessageExt(topic="NoKeys", body=b"k", properties={"KEYS": "a b"})).ok
        assert store.wait_dispatched()
        assert [f.index_count for f in store.index_service.files] == [3]  # exactly full
    shutil.copytree(tmp_path / "s", tmp_path / "file")
    shutil.rmtree(tmp_path / "file" / "consumequeue")
    shutil.rmtree(tmp_path / "file" / "index")
    with MessageStore(small_config(tmp_path / "file", max_index_num=3)) as store:
        assert [f.index_count for f in store.index_service.files] == [3]  # one batch: its keys fill the file
        assert store.put_message(MessageExt(topic="NoKeys", body=b"y", properties={"TAGS": "T"})).ok
        assert store.wait_dispatched()
        assert [f.index_count for f in store.index_service.files] == [3, 1]  # the next batch starts a file


def test_rebuilding_the_golden_store_from_its_commit_log_gives_rocketmqs_files(golden_clean: Path,
                                                                            tmp_path: Path) -> None:  # fmt: skip
    """Consume queues and index of RocketMQ 4.9.4's clean store, rebuilt by dispatching its commit log
    from the file (the batch path), byte for byte."""
    root = tmp_path / "golden"
    copy_store(golden_clean / "store", root)
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    cfg = load_broker_conf(golden_clean / "broker.conf")
    cfg.store_path_root_dir = str(root)
    cfg.store_path_commit_log = ""
    with MessageStore(cfg) as store:
        assert store.dispatch_behind_bytes() == 0
    assert tree_bytes(root, "consumequeue") == tree_bytes(golden_clean / "store", "consumequeue")
    ours, theirs = index_contents(root), index_contents(golden_clean / "store")
    assert len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs, strict=True):
        assert a == b


def _props_text(rng: random.Random) -> str:
    names = ["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "XKEYS", "KEYSX", "", "A"]
    values = ["", "v", "a b", "x\x01y", "\u00e9", "k\x00z", "  "]
    segments = []
    for _ in range(rng.randrange(0, 6)):
        name = rng.choice(names)
        value = rng.choice(values) if rng.random() < 0.8 else f"val{rng.randrange(100)}"
        segments.append(f"{name}\x01{value}" if rng.random() < 0.9 else name)
    return "\x02".join(segments) + ("\x02" if rng.random() < 0.3 else "")


@pytest.mark.parametrize("ascii_only", [True, False])
def test_picking_properties_of_many_records_follows_string2messageProperties(tmp_path: Path,
                                                                            ascii_only: bool) -> None:  # fmt: skip
    """Duplicates (a later one wins), empty values (dropped), names that are only prefixes or suffixes,
    separators inside values, \\x00 and non-ASCII text (the record-by-record fallback)."""
    rng = random.Random(5 if ascii_only else 6)
    cfg = small_config(tmp_path / "s", mapped_file_size_commit_log=1 << 20)
    with MessageStore(cfg) as store:
        texts = []
        for _ in range(300):
            text = _props_text(rng)
            if ascii_only:
                text = text.replace("\u00e9", "e").replace("\x00", "0")
            texts.append(text)
            raw = text.encode("utf-8", "surrogatepass")
            msg = store.to_message_ext(Message("Props", b"x", 0, {}), 0)
            msg.properties_bytes = raw
            assert store.put_message(msg).ok
        mf = store.commit_log.mapped_file_queue.files[0]
        run = walk_records(mf.mm, 0, mf.read_position(), check_crc=True, max_records=10_000)
        assert len(run) == 300
        tags, keys, uniqs, delays = pick_dispatch_properties_of(mf.mm, run)
    for i, text in enumerate(texts):
        props = string_to_properties(text)
        assert (tags[i], keys[i], uniqs[i], delays[i]) == (props.get("TAGS"), props.get("KEYS"),
                                                           props.get("UNIQ_KEY"), props.get("DELAY")), repr(text)


def test_vectorised_hashes_equal_string_hashcode() -> None:
    """Strings (the matrix path, and the running sum when lengths differ widely), byte ranges of a
    buffer (overlapping, empty, at its end), and a prefix's hash joined to a string's."""
    rng = random.Random(9)
    for _ in range(200):
        data = bytes(rng.randrange(32, 127) for _ in range(rng.randrange(1, 2000)))
        starts = [rng.randrange(len(data)) for _ in range(rng.randrange(1, 30))]
        ends = [min(len(data), a + rng.choice([0, 1, 9, 32, rng.randrange(1500)])) for a in starts]
        got = java_hashes_of_ranges(np.frombuffer(data, dtype=np.uint8), np.array(starts), np.array(ends))
        assert got.tolist() == [java_string_hash(data[a:b].decode()) & 0xFFFFFFFF
                                for a, b in zip(starts, ends, strict=True)]  # fmt: skip
    for trial in range(200):
        alphabet = "abcXYZ019#_- " if trial % 2 else "ab\u00e9\U0001f600\ud800x"
        strings = ["".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 7, 32, rng.randrange(400)])))
                   for _ in range(rng.randrange(1, 40))]  # fmt: skip
        assert java_string_hashes(strings).tolist() == [java_string_hash(s) & 0xFFFFFFFF for s in strings]
        prefixes = [rng.choice(["Topic#", "\u00e9#", ""]) for _ in strings]
        before = np.array([java_string_hash(p) & 0xFFFFFFFF for p in prefixes], dtype=np.uint64)
        assert java_string_hashes_after(before, strings).tolist() == [
            java_string_hash(p + s) & 0xFFFFFFFF for p, s in zip(prefixes, strings, strict=True)
        ]


def test_unit_blocks_equal_units_one_by_one_across_files_and_gaps(tmp_path: Path) -> None:
    """put_units: runs that cross file ends, a queue that starts mid-file (fillers), replays and gaps."""
    rng = random.Random(2)
    offsets = list(range(7, 80)) + list(range(83, 140))  # starts mid-file, one gap
    phys = np.cumsum([rng.randrange(100, 300) for _ in offsets]).astype(np.int64)
    sizes = np.full(len(offsets), 100, dtype=np.int64)
    tags = np.array([rng.randrange(-5, 5) for _ in offsets], dtype=np.int64)
    qo = np.array(offsets, dtype=np.int64)
    one = ConsumeQueue("T", 0, tmp_path / "one", 600)
    for i in range(len(offsets)):
        one.put_message_position_info(int(phys[i]), int(sizes[i]), int(tags[i]), int(qo[i]))
    blocks = ConsumeQueue("T", 0, tmp_path / "blocks", 600)
    cut = [0, 3, 40, 41, 100, len(offsets)]
    for a, b in itertools.pairwise(cut):
        lo = max(0, a - 2)  # overlap: the first units of each block are replays
        blocks.put_units(phys[lo:b], sizes[lo:b], tags[lo:b], qo[lo:b])
    assert tree_bytes(tmp_path, "one") == tree_bytes(tmp_path, "blocks")
    assert blocks.max_physic_offset == one.max_physic_offset
    # Blocks of at most SMALL_RUN units (the plain-Python way), overlapping, across the file ends and the gap.
    few = ConsumeQueue("T", 0, tmp_path / "few", 600)
    span = offsets.index(83) - 3  # a block starts here: the last units before the gap and the first after it
    a = 0
    while a < len(offsets):
        b = min(len(offsets), a + (SMALL_RUN if a == span else rng.randrange(1, SMALL_RUN + 1)))
        if a < span < b:
            b = span
        lo = max(0, a - rng.randrange(0, 3))
        few.put_units(phys[lo:b], sizes[lo:b], tags[lo:b], qo[lo:b])
        a = b
    assert tree_bytes(tmp_path, "one") == tree_bytes(tmp_path, "few")
    assert few.max_physic_offset == one.max_physic_offset
    few.close()
    # put_few_units with the tuples of a live dispatch batch, in blocks of up to 128 units (what a broker's
    # dispatch of one queue's batch hands it), overlapping.
    plain = ConsumeQueue("T", 0, tmp_path / "tuples", 600)
    columns = [tuple(c.tolist()) for c in (phys, sizes, tags, qo)]
    a = 0
    while a < len(offsets):
        b = min(len(offsets), a + rng.randrange(1, 129))
        lo = max(0, a - rng.randrange(0, 3))
        plain.put_few_units(*(c[lo:b] for c in columns))
        a = b
    assert tree_bytes(tmp_path, "one") == tree_bytes(tmp_path, "tuples")
    assert plain.max_physic_offset == one.max_physic_offset
    plain.close()
    assert blocks.min_logic_offset == one.min_logic_offset == 7 * 20
    units = np.frombuffer(blocks.queue.files[0].mm[:140], dtype=CQ_DTYPE)
    assert int(units["size"][0]) == 0x7FFFFFFF  # fillers before the first real unit
    one.close()
    blocks.close()


def test_walking_with_hints_visits_exactly_what_walking_record_by_record_visits(tmp_path: Path) -> None:
    """Hints from consume queues may be missing (prepared records), stale (pointing into a record),
    duplicated or past the data; the walk still finds exactly the records, and the same stop."""
    cfg = small_config(tmp_path / "s", mapped_file_size_commit_log=1 << 20)
    with MessageStore(cfg) as store:
        fill(store, 3, True)
        assert store.wait_dispatched()
        mf = store.commit_log.mapped_file_queue.files[0]
        end = mf.read_position()
        whole = walk_records(mf.mm, 0, len(mf.mm), check_crc=True, max_records=1 << 20)
        body_len = whole.topic_pos - 1 - (whole.pos + 88)
        victim = int(np.flatnonzero((body_len > 10) & (np.arange(len(whole)) > len(whole) * 2 // 3))[0])
        mf.mm[int(whole.pos[victim]) + 95] ^= 0xFF  # spoil a body byte two thirds in
        plain = walk_records(mf.mm, 0, len(mf.mm), check_crc=True, max_records=1 << 20)
        assert len(plain) == victim
        offsets = store._record_offsets_from(0)
        noisy = np.sort(np.concatenate((offsets, offsets[:50] + 3, offsets[:10], [end, end + 100, 0])))
        for hints in (offsets, noisy, offsets[::3], np.empty(0, dtype=np.int64)):
            for chunk in (7, 1 << 20):
                pos, seen = 0, []
                while True:
                    run = walk_records(mf.mm, pos, len(mf.mm), check_crc=True, max_records=chunk, hints=hints)
                    seen.append(run.pos)
                    pos = run.end
                    if run.reason or run.blank or len(run) < chunk:
                        break
                assert np.array_equal(np.concatenate(seen), plain.pos)
                assert (run.end, run.reason) == (plain.end, plain.reason)
        assert "CRC" in plain.reason and len(plain) > 100


def test_joined_batch_properties_are_what_the_joined_bytes_read_back_as() -> None:
    """The map a broker keeps for a batch entry (entry's map, then the batch's) is the map its stored bytes read
    back as, names in the same order, for any bytes: separators anywhere, names twice, UTF-8 cut or malformed."""
    rng = random.Random(7)
    alphabet = [b"a", b"K", b"\x01", b"\x02", "\u00e9".encode(), "\u4e2d".encode(), b"\xe4", b"\xb8", b"\xf0\x9f",
                b"\x80", b"TAGS", b"KEYS"]  # fmt: skip
    for _ in range(3000):
        entry = b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        batch = b"".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8)))
        raw = join_batch_properties(entry, batch)
        props = {**string_to_properties(decode_utf8_java(entry)), **string_to_properties(decode_utf8_java(batch))}
        read = string_to_properties(decode_utf8_java(raw))
        assert list(props.items()) == list(read.items()), (entry, batch)
        assert raw.startswith(entry) and raw.endswith(batch)


# --- index keys left waiting by dispatch (IndexService.defer) ------------------------------------------


def _keyed_puts(store: MessageStore, n: int, topic: str = "Deferred") -> list[int]:
    """*n* messages with keys k0.., dispatched into their consume queues (their index keys may wait)."""
    stamps = []
    for i in range(n):
        r = store.put_message(MessageExt(topic=topic, body=b"d%d" % i, properties={"KEYS": f"k{i}"}), i % 2)
        assert r.ok
        stamps.append(r.store_timestamp)
    assert store.reput is not None and store.reput.wait_caught_up(10)
    return stamps


def _index_entries(store: MessageStore) -> int:
    return sum(max(0, f.index_count - 1) for f in store.index_service.files)


def test_waiting_index_keys_hold_the_checkpoint_back_and_are_built_for_a_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rocketq.store import index_service

    monkeypatch.setattr(index_service, "DEFER_S", 3600.0)  # nothing builds them but a reader
    with MessageStore(small_config(tmp_path / "s")) as store:
        stamps = _keyed_puts(store, 10)
        index = store.index_service
        assert index.pending_count == 10 and _index_entries(store) == 0
        assert index.pending_oldest_timestamp == stamps[0]
        assert store.checkpoint is not None and store.checkpoint.logics_msg_timestamp <= stamps[0]
        found = store.query_message("Deferred", "k3", 4).messages
        assert [m.body for m in found] == [b"d3"]
        assert index.pending_count == 0 and index.pending_oldest_timestamp == 0 and _index_entries(store) == 10
        # wait_dispatched means "in the index" too.
        _keyed_puts(store, 4, "Other")
        assert index.pending_count == 4
        assert store.wait_dispatched()
        assert index.pending_count == 0 and _index_entries(store) == 14


def test_waiting_index_keys_are_built_by_the_reput_thread_after_defer_s(tmp_path: Path) -> None:
    import time

    with MessageStore(small_config(tmp_path / "s")) as store:
        _keyed_puts(store, 5)
        deadline = time.monotonic() + 10
        while store.index_service.pending_count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.index_service.pending_count == 0 and _index_entries(store) == 5


def test_a_crash_with_index_keys_waiting_loses_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rocketq.store import index_service

    monkeypatch.setattr(index_service, "DEFER_S", 3600.0)
    store = MessageStore(small_config(tmp_path / "s"))
    store.load()
    store.start()
    try:
        _keyed_puts(store, 30)
        assert store.index_service.pending_count == 30
        assert store.checkpoint is not None
        store.checkpoint.flush()
        # The files as a killed process leaves them: what reached the page cache, abort still there.
        shutil.copytree(tmp_path / "s", tmp_path / "crashed")
    finally:
        store.close()
    assert (tmp_path / "crashed" / "abort").exists()
    with MessageStore(small_config(tmp_path / "crashed")) as crashed:
        assert not crashed.last_exit_ok
        assert crashed.index_service.pending_count == 0
        assert _index_entries(crashed) == 30
        for i in range(30):
            assert [m.body for m in crashed.query_message("Deferred", f"k{i}", 4).messages] == [b"d%d" % i]


@pytest.mark.parametrize("shape", ["one queue", "one queue, numpy columns", "two queues", "two topics",
                                   "a PREPARED half", "a ROLLBACK", "long", "long, two topics"])  # fmt: skip
def test_consume_queue_groups_are_the_queues_that_get_units_with_their_records_in_order(shape: str) -> None:
    """Every queue that gets units, with its records' numbers in commit-log order; PREPARED and ROLLBACK records
    (the 0x4 bit) get none. A batch of one queue (what a live send makes) is found without numpy's steps, and so
    are the queues of a few records (the sends of a turn of the broker's loop); the answer must be the same as
    for a long batch, whose queues numpy's steps find."""
    rng = random.Random(shape)
    n = 1500 if shape.startswith("long") else 32
    topics = ["A"] * n
    queues = [3] * n
    flags = [rng.choice((0, 0x1, 0x2, 0x8)) for _ in range(n)]  # compressed, multi tags, commit: units
    if shape == "two queues" or shape.startswith("long"):
        queues = [rng.choice((3, 1)) for _ in range(n)]
    if "two topics" in shape:
        topics = [rng.choice(("A", "B")) for _ in range(n)]
    if shape == "a PREPARED half":
        flags[7] |= TRANSACTION_PREPARED_TYPE
    if shape == "a ROLLBACK":
        flags[0] |= 0xC
    columns: list[Any] = [topics, queues, list(range(n)), [1] * n, [0] * n, [0] * n, list(range(n)), [None] * n,
                          [None] * n, flags, [0] * n, [{}] * n]  # fmt: skip
    if shape == "one queue, numpy columns":
        columns[1], columns[9] = np.asarray(queues, dtype=np.int64), np.asarray(flags, dtype=np.int64)
    batch = DispatchBatch(*columns)
    expected: dict[tuple[str, int], list[int]] = {}
    for i in range(n):
        if not flags[i] & TRANSACTION_PREPARED_TYPE:
            expected.setdefault((topics[i], queues[i]), []).append(i)
    got = batch.consume_queue_groups()
    assert sorted((t, q, idx.tolist()) for t, q, idx in got) == sorted((t, q, v) for (t, q), v in expected.items())
    for topic, queue_id, index in got:
        assert type(topic) is str and type(queue_id) is int and index.dtype == np.int64


@pytest.mark.parametrize("size", [1, 40, 700])
def test_the_handed_over_rows_used_are_those_that_follow_each_other_within_the_readable_end(size: int) -> None:
    """The reput service uses handed-over rows from the offset it reached while each row starts where the last
    ended and ends within the readable data; the first that does not stops it (a few rows in a loop, many in
    numpy: the same answer)."""
    from rocketq.store.message_store import _rows_in_order

    rng = random.Random(size)
    for _ in range(60):
        start = rng.randrange(0, 1 << 20)
        rows, at = [], start
        for _ in range(size):
            length = rng.randrange(60, 2000)
            gap = 8 if rng.random() < 1.5 / size else 0  # now and then a row that does not follow
            rows.append(("T", 0, at + gap, length))
            at += gap + length
        end = rng.choice((at, at - 1, start + rng.randrange(0, at - start + 1)))
        count, reached = 0, start
        for row in rows:  # the rule, row by row
            if row[2] != reached or reached + row[3] > end:
                break
            reached += row[3]
            count += 1
        assert _rows_in_order(rows, start, end) == (count, reached)  # type: ignore[arg-type]


@pytest.mark.parametrize(("before", "first_offset"), [(0, 0), (0, 7), (30, 0)],
                         ids=["first unit at 0", "first unit at 7", "next file"])  # fmt: skip
def test_a_dispatch_that_must_not_wait_on_the_disk_leaves_consume_queue_files_to_the_reput_thread(
        tmp_path: Path, before: int, first_offset: int) -> None:  # fmt: skip
    """The broker's event loop dispatches with ``make_files=False``: it stops before a unit whose consume-queue
    file is not made yet, a new queue's first or the next after a full one (making one is file-system work that
    took milliseconds a queue on a busy disk, and a topic of 1024 queues stalled sends for seconds), and the reput
    thread makes the file and goes on. The units are those of the usual way, filler units and minimum offset
    included when a queue's first unit is not at 0. (*before* units fill the queue's first file of 30 first.)"""
    import threading

    from rocketq.store import mapped_file

    made_by: list[str] = []
    create = mapped_file.MappedFile.create.__func__  # type: ignore[attr-defined]
    touch = mapped_file.MappedFile.touch_for_write
    touched: list[tuple[str, int, int, bool]] = []  # thread, range, whether the queue had the file already
    queue_files: list[list[Any]] = []

    def recording_create(cls: Any, directory: Path, *args: Any, **kw: Any) -> Any:
        if "consumequeue" in directory.parts:
            made_by.append(threading.current_thread().name)
        return create(cls, directory, *args, **kw)

    def recording_touch(mf: Any, start: int, end: int) -> None:
        if "consumequeue" in mf.path.parts:
            touched.append((threading.current_thread().name, start, end, any(mf in f for f in queue_files)))
        touch(mf, start, end)

    expected: list[list[tuple[int, int, int]]] = []
    first = first_offset + before  # queue offset of the first unit of the file made
    for way in ("usual", "loop"):
        with MessageStore(small_config(tmp_path / way)) as store:
            store.put_message(Message("Old", b"o", 0, {}), 0)
            store.commit_log.topic_queue_table["New-3"] = first_offset
            for i in range(before):
                store.put_message(Message("New", b"b%d" % i, 0, {}), 3)
            assert store.wait_dispatched()
            reput = store.reput
            assert reput is not None
            store.commit_log.on_append = None  # the thread is not woken by appends: only by dispatch_now
            for i in range(5):
                store.put_message(Message("Old" if i == 2 else "New", b"m%d" % i, 0, {}), 0 if i == 2 else 3)
            made_by.clear()
            touched.clear()
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(mapped_file.MappedFile, "create", classmethod(recording_create))
                mp.setattr(mapped_file.MappedFile, "touch_for_write", recording_touch)
                if way == "loop":
                    cq = store.find_consume_queue("New", 3)
                    assert cq is not None and len(cq.queue.files) == before // 30
                    queue_files.append(cq.queue.files)
                    assert reput.dispatch_now(make_files=False)
                    assert len(cq.queue.files) == before // 30  # stopped before the first unit of a new file
                    assert reput.reput_from_offset < store.commit_log.get_max_offset()
                    assert made_by == []
                else:
                    assert reput.dispatch_now()
                assert store.wait_dispatched()
            if way == "loop":
                assert made_by == ["ReputMessageService"]
                # The pages of the file's first unit (and of the filler before it) were written first through the
                # file, before the file was in the queue: the loop's first write through the mapping is then no
                # longer the new file's first (milliseconds of file-system work here, with the GIL held).
                assert touched == [("ReputMessageService", 0, first_offset * 20 + 20, False)]
            cq = store.find_consume_queue("New", 3, create=False)
            assert cq is not None and len(cq.queue.files) == before // 30 + 1
            assert store.get_min_offset_in_queue("New", 3) == first_offset
            assert store.get_max_offset_in_queue("New", 3) == first + 4
            got = store.get_message("g", "New", 3, first, 10)
            assert [m.body for m in got.decode()] == [b"m0", b"m1", b"m3", b"m4"]
            assert [m.body for m in store.get_message("g", "Old", 0, 0, 10).decode()] == [b"o", b"m2"]
            mf = cq.queue.files[-1]
            units = np.frombuffer(mf.mm[: (first % 30 + 4) * 20], dtype=CQ_DTYPE)
            expected.append([(int(u["phys"]), int(u["size"]), int(u["tags"])) for u in units])
    assert expected[0] == expected[1]


def test_a_queue_makes_its_next_file_ahead_only_once_the_last_is_full(tmp_path: Path) -> None:
    """``ConsumeQueue.prepare_file`` off the loop: the next file only once every unit of the last is in (made
    earlier, the last's remaining units would go into it), and only for a unit that goes into that next file."""
    from rocketq.store.consume_queue import ConsumeQueue

    cq = ConsumeQueue("T", 0, tmp_path, 30 * 20)
    assert cq.needs_file(0)
    cq.prepare_file(0)
    assert [f.file_from_offset for f in cq.queue.files] == [0] and not cq.needs_file(29) and cq.needs_file(30)
    for q in range(29):
        assert cq.put_message_position_info(q * 100, 100, 0, q)
    cq.prepare_file(30)  # unit 29 is still to come
    cq.prepare_file(61)  # not the next file's
    assert len(cq.queue.files) == 1
    assert cq.put_message_position_info(2900, 100, 0, 29)
    cq.prepare_file(61)
    assert len(cq.queue.files) == 1
    cq.prepare_file(30)
    assert [f.file_from_offset for f in cq.queue.files] == [0, 600] and not cq.needs_file(59)
    cq.prepare_file(31)  # made already
    assert len(cq.queue.files) == 2
    assert cq.put_message_position_info(3000, 100, 0, 30)
    assert cq.get_min_offset_in_queue() == 0 and cq.get_max_offset_in_queue() == 31
    assert [int(u["phys"]) for u in cq.get_index_buffer(28, 3)] == [2800, 2900]  # type: ignore[union-attr]
    assert [int(u["phys"]) for u in cq.get_index_buffer(30, 3)] == [3000]  # type: ignore[union-attr]
    cq.close()


def _mapped_rss_kb(path: Path) -> int:
    """Resident kB of this process's mappings of *path* (``/proc/self/smaps``)."""
    rss, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if not line.split(" ", 1)[0].endswith(":"):  # a mapping's first line: its range, ..., its path
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            rss += int(line.split()[1])
    return rss


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc/self/smaps")
def test_recovery_reads_a_consume_queue_file_only_as_far_as_its_units(tmp_path: Path) -> None:
    """A queue of a few units has a 6 MB file, nearly all of it never written; a topic of 1,024 queues has 1,024
    of them. Recovery (at every start, and ``store inspect``) looks at units until the first that is not valid, and
    never reads the rest of the file (reading all of it took a broker's start from 1.7 s to 5.5 s there)."""
    from rocketq.store.consume_queue import ConsumeQueue

    size = 300_000 * 20
    cq = ConsumeQueue("T", 0, tmp_path, size)
    for q in range(50):
        assert cq.put_message_position_info(q * 100, 100, 0, q)
    cq.flush()
    cq.close()
    path = tmp_path / "T" / "0" / f"{0:020d}"
    cq = ConsumeQueue("T", 0, tmp_path, size)
    assert cq.load()
    cq.recover()
    assert cq.get_max_offset_in_queue() == 50 and cq.max_physic_offset == 49 * 100 + 100
    assert _mapped_rss_kb(path) < 1024  # of 5,860 kB
    cq.truncate_dirty_logic_files(30 * 100)
    assert cq.get_max_offset_in_queue() == 30 and cq.max_physic_offset == 29 * 100 + 100
    assert _mapped_rss_kb(path) < 1024
    cq.close()


def test_the_unit_scan_reads_no_further_than_the_step_of_the_first_unit_that_is_not_valid() -> None:
    from rocketq.store.consume_queue import _SCAN_UNITS, CQ_DTYPE, FILLER_SIZE, _scan_units

    units = np.zeros(10 * _SCAN_UNITS + 5, dtype=CQ_DTYPE)
    units["phys"] = np.arange(len(units)) * 10
    units["size"] = 10
    reads: list[tuple[int, int]] = []

    def read(first: int, count: int) -> np.ndarray:
        reads.append((first, count))
        return units[first : first + count]

    assert _scan_units(read, len(units)) == (len(units), (len(units) - 1) * 10 + 10)
    assert reads[:3] == [(0, _SCAN_UNITS), (_SCAN_UNITS, 2 * _SCAN_UNITS), (3 * _SCAN_UNITS, 4 * _SCAN_UNITS)]
    reads.clear()
    assert _scan_units(read, len(units), below=10 * (_SCAN_UNITS + 7)) == (_SCAN_UNITS + 7, (_SCAN_UNITS + 6) * 10 + 10)
    assert reads == [(0, _SCAN_UNITS), (_SCAN_UNITS, 2 * _SCAN_UNITS)]
    units["size"][2 * _SCAN_UNITS + 1] = 0
    units["size"][2 * _SCAN_UNITS] = FILLER_SIZE  # a filler is valid, but ends nothing
    assert _scan_units(read, len(units)) == (2 * _SCAN_UNITS + 1, (2 * _SCAN_UNITS - 1) * 10 + 10)
    units["phys"][3] = -1
    reads.clear()
    assert _scan_units(read, len(units)) == (3, 2 * 10 + 10)
    assert reads == [(0, _SCAN_UNITS)]
    assert _scan_units(read, 0) == (0, -1)
    units["size"][:] = FILLER_SIZE
    assert _scan_units(read, 3) == (3, -1)
