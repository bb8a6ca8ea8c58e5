"""FrameDecoder: the captured TCP streams cut into commands however the bytes arrive; bad streams refused."""

from __future__ import annotations

import base64
import gzip
import json
import random
from functools import cache

import pytest

from conftest import GOLDEN
from rocketq.remoting.codec import FRAME_MAX_LENGTH, FrameDecoder
from rocketq.remoting.command import RemotingCommand, create_request
from rocketq.remoting.errors import FrameError


@cache
def captured_frames() -> tuple[bytes, ...]:
    with gzip.open(GOLDEN / "remoting-4.9.4" / "all-frames.jsonl.gz", "rt", encoding="utf-8") as f:
        return tuple(base64.b64decode(json.loads(line)["raw"]) for line in f)


@cache
def expected_commands() -> tuple[RemotingCommand, ...]:
    return tuple(RemotingCommand.decode(raw) for raw in captured_frames())


def stream() -> bytes:
    return b"".join(captured_frames())


def test_whole_stream_at_once() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(stream()) == list(expected_commands())
    assert decoder.buffered == 0


def test_byte_by_byte() -> None:
    decoder = FrameDecoder()
    data = stream()
    out: list[RemotingCommand] = []
    for i in range(len(data)):
        out += decoder.feed(data[i : i + 1])
    assert out == list(expected_commands())
    assert decoder.buffered == 0


@pytest.mark.parametrize("seed", range(5))
def test_random_chunks(seed: int) -> None:
    rng = random.Random(seed)
    data = stream()
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    pos = 0
    while pos < len(data):
        n = rng.choice([1, 2, 3, 7, 64, 500, 4096, 20000])
        out += decoder.feed(memoryview(data)[pos : pos + n])
        pos += n
    assert out == list(expected_commands())


def test_partial_frame_waits() -> None:
    frame = create_request(34, {"a": "b"}, body=b"xyz").encode()
    decoder = FrameDecoder()
    assert decoder.feed(frame[:3]) == []
    assert decoder.feed(frame[3:-1]) == []
    assert decoder.buffered == len(frame) - 1
    [cmd] = decoder.feed(frame[-1:] + frame[:5])
    assert cmd.body == b"xyz"
    assert decoder.buffered == 5


def test_default_limit_is_javas() -> None:
    assert FRAME_MAX_LENGTH == 16_777_216
    decoder = FrameDecoder()
    # The announced length alone decides: refused as soon as the 4 bytes arrive.
    assert decoder.feed((FRAME_MAX_LENGTH - 4).to_bytes(4, "big")) == []
    with pytest.raises(FrameError, match="exceeds"):
        FrameDecoder().feed((FRAME_MAX_LENGTH - 3).to_bytes(4, "big"))


def test_limit_is_inclusive_of_the_length_field() -> None:
    frame = create_request(34, body=b"x" * 100).encode()
    assert FrameDecoder(max_frame_length=len(frame)).feed(frame)
    with pytest.raises(FrameError):
        FrameDecoder(max_frame_length=len(frame) - 1).feed(frame)


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",  # an HTTP request reads as a 1.1 GB frame
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello
        b"\xff\xff\xff\xff",  # negative length
        b"\x00\x00\x00\x03abc",  # no room for the header word
        b"\x00\x00\x00\x08\x07\x00\x00\x00abcd",  # serialize type 7
        b"\x00\x00\x00\x08\x00\x00\x00\x10abcd",  # header longer than the frame
        b"\x00\x00\x00\x08\x00\x00\x00\x04{{{{",  # JSON header that is not JSON
        b"\x00\x00\x00\x08\x01\x00\x00\x04abcd",  # ROCKETMQ header too short
    ],
)
def test_garbage_raises_and_stays_failed(garbage: bytes) -> None:
    decoder = FrameDecoder()
    good = create_request(34).encode()
    with pytest.raises(FrameError):
        decoder.feed(good + garbage)
    assert decoder.failed
    with pytest.raises(FrameError, match="already failed"):
        decoder.feed(good)


def test_a_good_frame_before_garbage_in_an_earlier_feed_is_delivered() -> None:
    decoder = FrameDecoder()
    good = create_request(34).encode()
    assert len(decoder.feed(good)) == 1
    with pytest.raises(FrameError):
        decoder.feed(b"\xff\xff\xff\xff")


def test_bad_limit() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_length=4)
