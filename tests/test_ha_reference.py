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
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reference_support import RMQ_HOME, SCRIPT, rocketq_start, wait_listening
from rocketq.client.admin import MQAdmin
from rocketq.client.client_config import ClientConfig
from rocketq.client.producer import Producer
from rocketq.client.pull_consumer import PullConsumer
from rocketq.client.send_result import SendStatus
from rocketq.common.message import Message
from test_client_reference import _ports

pytestmark = pytest.mark.reference

TOPIC = "HaRefTopic"
COUNT = 2000
SMALL = {"mappedFileSizeCommitLog": "1048576", "mappedFileSizeConsumeQueue": "6000", "maxHashSlotNum": "1000",
         "maxIndexNum": "4000"}  # fmt: skip


def _env(work: Path, **more: str) -> dict[str, str]:
    if not RMQ_HOME:
        pytest.skip("RMQ_HOME is not set: the reference RocketMQ 4.9.4 is not available")
    work.mkdir(parents=True, exist_ok=True)
    return dict(os.environ, RMQ_HOME=RMQ_HOME, RMQ_WORK=str(work), **more)


def _script(env: dict[str, str], *args: str, timeout: float = 180) -> str:
    proc = subprocess.run(["bash", str(SCRIPT), *args], env=env, timeout=timeout, capture_output=True, text=True)
    assert proc.returncode == 0, f"rmq-reference.sh {' '.join(args)}: exit {proc.returncode}\n{proc.stdout[-3000:]}"
    return proc.stdout


def _conf(path: Path, **props: str) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def _wait(cond: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


async def _send_all(namesrv: str) -> None:
    """Once a slave acknowledges (SLAVE_NOT_AVAILABLE until then: a Java slave first reports 5 s after it
    connects), COUNT sends to the SYNC_MASTER, each SEND_OK."""
    # The master's slaveTimeout (3 s) is the client's default send timeout: probes wait longer.
    async with Producer("HaRefPG", config=ClientConfig(namesrv_addr=namesrv), send_timeout=10) as producer:
        deadline = time.monotonic() + 60
        while (await producer.send(Message(TOPIC, b"probe", 0, {}))).status is not SendStatus.SEND_OK:
            assert time.monotonic() < deadline, "no slave acknowledged within 60 s"
            await asyncio.sleep(0.5)
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


def _bodies(messages: list[Message]) -> set[bytes]:
    return {m.body[:5] for m in messages if m.body != b"probe"}


@pytest.mark.timeout(600)
def test_rocketmq_slave_of_a_rocketq_master(tmp_path: Path) -> None:
    conf = _conf(tmp_path / "master.conf", brokerClusterName="DefaultCluster", brokerName="broker-a",
                 brokerIP1="127.0.0.1", brokerIP2="127.0.0.1", brokerRole="SYNC_MASTER", **SMALL)  # fmt: skip
    with rocketq_start(conf, tmp_path / "m") as (ns, _broker):
        env = _env(tmp_path / "rmq", NAMESRV_ADDR=ns)
        try:
            slave_port = _ports()[1]
            slave_conf = tmp_path / "slave.conf"
            _script(env, "write-broker-conf", str(slave_conf), str(tmp_path / "j"), f"listenPort={slave_port}",
                    "brokerRole=SLAVE", "brokerId=1")  # fmt: skip
            _script(env, "start-broker", str(slave_conf))
            asyncio.run(_send_all(ns))
            _wait(lambda: _same_files_ready(tmp_path / "m", tmp_path / "j"), 30, "the Java slave to catch up")
            _same_commit_log(tmp_path / "m", tmp_path / "j")
            # The Java slave's SlaveSynchronize (every 10 s) took rocketq's topics.
            topics = tmp_path / "j" / "config" / "topics.json"
            _wait(lambda: topics.exists() and TOPIC in topics.read_text(), 30, "the Java slave's topic sync")

            async def read_slave() -> set[bytes]:
                got: list[Message] = []
                async with MQAdmin(ns) as admin:
                    for q in range(4):
                        offset = 0
                        while True:
                            r = await admin.pull(f"127.0.0.1:{slave_port}", TOPIC, q, offset, 32)
                            if not r.messages:
                                break
                            got += r.messages
                            offset = r.next_begin_offset
                return _bodies(got)

            assert asyncio.run(read_slave()) == {b"%05d" % i for i in range(COUNT)}
        finally:
            subprocess.run(["bash", str(SCRIPT), "stop", "all"], env=env, check=False, timeout=180,
                           capture_output=True)  # fmt: skip


def _same_files_ready(master: Path, slave: Path) -> bool:
    with contextlib.suppress(OSError, AssertionError):
        _same_commit_log(master, slave)
        return True
    return False


@contextlib.contextmanager
def _rocketq_broker(conf: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-m", "rocketq", "broker", "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_listening(port, time.monotonic() + 30)
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.timeout(600)
def test_rocketq_slave_of_a_rocketmq_master(tmp_path: Path) -> None:
    ns_port, master_port = _ports()
    ns = f"127.0.0.1:{ns_port}"
    env = _env(tmp_path / "rmq", RMQ_NAMESRV_PORT=str(ns_port), NAMESRV_ADDR=ns)
    try:
        _script(env, "start-namesrv")
        master_conf = tmp_path / "master.conf"
        _script(env, "write-broker-conf", str(master_conf), str(tmp_path / "j"), f"listenPort={master_port}",
                "brokerRole=SYNC_MASTER")  # fmt: skip
        _script(env, "start-broker", str(master_conf))
        slave_port = _ports()[1]
        conf = _conf(tmp_path / "slave.conf", brokerClusterName="DefaultCluster", brokerName="broker-a",
                     brokerId="1", brokerRole="SLAVE", brokerIP1="127.0.0.1", brokerIP2="127.0.0.1",
                     listenPort=str(slave_port), namesrvAddr=ns, storePathRootDir=str(tmp_path / "s"),
                     **SMALL)  # fmt: skip
        with _rocketq_broker(conf, slave_port):
            asyncio.run(_send_all(ns))
            _wait(lambda: _same_files_ready(tmp_path / "j", tmp_path / "s"), 30, "the rocketq slave to catch up")
            topics = tmp_path / "s" / "config" / "topics.json"
            _wait(lambda: topics.exists() and TOPIC in topics.read_text(), 30, "the rocketq slave's topic sync")
            _script(env, "stop", "broker")  # the master goes away; its name server drops it from the routes

            async def read_through_namesrv() -> set[bytes]:
                got: list[Message] = []
                async with PullConsumer("HaRefReader", config=ClientConfig(namesrv_addr=ns)) as consumer:
                    for mq in await consumer.fetch_subscribe_message_queues(TOPIC):
                        offset = 0
                        while True:
                            r = await consumer.pull(mq, "*", offset, 32)
                            if not r.messages:
                                break
                            got += r.messages
                            offset = r.next_begin_offset
                return _bodies(got)

            assert asyncio.run(read_through_namesrv()) == {b"%05d" % i for i in range(COUNT)}
        _same_commit_log(tmp_path / "j", tmp_path / "s")
        assert _max_offset(tmp_path / "s") == _max_offset(tmp_path / "j")
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", "all"], env=env, check=False, timeout=180, capture_output=True)
