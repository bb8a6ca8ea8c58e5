"""``rocketq store …`` end to end, in process, against the golden RocketMQ 4.9.4 stores.

The golden stores are opened read-only and must come out unchanged (checked
at the end of the module). Golden data is found next to the project
(``../shared/golden``) or through ``ROCKETQ_GOLDEN``; without it the session
stops (see conftest). ``compare_dump.py``, the reference judge of a dump, is
read from ``../shared/reference`` beside the golden data; the field checks here
do not depend on it.
"""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import io
import json
import os
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import GOLDEN, GOLDEN_STORE
from rocketq.cli.main import main
from rocketq.store.dump import MessageDictError, dict_to_message

RMQ = GOLDEN_STORE
CLEAN = RMQ / "clean" / "store"
CRASHED = RMQ / "crashed" / "store"
CONF = RMQ / "clean" / "broker.conf"
COMPARE_DUMP = Path(os.environ.get("ROCKETQ_REFERENCE", GOLDEN.parent / "reference")) / "compare_dump.py"


# Small files so that stores made by the tests stay small.
SMALL_CONF = (
    "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n"
    "maxHashSlotNum=1000\nmaxIndexNum=4000\n"
)


# --------------------------------------------------------------------------- helpers


def run(capsys: pytest.CaptureFixture[str], *argv: str | os.PathLike[str]) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rocketq: "), err
    return lines[0]


def copy_store(src: Path, dst: Path) -> Path:
    """A writable copy (the golden files are read-only)."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for root, dirs, files in os.walk(dst):
        for d in dirs:
            os.chmod(Path(root) / d, 0o755)
        for f in files:
            os.chmod(Path(root) / f, 0o644)
    os.chmod(dst, 0o755)
    return dst


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module", autouse=True)
def golden_untouched() -> Iterator[None]:
    before = snapshot(RMQ) if RMQ.is_dir() else {}
    yield
    if before:
        assert snapshot(RMQ) == before, "a read-only command changed the golden stores"


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    return json.loads((RMQ / "clean" / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def compare_dump() -> ModuleType | None:
    if not COMPARE_DUMP.is_file():
        return None
    spec = importlib.util.spec_from_file_location("compare_dump", COMPARE_DUMP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def clean_records() -> list[dict[str, Any]]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["store", "dump", str(CLEAN), "--json"]) == 0
    return json_lines(buf.getvalue())


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ dump


def test_dump_clean_matches_manifest(
    clean_records: list[dict[str, Any]],
    manifest: dict[str, Any],
    compare_dump: ModuleType | None,
    tmp_path: Path,
) -> None:
    expected = manifest["finalRead"]["messages"]
    by_offset = {r["commitLogOffset"]: r for r in clean_records}
    offsets = [r["commitLogOffset"] for r in clean_records]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    # The commit log also holds the two half and two op messages of the transactions.
    assert len(clean_records) == len(expected) + 4
    for m in expected:
        r = by_offset[m["commitLogOffset"]]
        for name in (
            "topic",
            "queueId",
            "queueOffset",
            "storeSize",
            "msgId",
            "uniqKey",
            "tags",
            "keys",
            "sysFlag",
            "flag",
            "bodyCRC",
            "reconsumeTimes",
            "preparedTransactionOffset",
            "bornTimestamp",
            "storeTimestamp",
            "bornHost",
            "storeHost",
        ):
            assert r[name] == m[name], (m["commitLogOffset"], name)
        props = {k: v for k, v in m["properties"].items() if k not in ("MIN_OFFSET", "MAX_OFFSET")}
        assert r["properties"] == props
        body = base64.b64decode(r["body"])
        assert r["bodyLength"] == len(body) and r["bodyCrc32"] == zlib.crc32(body)
        want = base64.b64decode(m["body"])
        if m["sysFlag"] & 1:  # stored compressed; the manifest has it inflated
            assert zlib.decompress(body) == want
        else:
            assert body == want
    if compare_dump is None:
        return
    path = write_jsonl(tmp_path / "dump.jsonl", clean_records)
    result = compare_dump.check_final_read(manifest, compare_dump.load_dump(str(path), 5), 5)
    assert result["missing"] == 0 and not result["fieldMismatches"], result
    assert compare_dump.main([str(RMQ / "clean" / "manifest.json"), str(path)]) == 0


def test_dump_crashed_has_every_acknowledged_send(
    capsys: pytest.CaptureFixture[str], compare_dump: ModuleType | None, tmp_path: Path
) -> None:
    code, out, err = run(capsys, "store", "dump", CRASHED, "--json")
    assert code == 0, err
    records = json_lines(out)
    assert len(records) == 2228
    acked = json.loads((RMQ / "crashed" / "manifest.json").read_text(encoding="utf-8"))["acknowledged"]
    by_offset = {r["commitLogOffset"]: r for r in records}
    for e in acked[:200]:
        r = by_offset[int(e["result"]["offsetMsgId"][-16:], 16)]
        assert r["uniqKey"] == e["result"]["msgId"]
    if compare_dump is not None:
        path = tmp_path / "crashed.jsonl"
        path.write_text(out, encoding="utf-8")
        manifest_path = str(RMQ / "crashed" / "manifest.json")
        assert compare_dump.main(["--acked", manifest_path, str(path)]) == 0
        capsys.readouterr()


def test_dump_filters(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "store", "dump", CLEAN, "--json", "--topic", "GoldenTopicA", "--queue", "0")
    assert code == 0
    records = json_lines(out)
    assert len(records) == 355
    assert {(r["topic"], r["queueId"]) for r in records} == {("GoldenTopicA", 0)}
    assert [r["queueOffset"] for r in records] == list(range(355))
    code, out, err = run(capsys, "store", "dump", CLEAN, "--topic", "GoldenBatch")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 12 and all("GoldenBatch/" in line for line in lines)
    assert "12 messages" in err
    code, out, _ = run(capsys, "store", "dump", CLEAN, "--json", "--topic", "NoSuchTopic")
    assert code == 1 and out == ""  # (test_dump_of_a_topic_the_store_has_not_says_so)


# ---------------------------------------------------------------------------- inspect


def test_inspect_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "store", "inspect", CLEAN, "--json")
    assert code == 0
    info = json.loads(out)
    assert info["cleanShutdown"] is True and info["abortFile"] is False
    queue0 = info["topics"]["GoldenTopicA"]["queues"]["0"]
    assert (queue0["minOffset"], queue0["maxOffset"], queue0["count"]) == (0, 355, 355)
    assert info["topics"]["GoldenTopicA"]["count"] == 1420
    assert info["topics"]["GoldenBatch"]["queues"]["1"]["maxOffset"] == 8
    cl = info["commitLog"]
    assert (cl["minOffset"], cl["maxOffset"], cl["messages"], cl["blankEnds"]) == (0, 3705444, 1574, 3)
    assert [f["name"] for f in cl["files"]][-1] == "00000000000003145728"
    assert info["config"]["maxHashSlotNum"] == 1000 and info["config"]["maxIndexNum"] == 4000
    index = info["index"]["files"]
    assert len(index) == 2 and index[0]["indexCount"] == 4000 and index[0]["beginPhyOffset"] == 0
    assert index[1]["beginTimestamp"] == index[0]["endTimestamp"]
    assert info["timeRange"]["earliestStoreTimestamp"] == 1795307158832
    assert info["timeRange"]["latestStoreTimestamp"] == info["checkpoint"]["physicMsgTimestamp"]

    code, out, _ = run(capsys, "store", "inspect", CRASHED, "--json", "-c", CONF)
    assert code == 0
    info = json.loads(out)
    assert info["cleanShutdown"] is False and info["abortFile"] is True
    assert info["commitLog"]["maxOffset"] == 2940565 and info["commitLog"]["messages"] == 2228
    assert info["checkpoint"]["physicMsgTimestamp"] == 0
    # the second file ends after the checkpoint: a broker builds it again; a reader reads it as it is
    assert [(f["loaded"], "note" in f) for f in info["index"]["files"]] == [(True, False), (True, True)]


def test_inspect_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "store", "inspect", CRASHED)
    assert code == 0
    assert "NOT clean" in out and "CrashTopicA" in out and "queue   0  offsets 0..372" in out


# ----------------------------------------------------------------------- query / get


def test_get_by_msg_id_offset_and_unique_key(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "store", "get", CLEAN, "--msg-id", "7F00000100002A9F0000000000071E28", "--json"
    )
    assert code == 0
    msg = json.loads(out)
    assert (msg["topic"], msg["queueId"], msg["queueOffset"], msg["sysFlag"]) == ("GoldenTopicB", 0, 60, 769)
    assert msg["keys"] == "zip-0"
    code, out, _ = run(capsys, "store", "get", CLEAN, "--offset", "1048576", "--json")
    assert code == 0
    msg = json.loads(out)
    assert msg["topic"] == "GoldenBig" and msg["bodyLength"] == 1_000_000
    code, out, _ = run(
        capsys,
        "store",
        "get",
        CLEAN,
        "--msg-id",
        "C000020251525FFD2B276C3D550D0000",
        "--topic",
        "GoldenTopicA",
    )
    assert code == 0
    assert "commitLogOffset            0" in out and "seq = 0" in out
    code, _, err = run(capsys, "store", "get", CLEAN, "--offset", "5")
    assert code == 1 and "offset 5" in one_error_line(err)


def test_query_by_key(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "store", "query", CLEAN, "--topic", "GoldenTopicB", "--key", "b-5", "--json")
    assert code == 0
    [msg] = json_lines(out)
    assert msg["keys"] == "b-5 user-5 shared"
    code, out, _ = run(
        capsys, "store", "query", CLEAN, "--topic", "GoldenTopicB", "--key", "shared", "--max", "10"
    )
    assert code == 0 and len(out.splitlines()) == 10
    # more than a query gives: the 64 of maxMsgsNumBatch, and a note that says so (142 have the key)
    code, out, err = run(capsys, "store", "query", CLEAN, "--topic", "GoldenTopicA", "--key", "order-1",
                         "--max", "1000")  # fmt: skip
    assert code == 0 and len(out.splitlines()) == 64 and "at most maxMsgsNumBatch=64" in err
    code, _, err = run(capsys, "store", "query", CLEAN, "--topic", "GoldenTopicB", "--key", "nope")
    assert code == 1 and "nope" in one_error_line(err)


def test_query_finds_the_newest_messages_of_a_store_left_by_a_crash(capsys: pytest.CaptureFixture[str]) -> None:
    """The index file that ends after the checkpoint (a broker would build it again) is read as it is: the
    newest acknowledged messages, which are in it, are found by key and by UNIQ_KEY."""
    manifest = json.loads((RMQ / "crashed" / "manifest.json").read_text())
    acked = [a for a in manifest["acknowledged"] if a["sent"]["topic"] == "CrashTopicA"][-30:]
    for a in acked:
        key = a["sent"]["keys"].split()[0]
        code, out, err = run(capsys, "store", "query", CRASHED, "--topic", "CrashTopicA", "--key", key, "--json")
        assert code == 0, (key, err)
        assert [m["uniqKey"] for m in json_lines(out)] == [a["result"]["msgId"]]
    code, out, err = run(capsys, "store", "get", CRASHED, "--msg-id", acked[-1]["result"]["msgId"], "--topic",
                         "CrashTopicA", "--json")  # fmt: skip
    assert code == 0, err


# ----------------------------------------------------------------------------- verify


def test_verify_golden(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "store", "verify", CLEAN)
    assert code == 0, out + err
    assert out.rstrip().endswith("OK") and "1574 records" in out
    code, out, err = run(capsys, "store", "verify", CRASHED)
    assert code == 0, out + err
    assert "NOT clean" in out and "2228 records" in out


def test_verify_finds_a_flipped_body_byte(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, clean_records: list[dict[str, Any]]
) -> None:
    store = copy_store(CLEAN, tmp_path / "store")  # no broker.conf beside it: sizes inferred
    for victim in (clean_records[100], clean_records[-50]):  # outside / inside recovery's last three files
        off = victim["commitLogOffset"]
        path = store / "commitlog" / f"{off - off % 1048576:020d}"
        with open(path, "r+b") as f:
            f.seek(off % 1048576 + 88 + 5)  # 88 header bytes for IPv4 hosts, then the body
            byte = f.read(1)
            f.seek(-1, io.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x40]))
        code, out, err = run(capsys, "store", "verify", store)
        assert code == 1
        assert f"body CRC mismatch in the record at {off}" in out
        assert f"first bad commit-log offset {off}" in one_error_line(err)
        with open(path, "r+b") as f:  # undo for the next round
            f.seek(off % 1048576 + 88 + 5)
            f.write(byte)
    code, out, _ = run(capsys, "store", "verify", store)
    assert code == 0, out


def test_a_file_of_the_wrong_size_is_named_damaged_or_the_setting_wrong(capsys: pytest.CaptureFixture[str],
                                                                         tmp_path: Path) -> None:  # fmt: skip
    """A store file of another size is refused, as RocketMQ's load refuses it; the files beside it tell whether
    the file is damaged or the setting is not the store's."""
    store = copy_store(CLEAN, tmp_path / "store")
    with open(store / "commitlog" / f"{2 << 20:020d}", "r+b") as fh:
        fh.truncate(100)
    code, _, err = run(capsys, "store", "verify", store)
    assert code == 1 and "100 bytes, expected 1048576: unlike the files beside it: the file is damaged" in err
    shutil.rmtree(store)
    store = copy_store(CLEAN, tmp_path / "store")
    (tmp_path / "wrong.conf").write_text("mappedFileSizeCommitLog=2097152\n")
    code, _, err = run(capsys, "store", "verify", store, "-c", tmp_path / "wrong.conf")
    assert code == 1 and "expected 2097152: wrong mappedFileSize setting for this store?" in err


def test_dump_of_a_topic_the_store_has_not_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "store", "dump", CLEAN, "--topic", "NoSuchTopic")
    assert code == 1 and out == "" and "topic 'NoSuchTopic' is not in this store (its topics: " in one_error_line(err)
    assert "GoldenTopicA" in err


def test_verify_finds_a_damaged_checkpoint(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Abnormal recovery picks the file it starts from with the checkpoint's times: garbage there is a problem."""
    store = copy_store(CLEAN, tmp_path / "store")
    good = (store / "checkpoint").read_bytes()
    code, out, _ = run(capsys, "store", "verify", store)
    assert code == 0 and "checkpoint      times plausible" in out
    (store / "checkpoint").write_bytes(b"garbage\n")
    code, out, err = run(capsys, "store", "verify", store)
    assert code == 1 and "checkpoint: 8 bytes, too short" in out and "none in the commit log" in one_error_line(err)
    assert "times plausible" not in out
    (store / "checkpoint").write_bytes(b"\x67" * 8 + good[8:])
    code, out, _ = run(capsys, "store", "verify", store)
    assert code == 1 and f"checkpoint: physicMsgTimestamp {int.from_bytes(b'g' * 8, 'big')} is not a time" in out


# ----------------------------------------------------------------------------- import


def _comparable(r: dict[str, Any]) -> tuple[Any, ...]:
    props = {k: v for k, v in r["properties"].items() if k not in ("CLUSTER", "UNIQ_KEY")}
    return (
        r["topic"],
        r["queueId"],
        r["queueOffset"],
        r["body"],
        r["sysFlag"],
        r["flag"],
        r["tags"],
        r["keys"],
        r["reconsumeTimes"],
        r["bornTimestamp"],
        r["bornHost"],
        props,
    )


def test_import_round_trip(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, clean_records: list[dict[str, Any]]
) -> None:
    source = write_jsonl(tmp_path / "in.jsonl", clean_records)
    store = tmp_path / "imported"
    code, out, err = run(capsys, "store", "import", store, source, "-c", CONF, "--quiet")
    assert code == 0, err
    assert f"imported {len(clean_records)} messages" in out
    code, out, _ = run(capsys, "store", "dump", store, "--json")
    assert code == 0
    again = json_lines(out)
    assert [_comparable(r) for r in again] == [_comparable(r) for r in clean_records]
    for before, after in zip(clean_records, again, strict=True):
        if before["uniqKey"]:
            assert after["uniqKey"] == before["uniqKey"]
    code, out, err = run(capsys, "store", "verify", store)
    assert code == 0, out + err
    code, out, _ = run(capsys, "store", "inspect", store, "--json")
    info = json.loads(out)
    assert info["cleanShutdown"] is True
    assert info["topics"]["GoldenTopicA"]["queues"]["0"]["maxOffset"] == 355
    code, out, _ = run(capsys, "store", "query", store, "--topic", "GoldenTopicB", "--key", "b-5", "--json")
    assert code == 0 and json_lines(out)[0]["keys"] == "b-5 user-5 shared"


def test_import_reports_bad_lines(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "small.conf").write_text(SMALL_CONF)
    body = base64.b64encode(b"hello").decode()
    lines = [
        json.dumps(
            {"topic": "T1", "body": body, "tags": "A", "keys": ["k1", "k2"], "properties": {"p": "1"}}
        ),
        "{not json",
        json.dumps({"body": body}),
        json.dumps({"topic": "T1", "body": "***"}),
        json.dumps({"topic": "bad topic!", "body": body}),
        "",
        json.dumps({"topic": "T1", "queueId": 2, "body": body, "bornHost": "10.0.0.9:1234", "flag": 7}),
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    store = tmp_path / "s"
    code, out, err = run(capsys, "store", "import", store, source, "-c", tmp_path / "small.conf")
    assert code == 1
    errors = err.strip().splitlines()
    assert [e.split(":")[2] for e in errors] == ["2", "3", "4", "5"]
    assert "not JSON" in errors[0] and "topic is missing" in errors[1] and "base64" in errors[2]
    assert "MESSAGE_ILLEGAL" in errors[3]
    assert "imported 2 messages" in out and "4 lines failed" in out
    code, out, err = run(capsys, "store", "dump", store, "--json")
    assert code == 1 and "-c broker.conf" in one_error_line(err)  # index sizes are not the defaults
    code, out, _ = run(capsys, "store", "dump", store, "--json", "-c", tmp_path / "small.conf")
    assert code == 0
    first, second = json_lines(out)
    assert (first["tags"], first["keys"], first["properties"]["p"]) == ("A", "k1 k2", "1")
    assert (second["queueId"], second["bornHost"], second["flag"]) == (2, "10.0.0.9:1234", 7)

    code, out, err = run(
        capsys, "store", "import", tmp_path / "s2", source, "-c", tmp_path / "small.conf", "--strict"
    )
    assert code == 1
    line = one_error_line(err)
    assert ":2: not JSON" in line and "--strict" in line
    # a store the import made is not left behind when it failed before any message went in
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    code, _, err = run(capsys, "store", "import", tmp_path / "s3", tmp_path / "bad.jsonl", "-c",
                       tmp_path / "small.conf", "--strict")  # fmt: skip
    assert code == 1 and not (tmp_path / "s3").exists()
    code, _, err = run(capsys, "store", "import", tmp_path / "s4", tmp_path / "bad.jsonl", "-c",
                       tmp_path / "small.conf")  # fmt: skip
    assert code == 1 and not (tmp_path / "s4").exists()  # every line failed: nothing made either


def test_an_interrupted_import_says_where_to_go_on(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Ctrl-C in an import: the messages imported and the line to go on from (an import is not idempotent)."""
    from rocketq.cli import store_cmd

    (tmp_path / "small.conf").write_text(SMALL_CONF)
    body = base64.b64encode(b"hello").decode()
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"topic": "T1", "body": body}) + "\n" for _ in range(6)))
    real = store_cmd._import_line
    calls = iter(range(10))

    def ctrl_c_on_the_fourth(store: Any, raw: bytes) -> str | None:
        if next(calls) == 3:
            raise KeyboardInterrupt
        return real(store, raw)

    monkeypatch.setattr(store_cmd, "_import_line", ctrl_c_on_the_fourth)
    code, _, err = run(capsys, "store", "import", tmp_path / "s", source, "-c", tmp_path / "small.conf")
    assert code == 130
    assert "3 messages imported from the first 3 lines of" in err and "import from line 4 (tail -n +4" in err


def test_an_interrupt_python_wrapped_is_still_an_interrupt(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """Ctrl-C in some places (a class body's ``__set_name__`` during an import) comes as a RuntimeError caused by
    the interrupt: the command ends as interrupted, not with an internal error."""
    from rocketq.cli import store_cmd

    def interrupted_in_an_import(*args: Any, **kwargs: Any) -> None:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as e:
            raise RuntimeError("Error calling __set_name__ on 'x' instance 'y' in 'Z'") from e

    monkeypatch.setattr(store_cmd, "cmd_inspect", interrupted_in_an_import)
    code, _, err = run(capsys, "store", "inspect", tmp_path)
    assert code == 130 and err == "rocketq: interrupted\n"


def test_import_from_stdin_with_inferred_sizes(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An existing store: the sizes come from its files (a sibling broker.conf holds the index sizes).
    (tmp_path / "broker.conf").write_text(SMALL_CONF)
    store = tmp_path / "store"
    seed = tmp_path / "seed.jsonl"
    seed.write_text(json.dumps({"topic": "S", "body": ""}) + "\n")
    assert run(capsys, "store", "import", store, seed, "-c", tmp_path / "broker.conf")[0] == 0
    data = "".join(
        json.dumps({"topic": "S", "body": base64.b64encode(b"m%d" % i).decode()}) + "\n" for i in range(5)
    )
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data.encode())))
    code, out, err = run(capsys, "store", "import", store, "-")
    assert code == 0, err
    code, out, _ = run(capsys, "store", "dump", store, "--json", "--topic", "S")
    assert [r["queueOffset"] for r in json_lines(out)] == list(range(6))


def test_dict_to_message() -> None:
    rec = dict_to_message(
        {
            "topic": "SCHEDULE_TOPIC_XXXX",
            "queueId": 0,
            "body": "",
            "properties": {
                "DELAY": "1",
                "REAL_TOPIC": "Real",
                "REAL_QID": "3",
                "MIN_OFFSET": "0",
                "CLUSTER": "c",
            },
        }
    )
    assert (rec.message.topic, rec.queue_id) == ("Real", 3)
    assert rec.message.properties == {"DELAY": "1"}
    delivered = dict_to_message(
        {"topic": "Real", "body": "", "properties": {"DELAY": "1", "REAL_TOPIC": "Real"}}
    )
    assert delivered.delay_as_stored
    inflated = dict_to_message({"topic": "T", "body": base64.b64encode(b"plain").decode(), "sysFlag": 769})
    assert inflated.sys_flag == 0
    for bad in (
        {"body": ""},
        {"topic": "T"},
        {"topic": "T", "body": "!!"},
        {"topic": "T", "body": "", "queueId": -1},
        {"topic": "T", "body": "", "properties": {"a": "x\x01y"}},
        [1],
        {"topic": 5, "body": ""},
        {"topic": "T", "body": "", "bornHost": "nohost"},
    ):
        with pytest.raises(MessageDictError):
            dict_to_message(bad)


# ------------------------------------------------------------------------------ errors


def test_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    not_store = tmp_path / "empty"
    not_store.mkdir()
    cases = [
        (["store", "inspect", tmp_path / "missing"], 1, "no such directory"),
        (["store", "dump", plain], 1, "not a directory"),
        (["store", "verify", not_store], 1, "not a RocketMQ store"),
        (["store", "dump", CLEAN, "-c", tmp_path / "nope.conf"], 1, "no such config file"),
        (["store", "dump", CLEAN, "--queue", "x"], 2, "--queue"),
        (["store", "frobnicate", CLEAN], 2, "invalid choice"),
        (["store", "get", CLEAN], 2, "--msg-id"),
        (["store"], 2, "choose a command"),
        ([], 2, "choose a command group"),
        (["store", "import", not_store, tmp_path / "missing.jsonl"], 1, "No such file"),
        (["store", "import", tmp_path / "new", plain], 1, "not JSON"),
    ]
    for argv, want_code, text in cases:
        code, _, err = run(capsys, *argv)
        assert code == want_code, (argv, err)
        assert text in one_error_line(err), (argv, err)
    bad_conf = tmp_path / "bad.conf"
    bad_conf.write_text("mappedFileSizeCommitLog=lots\n")
    code, _, err = run(capsys, "store", "dump", CLEAN, "-c", bad_conf)
    assert code == 1 and "mappedFileSizeCommitLog" in one_error_line(err)
    bad_conf.write_text("mappedFileSizeCommitLog=4096\n")
    code, _, err = run(capsys, "store", "inspect", CLEAN, "-c", bad_conf)
    assert code == 1 and "4096" in one_error_line(err)


def test_index_sizes_need_conf_when_not_inferable(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    store = copy_store(CLEAN, tmp_path / "store")
    (store / "index" / "20261122002558839").unlink()  # only the last, partly filled index file is left
    code, _, err = run(capsys, "store", "inspect", store)
    assert code == 1 and "-c broker.conf" in one_error_line(err)
    code, out, _ = run(capsys, "store", "inspect", store, "-c", CONF, "--json")
    assert code == 0 and len(json.loads(out)["index"]["files"]) == 1


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        [],
        ["store"],
        *[["store", c] for c in ("inspect", "dump", "import", "query", "get", "verify")],
    ):
        assert main([*argv, "--help"]) == 0
        out = capsys.readouterr().out
        assert "example" in out and "usage: rocketq" in out
