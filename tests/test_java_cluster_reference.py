"""The Java client 4.9.4 and mqadmin 4.9.4 against a rocketq cluster of separate processes (opt-in, marker
``reference``).

``rocketq namesrv`` and two ``rocketq broker`` processes (``broker-a`` and ``broker-b`` of cluster
``JavaCluster``, free 127.0.0.1 ports, small store files) run for the whole module. mqadmin creates topics on the
cluster (``updateTopic -c``) and must list both brokers in ``topicRoute``, ``topicStatus`` and ``clusterList``;
``tests/java/ClusterCheck.java`` (compiled against the release's client jars) then checks that a producer's sends
spread over the queues of both brokers, that a push consumer group of two members consumes each message once from
both, that orderly consumers keep the order of every queue of both, and that ``consumerProgress`` ends with diff 0
on all 8 queues (and, while the group is online, names the member that owns each queue). Last, ``broker-b`` is
stopped with SIGTERM while a producer sends and a group consumes: the producer goes on with ``broker-a`` after at
most a few failures, the name server drops ``broker-b`` from the route (RocketMQ's broker unregisters as it shuts
down), consumption from ``broker-a`` goes on, and once ``broker-b`` is back on its store the messages it had
acknowledged but nobody had consumed are consumed too.

Runs only where ``RMQ_HOME`` points at an unpacked 4.9.4 binary release; CI has no RocketMQ: skipped there.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import re
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker_support import SMALL_STORE, port_free
from reference_support import JAVA_DIR, SCRIPT, free_port, mqadmin, reference_env, run_script, script
from test_cluster_processes import RocketqProcess

pytestmark = pytest.mark.reference

CLUSTER = "JavaCluster"
BROKERS = ("broker-a", "broker-b")
#: The Java clients rebalance every second instead of every 20 s (their route polls, heartbeats and offset
#: commits are shortened by ClusterCheck itself).
CLIENT_OPTS = "-Drocketmq.client.rebalance.waitInterval=1000"


def broker_port() -> int:
    """A listen port whose VIP port (−2, for the Java client's VIP channel) and HA port (+1) are free too."""
    for _ in range(200):
        p = random.randrange(41000, 49000)
        if all(port_free(q) for q in (p, p - 2, p + 1)):
            return p
    raise RuntimeError("no free broker ports")


class Cluster:
    """The name server and the two brokers, and the Java tools that reach them."""

    def __init__(self, tmp: Path, env: dict[str, str], ns: str, processes: dict[str, RocketqProcess]) -> None:
        self.tmp, self.env, self.ns, self.processes = tmp, env, ns, processes
        self.addrs: dict[str, str] = {}

    def start_broker(self, name: str) -> None:
        proc = RocketqProcess("broker", "-c", str(self.tmp / f"{name}.conf"), cwd=self.tmp)
        self.processes[name] = proc
        line = proc.wait_for("listening on")
        self.addrs[name] = line.split(" listening on ", 1)[1].split()[0]
        proc.wait_for("registered with name server(s): " + self.ns)

    def run(self, args: list[str], timeout: float) -> tuple[int, str]:
        return run_script(self.env, args, timeout)

    def admin(self, *args: str, timeout: float = 60) -> str:
        return mqadmin(self.env, self.ns, *args, timeout=timeout)

    def route(self, topic: str) -> dict[str, object]:
        out = self.admin("topicRoute", "-t", topic)
        text = out[out.index("{"):out.rindex("}") + 1]
        route: dict[str, object] = json.loads(re.sub(r"([{,]\s*)(\d+):", r'\1"\2":', text))  # fastjson: {0:"addr"}
        return route

    def create_topic(self, topic: str) -> None:
        out = self.admin("updateTopic", "-c", CLUSTER, "-t", topic, "-r", "4", "-w", "4")
        for name in BROKERS:
            assert f"create topic to {self.addrs[name]} success" in out, out

    def java(self, section: str, topic: str, group: str, *more: str, timeout: float = 180) -> str:
        code, out = self.run(["java-client", "ClusterCheck", self.ns, section, topic, group, *more], timeout)
        assert code == 0 and f"RESULT {section} bad=0" in out, out[-4000:]
        return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("javacluster")
    env = reference_env(tmp / "rmq", RMQ_CLIENT_JAVA_OPTS=CLIENT_OPTS)
    script(env, "compile-client", str(JAVA_DIR))
    ns_port = free_port()
    ns = f"127.0.0.1:{ns_port}"
    env["NAMESRV_ADDR"] = ns
    processes: dict[str, RocketqProcess] = {}
    try:
        namesrv = RocketqProcess("namesrv", "-p", str(ns_port), "--kv-config", str(tmp / "kvConfig.json"), cwd=tmp)
        processes["namesrv"] = namesrv
        namesrv.wait_for("listening on")
        c = Cluster(tmp, env, ns, processes)
        for name in BROKERS:
            props = {"brokerClusterName": CLUSTER, "brokerName": name, "brokerId": "0",
                     "listenPort": str(broker_port()), "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
                     "namesrvAddr": ns, "storePathRootDir": str(tmp / name), "flushDiskType": "ASYNC_FLUSH",
                     "brokerRole": "ASYNC_MASTER", "autoCreateTopicEnable": "true",
                     "autoCreateSubscriptionGroup": "true", **SMALL_STORE}  # fmt: skip
            (tmp / f"{name}.conf").write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
            c.start_broker(name)
        yield c
    finally:
        for p in reversed(list(processes.values())):
            with contextlib.suppress(Exception):
                p.stop()


def test_routes_list_both_brokers(cluster: Cluster) -> None:
    out = cluster.admin("clusterList")
    for name in BROKERS:
        addr = re.escape(cluster.addrs[name])
        assert re.search(rf"^{CLUSTER}\s+{name}\s+0\s+{addr}\s+V\d+_\d+_\d+\s", out, re.M), out
    cluster.create_topic("RouteT")
    route = cluster.route("RouteT")
    assert sorted((b["brokerName"], b["cluster"], b["brokerAddrs"]) for b in route["brokerDatas"]) == [  # type: ignore[attr-defined]
        (name, CLUSTER, {"0": cluster.addrs[name]}) for name in BROKERS]  # fmt: skip
    assert sorted((q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"])
                  for q in route["queueDatas"]) == [(name, 4, 4, 6) for name in BROKERS]  # type: ignore[attr-defined]  # fmt: skip
    out = cluster.admin("topicStatus", "-t", "RouteT")
    rows = re.findall(r"^(broker-[ab])\s+(\d)\s+0\s+0\s", out, re.M)
    assert sorted(rows) == [(name, str(q)) for name in BROKERS for q in range(4)], out
    out = cluster.admin("topicClusterList", "-t", "RouteT")
    assert CLUSTER in out, out


def _sent(out: str) -> Counter[tuple[str, int]]:
    return Counter((b, int(q)) for b, q in re.findall(r"^SENT (broker-[ab]) (\d+)$", out, re.M))


def test_sends_spread_and_a_group_consumes_each_once(cluster: Cluster) -> None:
    cluster.create_topic("SpreadT")
    out = cluster.java("spread", "SpreadT", "cg_spread", "80")
    # No latency fault avoidance by default: the producer's round robin over the 8 queues of both brokers.
    assert _sent(out) == {(b, q): 10 for b in BROKERS for q in range(4)}, out[-4000:]
    consumed = re.search(r"^CONSUMED unique=(\d+) dup=(\d+) brokers=\{broker-a=(\d+), broker-b=(\d+)\} "
                         r"members=\{m1=(\d+), m2=(\d+)\}$", out, re.M)  # fmt: skip
    assert consumed and consumed.groups() == ("80", "0", "40", "40", "40", "40"), out[-4000:]
    out = cluster.admin("consumerProgress", "-g", "cg_spread")
    rows = re.findall(r"^SpreadT\s+(broker-[ab])\s+(\d)\s+(\d+)\s+(\d+)\s+(-?\d+)\s", out, re.M)
    assert sorted(rows) == [(b, str(q), "10", "10", "0") for b in BROKERS for q in range(4)], out
    assert "Diff Total: 0" in out, out


def test_orderly_consumers_keep_queue_order_on_both_brokers(cluster: Cluster) -> None:
    cluster.create_topic("OrderT")
    out = cluster.java("orderly", "OrderT", "cg_orderly", "160")
    assert _sent(out) == {(b, q): 20 for b in BROKERS for q in range(4)}, out[-4000:]
    assert re.search(r"^CONSUMED total=160 disorder=0 brokers=\{broker-a=80, broker-b=80\}$", out, re.M), out[-4000:]
    out = cluster.admin("consumerProgress", "-g", "cg_orderly")
    rows = re.findall(r"^OrderT\s+(broker-[ab])\s+(\d)\s+(\d+)\s+(\d+)\s+(-?\d+)\s", out, re.M)
    assert sorted(rows) == [(b, str(q), "20", "20", "0") for b in BROKERS for q in range(4)], out
    assert "Diff Total: 0" in out, out


class JavaSession:
    """``ClusterCheck failover`` in a JVM of its own, talked to through stdin; its stdout lines read by a thread."""

    def __init__(self, cluster: Cluster, topic: str, group: str) -> None:
        self.proc = subprocess.Popen(["bash", str(SCRIPT), "java-client", "ClusterCheck", cluster.ns, "failover", topic,
                                      group], env=cluster.env, cwd=cluster.env["RMQ_WORK"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            self.lines.put(line)

    def expect(self, prefix: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            if line.startswith(prefix):
                return line.strip()
        raise AssertionError(f"no {prefix!r} from ClusterCheck within {timeout} s:\n" + "".join(self.output)[-4000:])

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def stats(self) -> dict[str, int]:
        self.send("stats")
        return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", self.expect("STATS "))}

    def wait_stats(self, what: str, cond: Callable[[dict[str, int]], bool], timeout: float) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        while True:
            s = self.stats()
            if cond(s) or time.monotonic() > deadline:
                assert cond(s), f"{what} within {timeout} s: {s}"
                return s
            time.sleep(0.5)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)


def test_a_broker_stopped_mid_traffic(cluster: Cluster) -> None:
    cluster.create_topic("FailT")
    java = JavaSession(cluster, "FailT", "cg_fail")
    try:
        java.expect("STARTED", timeout=90)
        java.wait_stats("sends and consumption on both brokers",
                        lambda s: min(s["sentA"], s["sentB"], s["consumedA"], s["consumedB"]) >= 50, 60)  # fmt: skip
        out = cluster.admin("consumerConnection", "-g", "cg_fail")
        members = re.findall(r"^\S+@(f[12])\s+127\.0\.0\.1:\d+\s+JAVA\s+V4_9_4\s*$", out, re.M)
        assert sorted(members) == ["f1", "f2"], out
        assert "CLUSTERING" in out and "CONSUME_FROM_FIRST_OFFSET" in out, out
        # Each queue of both brokers with the member that owns it (the brokers pass the question on to them).
        out = cluster.admin("consumerProgress", "-g", "cg_fail", "-s", "true")
        rows = re.findall(r"^FailT\s+(broker-[ab])\s+(\d)\s+\d+\s+\d+\s+(\S+)\s+-?\d+\s", out, re.M)
        assert sorted((b, q) for b, q, _ip in rows) == [(b, str(q)) for b in BROKERS for q in range(4)], out
        assert "N/A" not in {ip for _b, _q, ip in rows}, out
        # Consumption pauses for a while, so that broker-b holds acknowledged messages nobody has pulled yet.
        java.send("suspend")
        java.expect("SUSPENDED")
        time.sleep(2.0)
        java.send("mark")
        pending = int(java.expect("MARKED ").split("=")[1])
        assert pending > 0
        before = java.stats()

        b = cluster.processes["broker-b"]
        stopped_at = time.monotonic()
        assert b.stop() == 0, "".join(b.output)
        java.send("resume")
        java.expect("RESUMED")
        while [d["brokerName"] for d in cluster.route("FailT")["brokerDatas"]] != ["broker-a"]:  # type: ignore[attr-defined]
            # RocketMQ's broker unregisters while it shuts down; its connection closing would do as well.
            assert time.monotonic() - stopped_at < 20, "the name server still routes to the stopped broker-b"
            time.sleep(0.5)
        out = cluster.admin("clusterList")
        assert "broker-b" not in out and "broker-a" in out, out

        # The producer is over the failures its retries could not hide, and sends to broker-a only.
        s1 = java.wait_stats("sends to broker-a again", lambda s: s["sentA"] >= before["sentA"] + 50, 30)
        time.sleep(3.0)
        s2 = java.stats()
        assert s2["sentB"] == s1["sentB"], (s1, s2)
        assert s2["sentA"] > s1["sentA"] + 50 and s2["consumedA"] > s1["consumedA"], (s1, s2)
        assert s2["failures"] <= 3 and s2["maxRun"] <= 3, "".join(java.output)[-3000:]

        cluster.start_broker("broker-b")  # same configuration, same store
        java.wait_stats("sends to and consumption from broker-b again",
                        lambda s: s["sentB"] > s2["sentB"] + 20 and s["consumedB"] > s2["consumedB"] + pending,
                        60)  # fmt: skip
        java.send("stop")
        final = java.expect("FINAL ", timeout=120)
        counts = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", final)}
        assert counts["missing"] == 0 and counts["markedLeft"] == 0 and counts["markedB"] == pending, final
        assert counts["failures"] <= 3, "".join(java.output)[-3000:]
        java.expect("RESULT failover bad=0", timeout=30)
        assert java.proc.wait(30) == 0
    finally:
        java.close()
    route = cluster.route("FailT")
    assert sorted(d["brokerName"] for d in route["brokerDatas"]) == list(BROKERS)  # type: ignore[attr-defined]
    out = cluster.admin("consumerProgress", "-g", "cg_fail")
    rows = re.findall(r"^FailT\s+(broker-[ab])\s+(\d)\s+(\d+)\s+(\d+)\s+(-?\d+)\s", out, re.M)
    assert sorted((b, q) for b, q, *_ in rows) == [(b, str(q)) for b in BROKERS for q in range(4)], out
    assert all(int(broker) == int(consumer) > 0 for _b, _q, broker, consumer, _d in rows), out
    assert "Diff Total: 0" in out, out
    tps = re.search(r"^Consume TPS: ([\d.]+)$", out, re.M)  # the last minute's pulls of the group
    assert tps and float(tps.group(1)) > 0, out
