"""Master/slave replication of the store (rocketq.store.ha): RocketMQ 4.x's HA protocol on 127.0.0.1.

Both ends are checked against rocketq's own other end and against a bare socket that speaks the protocol as
the spec (HAConnection / HAClient of 4.9) has it, so that neither end can only work with the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rocketq.common.codec import decode_record
from rocketq.common.message import Message
from rocketq.common.net import parse_address, parse_server_address
from rocketq.store.commit_log import PutMessageResult, PutMessageStatus
from rocketq.store.ha import HEADER_SIZE
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig, StoreError

FILE = 64 * 1024
TOPIC = "HaTopic"


def _config(root: Path, **kw: object) -> MessageStoreConfig:
    base: dict[str, object] = dict(store_path_root_dir=str(root), mapped_file_size_commit_log=FILE,
                                   mapped_file_size_consume_queue=20 * 200, ha_send_heartbeat_interval=200)  # fmt: skip
    base.update(kw)
    return MessageStoreConfig(**base)  # type: ignore[arg-type]


@contextlib.contextmanager
def _store(root: Path, **kw: object) -> Iterator[MessageStore]:
    store = MessageStore(_config(root, **kw))
    store.load()
    store.start()
    try:
        yield store
    finally:
        store.close()


def _put(store: MessageStore, first: int, count: int, size: int = 700,
         expect: PutMessageStatus = PutMessageStatus.PUT_OK) -> None:  # fmt: skip
    for i in range(first, first + count):
        msg = Message(TOPIC, bytes([i % 251]) * size, 0, {"KEYS": f"key-{i}", "TAGS": f"Tag{i % 3}"})
        r = store.put_message(msg, i % 4)
        assert r.status is expect and r.wrote_offset >= 0, r


def _wait(cond: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def _conf_file(tmp_path: Path) -> Path:
    """A broker.conf with the sizes of these stores, for the command line."""
    conf = tmp_path / "broker.conf"
    conf.write_text(f"mappedFileSizeCommitLog={FILE}\nmappedFileSizeConsumeQueue={20 * 200}\n")
    return conf


def _requested(master: MessageStore) -> int:
    """Where the master's one slave asked to start, -1 before it has."""
    ha = master.ha_service
    conns = ha.connections if ha is not None else []
    return conns[0].slave_request_offset if conns else -1


def _same_files(master: Path, slave: Path) -> list[str]:
    """The slave's commit-log files, each checked byte for byte against the master's file of that name (up to
    the end the slave wrote: a slave's file ends in zeros where the master has not written yet either)."""
    names = sorted(p.name for p in (slave / "commitlog").iterdir())
    for name in names:
        assert (master / "commitlog" / name).read_bytes() == (slave / "commitlog" / name).read_bytes(), name
    return names


def test_parse_address() -> None:
    assert parse_server_address("127.0.0.1:10912") == ("127.0.0.1", 10912)
    assert parse_server_address("[::1]:10912") == ("::1", 10912)
    assert parse_address("127.0.0.1:0") == ("127.0.0.1", 0)  # a peer's port may be 0; a server's not
    for bad in ("nohost", "h:", ":1", "h:0", "h:99999", "h:x"):
        with pytest.raises(ValueError):
            parse_server_address(bad)


def test_broker_role_is_checked() -> None:
    assert MessageStoreConfig.from_properties({"brokerRole": "SLAVE"}).broker_role == "SLAVE"
    with pytest.raises(StoreError, match="brokerRole"):
        MessageStoreConfig.from_properties({"brokerRole": "MASTER"})


def test_slave_follows_master_from_the_start_byte_for_byte(tmp_path: Path) -> None:
    with _store(tmp_path / "m") as master:
        master.start_ha()
        assert master.ha_service is not None
        with _store(tmp_path / "s", broker_role="SLAVE") as slave:
            slave.start_ha(master_address=f"127.0.0.1:{master.ha_service.port}")
            # Connected first: a slave reporting 0 to a master that already has files would start at its last one.
            _wait(lambda: _requested(master) == 0)
            _put(master, 0, 400)  # about 4.5 files of 64 KiB: rolls and BLANK ends while the slave follows
            _wait(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset())
            _wait(lambda: master.ha_service is not None and
                  master.ha_service.push2slave_max_offset == master.get_max_phy_offset())  # fmt: skip
            assert slave.wait_dispatched() and master.wait_dispatched()  # each dispatches in the background
            # The slave's checkpoint follows dispatch for the commit log too, as RocketMQ's slave does: its appends
            # carry no store time for the flush services (abnormal recovery would otherwise scan from file 0).
            last = decode_record(slave.get_message("g", TOPIC, 3, 99, 1).messages[0])
            assert slave.checkpoint is not None and slave.checkpoint.physic_msg_timestamp >= last.store_timestamp > 0
            for q in range(4):
                assert slave.get_max_offset_in_queue(TOPIC, q) == master.get_max_offset_in_queue(TOPIC, q) == 100
                got = slave.get_message("g", TOPIC, q, 0, 32).messages
                assert len(got) == 32 and got == master.get_message("g", TOPIC, q, 0, 32).messages  # the records
                assert decode_record(got[5]).body == bytes([(q + 20) % 251]) * 700
            hits = slave.query_message(TOPIC, "key-123", 4, 0, 2**62)
            assert [m.properties["KEYS"] for m in hits.messages] == ["key-123"]
            refused = slave.put_message(Message(TOPIC, b"no", 0, {}), 0)
            assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
            assert "slave" in (refused.error or "")
    names = _same_files(tmp_path / "m", tmp_path / "s")
    assert names[0] == "0" * 20 and len(names) >= 4


def test_empty_slave_starts_at_the_masters_last_file_and_resumes_after_a_restart(tmp_path: Path) -> None:
    with _store(tmp_path / "m") as master:
        _put(master, 0, 250)  # 2.x files before any slave
        master.start_ha()
        assert master.ha_service is not None
        addr = f"127.0.0.1:{master.ha_service.port}"
        last_file = master.get_max_phy_offset() - master.get_max_phy_offset() % FILE
        with _store(tmp_path / "s", broker_role="SLAVE") as slave:
            slave.start_ha(master_address=addr)
            _wait(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset())
            assert slave.get_min_phy_offset() == last_file
            assert slave.wait_dispatched() and master.wait_dispatched()
            # Its consume queues begin where the master's queues were at that file (the units before are blank).
            for q in range(4):
                assert slave.get_max_offset_in_queue(TOPIC, q) == master.get_max_offset_in_queue(TOPIC, q)
                first = slave.get_min_offset_in_queue(TOPIC, q)
                assert 0 < first < 63
                got = slave.get_message("g", TOPIC, q, first, 1).messages
                assert got and got == master.get_message("g", TOPIC, q, first, 1).messages
        _put(master, 250, 150)  # while the slave is down
        with _store(tmp_path / "s", broker_role="SLAVE") as slave:
            slave.start_ha(master_address=addr)
            _wait(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset())
            assert slave.get_min_phy_offset() == last_file
            slave.wait_dispatched()
            assert slave.get_max_offset_in_queue(TOPIC, 1) == 100
    _same_files(tmp_path / "m", tmp_path / "s")


def test_sync_master_waits_for_the_slave(tmp_path: Path) -> None:
    with _store(tmp_path / "m", broker_role="SYNC_MASTER", slave_timeout=400) as master:
        # No replication service at all, then one with no slave: SLAVE_NOT_AVAILABLE at once, the record stored.
        r = master.put_message(Message(TOPIC, b"a", 0, {}), 0)
        assert r.status is PutMessageStatus.SLAVE_NOT_AVAILABLE and r.wrote_offset >= 0
        master.start_ha()
        ha = master.ha_service
        assert ha is not None
        t0 = time.monotonic()
        assert master.put_message(Message(TOPIC, b"b", 0, {}), 0).status is PutMessageStatus.SLAVE_NOT_AVAILABLE
        assert time.monotonic() - t0 < 0.3
        with _store(tmp_path / "s", broker_role="SLAVE") as slave:
            slave.start_ha(master_address=f"127.0.0.1:{ha.port}")
            _wait(lambda: ha.connection_count == 1 and slave.get_max_phy_offset() == master.get_max_phy_offset())
            for i in range(20):
                r = master.put_message(Message(TOPIC, b"c%d" % i, 0, {}), i % 2)
                assert r.status is PutMessageStatus.PUT_OK, r
                assert ha.push2slave_max_offset >= r.wrote_offset + r.wrote_bytes
            fut = master.put_messages_async([Message(TOPIC, b"d", 0, {}), Message(TOPIC, b"e", 0, {})], 3)
            assert fut.result(5).status is PutMessageStatus.PUT_OK

            async def aput() -> PutMessageStatus:
                return (await master.aput_message(Message(TOPIC, b"f", 0, {}), 2)).status

            assert asyncio.run(aput()) is PutMessageStatus.PUT_OK

            async def then() -> list[PutMessageStatus]:  # appended now, answered once the slave has it
                waits = [master.put_message_then(Message(TOPIC, b"g%d" % i, 0, {}), i % 4) for i in range(64)]
                assert all(not isinstance(w, PutMessageResult) for w in waits)
                return [r.status for r in await asyncio.gather(*waits)]  # type: ignore[arg-type]

            assert set(asyncio.run(then())) == {PutMessageStatus.PUT_OK}
            assert ha.push2slave_max_offset == master.get_max_phy_offset()


class FakeSlave:
    """A bare socket speaking the slave's side: reports offsets, collects the frames it is sent."""

    def __init__(self, port: int, report: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(struct.pack(">q", report))
        self.buf = b""

    def frame(self, timeout: float = 5.0) -> tuple[int, bytes]:
        self.sock.settimeout(timeout)
        while len(self.buf) < HEADER_SIZE or len(self.buf) < HEADER_SIZE + struct.unpack_from(">i", self.buf, 8)[0]:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed")
            self.buf += data
        offset, size = struct.unpack_from(">qi", self.buf)
        body = self.buf[HEADER_SIZE : HEADER_SIZE + size]
        self.buf = self.buf[HEADER_SIZE + size :]
        return offset, body

    def report(self, offset: int) -> None:
        self.sock.sendall(struct.pack(">q", offset))

    def close(self) -> None:
        self.sock.close()


def test_master_side_of_the_wire(tmp_path: Path) -> None:
    with _store(tmp_path / "m", broker_role="SYNC_MASTER", slave_timeout=300, ha_transfer_batch_size=4096) as master:
        _put(master, 0, 120, expect=PutMessageStatus.SLAVE_NOT_AVAILABLE)  # stored all the same; in the second file
        master.start_ha()
        ha = master.ha_service
        assert ha is not None
        end = master.get_max_phy_offset()
        raw = b"".join((tmp_path / "m" / "commitlog" / n).read_bytes() for n in sorted(
            p.name for p in (tmp_path / "m" / "commitlog").iterdir()))  # fmt: skip
        # An empty slave (reports 0) gets the last file from its start, in frames of at most the batch size.
        fake = FakeSlave(ha.port, 0)
        offset, got = FILE, b""
        while offset + len(got) < end:
            o, body = fake.frame()
            assert o == offset + len(got) and 0 < len(body) <= 4096
            got += body
        assert got == raw[FILE:end]
        # Idle: a heartbeat, a header of size 0 at the next offset.
        assert fake.frame(3.0) == (end, b"")
        # Not acknowledged: a SYNC_MASTER put times out (the record stays stored).
        t0 = time.monotonic()
        r = master.put_message(Message(TOPIC, b"late", 0, {}), 0)
        assert r.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT and 0.25 < time.monotonic() - t0 < 3
        o, body = fake.frame()
        while not body:
            o, body = fake.frame()
        assert o == end and body == raw[end:end] + (tmp_path / "m" / "commitlog" / f"{FILE:020d}").read_bytes()[
            end - FILE : end - FILE + r.wrote_bytes]  # fmt: skip
        # Acknowledged by the fake: the next put answers PUT_OK once the fake reports past it.
        fake.report(master.get_max_phy_offset())
        done = master.put_message_async(Message(TOPIC, b"acked", 0, {}), 1)
        o, body = fake.frame()
        while not body:  # a heartbeat came first
            o, body = fake.frame()
        assert not done.done() or done.result().status is not PutMessageStatus.PUT_OK
        fake.report(o + len(body))
        assert done.result(5).status is PutMessageStatus.PUT_OK
        # Not acknowledged, asyncio: the same timeout.
        t0 = time.monotonic()
        r = asyncio.run(master.aput_message(Message(TOPIC, b"late again", 0, {}), 2))
        assert r.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT and 0.25 < time.monotonic() - t0 < 3
        # A slave that reports more than the master holds is dropped.
        fake.report(master.get_max_phy_offset() + 1000)
        _wait(lambda: ha.connection_count == 0, 5)
        fake.close()
        # A slave that asks for an offset gets the log from there.
        fake = FakeSlave(ha.port, 100 * 700)
        o, _ = fake.frame()
        assert o == 100 * 700
        fake.close()


class FakeMaster:
    """A listening socket speaking the master's side to one slave."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.server.settimeout(10)
        self.conns: list[socket.socket] = []

    def accept(self) -> tuple[socket.socket, int]:
        conn, _ = self.server.accept()
        conn.settimeout(5)
        self.conns.append(conn)
        data = b""
        while len(data) < 8:
            data += conn.recv(8 - len(data))
        return conn, struct.unpack(">q", data)[0]

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.server.close()


def test_slave_side_of_the_wire(tmp_path: Path) -> None:
    with _store(tmp_path / "m") as source:
        _put(source, 0, 10)
        raw = (tmp_path / "m" / "commitlog" / ("0" * 20)).read_bytes()[: source.get_max_phy_offset()]
    fake = FakeMaster()
    try:
        with _store(tmp_path / "s", broker_role="SLAVE") as slave:
            slave.start_ha(master_address=f"127.0.0.1:{fake.port}")
            conn, reported = fake.accept()
            assert reported == 0
            # Two frames in one write, the second split over two writes; then a heartbeat.
            cut = len(raw) // 3
            conn.sendall(struct.pack(">qi", 0, cut) + raw[:cut] + struct.pack(">qi", cut, len(raw) - cut)
                         + raw[cut : cut + 50])  # fmt: skip
            time.sleep(0.1)
            conn.sendall(raw[cut + 50 :])
            conn.sendall(struct.pack(">qi", len(raw), 0))
            _wait(lambda: slave.get_max_phy_offset() == len(raw))
            # It acknowledges what it holds.
            acks = b""
            while len(acks) < 8 or struct.unpack_from(">q", acks, len(acks) - len(acks) % 8 - 8)[0] != len(raw):
                acks += conn.recv(64)
            slave.wait_dispatched()
            assert slave.get_max_offset_in_queue(TOPIC, 1) == 3
            # A frame that does not follow on: the slave drops the connection and reconnects from what it holds.
            conn.sendall(struct.pack(">qi", 12345, 4) + b"oops")
            assert slave.ha_client is not None
            conn2, reported = fake.accept()
            assert reported == len(raw)
            assert slave.get_max_phy_offset() == len(raw)
            conn2.close()
    finally:
        fake.close()
    assert (tmp_path / "s" / "commitlog" / ("0" * 20)).read_bytes()[: len(raw)] == raw


def test_slave_without_a_master_address_idles_and_takes_one_later(tmp_path: Path) -> None:
    with _store(tmp_path / "m") as master, _store(tmp_path / "s", broker_role="SLAVE") as slave:
        master.start_ha()
        slave.start_ha()
        client = slave.ha_client
        assert client is not None and not client.connected
        _put(master, 0, 5)
        assert master.ha_service is not None
        slave.update_ha_master_address(f"127.0.0.1:{master.ha_service.port}")
        _wait(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset())
        assert client.connects == 1


def test_master_stopping_is_survived(tmp_path: Path) -> None:
    """The master goes away (its store closed) and comes back on the same port: the slave reconnects and resumes."""
    with _store(tmp_path / "s", broker_role="SLAVE") as slave:
        with _store(tmp_path / "m") as master:
            master.start_ha()
            assert master.ha_service is not None
            port = master.ha_service.port
            slave.start_ha(master_address=f"127.0.0.1:{port}")
            _put(master, 0, 50)
            _wait(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset())
        client = slave.ha_client
        assert client is not None
        _wait(lambda: not client.connected, 10)
        with _store(tmp_path / "m") as master:
            master.start_ha(port=port)
            _put(master, 50, 50)
            client.wakeup()  # instead of the 5 s pause between attempts
            _wait(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset(), 20)
            assert client.connects >= 2
    _same_files(tmp_path / "m", tmp_path / "s")


def test_threads_end_with_the_store(tmp_path: Path) -> None:
    before = {t.name for t in threading.enumerate()}
    with _store(tmp_path / "m") as master, _store(tmp_path / "s", broker_role="SLAVE") as slave:
        master.start_ha()
        assert master.ha_service is not None
        slave.start_ha(master_address=f"127.0.0.1:{master.ha_service.port}")
        _wait(lambda: master.ha_service is not None and master.ha_service.connection_count == 1)
    time.sleep(0.2)
    left = {t.name for t in threading.enumerate() if t.is_alive()} - before
    assert not {n for n in left if n.startswith(("HA", "GroupTransfer"))}, left


def test_slave_closed_mid_record_resumes_from_its_last_whole_record(tmp_path: Path) -> None:
    """Frames do not follow record boundaries: a slave stopped after half a record reopens at its last whole
    record (recovery drops the half) and its master sends the rest from there."""
    with _store(tmp_path / "m", ha_transfer_batch_size=1000) as master:
        _put(master, 0, 10)
        raw = (tmp_path / "m" / "commitlog" / ("0" * 20)).read_bytes()[: master.get_max_phy_offset()]
        cut = 2 * 883 + 400  # into the third record (883 bytes each)
        fake = FakeMaster()
        try:
            with _store(tmp_path / "s", broker_role="SLAVE") as slave:
                slave.start_ha(master_address=f"127.0.0.1:{fake.port}")
                conn, _ = fake.accept()
                conn.sendall(struct.pack(">qi", 0, cut) + raw[:cut])
                _wait(lambda: slave.get_max_phy_offset() == cut)
                slave.wait_dispatched()
                assert slave.get_max_offset_in_queue(TOPIC, 1) == 1  # the whole second record only
        finally:
            fake.close()
        # `rocketq store verify` sees the half record as what it is, not as damage.
        from rocketq.cli.main import main

        assert main(["store", "verify", str(tmp_path / "s"), "-c", str(_conf_file(tmp_path))]) == 0
        master.start_ha()
        assert master.ha_service is not None
        with _store(tmp_path / "s", broker_role="SLAVE") as slave:
            assert slave.get_max_phy_offset() == 2 * 883
            slave.start_ha(master_address=f"127.0.0.1:{master.ha_service.port}")
            _wait(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset())
            slave.wait_dispatched()
            assert [slave.get_max_offset_in_queue(TOPIC, q) for q in range(4)] == [3, 3, 2, 2]
    _same_files(tmp_path / "m", tmp_path / "s")


SLAVE_PROCESS = r"""
import sys, time
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig
root, master = sys.argv[1], sys.argv[2]
cfg = MessageStoreConfig(store_path_root_dir=root, mapped_file_size_commit_log=64 * 1024,
                         mapped_file_size_consume_queue=20 * 200, broker_role="SLAVE")
store = MessageStore(cfg)
store.load(); store.start(); store.start_ha(master_address=master)
sys.stdout.write("up\n"); sys.stdout.flush()
time.sleep(3600)
"""


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_slave_killed_while_it_replicates_recovers_and_resumes(tmp_path: Path, seed: int) -> None:
    """kill -9 of a slave process at a random moment while its master takes puts (the slave's log may end
    inside a record, its consume queues behind): reopened, it recovers, resumes, and ends byte for byte equal."""
    import random
    import signal
    import subprocess
    import sys

    rng = random.Random(seed)
    with _store(tmp_path / "m", ha_transfer_batch_size=rng.choice([700, 1500, 4096])) as master:
        master.start_ha()
        assert master.ha_service is not None
        addr = f"127.0.0.1:{master.ha_service.port}"
        proc = subprocess.Popen([sys.executable, "-c", SLAVE_PROCESS, str(tmp_path / "s"), addr],
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
            _wait(lambda: _requested(master) == 0)
            stop = threading.Event()

            def load() -> None:
                i = 0
                while not stop.is_set() and i < 3000:
                    _put(master, i, 1, size=rng.randrange(100, 1500))
                    i += 1

            writer = threading.Thread(target=load)
            writer.start()
            time.sleep(rng.uniform(0.2, 0.8))
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            stop.set()
            writer.join(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        assert (tmp_path / "s" / "abort").exists()  # killed: the reopen is an abnormal recovery
        with _store(tmp_path / "s", broker_role="SLAVE") as slave:
            assert slave.get_max_phy_offset() > 0  # it had replicated something, recovered here
            slave.start_ha(master_address=addr)
            _wait(lambda: slave.get_max_phy_offset() == master.get_max_phy_offset(), 30)
            slave.wait_dispatched()
            master.wait_dispatched()
            for q in range(4):
                assert slave.get_max_offset_in_queue(TOPIC, q) == master.get_max_offset_in_queue(TOPIC, q)
                assert slave.get_message("g", TOPIC, q, 0, 16).messages == master.get_message("g", TOPIC, q, 0,
                                                                                            16).messages  # fmt: skip
    _same_files(tmp_path / "m", tmp_path / "s")
