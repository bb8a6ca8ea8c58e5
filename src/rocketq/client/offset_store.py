"""Where a consumer group's progress is kept: Java's ``OffsetStore``, ``RemoteBrokerOffsetStore`` and
``LocalFileOffsetStore`` (remoting-protocol §6.8, §11.3).

An offset is the next queue offset to consume. In memory the store holds the latest consumed offset of
every queue the consumer works on; ``persist_all`` writes them out:

- clustering (``RemoteBrokerOffsetStore``): UPDATE_CONSUMER_OFFSET, one-way, to the master of the queue's
  broker; the broker's QUERY_CONSUMER_OFFSET is the "store" (QUERY_NOT_FOUND reads as −1, a failure
  as −2);
- broadcasting (``LocalFileOffsetStore``): every member keeps its own offsets in
  ``~/.rocketmq_offsets/<clientId>/<group>/offsets.json``, the client id as a Java broadcasting consumer keeps
  it (``IP@DEFAULT`` unless an instance name is set: the same in every run; the directory can be moved with the
  ``offset_store_dir`` argument or the ``rocketmq.client.localOffsetStoreDir`` environment entry). The file
  is Java's ``OffsetSerializeWrapper``: ``{"offsetTable":{{"brokerName":…,"queueId":…,"topic":…}:42,…}}``
  (MessageQueue objects as keys, as fastjson writes them); the previous version is kept as
  ``offsets.json.bak`` and read when the file is missing or damaged.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rocketq.client.errors import ClientError
from rocketq.client.message_queue import MessageQueue
from rocketq.client.route import MASTER_ID
from rocketq.common import json_compat

if TYPE_CHECKING:
    from rocketq.client.client_instance import ClientInstance

__all__ = ["LocalFileOffsetStore", "OffsetStore", "ReadOffsetType", "RemoteBrokerOffsetStore", "default_offset_dir"]

log = logging.getLogger(__name__)

LOCAL_OFFSET_STORE_DIR_PROPERTY = "rocketmq.client.localOffsetStoreDir"


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = 0
    READ_FROM_STORE = 1
    MEMORY_FIRST_THEN_STORE = 2


def default_offset_dir() -> Path:
    override = os.environ.get(LOCAL_OFFSET_STORE_DIR_PROPERTY)
    return Path(override) if override else Path.home() / ".rocketmq_offsets"


class OffsetStore(Protocol):
    async def load(self) -> None: ...

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None: ...

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType, *,
                          zero_if_not_found: bool = True) -> int: ...  # fmt: skip

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None: ...

    async def persist(self, mq: MessageQueue) -> None: ...

    def remove_offset(self, mq: MessageQueue) -> None: ...

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]: ...

    async def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int, oneway: bool) -> None: ...


class _MemoryTable:
    def __init__(self) -> None:
        self.offset_table: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        old = self.offset_table.get(mq)
        if old is None or not increase_only or offset > old:
            self.offset_table[mq] = offset

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: off for mq, off in self.offset_table.items() if topic is None or mq.topic == topic}


class RemoteBrokerOffsetStore(_MemoryTable):
    """Offsets kept by the brokers (clustering). With ``zero_if_not_found=False`` a read asks the broker not
    to answer 0 for a group that never committed (``setZeroIfNotFound``, honoured by rocketq and 5.x)."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__()
        self.instance = instance
        self.group = group

    async def load(self) -> None:
        return None

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType, *,
                          zero_if_not_found: bool = True) -> int:  # fmt: skip
        if read_type in (ReadOffsetType.READ_FROM_MEMORY, ReadOffsetType.MEMORY_FIRST_THEN_STORE):
            offset = self.offset_table.get(mq)
            if offset is not None:
                return offset
            if read_type is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        try:
            offset = await self.fetch_consume_offset_from_broker(mq, zero_if_not_found=zero_if_not_found)
        except ClientError as exc:
            log.warning("%s: reading the offset of %s from the broker failed: %s", self.group, mq, exc)
            return -2
        if offset >= 0:
            self.update_offset(mq, offset, False)
        return offset

    async def _master_addr(self, mq: MessageQueue) -> str:
        addr = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if addr is None:
            await self.instance.update_topic_route(mq.topic)
            addr = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if addr is None:
            raise ClientError(f"the broker {mq.broker_name} does not exist")
        return addr

    async def fetch_consume_offset_from_broker(self, mq: MessageQueue, *, zero_if_not_found: bool = True) -> int:
        addr = await self._master_addr(mq)
        return await self.instance.api.query_consumer_offset(
            addr, self.group, mq.topic, mq.queue_id, set_zero_if_not_found=None if zero_if_not_found else False
        )

    async def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int, oneway: bool) -> None:
        addr = await self._master_addr(mq)
        await self.instance.api.update_consumer_offset(addr, self.group, mq.topic, mq.queue_id, offset,
                                                       oneway=oneway)  # fmt: skip

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        """Commit the offsets of ``mqs`` (one-way, as the periodic commit is; a consumer shutting down waits
        for the answers) and forget the others."""
        wanted = set(mqs)
        for mq, offset in list(self.offset_table.items()):
            if mq in wanted:
                try:
                    await self.update_consume_offset_to_broker(mq, offset, oneway)
                except ClientError as exc:
                    log.info("%s: committing %s=%d failed: %s", self.group, mq, offset, exc)
            else:
                self.offset_table.pop(mq, None)

    async def persist(self, mq: MessageQueue) -> None:
        offset = self.offset_table.get(mq)
        if offset is not None:
            try:
                await self.update_consume_offset_to_broker(mq, offset, True)
            except ClientError as exc:
                log.info("%s: committing %s=%d failed: %s", self.group, mq, offset, exc)


class LocalFileOffsetStore(_MemoryTable):
    """Offsets kept in a local file (broadcasting)."""

    def __init__(self, client_id: str, group: str, directory: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        self.group = group
        base = Path(directory) if directory is not None else default_offset_dir()
        self.path = base / client_id / group / "offsets.json"

    async def load(self) -> None:
        self.offset_table.update(self._read_file())

    def _read_file(self) -> dict[MessageQueue, int]:
        for path in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            if not text.strip():
                continue
            try:
                return self._parse(text)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("offset file %s is damaged (%s): trying its backup", path, exc)
        return {}

    @staticmethod
    def _parse(text: str) -> dict[MessageQueue, int]:
        body = json_compat.loads(text)
        table = body.get("offsetTable") or {}
        result: dict[MessageQueue, int] = {}
        for key, value in table.items():
            mq_obj = json_compat.loads(key) if isinstance(key, str) else key
            result[MessageQueue.from_json(mq_obj)] = int(value)
        return result

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType, *,
                          zero_if_not_found: bool = True) -> int:  # fmt: skip
        if read_type in (ReadOffsetType.READ_FROM_MEMORY, ReadOffsetType.MEMORY_FIRST_THEN_STORE):
            offset = self.offset_table.get(mq)
            if offset is not None:
                return offset
            if read_type is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        stored = self._read_file().get(mq)
        if stored is None:
            return -1
        self.update_offset(mq, stored, False)
        return stored

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        wanted = set(mqs)
        if not wanted:
            return
        table = {_MQKey(mq): off for mq, off in self.offset_table.items() if mq in wanted}
        text = json_compat.dumps({"offsetTable": table})
        self._write(text)

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all(self.offset_table)

    async def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int, oneway: bool) -> None:
        self.update_offset(mq, offset, False)

    def _write(self, text: str) -> None:
        """``MixAll.string2File``: write a temporary file, keep the old one as ``.bak``, rename into place."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        if self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)


class _MQKey(json_compat.FrozenObject):
    """A MessageQueue written as a JSON object key, the way fastjson writes a bean-keyed map."""

    def __init__(self, mq: MessageQueue) -> None:
        super().__init__(mq.to_json())
