"""IndexFile and IndexService against the spec (store-format §5) and RocketMQ 4.9.4's own files.

The golden stores were written with maxHashSlotNum=1000 and maxIndexNum=4000
(84,040-byte files); see the golden data's README (../shared/golden/README.md).
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import threading
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import GOLDEN_STORE
from rocketq.common.errors import StoreError
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rocketq.store.index_file import IndexFile, index_file_size, index_key_hash
from rocketq.store.index_service import DEFER_RECORDS, IndexService

GOLDEN = GOLDEN_STORE
SLOTS = 1000
ENTRIES = 4000
FILE_SIZE = 84_040
NO_LIMIT = 1 << 62



@cache
def dump_messages(store: str) -> list[dict]:
    """The MESSAGE records of a golden commit-log dump, in commit-log order."""
    with open(GOLDEN / store / "commitlog-dump.json", encoding="utf-8") as fh:
        records = json.load(fh)["records"]
    msgs = [r for r in records if r["type"] == "MESSAGE"]
    assert [r["physicalOffset"] for r in msgs] == sorted(r["physicalOffset"] for r in msgs)
    return msgs


def golden_index_files(store: str) -> list[Path]:
    return sorted((GOLDEN / store / "store" / "index").iterdir())


def props(r: dict, name: str) -> str | None:
    return r["properties"].get(name)


def feed(service: IndexService, msgs: list[dict]) -> None:
    for r in msgs:
        props = r["properties"]
        service.build_index(r["topic"], r["physicalOffset"], r["storeTimestamp"], r["sysFlag"],
                            props.get("UNIQ_KEY"), props.get("KEYS"))  # fmt: skip


def true_offsets(msgs: list[dict], topic: str, key: str) -> list[int]:
    """Offsets of the records a lookup of <topic>#<key> must find, newest first."""
    out = []
    for r in msgs:
        props = r["properties"]
        if r["topic"] == topic and (props.get("UNIQ_KEY") == key or key in props.get("KEYS", "").split(" ")):
            out.append(r["physicalOffset"])
    return out[::-1]


def record_hashes(r: dict) -> set[int]:
    props = r["properties"]
    keys = [k for k in props.get("KEYS", "").split(" ") if k]
    if "UNIQ_KEY" in props:
        keys.append(props["UNIQ_KEY"])
    return {index_key_hash(f"{r['topic']}#{k}") for k in keys}


def copy_index(store: str, dest_root: Path) -> Path:
    dest = dest_root / "index"
    dest.mkdir(parents=True)
    for p in golden_index_files(store):
        shutil.copyfile(p, dest / p.name)
    return dest


def header(data: bytes) -> tuple[int, ...]:
    return struct.unpack_from(">qqqqii", data, 0)


# --- the key hash ----------------------------------------------------------------------------
def test_index_key_hash_is_abs_of_java_hash_and_zero_for_min_value() -> None:
    assert index_key_hash("TopicTest#k1") == 2746024
    assert index_key_hash("TopicTest#C0A8010A30391B6D358647B760000000") == 1751770164  # hashCode < 0
    assert index_key_hash("polygenelubricants") == 0  # Integer.MIN_VALUE: Math.abs stays negative


# --- golden reproduction ----------------------------------------------------------------------
@pytest.mark.parametrize("store", ["clean", "crashed"])
@pytest.mark.parametrize("batched", [False, True, "deferred"], ids=["per-record", "batched", "deferred"])
def test_build_index_reproduces_rocketmq_files_byte_for_byte(tmp_path: Path, store: str,
                                                             batched: bool | str) -> None:  # fmt: skip
    msgs = dump_messages(store)
    service = IndexService(tmp_path, SLOTS, ENTRIES)
    full_calls: list[int] = []
    service.on_file_full = full_calls.append
    if batched == "deferred":
        # As dispatch leaves keys: record by record and in batches, built when DEFER_RECORDS wait and at the flush.
        rng = random.Random(5)
        i = 0
        while i < len(msgs):
            n = rng.randrange(1, 60)
            rows = [(r["topic"], r["physicalOffset"], r["storeTimestamp"], r["sysFlag"], props(r, "UNIQ_KEY"),
                     props(r, "KEYS")) for r in msgs[i : i + n]]  # fmt: skip
            if n < 10:
                for row in rows:
                    service.defer(*row)
            else:
                service.defer_batch(*zip(*rows, strict=True))
            assert service.pending_count < DEFER_RECORDS
            i += n
        assert service.pending_count > 0  # some were left for the flush
    elif batched:
        # Random batch sizes, so batches straddle the file boundary and start new files.
        rng = random.Random(3)
        i = 0
        while i < len(msgs):
            n = rng.randrange(1, 400)
            service.build_index_batch(*zip(*[
                (r["topic"], r["physicalOffset"], r["storeTimestamp"], r["sysFlag"],
                 r["properties"].get("UNIQ_KEY"), r["properties"].get("KEYS"))
                for r in msgs[i : i + n]
            ], strict=True))  # fmt: skip
            i += n
    else:
        feed(service, msgs)
    service.flush()
    golden = golden_index_files(store)
    assert len(service.files) == len(golden) == 2
    names = [f.name for f in service.files]
    assert names == sorted(names) and all(len(n) == 17 and n.isdigit() for n in names)
    for ours, theirs in zip(service.files, golden, strict=True):
        a = ours.path.read_bytes()
        b = theirs.read_bytes()
        assert len(a) == len(b) == FILE_SIZE
        assert header(a) == header(b), theirs.name
        first_diff = next((i for i in range(len(a)) if a[i] != b[i]), None)
        assert first_diff is None, f"{theirs.name}: first differing byte at {first_diff}"
    first, second = service.files
    assert first.is_write_full() and first.index_count == ENTRIES
    # The follow-up file starts where the full one ended (§5.3), and the store was told.
    assert full_calls == [first.end_timestamp]
    assert (second.begin_phy_offset, second.begin_timestamp) == (first.end_phy_offset, first.end_timestamp)
    service.close()


# --- queries on the golden clean index, in place ---------------------------------------------
@pytest.fixture(scope="module")
def clean_index() -> Iterator[IndexService]:
    service = IndexService(
        GOLDEN / "clean" / "store", SLOTS, ENTRIES, read_only=True, max_msgs_num_batch=100_000
    )
    assert service.load(True, 0)
    yield service
    service.close()


def assert_lookup(service: IndexService, msgs: list[dict], topic: str, key: str) -> list[int]:
    expected = true_offsets(msgs, topic, key)
    assert expected, f"test data has no {topic}#{key}"
    res = service.query_offset(topic, key, NO_LIMIT, 0, NO_LIMIT)
    assert set(expected) <= set(res.phy_offsets)
    # Anything else must be a genuine hash collision, never a random offset.
    by_offset = {r["physicalOffset"]: r for r in msgs}
    h = index_key_hash(f"{topic}#{key}")
    for off in set(res.phy_offsets) - set(expected):
        assert h in record_hashes(by_offset[off])
    assert len(res.phy_offsets) <= len(expected) + 2
    return res.phy_offsets


def test_query_golden_shared_key_finds_all_120(clean_index: IndexService) -> None:
    msgs = dump_messages("clean")
    found = assert_lookup(clean_index, msgs, "GoldenTopicB", "shared")
    assert len(true_offsets(msgs, "GoldenTopicB", "shared")) == 120
    assert found == true_offsets(msgs, "GoldenTopicB", "shared")  # newest first, no collisions here


@pytest.mark.parametrize(
    ("topic", "key"),
    [
        ("GoldenTopicA", "a-5"),
        ("GoldenTopicA", "order-3"),
        ("GoldenTopicB", "user-4"),
        ("GoldenTopicA", "C000020251525FFD2B276C3D550D0000"),  # a UNIQ_KEY (message a-0)
        ("GoldenTopicA", "C000020251525FFD2B276C3D6EFF050D"),  # UNIQ_KEY in file 1, its KEYS in file 2
        ("GoldenTopicA", "a-1154"),
        ("RMQ_SYS_TRANS_HALF_TOPIC", "tx-rollback"),  # a half message is indexed under its stored topic
        ("GoldenTx", "tx-commit"),  # a COMMIT record is indexed
    ],
)
def test_query_golden_keys(clean_index: IndexService, topic: str, key: str) -> None:
    assert_lookup(clean_index, dump_messages("clean"), topic, key)


def test_query_golden_default_batch_matches_mqadmin() -> None:
    """``mqadmin queryMsgByKey`` asks for 64; the broker answers the 64 newest."""
    service = IndexService(GOLDEN / "clean" / "store", SLOTS, ENTRIES, read_only=True)
    service.load(True, 0)
    res = service.query_offset("GoldenTopicB", "shared", NO_LIMIT, 0, NO_LIMIT)
    service.close()
    assert len(res.phy_offsets) == 64
    uniq_by_offset = {r["physicalOffset"]: r["properties"].get("UNIQ_KEY") for r in dump_messages("clean")}
    lines = (GOLDEN / "clean" / "mqadmin-queryMsgByKey-shared.txt").read_text().splitlines()[1:]
    assert {uniq_by_offset[o] for o in res.phy_offsets} == {line.split()[0] for line in lines}


def test_query_golden_misses_and_last_update(clean_index: IndexService) -> None:
    res = clean_index.query_offset("GoldenTopicA", "no-such-key", 64, 0, NO_LIMIT)
    assert res.phy_offsets == []
    last = header((golden_index_files("clean")[-1]).read_bytes())
    assert (res.index_last_update_timestamp, res.index_last_update_phyoffset) == (last[1], last[3])
    # Same key under another topic is another key.
    assert clean_index.query_offset("GoldenTopicB", "a-5", 64, 0, NO_LIMIT).phy_offsets == []


def test_read_only_service_refuses_writes(clean_index: IndexService) -> None:
    with pytest.raises(StoreError):
        clean_index.build_index("T", 1 << 40, 1, 0, "u", "k")
    with pytest.raises(StoreError):
        clean_index.delete_expired_file(1 << 40)


# --- load after a crash ------------------------------------------------------------------------
def test_load_after_abnormal_exit_drops_files_newer_than_checkpoint(tmp_path: Path) -> None:
    index_dir = copy_index("crashed", tmp_path)
    checkpoint = (GOLDEN / "crashed" / "store" / "checkpoint").read_bytes()
    index_msg_timestamp = struct.unpack_from(">q", checkpoint, 16)[0]
    first, second = golden_index_files("crashed")

    service = IndexService(tmp_path, SLOTS, ENTRIES)
    assert service.load(False, index_msg_timestamp)
    # As the restarted 4.9.4 broker did: the second file ended after the checkpoint and is gone.
    assert [f.name for f in service.files] == [first.name]
    assert sorted(p.name for p in index_dir.iterdir()) == [first.name]

    # Dispatch replays the commit log: records before the kept file's end are skipped, the rest land
    # in a new file. The record at that end offset (its UNIQ_KEY and first key were in the full file,
    # its second key in the deleted one) is not skipped (the check is offset < end), so its first two
    # keys are indexed a second time; after them the new file repeats the deleted one entry by entry.
    feed(service, dump_messages("crashed"))
    assert len(service.files) == 2
    kept, rebuilt = service.files
    assert kept.path.read_bytes() == first.read_bytes()
    old = second.read_bytes()
    new = rebuilt.path.read_bytes()
    old_header = header(old)
    assert header(new) == (*old_header[:5], old_header[5] + 2)
    entries_at = 40 + 4 * SLOTS

    def entries(data: bytes, count: int) -> list[tuple[int, int, int]]:
        return [struct.unpack_from(">iqi", data, entries_at + 20 * n) for n in range(1, count)]

    new_entries = entries(new, old_header[5] + 2)
    assert new_entries[2:] == entries(old, old_header[5])  # hash, offset, time diff
    spanning = [e[:2] for e in entries(first.read_bytes(), ENTRIES)[-2:]]
    assert [e[:2] for e in new_entries[:2]] == spanning and spanning[0][1] == kept.end_phy_offset
    service.close()


def test_load_after_clean_exit_keeps_everything(tmp_path: Path) -> None:
    copy_index("crashed", tmp_path)
    service = IndexService(tmp_path, SLOTS, ENTRIES)
    assert service.load(True, 0)
    assert len(service.files) == 2
    assert service.files[1].index_count == 2684
    service.close()


def test_load_read_only_after_abnormal_exit_deletes_nothing(tmp_path: Path) -> None:
    """A read-only service keeps the files a writable one would destroy (and build again): it reads them."""
    index_dir = copy_index("crashed", tmp_path)
    service = IndexService(tmp_path, SLOTS, ENTRIES, read_only=True)
    assert service.load(False, 0)
    assert len(service.files) == 2
    service.close()
    assert len(list(index_dir.iterdir())) == 2
    writable = IndexService(tmp_path, SLOTS, ENTRIES)
    assert writable.load(False, 0)
    assert writable.files == []
    writable.close()
    assert list(index_dir.iterdir()) == []


def test_load_rejects_wrong_slot_configuration(tmp_path: Path) -> None:
    copy_index("clean", tmp_path)
    with pytest.raises(StoreError, match="maxHashSlotNum"):
        IndexService(tmp_path, 5_000_000, 20_000_000).load(True, 0)


def test_load_skips_non_index_names(tmp_path: Path) -> None:
    service = IndexService(tmp_path, 10, 10)
    service.build_index("T", 0, 1_000, TRANSACTION_NOT_TYPE, None, "k")
    service.close()
    (tmp_path / "index" / "README").write_text("x")
    (tmp_path / "index" / "sub").mkdir()
    service = IndexService(tmp_path, 10, 10)
    assert service.load(True, 0)
    assert len(service.files) == 1
    assert service.query_offset("T", "k", 10, 0, NO_LIMIT).phy_offsets == [0]
    service.close()


# --- deleting expired files ---------------------------------------------------------------------
def test_delete_expired_file(tmp_path: Path) -> None:
    index_dir = copy_index("clean", tmp_path)
    service = IndexService(tmp_path, SLOTS, ENTRIES)
    service.load(True, 0)
    first_end = service.files[0].end_phy_offset
    assert service.delete_expired_file(first_end) == 0  # ends exactly there: still needed
    assert service.delete_expired_file(first_end + 1) == 1
    assert [p.name for p in index_dir.iterdir()] == [service.files[0].name]
    assert service.delete_expired_file(NO_LIMIT) == 0  # the last file is never deleted
    assert len(service.files) == 1
    msgs = dump_messages("clean")
    res = service.query_offset("GoldenTopicB", "shared", 1000, 0, NO_LIMIT)
    assert res.phy_offsets == [o for o in true_offsets(msgs, "GoldenTopicB", "shared") if o >= first_end]
    service.close()


def test_delete_expired_file_stops_at_first_live_file(tmp_path: Path) -> None:
    service = IndexService(tmp_path, 10, 3)  # two keys a file
    for i, off in enumerate([100, 200, 300, 400, 500, 600]):
        service.build_index("T", off, 1_000 * (i + 1), 0, None, "k")
    assert [f.end_phy_offset for f in service.files] == [200, 400, 600]
    assert service.delete_expired_file(0) == 0
    assert service.delete_expired_file(401) == 2
    assert [f.end_phy_offset for f in service.files] == [600]
    assert len(list((tmp_path / "index").iterdir())) == 1
    service.close()


# --- synthetic: writing rules ----------------------------------------------------------------------
def test_worked_example_entries_and_header(tmp_path: Path) -> None:
    """store-format §14.4, with the default 5,000,000 slots and 20,000,000 entries (a sparse file)."""
    f = IndexFile.create(tmp_path / "20231114221320150", 5_000_000, 20_000_000)
    assert f.path.stat().st_size == 420_000_040 == index_file_size(5_000_000, 20_000_000)
    assert f.put_key("TopicTest#C0A8010A30391B6D358647B760000000", 0, 1700000000123)
    assert f.put_key("TopicTest#k1", 0, 1700000000123)
    mm = f._mm
    assert mm[7080696:7080700] == bytes.fromhex("00000001")
    assert mm[10984136:10984140] == bytes.fromhex("00000002")
    assert mm[20000060:20000080] == bytes.fromhex("6869E434" "0000000000000000" "00000000" "00000000")
    assert mm[20000080:20000100] == bytes.fromhex("0029E6A8" "0000000000000000" "00000000" "00000000")
    assert mm[0:40] == bytes.fromhex(
        "0000018BCFE5687B" "0000018BCFE5687B" "0000000000000000" "0000000000000000" "00000002" "00000003"
    )
    f.destroy()


def test_put_key_chains_slots_and_time_diffs(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "1", 1, 10)  # one slot: every key collides
    t0 = 1_700_000_000_000
    assert f.put_key("T#a", 10, t0)
    assert f.put_key("T#b", 20, t0 + 2_999)
    assert f.put_key("T#a", 30, t0 - 5_000)  # store time before the file's begin: diff 0
    assert (f.hash_slot_count, f.index_count) == (1, 4)
    assert (f.begin_timestamp, f.end_timestamp) == (t0, t0 - 5_000)
    assert (f.begin_phy_offset, f.end_phy_offset) == (10, 30)
    base = 40 + 4
    entries = [struct.unpack_from(">iqii", f._mm, base + 20 * n) for n in range(1, 4)]
    ha, hb = index_key_hash("T#a"), index_key_hash("T#b")
    assert entries == [(ha, 10, 0, 0), (hb, 20, 2, 1), (ha, 30, 0, 2)]
    assert struct.unpack_from(">i", f._mm, 40)[0] == 3
    out: list[int] = []
    f.select_phy_offsets(out, "T#a", 10, 0, NO_LIMIT)
    assert out == [30, 10]
    f.flush()
    reopened = IndexFile(f.path, 1, 10, read_only=True)
    assert (reopened.index_count, reopened.hash_slot_count, reopened.end_phy_offset) == (4, 1, 30)
    reopened.close()
    f.close()


def test_file_is_full_at_max_index_num(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "1", 4, 3)
    assert f.put_key("T#a", 1, 1) and f.put_key("T#b", 2, 2)
    assert f.is_write_full()
    assert not f.put_key("T#c", 3, 3)
    assert f.index_count == 3
    f.close()


def test_build_index_skips_rollback_replays_and_empty_tokens(tmp_path: Path) -> None:
    service = IndexService(tmp_path, 16, 100)
    service.build_index("T", 100, 1_000, TRANSACTION_NOT_TYPE, "U1", "  a  b ")
    service.build_index("T", 200, 2_000, TRANSACTION_PREPARED_TYPE, None, "p")
    service.build_index("T", 300, 3_000, TRANSACTION_COMMIT_TYPE, "U3", None)
    service.build_index("T", 400, 4_000, TRANSACTION_ROLLBACK_TYPE | 0x1, "U4", "r")
    service.build_index("T", 250, 5_000, TRANSACTION_NOT_TYPE, "U5", "old")  # behind the index end
    service.build_index("T", 300, 3_000, TRANSACTION_NOT_TYPE, None, "same")  # at the end: indexed
    f = service.files[0]
    assert f.index_count == 1 + 3 + 1 + 1 + 1
    q = service.query_offset
    assert q("T", "a", 10, 0, NO_LIMIT).phy_offsets == [100]
    assert q("T", "b", 10, 0, NO_LIMIT).phy_offsets == [100]
    assert q("T", "U1", 10, 0, NO_LIMIT).phy_offsets == [100]
    assert q("T", "p", 10, 0, NO_LIMIT).phy_offsets == [200]
    assert q("T", "U3", 10, 0, NO_LIMIT).phy_offsets == [300]
    assert q("T", "same", 10, 0, NO_LIMIT).phy_offsets == [300]
    for missing in ("U4", "r", "U5", "old", ""):
        assert q("T", missing, 10, 0, NO_LIMIT).phy_offsets == []
    service.close()


def test_a_full_file_is_flushed_off_the_builders_thread_before_the_checkpoint_moves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The msync of a full index file (hundreds of MB) can take seconds; the builder may be the broker's event
    loop. As in Java, the full file is flushed on a thread of its own, and only then is ``on_file_full`` told
    (the checkpoint's indexMsgTimestamp must not pass a file that is not durable); closing waits for it."""
    from rocketq.store import index_file

    release = threading.Event()
    events: list[str] = []
    real_flush = index_file.IndexFile.flush

    def slow_flush(f: index_file.IndexFile) -> None:
        if f.is_write_full():
            events.append(f"flush {threading.current_thread().name}")
            assert release.wait(10)
        real_flush(f)

    monkeypatch.setattr(index_file.IndexFile, "flush", slow_flush)
    service = IndexService(tmp_path, 8, 3)  # two keys a file
    service.on_file_full = lambda ts: events.append(f"full {ts}")
    t0 = 1_700_000_000_000
    service.build_index("T", 0, t0, 0, "u0", "k")
    started = time.monotonic()
    service.build_index("T", 50, t0 + 1_500, 0, "u1", "k")  # rolls over: file 1 is full
    assert time.monotonic() - started < 5 and len(service.files) == 2
    assert service.query_offset("T", "k", 10, 0, NO_LIMIT).phy_offsets == [50, 0]  # both files read meanwhile
    deadline = time.monotonic() + 5
    while not events and time.monotonic() < deadline:
        time.sleep(0.01)
    assert events == ["flush IndexFileFlush"]  # under way, on its own thread; the checkpoint not told yet
    release.set()
    service.close()  # waits for it (then flushes every file itself)
    assert events[:2] == ["flush IndexFileFlush", f"full {t0}"]


def test_rollover_seeds_new_file_and_reports_full_file(tmp_path: Path) -> None:
    service = IndexService(tmp_path, 8, 3)  # two keys a file
    calls: list[tuple[int, int]] = []

    def on_full(ts: int) -> None:
        # By then the full file is flushed and a new file is in place (maybe the one after it too: the flush of
        # a full file runs on a thread of its own).
        calls.append((ts, len(service.files)))

    service.on_file_full = on_full
    t0 = 1_700_000_000_000
    service.build_index("T", 0, t0, 0, "u0", "k")  # file 1: both keys
    service.build_index("T", 50, t0 + 1_500, 0, "u1", "k")  # file 2: both keys (file 1 was full)
    service.build_index("T", 90, t0 + 4_200, 0, "u2", None)  # file 3
    assert len(service.files) == 3
    service.wait_full_flushed()  # a full file is flushed on a thread of its own
    names = [f.name for f in service.files]
    assert names == sorted(names) and len(set(names)) == 3  # unique even within one millisecond
    assert [ts for ts, _ in calls] == [t0, t0 + 1_500] and calls[0][1] >= 2 and calls[1][1] == 3
    second = service.files[1]
    assert (second.begin_timestamp, second.end_timestamp) == (t0 + 1_500, t0 + 1_500)
    assert (second.begin_phy_offset, second.end_phy_offset) == (50, 50)
    # First entry of a follow-up file: diff from the previous file's end (1.5 s → 1).
    third = service.files[2]
    assert struct.unpack_from(">iqii", third._mm, 40 + 8 * 4 + 20)[2] == 2  # (t0+4200 − (t0+1500)) // 1000
    assert third.begin_timestamp == t0 + 4_200
    res = service.query_offset("T", "k", 10, 0, NO_LIMIT)
    assert res.phy_offsets == [50, 0]
    assert (res.index_last_update_timestamp, res.index_last_update_phyoffset) == (t0 + 4_200, 90)
    service.close()


def test_new_file_after_reload_follows_existing_names(tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    future = index_dir / "20991231235959999"  # e.g. written by a broker whose clock ran ahead
    IndexFile.create(future, 8, 2).close()
    service = IndexService(tmp_path, 8, 2)
    service.load(True, 0)
    service.build_index("T", 0, 1, 0, None, "k")  # fills the loaded file
    service.build_index("T", 1, 2, 0, None, "k")  # needs a new file, named after the loaded one
    assert service.files[0].name == future.name
    assert service.files[1].name == "21000101000000000"
    service.close()


# --- synthetic: queries ------------------------------------------------------------------------------
@pytest.fixture
def timed_service(tmp_path: Path) -> Iterator[IndexService]:
    """Ten records of key k, one a second, four keys a file: files hold records 0-3, 4-7, 8-9."""
    service = IndexService(tmp_path, 16, 5, max_msgs_num_batch=1000)
    for i in range(10):
        service.build_index("T", i * 100, T0 + i * 1_000, 0, None, "k")
    yield service
    service.close()


T0 = 1_700_000_000_000


def test_query_time_window(timed_service: IndexService) -> None:
    q = timed_service.query_offset
    assert q("T", "k", 100, 0, NO_LIMIT).phy_offsets == [900, 800, 700, 600, 500, 400, 300, 200, 100, 0]
    assert q("T", "k", 100, T0 + 1_000, T0 + 2_000).phy_offsets == [200, 100]
    assert q("T", "k", 100, T0 + 8_000, T0 + 9_000).phy_offsets == [900, 800]
    assert q("T", "k", 100, T0 + 2_500, T0 + 6_500).phy_offsets == [600, 500, 400, 300]
    assert q("T", "k", 100, T0 + 20_000, NO_LIMIT).phy_offsets == []
    assert q("T", "k", 100, 0, T0 - 1).phy_offsets == []


def test_query_follow_up_file_first_entry_reads_late(timed_service: IndexService) -> None:
    """Java's quirk (§5.6): record 4 is stored with diff 1 from the previous file's end, then the
    file's beginTimestamp becomes record 4's time, so lookups see it one second late."""
    q = timed_service.query_offset
    assert q("T", "k", 100, T0 + 5_000, T0 + 6_000).phy_offsets == [600, 500, 400]
    assert q("T", "k", 100, T0 + 4_000, T0 + 4_999).phy_offsets == []


def test_query_max_num_and_batch_cap(timed_service: IndexService) -> None:
    assert timed_service.query_offset("T", "k", 3, 0, NO_LIMIT).phy_offsets == [900, 800, 700]
    assert timed_service.query_offset("T", "k", 0, 0, NO_LIMIT).phy_offsets == []
    timed_service.max_msgs_num_batch = 5
    assert timed_service.query_offset("T", "k", 100, 0, NO_LIMIT).phy_offsets == [900, 800, 700, 600, 500]


def test_query_survives_a_damaged_chain(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "1", 1, 10)
    for i in range(3):
        f.put_key("T#k", i, 1_000)
    struct.pack_into(">i", f._mm, 40 + 4 + 20 * 2 + 16, 3)  # entry 2 points forward to entry 3: a cycle
    out: list[int] = []
    f.select_phy_offsets(out, "T#k", 100, 0, NO_LIMIT)
    assert out == [2, 1]
    f.close()


def test_empty_service(tmp_path: Path) -> None:
    service = IndexService(tmp_path, 8, 8)
    assert service.load(False, 0)
    res = service.query_offset("T", "k", 10, 0, NO_LIMIT)
    assert (res.phy_offsets, res.index_last_update_timestamp, res.index_last_update_phyoffset) == ([], 0, 0)
    assert service.delete_expired_file(NO_LIMIT) == 0
    service.build_index("T", 0, 1, 0, None, "k")
    service.destroy()
    assert list((tmp_path / "index").iterdir()) == []
    with pytest.raises(StoreError):
        IndexService(tmp_path, 8, 1)


def test_put_key_ignores_a_stale_slot_value(tmp_path: Path) -> None:
    f = IndexFile.create(tmp_path / "1", 1, 10)
    struct.pack_into(">i", f._mm, 40, 7)  # slot points past indexCount (1): not a chain head
    assert f.put_key("T#k", 5, 1_000)
    assert struct.unpack_from(">iqii", f._mm, 40 + 4 + 20)[3] == 0
    assert f.hash_slot_count == 1
    f.close()


def test_query_stops_at_a_file_that_begins_before_the_window(tmp_path: Path) -> None:
    """§5.7: the walk ends at the first file whose beginTimestamp < begin, even if older files
    (written before the clock stepped back) hold matches."""
    service = IndexService(tmp_path, 8, 3)
    service.build_index("T", 0, 50_000, 0, None, "k")
    service.build_index("T", 10, 60_000, 0, None, "k")  # file 1 full: [50 s, 60 s]
    service.build_index("T", 20, 1_000, 0, None, "x")  # file 2 begins at 1 s
    assert service.query_offset("T", "k", 10, 40_000, NO_LIMIT).phy_offsets == []
    assert service.query_offset("T", "k", 10, 0, NO_LIMIT).phy_offsets == [10, 0]
    service.close()


@given(st.text(max_size=40) | st.text(alphabet=st.characters(max_codepoint=127), max_size=1100))
def test_index_key_hash_matches_java_hash(key: str) -> None:
    h = java_string_hash(key)
    assert index_key_hash(key) == (0 if h == -(1 << 31) else abs(h))


def test_queries_run_alongside_a_writer(tmp_path: Path) -> None:
    service = IndexService(tmp_path, 64, 200, max_msgs_num_batch=10_000)
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                found = service.query_offset("T", "even", 10_000, 0, NO_LIMIT).phy_offsets
                assert found == sorted(found, reverse=True)
                assert all(off % 200 == 0 for off in found)
                service.delete_expired_file(0)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(3000):
            service.build_index("T", i * 100, T0 + i, 0, f"u{i}", "even" if i % 2 == 0 else "odd")
    finally:
        done.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert len(service.files) == 31  # 6000 keys, 199 a file
    found = service.query_offset("T", "even", 10_000, 0, NO_LIMIT).phy_offsets
    assert found == [i * 100 for i in range(2998, -1, -2)]
    service.close()


def test_a_query_waits_for_a_build_of_waiting_keys_under_way(tmp_path: Path) -> None:
    """Keys taken by a build on another thread are not pending any more, but not in the files yet: a query
    must wait for that build, not go on without them."""
    service = IndexService(tmp_path, SLOTS, ENTRIES)
    started, release = threading.Event(), threading.Event()
    build = service.build_index_batch

    def slow_build(*a: object) -> None:
        started.set()
        release.wait(10)
        build(*a)  # type: ignore[arg-type]

    service.build_index_batch = slow_build  # type: ignore[method-assign]
    for i in range(5):
        service.defer("T", 100 + i * 50, 1_700_000_000_000 + i, TRANSACTION_NOT_TYPE, None, f"key{i}")
    builder = threading.Thread(target=service.build_pending)
    builder.start()
    assert started.wait(10)
    assert service.pending_count == 5  # taken by the build, not in the files yet
    threading.Timer(0.2, release.set).start()
    res = service.query_offset("T", "key3", 10, 0, NO_LIMIT)
    assert res.phy_offsets == [250]
    builder.join(10)
    assert service.pending_count == 0 and service.pending_oldest_timestamp == 0
    service.close()
