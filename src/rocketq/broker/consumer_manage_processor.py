"""GET_CONSUMER_LIST_BY_GROUP (38), UPDATE_CONSUMER_OFFSET (15) and QUERY_CONSUMER_OFFSET (14): RocketMQ's
``broker/processor/ConsumerManageProcessor`` (spec §6.8, §6.10).

- The consumer list is the client ids of the group's live connections (SYSTEM_ERROR
  ``no consumer for this group, <g>`` when there is none).
- An update stores the offset of (group, topic, queue); a negative offset (ali-ons sends -1 for queues it
  has not consumed) is ignored, which looks the same as Java storing it.
- A query answers the stored offset; without one, 0 when the queue never lost a message (its min offset
  is 0 and its first message is still in memory), else QUERY_NOT_FOUND.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from rocketq.broker.protocol import GetConsumerListByGroupResponseBody, encode_body
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, make_response_for
from rocketq.remoting.transport import RemotingConnection

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

try:
    _PHYSICAL_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
except (ValueError, OSError):  # pragma: no cover
    _PHYSICAL_MEMORY = 8 << 30


class ConsumerManageProcessor:
    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller

    def process_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            return self.get_consumer_list_by_group(conn, request)
        if request.code == RequestCode.UPDATE_CONSUMER_OFFSET:
            return self.update_consumer_offset(conn, request)
        return self.query_consumer_offset(conn, request)

    def get_consumer_list_by_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = request.header.get_str("consumerGroup")
        info = self.controller.consumer_manager.get_consumer_group_info(group)
        if info is not None:
            client_ids = info.all_client_ids()
            if client_ids:
                body = encode_body(GetConsumerListByGroupResponseBody(client_ids))
                return make_response_for(request, ResponseCode.SUCCESS, ext_fields={}, body=body)
        return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")

    def update_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.header
        group = h.get_str("consumerGroup")
        topic = h.get_str("topic")
        queue_id = h.get_int("queueId")
        offset = h.get_long("commitOffset")
        if offset >= 0:
            self.controller.consumer_offset_manager.commit_offset(group, topic, queue_id, offset)
        return make_response_for(request, ResponseCode.SUCCESS, ext_fields={})

    def query_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = request.header
        group = h.get_str("consumerGroup")
        topic = h.get_str("topic")
        queue_id = h.get_int("queueId")
        ctl = self.controller
        offset = ctl.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset >= 0:
            return make_response_for(request, ResponseCode.SUCCESS, ext_fields={"offset": offset})
        if h.get_bool("setZeroIfNotFound", True):
            min_offset = ctl.store.get_min_offset_in_queue(topic, queue_id)
            if min_offset <= 0 and not self._in_disk(topic, queue_id, 0):
                return make_response_for(request, ResponseCode.SUCCESS, ext_fields={"offset": 0})
        return make_response_for(request, ResponseCode.QUERY_NOT_FOUND,
                                 "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")  # fmt: skip

    def _in_disk(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """``checkInDiskByConsumeOffset``: the message is further behind the commit-log end than memory holds."""
        store = self.controller.store
        cq = store.find_consume_queue(topic, queue_id, create=False)
        unit = cq.get_unit(consume_offset) if cq is not None else None
        if unit is None:
            return False
        memory = _PHYSICAL_MEMORY * self.controller.store_config.access_message_in_memory_max_ratio // 100
        return store.get_max_phy_offset() - unit.phys > memory
