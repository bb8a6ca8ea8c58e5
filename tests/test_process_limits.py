"""What a server needs of its process: descriptors (the open-files limit, one a consume-queue file) and failures
that repeat reported once in a while."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocketq.common.log_throttle import Throttled
from rocketq.common.message import Message
from rocketq.remoting.eventloop import _AcceptFailures
from rocketq.store.message_store import MessageStore
from rocketq.store.store_config import MessageStoreConfig


def _descriptors_under(directory: Path) -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(str(directory)):
                n += 1
        except OSError:
            pass
    return n


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_consume_queue_file_holds_one_descriptor(tmp_path: Path) -> None:
    """The mapping holds one; the file held a second one besides (a broker of 16,000 queue files ran out of
    descriptors where RocketMQ, one a file, did not)."""
    store = MessageStore(MessageStoreConfig(store_path_root_dir=str(tmp_path / "s"),
                                            mapped_file_size_consume_queue=6000))  # fmt: skip
    store.load()
    store.start()
    try:
        for t in range(5):
            for q in range(8):
                assert store.put_message(Message(f"ManyQueues{t}", b"x"), q).ok
        assert store.wait_dispatched(10)
        cq_files = [p for p in (tmp_path / "s" / "consumequeue").rglob("0*") if p.is_file()]
        assert len(cq_files) == 40
        assert _descriptors_under(tmp_path / "s" / "consumequeue") == 40
        assert store.get_message("g", "ManyQueues3", 7, 0, 1).messages  # still read through its mapping
    finally:
        store.close()
    assert _descriptors_under(tmp_path / "s") == 0


def _limits_after(soft: int, hard: int) -> tuple[str, str]:
    code = ("import resource, logging; logging.basicConfig(); "
            "from rocketq.common.process_limits import raise_open_files_limit; "
            "print(raise_open_files_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])")  # fmt: skip

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, preexec_fn=limit, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def test_the_open_files_limit_is_raised_to_the_hard_one() -> None:
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard < 2048:
        pytest.skip(f"the hard limit here ({hard}) leaves nothing to raise to")
    out, _err = _limits_after(1024, hard)
    assert out.split() == [str(hard), str(hard)]  # as the JVM does for RocketMQ's processes
    out, err = _limits_after(1000, 1000)
    assert out.split() == ["1000", "1000"] and "the open files limit is 1000" in err


def test_a_repeated_failure_is_reported_once_in_a_while(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("rocketq.test.throttle")
    report = Throttled(log, every_s=60)
    with caplog.at_level(logging.ERROR, logger="rocketq.test.throttle"):
        for i in range(500):
            try:
                raise OSError(24, "Too many open files")
            except OSError:
                report.exception("dispatch failed at %d", i)
        report._last -= 61  # a minute on
        report.error("dispatch failed at %d", 500)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["dispatch failed at 0", "dispatch failed at 500 (499 more like it since the last report)"]
    assert caplog.records[0].exc_info is not None


def test_accept_failures_do_not_flood_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """asyncio reports each failed accept (no descriptor left) with a traceback, thousands a second."""
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        handler = _AcceptFailures()
        with caplog.at_level(logging.ERROR):
            for _ in range(1000):
                handler(loop, {"message": "socket.accept() out of system resource",
                               "exception": OSError(24, "Too many open files")})  # fmt: skip
            handler(loop, {"message": "something else"})
        accept = [r for r in caplog.records if "cannot accept connections" in r.getMessage()]
        assert len(accept) == 1 and "ulimit -n" in accept[0].getMessage()
        assert any("something else" in r.getMessage() for r in caplog.records)  # the default handler's
    finally:
        loop.close()
