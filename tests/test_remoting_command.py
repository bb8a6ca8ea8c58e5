"""RemotingCommand against the frames RocketMQ 4.9.4 put on the wire, and the header rules of the spec (§2–§4)."""

from __future__ import annotations

import base64
import dataclasses
import enum
import gzip
import json
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import GOLDEN
from rocketq.common.javacompat import hashmap_order
from rocketq.remoting import command as command_module
from rocketq.remoting.codes import (
    CURRENT_VERSION,
    GOLDEN_CAPTURE_VERSION,
    LanguageCode,
    MQVersion,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from rocketq.remoting.command import (
    HeaderFields,
    RemotingCommand,
    UnescapedCommand,
    create_request,
    create_response,
    decode_custom_header,
    decode_json_header,
    decode_rocketmq_header,
    encode_custom_header,
    encode_json_header,
    make_response_for,
    next_opaque,
    plain_json_text,
)
from rocketq.remoting.errors import FrameError, HeaderFieldError

CAPTURES = GOLDEN / "remoting-4.9.4"


@cache
def index() -> dict[str, Any]:
    return json.loads((CAPTURES / "index.json").read_text(encoding="utf-8"))


def captured_sides() -> list[tuple[str, str]]:
    return [
        (e["id"], side) for e in index()["exchanges"] for side in ("request", "response") if e.get(side) is not None
    ]


def side_of(exchange_id: str, side: str) -> dict[str, Any]:
    for e in index()["exchanges"]:
        if e["id"] == exchange_id:
            return e[side]
    raise KeyError(exchange_id)


@cache
def all_frames() -> list[bytes]:
    with gzip.open(CAPTURES / "all-frames.jsonl.gz", "rt", encoding="utf-8") as f:
        return [base64.b64decode(json.loads(line)["raw"]) for line in f]


def header_as_index_shows_it(cmd: RemotingCommand) -> dict[str, Any]:
    """The decoded header in the form index.json records it for the frame's serialize type."""
    if cmd.serialize_type == SerializeType.JSON:
        out: dict[str, Any] = {"code": cmd.code}
        if cmd.ext_fields is not None:
            out["extFields"] = cmd.ext_fields
        out.update(flag=cmd.flag, language=cmd.language.name, opaque=cmd.opaque)
        if cmd.remark is not None:
            out["remark"] = cmd.remark
        out.update(serializeTypeCurrentRPC="JSON", version=cmd.version)
        return out
    # ROCKETMQ cannot tell an empty extFields from none (both are a zero length); the index shows {}.
    return {
        "code": cmd.code,
        "language": int(cmd.language),
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
        "remark": cmd.remark,
        "extFields": cmd.ext_fields or {},
    }


# --------------------------------------------------------------------------------------------------
# The captures
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("exchange_id", "side"), captured_sides())
def test_captured_frame_decodes_to_the_indexed_header(exchange_id: str, side: str) -> None:
    entry = side_of(exchange_id, side)
    raw = (CAPTURES / entry["file"]).read_bytes()
    cmd = RemotingCommand.decode(raw)

    assert len(raw) == entry["frameLength"]
    assert len(cmd.body or b"") == entry["bodyLength"]
    assert len(cmd.encode_header()) == entry["headerLength"]
    expected = entry["header"]
    got = header_as_index_shows_it(cmd)
    assert got == expected
    # Same entry order as on the wire, not only the same entries.
    assert list((got.get("extFields") or {}).items()) == list((expected.get("extFields") or {}).items())
    assert cmd.version == GOLDEN_CAPTURE_VERSION == MQVersion.V4_9_4
    assert cmd.is_response == (side == "response")
    if side == "request":
        assert cmd.code in RequestCode.__members__.values()
    else:
        assert ResponseCode(cmd.code).name == entry["responseCodeName"]


def test_both_serializations_are_captured() -> None:
    types = {RemotingCommand.decode(raw).serialize_type for raw in all_frames()}
    assert types == {SerializeType.JSON, SerializeType.ROCKETMQ}
    assert len(all_frames()) == 255


def test_every_captured_frame_reencodes_to_the_same_bytes() -> None:
    # Decoding keeps the extFields entries in wire order, so each frame re-encodes byte for byte in its own
    # serialize type: for JSON that takes fastjson's member order, compact form and string escapes; for
    # ROCKETMQ the exact length-prefixed layout. What could not be byte-identical are headers written by
    # non-Java peers (a C++ trailing newline, ali-ons' member order and numeric values, "remark":"");
    # those are normalised and compared semantically in test_foreign_json_headers_*.
    for raw in all_frames():
        cmd = RemotingCommand.decode(raw)
        assert cmd.encode() == raw, cmd


# FastCodesHeader classes (SendMessageResponseHeader, PullMessageRequestHeader, PullMessageResponseHeader)
# write their own fields first, in declaration order, before the HashMap entries, when Java encodes ROCKETMQ.
# The other extFields orders on the wire are java.util.HashMap iteration orders.
FAST_CODED = {
    "030-rocketmq-SEND_MESSAGE-response.bin",
    "032-rocketmq-SEND_BATCH_MESSAGE-response.bin",
    "038-rocketmq-PULL_MESSAGE-found-request.bin",
    "038-rocketmq-PULL_MESSAGE-found-response.bin",
}


def test_extfields_orders_on_the_wire_are_java_hashmap_orders() -> None:
    not_hashmap = set()
    for exchange_id, side in captured_sides():
        entry = side_of(exchange_id, side)
        keys = list((entry["header"].get("extFields") or {}).keys())
        if hashmap_order(keys) != keys:
            not_hashmap.add(entry["file"])
    assert not_hashmap == FAST_CODED


@pytest.mark.parametrize(("exchange_id", "side"), captured_sides())
def test_commands_built_from_the_index_encode_like_java(exchange_id: str, side: str) -> None:
    entry = side_of(exchange_id, side)
    raw = (CAPTURES / entry["file"]).read_bytes()
    h = entry["header"]
    st = SerializeType(raw[4])
    ext = h.get("extFields")
    if ext is not None and entry["file"] not in FAST_CODED:
        ext = {k: ext[k] for k in hashmap_order(list(ext))}  # the order a Java HashMap gives them
    cmd = RemotingCommand(
        code=h["code"],
        language=LanguageCode.parse(h["language"]),
        version=h["version"],
        opaque=h["opaque"],
        flag=h["flag"],
        remark=h.get("remark"),
        ext_fields=dict(ext) if ext else (None if st == SerializeType.ROCKETMQ else ext),
        body=RemotingCommand.decode(raw).body,
        serialize_type=st,
    )
    assert cmd.encode() == raw
    if entry["file"] in FAST_CODED:
        # In HashMap order these frames differ from Java's bytes but mean the same.
        hashed = dataclasses.replace(cmd, ext_fields={k: ext[k] for k in hashmap_order(list(ext))})
        assert hashed.encode() != raw
        again = RemotingCommand.decode(hashed.encode())
        assert again == RemotingCommand.decode(raw)


def test_responses_built_like_a_java_server_match_the_capture() -> None:
    request = RemotingCommand.decode((CAPTURES / "014-json-QUERY_CONSUMER_OFFSET-request.bin").read_bytes())
    response = make_response_for(request, ext_fields={"offset": 0}, version=GOLDEN_CAPTURE_VERSION)
    assert response.encode() == (CAPTURES / "014-json-QUERY_CONSUMER_OFFSET-response.bin").read_bytes()

    request = RemotingCommand.decode((CAPTURES / "018-json-UNREGISTER_CLIENT-request.bin").read_bytes())
    response = make_response_for(request, ext_fields={}, version=GOLDEN_CAPTURE_VERSION)
    assert response.encode() == (CAPTURES / "018-json-UNREGISTER_CLIENT-response.bin").read_bytes()

    # A ROCKETMQ request still gets a JSON reply from rocketq.
    request = RemotingCommand.decode((CAPTURES / "037-rocketmq-QUERY_CONSUMER_OFFSET-request.bin").read_bytes())
    assert request.serialize_type == SerializeType.ROCKETMQ
    response = make_response_for(request, ext_fields={"offset": 0})
    assert response.serialize_type == SerializeType.JSON
    assert response.opaque == request.opaque and response.is_response and not response.is_oneway


# --------------------------------------------------------------------------------------------------
# The spec's examples
# --------------------------------------------------------------------------------------------------


def test_spec_rocketmq_worked_example() -> None:
    expected = bytes.fromhex(
        "00000025 01000021 0069 00 01df 00000001 00000000 00000000 0000000c 0005746f706963 0000000154"
    )
    cmd = create_request(105, {"topic": "T"}, opaque=1, version=479, serialize_type=SerializeType.ROCKETMQ)
    assert cmd.encode() == expected
    assert len(expected) == 41
    assert RemotingCommand.decode(expected) == cmd


def test_spec_json_example() -> None:
    cmd = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, opaque=1, version=479)
    header = (
        b'{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,'
        b'"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    assert cmd.encode() == bytes.fromhex("0000007f0000007b") + header
    response = create_response(ResponseCode.SUCCESS, opaque=1, version=479)
    assert response.encode_header() == (
        b'{"code":0,"flag":1,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}'
    )


# --------------------------------------------------------------------------------------------------
# JSON header rules (§3.1)
# --------------------------------------------------------------------------------------------------


def test_foreign_json_headers_cpp() -> None:
    header = (
        b'{"code":310,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","a":"PG_TEST","d":4,"e":0,'
        b'"g":"1795305868677","k":"0","m":"1","n":null,"o":1.5,"p":true},"flag":0,"language":"CPP",'
        b'"opaque":1,"remark":"","version":333}\n'
    )
    cmd = decode_json_header(header)
    assert cmd.code == RequestCode.SEND_MESSAGE_V2
    assert cmd.language == LanguageCode.CPP
    assert cmd.version == MQVersion.V4_6_0
    assert cmd.remark == ""
    assert cmd.ext_fields == {
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "a": "PG_TEST",
        "d": "4",
        "e": "0",
        "g": "1795305868677",
        "k": "0",
        "m": "1",
        "o": "1.5",
        "p": "true",
    }
    assert cmd.header.get_bool("m") is True  # C++ batch flag "1"
    assert cmd.header.get_bool("k") is False
    # Re-encoded the Java way: sorted members, string values, no newline; the meaning is kept.
    again = decode_json_header(cmd.encode_header())
    assert again == cmd
    assert b'"d":"4"' in cmd.encode_header()


def test_foreign_json_headers_ali_ons_order_and_defaults() -> None:
    header = b'{"code":310,"language":"JAVA","opaque":2,"flag":0,"version":121,"extFields":{"d":4,"k":false}}'
    cmd = decode_json_header(header)
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (310, 2, 0, 121)
    assert cmd.ext_fields == {"d": "4", "k": "false"}

    empty = decode_json_header(b"{}")
    assert (empty.code, empty.language, empty.version, empty.opaque, empty.flag) == (0, LanguageCode.JAVA, 0, 0, 0)
    assert empty.remark is None and empty.ext_fields is None

    assert decode_json_header(b'{"language":"GO"}').language == LanguageCode.GO
    assert decode_json_header(b'{"language":"KOTLIN"}').language == LanguageCode.OTHER
    assert decode_json_header(b'{"language":9}').language == LanguageCode.GO
    assert decode_json_header(b'{"code":"105","opaque":"7"}').code == 105
    assert decode_json_header(b'{"code":1,"unknown":{"x":[1]}}').code == 1
    # Whitespace around the object, and fastjson's bare names: past the standard scanner, the lenient parser.
    assert decode_json_header(b' {"code":2}\r\n ').code == 2
    assert decode_json_header(b'{code:3,extFields:{a:1}}').ext_fields == {"a": "1"}


@pytest.mark.parametrize(
    "header",
    [b"not json", b"[1,2]", b'{"code":"abc"}', b'{"code":true}', b'{"extFields":[1]}', b'{"code":1',
     b'{"code":1} x', b'{"code":1}{}'],
)
def test_bad_json_headers(header: bytes) -> None:
    with pytest.raises(FrameError):
        decode_json_header(header)


# JSON values a header member may hold, as peers write them and beyond: the fast decoder (msgspec) must read each
# header exactly as the standard library's path does, or refuse it and leave it to that path.
_JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
)  # fmt: skip
_JSON_VALUES = st.recursive(_JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=2), st.dictionaries(st.text(max_size=3), inner, max_size=2)), max_leaves=4)  # fmt: skip
_MEMBER_NAMES = st.sampled_from(["code", "language", "version", "opaque", "flag", "remark", "extFields",
                                 "serializeTypeCurrentRPC", "other"])  # fmt: skip


@st.composite
def _json_header_texts(draw: st.DrawFn) -> bytes:
    members: dict[str, object] = {}
    for name in draw(st.lists(_MEMBER_NAMES, max_size=8)):
        if name == "extFields" and draw(st.booleans()):
            members[name] = draw(st.dictionaries(st.text(max_size=4), st.one_of(st.text(max_size=8), _JSON_VALUES),
                                                 max_size=5))  # fmt: skip
        elif name in ("code", "version", "opaque", "flag") and draw(st.booleans()):
            members[name] = draw(st.integers(min_value=-(1 << 66), max_value=1 << 66))
        elif name == "language" and draw(st.booleans()):
            members[name] = draw(st.sampled_from(["JAVA", "CPP", "GO", "PYTHON", "KOTLIN", 9, 0]))
        else:
            members[name] = draw(_JSON_VALUES)
    text = json.dumps(members, ensure_ascii=draw(st.booleans()))
    how = draw(st.sampled_from(["plain", "control", "nan", "trailing", "lone-surrogate", "bad-utf8", "spaces"]))
    if how == "control":
        text = text.replace('"', '"\x01', 1)
    elif how == "nan":
        text = text.replace("}", ',"x":NaN}', 1) if members else '{"x":NaN}'
    elif how == "trailing":
        text += " x"
    elif how == "lone-surrogate":
        text = text.replace("}", ',"remark":"\\ud800"}', 1) if members else '{"remark":"\\ud800"}'
    elif how == "spaces":
        text = "  " + text + "\r\n"
    data = text.encode("utf-8", "surrogatepass")
    if how == "bad-utf8":
        data = data.replace(b'"', b'"\xff', 1)
    return data


def _header_reading(data: bytes) -> object:
    try:
        cmd = decode_json_header(data)
    except FrameError:
        return FrameError
    return dataclasses.astuple(cmd)


@given(_json_header_texts(), st.booleans())
def test_json_headers_read_alike_with_and_without_the_fast_decoder(data: bytes, memview: bool) -> None:
    assert command_module._FAST_HEADER is not None, "msgspec is a dependency: the fast path must be on"
    fast = _header_reading(memoryview(data) if memview else data)
    saved = command_module._FAST_HEADER, command_module._FAST_JSON
    command_module._FAST_HEADER = command_module._FAST_JSON = None
    try:
        standard = _header_reading(data)
    finally:
        command_module._FAST_HEADER, command_module._FAST_JSON = saved
    assert fast == standard


def test_ext_values_are_written_as_json_strings() -> None:
    class Color(enum.Enum):
        RED = 1

    cmd = create_request(10, {"queueId": 3, "batch": True, "gone": None, "color": Color.RED, "ratio": 0.5, "s": "x"})
    header = cmd.encode_header()
    assert b'"extFields":{"queueId":"3","batch":"true","color":"RED","ratio":"0.5","s":"x"}' in header
    cmd.set_ext("queueId", 4).set_ext("s", None)
    assert cmd.ext_fields == {"queueId": "4", "batch": "true", "color": "RED", "ratio": "0.5"}


def test_strings_are_escaped_as_fastjson_escapes_them() -> None:
    cmd = create_response(1, remark='a"b\\c\nd\u0001é/\u2028\x7f', opaque=5)
    header = cmd.encode_header()
    assert '"remark":"a\\"b\\\\c\\nd\\u0001é/\\u2028\\u007F"'.encode() in header
    assert decode_json_header(header).remark == cmd.remark


# --------------------------------------------------------------------------------------------------
# ROCKETMQ header rules (§3.2)
# --------------------------------------------------------------------------------------------------


def test_rocketmq_empty_strings_read_as_null() -> None:
    cmd = create_request(34, {"a": "1", "empty": ""}, remark="", opaque=9, serialize_type=SerializeType.ROCKETMQ)
    again = RemotingCommand.decode(cmd.encode())
    assert again.remark is None
    assert again.ext_fields == {"a": "1"}
    assert (
        RemotingCommand.decode(create_request(34, {}, serialize_type=SerializeType.ROCKETMQ).encode()).ext_fields
        is None
    )


def test_rocketmq_code_and_version_are_16_bits() -> None:
    cmd = create_request(RequestCode.POP_MESSAGE, opaque=1, serialize_type=SerializeType.ROCKETMQ)
    again = RemotingCommand.decode(cmd.encode())
    assert again.code == ((200050 + 0x8000) & 0xFFFF) - 0x8000  # what Java's (short) cast leaves
    assert again.code != RequestCode.POP_MESSAGE
    assert RemotingCommand.decode(cmd.encode(SerializeType.JSON)).code == RequestCode.POP_MESSAGE


def _rocketmq(remark: bytes = b"", ext: bytes = b"", ext_len: int | None = None, tail: bytes = b"") -> bytes:
    fixed = bytes.fromhex("0022 00 0191 00000001 00000000")
    size = len(ext) if ext_len is None else ext_len
    return fixed + len(remark).to_bytes(4, "big") + remark + size.to_bytes(4, "big", signed=True) + ext + tail


def test_rocketmq_header_parses_a_valid_layout() -> None:
    entry = (3).to_bytes(2, "big") + b"key" + (2).to_bytes(4, "big") + "é".encode()
    cmd = decode_rocketmq_header(_rocketmq(b"hi", entry))
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.remark) == (34, LanguageCode.JAVA, 401, 1, "hi")
    assert cmd.ext_fields == {"key": "é"}


def _plain_ext_reading(block: bytes) -> dict[str, str]:
    """extFields as RocketMQSerializable.mapDeserialize reads them, entry by entry (the reference)."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(block):
        key_len = int.from_bytes(block[pos : pos + 2], "big", signed=True)
        key = block[pos + 2 : pos + 2 + key_len].decode("utf-8", "replace")
        pos += 2 + key_len
        value_len = int.from_bytes(block[pos : pos + 4], "big", signed=True)
        value = block[pos + 4 : pos + 4 + value_len].decode("utf-8", "replace")
        pos += 4 + value_len
        if key_len and value_len:
            out[key] = value
    return out


_TEXT_BYTES = st.one_of(st.text(max_size=12).map(str.encode), st.binary(max_size=12))


@given(st.lists(st.tuples(_TEXT_BYTES, _TEXT_BYTES), max_size=12), st.booleans())
def test_rocketmq_ext_fields_read_as_entry_by_entry(entries: list[tuple[bytes, bytes]], memview: bool) -> None:
    """ASCII blocks (one decode, then slices), others (UTF-8 with U+FFFD for bad bytes, entry by entry), empty
    keys or values left out, a repeated key keeping its last value: as a plain reading of the layout."""
    block = b"".join(len(k).to_bytes(2, "big") + k + len(v).to_bytes(4, "big") + v for k, v in entries)
    header = _rocketmq(b"", block)
    cmd = decode_rocketmq_header(memoryview(bytearray(header)) if memview else header)
    assert cmd.ext_fields == (_plain_ext_reading(block) if block else None)


def _strict_ext_reading(block: bytes) -> dict[str, str] | None:
    """The plain reading when the entries fill the block exactly with no negative length, else None (refused)."""
    pos = 0
    while pos < len(block):
        if pos + 2 > len(block):
            return None
        key_len = int.from_bytes(block[pos : pos + 2], "big", signed=True)
        pos += 2 + key_len
        if key_len < 0 or pos + 4 > len(block):
            return None
        value_len = int.from_bytes(block[pos : pos + 4], "big", signed=True)
        pos += 4 + value_len
        if value_len < 0 or pos > len(block):
            return None
    return _plain_ext_reading(block)


@given(st.lists(st.one_of(st.binary(max_size=3), st.sampled_from([b"\x00\x01k", b"\x00\x00\x00\x02", b"\xff\xff",
                                                                  b"\x80\x00\x00\x00", "é".encode()])), max_size=12))
def test_any_rocketmq_ext_block_is_read_as_entry_by_entry_or_refused(pieces: list[bytes]) -> None:
    """Arbitrary bytes as an extFields block: refused with FrameError exactly when a plain reading finds an entry
    cut short, a negative length or a part past the block; read as that plain reading otherwise."""
    block = b"".join(pieces)
    expected = _strict_ext_reading(block)
    if expected is None:
        with pytest.raises(FrameError):
            decode_rocketmq_header(_rocketmq(b"", block))
    else:
        assert decode_rocketmq_header(_rocketmq(b"", block)).ext_fields == (expected if block else None)



def _ext_block(entries: list[tuple[bytes, bytes]]) -> bytes:
    return b"".join(len(k).to_bytes(2, "big") + k + len(v).to_bytes(4, "big") + v for k, v in entries)


def test_an_ext_layout_seen_twice_is_read_by_one_unpack_and_blocks_of_its_size_still_read_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The layout cache: learned from the second block of the same lengths, then used only for a block of the same
    lengths; a block of the same size in another layout, or not ASCII, or with an empty entry, is read entry by
    entry. Every block comes out as the plain reading."""
    monkeypatch.setattr(command_module, "_ext_layouts", {})
    first = _ext_block([(b"a", b"group1"), (b"b", b"TopicA"), (b"e", b"3"), (b"i", b"KEYS\x01k-01\x02")])
    size = len(first)
    same_layout = _ext_block([(b"a", b"group2"), (b"b", b"TopicB"), (b"e", b"7"), (b"i", b"KEYS\x01k-02\x02")])
    other_layout = _ext_block([(b"a", b"group22"), (b"b", b"TopicB"), (b"e", b"7"), (b"i", b"KEYS\x01k-2\x02")])
    # The same lengths (so the same reader) but other keys: read with its own keys, not the layout's.
    other_keys = _ext_block([(b"x", b"group3"), (b"b", b"TopicC"), (b"y", b"8"), (b"i", b"KEYS\x01k-03\x02")])
    not_ascii = _ext_block([(b"a", b"gr\xfcp12"), (b"b", b"TopicB"), (b"e", b"7"), (b"i", b"KEYS\x01k-02\x02")])
    empty_value = _ext_block([(b"a", b""), (b"bb", b"TopicBB"), (b"e", b"7"), (b"i", b"KEYS\x01k-000002\x02")])
    assert len({size, len(same_layout), len(other_layout), len(other_keys), len(not_ascii), len(empty_value)}) == 1

    def read(block: bytes) -> dict[str, str] | None:
        return decode_rocketmq_header(_rocketmq(b"", block)).ext_fields

    assert read(first) == _plain_ext_reading(first)
    assert command_module._ext_layouts[size][1] is None  # seen once: remembered, no reader yet
    assert read(same_layout) == _plain_ext_reading(same_layout)
    reader = command_module._ext_layouts[size][1]
    assert reader is not None and reader.size == size
    for block in (not_ascii, empty_value, first, other_layout, first, other_keys, same_layout, first, other_keys):
        assert read(block) == _plain_ext_reading(block)
    assert command_module._ext_layouts[size][1] is not None
    # The keys of a known layout are text made once: two blocks with those keys share the key objects.
    one = _ext_block([(b"group", b"g1"), (b"topic", b"T1")])
    two = _ext_block([(b"group", b"g2"), (b"topic", b"T2")])
    three = _ext_block([(b"grouq", b"g3"), (b"topic", b"T3")])
    for block in (one, two):
        read(block)
    keys2, keys1, keys3 = (list(read(block) or {}) for block in (two, one, three))
    assert keys1 == keys2 == ["group", "topic"] and keys1[0] is keys2[0] and keys1[1] is keys2[1]
    assert keys3 == ["grouq", "topic"]

    # A reader is used at all: a block it reads is not read entry by entry.
    monkeypatch.setattr(command_module, "_unpack_u16", None)
    assert read(same_layout) == {"a": "group2", "b": "TopicB", "e": "7", "i": "KEYS\x01k-02\x02"}
    with pytest.raises(TypeError):
        read(other_layout)


def test_the_ext_layout_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(command_module, "_ext_layouts", {})
    for n in range(1, 3 * command_module._EXT_LAYOUTS_MAX):
        block = _ext_block([(b"k", b"v" * n)])
        assert decode_rocketmq_header(_rocketmq(b"", block)).ext_fields == {"k": "v" * n}
        assert len(command_module._ext_layouts) <= command_module._EXT_LAYOUTS_MAX


@pytest.mark.parametrize(
    "header",
    [
        b"\x00" * 20,  # shorter than the fixed part
        _rocketmq()[:-1],
        bytes.fromhex("0022 00 0191 00000001 00000000 00000064") + b"\x00" * 4,  # remark longer than the header
        _rocketmq(ext=b"\x00\x01k", ext_len=40),  # extFields longer than the header
        _rocketmq(ext=b"", ext_len=-1),
        _rocketmq(ext=b"\x00"),  # entry cut inside the key length
        _rocketmq(ext=b"\xff\xff" + b"\x00" * 4),  # negative key length
        _rocketmq(ext=b"\x00\x01k\x00\x00\x00\x09v"),  # value runs past the area
        _rocketmq(ext=b"\x00\x01k\x80\x00\x00\x00"),  # negative value length
        _rocketmq(tail=b"junk"),  # bytes after the extFields
    ],
)
def test_bad_rocketmq_headers(header: bytes) -> None:
    with pytest.raises(FrameError):
        decode_rocketmq_header(header)


def test_frame_level_errors() -> None:
    good = create_request(34, {"a": "b"}).encode()
    with pytest.raises(FrameError, match="length field"):
        RemotingCommand.decode(good + b"x")
    with pytest.raises(FrameError, match="shorter"):
        RemotingCommand.decode(good[:6])
    with pytest.raises(FrameError, match="serialize type"):
        RemotingCommand.decode(good[:4] + b"\x02" + good[5:])
    with pytest.raises(FrameError, match="header length"):
        RemotingCommand.decode(good[:5] + b"\x7f\xff\xff" + good[8:])


# --------------------------------------------------------------------------------------------------
# Factories, flags and typed header access
# --------------------------------------------------------------------------------------------------


def test_factories_and_flags() -> None:
    first, second = next_opaque(), next_opaque()
    assert second == first + 1
    request = create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {"queueId": 1}, oneway=True)
    assert request.is_oneway and not request.is_response
    assert request.version == CURRENT_VERSION == MQVersion.V5_3_3
    assert request.opaque > second
    response = make_response_for(request, ResponseCode.TOPIC_NOT_EXIST, "no route", body=b"x")
    assert response.is_response and response.opaque == request.opaque and response.flag == 1
    assert (response.code, response.remark, response.body) == (17, "no route", b"x")
    assert create_response().code == ResponseCode.SUCCESS
    assert RemotingCommand(code=1, flag=3).is_oneway
    assert "PULL_MESSAGE" in repr(create_request(11, body=b"abc")) and "<3 bytes>" in repr(
        create_request(11, body=b"abc")
    )


def test_typed_header_access() -> None:
    h = HeaderFields(
        {
            "queueId": "3",
            "offset": "9223372036854775807",
            "neg": "-5",
            "plus": "+5",
            "big": "2147483648",
            "t": "TRUE",
            "one": "1",
            "zero": "0",
            "yes": "yes",
            "space": " 5",
            "d": "1.5",
            "bad": "12a",
        }
    )
    assert h.get_int("queueId") == 3
    assert h.get_long("offset") == 2**63 - 1
    assert h.get_int("neg") == -5 and h.get_int("plus") == 5
    assert h.get_long("big") == 2**31
    assert h.get_bool("t") is True and h.get_bool("one") is True
    assert h.get_bool("zero") is False and h.get_bool("yes") is False
    assert h.get_float("d") == 1.5
    assert h.get_str("queueId") == "3"
    assert h.get_int("missing", None) is None and h.get_bool("missing", False) is False
    assert h.get_str("missing", "dflt") == "dflt"
    with pytest.raises(HeaderFieldError, match="<topic> is null") as info:
        h.get_str("topic")
    assert info.value.field == "topic"
    for name, getter in [("big", h.get_int), ("space", h.get_int), ("bad", h.get_long), ("bad", h.get_float)]:
        with pytest.raises(HeaderFieldError, match=f"<{name}>"):
            getter(name)
    assert RemotingCommand(code=1).header.get_int("x", 7) == 7  # no extFields at all


class ExpressionType(enum.Enum):
    TAG = "TAG"
    SQL92 = "SQL92"


@dataclasses.dataclass
class PullMessageRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    subscription: str | None = None
    sub_version: int = 0
    expression_type: ExpressionType | None = None


@dataclasses.dataclass
class UnregisterClientRequestHeader:
    client_id: str = dataclasses.field(metadata={"json": "clientID"})
    producer_group: str | None = None
    consumer_group: str | None = None


def test_custom_header_dataclasses() -> None:
    for name in ("015-json-PULL_MESSAGE-found-request.bin", "038-rocketmq-PULL_MESSAGE-found-request.bin"):
        cmd = RemotingCommand.decode((CAPTURES / name).read_bytes())
        pull = cmd.decode_custom_header(PullMessageRequestHeader)
        assert pull.consumer_group == "WireConsumerGroup"
        assert (pull.queue_id, pull.queue_offset, pull.max_msg_nums, pull.sys_flag) == (0, 0, 32, 2)
        assert pull.suspend_timeout_millis == 15000 and pull.sub_version > 1_700_000_000_000
        assert pull.expression_type is ExpressionType.TAG and pull.subscription is None
        fields = encode_custom_header(pull)
        assert fields == {k: v for k, v in cmd.ext_fields.items() if k != "ReqT"}

    cmd = RemotingCommand.decode((CAPTURES / "018-json-UNREGISTER_CLIENT-request.bin").read_bytes())
    unregister = decode_custom_header(UnregisterClientRequestHeader, cmd.ext_fields)
    assert unregister == UnregisterClientRequestHeader("192.0.2.2@wire-consumer", None, "WireConsumerGroup")
    request = create_request(RequestCode.UNREGISTER_CLIENT, unregister)
    assert request.ext_fields == {"clientID": "192.0.2.2@wire-consumer", "consumerGroup": "WireConsumerGroup"}

    with pytest.raises(HeaderFieldError, match="<clientID> is null"):
        decode_custom_header(UnregisterClientRequestHeader, {"consumerGroup": "g"})
    with pytest.raises(HeaderFieldError, match="<expressionType>"):
        decode_custom_header(
            PullMessageRequestHeader,
            {
                **cmd.ext_fields,
                **dict.fromkeys(
                    [
                        "consumerGroup",
                        "topic",
                        "queueId",
                        "queueOffset",
                        "maxMsgNums",
                        "sysFlag",
                        "commitOffset",
                        "suspendTimeoutMillis",
                    ],
                    "1",
                ),
                "expressionType": "REGEX",
            },
        )
    response = create_response(ext_fields=PullMessageRequestHeader("g", "t", 1, 2, 3, 4, 5, 6))
    assert response.ext_fields is not None and response.ext_fields["subVersion"] == "0"
    assert RemotingCommand(code=0).write_custom_header({}).ext_fields == {}


def test_json_header_escapes_like_fastjson_whichever_way_it_is_written() -> None:
    from rocketq.remoting.command import _encode_json_header_escaping

    value = 'a\x01\x0b\x1f\x7f\u2028"\\/é\\u001b'
    cmd = create_request(10, {"k": value, "n": 5}, opaque=1, remark="tab\there")
    expected = ('{"code":10,"extFields":{"k":"a\\u0001\\u000B\\u001F\\u007F\\u2028\\"\\\\/é\\\\u001b","n":"5"},'
                '"flag":0,"language":"JAVA","opaque":1,"remark":"tab\\there","serializeTypeCurrentRPC":"JSON",'
                f'"version":{CURRENT_VERSION}}}').encode()  # fmt: skip
    assert encode_json_header(cmd) == expected == _encode_json_header_escaping(cmd)
    plain = create_request(10, {"k": "v\x01w"}, opaque=2)  # a control character: the escaping way
    assert encode_json_header(plain) == _encode_json_header_escaping(plain)
    assert b'"k":"v\\u0001w"' in encode_json_header(plain)


@given(st.dictionaries(st.text(min_size=1, max_size=4), st.text(max_size=8), max_size=4),
       st.none() | st.text(max_size=8))  # fmt: skip
def test_json_header_fast_path_equals_member_by_member(fields: dict[str, str], remark: str | None) -> None:
    from rocketq.remoting.command import _encode_json_header_escaping

    cmd = create_request(10, fields, opaque=3, remark=remark)
    assert encode_json_header(cmd) == _encode_json_header_escaping(cmd)


_PLAIN = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E, blacklist_characters='"\\'),
                 min_size=1, max_size=24)


@given(st.dictionaries(_PLAIN, _PLAIN, min_size=1, max_size=8), st.one_of(st.none(), _PLAIN),
       st.integers(-(2**31), 2**31 - 1), st.integers(0, 3), st.integers(-(2**31), 2**31 - 1),
       st.sampled_from(list(LanguageCode)), st.integers(0, 500), st.one_of(st.none(), st.binary(max_size=40)),
       st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))  # fmt: skip
def test_an_unescaped_command_encodes_as_any_command(ext: dict[str, str], remark: str | None, code: int, flag: int,
                                                     opaque: int, language: LanguageCode, version: int,
                                                     body: bytes | None, serialize: SerializeType) -> None:  # fmt: skip
    """The f-string frame of plain text is byte for byte the frame encode_json_header makes (and any other
    serialize type is encoded as usual)."""
    assert all(map(plain_json_text, [*ext, *ext.values()])) and (remark is None or plain_json_text(remark))
    fields = dict(code=code, flag=flag, opaque=opaque, language=language, version=version, remark=remark,
                  ext_fields=ext, body=body)  # fmt: skip
    plain = RemotingCommand(**fields).encode_parts(serialize)  # type: ignore[arg-type]
    fast = UnescapedCommand(**fields).encode_parts(serialize)  # type: ignore[arg-type]
    assert fast == plain
    assert UnescapedCommand(**fields).encode_parts(serialize) == plain  # the language is known by now


def test_plain_json_text() -> None:
    assert plain_json_text("DefaultRegion") and plain_json_text("7F000001,12")
    assert not any(map(plain_json_text, ['a"b', "a\\b", "tab\t", "é", "\u2028", "\x7f"]))


def test_an_unescaped_command_does_not_go_through_the_escaping_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    from rocketq.remoting import command

    RemotingCommand(0, ext_fields={"a": "1"}).encode_parts()  # the language's name is known from here on

    def refuse(cmd: RemotingCommand) -> bytes:
        raise AssertionError("encode_json_header called")

    monkeypatch.setattr(command, "encode_json_header", refuse)
    fast = UnescapedCommand(0, opaque=7, flag=1, remark="FOUND", ext_fields={"maxOffset": "12"}, body=b"xyz")
    again = RemotingCommand.decode(b"".join(fast.encode_parts()))
    assert (again.code, again.opaque, again.remark, again.ext_fields, again.body) == (
        0, 7, "FOUND", {"maxOffset": "12"}, b"xyz")  # fmt: skip
    with pytest.raises(AssertionError, match="encode_json_header"):
        RemotingCommand(0, ext_fields={"a": "1"}).encode_parts()
