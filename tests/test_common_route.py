"""The one definition of topic routes (rocketq.common.route) as name server, client and admin share it."""

from __future__ import annotations

import json

from rocketq.common.route import PERM_READ, PERM_WRITE, BrokerData, QueueData, TopicRouteData
from rocketq.namesrv.route_info_manager import RouteInfoManager

# A GET_ROUTEINFO_BY_TOPIC body as a 4.9.4 name server writes it: bare integer broker ids, keys sorted.
BODY_494 = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"b",'
    b'"cluster":"C"},{"brokerAddrs":{1:"127.0.0.1:10931"},"brokerName":"a","cluster":"C"}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,'
    b'"topicSysFlag":0,"writeQueueNums":2},{"brokerName":"a","perm":4,"readQueueNums":3,'
    b'"topicSynFlag":1,"writeQueueNums":3}]}'
)


def test_parse_494_body_sorted_by_broker_name_with_old_flag_name() -> None:
    route = TopicRouteData.from_body(BODY_494)
    assert [q.broker_name for q in route.queue_datas] == ["a", "b"]
    assert route.queue_datas[0] == QueueData("a", 3, 3, PERM_READ, 1)
    assert route.broker("b") == BrokerData("C", "b", {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"})
    assert route.master_addr("a") is None and route.master_addr("b") == "127.0.0.1:10911"
    # "a" has no master: nothing to write there; it is read-only but readable.
    assert route.write_queues() == [("b", 0), ("b", 1)]
    assert route.write_queues(max_per_broker=1) == [("b", 0)]
    assert route.read_queues() == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2), ("b", 3)]


def test_quoted_ids_and_missing_fields() -> None:
    route = TopicRouteData.from_body(b'{"brokerDatas":[{"brokerAddrs":{"0":"h:1"},"brokerName":"x"}],'
                                     b'"queueDatas":[{"brokerName":"x","readQueueNums":"2"}]}')  # fmt: skip
    assert route.broker_datas[0].broker_addrs == {0: "h:1"}
    assert route.queue_datas[0] == QueueData("x", 2, 0, PERM_READ | PERM_WRITE, 0)
    assert TopicRouteData.from_body(None) == TopicRouteData()


def test_name_server_route_reads_back_equal() -> None:
    rim = RouteInfoManager()
    topics = {"T": {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}}
    rim.register_broker("C", "127.0.0.1:10911", "b", 0, "127.0.0.1:10912",
                        {"topicConfigTable": topics, "dataVersion": {"counter": 1, "timestamp": 1}}, None)  # fmt: skip
    data = rim.route_data("T")
    assert data is not None
    route = TopicRouteData.from_json(json.loads(json.dumps(data)))
    assert json.loads(json.dumps(route.to_json())) == json.loads(json.dumps(data))
    assert route.write_queues() == [("b", i) for i in range(4)]
    assert route.same_as(TopicRouteData.from_json(data)) and not route.same_as(route.copy_with_queue_nums(2))
