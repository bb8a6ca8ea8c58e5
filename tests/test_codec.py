"""The message codec against the spec's vectors and RocketMQ 4.9.4's own records."""

from __future__ import annotations

import base64
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketq.common.codec import (
    BLANK_MAGIC_CODE,
    PropertiesTooLongError,
    decode_record,
    decode_records_of,
    encode_batch_body,
    encode_one,
    encode_record,
    encode_records,
    read_size_and_magic,
    record_length,
    split_batch_body,
    store_timestamp_pos,
)
from rocketq.common.errors import CorruptRecordError
from rocketq.common.javacompat import crc32_masked, hashmap_order, hashmap_ordered, java_string_hash
from rocketq.common.message import (
    BORNHOST_V6_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    Message,
    MessageExt,
    properties_of_bytes,
    properties_to_string,
    string_to_properties,
)
from rocketq.common.message_id import (
    MessageIdError,
    UniqueIdGenerator,
    create_offset_message_id,
    decode_offset_message_id,
    uniq_key_client_ip,
)


@pytest.mark.parametrize(
    ("s", "h"),
    [("TagA", 2598919), ("TAG1", 2567159), ("é", 233), ("😀", 1772899), ("polygenelubricants", -2147483648),
     ("", 0), ("UNIQ_KEY", 488471169), ("ORIGIN_MESSAGE_ID", -1111989460)],
)
def test_java_string_hash(s: str, h: int) -> None:
    assert java_string_hash(s) == h


def test_crc32_masked() -> None:
    assert crc32_masked(b"Hello") == 0x77D18982
    assert crc32_masked(b"") == 0


def test_hashmap_order_matches_spec_example() -> None:
    client = hashmap_order(["TAGS", "KEYS", "UNIQ_KEY", "WAIT"], 16)
    assert client == ["KEYS", "UNIQ_KEY", "WAIT", "TAGS"]
    broker = hashmap_order([*client, "CLUSTER"], 128)
    assert broker == ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]


def test_property_decoding_rules() -> None:
    s = "a\x01b\x02\x01x\x02k\x01\x02ok\x01v\x01w\x02a\x01c\x02nosep\x02"
    assert string_to_properties(s) == {"a": "c", "ok": "v\x01w"}
    assert string_to_properties("") == {}
    assert string_to_properties("k\x01v") == {"k": "v"}


def _java_string_to_properties(s: str) -> dict[str, str]:
    """``string2messageProperties`` read plainly: split at 0x02, each item at its first 0x01, keep an item
    whose name and value are both non-empty, a later name winning."""
    props: dict[str, str] = {}
    for item in s.split("\x02"):
        name, sep, value = item.partition("\x01")
        if sep and name and value:
            props[name] = value
    return props


_SEGMENT = re.compile("(?:^|\x02)([^\x01\x02]+)\x01([^\x02]+)")


@given(st.text(alphabet="ab\x01\x02é", max_size=24))
def test_property_decoding_matches_the_plain_reading(s: str) -> None:
    """Against the plain reading and against a regex of a segment (name without separators, 0x01, a value without
    0x02, each at least one character, at the start or after 0x02): the same maps, names in the same order."""
    got = string_to_properties(s)
    assert list(got.items()) == list(_java_string_to_properties(s).items()) == list(dict(_SEGMENT.findall(s)).items())


SPEC_RECORD = bytes.fromhex(
    "000000C6DAA320A777D1898200000000000000000000000000000000000000000000000000000000"
    "0000018BCFE56800C0A8010A0000D4310000018BCFE5687BC0A8011400002A9F0000000000000000"
    "00000000000000054865" "6C6C6F09546F706963546573740" "05D"
    + b"UNIQ_KEY\x01C0A8010A30391B6D358647B760000000\x02CLUSTER\x01DefaultCluster\x02TAGS\x01TagA\x02"
    b"KEYS\x01k1\x02WAIT\x01true\x02".hex()
)


def test_worked_example_from_spec() -> None:
    """§14 is a 5.x record (trailing 0x02 after the last property): given those property
    bytes, the encoder reproduces it exactly."""
    props = {"UNIQ_KEY": "C0A8010A30391B6D358647B760000000", "CLUSTER": "DefaultCluster", "TAGS": "TagA",
             "KEYS": "k1", "WAIT": "true"}
    raw_props = "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode()
    msg = MessageExt(topic="TopicTest", body=b"Hello", properties=props, born_timestamp=1700000000000,
                     born_host=("192.168.1.10", 54321), store_timestamp=1700000000123,
                     store_host=("192.168.1.20", 10911), properties_bytes=raw_props)
    buf = encode_record(msg)
    assert len(buf) == 198 == msg.store_size
    assert bytes(buf) == SPEC_RECORD
    assert msg.msg_id == "C0A8011400002A9F0000000000000000"
    back = decode_record(buf, check_crc=True)
    assert back.properties == props and back.body == b"Hello" and back.store_timestamp == 1700000000123


def test_properties_are_written_like_rocketmq_4_9_4() -> None:
    """4.9.4 (the golden store) puts no separator after the last property."""
    msg = MessageExt(topic="TopicTest", body=b"Hello", properties={"TAGS": "TagA", "KEYS": "k1"})
    back = decode_record(encode_record(msg))
    assert back.properties_bytes == b"TAGS\x01TagA\x02KEYS\x01k1"
    assert back.store_size == 91 + 5 + 9 + len(back.properties_bytes)


def _golden_records(golden_clean: Path) -> list[tuple[int, bytes]]:
    out = []
    for f in sorted((golden_clean / "store" / "commitlog").iterdir()):
        data = f.read_bytes()
        base = int(f.name)
        pos = 0
        while pos + 8 <= len(data):
            total, magic = read_size_and_magic(data, pos)
            if magic == BLANK_MAGIC_CODE or total <= 0:
                break
            out.append((base + pos, data[pos : pos + total]))
            pos += total
    return out


def test_golden_records_reencode_byte_identical(golden_clean: Path, clean_dump: dict[str, Any]) -> None:
    records = _golden_records(golden_clean)
    dumped = {r["physicalOffset"]: r for r in clean_dump["records"] if r["type"] == "MESSAGE"}
    assert len(records) == len(dumped) == 1574
    for offset, raw in records:
        msg = decode_record(raw, check_crc=True)
        assert bytes(encode_record(msg)) == raw, offset
        d = dumped[offset]
        assert msg.topic == d["topic"] and msg.queue_id == d["queueId"] and msg.queue_offset == d["queueOffset"]
        assert msg.sys_flag == d["sysFlag"] and msg.flag == d["flag"] and msg.body_crc == d["bodyCRC"]
        assert msg.properties == d["properties"]
        assert msg.msg_id == d["msgId"]
        assert f"{msg.born_host[0]}:{msg.born_host[1]}" == d["bornHost"]
        assert msg.store_timestamp == d["storeTimestamp"]
        assert msg.prepared_transaction_offset == d["preparedTransactionOffset"]
        if "storedBody" in d:
            assert msg.body == base64.b64decode(d["storedBody"])


def test_golden_blank_records(clean_dump: dict[str, Any]) -> None:
    blanks = [r for r in clean_dump["records"] if r["type"] != "MESSAGE"]
    assert len(blanks) == 3
    for b in blanks:
        assert b["filePosition"] + b["totalSize"] == 1048576


def test_ipv6_hosts_round_trip() -> None:
    msg = MessageExt(topic="T6", body=b"x" * 10, born_host=("::1", 1234), store_host=("fe80::2", 10911),
                     properties={"a": "b"})
    buf = encode_record(msg)
    assert msg.sys_flag & BORNHOST_V6_FLAG and msg.sys_flag & STOREHOSTADDRESS_V6_FLAG
    assert len(buf) == record_length(msg.sys_flag, 10, 2, len(b"a\x01b")) == 91 + 10 + 2 + 3 + 24
    back = decode_record(buf)
    assert back.born_host == ("::1", 1234) and back.store_host == ("fe80::2", 10911)
    assert len(back.msg_id) == 56
    assert decode_offset_message_id(back.msg_id) == (("fe80::2", 10911), 0)


def _records_one_by_one(body: bytes) -> tuple[list[MessageExt], bool]:
    """decode_record record after record: what decode_records_of must give (and whether a record failed)."""
    out: list[MessageExt] = []
    pos = 0
    while pos + 8 <= len(body):
        try:
            msg = decode_record(body, pos)
        except CorruptRecordError:
            return out, True
        if msg.store_size <= 0:
            break
        out.append(msg)
        pos += msg.store_size
    return out, False


_RECORDS = st.lists(
    st.builds(
        MessageExt,
        topic=st.sampled_from(["T", "Topic-é", "T" * 127, "T" * 200]),
        body=st.binary(max_size=40),
        properties=st.dictionaries(st.sampled_from(["KEYS", "TAGS", "k", "é"]), st.text("ab é", min_size=1),
                                   max_size=3),
        born_host=st.sampled_from([("127.0.0.1", 1), ("10.1.2.3", 65535), ("::1", 7)]),
        store_host=st.sampled_from([("127.0.0.1", 10911), ("fe80::2", 10911)]),
        queue_id=st.integers(0, 7),
        queue_offset=st.integers(0, 1 << 40),
    ),
    max_size=5,
)


@given(_RECORDS, st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3), st.integers(0, 64))
def test_records_of_a_body_read_as_record_by_record(msgs: list[MessageExt], flips: list[tuple[int, int]],
                                                    cut: int) -> None:  # fmt: skip
    """A body of records (IPv4 and IPv6 hosts, v1 and v2 topics, empty bodies and properties), with bytes changed
    and its end cut off: the same messages and the same failure as decoding record after record."""
    body = bytearray(b"".join(bytes(encode_record(m, allow_v2=True)) for m in msgs))
    for at, value in flips:
        if body:
            body[at % len(body)] = value
    body = body[: max(0, len(body) - cut)] if cut < 32 else body
    got, error = decode_records_of(bytes(body))
    want, failed = _records_one_by_one(bytes(body))
    assert got == want
    assert (error is not None) == failed



@st.composite
def _batches(draw: st.DrawFn) -> list[MessageExt]:
    """Messages as a batch send makes them (one topic object, one born and one store host tuple, property bytes
    set), some of them differing in one of those."""
    topic = draw(st.sampled_from(["T", "Topic-é", "T" * 200]))
    born = draw(st.sampled_from([("127.0.0.1", 1), ("::1", 7)]))
    store = draw(st.sampled_from([("127.0.0.1", 10911), ("fe80::2", 10911)]))
    msgs = []
    for _ in range(draw(st.integers(1, 6))):
        props = draw(st.dictionaries(st.sampled_from(["KEYS", "TAGS", "é"]), st.text("ab é", min_size=1), max_size=2))
        raw = draw(st.sampled_from([None, properties_to_string(props).encode(), b"K\x01v"]))
        msgs.append(MessageExt(
            topic=draw(st.sampled_from([topic, topic, "Other", topic.encode().decode()])),  # equal, not the same
            body=draw(st.binary(max_size=30)), flag=draw(st.integers(0, 9)), properties=props,
            properties_bytes=raw, born_host=draw(st.sampled_from([born, born, ("10.0.0.9", 2), ("::1", 7)])),
            store_host=draw(st.sampled_from([store, store, ("127.0.0.1", 10911)])),
            queue_id=draw(st.integers(0, 7)), sys_flag=draw(st.sampled_from([0, 4, 8, 0x2C])),
            born_timestamp=draw(st.integers(0, 1 << 41)), reconsume_times=draw(st.integers(0, 3)),
        ))  # fmt: skip
    return msgs


@given(_batches())
def test_messages_encoded_together_are_each_record_as_encoded_alone(msgs: list[MessageExt]) -> None:
    """encode_records (the batch put's encoder, shared parts worked out once) against encode_one message by
    message: the same bytes, sizes, STORETIMESTAMP positions and fields left on each message."""
    alone = [dataclasses.replace(m) for m in msgs]
    want = b"".join(bytes(encode_one(m, allow_v2=True)) for m in alone)
    enc = encode_records(msgs, allow_v2=True)
    assert bytes(enc.data) == want
    assert enc.sizes == [m.store_size for m in alone] and enc.total == len(want)
    assert enc.ts_pos == [store_timestamp_pos(m.sys_flag) for m in alone]
    fields = ("sys_flag", "body_crc", "magic", "store_size", "properties_bytes")
    assert [[getattr(m, f) for f in fields] for m in msgs] == [[getattr(m, f) for f in fields] for m in alone]


def test_encode_records_of_nothing_and_of_properties_too_long() -> None:
    assert encode_records([]).total == 0
    host = ("127.0.0.1", 1)
    msgs = [MessageExt(topic="T", body=b"x", born_host=host, store_host=host, properties_bytes=b"k\x01v")
            for _ in range(2)]  # fmt: skip
    msgs[1].properties_bytes = b"k\x01" + b"v" * 40_000
    with pytest.raises(PropertiesTooLongError):
        encode_records(msgs)


def test_corrupt_records_are_rejected() -> None:
    buf = encode_record(MessageExt(topic="T", body=b"abc"))
    bad = bytearray(buf)
    bad[88] ^= 0x01  # first body byte (both hosts IPv4)
    with pytest.raises(CorruptRecordError):
        decode_record(bad, check_crc=True)
    with pytest.raises(CorruptRecordError):
        decode_record(buf[:50])
    with pytest.raises(CorruptRecordError):
        decode_record(b"\0" * 100)


def test_topic_too_long_for_v1() -> None:
    with pytest.raises(ValueError):
        encode_record(MessageExt(topic="T" * 128))
    buf = encode_record(MessageExt(topic="T" * 200), allow_v2=True)
    assert decode_record(buf).topic == "T" * 200


def test_offset_message_id() -> None:
    mid = create_offset_message_id(("127.0.0.1", 10911), 1048576)
    assert mid == "7F00000100002A9F0000000000100000"
    assert decode_offset_message_id(mid) == (("127.0.0.1", 10911), 1048576)
    with pytest.raises(MessageIdError):
        decode_offset_message_id("XYZ")


def test_uniq_key_format() -> None:
    gen = UniqueIdGenerator("192.0.2.2", pid=0x5152, loader_hash=0x5FFD2B27)
    a, b = gen.next_id(), gen.next_id()
    assert len(a) == 32 and a.startswith("C000020251525FFD2B27") and a != b
    assert int(b[-4:], 16) == int(a[-4:], 16) + 1
    assert uniq_key_client_ip(a) == "192.0.2.2"
    assert uniq_key_client_ip("C000020251525FFD2B276C3D550D0000") == "192.0.2.2"
    # A batch of ids takes the counter values after b, one each, and the next id follows them.
    batch = gen.next_ids(3)
    counters = [int(x[-4:], 16) for x in [*batch, gen.next_id()]]
    assert counters == [int(b[-4:], 16) + i for i in range(1, 5)]


def test_batch_body_in_java_order() -> None:
    msg = Message("B", b"x", 0, {"WAIT": "true", "TAGS": "t", "KEYS": "k", "UNIQ_KEY": "U"})
    _, _, [raw] = split_batch_body(encode_batch_body([msg], java_order=True))
    assert raw == b"KEYS\x01k\x02UNIQ_KEY\x01U\x02WAIT\x01true\x02TAGS\x01t"  # a HashMap's order of these names



@given(st.dictionaries(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "WAIT", "a", "é", "__RMQ.TRANSIENT.X", "Zz"]),
                       st.one_of(st.none(), st.text("ab é\x01", max_size=4)), max_size=8))
def test_batch_properties_in_java_order_as_a_reordered_map_encodes(props: dict[str, str]) -> None:
    """The batch body's properties (names in a HashMap's order, values joined in C) against encoding the map
    reordered: None values and transient names left out, non-ASCII text, every set of names."""
    msg = Message("B", b"x", 0, props)
    _, _, [raw] = split_batch_body(encode_batch_body([msg], java_order=True))
    assert raw == properties_to_string(hashmap_ordered(props)).encode()


def test_batch_body_round_trip() -> None:
    msgs = [Message("B", b"one", 1, {"KEYS": "k1"}), Message("B", b"", 0, {})]
    flags, bodies, raws = split_batch_body(encode_batch_body(msgs))
    items = list(zip(bodies, flags, properties_of_bytes(raws), raws, strict=True))
    assert items == [(b"one", 1, {"KEYS": "k1"}, b"KEYS\x01k1"), (b"", 0, {}, b"")]
