"""A helper process that runs the group commit's fdatasync for an event loop (SYNC_FLUSH, asyncio puts).

RocketMQ's ``GroupCommitService`` flushes on a thread of its own while puts go on, and the puts that came
during a flush ride the next one: flushing and appending overlap. A CPython thread cannot give that to an
event loop. When its fdatasync returns it needs the GIL to tell anyone, and the loop holds the GIL for as
long as it has puts to serve, so the news waits until the loop goes idle (or for the 5 ms switch interval).
Appends and flushes then take turns: a round of 64 puts and its flush took the sum of the two, about 1 ms,
of which the disk was 0.3 ms.

A process has an interpreter of its own. The loop writes a request per file to the helper's stdin. The
helper runs the fdatasync and writes the request's sequence number into a page both map. The loop reads
that page with every put it serves, a memory read, so it learns of a finished flush within one put and can
start the next at once (``GroupCommitService`` says when it does); one byte on the helper's stdout wakes a
loop that has nothing else to do. (``durability_bench``, 64 asyncio writers: flushes of about 30 messages
back to back, and about 10% more puts/s than the thread's rounds in alternating runs.)

The wire, all little-endian:

- loop → helper (stdin): ``<qH`` sequence number and path length, then the path's bytes;
- helper → loop (the page): ``<q`` at 0, the last sequence number done; ``<qi`` at 8, the last one that
  failed and its errno (written before the "done" it belongs to); and one byte on stdout per request.

The helper runs this file with ``python -I -S``, importing nothing but the standard library, and exits when
its stdin ends (the store closed it, or the process that owned it died).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import mmap
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import IO

REQUEST = struct.Struct("<qH")
_SEQ = struct.Struct("<q")
_FAILED = struct.Struct("<qi")
_DONE_AT, _FAILED_AT = 0, 8
_PAGE = mmap.PAGESIZE
_OPEN_FILES = 4  # descriptors the helper keeps open: the commit log's current file and the few before it


class SyncHelper:
    """The loop's side of one helper process; every method runs in the loop's thread but :meth:`close`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_done: Callable[[], None]) -> None:
        """Start the helper; *on_done* runs in the loop when the helper reports (or goes away).

        Raises OSError (or ValueError without a Python executable) when it cannot be started."""
        if not sys.executable:
            raise ValueError("no Python executable to run the sync helper")
        self.loop = loop
        self.broken = False
        self._closed = False
        self.sent = 0
        self._on_done = on_done
        page_fd = _shared_page()
        try:
            os.ftruncate(page_fd, _PAGE)
            self._page = mmap.mmap(page_fd, _PAGE)
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", __file__, str(page_fd)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=(page_fd,), bufsize=0,
                start_new_session=True,  # a Ctrl-C at the terminal is the store's to handle; the helper ends with it
            )  # fmt: skip
        finally:
            os.close(page_fd)  # the mapping (and the helper) hold it
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._in = self._proc.stdin
        self._out = self._proc.stdout
        os.set_blocking(self._out.fileno(), False)
        loop.add_reader(self._out.fileno(), self._readable)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def request(self, path: bytes) -> int:
        """Ask for an fdatasync of *path*; its sequence number (raises OSError when the helper is gone)."""
        if self.broken:
            raise OSError(errno.EPIPE, "the sync helper has ended")
        self.sent += 1
        try:
            self._in.write(REQUEST.pack(self.sent, len(path)) + path)
        except ValueError as e:  # closed by another thread meanwhile
            raise OSError(errno.EPIPE, "the sync helper has ended") from e
        return self.sent

    def done(self) -> int:
        """The sequence number of the last request finished (ok or failed)."""
        return _SEQ.unpack_from(self._page, _DONE_AT)[0]

    def failed(self) -> tuple[int, int]:
        """The sequence number of the last request that failed, and its errno."""
        return _FAILED.unpack_from(self._page, _FAILED_AT)  # type: ignore[return-value]

    def _readable(self) -> None:
        try:
            data = os.read(self._out.fileno(), 4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the helper is gone
            self.broken = True
            self.loop.remove_reader(self._out.fileno())
        self._on_done()

    def close(self) -> None:
        """Stop the helper (from any thread, more than once); requests not finished are not reported."""
        self.broken = True
        if self._closed:
            return
        self._closed = True
        loop = self.loop
        fd = self._out.fileno()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop or not loop.is_running():
            if not loop.is_closed():
                loop.remove_reader(fd)
            self._out.close()
        else:  # the loop's own thread takes the reader off
            try:
                loop.call_soon_threadsafe(_drop_reader, loop, self._out)
            except RuntimeError:  # closed meanwhile
                self._out.close()
        with contextlib.suppress(OSError):
            self._in.close()
        try:
            self._proc.wait(5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)
        self._page.close()


def _drop_reader(loop: asyncio.AbstractEventLoop, out: IO[bytes]) -> None:
    loop.remove_reader(out.fileno())
    out.close()


def _shared_page() -> int:
    """A descriptor of a page the helper can map too: an anonymous memory file, else an unlinked temp file."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("rocketq-sync", 0)
    with tempfile.TemporaryFile() as f:
        return os.dup(f.fileno())


# ---------------------------------------------------------------------------------------------- the helper


def _read_exactly(n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = os.read(0, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _helper_main(page_fd: int) -> None:
    page = mmap.mmap(page_fd, _PAGE)
    fds: dict[bytes, int] = {}
    while True:
        head = _read_exactly(REQUEST.size)
        if head is None:
            return
        seq, length = REQUEST.unpack(head)
        path = _read_exactly(length)
        if path is None:
            return
        try:
            fd = fds.get(path)
            if fd is None:
                if len(fds) >= _OPEN_FILES:  # the oldest goes: a file the store deleted must not be held open
                    os.close(fds.pop(next(iter(fds))))
                fd = fds[path] = os.open(path, os.O_RDWR)
            os.fdatasync(fd)
        except OSError as e:
            _FAILED.pack_into(page, _FAILED_AT, seq, e.errno or errno.EIO)
            stale = fds.pop(path, None)
            if stale is not None:
                with contextlib.suppress(OSError):
                    os.close(stale)
        _SEQ.pack_into(page, _DONE_AT, seq)
        try:
            os.write(1, b"\x01")
        except OSError:  # nobody listens any more
            return


if __name__ == "__main__":
    _helper_main(int(sys.argv[1]))
