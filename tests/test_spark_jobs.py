"""``rocketq spark rebuild | export | stats | query``, run in process on the shared SparkSession.

The central check: a rebuild of a store whose ``consumequeue/`` and ``index/``
were deleted writes byte for byte what the store's own dispatch writes (the
golden store's files, written by RocketMQ 4.9.4; and a rocketq store's, rebuilt
by :class:`MessageStore` itself), index file names aside.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import GOLDEN_STORE, copy_store
from rocketq.cli.main import main
from rocketq.common.message import Message, MessageExt
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig

pytestmark = pytest.mark.spark

CLEAN = GOLDEN_STORE / "clean"
CONF = str(CLEAN / "broker.conf")


def run(capsys: pytest.CaptureFixture[str], *argv: str | os.PathLike[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def files_of(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def assert_same_dispatch(got: Path, want: Path) -> None:
    """Consume queues equal file by file; index files equal in creation (name) order."""
    assert files_of(got / "consumequeue") == files_of(want / "consumequeue")
    a = [p.read_bytes() for p in sorted((got / "index").iterdir())]
    b = [p.read_bytes() for p in sorted((want / "index").iterdir())]
    assert len(a) == len(b) and a == b


def test_rebuild_golden_store(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = copy_store(CLEAN / "store", tmp_path / "store")
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    (store / ".rebuild-0123456789ab" / "parts").mkdir(parents=True)  # what an interrupted rebuild left
    code, out, _ = run(capsys, "spark", "rebuild", store, "-c", CONF, "-q", "--max-partition-bytes", "300000")
    assert code == 0, out
    assert "1574 records" in out and "20 queues, 1574 units" in out and "2 files, 4818 keys" in out
    assert_same_dispatch(store, CLEAN / "store")
    assert not list(store.glob(".rebuild-*"))


def _store_config(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=64 * 1024,
                              mapped_file_size_consume_queue=20 * 40, max_hash_slot_num=16,
                              max_index_num=50)  # fmt: skip


def _write_store(root: Path, keyed: int, keyless: int) -> None:
    """*keyed* messages with one index key each (their UNIQ_KEY), then *keyless* with none."""
    with MessageStore(_store_config(root)) as store:
        for i in range(keyed):
            assert store.put_message(Message(f"T{i % 3}", b"x" * (i % 300), 0, {"TAGS": f"t{i % 5}"}), i % 2).ok
        for i in range(keyless):
            msg = MessageExt("Keyless", b"y" * 50, 0, {"TAGS": "none"}, queue_id=i % 3)
            assert store.put_message(msg).ok
        assert store.wait_dispatched(30)


def _dispatch_by_store(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("consumequeue", "index"))
    with MessageStore(_store_config(dst)):
        pass  # opening dispatches the whole commit log into new consume queues and index
    return dst


@pytest.mark.parametrize(("keyed", "keyless"), [(1000, 7), (98, 600), (98, 3), (98, 0), (0, 20)])
def test_rebuild_equals_the_stores_dispatch(spark: Any, tmp_path: Path, keyed: int, keyless: int) -> None:
    """Several commit-log, consume-queue and index files; last index file exactly full (98 keys = 2 x 49)
    with records after the last key (one more, empty, file, as Java's per-record buildIndex makes it) or none;
    no keys at all (one empty file)."""
    from rocketq.spark.rebuild import rebuild

    src = tmp_path / "src"
    _write_store(src, keyed, keyless)
    want = _dispatch_by_store(src, tmp_path / "want")
    got = tmp_path / "got"
    shutil.copytree(src, got, ignore=shutil.ignore_patterns("consumequeue", "index"))
    report = rebuild(spark, _store_config(got), max_partition_bytes=20_000)
    assert report.records == keyed + keyless
    assert_same_dispatch(got, want)
    if keyed == 98:
        assert report.index_files == (3 if keyless else 2)  # the empty third file of Java's quirk
    if keyed == 0:
        assert report.index_files == 1


def test_export_parquet_and_json(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pq"
    code, text, _ = run(capsys, "spark", "export", CLEAN / "store", out, "-q")
    assert code == 0 and "exported 1574 messages" in text
    assert (out / "topic=GoldenTopicA" / "date=2026-11-22").is_dir()
    back = spark.read.parquet(str(out))
    assert back.count() == 1574
    assert back.where("topic = 'GoldenBig'").first()["storeSize"] == 1000193
    code, _, err = run(capsys, "spark", "export", CLEAN / "store", out, "-q")
    assert code == 1 and "already exists" in err.lower()
    out = tmp_path / "js"
    code, text, _ = run(capsys, "spark", "export", CLEAN / "store", out, "--format", "json", "-q")
    assert code == 0 and "json files" in text
    lines = [json.loads(line) for p in out.rglob("*.json") for line in p.read_text().splitlines()]
    assert len(lines) == 1574 and {"msgId", "body", "keys", "properties"} <= set(lines[0])


def test_stats(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chart = tmp_path / "rate.png"
    code, out, _ = run(capsys, "spark", "stats", CLEAN / "store", "--chart", chart, "-q")
    assert code == 0
    assert "1574 messages in 11 topics, 20 queues" in out
    row = next(line for line in out.splitlines() if line.startswith("GoldenTopicA") and " all " in line)
    assert row.split()[2:4] == ["1420", "1895360"]
    assert "GoldenTopicB: top tags TagB (60), TagC (30)" in out and "shared (120)" in out
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run(capsys, "spark", "stats", CLEAN / "store", "--chart", "-", "--json", "-q")
    doc = json.loads(out)
    assert doc["bucketSeconds"] == 1 and sum(q["messages"] for q in doc["queues"]) == 1574


def test_query(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "spark", "query", CLEAN / "store", "--key", "shared", "--topic", "GoldenTopicB",
                         "--json", "-q")  # fmt: skip
    found = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(found) == 120 and err.strip() == "120 messages"
    assert all("shared" in m["keys"] for m in found)
    code, out, _ = run(capsys, "spark", "query", CLEAN / "store", "--key", "a-7", "--json", "-q")
    topics = sorted(json.loads(line)["topic"] for line in out.splitlines())
    assert topics == ["%RETRY%GoldenConsumerGroup", "GoldenTopicA", "SCHEDULE_TOPIC_XXXX"]
    first = json.loads(out.splitlines()[0])
    ts = first["storeTimestamp"]
    code, out, _ = run(capsys, "spark", "query", CLEAN / "store", "--time-range", str(ts), str(ts), "--json", "-q")
    assert code == 0 and first["msgId"] in {json.loads(line)["msgId"] for line in out.splitlines()}
    code, out, err = run(capsys, "spark", "query", CLEAN / "store", "--key", "no-such-key", "-q")
    assert code == 1 and out == ""


def test_cli_errors(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "spark", "stats", tmp_path / "nothing", "-q")
    assert code == 1 and err.startswith("rocketq: error:") and "no such directory" in err
    store = copy_store(CLEAN / "store", tmp_path / "store")
    path = store / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[272 + 4] ^= 0xFF  # the magic code of the second record
    path.write_bytes(bytes(data))
    code, _, err = run(capsys, "spark", "export", store, tmp_path / "out", "-q")
    assert code == 1 and len(err.strip().splitlines()) == 1 and "commit-log offset 272" in err
    code, _, err = run(capsys, "spark", "rebuild", store, "-c", CONF, "-q", "--max-partition-bytes", "200000")
    assert code == 1 and "commit-log offset 272" in err
    assert (store / "consumequeue").is_dir()  # a failed rebuild leaves the store as it was
    time.sleep(3)  # the failed job's other task, had it gone on, would have made its staging directory again
    assert not list(store.glob(".rebuild-*"))
    code, _, err = run(capsys, "spark", "query", store, "-q")
    assert code == 2 and "--key" in err
    # an output that is the store, or inside it, is refused before anything is deleted (overwrite deleted it)
    before = files_of(store)
    for out in (store, store / "out", tmp_path):
        code, _, err = run(capsys, "spark", "export", store, out, "--overwrite", "-q")
        assert code == 1 and "overlaps the store" in err and len(err.strip().splitlines()) == 1
    assert files_of(store) == before
    # an output that exists is refused before Spark writes, with the option that replaces it; an empty one is taken
    good = copy_store(CLEAN / "store", tmp_path / "good")
    taken = tmp_path / "taken"
    (taken / "topic=T").mkdir(parents=True)
    code, _, err = run(capsys, "spark", "export", good, taken, "-q")
    assert code == 1 and "already exists: give --overwrite" in err and len(err.strip().splitlines()) == 1
    assert [p.name for p in taken.iterdir()] == ["topic=T"]
    (taken / "topic=T").rmdir()
    code, out, err = run(capsys, "spark", "export", good, taken, "-q", "--format", "json")
    assert code == 0 and "exported 11 topic/date partitions" in out
    # a directory that is not a store (a mistyped path) is refused, and nothing is made in it
    other = tmp_path / "not-a-store"
    other.mkdir()
    code, _, err = run(capsys, "spark", "rebuild", other, "-q")
    assert code == 1 and "not a RocketMQ store (no commitlog/ directory)" in err and not any(other.iterdir())
    code, _, err = run(capsys, "spark", "stats", other, "-q")
    assert code == 1 and "not a RocketMQ store" in err
    # a store in use is refused before Spark starts, and left as it was
    with MessageStore(_store_config(tmp_path / "busy")) as busy:
        assert busy.put_message(Message("T", b"x", 0, {}), 0).ok
        code, _, err = run(capsys, "spark", "rebuild", tmp_path / "busy", "-q")
        assert code == 1 and "in use" in err


def test_rebuild_without_a_conf_says_what_it_sizes_files_by(spark: Any, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """With consumequeue/ and index/ gone, their sizes can only be RocketMQ's defaults: said, with a warning when
    the commit log shows the store was written with other settings (1 MiB files here)."""
    store = copy_store(CLEAN / "store", tmp_path / "store")
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    code, _, err = run(capsys, "spark", "rebuild", store, "-q")
    assert code == 0
    assert "mappedFileSizeCommitLog=1048576 (size of 00000000000000000000)" in err
    assert "mappedFileSizeConsumeQueue=6000000 (RocketMQ default)" in err
    assert "warning: the commit-log files are not of RocketMQ's default size, yet mappedFileSizeConsumeQueue and " \
        "index could only be taken from the defaults" in err and "Give the store's broker.conf with -c" in err
    code, _, err = run(capsys, "spark", "rebuild", store, "-c", CONF, "-q", "--max-partition-bytes", "200000")
    assert code == 0 and "warning" not in err and "mappedFileSizeConsumeQueue=6000 (" in err


def test_entry_script_and_package(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """``spark-submit .../rocketq/spark/__main__.py <job>`` is ``rocketq spark <job>``; ``package`` zips it."""
    import runpy
    import sys
    import zipfile

    monkeypatch.setattr(sys, "argv", ["__main__.py", "query", str(CLEAN / "store"), "--key", "big-0", "--json"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("rocketq.spark", run_name="__main__")
    assert exit_info.value.code == 0
    found = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [m["topic"] for m in found] == ["GoldenBig"] and found[0]["storeSize"] == 1000193
    code, out, _ = run(capsys, "spark", "package", tmp_path / "pkg.zip")
    assert code == 0 and "__main__.py" in out
    names = zipfile.ZipFile(tmp_path / "pkg.zip").namelist()
    assert "rocketq/spark/source.py" in names and "rocketq/cli/main.py" in names


def test_ctrl_c_in_a_job_cancels_it_quietly(spark: Any, caplog: pytest.LogCaptureFixture,
                                            capfd: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Ctrl-C during a job of the command line: the job cancelled, nothing logged (PySpark's own handler cancels
    through the connection the interrupted call is reading, and py4j logs both failures with tracebacks), and the
    session usable until it is stopped."""
    import signal
    import threading

    from rocketq.cli.spark_cmd import _QuietInterrupts

    interrupts = _QuietInterrupts(spark)
    timer = threading.Timer(4.0, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            spark.range(0, 10**13, numPartitions=2).where("id % 7 = 8").count()  # hours of work
        interrupts.settle()
    finally:
        timer.cancel()
        interrupts.restore()
    assert not spark.sparkContext.statusTracker().getActiveJobsIds()
    assert not [r for r in caplog.records if r.levelno >= 30], [r.getMessage() for r in caplog.records]
    assert "Traceback" not in capfd.readouterr().err
    assert signal.getsignal(signal.SIGINT) is not interrupts._on_interrupt
    assert spark.range(10).count() == 10


def test_a_failed_rebuild_waits_for_the_tasks_still_running() -> None:
    """``_wait_tasks_gone``: the staging directory goes only once no executor runs a task (a failed job's other
    tasks go on until Spark kills them, and would make parts of it again), bounded in time."""
    import types

    from rocketq.spark.rebuild import _wait_tasks_gone

    running = iter([2, 1, 0])
    asked: list[int] = []

    def infos() -> list[types.SimpleNamespace]:
        n = next(running, 0)
        asked.append(n)
        return [types.SimpleNamespace(numRunningTasks=lambda n=n: n)]

    def context(tracker: types.SimpleNamespace) -> types.SimpleNamespace:
        java = types.SimpleNamespace(statusTracker=lambda: tracker)
        return types.SimpleNamespace(_jsc=types.SimpleNamespace(sc=lambda: java))

    _wait_tasks_gone(context(types.SimpleNamespace(getExecutorInfos=infos)), timeout=10)
    assert asked == [2, 1, 0]
    stuck = types.SimpleNamespace(getExecutorInfos=lambda: [types.SimpleNamespace(numRunningTasks=lambda: 1)])
    start = time.monotonic()
    _wait_tasks_gone(context(stuck), timeout=0.3)  # a task that never ends: the wait ends anyway
    assert 0.25 <= time.monotonic() - start < 5


def _torn_crashed_store(tmp_path: Path) -> tuple[Path, Path, int]:
    """The golden crashed store with its last record torn (its second half zeroed, as a power loss can leave it):
    the store, a broker.conf for it, and where the torn record starts."""
    from rocketq.spark.commit_log_walk import walk_records

    crashed = GOLDEN_STORE / "crashed"
    store = copy_store(crashed / "store", tmp_path / "torn")
    conf = tmp_path / "torn.conf"
    conf.write_text((crashed / "broker.conf").read_text().replace("<store>", str(store)))
    for last in sorted((store / "commitlog").iterdir(), reverse=True):  # the last file with records in it
        data = last.read_bytes()
        positions = walk_records(data, 0, len(data), len(data)).positions
        if positions:
            break
    pos = positions[-1]
    size = int.from_bytes(data[pos : pos + 4], "big")
    with open(last, "r+b") as f:
        f.seek(pos + size // 2)
        f.write(bytes(size - size // 2))
    assert (store / "abort").exists()
    return store, conf, int(last.name) + pos


def test_a_crashed_store_is_read_up_to_where_recovery_ends_it(spark: Any, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A record torn by the crash ends the log, as 4.9.4's abnormal recovery ends it and ``store dump`` reads it:
    the source, stats, query and rebuild read what comes before it (they failed on it as on damage). After a
    clean shutdown the same bytes are damage, and an error."""
    store, conf, torn = _torn_crashed_store(tmp_path)
    code, out, err = run(capsys, "store", "dump", store, "-c", conf, "--json")
    dumped = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and f"after offset {torn} is not dumped" in err and dumped
    rows = spark.read.format("rocketq").option("conf", str(conf)).load(str(store))
    assert rows.count() == len(dumped)
    by_topic = spark.read.format("rocketq").option("conf", str(conf)).option("topics", "CrashTopicA,CrashTopicB")
    assert by_topic.load(str(store)).count() == sum(m["topic"] in ("CrashTopicA", "CrashTopicB") for m in dumped)
    code, out, err = run(capsys, "spark", "stats", store, "-c", conf, "-q", "--json", "--chart", tmp_path / "c.png")
    assert code == 0 and sum(q["messages"] for q in json.loads(out)["queues"]) == len(dumped), err
    code, out, err = run(capsys, "spark", "query", store, "-c", conf, "-q", "--key", dumped[-1]["uniqKey"])
    assert code == 0 and dumped[-1]["uniqKey"] in out, err
    code, out, err = run(capsys, "spark", "rebuild", store, "-c", conf, "-q")
    assert code == 0 and f"read up to offset {torn}, where recovery ends it" in out, err
    (store / "abort").unlink()  # as if shut down cleanly: the torn record is damage now
    code, out, err = run(capsys, "spark", "stats", store, "-c", conf, "-q", "--json", "--chart", tmp_path / "c.png")
    assert code == 1 and f"corrupt record at commit-log offset {torn}" in err and "give --permissive" in err
    code, out, err = run(capsys, "spark", "stats", store, "-c", conf, "-q", "--json", "--chart", tmp_path / "c.png",
                         "--permissive")  # fmt: skip
    assert code == 0 and sum(q["messages"] for q in json.loads(out)["queues"]) == len(dumped), err
    code, out, err = run(capsys, "spark", "query", store, "-c", conf, "-q", "--key", dumped[-1]["uniqKey"],
                         "--permissive")  # fmt: skip
    assert code == 0 and dumped[-1]["uniqKey"] in out, err
    code, out, err = run(capsys, "spark", "rebuild", store, "-c", conf, "-q")
    assert code == 1 and f"'rocketq store verify {store}' tells more" in err


def test_a_job_in_a_thread_without_an_active_session_uses_the_running_one(spark: Any) -> None:
    """PySpark keeps the active session per thread (an interrupted call can also leave it unset): a job run
    there used to build a session of its own over the running context, and stop that context when it ended."""
    import threading

    from pyspark.sql import SparkSession

    from rocketq.spark.session import get_session

    got: dict[str, Any] = {}

    def job() -> None:
        got["active"] = SparkSession.getActiveSession()
        got["session"], got["created"] = get_session(None)

    worker = threading.Thread(target=job)
    worker.start()
    worker.join(60)
    assert got["active"] is None  # the case this is about
    assert got["created"] is False and got["session"].sparkContext is spark.sparkContext
    assert spark.range(3).count() == 3
