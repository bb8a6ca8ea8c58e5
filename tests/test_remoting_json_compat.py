"""json_compat: the JSON bodies RocketMQ 4.9.4 exchanged, and fastjson's quirks (spec §8)."""

from __future__ import annotations

import base64
import dataclasses
import enum
import gzip
import json
from functools import cache
from typing import Any

import pytest

from conftest import GOLDEN
from rocketq.common.json_compat import (
    FrozenObject,
    JsonDecodeError,
    JsonValueError,
    dumps,
    dumps_bytes,
    freeze,
    from_json,
    java_double_str,
    loads,
    quote,
)
from rocketq.remoting.command import RemotingCommand

CAPTURES = GOLDEN / "remoting-4.9.4"


@cache
def json_bodies() -> tuple[tuple[int, bool, bytes], ...]:
    """(request code or response code, is response, body) of every JSON body in the captures."""
    out = []
    with gzip.open(CAPTURES / "all-frames.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            cmd = RemotingCommand.decode(base64.b64decode(json.loads(line)["raw"]))
            if cmd.body and cmd.body[:1] == b"{":
                out.append((cmd.code, cmd.is_response, cmd.body))
    return tuple(out)


def body_of(file: str) -> bytes:
    body = RemotingCommand.decode((CAPTURES / file).read_bytes()).body
    assert body is not None
    return body


# --------------------------------------------------------------------------------------------------
# Beans of the bodies, as the name server and broker layers will declare them
# --------------------------------------------------------------------------------------------------


class ConsumeType(enum.Enum):
    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
    CONSUME_POP = "CONSUME_POP"


class MessageModel(enum.Enum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


@dataclasses.dataclass
class SubscriptionData:
    topic: str
    sub_string: str
    class_filter_mode: bool = False
    tags_set: set[str] = dataclasses.field(default_factory=set)
    code_set: set[int] = dataclasses.field(default_factory=set)
    sub_version: int = 0
    expression_type: str | None = "TAG"


@dataclasses.dataclass
class ConsumerData:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscription_data_set: list[SubscriptionData] = dataclasses.field(default_factory=list)
    unit_mode: bool = False


@dataclasses.dataclass
class ProducerData:
    group_name: str


@dataclasses.dataclass
class HeartbeatData:
    client_id: str = dataclasses.field(metadata={"json": "clientID"})
    consumer_data_set: list[ConsumerData] = dataclasses.field(default_factory=list)
    producer_data_set: list[ProducerData] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = dataclasses.field(default=0, metadata={"aliases": ("topicSynFlag",)})


@dataclasses.dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]


@dataclasses.dataclass
class TopicRouteData:
    queue_datas: list[QueueData]
    broker_datas: list[BrokerData]
    filter_server_table: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    order_topic_conf: str | None = None


@dataclasses.dataclass
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, set[str]]


@dataclasses.dataclass(frozen=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int


@dataclasses.dataclass
class TopicOffset:
    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclasses.dataclass
class TopicStatsTable:
    offset_table: dict[MessageQueue, TopicOffset]
    topic_put_tps: float = 0.0


# --------------------------------------------------------------------------------------------------
# The captured bodies
# --------------------------------------------------------------------------------------------------


def test_every_captured_json_body_round_trips_byte_for_byte() -> None:
    bodies = json_bodies()
    assert len(bodies) == 61
    for _code, _is_response, body in bodies:
        assert dumps_bytes(loads(body)) == body


def test_cluster_info_has_bare_integer_keys() -> None:
    body = body_of("001-json-GET_BROKER_CLUSTER_INFO-response.bin")
    value = loads(body)
    assert value["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {0: "127.0.0.2:10911"}
    info = from_json(ClusterInfo, value)
    assert info.broker_addr_table["broker-a"].broker_addrs == {0: "127.0.0.2:10911"}
    assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
    # Written back as a bean: the same bytes fastjson wrote.
    assert dumps_bytes(info) == body
    # The standard form quotes the key.
    assert b'"brokerAddrs":{"0":"127.0.0.2:10911"}' in dumps_bytes(info, standard=True)


def test_topic_route_both_forms() -> None:
    standard = body_of("002-json-GET_ROUTEINFO_BY_TOPIC-ok-response.bin")  # version 401: standard form
    route = from_json(TopicRouteData, loads(standard))
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.2:10911"}
    assert route.queue_datas == [QueueData("broker-a", 8, 8, 7, 0)]
    assert dumps_bytes(route, standard=True) == standard
    legacy = dumps_bytes(route)
    assert legacy == standard.replace(b'{"0":', b"{0:")
    assert from_json(TopicRouteData, loads(legacy)) == route
    # Before 4.9.0 the flag was spelled topicSynFlag.
    old = loads(legacy.replace(b"topicSysFlag", b"topicSynFlag").replace(b'"topicSynFlag":0', b'"topicSynFlag":2'))
    assert from_json(TopicRouteData, old).queue_datas[0].topic_sys_flag == 2


def test_heartbeat_from_java() -> None:
    body = body_of("011-json-HEART_BEAT-consumer-request.bin")
    hb = from_json(HeartbeatData, loads(body))
    assert hb.client_id == "192.0.2.2@wire-consumer"
    [consumer] = hb.consumer_data_set
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert [s.topic for s in consumer.subscription_data_set] == ["%RETRY%WireConsumerGroup", "WireTopic"]
    assert hb.producer_data_set == [ProducerData("CLIENT_INNER_PRODUCER")]
    assert dumps_bytes(hb) == body


def test_heartbeat_from_cpp_and_ali_ons() -> None:
    cpp = (
        b'{"clientID":"10.0.0.1@1#DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
        b'"groupName":"CG_TEST","messageModel":1,"subscriptionDataSet":[{"subString":"*",'
        b'"subVersion":"1795305891286","topic":"%RETRY%CG_TEST"},{"codeSet":[0,0],"subString":"TagA || TagB",'
        b'"subVersion":"1795305891286","tagsSet":["TagA","TagB"],"topic":"TopicTest"}]}]}\n'
    )
    hb = from_json(HeartbeatData, loads(cpp))
    [consumer] = hb.consumer_data_set
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert consumer.subscription_data_set[1].sub_version == 1795305891286
    assert consumer.subscription_data_set[1].tags_set == {"TagA", "TagB"}
    assert consumer.subscription_data_set[0].tags_set == set()
    assert hb.producer_data_set == []

    ali = (
        b'{"clientID":"10.0.0.1@7","consumerDataSet":[{"groupName":"CG","consumeType":"CONSUME_PASSIVELY",'
        b'"messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":'
        b'[{"topic":"T","subString":"TagA","classFilterMode":false,"tagsSet":["TagA"],"codeSet":[2598919],'
        b'"subVersion":1795305910295}],"unitMode":false}],"producerDataSet":[]}'
    )
    assert from_json(HeartbeatData, loads(ali)).consumer_data_set[0].subscription_data_set[0].code_set == {2598919}


def test_consumer_list_and_topic_list() -> None:
    body = body_of("013-json-GET_CONSUMER_LIST_BY_GROUP-response.bin")
    assert from_json(dict[str, list[str]], loads(body)) == {"consumerIdList": ["192.0.2.2@wire-consumer"]}
    body = body_of("004-json-GET_ALL_TOPIC_LIST_FROM_NAMESERVER-response.bin")
    assert "WireTopic" in loads(body)["topicList"]


def test_register_broker_body() -> None:
    body = body_of("000-json-REGISTER_BROKER-request.bin")
    value = loads(body)
    table = value["topicConfigSerializeWrapper"]["topicConfigTable"]
    assert table["TBW102"]["perm"] == 7
    assert value["filterServerList"] == []
    assert dumps_bytes(value) == body


# --------------------------------------------------------------------------------------------------
# Offset tables: integer keys and MessageQueue keys
# --------------------------------------------------------------------------------------------------


def test_consumer_offset_table_of_the_golden_store() -> None:
    text = (GOLDEN / "rocketmq-4.9.4" / "clean" / "store" / "config" / "consumerOffset.json").read_text("utf-8")
    table = from_json(dict[str, dict[str, dict[int, int]]], loads(text))["offsetTable"]
    assert table["GoldenTopicB@GoldenPullGroup"] == {0: 5, 1: 3}
    assert table["GoldenBatch@GoldenPullGroup"] == {1: 8}
    assert table["GoldenTopicA@GoldenConsumerGroup"] == dict.fromkeys(range(4), 350)
    assert dumps({"offsetTable": table}).startswith('{"offsetTable":{"GoldenTopicB@GoldenPullGroup":{0:5,1:3},')


def test_message_queue_keys() -> None:
    java = (
        '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:{"lastUpdateTimestamp":'
        '1700000001234,"maxOffset":42,"minOffset":0},{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:'
        '{"lastUpdateTimestamp":1700000001235,"maxOffset":40,"minOffset":0}},"topicPutTps":0.0}'
    )
    value = loads(java)
    key = next(iter(value["offsetTable"]))
    assert isinstance(key, FrozenObject) and key == {"brokerName": "broker-a", "queueId": 0, "topic": "TopicTest"}
    assert hash(key) == hash(FrozenObject({"topic": "TopicTest", "queueId": 0, "brokerName": "broker-a"}))
    assert dumps(value) == java

    stats = from_json(TopicStatsTable, value)
    mq = MessageQueue("TopicTest", "broker-a", 1)
    assert stats.offset_table[mq] == TopicOffset(0, 40, 1700000001235)
    assert dumps(stats) == java  # frozen dataclass keys are written as objects, as Java writes them

    standard = dumps(stats, standard=True)
    assert standard.startswith('{"offsetTable":{"{\\"brokerName\\":\\"broker-a\\",\\"queueId\\":0,')
    assert from_json(TopicStatsTable, loads(standard)) == stats

    reset = loads('{"offsetTable":{{"brokerName":"b","queueId":3,"topic":"t"}:17}}')
    assert from_json(dict[str, dict[MessageQueue, int]], reset) == {"offsetTable": {MessageQueue("t", "b", 3): 17}}


# --------------------------------------------------------------------------------------------------
# Reader
# --------------------------------------------------------------------------------------------------


def test_lenient_reader() -> None:
    assert loads("{0:'a',-1:\"b\",brokerName:true,}") == {0: "a", -1: "b", "brokerName": True}
    assert loads("\ufeff [1,2,] \n") == [1, 2]
    assert loads(b'{"k":"\xc3\xa9\\u00e9\\/\\x41"}') == {"k": "éé/A"}
    assert loads('"\\ud83d\\ude00"') == "😀"
    assert loads('{[1,{"a":2}]:3}') == {(1, FrozenObject({"a": 2})): 3}
    assert loads("1.5e3") == 1500.0 and loads("-12") == -12 and loads("null") is None
    assert loads(b'"\xff"') == "\ufffd"  # malformed UTF-8 is replaced, as Java does
    assert freeze({"a": [1, {"b": 2}]}) == FrozenObject({"a": (1, FrozenObject({"b": 2}))})


@pytest.mark.parametrize(
    ("text", "where"),
    [("{", 1), ('{"a" 1}', 5), ("[1 2]", 3), ("NaN", 0), ('"abc', 0), ("{} x", 3), ('"\\q"', 0), ("", 0)],
)
def test_reader_errors(text: str, where: int) -> None:
    with pytest.raises(JsonDecodeError) as info:
        loads(text)
    assert info.value.pos == where
    assert info.value.lineno == 1


def test_reader_matches_the_store_config_parser() -> None:
    # config_json.loads_fastjson (store layer) can switch to json_compat.loads: same results on its dialect.
    from rocketq.store.config_json import loads_fastjson

    config = GOLDEN / "rocketmq-4.9.4" / "clean" / "store" / "config"
    texts = [p.read_text("utf-8") for p in sorted(config.glob("*.json*"))]
    texts += ['{0:1,"a":[1.5,-2e3,true,false,null],b:{}}', '"\\u00e9\\t\\/"', '{"a":1,}', "\ufeff[]"]
    for text in texts:
        assert loads(text) == loads_fastjson(text)


# --------------------------------------------------------------------------------------------------
# Writer
# --------------------------------------------------------------------------------------------------


def test_writer_basics() -> None:
    class Color(enum.IntEnum):
        RED = 7

    @dataclasses.dataclass
    class Bean:
        zeta: int
        alpha_beta: str | None = None
        client_id: str = dataclasses.field(default="c", metadata={"json": "clientID"})
        tags: frozenset[str] = frozenset({"b", "a"})
        color: Color = Color.RED
        raw: bytes = b"\x00\x01"

    assert dumps(Bean(3)) == '{"clientID":"c","color":"RED","raw":"AAE=","tags":["a","b"],"zeta":3}'
    assert dumps({"a": None, "b": [None, 1.0], True: 1}) == '{"b":[null,1.0],true:1}'
    assert dumps({2: "x", 10: "y", 1: "z"}, standard=True) == '{"1":"z","2":"x","10":"y"}'
    assert dumps({"b": 1, "B": 2, "a": 3}, standard=True) == '{"B":2,"a":3,"b":1}'
    assert dumps({"b": 1, "a": 2}) == '{"b":1,"a":2}'
    with pytest.raises(TypeError):
        dumps(object())


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (123.456, "123.456"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (1.5e10, "1.5E10"),
        (-2.5e-7, "-2.5E-7"),
        (100.0, "100.0"),
    ],
)
def test_java_doubles(value: float, text: str) -> None:
    assert java_double_str(value) == text
    assert float(text) == value


def test_escapes() -> None:
    s = 'q"\\/\b\t\n\f\r\x01\x7f\x9f\xa0é\u2028😀'
    assert quote(s) == '"q\\"\\\\/\\b\\t\\n\\f\\r\\u0001\\u007F\\u009F\xa0é\\u2028😀"'
    assert quote(s, browser_compatible=True) == (
        '"q\\"\\\\\\/\\b\\t\\n\\f\\r\\u0001\\u007F\\u009F\\u00A0\\u00E9\\u2028\\uD83D\\uDE00"'
    )
    for text in (quote(s), quote(s, browser_compatible=True)):
        assert loads(text) == s
        assert json.loads(text) == s
    assert dumps(float("nan")) == "null"


# --------------------------------------------------------------------------------------------------
# Typed reading
# --------------------------------------------------------------------------------------------------


def test_from_json_coercions() -> None:
    assert from_json(int, "123") == 123 and from_json(int, 5.0) == 5
    assert from_json(bool, "true") is True and from_json(bool, "0") is False and from_json(bool, 1) is True
    assert from_json(str, 5) == "5" and from_json(str, False) == "false" and from_json(str, {"a": 1}) == '{"a":1}'
    assert from_json(float, "1.5") == 1.5
    assert from_json(ConsumeType, 2) is ConsumeType.CONSUME_POP
    assert from_json(ConsumeType, "1") is ConsumeType.CONSUME_PASSIVELY
    assert from_json(int | None, None) is None
    assert from_json(tuple[int, str], [1, 2]) == (1, "2")
    assert from_json(tuple[int, ...], ["1", 2]) == (1, 2)
    assert from_json(dict[int, str], {"0": "a", 1: "b", "2": None}) == {0: "a", 1: "b"}
    assert from_json(Any, {"x": 1}) == {"x": 1}
    assert from_json(bytes, "AAE=") == b"\x00\x01"


@pytest.mark.parametrize(
    ("tp", "value", "path"),
    [
        (int, "x", "$"),
        (bool, "maybe", "$"),
        (ConsumeType, 7, "$"),
        (list[int], {"a": 1}, "$"),
        (HeartbeatData, {"consumerDataSet": []}, "$"),
        (
            HeartbeatData,
            {"clientID": "c", "consumerDataSet": [{"groupName": "g", "consumeType": "NOPE"}]},
            "$.consumerDataSet[0].consumeType",
        ),
        (tuple[int, int], [1], "$"),
    ],
)
def test_from_json_errors(tp: Any, value: Any, path: str) -> None:
    with pytest.raises(JsonValueError, match=path.replace("$", r"\$").replace("[", r"\[").replace(".", r"\.")):
        from_json(tp, value)


def test_extra_members_are_kept() -> None:
    @dataclasses.dataclass
    class Open:
        name: str
        extra: dict[str, object] = dataclasses.field(default_factory=dict, metadata={"fastjson": "extra"})

    value = from_json(Open, {"name": "n", "future": [1], "zzz": True})
    assert value.extra == {"future": [1], "zzz": True}
    assert dumps(value) == '{"future":[1],"name":"n","zzz":true}'


def test_bean_members_in_java_order_with_and_without_extra_members() -> None:
    """A bean's members are written in Java's order of their names (not the fields' order), nulls left out; the
    same with unknown members kept from a file, which take their place in that order."""

    @dataclasses.dataclass
    class Bean:
        zeta: int = 1
        alpha_beta: str | None = "a"
        alpha: bool = False
        nothing: str | None = None
        extra: dict[str, object] = dataclasses.field(default_factory=dict, metadata={"fastjson": "extra"})

    assert dumps(Bean()) == '{"alpha":false,"alphaBeta":"a","zeta":1}'
    assert dumps(Bean(extra={"beta": 2, "zeta": 9})) == '{"alpha":false,"alphaBeta":"a","beta":2,"zeta":1}'
    assert dumps([Bean(alpha_beta=None)], pretty=True) == '[{\n\t"alpha":false,\n\t"zeta":1\n}]'
    nested = '{\n\t"k":{\n\t\t"alpha":false,\n\t\t"alphaBeta":"a",\n\t\t"zeta":1\n\t}\n}'
    assert dumps({"k": Bean()}, pretty=True) == nested
