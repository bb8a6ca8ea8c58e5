"""The name server's route table and KV config, without sockets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketq.namesrv.kv_config_manager import KvConfigError, KVConfigManager
from rocketq.namesrv.route_info_manager import RouteInfoManager


def wrapper(counter: int, **topics: tuple[int, int, int]) -> dict:
    return {
        "dataVersion": {"counter": counter, "timestamp": 1700000000000 + counter},
        "topicConfigTable": {
            name: {"topicName": name, "readQueueNums": r, "writeQueueNums": w, "perm": p, "topicSysFlag": 0}
            for name, (r, w, p) in topics.items()
        },
    }


def test_register_route_and_cluster_info() -> None:
    rim = RouteInfoManager()
    rim.register_broker("C", "127.0.0.1:10911", "broker-a", 0, "127.0.0.1:10912", wrapper(1, T=(4, 4, 6)))
    rim.register_broker("C", "127.0.0.1:20911", "broker-b", 0, "127.0.0.1:20912", wrapper(1, T=(2, 2, 6), U=(1, 1, 6)))
    route = rim.route_data("T")
    assert route is not None
    assert sorted(b["brokerName"] for b in route["brokerDatas"]) == ["broker-a", "broker-b"]
    assert {q["brokerName"]: q["writeQueueNums"] for q in route["queueDatas"]} == {"broker-a": 4, "broker-b": 2}
    assert rim.route_data("nope") is None
    info = rim.cluster_info()
    assert info["clusterAddrTable"] == {"C": ["broker-a", "broker-b"]}
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {0: "127.0.0.1:10911"}
    assert sorted(rim.all_topics()) == ["T", "U"]
    assert sorted(rim.topics_by_cluster("C")) == ["T", "U"]


def test_slave_gets_master_addresses_and_carries_no_queues() -> None:
    rim = RouteInfoManager()
    rim.register_broker("C", "10.0.0.1:10911", "a", 0, "10.0.0.1:10912", wrapper(1, T=(4, 4, 6)))
    res = rim.register_broker("C", "10.0.0.2:10911", "a", 1, "10.0.0.2:10912", wrapper(1, S=(4, 4, 6)))
    assert (res.master_addr, res.ha_server_addr) == ("10.0.0.1:10911", "10.0.0.1:10912")
    assert rim.route_data("S") is None  # slaves do not announce topics
    assert rim.cluster_info()["brokerAddrTable"]["a"]["brokerAddrs"] == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}


def test_topics_update_only_when_data_version_changes() -> None:
    rim = RouteInfoManager()
    rim.register_broker("C", "h:1", "a", 0, "h:2", wrapper(1, T=(4, 4, 6)))
    rim.register_broker("C", "h:1", "a", 0, "h:2", wrapper(1, T=(8, 8, 6)))  # same version: ignored
    assert rim.route_data("T")["queueDatas"][0]["readQueueNums"] == 4
    rim.register_broker("C", "h:1", "a", 0, "h:2", wrapper(2, T=(8, 8, 6)))
    assert rim.route_data("T")["queueDatas"][0]["readQueueNums"] == 8
    assert rim.is_data_version_changed("h:1", {"counter": 1, "timestamp": 1700000000001})
    assert not rim.is_data_version_changed("h:1", {"counter": 2, "timestamp": 1700000000002})


def test_unregister_and_expiry_remove_what_only_that_broker_held() -> None:
    rim = RouteInfoManager()
    rim.register_broker("C", "h:1", "a", 0, "h:2", wrapper(1, T=(4, 4, 6), OnlyA=(1, 1, 6)), connection="conn-a")
    rim.register_broker("C", "h:3", "b", 0, "h:4", wrapper(1, T=(4, 4, 6)), timeout_ms=10)
    rim.unregister_broker("C", "h:1", "a", 0)
    assert rim.route_data("OnlyA") is None
    assert [q["brokerName"] for q in rim.route_data("T")["queueDatas"]] == ["b"]
    expired = rim.scan_not_active_brokers(now_ms=2**62)
    assert expired == ["h:3"]
    assert rim.route_data("T") is None and rim.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_connection_close_removes_broker() -> None:
    rim = RouteInfoManager()
    rim.register_broker("C", "h:1", "a", 0, "h:2", wrapper(1, T=(4, 4, 6)), connection="conn-a")
    assert rim.on_connection_closed("other") == []
    assert rim.on_connection_closed("conn-a") == ["h:1"]
    assert rim.route_data("T") is None


def test_topic_edits_and_write_perm() -> None:
    rim = RouteInfoManager()
    rim.register_broker("C", "h:1", "a", 0, "h:2", wrapper(1, T=(4, 4, 6), U=(4, 4, 7)))
    assert rim.wipe_write_perm_of_broker("a") == 2
    assert [rim.route_data(t)["queueDatas"][0]["perm"] for t in "TU"] == [4, 5]
    assert rim.add_write_perm_of_broker("a") == 2
    # adding sets read and write alone, as operateWritePermOfBroker does: U's inherit bit is gone
    assert [rim.route_data(t)["queueDatas"][0]["perm"] for t in "TU"] == [6, 6]
    rim.register_topic("V", [{"brokerName": "a", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6},
                             {"brokerName": "unknown", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}])
    assert [q["brokerName"] for q in rim.route_data("V")["queueDatas"]] == ["a"]
    rim.delete_topic("T", cluster="C")
    rim.delete_topic("U", cluster="")  # an empty cluster name is every cluster, as in Java
    assert rim.route_data("T") is None and rim.route_data("U") is None
    names, addr = rim.system_topics()
    assert names == ["C", "a"] and addr == "h:1"


def test_kv_config_persists_with_backup(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.load()
    kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    kv.put("ns", "k", "v")
    kv.delete("ns", "k")
    # an emptied namespace stays (Java's map does), listed as an empty table; one never used is not there
    assert json.loads(path.read_text()) == {"configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}, "ns": {}}}
    again = KVConfigManager(path)
    again.load()
    assert again.get("ORDER_TOPIC_CONFIG", "T") == "broker-a:4"
    assert again.list_namespace("ns") == {} and again.list_namespace("never") is None
    path.write_text("{broken")
    fallback = KVConfigManager(path)
    fallback.load()  # falls back to the .bak copy
    assert fallback.get("ORDER_TOPIC_CONFIG", "T") == "broker-a:4"
    path.with_name("kvConfig.json.bak").write_text("also broken")
    with pytest.raises(KvConfigError):
        KVConfigManager(path).load()


def test_unit_topics_and_filter_servers() -> None:
    rim = RouteInfoManager()
    w = wrapper(1, Plain=(1, 1, 6), Unit=(1, 1, 6), UnitSub=(1, 1, 6), Both=(1, 1, 6))
    for name, flag in (("Unit", 1), ("UnitSub", 2), ("Both", 3)):
        w["topicConfigTable"][name]["topicSysFlag"] = flag
    rim.register_broker("C", "h:1", "a", 0, "h:2", w, filter_server_list=["h:7", "h:8"])
    rim.register_broker("C", "h:3", "a", 1, "h:4", w)
    unit = rim.topics_whose_first_queue_data(lambda f: f & 1 == 1)
    assert sorted(unit) == ["Both", "Unit"]
    assert sorted(rim.topics_whose_first_queue_data(lambda f: f & 2 == 2 and not f & 1)) == ["UnitSub"]
    # a route names the filter servers of its brokers' addresses; an empty list removes them, None keeps them
    assert rim.route_data("Plain")["filterServerTable"] == {"h:1": ["h:7", "h:8"]}
    rim.register_broker("C", "h:1", "a", 0, "h:2", w)
    assert rim.route_data("Plain")["filterServerTable"] == {"h:1": ["h:7", "h:8"]}
    rim.register_broker("C", "h:1", "a", 0, "h:2", w, filter_server_list=[])
    assert rim.route_data("Plain")["filterServerTable"] == {}
    rim.register_broker("C", "h:1", "a", 0, "h:2", w, filter_server_list=["h:9"])
    rim.unregister_broker("C", "h:1", "a", 0)
    assert rim.filter_server_table == {}
