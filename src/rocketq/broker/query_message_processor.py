"""QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33): RocketMQ's ``broker/processor/QueryMessageProcessor``
(spec §6.4).

QUERY_MESSAGE looks a key up in the index (a ``KEYS`` value, or a ``UNIQ_KEY`` when ``_UNIQUE_KEY_QUERY`` is
``true``, which caps the answer at ``defaultQueryMaxNum``) within a store-time window and answers the
matching stored records, concatenated, with ``indexLastUpdateTimestamp`` and ``indexLastUpdatePhyoffset``;
QUERY_NOT_FOUND when nothing matches. VIEW_MESSAGE_BY_ID answers the one record that starts at a commit-log
offset (the offset inside an offset message id), or SYSTEM_ERROR.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rocketq.common.codec import read_size_and_magic
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, make_response_for
from rocketq.remoting.transport import RemotingConnection
from rocketq.store.message_store import MessageStore

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


def select_one_message_by_offset(store: MessageStore, offset: int) -> bytes | None:
    """``selectOneMessageByOffset``: the raw record at a commit-log offset, or None."""
    if offset < 0:
        return None
    head = store.commit_log.get_message(offset, 8)
    if head is None or len(head) < 8:
        return None
    size, _magic = read_size_and_magic(head, 0)
    if size <= 8:
        return None
    if store.look_message_by_offset(offset, size) is None:  # a record really starts here
        return None
    return store.commit_log.get_message(offset, size)


class QueryMessageProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller

    async def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.VIEW_MESSAGE_BY_ID:
            return await self.view_message_by_id(request)
        return await self.query_message(request)

    async def query_message(self, request: RemotingCommand) -> RemotingCommand:
        h = request.header
        topic = h.get_str("topic")
        key = h.get_str("key")
        max_num = h.get_int("maxNum")
        begin = h.get_long("beginTimestamp")
        end = h.get_long("endTimestamp")
        if (request.ext_fields or {}).get(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = self.controller.broker_config.default_query_max_num
        store = self.controller.store

        def lookup() -> tuple[int, int, list[bytes]]:
            found = store.query_message(topic, key, max_num, begin, end)
            records = []
            for msg in found.messages:
                raw = store.commit_log.get_message(msg.commit_log_offset, msg.store_size)
                if raw is not None:
                    records.append(raw)
            return found.index_last_update_timestamp, found.index_last_update_phyoffset, records

        last_ts, last_phy, records = await asyncio.to_thread(lookup)
        ext = {"indexLastUpdatePhyoffset": last_phy, "indexLastUpdateTimestamp": last_ts}
        if records:
            return make_response_for(request, ResponseCode.SUCCESS, ext_fields=ext, body=b"".join(records))
        return make_response_for(request, ResponseCode.QUERY_NOT_FOUND,
                                 "can not find message, maybe time range not correct", ext_fields=ext)  # fmt: skip

    async def view_message_by_id(self, request: RemotingCommand) -> RemotingCommand:
        offset = request.header.get_long("offset")
        record = await asyncio.to_thread(select_one_message_by_offset, self.controller.store, offset)
        if record is None:
            remark = f"can not find message by the offset, {offset}"
            return make_response_for(request, ResponseCode.SYSTEM_ERROR, remark)
        return make_response_for(request, ResponseCode.SUCCESS, body=record)
