"""The ``rocketq`` Spark data source over store directories.

Acceptance of issue 6 (store side): the golden RocketMQ 4.9.4 store read by
the source equals the manifest's ``finalRead.messages`` (the pull-added
``MIN_OFFSET``/``MAX_OFFSET`` aside; bodies decompressed); a store written by
rocketq reads back as the codec decodes it; the options select what they say;
a corrupt record fails the read with its offset, or is skipped and counted with
``mode=PERMISSIVE``.
"""

from __future__ import annotations

import base64
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest

from conftest import GOLDEN_STORE, copy_store, load_json
from rocketq.common.message import COMPRESSED_FLAG, Message
from rocketq.store.dump import PULL_ADDED_PROPERTIES, message_to_dict
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig

pytestmark = pytest.mark.spark

CLEAN = GOLDEN_STORE / "clean"
CONF = str(CLEAN / "broker.conf")
FIELDS = ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "msgId", "uniqKey", "tags", "sysFlag",
          "flag", "bodyCRC", "reconsumeTimes", "bornTimestamp", "storeTimestamp", "bornHost", "storeHost")  # fmt: skip


def read(spark: Any, path: str | Path, **options: str) -> list[dict[str, Any]]:
    """Rows of a read, timestamps as ms, properties as a dict, ordered by commit-log offset."""
    from pyspark.sql import functions as F

    reader = spark.read.format("rocketq")
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load(str(path))
    cols = [F.unix_millis(c).alias(c) if c.endswith("Timestamp") else F.col(c) for c in df.columns]
    rows = [r.asDict(recursive=True) for r in df.select(*cols).collect()]
    return sorted(rows, key=lambda r: r["commitLogOffset"])


def expected_of(m: dict[str, Any]) -> dict[str, Any]:
    """A manifest / dump message as the source shows it."""
    e = {k: m[k] for k in FIELDS}
    e["keys"] = [k for k in m["keys"].split(" ") if k] if m.get("keys") is not None else None
    e["properties"] = {k: v for k, v in m["properties"].items() if k not in PULL_ADDED_PROPERTIES}
    e["body"] = base64.b64decode(m["body"])
    return e


def assert_rows(rows: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert [r["commitLogOffset"] for r in rows] == [e["commitLogOffset"] for e in expected]
    for r, e in zip(rows, expected, strict=True):
        for k, v in e.items():
            assert r[k] == v, (k, e["commitLogOffset"], r[k], v)


# ---------------------------------------------------------------------------------------- golden


@pytest.fixture(scope="module")
def manifest_messages() -> list[dict[str, Any]]:
    msgs = load_json(str(CLEAN / "manifest.json"))["finalRead"]["messages"]
    return sorted((expected_of(m) for m in msgs), key=lambda e: e["commitLogOffset"])


def test_golden_store_equals_manifest(spark: Any, manifest_messages: list[dict[str, Any]]) -> None:
    rows = read(spark, CLEAN / "store")
    # The manifest is what a consumer can pull: every topic of the broker's topic table. The half and op
    # messages of transactions are in the commit log too (the dump lists them), in topics nobody pulls.
    pulled = [r for r in rows if not r["topic"].startswith("RMQ_SYS_TRANS_")]
    assert len(rows) - len(pulled) == 4
    assert_rows(pulled, manifest_messages)
    compressed = [r for r in pulled if r["sysFlag"] & COMPRESSED_FLAG]
    assert len(compressed) == 2 and all(len(r["body"]) >= 16000 for r in compressed)  # inflated


def test_golden_store_read_through_consume_queues(spark: Any, manifest_messages: list[dict[str, Any]]) -> None:
    topics = sorted({m["topic"] for m in manifest_messages})
    rows = read(spark, CLEAN / "store", topics=",".join(topics), conf=CONF, maxUnitsPerPartition="100")
    assert_rows(rows, manifest_messages)


# ------------------------------------------------------------------------------ a rocketq store

TOPICS = ("TopicA", "TopicB", "OtherC")


@pytest.fixture(scope="module")
def rq_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """A store written by rocketq (small files: several commit-log and consume-queue files), and its
    messages as the codec decodes them (``rocketq store dump --json``), bodies inflated."""
    root = tmp_path_factory.mktemp("rq") / "store"
    cfg = MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=128 * 1024,
                             mapped_file_size_consume_queue=20 * 50, max_hash_slot_num=100,
                             max_index_num=400)  # fmt: skip
    with MessageStore(cfg) as store:
        for i in range(900):
            topic = TOPICS[i % 3]
            props = {"TAGS": f"Tag{i % 4}", "KEYS": f"key-{i} group-{i % 7}", "seq": str(i)}
            if i % 11 == 0:
                del props["TAGS"]
            body = (f"message {i} " * (1 + i % 40)).encode()
            sys_flag = 0
            if i % 97 == 5:
                sys_flag, body = COMPRESSED_FLAG | (3 << 8), zlib.compress(body * 50)
            born = ("::1", 40000 + i) if i % 50 == 3 else ("127.0.0.1", 40000)
            msg = store.to_message_ext(Message(topic, body, 0, props), i % 4, born_host=born,
                                       born_timestamp=1_700_000_000_000 + i, sys_flag=sys_flag)  # fmt: skip
            assert store.put_message(msg).ok
        assert store.wait_dispatched(30)
    from rocketq.cli.store_cmd import iter_messages

    with MessageStore(cfg, read_only=True) as store:
        expected = []
        for m in iter_messages(store):
            d = message_to_dict(m)
            e = expected_of(d)
            if m.sys_flag & COMPRESSED_FLAG:
                e["body"] = zlib.decompress(e["body"])
            expected.append(e)
    assert len(expected) == 900 and len(list((root / "commitlog").iterdir())) > 3
    return root, expected


def test_rocketq_store_reads_back(spark: Any, rq_store: tuple[Path, list[dict[str, Any]]]) -> None:
    root, expected = rq_store
    assert_rows(read(spark, root), expected)
    # Splitting files into many ranges changes nothing.
    assert_rows(read(spark, root, maxPartitionBytes="20000", batchRows="37"), expected)


def test_option_filters(spark: Any, rq_store: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    root, expected = rq_store

    def want(pred: Any) -> list[dict[str, Any]]:
        return [e for e in expected if pred(e)]

    assert_rows(read(spark, root, topics="TopicA,OtherC"), want(lambda e: e["topic"] in ("TopicA", "OtherC")))
    assert_rows(read(spark, root, topicPattern="Topic[AB]", queues="1,3"),
                want(lambda e: e["topic"] in ("TopicA", "TopicB") and e["queueId"] in (1, 3)))  # fmt: skip
    assert_rows(read(spark, root, topics="TopicB", startingOffsets='{"TopicB": {"0": 10, "2": "latest"}}',
                     endingOffsets='{"TopicB": {"0": 20}}'),
                want(lambda e: e["topic"] == "TopicB" and (
                    (e["queueId"] == 0 and 10 <= e["queueOffset"] < 20) or e["queueId"] in (1, 3))))  # fmt: skip
    assert read(spark, root, topics="TopicA", startingOffsets="latest") == []
    assert read(spark, root, topics="NoSuchTopic") == []
    times = sorted(e["storeTimestamp"] for e in expected)
    lo, hi = times[100], times[700]
    in_range = want(lambda e: lo <= e["storeTimestamp"] < hi)
    assert_rows(read(spark, root, startTime=str(lo), endTime=str(hi)), in_range)
    assert_rows(read(spark, root, topics=",".join(TOPICS), startTime=str(lo), endTime=str(hi)), in_range)
    # Without consume queues a topic read falls back to a filtered full scan.
    bare = tmp_path / "bare"
    shutil.copytree(root, bare, ignore=shutil.ignore_patterns("consumequeue"))
    assert_rows(read(spark, bare, topics="TopicB", queues="2"),
                want(lambda e: e["topic"] == "TopicB" and e["queueId"] == 2))  # fmt: skip
    with pytest.raises(Exception, match="need the consume queues"):
        read(spark, bare, topics="TopicB", startingOffsets='{"TopicB": {"0": 10}}')


def test_bad_options_fail_with_the_option(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="startingOffsets"):
        read(spark, CLEAN / "store", startingOffsets="{not json")
    with pytest.raises(Exception, match="no such directory"):
        read(spark, tmp_path / "missing")
    # offsets a queue does not hold, and queues the store does not have, are refused (as a broker read refuses
    # them), not read as nothing
    with pytest.raises(Exception, match=r"queue GoldenTopicB/0 holds offsets \[0, \d+\) in the store; it cannot"):
        read(spark, CLEAN / "store", topics="GoldenTopicB", startingOffsets='{"GoldenTopicB": {"0": 5000}}')
    with pytest.raises(Exception, match="ends before it starts"):
        read(spark, CLEAN / "store", topics="GoldenTopicB", startingOffsets='{"GoldenTopicB": {"0": 50}}',
             endingOffsets='{"GoldenTopicB": {"0": 10}}')  # fmt: skip
    with pytest.raises(Exception, match="queue Nope/0 is not read"):
        read(spark, CLEAN / "store", startingOffsets='{"Nope": {"0": 5}}')
    with pytest.raises(Exception, match="did you mean startingOffsets"):
        read(spark, CLEAN / "store", startingOffset="earliest")


# ----------------------------------------------------------------------------- corrupt records


def test_corrupt_record_fails_or_is_skipped(spark: Any, tmp_path: Path,
                                            manifest_messages: list[dict[str, Any]]) -> None:  # fmt: skip
    store = copy_store(CLEAN / "store", tmp_path / "store")
    victim = next(m for m in manifest_messages if m["topic"] == "GoldenTopicB" and m["queueOffset"] == 7)
    offset = victim["commitLogOffset"]
    path = store / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[offset + 4 : offset + 8] = b"\x00\xba\xdb\xad"  # not a magic code
    path.write_bytes(bytes(data))

    with pytest.raises(Exception, match=f"commit-log offset {offset}"):
        read(spark, store)
    report = tmp_path / "corrupt"
    rows = read(spark, store, mode="PERMISSIVE", corruptRecordsPath=str(report))
    assert len(rows) == 1574 - 1 and offset not in {r["commitLogOffset"] for r in rows}
    from rocketq.spark.store_scan import corrupt_report

    found = corrupt_report(report)
    assert found["count"] == 1 and found["offsets"] == [offset]
    # Through the consume queues the unit leads to the damaged record: the same outcome.
    with pytest.raises(Exception, match=f"commit-log offset {offset}"):
        read(spark, store, topics="GoldenTopicB")
    rows = read(spark, store, topics="GoldenTopicB", mode="PERMISSIVE")
    assert len(rows) == 121 and victim["msgId"] not in {r["msgId"] for r in rows}
