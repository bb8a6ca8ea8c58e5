"""Helpers of the broker tests: a broker on 127.0.0.1 with free ports and a small store, raw frames, requests.

Every broker here stops itself (``running_broker`` is an async context manager); every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from rocketq.broker.broker_config import broker_config_from_properties
from rocketq.broker.broker_controller import BrokerController
from rocketq.common import json_compat
from rocketq.common.codec import decode_record
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import MessageExt
from rocketq.remoting.codes import RequestCode
from rocketq.remoting.command import RemotingCommand, create_request
from rocketq.remoting.transport import RemotingClient, RemotingConnection

HOST = "127.0.0.1"
_T = TypeVar("_T")

#: A small store like the golden broker's (broker.conf of golden/rocketmq-4.9.4), commit log of 4 MiB.
SMALL_STORE = {
    "mappedFileSizeCommitLog": str(4 << 20),
    "mappedFileSizeConsumeQueue": "6000",
    "maxHashSlotNum": "1000",
    "maxIndexNum": "4000",
}


def port_free(port: int) -> bool:
    """Whether nothing holds *port* of 127.0.0.1 now."""
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def run(coro: Coroutine[Any, Any, _T], timeout: float = 30.0) -> _T:
    async def bounded() -> _T:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def broker_properties(store: Path, **extra: str) -> dict[str, str]:
    props = {"brokerName": "broker-a", "brokerClusterName": "DefaultCluster", "brokerIP1": HOST, "brokerIP2": HOST,
             "listenPort": "0", "storePathRootDir": str(store), **SMALL_STORE}  # fmt: skip
    props.update(extra)
    return props


@contextlib.asynccontextmanager
async def running_broker(store: Path, **extra: str) -> AsyncIterator[BrokerController]:
    broker_config, store_config = broker_config_from_properties(broker_properties(store, **extra))
    broker = BrokerController(broker_config, store_config)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.shutdown()


async def settle(broker: BrokerController) -> None:
    """Wait (at most 5 s) until every stored message is in its consume queue and the index."""
    assert await asyncio.to_thread(broker.store.wait_dispatched, 5.0)


class Recorder:
    """A client's processor of what a broker pushes (NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET,
    ...): keeps each request in ``requests`` and sets ``arrived``; answers with *answer* (None: one-way)."""

    def __init__(self, answer: Callable[[RemotingCommand], RemotingCommand] | None = None) -> None:
        self.requests: list[RemotingCommand] = []
        self.arrived = asyncio.Event()
        self._answer = answer

    def __call__(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        self.requests.append(request)
        self.arrived.set()
        return self._answer(request) if self._answer is not None else None


@contextlib.asynccontextmanager
async def client_of(broker: BrokerController) -> AsyncIterator[RemotingClient]:
    client = RemotingClient(broker.broker_addr)
    try:
        yield client
    finally:
        await client.close()


def send_v2(topic: str, body: bytes, *, queue_id: int = 0, properties: str = "", group: str = "pg",
            code: int = RequestCode.SEND_MESSAGE_V2, **more: object) -> RemotingCommand:
    fields: dict[str, object] = {"a": group, "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0,
                                 "g": 1795307277238, "h": 0, "i": properties, "j": 0, "k": False,
                                 "m": False}  # fmt: skip
    fields.update(more)
    return create_request(code, fields, body)


def props(**kv: str) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in kv.items())


def pull_request(group: str, topic: str, queue_id: int, offset: int, *, sys_flag: int = 0x6,
                 subscription: str | None = "*", suspend_ms: int = 1000, max_msgs: int = 32,
                 commit_offset: int = 0, sub_version: int = 0,
                 expression_type: str = "TAG") -> RemotingCommand:  # fmt: skip
    fields: dict[str, object] = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
                                 "maxMsgNums": max_msgs, "sysFlag": sys_flag, "commitOffset": commit_offset,
                                 "suspendTimeoutMillis": suspend_ms, "subVersion": sub_version,
                                 "expressionType": expression_type}  # fmt: skip
    if subscription is not None:
        fields["subscription"] = subscription
    return create_request(RequestCode.PULL_MESSAGE, fields)


def decode_records(body: bytes | None) -> list[MessageExt]:
    out: list[MessageExt] = []
    pos = 0
    data = body or b""
    while pos < len(data):
        msg = decode_record(data, pos)
        out.append(msg)
        pos += msg.store_size
    return out


def heartbeat(client_id: str, group: str, subscriptions: dict[str, str], *, model: str = "CLUSTERING",
              producer_groups: tuple[str, ...] = (), expression_type: str = "TAG",
              sub_version: int = 1795307277930) -> RemotingCommand:  # fmt: skip
    def tags(expr: str) -> list[str]:  # FilterAPI.buildSubscriptionData: a TAG expression's tags; none for "*"
        if expression_type != "TAG" or expr.strip() in ("", "*"):
            return []
        return [t.strip() for t in expr.split("||") if t.strip()]

    subs = [{"classFilterMode": False, "codeSet": [java_string_hash(t) for t in tags(expr)],
             "expressionType": expression_type, "subString": expr, "subVersion": sub_version, "tagsSet": tags(expr),
             "topic": topic} for topic, expr in subscriptions.items()]  # fmt: skip
    consumers = [] if not group else [{"consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                                       "consumeType": "CONSUME_PASSIVELY", "groupName": group,
                                       "messageModel": model, "subscriptionDataSet": subs,
                                       "unitMode": False}]  # fmt: skip
    body = {"clientID": client_id, "consumerDataSet": consumers,
            "producerDataSet": [{"groupName": g} for g in producer_groups]}  # fmt: skip
    return create_request(RequestCode.HEART_BEAT, None, json_compat.dumps_bytes(body))
