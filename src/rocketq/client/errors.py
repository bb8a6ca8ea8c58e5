"""Exceptions of the client, each saying what went wrong.

Mirrors RocketMQ's ``client/exception`` package: ``MQClientException`` (``ClientError`` and the subclasses
for a missing route, a bad message or a client that is not running) and ``MQBrokerException``
(``BrokerError``, with the response code and remark a broker answered; ``BrokerBusyError`` for
SYSTEM_BUSY). Timeouts and lost connections of the remoting layer come through as ``ClientTimeoutError``
and ``BrokerUnreachableError``, which are also ``TimeoutError`` / ``ConnectionError``.
"""

from __future__ import annotations

import logging

from rocketq.common.errors import RocketqError
from rocketq.remoting.codes import ResponseCode, response_code_name

__all__ = [
    "BrokerBusyError",
    "BrokerError",
    "BrokerUnreachableError",
    "ClientError",
    "ClientNotRunningError",
    "ClientTimeoutError",
    "InvalidMessageError",
    "NoRouteError",
    "log_failure",
]


class ClientError(RocketqError):
    """Base class of every error the client raises (Java's ``MQClientException``)."""


class NoRouteError(ClientError):
    """No name server knows a route for the topic (and, for producers, ``TBW102`` did not help either)."""

    def __init__(self, topic: str, detail: str = "") -> None:
        text = f"no route info for topic {topic!r}"
        super().__init__(f"{text}: {detail}" if detail else text)
        self.topic = topic


class InvalidMessageError(ClientError, ValueError):
    """A message, topic or argument the client refuses before sending (Java's ``Validators``)."""


class ClientNotRunningError(ClientError):
    """A call on a producer or consumer that is not started, or already shut down."""


class ClientTimeoutError(ClientError, TimeoutError):
    """No answer within the time allowed (a send, a pull, a name-server query)."""


class RequestTimeoutError(ClientTimeoutError):
    """A request of request-reply went out, but no reply came back in time (Java's ``RequestTimeoutException``)."""


class BrokerUnreachableError(ClientError, ConnectionError):
    """The connection to a broker or name server could not be opened or was lost."""


class BrokerError(ClientError):
    """A broker or name server answered with an error code (Java's ``MQBrokerException``).

    ``code`` is the response code, ``remark`` the server's text, ``addr`` who answered.
    """

    def __init__(self, code: int, remark: str | None, addr: str | None = None) -> None:
        name = response_code_name(code)
        where = f" from {addr}" if addr else ""
        super().__init__(f"{name} ({code}){where}: {remark or 'no remark'}")
        self.code = code
        self.remark = remark
        self.addr = addr


class BrokerBusyError(BrokerError):
    """The broker answered SYSTEM_BUSY (flow control): try again later or elsewhere."""


def broker_error(code: int, remark: str | None, addr: str | None = None) -> BrokerError:
    """The ``BrokerError`` subclass that fits ``code``."""
    if code == ResponseCode.SYSTEM_BUSY:
        return BrokerBusyError(code, remark, addr)
    return BrokerError(code, remark, addr)


def log_failure(logger: logging.Logger, exc: BaseException, what: str, *args: object) -> None:
    """Log that *what* (a %-format of *args*) failed in a background job of the client: a :class:`ClientError`
    (a server that does not answer, refuses or times out: it will be tried again) as one warning line with its
    reason; anything else, a bug, at ERROR with its traceback."""
    if isinstance(exc, ClientError):
        logger.warning(f"{what} failed: %s", *args, exc)
    else:
        logger.error(f"{what} failed", *args, exc_info=exc)
