"""The outcome of a pull: Java's ``PullStatus`` and ``PullResult``.

FOUND carries messages (decoded, decompressed, filtered by tag); NO_NEW_MSG (PULL_NOT_FOUND, after the
broker held the request), NO_MATCHED_MSG (PULL_RETRY_IMMEDIATELY) and OFFSET_ILLEGAL (PULL_OFFSET_MOVED)
carry none; every status says where to pull next (``next_begin_offset``) and the queue's bounds.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rocketq.common.message import MessageExt
from rocketq.remoting.codes import ResponseCode

__all__ = ["PullResult", "PullStatus"]


class PullStatus(enum.Enum):
    FOUND = 0
    NO_NEW_MSG = 1
    NO_MATCHED_MSG = 2
    OFFSET_ILLEGAL = 3

    @classmethod
    def from_response_code(cls, code: int) -> PullStatus | None:
        return _BY_CODE.get(code)


_BY_CODE: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0
    raw_body: bytes | None = field(default=None, repr=False)  # the records, until decoded
