"""Master/slave replication against the real Apache RocketMQ 4.9.4 (opt-in, marker ``reference``), both ways:

- a 4.9.4 slave (``brokerRole=SLAVE``, ``brokerId=1``) of ``rocketq start`` as a SYNC_MASTER: the slave finds the
  master through rocketq's name server, rocketq's sends are answered SEND_OK only as the Java slave acknowledges
  them, the Java slave's commit log is rocketq's byte for byte, its SlaveSynchronize copies rocketq's topics, and
  it serves every message from its own consume queues;
- a rocketq slave (``rocketq broker``) of a 4.9.4 SYNC_MASTER behind a 4.9.4 name server: the same, the other way,
  and once the Java master is stopped the Python client reads everything from the rocketq slave.

Both sides use 1 MiB commit-log files (a slave's files must be the size of its master's). Runs only where
``RMQ_HOME`` points at the unpacked 4.9.4 binary release; CI has no RocketMQ.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TypeVar

import pytest

from reference_support import (
    JAVA_DIR,
    SCRIPT,
    assert_clean,
    reference_env,
    reference_ports,
    rocketmq_running,
    rocketq_process,
    rocketq_start,
    script,
    store_checker,
)
from rocketq.client.admin import MQAdmin
from rocketq.client.client_config import ClientConfig
from rocketq.client.producer import Producer
from rocketq.client.pull_consumer import PullConsumer
from rocketq.client.pull_result import PullResult
from rocketq.client.send_result import SendStatus
from rocketq.common.message import Message

pytestmark = pytest.mark.reference

_Q = TypeVar("_Q")
TOPIC = "HaRefTopic"
COUNT = 2000
SMALL = {"mappedFileSizeCommitLog": "1048576", "mappedFileSizeConsumeQueue": "6000", "maxHashSlotNum": "1000",
         "maxIndexNum": "4000"}  # fmt: skip


def _conf(path: Path, **props: str) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def _wait(cond: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


async def _wait_replicating(namesrv: str, topic: str) -> None:
    """Until a slave acknowledges: probes to the SYNC_MASTER, SLAVE_NOT_AVAILABLE until then (a Java slave first
    reports 5 s after it connects). Its slaveTimeout (3 s) is the client's default send timeout: they wait longer."""
    async with Producer("HaRefProbe", config=ClientConfig(namesrv_addr=namesrv), send_timeout=10) as producer:
        deadline = time.monotonic() + 60
        while (await producer.send(Message(topic, b"probe", 0, {}))).status is not SendStatus.SEND_OK:
            assert time.monotonic() < deadline, "no slave acknowledged within 60 s"
            await asyncio.sleep(0.5)


async def _send_all(namesrv: str) -> None:
    """Once a slave acknowledges, COUNT sends to the SYNC_MASTER, each SEND_OK."""
    await _wait_replicating(namesrv, TOPIC)
    async with Producer("HaRefPG", config=ClientConfig(namesrv_addr=namesrv)) as producer:
        for i in range(COUNT):
            r = await producer.send(Message(TOPIC, b"%05d" % i * 60, 0, {"KEYS": f"hk{i}"}))
            assert r.status is SendStatus.SEND_OK, r


def _max_offset(store: Path) -> int:
    from rocketq.store.message_store import MessageStore
    from rocketq.store.store_config import MessageStoreConfig

    cfg = MessageStoreConfig.from_properties({**SMALL, "storePathRootDir": str(store)})
    s = MessageStore(cfg, read_only=True)
    s.load()
    try:
        return s.get_max_phy_offset()
    finally:
        s.close()


def _same_commit_log(master: Path, slave: Path) -> None:
    """Every file of the slave's commit log equals the master's file of that name, byte for byte (a file one of
    them made ahead and the other not yet holds only zeros)."""
    names = sorted({p.name for side in (master, slave) for p in (side / "commitlog").iterdir()})
    assert names
    for name in names:
        a, b = master / "commitlog" / name, slave / "commitlog" / name
        if a.exists() and b.exists():
            assert a.read_bytes() == b.read_bytes(), name
        else:
            assert not (a if a.exists() else b).read_bytes().strip(b"\0"), f"{name} holds data on one side only"


async def _read_all(queues: Iterable[_Q], pull: Callable[[_Q, int], Awaitable[PullResult]]) -> set[bytes]:
    """The sends' numbers (the probes left out) of everything *pull* finds in *queues*, each read to its end."""
    got: set[bytes] = set()
    for queue in queues:
        offset = 0
        while (r := await pull(queue, offset)).messages:
            got.update(m.body[:5] for m in r.messages if m.body != b"probe")
            offset = r.next_begin_offset
    return got


@pytest.mark.timeout(600)
def test_rocketmq_slave_of_a_rocketq_master(tmp_path: Path) -> None:
    conf = _conf(tmp_path / "master.conf", brokerClusterName="DefaultCluster", brokerName="broker-a",
                 brokerIP1="127.0.0.1", brokerIP2="127.0.0.1", brokerRole="SYNC_MASTER", **SMALL)  # fmt: skip
    with rocketq_start(conf, tmp_path / "m") as (ns, _broker):
        env = reference_env(tmp_path / "rmq", NAMESRV_ADDR=ns)
        try:
            slave_port = reference_ports()[1]
            slave_conf = tmp_path / "slave.conf"
            script(env, "write-broker-conf", str(slave_conf), str(tmp_path / "j"), f"listenPort={slave_port}",
                    "brokerRole=SLAVE", "brokerId=1")  # fmt: skip
            script(env, "start-broker", str(slave_conf))
            asyncio.run(_send_all(ns))
            _wait(lambda: _same_files_ready(tmp_path / "m", tmp_path / "j"), 30, "the Java slave to catch up")
            _same_commit_log(tmp_path / "m", tmp_path / "j")
            # The Java slave's SlaveSynchronize (every 10 s) took rocketq's topics.
            topics = tmp_path / "j" / "config" / "topics.json"
            _wait(lambda: topics.exists() and TOPIC in topics.read_text(), 30, "the Java slave's topic sync")

            async def read_slave() -> set[bytes]:
                async with MQAdmin(ns) as admin:
                    return await _read_all(range(4), lambda q, offset: admin.pull(f"127.0.0.1:{slave_port}", TOPIC,
                                                                                  q, offset, 32))  # fmt: skip

            assert asyncio.run(read_slave()) == {b"%05d" % i for i in range(COUNT)}
        finally:
            subprocess.run(["bash", str(SCRIPT), "stop", "all"], env=env, check=False, timeout=180,
                           capture_output=True)  # fmt: skip


def _same_files_ready(master: Path, slave: Path) -> bool:
    with contextlib.suppress(OSError, AssertionError):
        _same_commit_log(master, slave)
        return True
    return False


@pytest.mark.timeout(600)
def test_rocketq_slave_of_a_rocketmq_master(tmp_path: Path) -> None:
    with rocketmq_running(tmp_path, "brokerRole=SYNC_MASTER") as (env, ns, _):
        slave_port = reference_ports()[1]
        conf = _conf(tmp_path / "slave.conf", brokerClusterName="DefaultCluster", brokerName="broker-a",
                     brokerId="1", brokerRole="SLAVE", brokerIP1="127.0.0.1", brokerIP2="127.0.0.1",
                     listenPort=str(slave_port), namesrvAddr=ns, storePathRootDir=str(tmp_path / "s"),
                     **SMALL)  # fmt: skip
        with rocketq_process(["broker", "-c", str(conf)], slave_port):
            asyncio.run(_send_all(ns))
            master = tmp_path / "store"
            _wait(lambda: _same_files_ready(master, tmp_path / "s"), 30, "the rocketq slave to catch up")
            topics = tmp_path / "s" / "config" / "topics.json"
            _wait(lambda: topics.exists() and TOPIC in topics.read_text(), 30, "the rocketq slave's topic sync")
            # mqadmin 4.9.4 lists both, reading the rocketq slave's runtime info.
            rows = [line.split() for line in script(env, "admin", "clusterList", "-n", ns).splitlines()]
            assert {(r[2], r[3]) for r in rows if r[:2] == ["DefaultCluster", "broker-a"]} >= {
                ("1", f"127.0.0.1:{slave_port}")}  # fmt: skip
            script(env, "stop", "broker")  # the master goes away; its name server drops it from the routes

            async def read_through_namesrv() -> set[bytes]:
                async with PullConsumer("HaRefReader", config=ClientConfig(namesrv_addr=ns)) as consumer:
                    queues = await consumer.fetch_subscribe_message_queues(TOPIC)
                    return await _read_all(queues, lambda mq, offset: consumer.pull(mq, "*", offset, 32))

            assert asyncio.run(read_through_namesrv()) == {b"%05d" % i for i in range(COUNT)}
        _same_commit_log(master, tmp_path / "s")
        assert _max_offset(tmp_path / "s") == _max_offset(master)


@pytest.mark.timeout(600)
def test_java_client_against_a_rocketq_master_and_slave(tmp_path: Path) -> None:
    """The Java client 4.9.4 against a rocketq name server, SYNC_MASTER and slave, as separate processes: its sends
    answered SEND_OK (the slave holds them), then, with the master stopped, every message pulled from the slave."""
    env = reference_env(tmp_path / "rmq")
    script(env, "compile-client", str(JAVA_DIR))
    ns_port, master_port = reference_ports()
    slave_port = reference_ports()[1]
    ns = f"127.0.0.1:{ns_port}"
    common = dict(brokerClusterName="DefaultCluster", brokerName="broker-a", brokerIP1="127.0.0.1",
                  brokerIP2="127.0.0.1", namesrvAddr=ns, **SMALL)  # fmt: skip
    master = _conf(tmp_path / "master.conf", brokerRole="SYNC_MASTER", listenPort=str(master_port),
                   storePathRootDir=str(tmp_path / "m"), **common)  # fmt: skip
    slave = _conf(tmp_path / "slave.conf", brokerRole="SLAVE", brokerId="1", listenPort=str(slave_port),
                  storePathRootDir=str(tmp_path / "s"), **common)  # fmt: skip
    with rocketq_process(["namesrv", "-p", str(ns_port)], ns_port), \
            rocketq_process(["broker", "-c", str(slave)], slave_port):  # fmt: skip
        with rocketq_process(["broker", "-c", str(master)], master_port):
            asyncio.run(_wait_replicating(ns, "HaProbeT"))
            out = script(env, "java-client", "ClientCompatCheck", ns, "hasend", timeout=300)
            assert "RESULT hasend bad=0" in out, out[-4000:]
            topics = tmp_path / "s" / "config" / "topics.json"
            _wait(lambda: topics.exists() and "HaJavaT" in topics.read_text(), 30, "the slave's topic sync")
        out = script(env, "java-client", "ClientCompatCheck", ns, "haread", timeout=300)
        assert "RESULT haread bad=0" in out, out[-4000:]
    # Both stores, judged by RocketMQ's own store code: the slave's (its consume queues and index built by its own
    # dispatch) serves the same messages at the same offsets as the master's.
    check = store_checker(tmp_path / "storecheck")
    served = []
    for store in (tmp_path / "m", tmp_path / "s"):
        report = check(store, dict(SMALL))
        assert_clean(report)
        served.append({(m["topic"], m["queueId"], m["queueOffset"]): (m["commitLogOffset"], m["uniqKey"])
                       for m in report["messages"]})  # fmt: skip
    assert served[0] == served[1] and any(t == "HaJavaT" for t, _q, _o in served[0])
