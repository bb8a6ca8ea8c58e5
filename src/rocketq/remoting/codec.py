"""FrameDecoder: the sans-I/O stream decoder, bytes in, commands out.

Mirrors RocketMQ's ``remoting/netty/NettyDecoder`` (a ``LengthFieldBasedFrameDecoder`` with
``frameMaxLength`` from ``com.rocketmq.remoting.frameMaxLength``, 16 MiB by default, whose frames then go
through ``RemotingCommand.decode``) (spec: remoting-protocol §1, §2).

Stream layout (big-endian), frames back to back with no separator::

    0    i32  length        bytes after this field: 4 + H + B;  4 + length <= max_frame_length
    4    i32  header word   serialize type << 24 | H
    8    H    header        JSON or ROCKETMQ (see ``rocketq.remoting.command``)
    8+H  B    body

A Java peer closes the connection on a frame that is too long or does not decode; this decoder raises
``FrameError`` (carrying the good commands cut before the bad frame in ``decoded``) and stays failed,
and the transport closes that connection. A too-long or impossible
length is refused as soon as its four bytes arrive, without buffering the announced payload.
"""

from __future__ import annotations

import struct
from typing import Final

from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.errors import FrameError

__all__ = ["FRAME_MAX_LENGTH", "FrameDecoder"]

#: Largest frame, its 4 length bytes included (Java's ``frameMaxLength`` default, 16777216).
FRAME_MAX_LENGTH: Final = 16 * 1024 * 1024

_I32 = struct.Struct(">i")


class FrameDecoder:
    """Accumulates received bytes and cuts them into ``RemotingCommand``s.

    ``feed(data)`` returns every command completed by ``data`` (possibly none), in order. After a
    ``FrameError`` the stream cannot be resynchronised: every later ``feed`` raises again.
    """

    def __init__(self, max_frame_length: int = FRAME_MAX_LENGTH) -> None:
        if max_frame_length < 8:
            raise ValueError(f"max_frame_length must be at least 8, not {max_frame_length}")
        self.max_frame_length = max_frame_length
        self._buffer = bytearray()
        self._error: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buffer)

    @property
    def failed(self) -> bool:
        return self._error is not None

    def _check_length(self, length: int) -> None:
        if length < 4:
            raise FrameError(f"frame length {length} is too small for a header word")
        if length + 4 > self.max_frame_length:
            raise FrameError(f"frame of {length + 4} bytes exceeds the maximum of {self.max_frame_length}")

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Add received bytes; return the commands they complete.

        Raises ``FrameError`` on a bad frame; its ``decoded`` lists the commands completed before it.
        """
        if self._error is not None:
            raise FrameError(f"stream already failed: {self._error}")
        buf = self._buffer
        # Nothing held back (the usual case): cut frames straight out of ``data``, keep only its tail.
        source = buf if buf else data
        if buf:
            buf += data
        size = len(source)
        commands: list[RemotingCommand] = []
        pos = 0
        view = memoryview(source)
        decode = RemotingCommand.decode_payload
        max_length = self.max_frame_length - 4
        try:
            while size - pos >= 4:
                (length,) = _I32.unpack_from(view, pos)
                if length < 4 or length > max_length:
                    self._check_length(length)
                end = pos + 4 + length
                if end > size:
                    break
                commands.append(decode(view[pos + 4 : end]))
                pos = end
        except FrameError as exc:
            self._error = exc
            exc.decoded = commands
            # The traceback may still pin views of the old buffer (no resize possible): drop it whole.
            self._buffer = bytearray()
            raise
        view.release()
        if source is buf:
            del buf[:pos]
        elif pos < size:
            buf += data[pos:]
        return commands
