"""MessageStore: reading RocketMQ's own store, writing one RocketMQ can read, and the rules in between."""

from __future__ import annotations

import base64
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import copy_store, load_json
from rocketq.common.codec import BLANK_MAGIC_CODE, decode_record, read_size_and_magic
from rocketq.common.errors import StoreError
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import TRANSACTION_PREPARED_TYPE, Message, MessageExt, properties_to_string
from rocketq.common.mixall import RMQ_SYS_SCHEDULE_TOPIC
from rocketq.store import message_store
from rocketq.store.commit_log import PutMessageStatus
from rocketq.store.consume_queue import CQ_UNIT
from rocketq.store.message_filter import TagFilter
from rocketq.store.message_store import GetMessageStatus, MessageStore
from rocketq.store.store_config import MessageStoreConfig, load_broker_conf

SMALL = dict(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=600, max_hash_slot_num=100,
             max_index_num=400)


def small_config(root: Path, **kw: Any) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(root), **{**SMALL, **kw})


def golden_config(golden: Path, root: Path | None = None) -> MessageStoreConfig:
    cfg = load_broker_conf(golden / "broker.conf")
    cfg.store_path_root_dir = str(root or golden / "store")
    cfg.store_path_commit_log = ""
    return cfg


@pytest.fixture(scope="module")
def clean_store(golden_clean: Path) -> Any:
    store = MessageStore(golden_config(golden_clean), read_only=True)
    store.load()
    yield store
    store.close()


def _without_pull_props(props: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if k not in ("MIN_OFFSET", "MAX_OFFSET")}


# --- reading the golden store in place ------------------------------------------------------------


def test_golden_every_message_by_offset_queue_and_id(clean_store: MessageStore,
                                                    clean_manifest: dict[str, Any]) -> None:
    messages = clean_manifest["finalRead"]["messages"]
    assert len(messages) == 1570
    for m in messages:
        by_offset = clean_store.look_message_by_offset(m["commitLogOffset"])
        assert by_offset is not None
        got = clean_store.get_message("g", m["topic"], m["queueId"], m["queueOffset"], 1)
        assert got.status is GetMessageStatus.FOUND
        (by_queue,) = got.decode()
        by_id = clean_store.look_message_by_msg_id(m["msgId"])
        for msg in (by_offset, by_queue, by_id):
            assert msg is not None
            assert msg.topic == m["topic"] and msg.queue_id == m["queueId"]
            assert msg.queue_offset == m["queueOffset"] and msg.commit_log_offset == m["commitLogOffset"]
            assert msg.store_size == m["storeSize"] and msg.msg_id == m["msgId"]
            assert msg.sys_flag == m["sysFlag"] and msg.flag == m["flag"] and msg.body_crc == m["bodyCRC"]
            assert msg.born_timestamp == m["bornTimestamp"] and msg.store_timestamp == m["storeTimestamp"]
            assert msg.reconsume_times == m["reconsumeTimes"]
            assert msg.prepared_transaction_offset == m["preparedTransactionOffset"]
            assert msg.properties == _without_pull_props(m["properties"])
            if not msg.sys_flag & 1:
                assert msg.body == base64.b64decode(m["body"])


def test_golden_queue_offsets(clean_store: MessageStore, clean_manifest: dict[str, Any]) -> None:
    for q in clean_manifest["finalRead"]["queues"]:
        assert clean_store.get_min_offset_in_queue(q["topic"], q["queueId"]) == q["minOffset"]
        assert clean_store.get_max_offset_in_queue(q["topic"], q["queueId"]) == q["maxOffset"]


def test_golden_query_by_key(clean_store: MessageStore, clean_manifest: dict[str, Any]) -> None:
    messages = clean_manifest["finalRead"]["messages"]
    for m in messages[::37]:
        for key in [m["uniqKey"], *(m["keys"] or "").split()]:
            if not key:
                continue
            found = clean_store.query_message(m["topic"], key, 64)
            offsets = {x.commit_log_offset for x in found.messages}
            sharing = [x for x in messages if x["topic"] == m["topic"] and
                       (key == x["uniqKey"] or key in (x["keys"] or "").split())]
            if len(sharing) <= 64:
                assert m["commitLogOffset"] in offsets, (m["topic"], key)
            assert len(found.messages) <= 64
            assert all(key == x.uniq_key or key in x.key_list() for x in found.messages)
    shared = clean_store.query_message("GoldenTopicB", "shared", 64)
    assert len(shared.messages) == 64  # capped by maxMsgsNumBatch
    assert clean_store.query_message("GoldenTopicB", "no-such-key", 64).messages == []


@pytest.mark.parametrize("check_in_slave", [False, True])
def test_a_slave_leaves_a_readers_offset_as_asked_unless_offset_check_in_slave(golden_clean: Path,
                                                                              check_in_slave: bool) -> None:
    """``nextOffsetCorrection``: a slave does not move a reader (its master does) unless ``offsetCheckInSlave``."""
    cfg = golden_config(golden_clean)
    cfg.broker_role, cfg.offset_check_in_slave = "SLAVE", check_in_slave
    store = MessageStore(cfg, read_only=True)
    store.load()
    try:
        bad = store.get_message("g", "GoldenTopicA", 0, 400, 32)
        assert bad.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
        assert bad.next_begin_offset == (355 if check_in_slave else 400)
        assert store.get_message("g", "GoldenTopicA", 0, 10, 1).next_begin_offset == 11  # found: as on a master
        # a queue this store has never had (a slave that joined after its messages' files): the same rule, not 0
        none = store.get_message("g", "NeverHere", 3, 10, 32)
        assert (none.status, none.next_begin_offset) == (GetMessageStatus.NO_MESSAGE_IN_QUEUE,
                                                         0 if check_in_slave else 10)  # fmt: skip
    finally:
        store.close()


def test_a_key_query_answers_in_commit_log_order(tmp_path: Path) -> None:
    """``queryMessage`` sorts the offsets the index gives: the oldest message first, over several index files."""
    with MessageStore(small_config(tmp_path, max_hash_slot_num=8, max_index_num=16)) as store:
        offsets = [store.put_message(Message("Q", f"m{i}".encode(), 0, {"KEYS": "dup other"}), 0).wrote_offset
                   for i in range(12)]  # fmt: skip
        assert store.wait_dispatched()
        found = store.query_message("Q", "dup", 64)
        assert [m.commit_log_offset for m in found.messages] == offsets
        assert [m.body for m in found.messages] == [f"m{i}".encode() for i in range(12)]


def test_golden_get_message_paging_and_statuses(clean_store: MessageStore) -> None:
    res = clean_store.get_message("g", "GoldenTopicA", 0, 0, 1000)
    assert res.status is GetMessageStatus.FOUND
    assert res.message_count <= 32  # maxTransferCountOnMessageInMemory
    assert res.next_begin_offset == res.message_count
    assert res.min_offset == 0 and res.max_offset == 355
    assert clean_store.get_message("g", "GoldenTopicA", 0, 355, 32).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    bad = clean_store.get_message("g", "GoldenTopicA", 0, 400, 32)
    assert bad.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and bad.next_begin_offset == 355  # 4.9: the end
    none = clean_store.get_message("g", "NoSuchTopic", 0, 0, 32)
    assert none.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    # Tag filter: queue 1 of GoldenTopicB holds messages with tags TagB, TagC and none.
    only_c = clean_store.get_message("g", "GoldenTopicB", 1, 0, 32, TagFilter("TagC"))
    assert only_c.status is GetMessageStatus.FOUND
    assert {m.tags for m in only_c.decode()} == {"TagC"}
    nothing = clean_store.get_message("g", "GoldenTopicB", 1, 0, 32, TagFilter("NoSuchTag"))
    assert nothing.status is GetMessageStatus.NO_MATCHED_MESSAGE and nothing.next_begin_offset == 61


def test_golden_offset_by_time_and_earliest(clean_store: MessageStore, clean_manifest: dict[str, Any]) -> None:
    a0 = [m for m in clean_manifest["finalRead"]["messages"] if m["topic"] == "GoldenTopicA" and m["queueId"] == 0]
    for m in a0[::25]:
        assert clean_store.get_offset_in_queue_by_time("GoldenTopicA", 0, m["storeTimestamp"]) in {
            x["queueOffset"] for x in a0 if x["storeTimestamp"] == m["storeTimestamp"]}
    assert clean_store.get_earliest_message_time() == clean_manifest["finalRead"]["messages"][0]["storeTimestamp"]
    assert clean_store.get_earliest_message_time("GoldenTopicA", 0) == a0[0]["storeTimestamp"]


def test_golden_consume_queue_tag_codes(clean_dump: dict[str, Any], clean_store: MessageStore) -> None:
    """Tag codes the dispatcher computes agree with the units RocketMQ wrote."""
    cl = clean_store.commit_log
    by_offset = {}
    for offset, info, req in cl.scan(0):
        if req is not None:
            by_offset[offset] = req.tags_code
        assert info.ok
    units = 0
    for cq in clean_dump["consumeQueues"]:
        for _queue_offset, phys, _size, tags_code in cq["units"]:
            assert by_offset[phys] == tags_code, (cq["topic"], phys)
            units += 1
    assert units > 1500


# --- writing --------------------------------------------------------------------------------------


def test_put_get_reopen(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "s")
    with MessageStore(cfg) as store:
        assert (tmp_path / "s" / "abort").exists()
        results = [store.put_message(Message("TopicA", f"body-{i}".encode(), 0, {"TAGS": "T", "KEYS": f"k{i}"}),
                                     i % 2) for i in range(100)]
        assert all(r.ok for r in results)
        assert [r.logics_offset for r in results[:4]] == [0, 0, 1, 1]
        assert store.wait_dispatched()
        assert store.get_max_offset_in_queue("TopicA", 0) == 50
        got = store.get_message("g", "TopicA", 1, 10, 5)
        assert [m.body for m in got.decode()] == [f"body-{i}".encode() for i in range(21, 31, 2)]
        assert got.next_begin_offset == 15
        q = store.query_message("TopicA", "k42", 10)
        assert [m.body for m in q.messages] == [b"body-42"]
        assert store.look_message_by_msg_id(results[7].msg_id).body == b"body-7"
    assert not (tmp_path / "s" / "abort").exists()
    for name in ("topics.json", "consumerOffset.json", "delayOffset.json", "subscriptionGroup.json"):
        assert (tmp_path / "s" / "config" / name).exists()
    with MessageStore(small_config(tmp_path / "s")) as store:
        assert store.last_exit_ok
        assert store.get_max_offset_in_queue("TopicA", 1) == 50
        r = store.put_message(Message("TopicA", b"more", 0, {}), 1)
        assert r.logics_offset == 50


def test_blank_at_end_of_file_and_roll(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "s")
    with MessageStore(cfg) as store:
        sizes = []
        for i in range(60):
            r = store.put_message(Message("Roll", bytes(1500 + i), 0, {}), 0)
            assert r.ok
            sizes.append((r.wrote_offset, r.wrote_bytes))
        store.wait_dispatched()
        files = sorted((tmp_path / "s" / "commitlog").iterdir())
        assert len(files) >= 2 and all(f.stat().st_size == 64 * 1024 for f in files)
        # The allocation service may have made the next file already (all zeros, §2.5).
        files = [f for f in files if f.read_bytes()[:8] != bytes(8)]
        for f in files[:-1]:
            data = f.read_bytes()
            pos = 0
            while True:
                total, magic = read_size_and_magic(data, pos)
                if magic == BLANK_MAGIC_CODE:
                    assert pos + total == len(data) and total >= 8
                    break
                pos += total
        for offset, size in sizes:
            assert offset // (64 * 1024) == (offset + size - 1) // (64 * 1024)  # never spans files
        assert store.get_max_offset_in_queue("Roll", 0) == 60


def test_exact_fit_leaves_eight_bytes(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path / "s")) as store:
        first = store.put_message(Message("Fit", bytes(100), 0, {}), 0)
        overhead = first.wrote_bytes - 100
        room = 64 * 1024 - first.wrote_bytes
        fits = store.put_message(Message("Fit", bytes(room - 8 - overhead), 0, {}), 0)
        assert fits.wrote_offset == first.wrote_bytes  # record + 8 == free space: still fits
        nxt = store.put_message(Message("Fit", b"", 0, {}), 0)
        assert nxt.wrote_offset == 64 * 1024


def test_batch_put(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path / "s")) as store:
        store.put_message(Message("Batch", b"x", 0, {}), 1)
        r = store.put_messages([Message("Batch", f"m{i}".encode(), 0, {"KEYS": f"b{i}"}) for i in range(8)], 1)
        assert r.ok and r.msg_num == 8 and r.logics_offset == 1 and len(r.msg_ids) == 8
        store.wait_dispatched()
        got = store.get_message("g", "Batch", 1, 1, 32).decode()
        assert [m.queue_offset for m in got] == list(range(1, 9))
        assert len({m.store_timestamp for m in got}) == 1
        assert r.msg_id.split(",") == [m.msg_id for m in got]


@pytest.mark.parametrize("file_size", [64 * 1024, 256 * 1024])
def test_get_message_reads_a_run_in_one_file_as_the_unit_by_unit_loop_does(tmp_path: Path, file_size: int,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """get_message's list-at-a-time path (nothing to filter, one file, in memory) gives what its loop gives, unit
    by unit, for every queue, offset and limit tried: records spread over files, interleaved between queues,
    batches, byte and count limits, filters, and the in-disk case where the path steps aside."""
    rng = random.Random(7)
    with MessageStore(small_config(tmp_path / "s", mapped_file_size_commit_log=file_size)) as store:
        for _ in range(300):
            queue = rng.randrange(3)
            tags = {"TAGS": rng.choice(["TagA", "TagB"])}
            if rng.random() < 0.2:
                store.put_messages([Message("Run", bytes(rng.randrange(1, 900)), 0, tags) for _ in range(5)], queue)
            else:
                store.put_message(Message("Run", bytes(rng.randrange(1, 2500)), 0, tags), queue)
        store.wait_dispatched()
        assert len(store.commit_log.mapped_file_queue.files) > 1
        fast = store._get_from_one_file
        taken = 0

        def counted(*args: Any) -> bool:
            nonlocal taken
            done = fast(*args)
            taken += done
            return done

        cfg = store.config
        head = store.get_message("g", "Run", 0, 0, 4).messages
        exact = len(head[0]) + len(head[1]) + len(head[2])  # a byte limit met exactly by three records
        # 2 % of 10 MB: records more than 200 KB behind the end are "in disk", the rest in memory.
        monkeypatch.setattr(message_store, "_PHYSICAL_MEMORY", 10_000_000)
        for limits in [(256 * 1024, 32, 40), (3000, 32, 40), (20000, 5, 40), (exact, 32, 40), (256 * 1024, 32, 0),
                       (256 * 1024, 32, 2)]:  # fmt: skip
            cfg.max_transfer_bytes_on_message_in_memory, cfg.max_transfer_count_on_message_in_memory, \
                cfg.access_message_in_memory_max_ratio = limits  # fmt: skip
            for queue in range(3):
                top = store.get_max_offset_in_queue("Run", queue)
                near = range(top + 1) if limits[2] == 2 else ()  # every offset where memory meets disk
                for offset in sorted({0, 1, top - 1, top, *rng.sample(range(top), 12), *near}):
                    for max_count in (1, 3, 32, 100):
                        for message_filter in (None, TagFilter("*"), TagFilter("TagA")):
                            monkeypatch.setattr(store, "_get_from_one_file", counted)
                            got = store.get_message("g", "Run", queue, offset, max_count, message_filter)
                            monkeypatch.setattr(store, "_get_from_one_file", lambda *args: False)
                            want = store.get_message("g", "Run", queue, offset, max_count, message_filter)
                            assert got == want, (limits, queue, offset, max_count, message_filter)
        assert taken > 300  # the path was taken, not only stepped aside


@pytest.mark.parametrize(
    ("msg", "queue", "status"),
    [
        (Message("bad topic!", b"x"), 0, PutMessageStatus.MESSAGE_ILLEGAL),
        (Message("T\n", b"x"), 0, PutMessageStatus.MESSAGE_ILLEGAL),
        (Message("", b"x"), 0, PutMessageStatus.MESSAGE_ILLEGAL),
        (Message("T" * 128, b"x"), 0, PutMessageStatus.MESSAGE_ILLEGAL),
        (Message("Big", bytes(4 * 1024 * 1024 + 1)), 0, PutMessageStatus.MESSAGE_ILLEGAL),
        (Message("Props", b"x", 0, {"p": "v" * 40000}), 0, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED),
        (Message("Known", b"x"), 8, PutMessageStatus.MESSAGE_ILLEGAL),
        (Message("Known", b"x"), -1, PutMessageStatus.MESSAGE_ILLEGAL),
    ],
)
def test_bad_input_writes_nothing(tmp_path: Path, msg: Message, queue: int, status: PutMessageStatus) -> None:
    # The default limits (maxMessageSize 4 MiB among them), in commit-log files of 16 MiB rather than the default
    # 1 GiB, made whole on disk ahead of the appends: seven of those were most of the suite's disk use.
    config = MessageStoreConfig(store_path_root_dir=str(tmp_path / "s"), mapped_file_size_commit_log=16 << 20)
    with MessageStore(config) as store:
        assert store.put_message(Message("Known", b"first"), 0).ok
        before = store.get_max_phy_offset()
        r = store.put_message(msg, queue)
        assert r.status is status and r.error
        assert store.get_max_phy_offset() == before
        assert store.put_message(Message("Known", b"after"), 1).ok


def test_max_message_size_limits_a_body_and_a_batch_as_a_producer_sends_it(tmp_path: Path) -> None:
    """4.9.4's encoder checks the body, not the record (a body of exactly maxMessageSize is stored, in a record
    larger than that); a batch is held to its size as a producer encodes it (22 bytes a message, the bodies,
    the properties), not to its largest message."""
    with MessageStore(small_config(tmp_path / "s", max_message_size=400)) as store:
        assert store.put_message(Message("M", b"x" * 400, 0, {"KEYS": "k"}), 0).ok
        r = store.put_message(Message("M", b"x" * 401), 0)
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "body of 401 bytes" in r.error
        end = store.get_max_phy_offset()
        three = [store.to_message_ext(Message("M", b"y" * 50, 0, {"KEYS": f"k{i}"}), 0) for i in range(3)]
        sent = [22 + 50 + len(properties_to_string(m.properties).encode()) for m in three]
        assert sum(sent[:2]) <= 400 < sum(sent)
        r = store.put_messages(three, 0)
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and f"batch of {sum(sent)} bytes" in r.error
        assert store.get_max_phy_offset() == end
        assert store.put_messages(three[:2], 0).ok  # records of more than 400 bytes together
        # the commit log's refusals are putMessageFailedTimes (not the checks before it: a bad topic is not)
        assert not store.put_message(Message("bad topic!", b"x"), 0).ok
        assert store.put_failed_times == 2 and store.put_message_times_total == 3


def test_record_larger_than_a_file_is_refused(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path / "s")) as store:
        r = store.put_message(Message("Huge", bytes(70 * 1024)), 0)
        assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert store.get_max_phy_offset() == 0


def test_delay_and_transaction_records(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path / "s")) as store:
        r = store.put_message(Message("Later", b"d", 0, {"DELAY": "3", "TAGS": "x"}), 1)
        assert r.ok
        prepared = store.to_message_ext(Message("TxTopic", b"half", 0, {"KEYS": "tx1"}), 0,
                                        sys_flag=TRANSACTION_PREPARED_TYPE)
        p = store.put_message(prepared)
        assert p.ok and p.logics_offset == 0
        store.wait_dispatched()
        msg = store.look_message_by_offset(r.wrote_offset)
        assert msg.topic == RMQ_SYS_SCHEDULE_TOPIC and msg.queue_id == 2
        assert msg.properties["REAL_TOPIC"] == "Later" and msg.properties["REAL_QID"] == "1"
        cq = store.find_consume_queue(RMQ_SYS_SCHEDULE_TOPIC, 2)
        unit = cq.get_unit(0)
        assert unit.tags_code == msg.store_timestamp + 10_000  # level 3 = 10 s
        assert store.get_max_offset_in_queue("TxTopic", 0) == 0  # prepared: no unit
        assert [m.body for m in store.query_message("TxTopic", "tx1", 4).messages] == [b"half"]  # but indexed


def test_tag_code_in_units(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path / "s")) as store:
        store.put_message(Message("Tags", b"a", 0, {"TAGS": "TagA"}), 0)
        store.put_message(Message("Tags", b"b", 0, {}), 0)
        store.wait_dispatched()
        cq = store.find_consume_queue("Tags", 0)
        assert cq.get_unit(0).tags_code == java_string_hash("TagA")
        assert cq.get_unit(1).tags_code == 0
        raw = (tmp_path / "s" / "consumequeue" / "Tags" / "0" / ("0" * 20)).read_bytes()
        phys, _size, tags = CQ_UNIT.unpack_from(raw, 0)
        assert (phys, tags) == (0, java_string_hash("TagA"))


def test_second_process_cannot_open(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "s")
    with MessageStore(cfg):
        code = (
            "import sys\n"
            "from rocketq.store.message_store import MessageStore\n"
            "from rocketq.store.store_config import MessageStoreConfig\n"
            "from rocketq.common.errors import StoreError\n"
            f"cfg = MessageStoreConfig(store_path_root_dir={str(tmp_path / 's')!r})\n"
            "try:\n    MessageStore.open(config=cfg)\nexcept StoreError as e:\n    print(e); sys.exit(3)\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 3, proc.stderr
        assert "in use" in proc.stdout
    # Released on close.
    with MessageStore(small_config(tmp_path / "s")):
        pass


def test_read_only_open_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such store"):
        MessageStore(MessageStoreConfig(store_path_root_dir=str(tmp_path / "nope")), read_only=True).load()
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreError, match="not a RocketMQ store"):
        MessageStore(MessageStoreConfig(store_path_root_dir=str(tmp_path / "empty")), read_only=True).load()


def test_wrong_file_size_is_a_clear_error(golden_clean: Path, tmp_path: Path) -> None:
    cfg = MessageStoreConfig(store_path_root_dir=str(golden_clean / "store"))  # 1 GiB default, files are 1 MiB
    with pytest.raises(StoreError, match="mappedFileSize"):
        MessageStore(cfg, read_only=True).load()


# --- recovery ------------------------------------------------------------------------------------


def test_golden_crashed_store_recovers_every_acknowledged_message(golden_crashed: Path, tmp_path: Path) -> None:
    root = copy_store(golden_crashed / "store", tmp_path / "store")
    manifest = load_json(str(golden_crashed / "manifest.json"))
    acked = manifest["acknowledged"]
    assert len(acked) == 2227
    with MessageStore(golden_config(golden_crashed, root)) as store:
        assert not store.last_exit_ok
        assert store.recovered_offset == 2940565
        assert not (root / "commitlog" / "00000000000003145728").exists()
        for a in acked:
            res = a["result"]
            if a["sent"]["delayTimeLevel"]:
                continue  # its SendResult holds the offset in SCHEDULE_TOPIC_XXXX
            got = store.get_message("g", res["topic"], res["queueId"], res["queueOffset"], 1)
            assert got.status is GetMessageStatus.FOUND, res
            (msg,) = got.decode()
            assert msg.uniq_key == res["msgId"]
            assert msg.body == base64.b64decode(a["sent"]["body"])
        for a in acked[::50]:
            res = a["result"]
            key = a["sent"]["keys"].split()[0]
            assert res["msgId"] in {m.uniq_key for m in store.query_message(res["topic"], key, 64).messages}
        # Writable after recovery, at the right offsets.
        r = store.put_message(Message("CrashTopicA", b"after", 0, {}), 0)
        assert r.ok and r.wrote_offset == 2940565


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "s")
    with MessageStore(cfg) as store:
        results = [store.put_message(Message("Torn", bytes(300), 0, {"KEYS": f"k{i}"}), 0) for i in range(20)]
        store.wait_dispatched()
    last = results[-1]
    f = tmp_path / "s" / "commitlog" / ("0" * 20)
    data = bytearray(f.read_bytes())
    data[last.wrote_offset + 100] ^= 0xFF  # a body byte: the CRC check fails
    f.write_bytes(bytes(data))
    (tmp_path / "s" / "abort").touch()
    with MessageStore(small_config(tmp_path / "s")) as store:
        assert store.get_max_phy_offset() == last.wrote_offset
        assert store.get_max_offset_in_queue("Torn", 0) == 19
        r = store.put_message(Message("Torn", b"new", 0, {}), 0)
        assert r.wrote_offset == last.wrote_offset and r.logics_offset == 19
        assert store.wait_dispatched()
        assert store.get_message("g", "Torn", 0, 19, 1).decode()[0].body == b"new"


def test_missing_consume_queues_and_index_are_rebuilt(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path / "s")) as store:
        for i in range(50):
            store.put_message(Message("Rebuild", f"{i}".encode(), 0, {"KEYS": f"r{i}"}), i % 2)
        store.wait_dispatched()
    shutil.rmtree(tmp_path / "s" / "consumequeue")
    shutil.rmtree(tmp_path / "s" / "index")
    with MessageStore(small_config(tmp_path / "s")) as store:
        assert store.get_max_offset_in_queue("Rebuild", 1) == 25
        assert [m.body for m in store.get_message("g", "Rebuild", 1, 0, 3).decode()] == [b"1", b"3", b"5"]
        assert [m.body for m in store.query_message("Rebuild", "r17", 4).messages] == [b"17"]


def test_lagging_queue_gets_filler_units_like_rocketmq(tmp_path: Path) -> None:
    """Dispatch restarts at the largest consume-queue end (RocketMQ 4.9): a queue whose files are
    gone and whose records lie before that point is rebuilt from there, behind filler units."""
    with MessageStore(small_config(tmp_path / "s")) as store:
        for i in range(50):
            store.put_message(Message("Rebuild", f"{i}".encode(), 0, {}), i % 2)
        store.wait_dispatched()
    shutil.rmtree(tmp_path / "s" / "consumequeue" / "Rebuild" / "1")
    with MessageStore(small_config(tmp_path / "s")) as store:
        assert store.get_max_offset_in_queue("Rebuild", 1) == 25
        assert store.get_min_offset_in_queue("Rebuild", 1) == 24
        assert [m.body for m in store.get_message("g", "Rebuild", 1, 24, 3).decode()] == [b"49"]
        assert store.get_message("g", "Rebuild", 1, 0, 3).status is GetMessageStatus.OFFSET_TOO_SMALL


def test_decode_of_put_record_matches(tmp_path: Path) -> None:
    with MessageStore(small_config(tmp_path / "s")) as store:
        ext = MessageExt(topic="Direct", body=b"raw", properties={"a": "1"}, queue_id=0,
                         born_host=("10.0.0.1", 5000), store_host=("127.0.0.1", 10911), born_timestamp=123)
        r = store.put_message(ext)
        data = store.commit_log.get_message(r.wrote_offset, r.wrote_bytes)
        msg = decode_record(data, check_crc=True)
        assert msg.born_host == ("10.0.0.1", 5000) and msg.born_timestamp == 123
        assert msg.store_timestamp == r.store_timestamp and msg.commit_log_offset == r.wrote_offset


def test_handoff_dispatch_builds_what_parsing_builds(tmp_path: Path) -> None:
    """Units and index entries built from requests handed over at append time are byte for
    byte those that dispatching the records parsed back from the commit log builds."""
    with MessageStore(small_config(tmp_path / "a")) as store:
        for i in range(300):
            props = {"TAGS": f"T{i % 3}", "KEYS": f"k{i} shared"}
            if i % 50 == 7:
                props["DELAY"] = "2"
            store.put_message(Message("Hand", bytes(100 + i), 0, props), i % 3)
        store.put_messages([Message("Hand", b"b%d" % i, 0, {"KEYS": f"b{i}"}) for i in range(20)], 1)
        assert store.wait_dispatched()
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.rmtree(tmp_path / "b" / "consumequeue")
    shutil.rmtree(tmp_path / "b" / "index")
    with MessageStore(small_config(tmp_path / "b")):
        pass  # reopening dispatches every record by parsing it
    cq_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a" / "consumequeue").rglob("*") if p.is_file())
    cq_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b" / "consumequeue").rglob("*") if p.is_file())
    assert cq_a == cq_b and cq_a
    for rel in cq_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    idx_a = [p.read_bytes() for p in sorted((tmp_path / "a" / "index").iterdir())]
    idx_b = [p.read_bytes() for p in sorted((tmp_path / "b" / "index").iterdir())]
    assert len(idx_a) == len(idx_b) > 1
    for a, b in zip(idx_a, idx_b, strict=True):
        assert a == b


def test_arrival_listener_and_wait(tmp_path: Path) -> None:
    seen: list[tuple[str, int, int]] = []
    with MessageStore(small_config(tmp_path / "s")) as store:
        store.message_arriving_listener = lambda topic, qid, offsets, *_: seen.extend((topic, qid, o) for o in offsets)
        for _ in range(5):
            store.put_message(Message("Arrive", b"x", 0, {}), 1)
        assert store.wait_dispatched()
        assert seen == [("Arrive", 1, n) for n in range(1, 6)]
        assert store.dispatch_behind_bytes() == 0


def test_to_message_ext_keeps_a_producers_unique_key_and_makes_one_only_when_missing(tmp_path: Path) -> None:
    """``UNIQ_KEY`` as the producer set it; the store's generator is used only for a message without one."""
    with MessageStore(small_config(tmp_path / "s")) as store:
        made: list[str] = []
        generate = store._uniq.next_id

        def counted() -> str:
            made.append(generate())
            return made[-1]

        store._uniq.next_id = counted  # type: ignore[method-assign]
        given = store.to_message_ext(Message("U", b"x", 0, {"UNIQ_KEY": "7F0000010001ABCD", "WAIT": "true"}), 0)
        assert given.properties["UNIQ_KEY"] == "7F0000010001ABCD" and "WAIT" not in given.properties
        assert made == []
        missing = store.to_message_ext(Message("U", b"y", 0, {"TAGS": "t"}), 0)
        assert made and missing.properties["UNIQ_KEY"] == made[0]
        again = store.to_message_ext(Message("U", b"z", 0, {"TAGS": "t"}), 0)
        assert list(missing.properties) == list(again.properties) and len(made) == 2


def test_readable_end_is_asked_of_crashed_stores_only(tmp_path: Path) -> None:
    """Where recovery would end the log, for readers that walk the files (the Spark source): only for a store a
    crash left (abort file, nobody holding the lock); a live store's lock is seen without taking it."""
    from rocketq.store.read_only import readable_end
    from rocketq.store.store_lock import StoreLock

    cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path / "s"), mapped_file_size_commit_log=1 << 20)
    store = MessageStore(cfg)
    store.load()
    store.start()
    try:
        store.put_message(Message("T", b"x" * 100), 0)
        assert (tmp_path / "s" / "abort").exists() and readable_end(cfg) is None  # open here: live
        end = store.get_max_phy_offset()
    finally:
        store.close()
    assert readable_end(cfg) is None  # shut down cleanly
    (tmp_path / "s" / "abort").touch()  # as a crash leaves it
    assert readable_end(cfg) == end
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from rocketq.store.store_lock import StoreLock; StoreLock(sys.argv[1]).acquire(); "
        "print('held', flush=True); time.sleep(60)"), str(tmp_path / "s")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert StoreLock(tmp_path / "s").held_elsewhere() and readable_end(cfg) is None  # a broker runs on it
    finally:
        holder.kill()
        holder.wait()
    assert not StoreLock(tmp_path / "s").held_elsewhere() and readable_end(cfg) == end
