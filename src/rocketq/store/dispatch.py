"""What dispatch hands to the consume queues and the index: RocketMQ's ``DispatchRequest``, a batch at a time.

RocketMQ's reput service makes one ``DispatchRequest`` per record and calls
each dispatcher with it (store-format §10). Here records travel in batches
held column by column (:class:`DispatchBatch`): the consume queues take the
units of a run of records with one numpy write per queue and the index hashes
all keys of the batch together, so the per-record work left in Python is a few
list operations.

A batch is made from *rows*: plain tuples with the fields of
:class:`DispatchRequest` in its order. The put path makes a row for each record
it appends, from the message in hand (the hand-off, so the reput service need
not parse back what was just encoded); reading the commit log (start-up,
recovery, records that were not handed off) makes rows from the bytes. Either
way the commit log stays the one source of truth: a row is used only for the
record at exactly the offset the reput service has reached.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from rocketq.common.message import TRANSACTION_PREPARED_TYPE


class DispatchRequest(NamedTuple):
    """One record as the dispatchers see it (``DispatchRequest``); also the order of a row's fields."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    properties: dict[str, str]


# Positions of a few fields in a row.
ROW_OFFSET = 2
ROW_SIZE = 3
ROW_QUEUE_OFFSET = DispatchRequest._fields.index("consume_queue_offset")
ROW_SYS_FLAG = DispatchRequest._fields.index("sys_flag")

# consume_queue_groups: up to this many records, a batch of one queue is found without numpy, its record
# numbers a view of _ALL (read-only, as every group's index is to its users).
_ONE_QUEUE_CHECK = 1024
_ALL = np.arange(_ONE_QUEUE_CHECK, dtype=np.int64)
_ALL.flags.writeable = False

# consume_queue_groups: up to this many records of several queues (the sends of one turn of a broker's loop), the
# queues are told apart in a plain loop: numpy's steps (conversions, a sort, the cuts) cost twice as much there.
_FEW_GROUPED = 128

_EMPTY_PROPS: dict[str, str] = {}


def _few_groups(topics: Sequence[str], queue_ids: Sequence[int],
                sys_flags: Sequence[int]) -> list[tuple[str, int, np.ndarray]]:  # fmt: skip
    """:meth:`DispatchBatch.consume_queue_groups` of a few records, in a plain loop (same answer)."""
    records: dict[tuple[str, int], list[int]] = {}
    for i, (topic, queue_id, flag) in enumerate(zip(topics, queue_ids, sys_flags, strict=True)):
        if not flag & TRANSACTION_PREPARED_TYPE:
            numbers = records.get((topic, queue_id))
            if numbers is None:
                records[(topic, queue_id)] = [i]
            else:
                numbers.append(i)
    return [(topic, queue_id, np.array(numbers, dtype=np.int64)) for (topic, queue_id), numbers in records.items()]


class DispatchBatch:
    """Records in commit-log order, one sequence per field of :class:`DispatchRequest`.

    ``index_keys``, when set, gives the records' index key values already hashed
    (record numbers, ``String.hashCode`` and length of each ``UNIQ_KEY`` and ``KEYS``
    token, see :meth:`IndexService.build_index_hashed`); the ``keys`` and
    ``uniq_key`` columns are then left None. Records read back from the file for
    the consume queues and the index alone come so, without a string per key.
    """

    __slots__ = (*DispatchRequest._fields, "has_properties", "index_keys")

    topic: Sequence[str]
    queue_id: Sequence[int]
    commit_log_offset: Sequence[int]
    msg_size: Sequence[int]
    tags_code: Sequence[int]
    store_timestamp: Sequence[int]
    consume_queue_offset: Sequence[int]
    keys: Sequence[str | None]
    uniq_key: Sequence[str | None]
    sys_flag: Sequence[int]
    prepared_transaction_offset: Sequence[int]
    properties: Sequence[dict[str, str]]

    def __init__(self, *columns: Sequence[object], index_keys: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                 has_properties: bool = True) -> None:  # fmt: skip
        """*has_properties* False: the ``properties`` column holds empty placeholders, not the records' maps."""
        for name, column in zip(DispatchRequest._fields, columns, strict=True):
            setattr(self, name, column)
        self.index_keys = index_keys
        self.has_properties = has_properties

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[object, ...]]) -> DispatchBatch:
        """Columns of *rows* (tuples in :class:`DispatchRequest` order): one transposition in C."""
        if not rows:
            return cls(*([()] * len(DispatchRequest._fields)))
        return cls(*zip(*rows, strict=True))

    def __len__(self) -> int:
        return len(self.commit_log_offset)

    def requests(self) -> Iterator[DispatchRequest]:
        """The records one by one, with plain Python values (for per-record hooks)."""
        if self.index_keys is not None:
            raise ValueError("the keys of this batch were hashed: read it with full properties for requests")
        columns = [getattr(self, name) for name in DispatchRequest._fields]
        columns = [c.tolist() if isinstance(c, np.ndarray) else c for c in columns]
        for row in zip(*columns, strict=True):
            yield DispatchRequest._make(row)

    def end_offset(self) -> int:
        """Commit-log offset just past the last record."""
        return int(self.commit_log_offset[-1]) + int(self.msg_size[-1])

    def consume_queue_groups(self) -> list[tuple[str, int, np.ndarray]]:
        """(topic, queue id, record indexes in order) of every queue that gets units (§4.4).

        PREPARED and ROLLBACK records (both have the 0x4 bit) get no unit.
        """
        n = len(self)
        topics, queue_ids, sys_flags = self.topic, self.queue_id, self.sys_flag
        if 0 < n <= _ONE_QUEUE_CHECK and type(queue_ids) in (tuple, list):
            # The usual live batch (a producer's batch, or one send): one queue, no PREPARED half. Told apart with
            # a few passes in C over the columns; numpy's steps below cost some 70 us for 32 records in a broker.
            first = queue_ids[0]
            if queue_ids.count(first) == n and topics.count(topics[0]) == n and \
                    not any(f & TRANSACTION_PREPARED_TYPE for f in set(sys_flags)):  # fmt: skip
                return [(topics[0], first, _ALL[:n])]
            if n <= _FEW_GROUPED and type(topics) in (tuple, list) and type(sys_flags) in (tuple, list):
                return _few_groups(topics, queue_ids, sys_flags)
        flags = np.asarray(sys_flags, dtype=np.int64)
        wanted = np.flatnonzero((flags & TRANSACTION_PREPARED_TYPE) == 0)
        if len(wanted) == 0:
            return []
        topics = self.topic
        if topics.count(topics[0]) == n:
            # One topic (the usual batch): the queue ids alone tell the queues apart.
            topic = topics[0]
            ids = np.asarray(self.queue_id, dtype=np.int64)[wanted]
            names: list[tuple[str, int]] | None = None
        else:
            keys = list(zip(topics, self.queue_id, strict=True))
            if len(wanted) < n:
                keys = [keys[i] for i in wanted.tolist()]
            code_of = {k: i for i, k in enumerate(dict.fromkeys(keys))}
            ids = np.fromiter(map(code_of.__getitem__, keys), dtype=np.int64, count=len(keys))
            names = list(code_of)
        order = np.argsort(ids, kind="stable")  # stable: commit-log order within each queue
        sorted_ids = ids[order]
        cuts = [0, *(np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1).tolist(), len(order)]
        groups = []
        for a, b in itertools.pairwise(cuts):
            code = int(sorted_ids[a])
            topic, queue_id = (topic, code) if names is None else names[code]
            groups.append((topic, queue_id, wanted[order[a:b]]))
        return groups


def empty_properties() -> dict[str, str]:
    """The shared empty property map of rows made without their properties (read-only: never mutate it)."""
    return _EMPTY_PROPS
