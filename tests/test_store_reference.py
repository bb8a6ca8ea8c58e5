"""Stores written by rocketq, judged by Apache RocketMQ 4.9.4's own store code (opt-in, marker ``reference``).

Runs only where ``RMQ_HOME`` points at an unpacked 4.9.4 binary release (``shared/reference/README.md``).
``StoreCheck`` (beside the reference script) loads a store offline with RocketMQ's ``DefaultMessageStore``:
normal or abnormal recovery, dispatch of what the consume queues lack, a CRC-checked walk of the commit log,
every consume-queue unit and every message read through ``getMessage``, every key looked up through the
index, and ``config/*.json`` parsed by the broker's own managers. It is compiled with
``tests/java/storecheck/GoldenClient.java``, the small helpers it expects beside it (rocketq's own code), by
``reference_support.store_checker`` (the HA reference test judges a master's and its slave's stores with it too).

The stores judged:

- written through ``MessageStore`` under ASYNC_FLUSH, SYNC_FLUSH and ``transientStorePoolEnable``, with files
  small enough to roll many times: tags, several keys, user properties, empty and compressed bodies, IPv6
  hosts, batches, transaction commit records and a prepared one, closed cleanly;
- left by a writer process killed with SIGKILL (abnormal recovery, by RocketMQ's code), and what a power loss
  would leave of a SYNC_FLUSH store: every acknowledged message is served at its offsets;
- after retention deleted the head of the commit log and the consume queues under it;
- written by ``rocketq start`` under a client's load (sends, batches, delays, transactions, retries), with its
  config files.

CI has no RocketMQ: skipped there.
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from durability_writer import store_config
from reference_support import StoreChecker, assert_clean, rocketq_start, store_checker
from rocketq.common import json_compat
from rocketq.common.message import (
    COMPRESSED_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    Message,
    MessageExt,
)
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig
from test_durability import read_history, run_writer

pytestmark = pytest.mark.reference

#: The sizes StoreCheck must be told (RocketMQ cannot tell them from the files), as broker.conf keys.
SMALL = {"mappedFileSizeCommitLog": 64 * 1024, "mappedFileSizeConsumeQueue": 30 * 20, "maxHashSlotNum": 100,
         "maxIndexNum": 400}  # fmt: skip


@pytest.fixture(scope="module")
def store_check(tmp_path_factory: pytest.TempPathFactory) -> StoreChecker:
    """StoreCheck, compiled once for this module (``reference_support.store_checker``)."""
    return store_checker(tmp_path_factory.mktemp("storecheck"))


def _config(root: Path, mode: str) -> MessageStoreConfig:
    kw: dict[str, Any] = {"flush_disk_type": SYNC_FLUSH if mode == "sync" else ASYNC_FLUSH}
    if mode == "pool":
        kw |= {"transient_store_pool_enable": True, "transient_store_pool_size": 3, "commit_interval_commit_log": 20}
    return MessageStoreConfig(store_path_root_dir=str(root),
                              mapped_file_size_commit_log=SMALL["mappedFileSizeCommitLog"],
                              mapped_file_size_consume_queue=SMALL["mappedFileSizeConsumeQueue"],
                              max_hash_slot_num=SMALL["maxHashSlotNum"], max_index_num=SMALL["maxIndexNum"],
                              **kw)  # fmt: skip


def _write_mixed(store: MessageStore, n: int, seed: int) -> tuple[list[MessageExt], int]:
    """Put *n* varied records (and a few batches); the records that RocketMQ dispatches, and the count of those it
    does not (transaction prepared records: in the commit log, in no consume queue)."""
    rng = random.Random(seed)
    written: list[MessageExt] = []
    prepared = 0
    for i in range(n):
        topic, queues = ("RefA", 4) if i % 3 else ("RefB", 2)
        props = {"p": f"v{i}", "unicode": "größe-✓"}
        if i % 5:
            props["TAGS"] = f"Tag{i % 3}"
        if i % 4:
            props["KEYS"] = f"k-{i} second-{i}"
        raw = rng.randbytes(rng.choice((0, 1, 100, 1000, 3000)))
        body, sys_flag = raw, 0
        if i % 13 == 0 and raw:
            body, sys_flag = zlib.compress(raw), COMPRESSED_FLAG
        born = ("2001:db8::7", 40000 + i) if i % 11 == 0 else ("10.1.2.3", 50000 + i)
        if i % 29 == 0:  # a transaction: its commit record points at the prepared one, as END_TRANSACTION writes
            half = store.to_message_ext(Message(topic, b"half", 0, dict(props)), i % queues, born_host=born,
                                        sys_flag=TRANSACTION_PREPARED_TYPE)  # fmt: skip
            r = store.put_message(half)
            assert r.ok, r
            prepared += 1
            msg = store.to_message_ext(Message(topic, body, 0, props), i % queues, born_host=born,
                                       sys_flag=sys_flag | TRANSACTION_COMMIT_TYPE)  # fmt: skip
            msg.prepared_transaction_offset = r.wrote_offset
        else:
            msg = store.to_message_ext(Message(topic, body, 0, props), i % queues, born_host=born, sys_flag=sys_flag)
        if i % 50 == 49:  # a batch of one queue, as a batch send stores it
            batch = [store.to_message_ext(Message(topic, rng.randbytes(200), 0, {"KEYS": f"b-{i}-{j}", "TAGS": "B"}),
                                          i % queues, born_host=born) for j in range(7)]  # fmt: skip
            r = store.put_messages(batch, i % queues)
            assert r.ok, r
            written += batch
        r = store.put_message(msg)
        assert r.ok, r
        written.append(msg)
    return written, prepared


def _by_offset(report: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {m["commitLogOffset"]: m for m in report["messages"]}


def _host(java: str) -> tuple[str, int]:
    """A host as StoreCheck prints it ("ip:port", "[ip6]:port": Java's uncompressed form) as rocketq keeps it."""
    ip, port = java.rsplit(":", 1)
    return str(ipaddress.ip_address(ip.strip("[]"))), int(port)


@pytest.mark.parametrize("mode", ["async", "sync", "pool"])
def test_records_written_through_the_store_are_served_by_rocketmq(tmp_path: Path, store_check: StoreChecker,
                                                                  mode: str) -> None:  # fmt: skip
    root = tmp_path / "store"
    with MessageStore(_config(root, mode)) as store:
        written, prepared = _write_mixed(store, 700, seed=len(mode))
        assert store.wait_dispatched()
        files = len(store.commit_log.mapped_file_queue.files)
    assert files > 5
    report = store_check(root, SMALL)
    assert_clean(report)
    assert report["recovery"].startswith("normal") and report["dispatch"]["dispatchedBytes"] == 0
    assert report["commitLog"]["messages"] == len(written) + prepared
    assert report["messageCount"] == len(written)
    served = _by_offset(report)
    for m in written:
        got = served[m.commit_log_offset]
        where = f"{m.topic}/{m.queue_id}@{m.queue_offset}"
        assert (got["topic"], got["queueId"], got["queueOffset"]) == (m.topic, m.queue_id, m.queue_offset), where
        assert got["storeSize"] == m.store_size and got["sysFlag"] == m.sys_flag, where
        assert got["properties"] == m.properties, where
        assert got["uniqKey"] == m.uniq_key and got["keys"] == m.keys and got["tags"] == m.tags, where
        assert _host(got["bornHost"]) == m.born_host and got["bornTimestamp"] == m.born_timestamp, where
        assert got["storeTimestamp"] == m.store_timestamp, where
        assert got["preparedTransactionOffset"] == m.prepared_transaction_offset, where
        assert got["storedBodyCrc32"] == zlib.crc32(m.body) and got["bodyCrcOk"], where


@pytest.mark.parametrize(("flush", "kill_after"), [(ASYNC_FLUSH, 0.7), (ASYNC_FLUSH, 1.6), (SYNC_FLUSH, 0.9),
                                                   (SYNC_FLUSH, 1.4)])  # fmt: skip
def test_a_store_left_by_a_killed_writer_recovers_in_rocketmq_with_every_acknowledged_message(
        tmp_path: Path, store_check: StoreChecker, flush: str, kill_after: float) -> None:  # fmt: skip
    """RocketMQ's abnormal recovery of a store whose writer was killed (the page cache survives), and, under
    SYNC_FLUSH, of what a power loss would leave (only what was synced): every acknowledged put is served at the
    queue and commit-log offsets its answer gave."""
    run = run_writer(tmp_path / "run", flush, kill_after=kill_after, threads=4, seed=int(kill_after * 10))
    acked = read_history(run.history)
    assert len(acked) > 50, run.stderr[-500:]
    conf = {"mappedFileSizeCommitLog": 128 * 1024, "mappedFileSizeConsumeQueue": 600, "maxHashSlotNum": 200,
            "maxIndexNum": 800}  # fmt: skip
    # The shadow holds only what was synced; the abort file, made at start, is on disk too after a power loss.
    (run.shadow / "abort").touch()
    for root in ([run.store, run.shadow] if flush == SYNC_FLUSH else [run.store]):
        report = store_check(root, conf)
        assert_clean(report)
        assert report["recovery"].startswith("abnormal"), root
        served = {(m["queueId"], m["queueOffset"]): m for m in report["messages"] if m["topic"] == "Dur"}
        lost = [a for a in acked if served.get((a.queue, a.queue_offset), {}).get("commitLogOffset") != a.phys]
        assert not lost, f"{root.name}: {len(lost)} of {len(acked)} acknowledged puts not served, first {lost[:3]}"
        for a in acked:
            assert served[(a.queue, a.queue_offset)]["keys"] == f"id-{a.tid}-{a.seq}"
        # rocketq's own recovery of the same store, closed cleanly: RocketMQ's normal recovery then serves the
        # same messages at the same offsets (nothing truncated or rebuilt differently).
        with MessageStore(store_config(root, flush)) as store:
            assert store.wait_dispatched(30)
        again = store_check(root, conf)
        assert_clean(again)
        assert again["recovery"].startswith("normal"), root
        assert {(m["queueId"], m["queueOffset"]): m["commitLogOffset"] for m in again["messages"]} == \
            {k: m["commitLogOffset"] for k, m in served.items()}  # fmt: skip


@pytest.mark.parametrize("rebuilt", [False, True], ids=["dispatched", "spark-rebuilt"])
def test_a_store_after_retention_loads_in_rocketmq(tmp_path: Path, store_check: StoreChecker, rebuilt: bool) -> None:
    """The clean services deleted the head of the commit log, and the consume-queue and index files under it:
    RocketMQ loads what is left, and serves every message from the new minimum offsets on. ``spark-rebuilt``: the
    consume queues and index are then deleted and made anew by ``rocketq spark rebuild`` (local Spark, in a
    process of its own), whose queues start with filler units up to the first message left."""
    root = tmp_path / "store"
    cfg = _config(root, "async")
    cfg.file_reserved_time = 0
    with MessageStore(cfg) as store:
        _write_mixed(store, 900, seed=3)
        assert store.wait_dispatched()
        cleaner = store.services.clean  # type: ignore[union-attr]
        cleaner.commit_log_cleaner.execute_delete_files_manually()
        cleaner.commit_log_cleaner.run()
        cleaner.consume_queue_cleaner.delete_expired_files(sleep=lambda _s: None)
        min_offset = store.commit_log.get_min_offset()
        assert min_offset > 0
        kept = _served_by_rocketq(store)
    if rebuilt:
        shutil.rmtree(root / "consumequeue")
        shutil.rmtree(root / "index")
        conf = tmp_path / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in SMALL.items()))
        proc = subprocess.run([sys.executable, "-m", "rocketq", "spark", "rebuild", str(root), "-c", str(conf), "-q"],
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = store_check(root, SMALL)
    assert_clean(report)
    assert report["dispatch"]["dispatchedBytes"] == 0  # the queues and index were whole: RocketMQ built nothing
    assert report["commitLog"]["minOffset"] == min_offset
    assert sorted((m["topic"], m["queueId"], m["queueOffset"]) for m in report["messages"]) == sorted(kept)


def _served_by_rocketq(store: MessageStore) -> list[tuple[str, int, int]]:
    """(topic, queue, offset) of every message rocketq serves from the user topics' queues, from each queue's
    minimum offset on."""
    out: list[tuple[str, int, int]] = []
    for topic, queues in (("RefA", 4), ("RefB", 2)):
        for q in range(queues):
            offset = store.get_min_offset_in_queue(topic, q)
            while True:
                r = store.get_message("g", topic, q, offset, 64)
                if not r.messages:
                    break
                out += [(topic, q, o) for o in r.queue_offsets]
                offset = r.next_begin_offset
    return out


def test_a_store_written_by_the_broker_loads_in_rocketmq_with_its_configs(tmp_path: Path,
                                                                          store_check: StoreChecker) -> None:
    """``rocketq start`` under a client's load: sends, a batch, delayed messages, transactions committed and
    rolled back, a consumer whose failures go to its retry topic; then stopped. RocketMQ serves every message,
    and its managers read the topics, subscription groups, consumer and delay offsets the broker wrote."""
    from rocketq.client import (
        ClientConfig,
        ConsumeConcurrentlyStatus,
        ConsumeFromWhere,
        Producer,
        PushConsumer,
        new_message,
    )
    from rocketq.client.transaction_producer import LocalTransactionState, TransactionProducer

    # Small files. The delay levels are RocketMQ's defaults, the ones StoreCheck computes the delayed units' tags
    # codes (their delivery times) with; sends and retries use level 1 (1 s).
    store_conf = {"mappedFileSizeCommitLog": 262144, "mappedFileSizeConsumeQueue": 600, "maxHashSlotNum": 100,
                  "maxIndexNum": 400}  # fmt: skip
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\nbrokerIP1=127.0.0.1\n"
                    + "".join(f"{k}={v}\n" for k, v in store_conf.items()))  # fmt: skip
    sent: list[str] = []
    received: set[str] = set()
    failed_once: set[str] = set()

    async def load(ns: str) -> None:
        cfg = ClientConfig(namesrv_addr=ns, instance_name="storecheck")

        async def listener(msgs: list[MessageExt], context: Any) -> ConsumeConcurrentlyStatus:
            for m in msgs:
                uid = m.properties.get("UNIQ_KEY", "")
                if m.body.endswith(b"7") and uid not in failed_once:
                    failed_once.add(uid)
                    context.delay_level_when_next_consume = 1
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
            received.update(m.properties.get("UNIQ_KEY", "") for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        def execute(msg: Any, _arg: Any) -> LocalTransactionState:
            return LocalTransactionState.ROLLBACK_MESSAGE if msg.body.endswith(b"3") else \
                LocalTransactionState.COMMIT_MESSAGE  # fmt: skip

        async with Producer("RefPG", config=cfg) as producer, \
                TransactionProducer("RefTX", config=cfg, execute=execute,
                                    check=lambda _m: LocalTransactionState.COMMIT_MESSAGE) as tx:  # fmt: skip
            await producer.create_topic("RefT", 4)
            await asyncio.sleep(0.5)
            consumer = PushConsumer("RefCG", config=cfg, listener=listener,
                                    consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
            consumer.subscribe("RefT", "*")
            async with consumer:
                for i in range(300):
                    r = await producer.send(new_message("RefT", f"sync-{i}".encode() * 20, tags=f"T{i % 3}",
                                                        keys=f"key-{i}"))  # fmt: skip
                    sent.append(r.msg_id)
                for b in range(5):
                    rs = await producer.send_batch([new_message("RefT", f"batch-{b}-{j}".encode(), keys=f"bk-{b}-{j}")
                                                    for j in range(16)])  # fmt: skip
                    sent.extend(rs.msg_id.split(","))
                for i in range(20):
                    r = await producer.send(new_message("RefT", f"delayed-{i}".encode(), delay_level=1))
                    sent.append(r.msg_id)
                for i in range(20):
                    r = await tx.send_message_in_transaction(new_message("RefT", f"tx-{i}".encode()))
                    if not r.msg_id or f"tx-{i}".endswith("3"):
                        continue
                    sent.append(r.msg_id)
                deadline = asyncio.get_running_loop().time() + 60
                while not set(sent) <= received and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.2)
                await asyncio.sleep(1.5)  # the consumer's offsets reach the broker

    with rocketq_start(conf, tmp_path / "store") as (ns, _broker):
        asyncio.run(load(ns))
    assert set(sent) <= received, f"{len(set(sent) - received)} of {len(sent)} sends not consumed"
    assert failed_once
    report = store_check(tmp_path / "store", store_conf)
    assert_clean(report)
    by_topic: dict[str, int] = {}
    for m in report["messages"]:
        by_topic[m["topic"]] = by_topic.get(m["topic"], 0) + 1
    assert {m["uniqKey"] for m in report["messages"] if m["topic"] == "RefT"} >= set(sent)
    assert by_topic.get("SCHEDULE_TOPIC_XXXX", 0) >= 20 + len(failed_once)
    assert by_topic.get("RMQ_SYS_TRANS_HALF_TOPIC", 0) >= 20 and by_topic.get("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) >= 20
    assert by_topic.get("%RETRY%RefCG", 0) >= len(failed_once)
    config = report["config"]
    assert all(config[name]["exists"] for name in ("topics.json", "consumerOffset.json", "subscriptionGroup.json",
                                                    "delayOffset.json"))  # fmt: skip
    topics = {t["topic"]: t for t in config["topics.json"]["topics"]}
    assert topics["RefT"]["writeQueueNums"] == 4 and "%RETRY%RefCG" in topics
    assert "RefCG" in config["subscriptionGroup.json"]["groups"]
    offsets = config["consumerOffset.json"]["offsetTable"]["RefT@RefCG"]
    max_offsets = {q["queueId"]: q["maxOffset"] for q in report["queues"] if q["topic"] == "RefT"}
    assert {int(k): v for k, v in offsets.items()} == max_offsets
    # What ScheduleMessageService loaded, in fastjson's dialect ({1:59}): every level used has its progress.
    delay = json_compat.loads(config["delayOffset.json"]["loadedByScheduleMessageService"])["offsetTable"]
    assert delay.get(1, 0) >= 20 + len(failed_once), config["delayOffset.json"]
