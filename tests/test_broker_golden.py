"""The broker against the golden remoting captures (golden/remoting-4.9.4): every frame a Java 4.9.4 client sent
to the real broker is sent, byte for byte, to a rocketq broker in the same order, and each answer is compared
with the real broker's: response code, remark where Java set one, the set of ``extFields`` keys, the offsets
and queue ids in them, the commit-log offsets inside the ``msgId`` s (the records must have the very sizes
Java gave them), and the records or JSON of the bodies. The broker's NOTIFY_CONSUMER_IDS_CHANGED push must
arrive where the real broker pushed it.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from broker_support import decode_records, run, running_broker, settle
from conftest import GOLDEN
from rocketq.common import json_compat
from rocketq.remoting.codec import FrameDecoder
from rocketq.remoting.command import RemotingCommand

CAPTURE = GOLDEN / "remoting-4.9.4"
#: Keys a rocketq send response may add to Java 4.9.4's (5.x's ``transactionId``).
EXTRA_KEYS = {"transactionId"}
OFFSET_KEYS = ("queueId", "queueOffset", "offset", "nextBeginOffset", "minOffset", "maxOffset",
               "suggestWhichBrokerId")  # fmt: skip


@dataclass
class Frame:
    index: int
    conn: int
    c2s: bool
    raw: bytes
    command: RemotingCommand


@dataclass
class Exchange:
    request: Frame
    response: Frame | None
    pushes_before_next: list[Frame] = field(default_factory=list)


@cache
def broker_frames() -> list[Frame]:
    frames = []
    with gzip.open(CAPTURE / "all-frames.jsonl.gz", "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            f = json.loads(line)
            if f["label"] != "broker":
                continue
            raw = base64.b64decode(f["raw"])
            frames.append(Frame(i, f["conn"], f["dir"] == "c2s", raw, RemotingCommand.decode(raw)))
    return frames


def exchanges() -> tuple[list[Exchange], list[Frame]]:
    """Client requests in capture order with the real broker's response; and the broker's pushes."""
    frames = broker_frames()
    out: list[Exchange] = []
    pushes: list[Frame] = []
    for f in frames:
        if f.c2s and not f.command.is_response:
            response = next((g for g in frames if not g.c2s and g.conn == f.conn and g.command.is_response
                             and g.command.opaque == f.command.opaque and g.index > f.index), None)  # fmt: skip
            out.append(Exchange(f, response))
        elif not f.c2s and not f.command.is_response:
            pushes.append(f)
    return out, pushes


def depends_on_delay_delivery(ex: Exchange) -> bool:
    """A pull of a retry topic: the real broker answered it with the retry message its schedule service had
    delivered meanwhile (delay level 3, 10 s after the send-back); rocketq's delay delivery is issue 7."""
    cmd = ex.request.command
    return cmd.code == 11 and (cmd.ext_fields or {}).get("topic", "").startswith("%RETRY%")


def msg_offsets(msg_id: str) -> list[int]:
    return [int(one[-16:], 16) for one in msg_id.split(",")]


def compare(exchange: Exchange, ours: RemotingCommand) -> list[str]:
    """Differences between the real broker's answer and ours (empty: the same)."""
    theirs = exchange.response
    assert theirs is not None
    t, o = theirs.command, ours
    name = f"frame {exchange.request.index} code {exchange.request.command.code}"
    problems = []
    if t.code != o.code:
        problems.append(f"{name}: code {o.code} ({o.remark}) != {t.code} ({t.remark})")
        return problems
    if t.remark is not None and t.remark != o.remark:
        problems.append(f"{name}: remark {o.remark!r} != {t.remark!r}")
    if t.serialize_type != o.serialize_type:  # an answer comes in its request's type, but the messages Java writes
        problems.append(f"{name}: serialize type {o.serialize_type.name} != {t.serialize_type.name}")
    t_ext, o_ext = t.ext_fields or {}, o.ext_fields or {}
    if set(o_ext) - EXTRA_KEYS != set(t_ext):
        problems.append(f"{name}: extFields keys {sorted(o_ext)} != {sorted(t_ext)}")
    for key in OFFSET_KEYS:
        if key in t_ext and o_ext.get(key) != t_ext[key]:
            problems.append(f"{name}: {key} {o_ext.get(key)} != {t_ext[key]}")
    if "msgId" in t_ext and msg_offsets(o_ext.get("msgId", "")) != msg_offsets(t_ext["msgId"]):
        problems.append(f"{name}: msgId offsets {o_ext.get('msgId')} != {t_ext['msgId']}")
    if (t.body is None) != (o.body is None):
        problems.append(f"{name}: body {o.body!r:.60} vs {t.body!r:.60}")
    elif t.body is not None and o.body is not None:
        problems += compare_bodies(name, t.body, o.body)
    return problems


def compare_bodies(name: str, theirs: bytes, ours: bytes) -> list[str]:
    if theirs[:1] == b"{":
        t_json, o_json = json_compat.loads(theirs), json_compat.loads(ours)
        return [] if t_json == o_json else [f"{name}: body {ours!r} != {theirs!r}"]
    t_msgs, o_msgs = decode_records(theirs), decode_records(ours)
    problems = []
    if len(t_msgs) != len(o_msgs):
        return [f"{name}: {len(o_msgs)} records != {len(t_msgs)}"]
    for t, o in zip(t_msgs, o_msgs, strict=True):
        for attr in ("topic", "queue_id", "queue_offset", "commit_log_offset", "store_size", "body", "flag",
                     "sys_flag", "reconsume_times", "born_timestamp"):  # fmt: skip
            if getattr(t, attr) != getattr(o, attr):
                problems.append(f"{name}: record {attr} {getattr(o, attr)!r:.60} != {getattr(t, attr)!r:.60}")
        t_props = {k: v for k, v in t.properties.items() if k != "UNIQ_KEY" or v}
        if t_props != o.properties:
            problems.append(f"{name}: record properties {o.properties} != {t_props}")
    return problems


class Replayer:
    """Raw connections to our broker, one per golden connection, each with a reader collecting frames."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conns: dict[int, tuple[asyncio.StreamWriter, asyncio.Queue[RemotingCommand]]] = {}
        self.responses: dict[tuple[int, int], asyncio.Future[RemotingCommand]] = {}
        self.pushes: dict[int, list[RemotingCommand]] = {}
        self.tasks: list[asyncio.Task[None]] = []

    async def connection(self, conn: int) -> asyncio.StreamWriter:
        if conn not in self.conns:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            self.conns[conn] = (writer, asyncio.Queue())
            self.tasks.append(asyncio.create_task(self._read(conn, reader)))
        return self.conns[conn][0]

    async def _read(self, conn: int, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder()
        while data := await reader.read(65536):
            for cmd in decoder.feed(data):
                if cmd.is_response:
                    fut = self.responses.pop((conn, cmd.opaque), None)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
                else:
                    self.pushes.setdefault(conn, []).append(cmd)

    async def send(self, frame: Frame, wait: bool) -> RemotingCommand | None:
        writer = await self.connection(frame.conn)
        fut: asyncio.Future[RemotingCommand] | None = None
        if wait:
            fut = asyncio.get_running_loop().create_future()
            self.responses[(frame.conn, frame.command.opaque)] = fut
        writer.write(frame.raw)
        await writer.drain()
        if fut is None:
            await asyncio.sleep(0.02)  # one-way: let the broker handle it before the next frame
            return None
        try:
            return await asyncio.wait_for(fut, 5.0)
        except TimeoutError:
            raise AssertionError(f"no answer to frame {frame.index}: {frame.command}") from None

    async def close(self) -> None:
        for writer, _ in self.conns.values():
            writer.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def test_replay_golden_captures_against_rocketq(tmp_path: Path) -> None:
    all_exchanges, golden_pushes = exchanges()
    assert len(all_exchanges) > 60 and golden_pushes

    compared: list[int] = []

    async def scenario() -> tuple[list[str], dict[int, list[RemotingCommand]]]:
        problems: list[str] = []
        # Delay levels of an hour: the retry message of the send-back stays parked during the replay, as it
        # stayed parked in the real broker while these frames were sent.
        async with running_broker(tmp_path / "store", messageDelayLevel=" ".join(["1h"] * 18)) as broker:
            replayer = Replayer(broker.port)
            try:
                for ex in all_exchanges:
                    # The real broker had dispatched everything by the time the next frame came.
                    await settle(broker)
                    if depends_on_delay_delivery(ex):
                        await replayer.send(ex.request, wait=False)
                        continue
                    ours = await replayer.send(ex.request, wait=ex.response is not None)
                    if ex.response is not None:
                        assert ours is not None
                        problems += compare(ex, ours)
                        compared.append(ex.request.index)
                await asyncio.sleep(0.2)
            finally:
                await replayer.close()
            return problems, replayer.pushes

    problems, pushes = run(scenario(), timeout=60)
    assert problems == [], "\n".join(problems)
    assert len(compared) >= 60
    for push in golden_pushes:
        got = [p for p in pushes.get(push.conn, []) if p.code == push.command.code]
        assert got, f"no push of code {push.command.code} on connection {push.conn}"
        assert got[0].ext_fields == push.command.ext_fields and got[0].is_oneway


def test_golden_captures_cover_the_broker_codes() -> None:
    codes = {ex.request.command.code for ex in exchanges()[0]}
    assert {10, 11, 12, 14, 15, 17, 29, 30, 31, 33, 34, 35, 36, 37, 38, 310, 320} <= codes
