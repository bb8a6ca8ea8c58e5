"""Message filters for ``get_message``: RocketMQ's ``MessageFilter``.

A filter is asked first with the consume-queue tag code (cheap, no commit-log
read), then, for candidates, with the record bytes. ``TagFilter`` is the
classic tag subscription (``TagA || TagB`` or ``*``), matched by tag hash code
as the broker's ``ExpressionMessageFilter`` does.
"""

from __future__ import annotations

from typing import Protocol

from rocketq.common.javacompat import java_string_hash

SUB_ALL = "*"


class MessageFilter(Protocol):
    @property
    def matches_all(self) -> bool:
        """Every record matches (``get_message`` then reads without asking record by record)."""
        ...

    def is_matched_by_consume_queue(self, tags_code: int) -> bool: ...

    def is_matched_by_commit_log(self, record: bytes) -> bool: ...


class TagFilter:
    """Match by tag: ``*`` (or empty) matches everything, else any listed tag."""

    def __init__(self, expression: str | None = SUB_ALL) -> None:
        expr = (expression or "").strip()
        self.expression = expr or SUB_ALL
        if self.expression == SUB_ALL:
            self.tags: frozenset[str] = frozenset()
            self.codes: frozenset[int] | None = None
        else:
            self.tags = frozenset(t.strip() for t in expr.split("||") if t.strip())
            self.codes = frozenset(java_string_hash(t) for t in self.tags)

    @property
    def matches_all(self) -> bool:
        return self.codes is None

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return self.codes is None or tags_code in self.codes

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return True

    def __repr__(self) -> str:
        return f"TagFilter({self.expression!r})"
