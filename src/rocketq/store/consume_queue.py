"""One consume queue: RocketMQ's ``ConsumeQueue`` (store-format §4, §11.3, §11.5).

Files ``consumequeue/<topic>/<queueId>/<20-digit logical offset>`` hold
20-byte units, unit *q* (the queue offset) at logical byte *q* × 20::

    0   i64  commit-log offset of the record
    8   i32  TOTALSIZE of the record
    12  i64  tag code (String.hashCode of TAGS; deliver time for delayed messages)

A unit is valid when offset ≥ 0 and size > 0; zeros end the data. Filler
units (offset 0, size 0x7FFFFFFF) stand before the first real unit of a queue
whose files were rebuilt from the middle. Units are read in bulk as numpy
structured arrays (one copy out of the mapping, no per-unit Python work). The
files are sparse; units are written through the mapping into blocks reserved
ahead of them (``MappedFile.write_reserved``), so a full disk is a StoreError
for the dispatcher, not a SIGBUS on a hole of the mapping.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rocketq.store.mapped_file import MappedFile
from rocketq.store.mapped_file_queue import MappedFileQueue

CQ_STORE_UNIT_SIZE = 20
CQ_UNIT = struct.Struct(">qiq")
CQ_DTYPE = np.dtype([("phys", ">i8"), ("size", ">i4"), ("tags", ">i8")])
FILLER_SIZE = 0x7FFFFFFF
SMALL_RUN = 8  # put_units writes fewer units than this one by one
_STEPS = np.arange(4096, dtype=np.int64)
_FILLER = CQ_UNIT.pack(0, FILLER_SIZE, 0)
#: Units recovery reads first, then twice as many a step up to ``_SCAN_MAX_UNITS``: a file is read only about as
#: far as its valid units go (a topic of 1,024 queues of a few units each has 1,024 files of 6 MB).
_SCAN_UNITS = 200
_SCAN_MAX_UNITS = 1 << 16


def _scan_units(read: Callable[[int, int], np.ndarray], total: int, below: int | None = None,
                first: int = 0) -> tuple[int, int]:  # fmt: skip
    """The index of the first unit not valid (``phys`` ≥ 0, ``size`` > 0, and ``phys`` < *below* when given) of a
    file of *total* units, looking from unit *first* on (*total* when all are valid: from unit 0, how many are);
    and where the last valid one that is not a filler ends (``phys + size``; -1: none).

    ``read(first, count)`` gives units; they are read in steps that grow from ``_SCAN_UNITS``, no further than
    the step of the first unit that is not valid."""
    start = first
    step = _SCAN_UNITS
    last_end = -1
    while start < total:
        chunk = read(start, min(step, total - start))
        phys, sizes = chunk["phys"], chunk["size"]
        valid = (phys >= 0) & (sizes > 0)
        if below is not None:
            valid &= phys < below
        k = len(chunk) if valid.all() else int(np.argmin(valid))
        real = np.nonzero(sizes[:k] != FILLER_SIZE)[0]
        if len(real):
            i = int(real[-1])
            last_end = int(phys[i]) + int(sizes[i])
        if k < step or k == 0:
            return start + k, last_end
        start += k
        step = min(2 * step, _SCAN_MAX_UNITS)
    return total, last_end


@dataclass(slots=True)
class CqUnit:
    queue_offset: int
    phys: int
    size: int
    tags_code: int


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, root: Path, mapped_file_size: int, *,
                 read_only: bool = False) -> None:  # fmt: skip
        self.topic = topic
        self.queue_id = queue_id
        self.mapped_file_size = mapped_file_size - mapped_file_size % CQ_STORE_UNIT_SIZE
        # No descriptor held beside each file's mapping: a broker of thousands of queues needs one a file, not two.
        self.queue = MappedFileQueue(root / topic / str(queue_id), self.mapped_file_size, read_only=read_only,
                                     keep_fds=False)  # fmt: skip
        self.max_physic_offset = -1  # end (offset + size) of the last unit written
        self.min_logic_offset = 0  # bytes
        # The first file was made ahead of the first unit (prepare_file): that unit goes in as into a file
        # made for it (Java's isFirstCreateInQueue).
        self._first_file_unused = False

    # --- load and recovery -----------------------------------------------------
    def load(self) -> bool:
        return self.queue.load()

    def recover(self) -> None:
        """Find the end of valid units from the third-last file on; truncate there."""
        files = self.queue.files
        if not files:
            return
        per_file = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        index = max(0, len(files) - 3)
        mf = files[index]
        process_offset = mf.file_from_offset
        while True:
            n, end = _scan_units(self._reader(mf), per_file)
            if end >= 0:
                self.max_physic_offset = end
            if n == per_file and index + 1 < len(files):
                index += 1
                mf = files[index]
                process_offset = mf.file_from_offset
                continue
            process_offset += n * CQ_STORE_UNIT_SIZE
            break
        self.queue.set_flushed_and_committed(process_offset)
        self._truncate_files(process_offset)

    @staticmethod
    def _reader(mf: MappedFile) -> Callable[[int, int], np.ndarray]:
        """Units of a file by index and count, read through its descriptor, not its mapping: after a crash, the
        first touch of a file through a writable mapping cost milliseconds here (7 ms a file of a topic of
        1,024 queues: 7 s of a broker's start), a read of its pages a few µs."""

        def read(first: int, count: int) -> np.ndarray:
            data = mf.read_through(first * CQ_STORE_UNIT_SIZE, count * CQ_STORE_UNIT_SIZE)
            return np.frombuffer(data, dtype=CQ_DTYPE, count=len(data) // CQ_STORE_UNIT_SIZE)

        return read

    def _truncate_files(self, logic_offset: int) -> None:
        # The bytes past the end stay until recovery is done (zero_stale_tail): truncate_dirty_logic_files, as
        # Java's, may take units back from behind a first unit that is not valid.
        self.queue.truncate_dirty_files(logic_offset)

    def zero_stale_tail(self) -> None:
        """After recovery: zero what lies past the last file's end, so that no reader (RocketMQ's recovery of the
        store, say) takes stale units there for its own."""
        last = self.queue.last()
        if last is not None and not self.queue.read_only:
            last.zero_tail(last.wrote_position)

    def correct_min_offset(self, phy_min_offset: int) -> None:
        """Minimum = the first unit of the first file pointing at or above the commit log's minimum."""
        first = self.queue.first()
        if first is None:
            return
        data = first.read_to_end(0)
        units = np.frombuffer(data[: len(data) - len(data) % CQ_STORE_UNIT_SIZE], dtype=CQ_DTYPE)
        # Unlike RocketMQ, filler units never count as the minimum: a consumer starting
        # there would roll past the real units behind them.
        hits = np.nonzero((units["phys"] >= phy_min_offset) & (units["size"] != FILLER_SIZE))[0]
        if len(hits):
            self.min_logic_offset = first.file_from_offset + int(hits[0]) * CQ_STORE_UNIT_SIZE
        else:
            self.min_logic_offset = first.file_from_offset + len(units) * CQ_STORE_UNIT_SIZE

    def record_offsets_from(self, phy_offset: int) -> np.ndarray:
        """Commit-log offsets (int64, in order) of the units from the first pointing at or past *phy_offset*."""
        parts = []
        for mf in reversed(self.queue.files):
            end = mf.read_position() - mf.read_position() % CQ_STORE_UNIT_SIZE
            if end <= 0:
                continue
            phys = np.frombuffer(mf.mm[:end], dtype=CQ_DTYPE)["phys"].astype(np.int64)
            parts.append(phys[phys >= phy_offset])
            if int(phys[0]) < phy_offset:
                break  # earlier files point further back still
        if not parts:
            return np.empty(0, dtype=np.int64)
        return np.concatenate(parts[::-1])

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        """Drop every unit that points at or beyond *phy_offset* (§11.5)."""
        self.max_physic_offset = -1
        per_file = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        while True:
            mf = self.queue.last()
            if mf is None:
                break
            read = self._reader(mf)
            first = read(0, 1)
            if len(first) == 0 or int(first[0]["phys"]) >= phy_offset:
                self.queue.delete_last_mapped_file()
                continue
            keep, end = _scan_units(read, per_file, phy_offset)
            if keep == 0:
                # As Java: a file's first unit is kept whatever it holds, and its end noted; the valid units after
                # it are kept too (recover() stopped at it, but left them in place).
                if int(first[0]["size"]) != FILLER_SIZE:
                    end = int(first[0]["phys"]) + int(first[0]["size"])
                keep, more_end = _scan_units(read, per_file, phy_offset, first=1)
                if more_end >= 0:
                    end = more_end
            self.max_physic_offset = end
            pos = keep * CQ_STORE_UNIT_SIZE
            mf.set_positions(pos)
            if not self.queue.read_only:
                mf.zero_tail(pos)
            break
        if self.max_physic_offset < 0:
            # The queue's tail lies in earlier, complete files.
            for mf in reversed(self.queue.files[:-1]):
                _, end = _scan_units(self._reader(mf), per_file)
                if end >= 0:
                    self.max_physic_offset = end
                    break
        end = self.queue.get_max_wrote_position()
        self.queue.set_flushed_and_committed(min(self.queue.flushed_where, end))

    # --- writing -----------------------------------------------------------------
    def needs_file(self, cq_offset: int) -> bool:
        """Whether the unit of queue offset *cq_offset* would go into a file the queue does not have yet."""
        files = self.queue.files
        return not files or cq_offset * CQ_STORE_UNIT_SIZE >= files[-1].file_from_offset + self.mapped_file_size

    def prepare_file(self, cq_offset: int) -> None:
        """Make the file the unit of queue offset *cq_offset* goes into, before that unit: a new queue's first
        file, or the next one once the last is full (while units before it are still to come, nothing: whoever
        dispatches them makes it in its turn).

        Making a file is file-system work (a directory, a file, its size, a mapping) that takes milliseconds
        on a busy disk: the broker has it done off its event loop, by the reput thread (a topic of 1024 queues,
        such as RocketMQ's ``BenchmarkTest``, has 1024 first units; a queue of 300,000-unit files rolls every
        300,000). The file comes with the pages of the unit and of the filler units before it written over
        (``MappedFile.touch_for_write``), a new file's first write through the mapping costing milliseconds too.
        """
        files = self.queue.files
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        first = not files
        if not first:
            last = files[-1]
            begin = last.file_from_offset + self.mapped_file_size
            if not last.is_full() or not begin <= expect < begin + self.mapped_file_size:
                return
        end = expect % self.mapped_file_size + CQ_STORE_UNIT_SIZE

        def touch(mf: MappedFile) -> None:
            mf.touch_for_write(0, end)

        if self.queue.get_last_mapped_file(expect, before_use=touch) is not None and first:
            self._first_file_unused = True

    def put_message_position_info(self, phys: int, size: int, tags_code: int, cq_offset: int) -> bool:
        """Append the unit for queue offset *cq_offset* (§4.5); idempotent on replays."""
        if phys + size <= self.max_physic_offset:
            return True
        expect = cq_offset * CQ_STORE_UNIT_SIZE
        first_in_queue = not self.queue.files or self._first_file_unused
        mf = self.queue.get_last_mapped_file(expect)
        if mf is None:
            return False
        self._first_file_unused = False
        if first_in_queue and cq_offset != 0 and mf.wrote_position == 0:
            self.min_logic_offset = expect
            self.queue.set_flushed_and_committed(expect)
            self._fill_pre_blank(mf, expect)
        if cq_offset != 0:
            current = mf.file_from_offset + mf.wrote_position
            if expect < current:
                return True
        pos = mf.wrote_position
        mf.write_reserved(pos, CQ_UNIT.pack(phys, size, tags_code))
        mf.wrote_position = mf.committed_position = pos + CQ_STORE_UNIT_SIZE
        self.max_physic_offset = phys + size
        return True

    def put_units(self, phys: np.ndarray, sizes: np.ndarray, tags: np.ndarray, cq_offsets: np.ndarray) -> None:
        """Append the units of many records of this queue, in queue order (int64 arrays).

        The same bytes as one :meth:`put_message_position_info` call per unit. Units
        already built are dropped first (rule 1 of §4.5: their ends only grow); a run
        of units that continues the last file exactly goes in with one write, as much
        of it as the file holds; a unit that does not (the first of a file or of the
        queue, one after a gap) goes alone through :meth:`put_message_position_info`.
        """
        n = len(phys)
        if n <= SMALL_RUN:  # numpy's fixed costs outweigh its speed
            self.put_few_units(phys.tolist(), sizes.tolist(), tags.tolist(), cq_offsets.tolist())
            return
        ends = phys + sizes
        i = int(np.searchsorted(ends, self.max_physic_offset, side="right"))
        while i < n:
            start = self._run_start(int(cq_offsets[i]))
            if start is not None:
                mf, pos, room = start
                seg = cq_offsets[i : i + room]
                steps = seg - seg[0] == _STEPS[: len(seg)] if len(seg) <= len(_STEPS) else \
                    seg - seg[0] == np.arange(len(seg))  # fmt: skip
                count = len(seg) if bool(steps.all()) else int(np.argmin(steps))
                j = i + count
                block = np.empty(count, dtype=CQ_DTYPE)
                block["phys"] = phys[i:j]
                block["size"] = sizes[i:j]
                block["tags"] = tags[i:j]
                self._write_run(mf, pos, block.tobytes(), count, int(ends[j - 1]))
                i = j
                continue
            self.put_message_position_info(int(phys[i]), int(sizes[i]), int(tags[i]), int(cq_offsets[i]))
            i += 1

    def put_few_units(self, phys: Sequence[int], sizes: Sequence[int], tags: Sequence[int],
                      cq_offsets: Sequence[int]) -> None:  # fmt: skip
        """:meth:`put_units` of a few units (lists or tuples of ints), in plain Python: the same steps, and a run
        that continues the last file exactly still goes in with one write."""
        n = len(phys)
        i = 0
        while i < n and phys[i] + sizes[i] <= self.max_physic_offset:
            i += 1  # built already
        while i < n:
            start = self._run_start(cq_offsets[i])
            if start is not None:
                mf, pos, room = start
                j = i + 1
                stop = min(n, i + room)
                while j < stop and cq_offsets[j] == cq_offsets[j - 1] + 1:
                    j += 1
                data = b"".join(map(CQ_UNIT.pack, phys[i:j], sizes[i:j], tags[i:j]))
                self._write_run(mf, pos, data, j - i, phys[j - 1] + sizes[j - 1])
                i = j
                continue
            self.put_message_position_info(phys[i], sizes[i], tags[i], cq_offsets[i])
            i += 1

    def _run_start(self, cq_offset: int) -> tuple[MappedFile, int, int] | None:
        """(last file, its write position, units that fit after it) when the unit of *cq_offset* continues the
        last file exactly, so that a run of units may be written there; else None (the unit goes alone)."""
        mf = self.queue.last()
        if mf is None or self._first_file_unused:  # the first unit of a queue: put_message_position_info
            return None
        pos = mf.wrote_position
        room = (self.mapped_file_size - pos) // CQ_STORE_UNIT_SIZE
        if room > 0 and cq_offset * CQ_STORE_UNIT_SIZE == mf.file_from_offset + pos:
            return mf, pos, room
        return None

    def _write_run(self, mf: MappedFile, pos: int, data: bytes, count: int, max_physic_offset: int) -> None:
        """Write the packed units of a run at *pos* of *mf* (found by :meth:`_run_start`) with one write."""
        mf.write_reserved(pos, data)
        mf.wrote_position = mf.committed_position = pos + count * CQ_STORE_UNIT_SIZE
        self.max_physic_offset = max_physic_offset

    def put_message_position_infos(self, phys: list[int], sizes: list[int], tags: list[int],
                                   cq_offsets: list[int]) -> None:  # fmt: skip
        """:meth:`put_units` for lists."""
        self.put_units(np.asarray(phys, dtype=np.int64), np.asarray(sizes, dtype=np.int64),
                       np.asarray(tags, dtype=np.int64), np.asarray(cq_offsets, dtype=np.int64))  # fmt: skip

    def _fill_pre_blank(self, mf: MappedFile, until_where: int) -> None:
        n = (until_where % self.mapped_file_size) // CQ_STORE_UNIT_SIZE
        if n:
            pos = mf.wrote_position
            mf.write_reserved(pos, _FILLER * n)
            mf.wrote_position = mf.committed_position = pos + n * CQ_STORE_UNIT_SIZE

    # --- reading -----------------------------------------------------------------
    def get_min_offset_in_queue(self) -> int:
        return self.min_logic_offset // CQ_STORE_UNIT_SIZE

    def get_max_offset_in_queue(self) -> int:
        return self.queue.get_max_offset() // CQ_STORE_UNIT_SIZE

    def get_index_buffer(self, start_index: int, max_units: int | None = None) -> np.ndarray | None:
        """Units from *start_index* to the end of the data in that file (``getIndexBuffer``),
        at most *max_units* of them."""
        offset = start_index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset % self.mapped_file_size
        end = mf.read_position()
        if max_units is not None:
            end = min(end, pos + max_units * CQ_STORE_UNIT_SIZE)
        if pos >= end:
            return np.empty(0, dtype=CQ_DTYPE)
        return np.frombuffer(mf.mm[pos:end], dtype=CQ_DTYPE)

    def read_units(self, start_index: int, max_count: int) -> np.ndarray:
        """Up to *max_count* units from *start_index*, across files."""
        parts: list[np.ndarray] = []
        idx = start_index
        left = max_count
        while left > 0:
            buf = self.get_index_buffer(idx, left)
            if buf is None or len(buf) == 0:
                break
            buf = buf[:left]
            parts.append(buf)
            idx += len(buf)
            left -= len(buf)
        if not parts:
            return np.empty(0, dtype=CQ_DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def get_unit(self, index: int) -> CqUnit | None:
        offset = index * CQ_STORE_UNIT_SIZE
        if offset < self.min_logic_offset:
            return None
        mf = self.queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset % self.mapped_file_size
        if pos + CQ_STORE_UNIT_SIZE > mf.read_position():
            return None
        phys, size, tags = CQ_UNIT.unpack_from(mf.mm, pos)
        return CqUnit(index, phys, size, tags)

    def roll_next_file(self, index: int) -> int:
        """First queue offset of the file after the one holding *index*."""
        per_file = self.mapped_file_size // CQ_STORE_UNIT_SIZE
        return index + per_file - index % per_file

    def get_offset_in_queue_by_time(self, timestamp: int, min_phys: int,
                                    store_time_of: Callable[[int, int], int]) -> int:  # fmt: skip
        """Queue offset whose record's store time is nearest *timestamp* (§4.8).

        The file is chosen by the store times of its last unit (robust against
        copied files whose mtimes mean nothing); inside it, RocketMQ 4.9's
        binary search picks an exact hit or the closer neighbour.
        """
        files = self.queue.files
        if not files:
            return 0
        target = files[-1]
        for mf in files:
            end = mf.read_position()
            if end < CQ_STORE_UNIT_SIZE:
                continue
            phys, size, _ = CQ_UNIT.unpack_from(mf.mm, end - CQ_STORE_UNIT_SIZE)
            t = store_time_of(phys, size)
            if t >= timestamp:
                target = mf
                break
        mf = target
        high = mf.read_position() - CQ_STORE_UNIT_SIZE
        low = self.min_logic_offset - mf.file_from_offset if self.min_logic_offset > mf.file_from_offset else 0
        target_off = left_off = right_off = -1
        left_val = right_val = -1
        while high >= low:
            mid = (low + high) // (2 * CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE
            phys, size, _ = CQ_UNIT.unpack_from(mf.mm, mid)
            if phys < min_phys:
                low = mid + CQ_STORE_UNIT_SIZE
                left_off = mid
                continue
            t = store_time_of(phys, size)
            if t < 0:
                return 0
            if t == timestamp:
                target_off = mid
                break
            if t > timestamp:
                high = mid - CQ_STORE_UNIT_SIZE
                right_off, right_val = mid, t
            else:
                low = mid + CQ_STORE_UNIT_SIZE
                left_off, left_val = mid, t
        if target_off != -1:
            off = target_off
        elif left_val == -1:
            off = right_off
        elif right_val == -1:
            off = left_off
        else:
            off = right_off if timestamp - left_val > right_val - timestamp else left_off
        if off < 0:
            off = 0
        return (mf.file_from_offset + off) // CQ_STORE_UNIT_SIZE

    # --- maintenance ---------------------------------------------------------------
    def flush(self, least_pages: int = 0) -> bool:
        return self.queue.flush(least_pages)

    def delete_expired_file(self, min_phy_offset: int) -> int:
        """Delete files (never the last) whose last unit points below *min_phy_offset*."""
        count = 0
        files = self.queue.files
        for mf in files[:-1]:
            phys = CQ_UNIT.unpack_from(mf.mm, self.mapped_file_size - CQ_STORE_UNIT_SIZE)[0]
            if phys < min_phy_offset:
                count += 1
            else:
                break
        if count:
            self.queue.delete_first_files(count)
        self.correct_min_offset(min_phy_offset)
        return count

    def destroy(self) -> None:
        self.max_physic_offset = -1
        self.min_logic_offset = 0
        self.queue.destroy()

    def close(self) -> None:
        self.queue.close()
