"""A master and a slave broker of one name (broker-a, ids 0 and 1) behind one name server, in one process on
127.0.0.1: replication, the slave's copy of the master's metadata, reading from the slave once the master is gone,
and SYNC_MASTER sends."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker_support import HOST, client_of, port_free, run, running_broker, send_v2
from rocketq.broker import broker_controller
from rocketq.broker.broker_config import BrokerConfigError, broker_config_from_properties
from rocketq.broker.broker_controller import BrokerController, BrokerStartError
from rocketq.client.client_config import ClientConfig
from rocketq.client.message_queue import MessageQueue
from rocketq.client.producer import Producer
from rocketq.client.pull_consumer import PullConsumer
from rocketq.client.pull_result import PullStatus
from rocketq.client.send_result import SendStatus
from rocketq.common.message import Message
from rocketq.common.message_id import decode_offset_message_id
from rocketq.namesrv.namesrv_controller import NamesrvController
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import create_request

TOPIC = "HaBrokerTopic"


async def _until(cond: object, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def _namesrv() -> AsyncIterator[NamesrvController]:
    with tempfile.TemporaryDirectory() as kv_dir:  # not the user's ~/namesrv/kvConfig.json
        namesrv = NamesrvController(HOST, 0, kv_config_path=Path(kv_dir) / "kvConfig.json")
        await namesrv.start()
        try:
            yield namesrv
        finally:
            await namesrv.stop()


def test_slave_role_needs_a_broker_id_and_a_master_gets_id_0() -> None:
    with pytest.raises(BrokerConfigError, match="slave"):
        broker_config_from_properties({"brokerRole": "SLAVE"})
    broker, _ = broker_config_from_properties({"brokerRole": "SLAVE", "brokerId": "2"})
    assert broker.broker_id == 2
    broker, _ = broker_config_from_properties({"brokerRole": "SYNC_MASTER", "brokerId": "3"})
    assert broker.broker_id == 0
    # getBrokerConfig of a slave shows listenPort + 1 as its haListenPort, as BrokerStartup sets it
    slave, store = broker_config_from_properties({"brokerRole": "SLAVE", "brokerId": "1", "listenPort": "20911"})
    assert BrokerController(slave, store).all_config_properties()["haListenPort"] == "20912"


def test_master_and_slave_behind_one_name_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The scenario syncs the slave's metadata itself, and checks what is there before: no background round.
    monkeypatch.setattr(broker_controller, "SLAVE_SYNC_DELAY_S", 3600.0)

    async def scenario() -> None:
        async with _namesrv() as namesrv:
            master_cm = running_broker(tmp_path / "m", namesrvAddr=namesrv.address)
            master = await master_cm.__aenter__()
            try:
                assert master.store.ha_service is not None
                assert master.broker_config.ha_server_addr == f"{HOST}:{master.store.ha_service.port}"
                async with running_broker(tmp_path / "s", namesrvAddr=namesrv.address, brokerRole="SLAVE",
                                          brokerId="1") as slave:  # fmt: skip
                    await _scenario(namesrv, master, slave)
                    await master_cm.__aexit__(None, None, None)
                    master_cm = None
                    await _after_master_stopped(namesrv, slave)
            finally:
                if master_cm is not None:
                    await master_cm.__aexit__(None, None, None)

    run(scenario(), 90)


async def _scenario(namesrv: NamesrvController, master: BrokerController, slave: BrokerController) -> None:
    # The name server told the slave where its master is.
    client = slave.store.ha_client
    assert client is not None
    assert client.master_address == master.broker_config.ha_server_addr
    assert slave.slave_synchronize.master_addr == master.broker_addr
    config = ClientConfig(namesrv_addr=namesrv.address)
    async with Producer("HaPG", config=config) as producer:
        for i in range(40):
            r = await producer.send(Message(TOPIC, b"m%d" % i, 0, {"KEYS": f"k{i}"}))
            assert r.status is SendStatus.SEND_OK
    await _until(lambda: slave.store.get_max_phy_offset() == master.store.get_max_phy_offset())
    assert await asyncio.to_thread(slave.store.wait_dispatched, 5.0)
    # Both are in the topic's route, under one name.
    await _until(lambda: namesrv.routes.route_data(TOPIC) is not None)  # registered in the background
    route = namesrv.routes.route_data(TOPIC)
    assert route is not None
    (data,) = route["brokerDatas"]
    assert {int(k): v for k, v in data["brokerAddrs"].items()} == {0: master.broker_addr, 1: slave.broker_addr}
    # Replication brought the records, not the topic's config.
    assert slave.topic_config_manager.table.get(TOPIC) is None
    # A send to the slave is refused, as RocketMQ's is.
    async with client_of(slave) as c:
        refused = await c.invoke(send_v2(TOPIC, b"to the slave"))
    assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
    # The master's metadata: topics, groups and consumer offsets come over with the slave's next sync.
    async with client_of(master) as c:
        update = create_request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                {"consumerGroup": "HaCG", "topic": TOPIC, "queueId": 0, "commitOffset": 7})
        assert (await c.invoke(update)).code == ResponseCode.SUCCESS
        group = create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"HaCG"}')
        assert (await c.invoke(group)).code == ResponseCode.SUCCESS
    await slave.slave_synchronize.sync_all()
    assert slave.slave_synchronize.synced == 1
    assert slave.topic_config_manager.table.get(TOPIC) is not None
    assert slave.consumer_offset_manager.query_offset("HaCG", TOPIC, 0) == 7
    assert slave.subscription_group_manager.table.get("HaCG") is not None
    assert (slave.store.config.root / "config" / "topics.json").read_text().count(TOPIC) >= 1
    # Its topics and groups are its master's: changes there are refused, as 4.9's validateSlave refuses them.
    async with client_of(slave) as c:
        for request in (create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"groupName":"X"}'),
                        create_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC})):  # fmt: skip
            answer = await c.invoke(request)
            assert answer.code == ResponseCode.SYSTEM_ERROR and "slave" in (answer.remark or "")
    assert slave.topic_config_manager.table.get(TOPIC) is not None
    # The slave does not take commits of offsets from pulls (its master's are copied over).
    async with client_of(slave) as c:
        pull = create_request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "HaCG", "topic": TOPIC, "queueId": 0, "queueOffset": 0, "maxMsgNums": 4,
            "sysFlag": 1 | 4, "commitOffset": 3, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0})
        answer = await c.invoke(pull)
    assert answer.code == ResponseCode.SUCCESS
    assert slave.consumer_offset_manager.query_offset("HaCG", TOPIC, 0) == 7


async def _after_master_stopped(namesrv: NamesrvController, slave: BrokerController) -> None:
    """The master is gone: consumers read what it had from the slave."""
    route = namesrv.routes.route_data(TOPIC)
    assert route is not None
    assert {int(k): v for k, v in route["brokerDatas"][0]["brokerAddrs"].items()} == {1: slave.broker_addr}
    config = ClientConfig(namesrv_addr=namesrv.address)
    async with PullConsumer("HaReader", config=config) as consumer:
        bodies = []
        for mq in await consumer.fetch_subscribe_message_queues(TOPIC):
            result = await consumer.pull(mq, "*", 0, 32)
            assert result.status is PullStatus.FOUND
            bodies += [m.body for m in result.messages]
    assert sorted(bodies) == sorted(b"m%d" % i for i in range(40))


def test_sync_master_answers_once_the_slave_holds_the_message(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _namesrv() as namesrv, running_broker(tmp_path / "m", namesrvAddr=namesrv.address,
                                                          brokerRole="SYNC_MASTER", slaveTimeout="500") as master:
            config = ClientConfig(namesrv_addr=namesrv.address)
            async with Producer("HaSyncPG", config=config) as producer:
                # No slave yet: stored, but the send says so.
                r = await producer.send(Message(TOPIC, b"alone", 0, {}))
                assert r.status is SendStatus.SLAVE_NOT_AVAILABLE
                # unless the message does not wait for its store (WAIT=false: Java's waitStoreMsgOK), as 4.9.4
                r = await producer.send(Message(TOPIC, b"no wait", 0, {"WAIT": "false"}))
                assert r.status is SendStatus.SEND_OK
                stored = master.store.look_message_by_offset(decode_offset_message_id(r.offset_msg_id)[1])
                assert stored is not None and "WAIT" not in stored.properties  # not stored, as before
                async with running_broker(tmp_path / "s", namesrvAddr=namesrv.address, brokerRole="SLAVE",
                                          brokerId="1") as slave:  # fmt: skip
                    ha = master.store.ha_service
                    assert ha is not None
                    await _until(lambda: ha.connection_count == 1)
                    for i in range(10):
                        r = await producer.send(Message(TOPIC, b"paired %d" % i, 0, {}))
                        assert r.status is SendStatus.SEND_OK
                        assert ha.push2slave_max_offset == master.store.get_max_phy_offset()  # acked first
                    assert slave.store.get_max_phy_offset() == master.store.get_max_phy_offset()

    run(scenario(), 60)


def test_a_slave_started_before_its_master_finds_it(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with _namesrv() as namesrv, running_broker(tmp_path / "s", namesrvAddr=namesrv.address,
                                                          brokerRole="SLAVE", brokerId="1") as slave:
            assert slave.slave_synchronize.master_addr is None  # nobody to name yet
            async with running_broker(tmp_path / "m", namesrvAddr=namesrv.address) as master:
                await _until(lambda: slave.slave_synchronize.master_addr == master.broker_addr, 10)
                client = slave.store.ha_client
                assert client is not None
                await _until(lambda: client.connected, 10)

    run(scenario(), 60)


def test_a_taken_default_ha_port_falls_back_to_a_free_one_an_asked_for_one_fails(tmp_path: Path) -> None:
    async def scenario() -> None:
        for _ in range(50):
            with socket.socket() as blocker:
                blocker.bind((HOST, 0))
                blocker.listen()
                taken = blocker.getsockname()[1]
                port = taken - 1  # a broker here would listen for slaves on the taken port
                if not (port_free(port) and port_free(port - 2)):
                    continue
                async with running_broker(tmp_path / "default", listenPort=str(port)) as broker:
                    ha = broker.store.ha_service
                    assert ha is not None and ha.port != taken
                    assert broker.broker_config.ha_server_addr == f"{HOST}:{ha.port}"  # what slaves are told
                with pytest.raises(BrokerStartError, match="haListenPort"):
                    async with running_broker(tmp_path / "asked", haListenPort=str(taken)):
                        pass
                return
        pytest.skip("no free broker port next to a taken one")

    run(scenario(), 60)


def test_slave_read_enable_steers_consumers_to_the_slave_and_back(tmp_path: Path) -> None:
    """``slaveReadEnable``: a master whose reader is far behind (``accessMessageInMemoryMaxRatio=0``: every pull
    is "far") suggests the group's ``whichBrokerWhenConsumeSlowly`` (1); the client's next pull goes to the slave,
    which, reading normally, sends it back to the group's ``brokerId`` (0)."""

    async def scenario() -> None:
        async with _namesrv() as namesrv, \
                running_broker(tmp_path / "m", namesrvAddr=namesrv.address, slaveReadEnable="true",
                               accessMessageInMemoryMaxRatio="0") as master, \
                running_broker(tmp_path / "s", namesrvAddr=namesrv.address, brokerRole="SLAVE", brokerId="1",
                               slaveReadEnable="true") as slave:  # fmt: skip
            config = ClientConfig(namesrv_addr=namesrv.address)
            async with Producer("HaReadPG", config=config) as producer:
                for i in range(24):  # at least two in each queue
                    r = await producer.send(Message(TOPIC, b"r%d" % i, 0, {}))
                    assert r.status is SendStatus.SEND_OK
            await _until(lambda: slave.store.get_max_phy_offset() == master.store.get_max_phy_offset())
            assert await asyncio.to_thread(slave.store.wait_dispatched, 5.0)
            # The master's consume queues are built in the background too: the pick below reads them.
            assert await asyncio.to_thread(master.store.wait_dispatched, 5.0)
            while slave.topic_config_manager.table.get(TOPIC) is None:  # as the 10 s sync would bring it
                await slave.slave_synchronize.sync_all()  # (a round that timed out on a loaded machine: again)
            await _until(lambda: namesrv.routes.route_data(TOPIC) is not None)  # registered in the background
            queue_id = max(range(8), key=lambda q: master.store.get_max_offset_in_queue(TOPIC, q))
            assert master.store.get_max_offset_in_queue(TOPIC, queue_id) >= 2
            mq = MessageQueue(TOPIC, "broker-a", queue_id)
            async with PullConsumer("HaReadCG", config=config) as consumer:
                first = await consumer.pull(mq, "*", 0, 1)
                assert first.status is PullStatus.FOUND and first.suggest_which_broker_id == 1
                before = slave.stats.get_total
                second = await consumer.pull(mq, "*", first.next_begin_offset, 1)
                assert second.status is PullStatus.FOUND
                assert slave.stats.get_total == before + 1  # served by the slave
                assert second.suggest_which_broker_id == 0  # which sends the next pull back to the master

    run(scenario(), 60)
