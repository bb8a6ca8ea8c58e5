"""The broker process: broker.conf, registration with name servers, persistence across restarts, both listeners,
and the ``rocketq start`` / ``rocketq broker`` commands (spec §1, §6.15, §7.2, §11.1)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker_support import HOST, broker_properties, client_of, heartbeat, run, running_broker, send_v2
from rocketq.broker.broker_config import BrokerConfigError, broker_config_from_properties, load_broker_config
from rocketq.broker.broker_controller import BrokerController
from rocketq.broker.broker_outer_api import BrokerOuterAPI
from rocketq.common import json_compat
from rocketq.common.javacompat import crc32_masked
from rocketq.namesrv.namesrv_controller import NamesrvController
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import create_request
from rocketq.remoting.transport import RemotingClient
from rocketq.store.config_json import TopicConfig
from rocketq.store.store_config import parse_properties, update_properties_text


def test_settings_the_broker_does_not_use_are_named_with_what_they_nearly_spell(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """RocketMQ ignores keys it does not know without a word; rocketq ignores them too, but says which, so that
    a misspelt or older name (4.x before 4.4 spelt ``maped``) does not go unseen."""
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\ndeleteWhen=04\n"
                    "fileReservedTime=48\nbrokerRole=ASYNC_MASTER\nflushDiskType=ASYNC_FLUSH\nbrokerIp1=127.0.0.1\n"
                    "mappedFileSizeConsumeQueue=6000\nenableDLegerCommitLog=false\n")  # fmt: skip
    with caplog.at_level("WARNING", logger="rocketq.broker.broker_config"):
        load_broker_config(conf)
    # RocketMQ's stock broker.conf keys, an earlier rocketq name, and a setting read only to refuse it when true
    assert caplog.records == []
    conf.write_text("brokerName=broker-a\nmapedFileSizeCommitLog=1048576\nsendMessageThreadPoolNums=8\n")
    with caplog.at_level("WARNING", logger="rocketq.broker.broker_config"):
        broker, store = load_broker_config(conf)
    assert store.mapped_file_size_commit_log == 1 << 30  # ignored, as RocketMQ ignores it
    # a thread pool of Java's: kept (getBrokerConfig lists it) but not acted on, and said so
    assert broker.java_only["sendMessageThreadPoolNums"] == "8"
    assert [r.getMessage() for r in caplog.records] == [
        f"{conf}: unknown settings, ignored: mapedFileSizeCommitLog (mappedFileSizeCommitLog?)",
        f"{conf}: RocketMQ settings rocketq has no use for (kept for getBrokerConfig, not acted on): "
        "sendMessageThreadPoolNums"]
    conf.write_text("brokerName=broker-a\nsendMessageThreadPoolNums=eight\n")
    caplog.clear()
    with caplog.at_level("WARNING", logger="rocketq.broker.broker_config"):
        broker, _ = load_broker_config(conf)  # a value of a setting rocketq does not act on: said, not fatal
    assert broker.java_only["sendMessageThreadPoolNums"] == str(min(os.cpu_count() or 1, 4))
    assert any("sendMessageThreadPoolNums: expected an integer, got 'eight'; kept at" in r.getMessage()
               for r in caplog.records)  # fmt: skip


def test_a_name_server_address_that_is_not_host_port_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    for bad in ("garbage", "127.0.0.1:9876;127.0.0.1:99999"):
        conf.write_text(f"brokerName=b\nnamesrvAddr={bad}\n")
        with pytest.raises(BrokerConfigError, match=r"namesrvAddr: '[^']+' is not host:port"):
            load_broker_config(conf)
    conf.write_text("brokerName=b\n")
    with pytest.raises(BrokerConfigError, match="namesrvAddr: 'x:y' is not host:port"):
        load_broker_config(conf, namesrv_addr="x:y")  # as -n gives it
    assert load_broker_config(conf, namesrv_addr="127.0.0.1:9876;[::1]:9877")[0].namesrv_addrs() == [
        "127.0.0.1:9876", "[::1]:9877"]


def test_update_properties_text_replaces_a_setting_where_it_is_and_keeps_the_rest() -> None:
    text = ("# my broker\nbrokerName = b-1\n! old style comment\nfileReservedTime=48\nlong=a\\\n  b\n"
            "fileReservedTime: 12\n\nflushDiskType=ASYNC_FLUSH")  # fmt: skip
    out = update_properties_text(text, {"fileReservedTime": "72", "long": "c", "deleteWhen": "04"})
    assert out == ("# my broker\nbrokerName = b-1\n! old style comment\nfileReservedTime=72\nlong=c\n\n"
                   "flushDiskType=ASYNC_FLUSH\ndeleteWhen=04\n")  # fmt: skip
    assert parse_properties(out) == {**parse_properties(text), "fileReservedTime": "72", "long": "c",
                                     "deleteWhen": "04"}  # fmt: skip
    assert update_properties_text("", {"a": "1"}) == "a=1\n"


def test_update_broker_config_is_written_to_the_config_file_and_read_at_the_next_start(tmp_path: Path) -> None:
    """As Java's ``Configuration.persist`` after ``updateBrokerConfig``: the change outlives a restart, the
    settings used at start only (listenPort) included; unknown keys and values that do not parse are not written."""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"# hand written\nbrokerName=b-1\nlistenPort=0\nstorePathRootDir={tmp_path / 's'}\n"
                    "fileReservedTime=48\n")  # fmt: skip
    broker = BrokerController(*load_broker_config(conf))
    broker.config_file = conf
    body = b"fileReservedTime=49\nlistenPort=20931\nnoSuchKey=1\ndiskMaxUsedSpaceRatio=lots\nbrokerIP2=127.0.0.3\n"

    async def scenario() -> None:
        await broker.start()
        try:
            async with client_of(broker) as client:
                r = await client.invoke(create_request(RequestCode.UPDATE_BROKER_CONFIG, {}, body))
                assert r.code == ResponseCode.SUCCESS
            assert broker.store_config.file_reserved_time == 49 and broker.broker_config.listen_port != 20931
        finally:
            await broker.shutdown()

    run(scenario())
    lines = conf.read_text().splitlines()
    assert lines[:3] == ["# hand written", "brokerName=b-1", "listenPort=20931"]
    assert "fileReservedTime=49" in lines and "brokerIP2=127.0.0.3" in lines
    assert not any(x.startswith(("noSuchKey", "diskMaxUsedSpaceRatio")) for x in lines)
    again, store = load_broker_config(conf)
    assert (again.listen_port, store.file_reserved_time, again.broker_ip2) == (20931, 49, "127.0.0.3")

    # without a -c file: <storePathRootDir>/config/broker.properties, as Java's ~/store/config/broker.properties
    broker = BrokerController(*load_broker_config(conf, listen_port=0))
    run(scenario())
    assert (tmp_path / "s" / "config" / "broker.properties").read_text() == "fileReservedTime=49\nlistenPort=20931\n" \
        "brokerIP2=127.0.0.3\n"


def test_broker_conf_sets_broker_and_store(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName = C1\nbrokerName=b-1\nbrokerId=0\nlistenPort=20911\n"
                    "namesrvAddr=127.0.0.1:9876;127.0.0.1:9877\nbrokerIP1=127.0.0.1\nbrokerRole=ASYNC_MASTER\n"
                    "flushDiskType=ASYNC_FLUSH\nautoCreateTopicEnable=false\ndeleteWhen=03\nfileReservedTime=48\n"
                    f"storePathRootDir={tmp_path / 'store'}\nsomethingUnknown=1\n")  # fmt: skip
    broker, store = load_broker_config(conf)
    assert (broker.broker_cluster_name, broker.broker_name, broker.listen_port) == ("C1", "b-1", 20911)
    assert broker.namesrv_addrs() == ["127.0.0.1:9876", "127.0.0.1:9877"]
    assert broker.vip_port == 20909 and broker.broker_addr == "127.0.0.1:20911"
    assert broker.ha_server_addr == "127.0.0.1:20912"
    assert not broker.auto_create_topic_enable and not store.auto_create_topic_enable
    assert (store.delete_when, store.file_reserved_time, store.listen_port) == ("03", 48, 20911)
    assert store.root == tmp_path / "store"
    overridden, _ = load_broker_config(conf, namesrv_addr="127.0.0.1:1")
    assert overridden.namesrv_addrs() == ["127.0.0.1:1"]
    conf.write_text("listenPort=abc\n")
    with pytest.raises(BrokerConfigError, match="listenPort"):
        load_broker_config(conf)
    with pytest.raises(BrokerConfigError, match="no such config file"):
        load_broker_config(tmp_path / "missing.conf")
    for bad, problem in (("70000", "not a port"), ("-1", "not a port"), ("1", "no port for old clients")):
        conf.write_text(f"listenPort={bad}\n")
        with pytest.raises(BrokerConfigError, match=problem):
            load_broker_config(conf)
    with pytest.raises(BrokerConfigError, match="haListenPort"):
        load_broker_config(None, ha_listen_port=65536)
    # What rocketq does not build is refused by name, not run without (a DLedger store is another format).
    for unbuilt in ("enableDLegerCommitLog", "enableControllerMode"):
        conf.write_text(f"{unbuilt} = true\n")
        with pytest.raises(BrokerConfigError, match=f"{unbuilt}=true: .* not built in rocketq"):
            load_broker_config(conf)
        conf.write_text(f"{unbuilt}=false\n")
        load_broker_config(conf)


@pytest.mark.parametrize(("argv", "problem"), [
    (["start", "--broker-port", "99999"], "not a port"),
    (["start", "--namesrv-port", "x"], "not an integer"),
    (["namesrv", "--port", "-1"], "must not be negative"),
    (["store", "inspect", "/tmp", "--bogus"], "unrecognized arguments: --bogus (see 'rocketq store inspect --help')"),
    (["admin", "-n", "127.0.0.1:1", "updateTopic", "-t", "T", "-c", "C", "-r", "0"], "must be at least 1"),
    (["admin", "-n", "127.0.0.1:1", "queryMsgByOffset", "-t", "T", "-b", "b", "-i", "-1", "-o", "0"],
     "must not be negative"),
])  # fmt: skip
def test_bad_numbers_on_the_command_line_are_usage_errors(argv: list[str], problem: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from rocketq.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert problem in err and "Traceback" not in err and err.count("\n") == 1


def test_start_refuses_a_name_server_port_of_the_broker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rocketq.cli.main import main

    for ns, says in ((25541, "listenPort - 2 (old clients)"), (25543, "listenPort"), (25544, "the HA port")):
        argv = ["start", "--store", str(tmp_path / "s"), "--namesrv-port", str(ns), "--broker-port", "25543"]
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert f"--namesrv-port {ns} is the broker's {says}:" in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()  # refused before anything was made


def test_register_body_matches_the_golden_frame() -> None:
    broker, _ = load_broker_config(None, broker_name="broker-a", broker_ip1="127.0.0.2", broker_ip2="127.0.0.2")
    api = BrokerOuterAPI(broker)
    wrapper = {"dataVersion": {"counter": 0, "timestamp": 1}, "topicConfigTable": {}}
    request = api.register_broker_request(wrapper)
    ext = request.ext_fields or {}
    assert ext["brokerAddr"] == "127.0.0.2:10911" and ext["haServerAddr"] == "127.0.0.2:10912"
    assert ext["compressed"] == "false" and ext["brokerId"] == "0" and ext["clusterName"] == "DefaultCluster"
    assert int(ext["bodyCrc32"]) == crc32_masked(request.body or b"")
    assert request.body == (b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":0,'
                            b'"timestamp":1},"topicConfigTable":{}}}')  # fmt: skip


def test_registers_with_name_server_and_announces_new_topics(tmp_path: Path) -> None:
    async def scenario() -> None:
        namesrv = NamesrvController(HOST, 0, kv_config_path=tmp_path / "kvConfig.json")
        await namesrv.start()
        try:
            async with running_broker(tmp_path / "s", namesrvAddr=namesrv.address) as broker:
                for topic in ("TBW102", "SELF_TEST_TOPIC", "BenchmarkTest", "DefaultCluster", "broker-a",
                              "OFFSET_MOVED_EVENT", "SCHEDULE_TOPIC_XXXX", "DefaultCluster_REPLY_TOPIC",
                              "RMQ_SYS_TRANS_HALF_TOPIC"):  # fmt: skip
                    assert namesrv.routes.route_data(topic) is not None, topic
                route = namesrv.routes.route_data("TBW102")
                assert route is not None
                assert json_compat.loads(json_compat.dumps(route))["queueDatas"][0]["perm"] == 7
                async with client_of(broker) as client:
                    assert (await client.invoke(send_v2("Fresh", b"x"))).code == ResponseCode.SUCCESS
                    await client.invoke(heartbeat("c", "RG", {"T": "*"}))
                for _ in range(200):  # registration after a topic change runs in the background
                    if namesrv.routes.route_data("Fresh") and namesrv.routes.route_data("%RETRY%RG"):
                        break
                    await asyncio.sleep(0.01)
                assert namesrv.routes.route_data("Fresh") is not None
                assert namesrv.routes.route_data("%RETRY%RG") is not None
                async with client_of(broker) as client:  # GET_BROKER_CLUSTER_INFO passes through to the name server
                    info = await client.invoke(create_request(RequestCode.GET_BROKER_CLUSTER_INFO))
                assert info.code == ResponseCode.SUCCESS and b"broker-a" in (info.body or b"")
            # Shutdown unregistered the broker.
            assert namesrv.routes.route_data("TBW102") is None
        finally:
            await namesrv.stop()

    run(scenario())


def test_a_created_topic_is_routed_when_the_answer_comes_and_registered_alone(tmp_path: Path) -> None:
    """UPDATE_AND_CREATE_TOPIC registers the one topic with the name servers (Java's registerIncrementBrokerData)
    before it answers: the route is there as soon as the tool has its answer, and a broker with many topics does
    not send them all for each new one. The name server keeps the topics the registration does not name."""

    async def scenario() -> None:
        namesrv = NamesrvController(HOST, 0, kv_config_path=tmp_path / "kvConfig.json")
        await namesrv.start()
        try:
            async with running_broker(tmp_path / "s", namesrvAddr=namesrv.address) as broker:
                sent: list[list[str]] = []
                register = broker.outer_api.register_broker_all

                async def spy(wrapper, **kw):  # type: ignore[no-untyped-def]
                    sent.append(sorted(wrapper["topicConfigTable"]))
                    return await register(wrapper, **kw)

                broker.outer_api.register_broker_all = spy  # type: ignore[method-assign]
                async with client_of(broker) as client:
                    for queues in (4, 6):
                        r = await client.invoke(create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                            "topic": "Made", "defaultTopic": "TBW102", "readQueueNums": queues,
                            "writeQueueNums": queues, "perm": 6, "topicFilterType": "SINGLE_TAG"}))  # fmt: skip
                        assert r.code == ResponseCode.SUCCESS
                        route = json_compat.loads(json_compat.dumps(namesrv.routes.route_data("Made")))
                        assert [q["writeQueueNums"] for q in route["queueDatas"]] == [queues]
                assert sent == [["Made"], ["Made"]]
                assert namesrv.routes.route_data("TBW102") is not None  # the others are kept
        finally:
            await namesrv.stop()

    run(scenario())


def test_ordered_topics_follow_the_name_servers_order_topic_config(tmp_path: Path) -> None:
    """A registration's answer carries the name server's ORDER_TOPIC_CONFIG table: the topics it names become
    ordered on the broker and the others stop being so (``updateOrderTopicConfig``, the data version bumped and
    topics.json written); an answer without the table changes nothing."""

    async def scenario() -> None:
        namesrv = NamesrvController(HOST, 0, kv_config_path=tmp_path / "kvConfig.json")
        await namesrv.start()
        try:
            async with running_broker(tmp_path / "s", namesrvAddr=namesrv.address) as broker:
                tcm = broker.topic_config_manager
                for name in ("OrdA", "OrdB"):
                    tcm.update_topic_config(TopicConfig(name, 4, 4), announce=False)
                await broker.register_broker_all()
                assert not tcm.is_order_topic("OrdA")  # no table yet: nothing changes
                namesrv.kv.put("ORDER_TOPIC_CONFIG", "OrdA", "broker-a:4")
                version = tcm.data_version.counter
                await broker.register_broker_all()
                assert tcm.is_order_topic("OrdA") and not tcm.is_order_topic("OrdB")
                assert tcm.data_version.counter == version + 1
                saved = json.loads((tmp_path / "s" / "config" / "topics.json").read_text())
                assert saved["topicConfigTable"]["OrdA"]["order"] is True
                namesrv.kv.delete("ORDER_TOPIC_CONFIG", "OrdA")  # the table is now empty: OrdA is unmarked
                await broker.register_broker_all()
                assert not tcm.is_order_topic("OrdA")
        finally:
            await namesrv.stop()

    run(scenario())


def test_a_name_server_that_comes_up_after_the_broker_has_it_within_seconds(tmp_path: Path) -> None:
    """Started together, the broker may try to register before its name server listens: it asks again after
    1 s, 2 s, ... (not at the next 30 s registration), and settles back to the period once registered."""

    async def scenario() -> None:
        with socket.socket() as s:  # a port nothing listens on yet
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        async with running_broker(tmp_path / "s", namesrvAddr=f"{HOST}:{port}") as broker:
            assert broker.outer_api.registered == {f"{HOST}:{port}": False}
            await asyncio.sleep(1.5)  # the 1 s retry fails too: the next is 2 s later
            namesrv = NamesrvController(HOST, port, kv_config_path=tmp_path / "kvConfig.json")
            await namesrv.start()
            try:
                t0 = time.monotonic()
                while namesrv.routes.route_data("TBW102") is None:
                    assert time.monotonic() - t0 < 5, "not registered within 5 s of the name server's start"
                    await asyncio.sleep(0.05)
                assert broker.outer_api.registered == {f"{HOST}:{port}": True}
                assert broker.outer_api.not_registered() == []
            finally:
                await namesrv.stop()

    run(scenario())


def test_offsets_topics_and_groups_survive_a_restart(tmp_path: Path) -> None:
    store = tmp_path / "s"

    async def first() -> int:
        async with running_broker(store) as broker, client_of(broker) as client:
            await client.invoke(send_v2("Keep", b"x"))
            update = create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "kg", "topic": "Keep",
                                                                         "queueId": 0, "commitOffset": 1})  # fmt: skip
            await client.invoke(update)
            return broker.port

    async def second() -> None:
        async with running_broker(store) as broker, client_of(broker) as client:
            assert broker.topic_config_manager.select_topic_config("Keep") is not None
            assert broker.subscription_group_manager.table.get("kg") is None  # offsets need no group config
            query = create_request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "kg", "topic": "Keep",
                                                                       "queueId": 0})  # fmt: skip
            assert (await client.invoke(query)).ext_fields == {"offset": "1"}
            r = await client.invoke(send_v2("Keep", b"y"))
            assert (r.ext_fields or {})["queueOffset"] == "1"

    run(first())
    assert (store / "config" / "consumerOffset.json").is_file() and not (store / "abort").exists()
    run(second())


def test_both_listeners_share_the_processors(tmp_path: Path) -> None:
    async def scenario() -> None:
        broker_config, store_config = broker_config_from_properties(broker_properties(tmp_path / "s"))
        broker = BrokerController(broker_config, store_config)
        await broker.start()
        try:
            assert broker.port != broker.vip_port and broker.fast_remoting_server.started
            vip = RemotingClient(f"{HOST}:{broker.vip_port}")
            try:
                r = await vip.invoke(heartbeat("v", "VG", {"T": "*"}))
                assert r.code == ResponseCode.SUCCESS
            finally:
                await vip.close()
        finally:
            await broker.shutdown()
        await broker.shutdown()  # twice is fine

    run(scenario())


def _wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line:
            lines.append(line)
            if needle in line:
                return lines
        elif proc.poll() is not None:
            break
        else:
            time.sleep(0.02)
    raise AssertionError(f"{needle!r} not printed in {timeout} s; output: {lines}; rc={proc.poll()}")


def test_rocketq_start_runs_both_and_stops_on_sigterm(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "rocketq.cli.main", "start", "--store", str(tmp_path / "store"),
           "--namesrv-port", "0", "--broker-port", "0"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HOME": str(tmp_path)})  # its name server's KV file: not the user's
    try:
        lines = _wait_for_line(proc, "rocketq ready", 30)
        text = "".join(lines)
        assert "name server listening on 127.0.0.1:" in text and "listening on 127.0.0.1:" in text
        broker_line = next(line for line in lines if line.startswith("rocketq broker"))
        addr = broker_line.split("listening on ")[1].split()[0]

        async def talk() -> None:
            client = RemotingClient(addr)
            try:
                assert (await client.invoke(send_v2("CliTopic", b"x"))).code == ResponseCode.SUCCESS
            finally:
                await client.close()

        run(talk())
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "rocketq broker stopped" in out and "rocketq name server stopped" in out
        assert (tmp_path / "store" / "commitlog").is_dir() and not (tmp_path / "store" / "abort").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def test_rocketq_start_stops_cleanly_on_a_signal_during_its_start(tmp_path: Path) -> None:
    # SIGINT as soon as the name server says it listens: the broker is still starting. The signal must stop
    # both cleanly (it used to be a KeyboardInterrupt, exit 130, or a window right after a ready line).
    cmd = [sys.executable, "-m", "rocketq.cli.main", "start", "--store", str(tmp_path / "store"),
           "--namesrv-port", "0", "--broker-port", "0"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "HOME": str(tmp_path)})  # its name server's KV file: not the user's
    try:
        _wait_for_line(proc, "name server listening", 30)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "rocketq name server stopped" in out and "interrupted" not in err
        assert not (tmp_path / "store" / "abort").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def test_stop_signals_set_the_event_while_installed() -> None:
    import os

    from rocketq.cli.signals import stop_signals

    async def main() -> bool:
        with stop_signals() as stop:
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.wait_for(stop.wait(), 10)
            return stop.is_set()

    assert run(main())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back after the block


def test_rocketq_broker_with_a_conf_file(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in broker_properties(tmp_path / "store").items()))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "broker", "-c", str(conf), "-n", "127.0.0.1:1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        # Nothing listens on port 1: the broker runs, and says it is not registered yet (not that it is).
        lines = _wait_for_line(proc, "register with name server", 30)
        assert any("rocketq broker broker-a (cluster DefaultCluster, id 0) listening on 127.0.0.1:" in x for x in lines)
        assert "rocketq broker could not register with name server(s) 127.0.0.1:1 yet; trying again after 1 s, " \
            "then less often" in [x.strip() for x in lines]  # fmt: skip
        assert not any(x.startswith("rocketq broker registered") for x in lines)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "rocketq broker stopped" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    bad = subprocess.run([sys.executable, "-m", "rocketq.cli.main", "broker", "-c", str(tmp_path / "nope.conf")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 1 and "no such config file" in bad.stderr
