"""Real third-party clients against rocketq servers (spec: remoting-protocol §12–§14).

- ali-ons 3.12 (npm, pure JavaScript): ``tests/js/ali_ons_roundtrip.js``, a producer and a push consumer. The
  npm packages are installed into ``tests/js/node_modules`` (git-ignored) from the committed
  ``tests/js/package-lock.json`` by the ``ali_ons`` fixture, with ``npm ci``, when they are missing.
- the C++ core (PyPI ``rocketmq-python-cvs`` 2.1.0.3, a ctypes wrapper around a bundled ``librocketmq.so``;
  installed by the ``dev`` extra): ``tests/cpp_client_roundtrip.py`` in a subprocess, sync / batch / one-way
  sends and a push consumer.

Each test starts a name server and a broker in-process on free 127.0.0.1 ports (delay levels of one second,
so that retries come back quickly), runs the client as a subprocess (bounded in time, killed on timeout) and
checks that every message arrived with its tags, keys, properties and body, that tag filtering held, that a
consumer retry went through the retry topic, and what the broker stored and committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker_support import HOST, run, running_broker, settle
from js_support import node_packages
from rocketq.broker.broker_controller import BrokerController
from rocketq.client.admin import AdminError, MQAdmin
from rocketq.common.acl import SessionCredentials
from rocketq.namesrv.namesrv_controller import NamesrvController
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import create_request

TESTS = Path(__file__).resolve().parent
CLIENT_TIMEOUT_S = 60.0
COUNT = 20
RETRY_SEQ = 1


def _tag_of(i: int) -> str:
    if i % 5 == 4:
        return "TagC"
    return "TagA" if i % 2 == 0 else "TagB"


def _body_of(i: int) -> str:
    return "big-" + "x" * 8192 if i == 3 else f"body-{i}"


@pytest.fixture(scope="module")
def ali_ons() -> Path:
    """``tests/js`` with ali-ons installed (``npm ci`` from the lock file when node_modules is missing)."""
    return node_packages("ali-ons")


#: Accounts of the ACL runs of the real clients: the client's own (no admin), and the checks' (admin).
CLIENT_ACL = """\
accounts:
  - {accessKey: cppclient, secretKey: cppsecret1, defaultTopicPerm: PUB|SUB, defaultGroupPerm: PUB|SUB}
  - {accessKey: checker1, secretKey: checksecret, admin: true}
"""


def _acl_broker(tmp_path: Path) -> dict[str, str]:
    """broker.conf settings of a broker with aclEnable=true and the accounts of CLIENT_ACL."""
    (tmp_path / "acl" / "conf").mkdir(parents=True)
    (tmp_path / "acl" / "conf" / "plain_acl.yml").write_text(CLIENT_ACL, encoding="utf-8")
    return {"aclEnable": "true", "rocketmqHome": str(tmp_path / "acl")}


def _broker_conf(tmp_path: Path, mode: str) -> dict[str, str]:
    """broker.conf settings of a real-client run: none (``plain``), ACL's (``acl``), or SYNC_FLUSH's."""
    if mode == "acl":
        return _acl_broker(tmp_path)
    return {"flushDiskType": "SYNC_FLUSH"} if mode == "sync-flush" else {}


@contextlib.asynccontextmanager
async def cluster(tmp_path: Path, **broker_conf: str) -> AsyncIterator[tuple[NamesrvController, BrokerController]]:
    namesrv = NamesrvController(HOST, 0, kv_config_path=tmp_path / "kvConfig.json")
    await namesrv.start()
    try:
        async with running_broker(tmp_path / "store", namesrvAddr=namesrv.address,
                                  messageDelayLevel=" ".join(["1s"] * 18), **broker_conf) as broker:  # fmt: skip
            yield namesrv, broker
    finally:
        await namesrv.stop()


async def run_client(argv: list[str], *, env: dict[str, str] | None = None,
                     cwd: Path | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """Run a client script; its stdout is JSON lines. Killed (and the test failed) after CLIENT_TIMEOUT_S."""
    proc = await asyncio.create_subprocess_exec(*argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), CLIENT_TIMEOUT_S)
    except TimeoutError:
        pytest.fail(f"{argv[1]} did not finish within {CLIENT_TIMEOUT_S:.0f} s")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    events = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert proc.returncode == 0, err.decode()[-3000:]
    errors = [e for e in events if e["event"] == "error"]
    assert events and events[-1]["event"] == "done", err.decode()[-3000:]
    assert events[-1]["complete"], (events[-1], errors, err.decode()[-3000:])
    return events


def check_deliveries(events: list[dict[str, Any]], total: int) -> None:
    received = [e for e in events if e["event"] == "received"]
    seqs = {e["seq"] for e in received}
    assert seqs == {i for i in range(total) if _tag_of(i) != "TagC"}  # TagC filtered by the broker
    for e in received:
        i = e["seq"]
        assert (e["topic"], e["tags"], e["keys"], e["color"], e["body"]) == (
            e["topic"], _tag_of(i), f"k-{i} shared", "red" if i % 3 == 0 else "blue", _body_of(i)), e  # fmt: skip
    retried = sorted(e["reconsumeTimes"] for e in received if e["seq"] == RETRY_SEQ)
    assert retried[0] == 0 and retried[-1] >= 1  # delivered, sent back, delivered again from %RETRY%<group>


async def check_store(namesrv: NamesrvController, broker: BrokerController, topic: str, group: str,
                      total: int, credentials: SessionCredentials | None = None, *, uniq_keys: bool = True,
                      ) -> None:  # fmt: skip
    """Every message is stored with its properties (and its producer's ``UNIQ_KEY`` when the producer gives one:
    the broker makes none, as 4.9.4 makes none); the group committed past every message it was given."""
    await settle(broker)
    async with MQAdmin(namesrv.address, credentials=credentials) as admin:
        stored = await admin.consume(topic, count=1000)
        by_seq = {int(m.properties["seq"]): m for m in stored}
        assert sorted(by_seq) == list(range(total))
        for i, m in by_seq.items():
            assert (m.tags, m.key_list(), m.properties["color"], m.body.decode()) == (
                _tag_of(i), [f"k-{i}", "shared"], "red" if i % 3 == 0 else "blue", _body_of(i))  # fmt: skip
            assert (len(m.uniq_key or "") == 32) if uniq_keys else m.uniq_key is None
        # Committed offsets cover every delivered message (a filtered TagC message at a queue's end may stay
        # uncommitted: the client only moves past it on its next pull).
        addr = broker.broker_addr
        for qid in sorted({m.queue_id for m in stored}):
            r = await admin.invoke(addr, create_request(RequestCode.QUERY_CONSUMER_OFFSET, {
                "consumerGroup": group, "topic": topic, "queueId": qid}))  # fmt: skip
            assert r.code == ResponseCode.SUCCESS, r.remark
            committed = int(r.header.get_str("offset"))
            delivered = [m.queue_offset for m in stored if m.queue_id == qid and m.tags != "TagC"]
            assert committed > max(delivered, default=-1), (qid, committed, delivered)


@pytest.mark.parametrize("mode", ["plain", "acl", "sync-flush"])
def test_ali_ons_producer_and_push_consumer(tmp_path: Path, ali_ons: Path, mode: str) -> None:
    """With ``acl`` the broker has ``aclEnable=true`` and ali-ons signs with its own JavaScript signer; with
    ``sync-flush`` the broker answers each send once the group commit has it on disk."""
    acl = mode == "acl"
    broker_conf = _broker_conf(tmp_path, mode)
    checker = SessionCredentials("checker1", "checksecret") if acl else None

    async def scenario() -> None:
        async with cluster(tmp_path, **broker_conf) as (namesrv, broker):
            assert (broker.store_config.flush_disk_type == "SYNC_FLUSH") == (mode == "sync-flush")
            topic, group = "AliOnsTopic", "AliOnsGroup"
            async with MQAdmin(namesrv.address, credentials=checker) as admin:  # the route first (§13)
                await admin.create_topic(topic=topic, broker_addr=broker.broker_addr, read_queue_nums=4,
                                         write_queue_nums=4)  # fmt: skip
            cfg = {"nameSrv": namesrv.address, "topic": topic, "group": group, "count": COUNT,
                   "retrySeq": RETRY_SEQ, "timeoutMs": 40_000}  # fmt: skip
            if acl:
                cfg.update(accessKey="cppclient", secretKey="cppsecret1")
            events = await run_client(["node", str(ali_ons / "ali_ons_roundtrip.js"), json.dumps(cfg)], cwd=ali_ons)
            sent = [e for e in events if e["event"] == "sent"]
            assert len(sent) == COUNT and {e["status"] for e in sent} == {"SEND_OK"}
            assert len({e["queueId"] for e in sent}) == 4
            check_deliveries(events, COUNT)
            # ali-ons reads the offset message id of consumed messages (spec §14.4).
            by_seq = {e["seq"]: e for e in sent}
            for e in events:
                if e["event"] == "received" and e["reconsumeTimes"] == 0:
                    assert e["msgId"] == by_seq[e["seq"]]["msgId"]
            await check_store(namesrv, broker, topic, group, COUNT, checker, uniq_keys=False)  # ali-ons sets none

    run(scenario(), timeout=CLIENT_TIMEOUT_S + 30)




@pytest.mark.parametrize("mode", ["plain", "acl", "sync-flush"])
def test_cpp_client_producer_and_push_consumer(tmp_path: Path, mode: str) -> None:
    """With ``acl`` the broker has ``aclEnable=true`` and the library signs every request itself: its C++
    implementation of RocketMQ's signature, checked by rocketq's broker. With ``sync-flush`` the broker answers
    each send once the group commit has it on disk."""
    acl = mode == "acl"
    try:
        import rocketmq.client  # noqa: F401  (rocketmq-python-cvs, the dev extra)
    except (ImportError, OSError) as exc:
        pytest.fail(f"rocketmq-python-cvs does not import: {exc} (pip install -e '.[dev]')")
    broker_conf = _broker_conf(tmp_path, mode)

    async def scenario() -> None:
        async with cluster(tmp_path, **broker_conf) as (namesrv, broker):
            assert (broker.store_config.flush_disk_type == "SYNC_FLUSH") == (mode == "sync-flush")
            topic, group = "CppTopic", "CppGroup"  # not created: the C++ producer goes through TBW102
            cfg = {"nameSrv": namesrv.address, "topic": topic, "group": group, "count": COUNT,
                   "retrySeq": RETRY_SEQ, "timeoutS": 40}  # fmt: skip
            if acl:
                cfg.update(accessKey="cppclient", secretKey="cppsecret1")
            home = tmp_path / "home"  # the library logs under $HOME/logs
            home.mkdir()
            env = {**os.environ, "HOME": str(home)}
            events = await run_client([sys.executable, str(TESTS / "cpp_client_roundtrip.py"), json.dumps(cfg)],
                                      env=env)  # fmt: skip
            sent = [e for e in events if e["event"] == "sent"]
            assert [e["status"] for e in sent] == [0] * (COUNT + 1) + ["oneway"]  # SEND_OK for syncs and the batch
            total = COUNT + 4
            check_deliveries(events, total)
            cfg_topic = broker.topic_config_manager.select_topic_config(topic)
            assert cfg_topic is not None and cfg_topic.write_queue_nums == 4  # created from TBW102
            checker = SessionCredentials("checker1", "checksecret") if acl else None
            await check_store(namesrv, broker, topic, group, total, checker)
            if acl:  # and the broker did check: no signature, no answer
                async with MQAdmin(namesrv.address) as admin:
                    with pytest.raises(AdminError, match="No accessKey is configured"):
                        await admin.consume(topic, count=1)

    run(scenario(), timeout=CLIENT_TIMEOUT_S + 30)

