"""One pull, as every consumer does it: Java's ``PullAPIWrapper`` and ``PullSysFlag`` (remoting-protocol
§6.2, §9).

``pull_kernel`` sends PULL_MESSAGE to the broker the previous answer suggested (``suggestWhichBrokerId``,
the master at first); ``process_pull_result`` turns a FOUND body into messages: the records back to back,
compressed bodies inflated (sysFlag bit 0: zlib, LZ4 or Zstandard), messages whose tag is not subscribed dropped
(brokers filter on the tag hash only), ``MIN_OFFSET``/``MAX_OFFSET`` added to the properties as the Java client
adds them.

PullSysFlag bits: 0x1 commit the offset in ``commitOffset``; 0x2 the broker may hold the request (long
polling) up to ``suspendTimeoutMillis``; 0x4 the subscription travels in the request (otherwise the
broker uses the one from the group's heartbeat); 0x8 class filter (obsolete); 0x10 lite pull.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketq.client.errors import BrokerUnreachableError
from rocketq.client.heartbeat import EXPRESSION_TYPE_TAG, SubscriptionData
from rocketq.client.message_queue import MessageQueue
from rocketq.client.mq_client_api import decode_records
from rocketq.client.pull_result import PullResult, PullStatus
from rocketq.client.route import MASTER_ID
from rocketq.common.compression import CompressionError, decompress
from rocketq.common.message import (
    COMPRESSED_FLAG,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    MessageExt,
)

if TYPE_CHECKING:
    from rocketq.client.client_instance import ClientInstance

__all__ = [
    "FLAG_CLASS_FILTER",
    "FLAG_COMMIT_OFFSET",
    "FLAG_LITE_PULL",
    "FLAG_SUBSCRIPTION",
    "FLAG_SUSPEND",
    "PullAPIWrapper",
    "build_sys_flag",
    "decompress_body",
]

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8
FLAG_LITE_PULL = 0x10


def build_sys_flag(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False,
                   lite_pull: bool = False) -> int:  # fmt: skip
    return ((FLAG_COMMIT_OFFSET if commit_offset else 0) | (FLAG_SUSPEND if suspend else 0)
            | (FLAG_SUBSCRIPTION if subscription else 0) | (FLAG_CLASS_FILTER if class_filter else 0)
            | (FLAG_LITE_PULL if lite_pull else 0))  # fmt: skip


def decompress_body(msg: MessageExt) -> None:
    """Inflate a compressed body in place (zlib, LZ4 or Zstandard: :mod:`rocketq.common.compression`; sysFlag
    keeps its bits, as Java's decoder leaves them). One that does not inflate is logged and handed over as it came."""
    if msg.sys_flag & COMPRESSED_FLAG and msg.body:
        try:
            msg.body = decompress(msg.body, msg.sys_flag)
        except CompressionError as exc:
            log.warning("message %s: %s", msg.msg_id, exc)


class PullAPIWrapper:
    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self.pull_from_which_node: dict[MessageQueue, int] = {}

    async def find_pull_address(self, mq: MessageQueue) -> tuple[str, bool]:
        """(address, is_slave) of the broker to pull ``mq`` from."""
        broker_id = self.pull_from_which_node.get(mq, MASTER_ID)
        addr = self.instance.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        if addr is None:
            await self.instance.update_topic_route(mq.topic)
            addr = self.instance.find_broker_address_in_subscribe(mq.broker_name, broker_id, False)
        if addr is None:
            raise BrokerUnreachableError(f"the broker {mq.broker_name} of {mq} does not exist")
        addrs = self.instance.broker_addr_table.get(mq.broker_name, {})
        return addr, addrs.get(MASTER_ID) != addr

    async def pull_kernel(self, mq: MessageQueue, sub_expression: str | None, expression_type: str,
                          sub_version: int, offset: int, max_nums: int, sys_flag: int, commit_offset: int,
                          suspend_timeout: float, timeout: float) -> PullResult:  # fmt: skip
        """PULL_MESSAGE for ``mq`` from ``offset``; a result without its messages decoded yet."""
        addr, is_slave = await self.find_pull_address(mq)
        if is_slave:
            sys_flag &= ~FLAG_COMMIT_OFFSET
        fields: dict[str, object] = {
            "consumerGroup": self.group,
            "topic": mq.topic,
            "queueId": mq.queue_id,
            "queueOffset": offset,
            "maxMsgNums": max_nums,
            "sysFlag": sys_flag,
            "commitOffset": commit_offset,
            "suspendTimeoutMillis": int(suspend_timeout * 1000),
            "subscription": sub_expression,
            "subVersion": sub_version,
            "expressionType": expression_type or EXPRESSION_TYPE_TAG,
        }
        response = await self.instance.api.pull_message(addr, fields, timeout)
        status = PullStatus.from_response_code(response.code)
        assert status is not None
        h = response.header
        result = PullResult(
            status,
            next_begin_offset=h.get_long("nextBeginOffset", offset),
            min_offset=h.get_long("minOffset", 0),
            max_offset=h.get_long("maxOffset", 0),
            suggest_which_broker_id=h.get_long("suggestWhichBrokerId", MASTER_ID),
            raw_body=response.body,
        )
        return result

    def process_pull_result(self, mq: MessageQueue, result: PullResult,
                            subscription: SubscriptionData | None) -> PullResult:  # fmt: skip
        self.pull_from_which_node[mq] = result.suggest_which_broker_id
        body, result.raw_body = result.raw_body, None
        if result.status is PullStatus.FOUND and body:
            msgs = decode_records(body)
            if subscription is not None and subscription.tags_set:
                msgs = [m for m in msgs if subscription.matches(m)]
            min_text, max_text = str(result.min_offset), str(result.max_offset)
            for msg in msgs:
                if msg.sys_flag & COMPRESSED_FLAG:
                    decompress_body(msg)
                props = msg.properties
                props[PROPERTY_MIN_OFFSET] = min_text
                props[PROPERTY_MAX_OFFSET] = max_text
            result.messages = msgs
        return result
