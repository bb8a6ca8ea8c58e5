"""The Java client 4.9.4 and mqadmin 4.9.4 against ``rocketq start`` (opt-in, marker ``reference``).

Runs only where ``RMQ_HOME`` points at an unpacked 4.9.4 binary release (``shared/reference/README.md``):
``tests/java/ClientCompatCheck.java`` is compiled against its client jars with ``rmq-reference.sh`` and each
of its sections (producer, push consumers, orderly, broadcast, retries to the DLQ, rebalance, pull and lite
pull consumers) runs in its own JVM against one rocketq on free 127.0.0.1 ports; then mqadmin's verbs run
against the same servers while a Java producer and consumer are online. CI has no RocketMQ: skipped there.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from reference_support import JAVA_DIR, RMQ_HOME, SCRIPT, mqadmin, rocketq_start, run_script, script

pytestmark = pytest.mark.reference

#: Short delay levels, so that three deliveries of a message retried by RECONSUME_LATER take seconds.
BROKER_CONF = ("brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\n"
               "messageDelayLevel=1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s\n"
               "enablePropertyFilter=true\n")  # fmt: skip
SECTIONS = ["producer", "push", "where", "orderly", "broadcast", "retry", "rebalance", "pull", "litepull", "orderlydlq",
            "namespace", "request", "sql"]


class Servers:
    """A ``rocketq start`` and what the Java tools need to reach it."""

    def __init__(self, env: dict[str, str], namesrv: str, broker: str) -> None:
        self.env, self.namesrv, self.broker = env, namesrv, broker

    def run(self, args: list[str], timeout: float) -> tuple[int, str]:
        return run_script(self.env, args, timeout)

    def admin(self, *args: str, timeout: float = 60) -> str:
        return mqadmin(self.env, self.namesrv, *args, timeout=timeout)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    if not RMQ_HOME:
        pytest.skip("RMQ_HOME is not set: the reference RocketMQ 4.9.4 client is not available")
    tmp = tmp_path_factory.mktemp("javacompat")
    env = dict(os.environ, RMQ_HOME=RMQ_HOME, RMQ_WORK=str(tmp / "rmq"))
    (tmp / "rmq").mkdir()
    script(env, "compile-client", str(JAVA_DIR))
    conf = tmp / "broker.conf"
    conf.write_text(BROKER_CONF)
    with rocketq_start(conf, tmp / "store") as (namesrv, broker):
        yield Servers(env, namesrv, broker)


@pytest.mark.parametrize("section", SECTIONS)
def test_java_client(servers: Servers, section: str) -> None:
    code, out = servers.run(["java-client", "ClientCompatCheck", servers.namesrv, section], timeout=300)
    assert code == 0 and f"RESULT {section} bad=0" in out, out[-4000:]


@pytest.mark.timeout(900)  # some 60 mqadmin runs, a JVM each
def test_mqadmin_verbs(servers: Servers) -> None:
    holder = subprocess.Popen(["bash", str(SCRIPT), "java-client", "ClientCompatCheck", servers.namesrv, "hold900"],
                              env=servers.env, cwd=servers.env["RMQ_WORK"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        assert holder.stdout is not None
        deadline = time.monotonic() + 90
        seen = ""
        while time.monotonic() < deadline and "HOLDING" not in seen:
            line = holder.stdout.readline()
            if not line:
                break
            seen += line
        assert "HOLDING" in seen, seen[-3000:]
        _check_verbs(servers)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)


def _check_verbs(s: Servers) -> None:
    b = s.broker
    out = s.admin("clusterList")
    assert re.search(r"DefaultCluster\s+broker-a\s+0\s+" + re.escape(b), out), out
    assert "TBW102" in s.admin("topicList") and "HoldT" in s.admin("topicList")
    assert "success" in s.admin("updateTopic", "-c", "DefaultCluster", "-t", "AdmT", "-r", "4", "-w", "4")
    assert '"brokerName":"broker-a"' in s.admin("topicRoute", "-t", "AdmT")
    out = s.admin("topicStatus", "-t", "HoldT")
    assert "#Min Offset" in out and re.search(r"broker-a\s+0\s+0\s+\d+", out), out
    assert "DefaultCluster" in s.admin("topicClusterList", "-t", "HoldT")
    assert re.search(r"msgPutTotalTodayNow\s*:\s*[1-9]", s.admin("brokerStatus", "-b", b))
    assert re.search(r"brokerIP1\s+=\s+127\.0\.0\.1", s.admin("getBrokerConfig", "-b", b))
    assert "update broker config success" in s.admin("updateBrokerConfig", "-b", b, "-k", "fileReservedTime",
                                                     "-v", "49")  # fmt: skip
    assert re.search(r"fileReservedTime\s+=\s+49", s.admin("getBrokerConfig", "-b", b))
    assert "SEND_OK" in s.admin("sendMessage", "-t", "HoldT", "-p", "from-mqadmin", "-k", "admkey", "-c", "TagZ")
    out = s.admin("queryMsgByKey", "-t", "HoldT", "-k", "hold3")
    unique = re.search(r"^([0-9A-F]{32})\s", out, re.M)
    assert unique, out
    out = s.admin("queryMsgByUniqueKey", "-i", unique.group(1), "-t", "HoldT")
    assert re.search(r"Keys:\s+\[hold3\]", out), out
    out = s.admin("queryMsgByOffset", "-t", "HoldT", "-b", "broker-a", "-i", "0", "-o", "0")
    offset_id = re.search(r"OffsetID:\s+([0-9A-F]{32})", out)
    assert offset_id, out
    assert re.search(r"Topic:\s+HoldT", s.admin("queryMsgById", "-i", offset_id.group(1)))
    out = s.admin("consumerConnection", "-g", "cg_hold")
    client = re.search(r"^(\S+@c_hold)\s", out, re.M)
    assert client and "CLUSTERING" in out and "CONSUME_FROM_FIRST_OFFSET" in out, out
    out = s.admin("queryMsgByUniqueKey", "-i", unique.group(1), "-t", "HoldT", "-g", "cg_hold", "-d", client.group(1))
    assert "consumeResult=CR_SUCCESS" in out, out
    assert "MSGID:" in s.admin("consumeMessage", "-t", "HoldT", "-b", "broker-a", "-i", "0", "-o", "0", "-c", "1")
    assert "MSGID:" in s.admin("printMsg", "-t", "HoldT", "-b", "0", "-e", "99999999999999")
    assert "V4_9_4" in s.admin("producerConnection", "-g", "pg_hold", "-t", "HoldT")
    out = s.admin("consumerProgress", "-g", "cg_hold")
    assert re.search(r"HoldT\s+broker-a\s+0\s+\d+\s+\d+\s+0\s", out) and "Diff Total: 0" in out, out
    assert "cg_hold" in s.admin("consumerProgress")
    assert "Rebalance OK" in s.admin("consumerStatus", "-g", "cg_hold")
    assert re.search(r"HoldT\s+cg_hold\s+broker-a\s+0\s", s.admin("brokerConsumeStats", "-b", b))
    assert "success" in s.admin("updateSubGroup", "-c", "DefaultCluster", "-g", "sg_adm", "-r", "3")
    assert "success" in s.admin("deleteSubGroup", "-c", "DefaultCluster", "-g", "sg_adm")
    assert "success" in s.admin("updateTopic", "-c", "DefaultCluster", "-t", "DelT")
    assert "success" in s.admin("deleteTopic", "-c", "DefaultCluster", "-t", "DelT")
    _code, out = s.run(["admin", "topicRoute", "-t", "DelT", "-n", s.namesrv], 60)
    assert "No topic route info" in out, out
    assert "clone group offset success" in s.admin("cloneGroupOffset", "-s", "cg_hold", "-d", "cg_clone", "-t",
                                                   "HoldT")  # fmt: skip
    s.admin("updateSubGroup", "-c", "DefaultCluster", "-g", "cg_clone")  # brokerConsumeStats lists known groups
    out = s.admin("brokerConsumeStats", "-b", b)
    assert re.search(r"HoldT\s+cg_clone\s+broker-a\s+0\s", out), out
    out = s.admin("resetOffsetByTime", "-g", "cg_hold", "-t", "HoldT", "-s", "-1")
    assert "rollback consumer offset" in out and re.search(r"broker-a\s+0\s+\d+", out), out
    # The pair is listed; its figures follow Java's StatsItem windows (a minute of 10 s snapshots, an hour of 10 min
    # ones), so puts older than a minute show 0 until the hour's first snapshot, as on a 4.9.4 broker
    # (test_broker_admin_tools pins the windows).
    assert re.search(r"^HoldT\s+cg_hold\s+\d+\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+", s.admin("statsAll"), re.M)
    assert "producer group (pg_hold)" in s.admin("producer", "-b", b)
    for verb in ("cleanExpiredCQ", "deleteExpiredCommitLog", "cleanUnusedTopic"):
        assert "success" in s.admin(verb, "-c", "DefaultCluster")
    assert "orderMessageEnable" in s.admin("getNamesrvConfig")
    assert "success" in s.admin("updateNamesrvConfig", "-k", "clusterTest", "-v", "false")
    out = s.admin("queryCq", "-t", "HoldT", "-q", "0", "-i", "0", "-c", "2", "-b", b, "-g", "cg_hold")
    assert "ConsumeQueueData{physicOffset=" in out and '"subString":"*"' in out, out
    export = s.env["RMQ_WORK"] + "/export"
    for verb in ("exportMetadata", "exportConfigs", "exportMetrics"):
        assert "success" in s.admin(verb, "-c", "DefaultCluster", "-f", export)
    assert '"10.0.0.1":[{' in s.admin("allocateMQ", "-t", "HoldT", "-i", "10.0.0.1,10.0.0.2")
    assert "Avg RT" in s.admin("checkMsgSendRT", "-t", "HoldT", "-a", "3", "-s", "64")
    assert "sendStatus=SEND_OK" in s.admin("sendMsgStatus", "-b", "broker-a", "-c", "2", "-s", "64")
    assert "success" in s.admin("updateKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "KvT", "-v", "broker-a:4")
    assert "success" in s.admin("deleteKvConfig", "-s", "ORDER_TOPIC_CONFIG", "-k", "KvT")
    assert "success" in s.admin("updateOrderConf", "-t", "OrdT", "-m", "put", "-v", "broker-a:4")
    assert "orderConf=[broker-a:4]" in s.admin("updateOrderConf", "-t", "OrdT", "-m", "get")
    assert "success" in s.admin("updateOrderConf", "-t", "OrdT", "-m", "delete")
    assert "success" in s.admin("updateTopicPerm", "-c", "DefaultCluster", "-t", "HoldT", "-p", "6")
    assert re.search(r"groupName\s+=\s+cg_hold", s.admin("getConsumerConfig", "-g", "cg_hold"))
    assert re.search(r"broker-a\s+0\s+\d+", s.admin("skipAccumulatedMessage", "-g", "cg_hold", "-t", "HoldT"))
    assert "OK" in s.admin("wipeWritePerm", "-b", "broker-a")
    assert "OK" in s.admin("addWritePerm", "-b", "broker-a")
    code, out = s.run(["java-client", "ClientCompatCheck", s.namesrv, "trace"], timeout=120)
    traced = re.search(r"^TRACED (\S+)", out, re.M)
    assert code == 0 and traced, out[-3000:]
    out = s.admin("queryMsgTraceById", "-i", traced.group(1))
    assert re.search(r"^Pub\s+pg_trace\S*\s+\S+\s+.*success", out, re.M), out
    assert re.search(r"^Sub\s+cg_trace\S*\s+\S+\s+.*success", out, re.M), out
    _code, out = s.run(["admin", "clusterRT", "-a", "2", "-s", "64", "-i", "1", "-n", s.namesrv], 12)
    assert re.search(r"DefaultCluster\s+broker-a\s+[\d.]+\s+2\s+0", out), out


_PY_CONSUMER = """
import asyncio, sys
from rocketq.client import (ClientConfig, ConsumeConcurrentlyStatus, ConsumeFromWhere, Producer, PushConsumer,
                            new_message)
async def main():
    cfg = ClientConfig(namesrv_addr=sys.argv[1], instance_name="pyhold")
    async with Producer("PyHoldPG", config=cfg) as producer:
        await producer.create_topic("PyHoldT", 4)
        for i in range(20):
            await producer.send(new_message("PyHoldT", f"m{i}", keys=f"py{i}"))
        async def listener(msgs, context):
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        consumer = PushConsumer("PyHoldG", config=cfg, listener=listener,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer.subscribe("PyHoldT", "*")
        async with consumer:
            await asyncio.sleep(2)
            print("HOLDING", consumer.client_id, flush=True)
            await asyncio.sleep(float(sys.argv[2]))
asyncio.run(main())
"""


def test_mqadmin_consumer_status_of_a_python_consumer(servers: Servers) -> None:
    """mqadmin 4.9 asks a rocketq push consumer about itself (GET_CONSUMER_RUNNING_INFO through the broker) and
    has it consume a message again (CONSUME_MESSAGE_DIRECTLY): the tool reads the Python client's answers."""
    holder = subprocess.Popen([sys.executable, "-c", _PY_CONSUMER, servers.namesrv, "300"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()
        assert line.startswith("HOLDING"), line
        client_id = line.split()[1]
        out = servers.admin("consumerStatus", "-g", "PyHoldG")
        assert "Same subscription in the same group of consumer" in out and "Rebalance OK" in out, out
        out = servers.admin("consumerStatus", "-g", "PyHoldG", "-i", client_id)
        assert re.search(r"PROP_CONSUME_TYPE\s+:\s+CONSUME_PASSIVELY", out), out
        assert re.search(r"^PyHoldT\s+broker-a\s+0\s+5\s*$", out, re.M), out  # the committed offsets
        assert re.search(r"^PyHoldT(\s+[\d.]+){6}\s*$", out, re.M), out  # its pull and consume rates
        unique = re.search(r"^([0-9A-F]{32})\s", servers.admin("queryMsgByKey", "-t", "PyHoldT", "-k", "py3"), re.M)
        assert unique
        out = servers.admin("queryMsgByUniqueKey", "-i", unique.group(1), "-t", "PyHoldT", "-g", "PyHoldG",
                            "-d", client_id)  # fmt: skip
        assert "consumeResult=CR_SUCCESS" in out, out
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
