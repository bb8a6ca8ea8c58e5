"""A name server and brokers as separate ``rocketq`` processes (spec §1, §7.2, §7.3, §11.1).

``rocketq namesrv -p 0`` and two ``rocketq broker -c broker.conf`` (generated: cluster ``TestCluster``, brokers
``broker-a`` and ``broker-b``, ``listenPort=0`` so each takes free ports on 127.0.0.1) register with each other;
``rocketq admin`` (also a process of its own) creates a topic on the whole cluster, sends with the producer's
round robin and reads everything back. Routes list both brokers, the sends spread evenly over both, and a broker
that stops unregisters. Every process is stopped with SIGTERM (killed if it does not stop in time), also when a
check fails.

A broker killed with SIGKILL under a send load and started again on its store keeps every send it acknowledged
(SYNC_FLUSH and ASYNC_FLUSH).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_support import SMALL_STORE
from rocketq.client import ClientConfig, ClientError, Producer, PullConsumer, PullStatus, SendStatus, new_message

START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


class RocketqProcess:
    """One ``python -m rocketq.cli.main ...`` process whose stdout lines are read by a thread."""

    def __init__(self, *argv: str, cwd: Path) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("NAMESRV_ADDR", None)
        self.argv = argv
        self.proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", *argv], cwd=cwd, env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float = START_TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (self.proc.poll() is not None and self.lines.empty()):
                raise AssertionError(f"{' '.join(self.argv)}: no {text!r} within {timeout} s; output:\n"
                                     + "".join(self.output))  # fmt: skip
            try:
                line = self.lines.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            if text in line:
                return line

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)
        return self.proc.returncode


@pytest.fixture()
def processes() -> Iterator[list[RocketqProcess]]:
    started: list[RocketqProcess] = []
    try:
        yield started
    finally:
        for p in reversed(started):
            with contextlib.suppress(Exception):
                p.stop()


def admin(ns: str, *argv: str, cwd: Path) -> Any:
    done = subprocess.run([sys.executable, "-m", "rocketq.cli.main", "admin", "-n", ns, *argv, "--json"], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def write_broker_conf(path: Path, name: str, ns: str, store: Path) -> Path:
    props = {"brokerClusterName": "TestCluster", "brokerName": name, "brokerId": "0", "listenPort": "0",
             "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1", "namesrvAddr": ns, "storePathRootDir": str(store),
             "flushDiskType": "ASYNC_FLUSH", "brokerRole": "ASYNC_MASTER", "autoCreateTopicEnable": "true",
             **SMALL_STORE}  # fmt: skip
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    return path


def test_two_brokers_one_cluster(tmp_path: Path, processes: list[RocketqProcess]) -> None:
    namesrv = RocketqProcess("namesrv", "-p", "0", "--kv-config", str(tmp_path / "kvConfig.json"), cwd=tmp_path)
    processes.append(namesrv)
    ns = namesrv.wait_for("listening on").strip().rsplit(" ", 1)[-1]
    brokers: dict[str, str] = {}
    for name in ("broker-a", "broker-b"):
        conf = write_broker_conf(tmp_path / f"{name}.conf", name, ns, tmp_path / name)
        proc = RocketqProcess("broker", "-c", str(conf), cwd=tmp_path)
        processes.append(proc)
        line = proc.wait_for("listening on")
        brokers[name] = line.split(" listening on ", 1)[1].split()[0]
        proc.wait_for("registered with name server(s): " + ns)

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:  # registration is done before "registered" is printed; allow for it anyway
        info = admin(ns, "clusterList", cwd=tmp_path)
        if info["clusterAddrTable"].get("TestCluster") == ["broker-a", "broker-b"] or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert info["clusterAddrTable"] == {"TestCluster": ["broker-a", "broker-b"]}
    assert {b["brokerName"]: b["addr"] for b in info["brokers"]} == brokers
    assert all(b["reachable"] for b in info["brokers"])

    created = admin(ns, "updateTopic", "-c", "TestCluster", "-t", "Spread", "-r", "4", "-w", "4", cwd=tmp_path)
    assert sorted(created["brokers"]) == sorted(brokers.values())
    route = admin(ns, "topicRoute", "-t", "Spread", cwd=tmp_path)
    assert [(b["brokerName"], b["brokerAddrs"]) for b in route["brokerDatas"]] == [
        ("broker-a", {"0": brokers["broker-a"]}), ("broker-b", {"0": brokers["broker-b"]})]  # fmt: skip
    assert [(q["brokerName"], q["writeQueueNums"]) for q in route["queueDatas"]] == [("broker-a", 4), ("broker-b", 4)]

    sent = admin(ns, "sendMessage", "-t", "Spread", "-p", "hello", "-c", "TagS", "-k", "spread",
                 "--count", "40", cwd=tmp_path)["results"]  # fmt: skip
    assert len(sent) == 40 and {r["sendStatus"] for r in sent} == {"SEND_OK"}
    per_broker = Counter(r["brokerName"] for r in sent)
    per_queue = Counter((r["brokerName"], r["queueId"]) for r in sent)
    assert per_broker == {"broker-a": 20, "broker-b": 20}  # round robin over the 8 queues of both brokers
    assert set(per_queue.values()) == {5} and len(per_queue) == 8

    deadline = time.monotonic() + 10
    while True:
        status = admin(ns, "topicStatus", "-t", "Spread", cwd=tmp_path)["queues"]
        if sum(q["maxOffset"] for q in status) == 40 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert {(q["brokerName"], q["queueId"]): q["maxOffset"] for q in status} == dict(per_queue)
    msgs = admin(ns, "consumeMessage", "-t", "Spread", "-c", "100", cwd=tmp_path)["messages"]
    assert len(msgs) == 40
    assert Counter(m["storeHost"] for m in msgs) == {brokers["broker-a"]: 20, brokers["broker-b"]: 20}
    assert {m["uniqKey"] for m in msgs} == {r["msgId"] for r in sent}
    found = admin(ns, "queryMsgByKey", "-t", "Spread", "-k", "spread", "-m", "100", cwd=tmp_path)["messages"]
    assert len(found) == 40  # the index of both brokers

    # updateBrokerConfig is written into the broker's -c file (BrokerPathConfigHelper), the rest of it kept
    before = (tmp_path / "broker-a.conf").read_text(encoding="utf-8").splitlines()
    admin(ns, "updateBrokerConfig", "-b", brokers["broker-a"], "-k", "fileReservedTime", "-v", "49", cwd=tmp_path)
    after = (tmp_path / "broker-a.conf").read_text(encoding="utf-8").splitlines()
    assert after == [x for x in before if not x.startswith("fileReservedTime=")] + ["fileReservedTime=49"]

    # A stopping broker unregisters: the route is left with the other one.
    b_proc = processes[2]
    assert b_proc.stop() == 0 and "rocketq broker stopped" in "".join(b_proc.output)
    route = admin(ns, "topicRoute", "-t", "Spread", cwd=tmp_path)
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-a"]
    for p in reversed(processes):
        assert p.stop() == 0, "".join(p.output)


def _send_until_killed(ns: str, broker: RocketqProcess, kill_after_acked: int) -> list[tuple[int, int, str]]:
    """16 senders of one producer send to KillT until the broker, killed with SIGKILL once *kill_after_acked*
    sends were acknowledged, stops answering: the (queue, queue offset, key) of every acknowledged send."""
    acked: list[tuple[int, int, str]] = []
    killed: list[bool] = []

    async def main() -> None:
        config = ClientConfig(namesrv_addr=ns, instance_name="killed")
        async with Producer("KillPG", config=config, retry_times_when_send_failed=0) as producer:
            await producer.create_topic("KillT", 4)
            numbers = iter(range(1_000_000))
            deadline = time.monotonic() + 60

            async def sender() -> None:
                while time.monotonic() < deadline:
                    key = f"key-{next(numbers)}"
                    try:
                        r = await producer.send(new_message("KillT", os.urandom(256), keys=key), timeout=3)
                    except ClientError:
                        if not killed:
                            raise  # a failure while the broker was up
                        return  # the broker is gone
                    assert r.status is SendStatus.SEND_OK, r
                    acked.append((r.message_queue.queue_id, r.queue_offset, key))
                    if len(acked) == kill_after_acked:
                        killed.append(True)
                        broker.proc.send_signal(signal.SIGKILL)

            await asyncio.gather(*(sender() for _ in range(16)))

    asyncio.run(main())
    return acked


def _stored(ns: str) -> dict[tuple[int, int], str]:
    """(queue, queue offset) -> key of every message of KillT, pulled from the broker."""
    async def main() -> dict[tuple[int, int], str]:
        found: dict[tuple[int, int], str] = {}
        async with PullConsumer("KillCG", config=ClientConfig(namesrv_addr=ns, instance_name="check")) as consumer:
            for mq in await consumer.fetch_subscribe_message_queues("KillT"):
                offset = 0
                while (r := await consumer.pull(mq, "*", offset, 32)).status is PullStatus.FOUND:
                    found.update(((mq.queue_id, m.queue_offset), m.keys) for m in r.messages)
                    offset = r.next_begin_offset
        return found

    return asyncio.run(main())


@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_a_broker_killed_under_load_keeps_every_acknowledged_send(tmp_path: Path, processes: list[RocketqProcess],
                                                                  flush: str) -> None:  # fmt: skip
    """kill -9 of a broker process while 16 senders send: after a restart on the same store, every send it
    acknowledged is there at the queue offset it answered, and every queue is dense from 0. (A process kill
    leaves the page cache: ASYNC_FLUSH keeps acknowledged sends too; only a power loss can take its tail.)"""
    namesrv = RocketqProcess("namesrv", "-p", "0", "--kv-config", str(tmp_path / "kvConfig.json"), cwd=tmp_path)
    processes.append(namesrv)
    ns = namesrv.wait_for("listening on").strip().rsplit(" ", 1)[-1]
    conf = write_broker_conf(tmp_path / "broker.conf", "broker-a", ns, tmp_path / "store")
    conf.write_text(conf.read_text(encoding="utf-8").replace("ASYNC_FLUSH", flush), encoding="utf-8")
    broker = RocketqProcess("broker", "-c", str(conf), cwd=tmp_path)
    processes.append(broker)
    broker.wait_for("registered with name server(s): " + ns)

    acked = _send_until_killed(ns, broker, kill_after_acked=600)
    assert broker.proc.wait(10) == -signal.SIGKILL
    assert len(acked) >= 600

    again = RocketqProcess("broker", "-c", str(conf), cwd=tmp_path)
    processes.append(again)
    again.wait_for("registered with name server(s): " + ns)
    stored = _stored(ns)
    assert [a for a in acked if stored.get(a[:2]) != a[2]] == []
    for q in range(4):
        offsets = sorted(o for qq, o in stored if qq == q)
        assert offsets == list(range(len(offsets))), q


def test_a_name_server_takes_its_settings_from_a_properties_file(tmp_path: Path, processes: list[RocketqProcess],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``rocketq namesrv -c FILE`` as ``mqnamesrv -c``: NamesrvConfig settings (orderMessageEnable, off by default as in
    Java, serves ORDER_TOPIC_CONFIG entries with routes), listenPort and kvConfigPath; unknown keys are named in a
    warning; a bad value is an error, not a traceback."""
    from rocketq.cli.main import main
    from rocketq.remoting.codes import RequestCode
    from rocketq.remoting.command import create_request
    from rocketq.remoting.transport import RemotingClient

    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"orderMessageEnable=true\nlistenPort=0\nkvConfigPath={tmp_path / 'kv.json'}\nnoSuchKey=1\n")
    namesrv = RocketqProcess("namesrv", "-c", str(conf), cwd=tmp_path)
    processes.append(namesrv)
    ns = namesrv.wait_for("listening on").strip().rsplit(" ", 1)[-1]
    assert any("noSuchKey" in line for line in namesrv.output)

    async def config() -> str:
        client = RemotingClient(ns)
        try:
            return ((await client.invoke(create_request(RequestCode.GET_NAMESRV_CONFIG))).body or b"").decode()
        finally:
            await client.close()

    lines = asyncio.run(config()).splitlines()
    assert "orderMessageEnable=true" in lines and f"kvConfigPath={tmp_path / 'kv.json'}" in lines
    conf.write_text("listenPort=x\n")
    assert main(["namesrv", "-c", str(conf)]) == 1
    err = capsys.readouterr().err
    assert "listenPort: not an integer" in err and "Traceback" not in err
    assert main(["namesrv", "-c", str(tmp_path / "missing.properties")]) == 1
    assert "No such file" in capsys.readouterr().err
