"""Config JSON files: fastjson dialect, .bak fallback, managers against RocketMQ 4.9.4's files."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from conftest import GOLDEN_STORE
from rocketq.common.errors import RocketqError
from rocketq.store.config_json import (
    ConfigFileError,
    ConfigManager,
    ConsumerFilterManager,
    ConsumerOffsetManager,
    DataVersion,
    DelayOffsetManager,
    FastjsonDecodeError,
    SubscriptionGroupConfig,
    SubscriptionGroupManager,
    TopicConfig,
    TopicConfigManager,
    dumps_fastjson,
    loads_fastjson,
    read_config_json,
    write_config_file,
)

GOLDEN = GOLDEN_STORE
STORES = ("clean", "crashed")
MANAGERS: dict[str, type[ConfigManager]] = {
    cls.file_name: cls
    for cls in (
        TopicConfigManager,
        ConsumerOffsetManager,
        DelayOffsetManager,
        SubscriptionGroupManager,
        ConsumerFilterManager,
    )
}


def _golden_files() -> list[Path]:
    return sorted(p for store in STORES for p in (GOLDEN / store / "store" / "config").glob("*.json*"))




@pytest.fixture
def clean_store(tmp_path: Path) -> Path:
    """A writable copy of the clean store's config directory."""
    root = tmp_path / "store"
    shutil.copytree(GOLDEN / "clean" / "store" / "config", root / "config")
    for p in (root / "config").iterdir():
        p.chmod(0o644)
    return root


# ---- fastjson dialect ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: f"{p.parts[-4]}/{p.name}")
def test_golden_file_round_trips_byte_for_byte(path: Path) -> None:
    data = path.read_bytes()
    assert dumps_fastjson(loads_fastjson(data.decode("utf-8"))).encode("utf-8") == data


def test_integer_keys_are_unquoted_and_inline() -> None:
    text = dumps_fastjson({"offsetTable": {"T@G": {0: 12, 1: 7}, "U@G": {3: 1}}})
    assert text == '{\n\t"offsetTable":{\n\t\t"T@G":{0:12,1:7\n\t\t},\n\t\t"U@G":{3:1\n\t\t}\n\t}\n}'
    assert loads_fastjson(text) == {"offsetTable": {"T@G": {0: 12, 1: 7}, "U@G": {3: 1}}}


def test_empty_maps_and_no_trailing_newline() -> None:
    assert dumps_fastjson({"offsetTable": {}}) == '{\n\t"offsetTable":{}\n}'
    assert dumps_fastjson({}) == "{}"


def test_nulls_lists_and_beans() -> None:
    assert dumps_fastjson({"a": None, "b": 1}) == '{\n\t"b":1\n}'
    assert dumps_fastjson({"l": [1, 2], "one": ["x"], "none": []}) == (
        '{\n\t"l":[\n\t\t1,\n\t\t2\n\t],\n\t"one":["x"],\n\t"none":[]\n}'
    )
    assert dumps_fastjson(DataVersion(counter=3, timestamp=5)) == '{\n\t"counter":3,\n\t"timestamp":5\n}'
    assert dumps_fastjson(DataVersion(counter=3, timestamp=5, state_version=0)) == (
        '{\n\t"counter":3,\n\t"stateVersion":0,\n\t"timestamp":5\n}'
    )


def test_string_escapes_like_fastjson() -> None:
    s = 'q"b\\s/\b\t\n\f\r\x00\x0b\x1f\x7f\x9f\u2028\u2029é中\U0001f600'
    expected = '"q\\"b\\\\s/\\b\\t\\n\\f\\r\\u0000\\u000B\\u001F\\u007F\\u009F\\u2028\\u2029é中\U0001f600"'
    assert dumps_fastjson(s) == expected
    assert loads_fastjson(expected) == s


def test_parser_accepts_strict_json_and_surrogate_escapes() -> None:
    assert loads_fastjson('{"offsetTable":{"T@G":{"0":5}}}') == {"offsetTable": {"T@G": {"0": 5}}}
    assert loads_fastjson(' [1, -2, 3.5, true, false, null, "\\ud83d\\ude00"] ') == [
        1,
        -2,
        3.5,
        True,
        False,
        None,
        "\U0001f600",
    ]


@pytest.mark.parametrize("text", ["", "{", '{"a":1', '{"a" 1}', "{1:2,}x", '{"a":tru}', '"\\x"', "[1 2]"])
def test_parser_rejects_malformed_text(text: str) -> None:
    with pytest.raises(FastjsonDecodeError):
        loads_fastjson(text)


# ---- managers against the golden files -----------------------------------------------------------


@pytest.mark.parametrize(
    ("store", "file_name"),
    [(store, name) for store in STORES for name in sorted(MANAGERS)
     if (GOLDEN / store / "store" / "config" / name).exists()],
)
def test_manager_persists_golden_file_byte_for_byte(tmp_path: Path, store: str, file_name: str) -> None:
    source = GOLDEN / store / "store" / "config" / file_name
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    shutil.copyfile(source, root / "config" / file_name)
    manager = MANAGERS[file_name](root)
    assert manager.load() is True
    assert manager.encode().encode("utf-8") == source.read_bytes()
    manager.persist()
    assert (root / "config" / file_name).read_bytes() == source.read_bytes()
    assert (root / "config" / f"{file_name}.bak").read_bytes() == source.read_bytes()
    assert not (root / "config" / f"{file_name}.tmp").exists()


def test_golden_values(clean_store: Path) -> None:
    offsets = ConsumerOffsetManager(clean_store)
    assert offsets.load()
    assert offsets.query_offset("GoldenConsumerGroup", "GoldenTopicA", 0) == 350
    assert offsets.query_offset("GoldenPullGroup", "GoldenTopicB", 1) == 3
    assert offsets.query_offset("GoldenPullGroup", "GoldenTopicB", 7) == -1
    assert offsets.query_offsets("GoldenPullGroup", "GoldenBatch") == {1: 8}
    assert sorted(offsets.topics_of_group("GoldenPullGroup")) == ["GoldenBatch", "GoldenTopicB"]
    assert sorted(offsets.groups_of_topic("GoldenTopicB")) == ["GoldenConsumerGroup", "GoldenPullGroup"]

    delay = DelayOffsetManager(clean_store)
    assert delay.load()
    assert delay.offset_table == {1: 2, 3: 1}
    assert delay.query_offset(1) == 2
    assert delay.query_offset(2) == 0

    topics = TopicConfigManager(clean_store)
    assert topics.load()
    assert topics.data_version.counter == 10
    assert topics.data_version.timestamp == 1795307194082
    assert topics.names()[0] == "%RETRY%GoldenConsumerGroup"
    assert topics.get("GoldenTopicA") == TopicConfig("GoldenTopicA", read_queue_nums=4, write_queue_nums=4)
    tbw = topics.get("TBW102")
    assert tbw is not None and tbw.perm == 7 and tbw.read_queue_nums == 8
    assert topics.get("nope") is None

    groups = SubscriptionGroupManager(clean_store)
    assert groups.load()
    assert groups.data_version.counter == 3
    assert groups.get("GoldenConsumerGroup") == SubscriptionGroupConfig("GoldenConsumerGroup")
    assert len(groups.names()) == 10

    filters = ConsumerFilterManager(clean_store)
    assert filters.load()
    assert filters.filter_data_by_topic == {}


# ---- .bak fallback and errors --------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage", "wrong-shape", "missing"])
def test_falls_back_to_bak(clean_store: Path, damage: str) -> None:
    path = clean_store / "config" / "topics.json"
    good = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff" * 100)
    elif damage == "wrong-shape":
        path.write_bytes(b'{"topicConfigTable":[1,2]}')
    else:
        path.unlink()
    topics = TopicConfigManager(clean_store)
    assert topics.load() is True
    assert topics.data_version.counter == 9  # the .bak's version
    assert "GoldenTopicA" in topics.names()


def test_corrupt_file_without_bak_is_an_error(clean_store: Path) -> None:
    path = clean_store / "config" / "consumerOffset.json"
    path.write_bytes(path.read_bytes()[:40])
    (clean_store / "config" / "consumerOffset.json.bak").unlink()
    offsets = ConsumerOffsetManager(clean_store)
    with pytest.raises(ConfigFileError, match=r"consumerOffset\.json") as info:
        offsets.load()
    assert isinstance(info.value, RocketqError)
    assert offsets.offset_table == {}
    assert offsets.load(strict=False) is False


def test_corrupt_file_and_corrupt_bak_is_an_error(clean_store: Path) -> None:
    for name in ("delayOffset.json", "delayOffset.json.bak"):
        (clean_store / "config" / name).write_text('{"offsetTable":{1:x}}')
    with pytest.raises(ConfigFileError):
        DelayOffsetManager(clean_store).load()


def test_failed_load_leaves_state_unchanged(clean_store: Path) -> None:
    topics = TopicConfigManager(clean_store)
    assert topics.load()
    before = topics.names()
    for name in ("topics.json", "topics.json.bak"):
        (clean_store / "config" / name).write_text('{"topicConfigTable":{"A":{"perm":"x"}}}')
    assert topics.load(strict=False) is False
    assert topics.names() == before


def test_missing_files_load_as_empty(tmp_path: Path) -> None:
    for cls in MANAGERS.values():
        manager = cls(tmp_path / "store")
        assert manager.load() is True
    assert read_config_json(tmp_path / "none.json", lambda obj: obj) is None


def test_persist_keeps_previous_content_in_bak(clean_store: Path) -> None:
    path = clean_store / "config" / "consumerOffset.json"
    previous = path.read_bytes()
    offsets = ConsumerOffsetManager(clean_store)
    assert offsets.load()
    offsets.commit_offset("GoldenConsumerGroup", "GoldenTopicA", 2, 400)
    offsets.commit_offset("NewGroup", "GoldenTopicA", 1, 9)
    offsets.commit_offset("NewGroup", "GoldenTopicA", 0, 8)
    offsets.persist()
    assert (clean_store / "config" / "consumerOffset.json.bak").read_bytes() == previous
    text = path.read_text()
    assert '"GoldenTopicA@GoldenConsumerGroup":{0:350,1:350,2:400,3:350\n\t\t}' in text
    assert text.endswith('"GoldenTopicA@NewGroup":{0:8,1:9\n\t\t}\n\t}\n}')
    again = ConsumerOffsetManager(clean_store)
    assert again.load()
    assert again.offset_table == offsets.offset_table
    assert again.remove_group("NewGroup") == ["GoldenTopicA@NewGroup"]
    assert again.query_offset("NewGroup", "GoldenTopicA", 0) == -1


def test_persist_after_fallback_does_not_clobber_good_bak(clean_store: Path) -> None:
    path = clean_store / "config" / "topics.json"
    bak = clean_store / "config" / "topics.json.bak"
    good_bak = bak.read_bytes()
    path.write_bytes(b'{"dataVersion":{')
    topics = TopicConfigManager(clean_store)
    assert topics.load()
    topics.persist()
    assert bak.read_bytes() == good_bak
    assert path.read_bytes() == good_bak  # nothing changed since the .bak was loaded
    topics.put(TopicConfig("Extra"))
    topics.persist()
    assert bak.read_bytes() == good_bak  # now the previous (good) main file


def test_write_config_file_creates_directory_and_bak(tmp_path: Path) -> None:
    path = tmp_path / "store" / "config" / "x.json"
    write_config_file(path, "{}")
    assert path.read_text() == "{}"
    assert not path.with_name("x.json.bak").exists()
    write_config_file(path, '{\n\t"a":1\n}')
    assert path.with_name("x.json.bak").read_text() == "{}"
    assert not path.with_name("x.json.tmp").exists()


# ---- manager behaviour ---------------------------------------------------------------------------


def test_strict_json_with_quoted_integer_keys(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "consumerOffset.json").write_text('{"offsetTable": {"T@G": {"0": 5, "2": 7}}}')
    (config / "delayOffset.json").write_text('{"offsetTable": {"3": 4, "1": 2}}')
    offsets = ConsumerOffsetManager(tmp_path)
    assert offsets.load()
    assert offsets.offset_table == {"T@G": {0: 5, 2: 7}}
    delay = DelayOffsetManager(tmp_path)
    assert delay.load()
    assert delay.query_offset(3) == 4
    assert delay.encode() == '{\n\t"offsetTable":{1:2,3:4\n\t}\n}'


def test_empty_tables_are_written_like_rocketmq(tmp_path: Path) -> None:
    delay = DelayOffsetManager(tmp_path)
    delay.persist()
    assert (tmp_path / "config" / "delayOffset.json").read_bytes() == b'{\n\t"offsetTable":{}\n}'
    assert len((tmp_path / "config" / "delayOffset.json").read_bytes()) == 21
    filters = ConsumerFilterManager(tmp_path)
    filters.persist()
    assert (tmp_path / "config" / "consumerFilter.json").read_bytes() == b'{\n\t"filterDataByTopic":{}\n}'
    assert len((tmp_path / "config" / "consumerFilter.json").read_bytes()) == 27


def test_topic_updates_bump_version_and_keep_order(clean_store: Path) -> None:
    topics = TopicConfigManager(clean_store)
    assert topics.load()
    names = topics.names()
    version = topics.data_version.counter
    topics.put(TopicConfig("NewTopic", read_queue_nums=2, write_queue_nums=2))
    topics.update(TopicConfig("GoldenTopicA", read_queue_nums=8, write_queue_nums=8))
    assert topics.names() == [*names, "NewTopic"]
    assert topics.data_version.counter == version + 2
    assert abs(topics.data_version.timestamp - time.time() * 1000) < 60_000
    assert topics.remove("nope") is None
    assert topics.data_version.counter == version + 2
    removed = topics.remove("GoldenTx")
    assert removed is not None and removed.read_queue_nums == 2
    assert topics.data_version.counter == version + 3
    topics.persist()
    again = TopicConfigManager(clean_store)
    assert again.load()
    assert again.names() == [n for n in names if n != "GoldenTx"] + ["NewTopic"]
    topic_a = again.get("GoldenTopicA")
    assert topic_a is not None and topic_a.read_queue_nums == 8
    assert again.data_version == topics.data_version
    assert '\t\t"NewTopic":{\n\t\t\t"order":false,\n\t\t\t"perm":6,\n\t\t\t"readQueueNums":2,' in (
        (clean_store / "config" / "topics.json").read_text()
    )


def test_unknown_members_do_not_break_loading(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    (config / "topics.json").write_text(
        '{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":17},"topicConfigTable":'
        '{"T":{"attributes":{},"order":true,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
        '"topicName":"T","topicSysFlag":0,"writeQueueNums":4}},"somethingNew":[1,2]}'
    )
    topics = TopicConfigManager(tmp_path)
    assert topics.load()
    topic = topics.get("T")
    assert topic is not None and topic.order is True and topic.read_queue_nums == 4
    assert topics.data_version.counter == 3


def test_subscription_group_updates(tmp_path: Path) -> None:
    groups = SubscriptionGroupManager(tmp_path)
    assert groups.load()
    groups.put(SubscriptionGroupConfig("G1", retry_max_times=3))
    assert groups.data_version.counter == 1
    groups.persist()
    text = (tmp_path / "config" / "subscriptionGroup.json").read_text()
    assert text.endswith(
        '\t"subscriptionGroupTable":{\n\t\t"G1":{\n\t\t\t"brokerId":0,\n\t\t\t"consumeBroadcastEnable":true,'
        '\n\t\t\t"consumeEnable":true,\n\t\t\t"consumeFromMinEnable":true,\n\t\t\t"groupName":"G1",'
        '\n\t\t\t"notifyConsumerIdsChangedEnable":true,\n\t\t\t"retryMaxTimes":3,\n\t\t\t"retryQueueNums":1,'
        '\n\t\t\t"whichBrokerWhenConsumeSlowly":1\n\t\t}\n\t}\n}'
    )
    again = SubscriptionGroupManager(tmp_path)
    assert again.load()
    assert again.get("G1") == SubscriptionGroupConfig("G1", retry_max_times=3)
    assert again.remove("G1") is not None
    assert again.names() == []


def test_members_of_newer_versions_are_written_back(tmp_path: Path) -> None:
    text = (
        '{\n\t"dataVersion":{\n\t\t"counter":3,\n\t\t"stateVersion":0,\n\t\t"timestamp":17\n\t},'
        '\n\t"topicConfigTable":{\n\t\t"T":{\n\t\t\t"attributes":{},\n\t\t\t"order":false,\n\t\t\t"perm":6,'
        '\n\t\t\t"readQueueNums":4,\n\t\t\t"topicFilterType":"SINGLE_TAG",\n\t\t\t"topicName":"T",'
        '\n\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":4\n\t\t}\n\t}\n}'
    )
    topics = TopicConfigManager(tmp_path)
    topics.decode(text)
    assert topics.data_version.state_version == 0
    assert topics.encode() == text
