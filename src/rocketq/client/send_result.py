"""The outcome of a send: Java's ``SendStatus`` and ``SendResult``.

``msg_id`` is the client's id of the message (its ``UNIQ_KEY``; for a batch, the ids joined by ``,``),
``offset_msg_id`` the broker's offset message id (store address + commit-log offset, remoting-protocol
§10.1), ``queue_offset`` the message's offset in ``message_queue``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rocketq.client.message_queue import MessageQueue
from rocketq.remoting.codes import ResponseCode

__all__ = ["SendResult", "SendStatus"]


class SendStatus(enum.Enum):
    """SEND_OK, or stored but not as safely as asked (sync flush or replica timed out / missing)."""

    SEND_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3

    @classmethod
    def from_response_code(cls, code: int) -> SendStatus | None:
        return _BY_CODE.get(code)


_BY_CODE: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


@dataclass(slots=True)
class SendResult:
    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    @property
    def ok(self) -> bool:
        return self.status is SendStatus.SEND_OK
