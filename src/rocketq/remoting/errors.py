"""Exceptions of the remoting layer.

Mirror the exceptions of RocketMQ's ``remoting/exception`` package:
``RemotingCommandException`` (``FrameError``, ``HeaderFieldError``, ``RequestBodyError``),
``RemotingTimeoutException`` (``RemotingTimeoutError``),
``RemotingConnectException`` / ``RemotingSendRequestException`` (``RemotingConnectError``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketq.common.errors import RocketqError

if TYPE_CHECKING:
    from rocketq.remoting.command import RemotingCommand


class RemotingError(RocketqError):
    """Base class of the errors raised by ``rocketq.remoting``."""


class FrameError(RemotingError, ValueError):
    """Bytes that are not a valid frame: bad length, header length, serialize type or header.

    ``decoded`` holds the good commands that ``FrameDecoder.feed`` cut from the same data before the
    bad frame (a Java peer would have handled them before closing the connection).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.decoded: list[RemotingCommand] = []


class RequestBodyError(RemotingError, ValueError):
    """A request's body that cannot be used (not the JSON, zlib or layout its code calls for).

    A server answers it with SYSTEM_ERROR and ``str(exc)`` as the remark, as a Java processor answers the
    ``RemotingCommandException`` of a body it fails to decode, and logs one line: a stray or broken client is
    not a fault of the server's.
    """


class HeaderFieldError(RemotingError, ValueError):
    """A custom-header field (an ``extFields`` entry) is missing or does not parse.

    A server answers a request that raises it with SYSTEM_ERROR and ``str(exc)`` as the remark,
    as a Java server does when its processor meets a header it cannot use.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response arrived within the timeout of a call."""


class RemotingConnectError(RemotingError, ConnectionError):
    """A connection could not be opened, or was lost while a call was waiting or sending."""
