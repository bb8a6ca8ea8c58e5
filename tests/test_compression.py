"""Message body compression (``rocketq.common.compression``): zlib of 4.x and 5.x, LZ4 and Zstandard of 5.x, in the
codec itself, the producer and consumers end to end, and ``rocketq store import``."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import sys
import time
import zlib
from pathlib import Path

import lz4.frame
import pytest
import zstandard

import test_client_e2e as e2e
from rocketq.client import ConsumeFromWhere, LitePullConsumer, Producer, new_message
from rocketq.client.admin import MQAdmin
from rocketq.common.compression import (
    CodecMissingError,
    CompressionError,
    CompressionType,
    compress,
    compressed_type,
    decompress,
)
from rocketq.common.message import COMPRESSED_FLAG
from rocketq.store.dump import dict_to_message

BODY = b"a body that compresses well " * 500


@pytest.mark.parametrize("kind", list(CompressionType))
def test_round_trip(kind: CompressionType) -> None:
    packed = compress(BODY, kind)
    assert len(packed) < len(BODY) // 10
    assert decompress(packed, COMPRESSED_FLAG | kind.flag) == BODY
    assert compressed_type(COMPRESSED_FLAG | kind.flag) is kind


def test_formats_are_the_standard_frames() -> None:
    assert decompress(zlib.compress(BODY), COMPRESSED_FLAG) == BODY  # 4.x: bit 0 alone is zlib
    assert decompress(lz4.frame.compress(BODY, content_checksum=True), COMPRESSED_FLAG | 0x100) == BODY
    # Java's ZstdOutputStream streams: its frame does not say the content size
    out = io.BytesIO()
    with zstandard.ZstdCompressor(level=5).stream_writer(out, closefd=False) as w:
        w.write(BODY)
    assert decompress(out.getvalue(), COMPRESSED_FLAG | 0x200) == BODY
    assert zlib.decompress(compress(BODY)) == BODY
    assert lz4.frame.decompress(compress(BODY, CompressionType.LZ4)) == BODY


def test_flags_and_names() -> None:
    assert compressed_type(0x300) is None  # bit 0 clear: not compressed, whatever the type bits say
    assert decompress(b"plain", 0) == b"plain"
    assert CompressionType.of(" zstd ") is CompressionType.ZSTD and CompressionType.LZ4.flag == 0x100
    with pytest.raises(CompressionError, match="unknown compression type 'gzip'"):
        CompressionType.of("gzip")
    with pytest.raises(CompressionError, match="unknown compression type 5"):
        decompress(b"x", COMPRESSED_FLAG | 0x500)
    for kind in CompressionType:
        with pytest.raises(CompressionError, match="does not inflate"):
            decompress(b"not compressed at all", COMPRESSED_FLAG | kind.flag)


def test_a_missing_codec_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import zstandard now fails
    with pytest.raises(CodecMissingError, match=r"pip install rocketq\[compression\]"):
        decompress(b"x", COMPRESSED_FLAG | CompressionType.ZSTD.flag)
    with pytest.raises(CodecMissingError):
        Producer("g", "127.0.0.1:9876", compress_type="ZSTD")
    assert decompress(zlib.compress(b"z"), COMPRESSED_FLAG) == b"z"  # zlib needs nothing


def test_import_keeps_a_good_body_and_unflags_one_that_is_not_compressed() -> None:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    good = {"topic": "T", "body": b64(compress(BODY, CompressionType.LZ4)), "sysFlag": COMPRESSED_FLAG | 0x100}
    imported = dict_to_message(good)
    assert imported.sys_flag == COMPRESSED_FLAG | 0x100 and imported.notes == []
    bad = {"topic": "T", "body": b64(b"already inflated"), "sysFlag": COMPRESSED_FLAG | 0x200}
    imported = dict_to_message(bad)
    assert imported.sys_flag == 0 and "ZSTD body does not inflate" in imported.notes[0]


@pytest.mark.parametrize("kind", ["LZ4", "ZSTD", "ZLIB"])
def test_producer_and_consumer_end_to_end(tmp_path: Path, kind: str) -> None:
    servers = e2e.InProcessServers(tmp_path)
    try:
        ns = servers.start()
        topic = f"Compressed{kind}"

        async def scenario() -> None:
            cfg = e2e.client_config(e2e.Cluster(ns, "rocketq"))
            body = json.dumps({"at": time.time_ns()}).encode() + BODY
            async with Producer("pg_compress", config=cfg, compress_type=kind) as producer:
                await producer.send(new_message(topic, body))
                await producer.send(new_message(topic, b"small"))  # under 4 KiB: not compressed
            async with MQAdmin(ns) as admin:
                deadline = time.monotonic() + 20
                stored = await admin.consume(topic, count=10)  # the admin tools inflate too
                while len(stored) < 2 and time.monotonic() < deadline:  # the second may not be dispatched yet
                    await asyncio.sleep(0.1)
                    stored = await admin.consume(topic, count=10)
                assert sorted(m.body for m in stored) == sorted([body, b"small"])
                flags = sorted(m.sys_flag & 0x701 for m in stored)
                assert flags == [0, COMPRESSED_FLAG | CompressionType[kind].flag]
            consumer = LitePullConsumer("cg_compress", config=cfg,
                                        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
            consumer.subscribe(topic, "*")
            got: list[bytes] = []
            async with consumer:
                deadline = time.monotonic() + 30
                while len(got) < 2 and time.monotonic() < deadline:
                    got.extend(m.body for m in await consumer.poll(timeout=1.0))
            assert sorted(got) == sorted([body, b"small"])

        asyncio.run(asyncio.wait_for(scenario(), 90))
    finally:
        servers.stop()
