"""The admin API behind ``rocketq admin``: RocketMQ's ``DefaultMQAdminExt`` / ``MQAdminImpl`` over raw remoting
(spec: remoting-protocol §6.1, §6.2, §6.4, §6.9, §6.13, §6.16, §7.1, §7.4, §8.2, §8.3, §8.8, §8.9).

Mirrors ``tools/admin/DefaultMQAdminExtImpl`` and the client calls it makes
(``client/impl/MQClientAPIImpl``): what is asked of a name server and what of a broker, and in which order.

- Name servers (``-n "a:9876;b:9876"``) are tried in the order given; the first that answers is used.
- Brokers are reached at their master address (brokerId 0) as the name server reports it.
- Bodies are read with :func:`rocketq.common.json_compat.loads` (numeric map keys, MessageQueue objects as
  map keys) into the small dataclasses below; ``to_json()`` gives what ``--json`` prints.
- Every failure a user can cause (a name server that does not answer, an unknown topic, cluster or group,
  a broker that refuses) raises :class:`AdminError` with one line that says what failed and where.

``send_message`` picks queues like ``DefaultMQProducer`` (round robin over the writable queues of the route,
from a random start; the route of ``TBW102`` when the topic has none, so that the broker creates it), and
``pull`` reads like ``DefaultMQPullConsumer`` (the subscription in the request, no suspension, no commit).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from rocketq.client.acl import AclClientRPCHook
from rocketq.common import json_compat
from rocketq.common.acl import SessionCredentials
from rocketq.common.codec import decode_records_of
from rocketq.common.compression import CompressionError, decompress
from rocketq.common.errors import RocketqError
from rocketq.common.message import (
    COMPRESSED_FLAG,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageExt,
    properties_to_string,
)
from rocketq.common.message_id import MessageIdError, UniqueIdGenerator, decode_offset_message_id
from rocketq.common.mixall import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    RETRY_GROUP_TOPIC_PREFIX,
    TOOLS_CONSUMER_GROUP,
    TOOLS_PRODUCER_GROUP,
)
from rocketq.common.net import parse_server_address
from rocketq.common.route import BrokerData, QueueData, TopicRouteData, as_int, as_mapping
from rocketq.remoting.codes import LanguageCode, RequestCode, ResponseCode, request_code_name, response_code_name
from rocketq.remoting.command import RemotingCommand, create_request
from rocketq.remoting.errors import RemotingConnectError, RemotingError, RemotingTimeoutError
from rocketq.remoting.transport import RemotingClient, connect_failure_reason
from rocketq.store.store_config import parse_properties

__all__ = [
    "AUTO_CREATE_TOPIC_KEY_TOPIC",
    "RETRY_GROUP_TOPIC_PREFIX",
    "TOOLS_CONSUMER_GROUP",
    "AdminError",
    "BrokerData",
    "ClusterInfo",
    "ConsumeProgress",
    "MQAdmin",
    "NotFoundError",
    "PullResult",
    "QueueData",
    "QueueStats",
    "SendResult",
    "TopicRouteData",
    "inflate_body",
]

DEFAULT_TOPIC_QUEUE_NUMS: Final = 4
PULL_FLAG_SUBSCRIPTION: Final = 0x4
ORDER_TOPIC_CONFIG_NAMESPACE: Final = "ORDER_TOPIC_CONFIG"
#: ``SendStatus`` by the response code of a send.
SEND_STATUS: Final = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}
#: ``PullStatus`` by the response code of a pull.
PULL_STATUS: Final = {
    ResponseCode.SUCCESS: "FOUND",
    ResponseCode.PULL_NOT_FOUND: "NO_NEW_MSG",
    ResponseCode.PULL_RETRY_IMMEDIATELY: "NO_MATCHED_MSG",
    ResponseCode.PULL_OFFSET_MOVED: "OFFSET_ILLEGAL",
}


class AdminError(RocketqError):
    """An admin call failed; the message is the one line the command line prints."""


class NotFoundError(AdminError):
    """An unknown topic, cluster, broker, group or message; ``remark`` is the broker's own words, when it said."""

    def __init__(self, message: str, remark: str | None = None) -> None:
        super().__init__(message)
        self.remark = remark


# --------------------------------------------------------------------------------------------------
# Bodies
# --------------------------------------------------------------------------------------------------


def _float(value: Any, default: float = 0.0) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


@dataclass
class ClusterInfo:
    """``ClusterInfo``: brokers by name and broker names by cluster."""

    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]

    @classmethod
    def from_body(cls, body: bytes | None) -> ClusterInfo:
        obj = as_mapping(json_compat.loads(body or b"{}"))
        brokers = {str(k): BrokerData.from_json(v) for k, v in as_mapping(obj.get("brokerAddrTable")).items()
                   if isinstance(v, Mapping)}  # fmt: skip
        clusters = {str(k): sorted(str(n) for n in (v or ()))
                    for k, v in as_mapping(obj.get("clusterAddrTable")).items()}  # fmt: skip
        return cls(dict(sorted(brokers.items())), dict(sorted(clusters.items())))

    def brokers_of(self, cluster: str) -> list[BrokerData]:
        if cluster not in self.cluster_addr_table:
            known = ", ".join(self.cluster_addr_table) or "none"
            raise NotFoundError(f"cluster {cluster!r} not found on the name server (clusters: {known})")
        return [self.broker_addr_table[n] for n in self.cluster_addr_table[cluster] if n in self.broker_addr_table]

    def master_addrs(self, cluster: str) -> list[str]:
        """``CommandUtil.fetchMasterAddrByClusterName``."""
        addrs = [b.master_addr for b in self.brokers_of(cluster) if b.master_addr]
        if not addrs:
            raise NotFoundError(f"cluster {cluster!r} has no master broker")
        return addrs

    def broker_name_of(self, addr: str) -> str | None:
        for b in self.broker_addr_table.values():
            if addr in b.broker_addrs.values():
                return b.broker_name
        return None

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddrTable": {k: v.to_json() for k, v in self.broker_addr_table.items()},
                "clusterAddrTable": dict(self.cluster_addr_table)}  # fmt: skip


@dataclass(frozen=True)
class QueueStats:
    """One row of ``TopicStatsTable``: a queue's min and max offset and last store time."""

    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "minOffset": self.min_offset,
                "maxOffset": self.max_offset, "lastUpdateTimestamp": self.last_update_timestamp}  # fmt: skip


@dataclass(frozen=True)
class ConsumeProgress:
    """One row of ``ConsumeStats``: a queue's broker offset against the group's committed offset."""

    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        return self.broker_offset - self.consumer_offset

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id,
                "brokerOffset": self.broker_offset, "consumerOffset": self.consumer_offset, "diff": self.diff,
                "lastTimestamp": self.last_timestamp}  # fmt: skip


@dataclass(frozen=True)
class SendResult:
    """``SendResult``: the status, both ids and where the message went."""

    status: str
    msg_id: str
    offset_msg_id: str
    broker_name: str
    queue_id: int
    queue_offset: int

    def to_json(self) -> dict[str, Any]:
        return {"sendStatus": self.status, "msgId": self.msg_id, "offsetMsgId": self.offset_msg_id,
                "brokerName": self.broker_name, "queueId": self.queue_id,
                "queueOffset": self.queue_offset}  # fmt: skip


@dataclass
class OffsetReset:
    """One queue's offset moved by ``resetOffsetByTime``. Reset by the tool itself (no consumer online:
    ``ResetOffsetByTimeOldCommand``'s RollbackStats) it also says what it saw: the queue's max offset, the group's
    offset before, and the offset the time found (which a reset that is not forced does not take forward)."""

    broker_name: str
    queue_id: int
    offset: int
    broker_offset: int | None = None
    consumer_offset: int | None = None
    timestamp_offset: int | None = None

    def to_json(self) -> dict[str, Any]:
        row: dict[str, Any] = {"brokerName": self.broker_name, "queueId": self.queue_id, "offset": self.offset}
        if self.timestamp_offset is not None:
            row.update(brokerOffset=self.broker_offset, consumerOffset=self.consumer_offset,
                       timestampOffset=self.timestamp_offset)  # fmt: skip
        return row


@dataclass
class PullResult:
    """``PullResult``: status name, offsets and the decoded messages (bodies inflated)."""

    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)


def _mq_key(key: Any) -> tuple[str, str, int]:
    m = as_mapping(key)
    return str(m.get("topic", "")), str(m.get("brokerName", "")), as_int(m.get("queueId"))


def inflate_body(msg: MessageExt) -> MessageExt:
    """The message with its body inflated when the producer compressed it (sysFlag bit 0; a body that does not
    inflate is shown as it is stored)."""
    if msg.sys_flag & COMPRESSED_FLAG:
        with contextlib.suppress(CompressionError):
            msg.body = decompress(msg.body, msg.sys_flag)
    return msg


def decode_messages(body: bytes | None) -> list[MessageExt]:
    """The records of a pull or query answer, back to back, decoded; a record that does not decode raises
    (an admin command reports it, where a consumer stops at it)."""
    msgs, error = decode_records_of(body or b"")
    if error is not None:
        raise error
    return [inflate_body(msg) for msg in msgs]


def _reason(exc: BaseException) -> str:
    """``connection refused`` rather than the text of the exception chain."""
    cause = exc.__cause__
    if isinstance(cause, OSError) and cause.errno:
        return connect_failure_reason(cause)
    if isinstance(cause, TimeoutError):
        return "connect timed out"
    return str(exc) or type(exc).__name__


# --------------------------------------------------------------------------------------------------
# The admin client
# --------------------------------------------------------------------------------------------------


class MQAdmin:
    """Admin calls against the name servers in ``namesrv_addr`` (``host:port`` separated by ``;``)."""

    def __init__(self, namesrv_addr: str | None, *, timeout: float = 5.0,
                 credentials: SessionCredentials | None = None) -> None:  # fmt: skip
        addrs = [a.strip() for a in (namesrv_addr or "").split(";") if a.strip()]
        if not addrs:
            raise AdminError("no name server address: give -n HOST:PORT or set NAMESRV_ADDR")
        for a in addrs:
            try:
                parse_server_address(a)
            except ValueError:
                raise AdminError(f"not a name server address (host:port): {a!r}") from None
        self.namesrv_addrs = addrs
        self.timeout = timeout
        hook = AclClientRPCHook(credentials) if credentials is not None else None
        self.client = RemotingClient(connect_timeout=timeout, name="rocketq-admin", rpc_hook=hook)
        self._uniq = UniqueIdGenerator()
        self._send_index = random.randrange(1 << 16)

    async def close(self) -> None:
        await self.client.close()

    async def __aenter__(self) -> MQAdmin:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- transport ----------------------------------------------------------------------------------
    async def invoke(self, addr: str, request: RemotingCommand, what: str = "broker",
                     timeout: float | None = None) -> RemotingCommand:  # fmt: skip
        """One call to ``addr``; connection failures and timeouts become :class:`AdminError`."""
        wait = self.timeout if timeout is None else timeout
        try:
            return await self.client.invoke(request, wait, addr=addr)
        except RemotingTimeoutError:
            raise AdminError(f"{what} {addr} did not answer {request_code_name(request.code)} "
                             f"within {wait:g} s") from None  # fmt: skip
        except RemotingConnectError as exc:
            raise AdminError(f"cannot reach {what} {addr}: {_reason(exc)}") from None
        except RemotingError as exc:
            raise AdminError(f"{what} {addr}: {exc}") from None

    async def invoke_namesrv(self, request: RemotingCommand) -> RemotingCommand:
        """Ask the name servers in turn; the first that answers wins."""
        failures: list[str] = []
        for addr in self.namesrv_addrs:
            try:
                fields = dict(request.ext_fields) if request.ext_fields is not None else None
                return await self.invoke(addr, create_request(request.code, fields, request.body), "name server")
            except AdminError as exc:
                failures.append(str(exc))
        raise AdminError("; ".join(failures))

    @staticmethod
    def check(response: RemotingCommand, what: str, *ok: int, request_code: int | None = None) -> RemotingCommand:
        codes = ok or (ResponseCode.SUCCESS,)
        if response.code not in codes:
            remark = (response.remark or "").split("\n")[0].strip() or "no remark"
            name = _ACL_FAILURES.get(response.code) if request_code in _ACL_REQUESTS else None
            raise AdminError(f"{what} failed: {name or response_code_name(response.code)} ({response.code}): {remark}")
        return response

    # --- name server ----------------------------------------------------------------------------------
    async def cluster_info(self) -> ClusterInfo:
        r = await self.invoke_namesrv(create_request(RequestCode.GET_BROKER_CLUSTER_INFO))
        return ClusterInfo.from_body(self.check(r, "GET_BROKER_CLUSTER_INFO").body)

    async def topic_list(self, cluster: str | None = None) -> list[str]:
        if cluster:
            r = await self.invoke_namesrv(create_request(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster}))
        else:
            r = await self.invoke_namesrv(create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        body = as_mapping(json_compat.loads(self.check(r, "topic list").body or b"{}"))
        return [str(t) for t in body.get("topicList") or ()]

    async def topic_route(self, topic: str) -> TopicRouteData:
        r = await self.invoke_namesrv(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        if r.code == ResponseCode.TOPIC_NOT_EXIST:
            raise NotFoundError(f"topic {topic!r} not found: the name server has no route for it")
        route = TopicRouteData.from_body(self.check(r, f"route of topic {topic!r}").body)
        return route

    async def _master_addrs(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        if broker_addr:
            try:
                parse_server_address(broker_addr)
            except ValueError:
                raise AdminError(f"not a broker address (host:port): {broker_addr!r}") from None
            return [broker_addr]
        if cluster:
            return (await self.cluster_info()).master_addrs(cluster)
        raise AdminError("give a broker address (-b) or a cluster name (-c)")

    async def _on_each(self, addrs: list[str], code: int, fields: Mapping[str, object] | None, what: str,
                       body: bytes | None = None) -> list[str]:  # fmt: skip
        """One request to each of *addrs* in turn; the first refusal is an :class:`AdminError` naming *what* and
        the broker. Returns *addrs*."""
        for addr in addrs:
            r = await self.invoke(addr, create_request(code, fields, body))
            self.check(r, f"{what} on {addr}", request_code=code)
        return addrs

    # --- topics -------------------------------------------------------------------------------------
    async def create_topic(self, *, topic: str, broker_addr: str | None = None, cluster: str | None = None,
                           read_queue_nums: int = 8, write_queue_nums: int = 8, perm: int = 6, order: bool = False,
                           topic_sys_flag: int = 0) -> list[str]:  # fmt: skip
        """``updateTopic``: create or update ``topic`` on one broker or every master of a cluster."""
        addrs = await self._master_addrs(cluster, broker_addr)
        fields = {"topic": topic, "defaultTopic": AUTO_CREATE_TOPIC_KEY_TOPIC, "readQueueNums": read_queue_nums,
                  "writeQueueNums": write_queue_nums, "perm": perm, "topicFilterType": "SINGLE_TAG",
                  "topicSysFlag": topic_sys_flag, "order": order}  # fmt: skip
        await self._on_each(addrs, RequestCode.UPDATE_AND_CREATE_TOPIC, fields, f"create topic {topic!r}")
        return addrs

    async def put_order_conf(self, topic: str, order_conf: str) -> None:
        """The ``ORDER_TOPIC_CONFIG`` KV entry ``updateTopic -o true`` writes (``brokerName:queues;...``)."""
        fields = {"namespace": ORDER_TOPIC_CONFIG_NAMESPACE, "key": topic, "value": order_conf}
        for addr in self.namesrv_addrs:
            r = await self.invoke(addr, create_request(RequestCode.PUT_KV_CONFIG, fields), "name server")
            self.check(r, f"order config of {topic!r} on name server {addr}")

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        """``deleteTopic``: from every master of the cluster, then from every name server."""
        addrs = (await self.cluster_info()).master_addrs(cluster)
        await self._on_each(addrs, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic},
                            f"delete topic {topic!r}")  # fmt: skip
        for addr in self.namesrv_addrs:
            request = create_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster})
            self.check(await self.invoke(addr, request, "name server"), f"delete topic {topic!r} on name server {addr}")
        return addrs

    async def masters_with_topic(self, topic: str, cluster: str) -> list[str]:
        """The masters of *cluster* whose topic table holds *topic*, whether or not a name server routes it (each
        asked for the topic's stats: TOPIC_NOT_EXIST where it does not hold it)."""
        held: list[str] = []
        for addr in (await self.cluster_info()).master_addrs(cluster):
            r = await self.invoke(addr, create_request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}))
            if self.check(r, f"stats of topic {topic!r} on {addr}", ResponseCode.SUCCESS,
                          ResponseCode.TOPIC_NOT_EXIST).code == ResponseCode.SUCCESS:  # fmt: skip
                held.append(addr)
        return held

    async def topic_stats(self, topic: str) -> list[QueueStats]:
        """``examineTopicStats``: min/max offsets of every queue on every broker of the route."""
        route = await self.topic_route(topic)
        rows: list[QueueStats] = []
        for _name, addr in route.master_addrs():
            r = await self.invoke(addr, create_request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}))
            if r.code == ResponseCode.TOPIC_NOT_EXIST:
                continue
            table = as_mapping(as_mapping(json_compat.loads(self.check(r, f"topic stats on {addr}").body or b"{}"))
                             .get("offsetTable"))  # fmt: skip
            for key, value in table.items():
                _t, bname, qid = _mq_key(key)
                v = as_mapping(value)
                rows.append(QueueStats(bname, qid, as_int(v.get("minOffset")), as_int(v.get("maxOffset")),
                                       as_int(v.get("lastUpdateTimestamp"))))  # fmt: skip
        if not rows:
            raise NotFoundError(f"topic {topic!r} not found on any broker of its route")
        return sorted(rows, key=lambda s: (s.broker_name, s.queue_id))

    # --- brokers -------------------------------------------------------------------------------------
    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        r = await self.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO))
        body = as_mapping(json_compat.loads(self.check(r, f"runtime info of {addr}").body or b"{}"))
        return {str(k): str(v) for k, v in sorted(as_mapping(body.get("table")).items())}

    async def broker_addrs(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        """The brokers ``brokerStatus`` and friends report on: one address, or every broker of a cluster."""
        if broker_addr:
            return await self._master_addrs(None, broker_addr)
        if not cluster:
            raise AdminError("give a broker address (-b) or a cluster name (-c)")
        info = await self.cluster_info()
        return [a for b in info.brokers_of(cluster) for a in b.broker_addrs.values()]

    # --- consumer groups ------------------------------------------------------------------------------
    async def _group_brokers(self, group: str) -> list[str]:
        """Masters that hold ``group``: those of its retry topic's route, else every master known."""
        try:
            route = await self.topic_route(RETRY_GROUP_TOPIC_PREFIX + group)
            addrs = [a for _n, a in route.master_addrs()]
        except NotFoundError:
            info = await self.cluster_info()
            addrs = [b.master_addr for b in info.broker_addr_table.values() if b.master_addr]
        return addrs

    async def consume_stats(self, group: str, topic: str | None = None) -> tuple[list[ConsumeProgress], float]:
        """``examineConsumeStats``: every queue the group has an offset on, with the broker's max offset."""
        rows: list[ConsumeProgress] = []
        tps = 0.0
        for addr in await self._group_brokers(group):
            fields = {"consumerGroup": group, "topic": topic or ""}
            r = await self.invoke(addr, create_request(RequestCode.GET_CONSUME_STATS, fields))
            body = as_mapping(json_compat.loads(self.check(r, f"consume stats of {group!r} on {addr}").body or b"{}"))
            tps += _float(body.get("consumeTps"))
            for key, value in as_mapping(body.get("offsetTable")).items():
                t, bname, qid = _mq_key(key)
                v = as_mapping(value)
                rows.append(ConsumeProgress(t, bname, qid, as_int(v.get("brokerOffset")),
                                            as_int(v.get("consumerOffset")), as_int(v.get("lastTimestamp"))))
        if not rows:
            raise NotFoundError(f"no consume stats for group {group!r}: it has no offsets on any broker "
                                "(unknown group, or it consumed nothing yet)")  # fmt: skip
        return sorted(rows, key=lambda p: (p.topic, p.broker_name, p.queue_id)), tps

    async def consumer_connection(self, group: str, broker_addr: str | None = None) -> dict[str, Any]:
        """``examineConsumerConnectionInfo``: the group's clients and subscriptions, from the first broker that
        knows it online."""
        addrs = [broker_addr] if broker_addr else await self._group_brokers(group)
        last: RemotingCommand | None = None
        for addr in addrs:
            r = await self.invoke(addr, create_request(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                                       {"consumerGroup": group}))  # fmt: skip
            if r.code == ResponseCode.SUCCESS:
                return dict(_plain(json_compat.loads(r.body or b"{}")))
            last = r
        if last is None or last.code == ResponseCode.CONSUMER_NOT_ONLINE:
            raise NotFoundError(f"consumer group {group!r} is not online", last.remark if last else None)
        self.check(last, f"connections of group {group!r}")
        raise AdminError(f"connections of group {group!r}: unexpected answer {last.code}")

    async def topic_consumed_by(self, topic: str, route: TopicRouteData | None = None) -> list[str]:
        """``queryTopicConsumeByWho``: the groups the masters of *topic* (of its *route*, when known already) know
        to consume it, online or with committed offsets (QUERY_TOPIC_CONSUME_BY_WHO), sorted."""
        groups: set[str] = set()
        for _name, addr in (route or await self.topic_route(topic)).master_addrs():
            r = await self.invoke(addr, create_request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}))
            body = self.check(r, f"groups consuming {topic!r} on {addr}").body
            groups.update(str(g) for g in as_mapping(json_compat.loads(body or b"{}")).get("groupList") or ())
        return sorted(groups)

    async def message_track(self, msg: MessageExt) -> list[dict[str, Any]]:
        """``messageTrackDetail``: for each group consuming *msg*'s topic, ``consumerGroup``, ``trackType`` and
        ``exceptionDesc``. A push consumer's group has CONSUMED it when its committed offset on the message's queue
        of the broker that stored it is past the message (CONSUMED_BUT_FILTERED when its subscription's tags leave
        the message out), else NOT_CONSUME_YET; a pull consumer's is PULL (its progress is its own); a group with
        no client online, or no offsets, is NOT_ONLINE."""
        tracks: list[dict[str, Any]] = []
        for group in await self.topic_consumed_by(msg.topic):
            track: dict[str, Any] = {"consumerGroup": group, "trackType": "UNKNOWN", "exceptionDesc": None}
            tracks.append(track)
            try:
                cc = await self.consumer_connection(group)
                if str(cc.get("consumeType")) in ("CONSUME_ACTIVELY", "0"):
                    track["trackType"] = "PULL"
                    continue
                track["trackType"] = "CONSUMED" if await self._consumed(msg, group) else "NOT_CONSUME_YET"
            except NotFoundError as exc:
                track["trackType"] = "NOT_ONLINE"
                track["exceptionDesc"] = f"CODE:{int(ResponseCode.CONSUMER_NOT_ONLINE)} DESC:{exc.remark or exc}"
                continue
            except AdminError as exc:
                track["exceptionDesc"] = str(exc)
                continue
            sub = as_mapping(as_mapping(cc.get("subscriptionTable")).get(msg.topic))
            tags = {str(t) for t in sub.get("tagsSet") or ()}
            if track["trackType"] == "CONSUMED" and sub and tags and "*" not in tags and msg.tags not in tags:
                track["trackType"] = "CONSUMED_BUT_FILTERED"
        return tracks

    async def _consumed(self, msg: MessageExt, group: str) -> bool:
        """``DefaultMQAdminExtImpl.consumed``: the group's offset on the message's queue, on the master that
        stored it, is past the message."""
        try:
            rows, _tps = await self.consume_stats(group, msg.topic)
        except NotFoundError:
            raise NotFoundError("consume stats of the group are empty", "Not found the consumer group consume stats, "
                                "because return offset table is empty, maybe the consumer not consume any message"
                                ) from None  # fmt: skip
        masters = {name: data.master_addr for name, data in (await self.cluster_info()).broker_addr_table.items()}
        stored_at = _addr(*msg.store_host)
        return any(r.topic == msg.topic and r.queue_id == msg.queue_id and masters.get(r.broker_name) == stored_at
                   and r.consumer_offset > msg.queue_offset for r in rows)  # fmt: skip

    async def consumer_running_info(self, group: str, client_id: str, *, jstack: bool = False) -> dict[str, Any]:
        """``getConsumerRunningInfo``: what one client says of its consumer of *group* (GET_CONSUMER_RUNNING_INFO,
        passed on by a broker of the group): ``properties``, ``subscriptionSet``, ``mqTable`` (a list of rows, each
        the queue's ``topic``/``brokerName``/``queueId`` with its ProcessQueueInfo), ``statusTable``, ``jstack``."""
        last: RemotingCommand | None = None
        for addr in await self._group_brokers(group):
            r = await self.invoke(addr, create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, {
                "consumerGroup": group, "clientId": client_id, "jstackEnable": jstack}), "broker")  # fmt: skip
            if r.code == ResponseCode.SUCCESS:
                info = json_compat.loads(r.body or b"{}")
                rows = [{"topic": str(k["topic"]), "brokerName": str(k["brokerName"]), "queueId": int(k["queueId"]),
                         **dict(_plain(v))} for k, v in (info.get("mqTable") or {}).items()]  # fmt: skip
                plain = dict(_plain(info))
                plain["mqTable"] = sorted(rows, key=lambda q: (q["topic"], q["brokerName"], q["queueId"]))
                return plain
            last = r
        if last is None:
            raise NotFoundError(f"consumer group {group!r} has no broker")
        raise AdminError(f"running info of {client_id} in group {group!r}: {response_code_name(last.code)} "
                         f"({last.code}): {last.remark or 'no remark'}")  # fmt: skip

    async def consume_message_directly(self, group: str, client_id: str, msg: MessageExt) -> dict[str, Any]:
        """``consumeMessageDirectly``: *msg* (as looked up) handed to one client's consumer of *group*, through
        the broker that stored it (CONSUME_MESSAGE_DIRECTLY); the client's ConsumeMessageDirectlyResult."""
        r = await self.invoke(_addr(*msg.store_host), create_request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {
            "consumerGroup": group, "clientId": client_id, "msgId": msg.offset_msg_id}), "broker")  # fmt: skip
        if r.code != ResponseCode.SUCCESS:
            raise AdminError(f"consume message directly by {client_id} in group {group!r}: "
                             f"{response_code_name(r.code)} ({r.code}): {r.remark or 'no remark'}")  # fmt: skip
        return dict(_plain(json_compat.loads(r.body or b"{}")))

    async def create_subscription_group(self, config: Mapping[str, Any], *, broker_addr: str | None = None,
                                        cluster: str | None = None) -> list[str]:  # fmt: skip
        """``updateSubGroup``: the ``SubscriptionGroupConfig`` body on one broker or every master of a cluster."""
        addrs = await self._master_addrs(cluster, broker_addr)
        body = json_compat.dumps_bytes(dict(config))
        await self._on_each(addrs, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, "update subscription group",
                            body)  # fmt: skip
        return addrs

    async def delete_subscription_group(self, group: str, *, broker_addr: str | None = None,
                                        cluster: str | None = None,
                                        remove_offset: bool = False) -> list[str]:  # fmt: skip
        """``deleteSubGroup``: the group's config (and with *remove_offset* its offsets) off one broker or every
        master of a cluster."""
        addrs = await self._master_addrs(cluster, broker_addr)
        fields = {"groupName": group, "removeOffset": remove_offset}
        await self._on_each(addrs, RequestCode.DELETE_SUBSCRIPTIONGROUP, fields,
                            f"delete subscription group {group!r}")  # fmt: skip
        return addrs

    async def reset_offset_by_time(self, topic: str, group: str, timestamp: int, force: bool = True, *,
                                   cplus: bool = False) -> list[OffsetReset]:  # fmt: skip
        """``resetOffsetByTimestamp``: the group's offsets of *topic* moved to *timestamp* (ms; -1: the end) on
        every master of the topic, queue by queue. Brokers tell the group's online
        consumers; with none online the offsets are committed here instead (``ResetOffsetByTimeOldCommand``),
        and only moved back unless *force*. With *cplus* the request says it comes from C++ (language CPP): the
        broker then tells the clients in ``ResetOffsetBodyForC``'s layout, which C++ clients read."""
        route = await self.topic_route(topic)
        rows: list[OffsetReset] = []
        fields = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": force}
        for broker_name, addr in route.master_addrs():
            request = create_request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
            if cplus:
                request.language = LanguageCode.CPP
            r = await self.invoke(addr, request)
            if r.code == ResponseCode.CONSUMER_NOT_ONLINE:
                rows.extend(await self._reset_offline(route, broker_name, addr, topic, group, timestamp, force))
                continue
            body = as_mapping(json_compat.loads(self.check(r, f"reset offset of {group!r} on {addr}").body or b"{}"))
            for key, offset in as_mapping(body.get("offsetTable")).items():
                _t, bname, qid = _mq_key(key)
                rows.append(OffsetReset(bname or broker_name, qid, as_int(offset)))
        return sorted(rows, key=lambda r: (r.broker_name, r.queue_id))

    async def _reset_offline(self, route: TopicRouteData, broker_name: str, addr: str, topic: str, group: str,
                             timestamp: int, force: bool) -> list[OffsetReset]:  # fmt: skip
        rows: list[OffsetReset] = []
        for q in route.queue_datas:
            if q.broker_name != broker_name:
                continue
            for qid in range(q.write_queue_nums):
                fields = {"consumerGroup": group, "topic": topic, "queueId": qid}
                r = await self.invoke(addr, create_request(RequestCode.QUERY_CONSUMER_OFFSET, fields))
                current = as_int(r.header.get_str("offset", "-1")) if r.code == ResponseCode.SUCCESS else -1
                top = await self.max_offset(addr, topic, qid)
                found = top if timestamp == -1 else await self.search_offset(addr, topic, qid, timestamp)
                target = found
                if not force and current >= 0 and found > current:
                    target = current  # only moved back: nothing committed
                else:
                    r = await self.invoke(addr, create_request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                               {**fields, "commitOffset": target}))  # fmt: skip
                    self.check(r, f"commit offset of {group!r} on {addr}")
                rows.append(OffsetReset(broker_name, qid, target, top, current, found))
        return rows

    async def producer_connection(self, group: str, topic: str) -> list[dict[str, Any]]:
        """``examineProducerConnectionInfo``: the producers of *group*, asked of the first master of *topic*'s
        route that knows the group."""
        route = await self.topic_route(topic)
        for _name, addr in route.master_addrs():
            r = await self.invoke(addr, create_request(RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                                       {"producerGroup": group}))  # fmt: skip
            if r.code == ResponseCode.SUCCESS:
                body = as_mapping(json_compat.loads(r.body or b"{}"))
                return [dict(as_mapping(c)) for c in body.get("connectionSet") or ()]
        raise NotFoundError(f"producer group {group!r} is not online on the brokers of topic {topic!r}")

    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: a broker's settings, as its properties text says them."""
        r = self.check(await self.invoke(addr, create_request(RequestCode.GET_BROKER_CONFIG)), f"config of {addr}")
        return parse_properties((r.body or b"").decode("utf-8", "replace"))

    async def update_broker_config(self, key: str, value: str, *, broker_addr: str | None = None,
                                   cluster: str | None = None) -> list[str]:  # fmt: skip
        """``updateBrokerConfig``: one setting on one broker or every broker of a cluster."""
        addrs = await self.broker_addrs(cluster, broker_addr)
        body = f"{key}={value}\n".encode()
        await self._on_each(addrs, RequestCode.UPDATE_BROKER_CONFIG, None, f"update {key}", body)
        return addrs

    # --- plain ACL (4.x codes 50-54) ---------------------------------------------------------------------
    async def update_acl_config(self, fields: Mapping[str, object], *, broker_addr: str | None = None,
                                cluster: str | None = None) -> list[str]:  # fmt: skip
        """``updateAclConfig``: an account (``CreateAccessConfigRequestHeader`` fields) on one broker or every
        master of a cluster."""
        addrs = await self._master_addrs(cluster, broker_addr)
        await self._on_each(addrs, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, dict(fields),
                            f"update ACL account {fields.get('accessKey')!r}")  # fmt: skip
        return addrs

    async def delete_acl_config(self, access_key: str, *, broker_addr: str | None = None,
                                cluster: str | None = None) -> list[str]:  # fmt: skip
        """``deleteAclConfig``."""
        addrs = await self._master_addrs(cluster, broker_addr)
        await self._on_each(addrs, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key},
                            f"delete ACL account {access_key!r}")  # fmt: skip
        return addrs

    async def update_global_white_addrs(self, addrs_text: str, acl_file: str | None = None, *,
                                        broker_addr: str | None = None,
                                        cluster: str | None = None) -> list[str]:  # fmt: skip
        """``updateGlobalWhiteAddr``: the white list (``,``-separated) of an ACL file (the broker's default one
        unless *acl_file* names another)."""
        addrs = await self._master_addrs(cluster, broker_addr)
        fields = {"globalWhiteAddrs": addrs_text, "aclFileFullPath": acl_file}
        await self._on_each(addrs, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields, "update the global white list")
        return addrs

    async def acl_config_versions(self, *, broker_addr: str | None = None,
                                  cluster: str | None = None) -> list[dict[str, Any]]:  # fmt: skip
        """``clusterAclConfigVersion``: each broker's ACL file versions (GET_BROKER_CLUSTER_ACL_INFO)."""
        out: list[dict[str, Any]] = []
        for addr in await self._master_addrs(cluster, broker_addr):
            h = self.check(await self.invoke(addr, create_request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO)),
                           f"ACL config version of {addr}").header  # fmt: skip
            files = as_mapping(json_compat.loads(h.get_str("allAclFileVersion", "{}") or "{}"))
            out.append({"clusterName": h.get_str("clusterName", ""), "brokerName": h.get_str("brokerName", ""),
                        "brokerAddr": h.get_str("brokerAddr", addr),
                        "version": dict(as_mapping(json_compat.loads(h.get_str("version", "{}") or "{}"))),
                        "files": {str(k): dict(as_mapping(v)) for k, v in files.items()}})  # fmt: skip
        return out

    async def acl_configs(self, *, broker_addr: str | None = None,
                          cluster: str | None = None) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
        """``getAclConfig``: each broker's white list and accounts (GET_BROKER_CLUSTER_ACL_CONFIG)."""
        out: list[tuple[str, dict[str, Any]]] = []
        for addr in await self._master_addrs(cluster, broker_addr):
            r = self.check(await self.invoke(addr, create_request(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)),
                           f"ACL config of {addr}")  # fmt: skip
            out.append((addr, dict(as_mapping(json_compat.loads(r.body or b"{}")))))
        return out

    # --- offsets ---------------------------------------------------------------------------------------
    async def _offset(self, code: int, addr: str, topic: str, queue_id: int, **more: object) -> int:
        r = await self.invoke(addr, create_request(code, {"topic": topic, "queueId": queue_id, **more}))
        return as_int(self.check(r, f"{request_code_name(code)} of {topic}:{queue_id}").header.get_str("offset", "0"))

    async def min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset(RequestCode.GET_MIN_OFFSET, addr, topic, queue_id)

    async def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return await self._offset(RequestCode.GET_MAX_OFFSET, addr, topic, queue_id)

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp: int) -> int:
        return await self._offset(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, addr, topic, queue_id, timestamp=timestamp)

    # --- messages ---------------------------------------------------------------------------------------
    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """``viewMessage`` by an offset message id: VIEW_MESSAGE_BY_ID at the store host inside the id."""
        try:
            (host, port), offset = decode_offset_message_id(offset_msg_id)
        except (MessageIdError, ValueError) as exc:
            raise NotFoundError(f"not an offset message id: {exc}") from None
        if not 0 < port < 65536:
            raise NotFoundError(f"{offset_msg_id} is not an offset message id")
        addr = _addr(host, port)
        r = await self.invoke(addr, create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}))
        if r.code != ResponseCode.SUCCESS:
            raise NotFoundError(f"message {offset_msg_id} not found on {addr}: {(r.remark or '').strip()}")
        msgs = decode_messages(r.body)
        if not msgs:
            raise NotFoundError(f"message {offset_msg_id} not found on {addr}")
        return msgs[0]

    async def query_message(self, topic: str, key: str, *, max_num: int = 64, begin: int = 0,
                            end: int = 2**63 - 1, unique_key: bool = False) -> list[MessageExt]:  # fmt: skip
        """``queryMessage``: the index lookup of ``key`` on every broker of the topic's route."""
        route = await self.topic_route(topic)
        fields: dict[str, object] = {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin,
                                     "endTimestamp": end}  # fmt: skip
        if unique_key:
            fields["_UNIQUE_KEY_QUERY"] = "true"
        found: list[MessageExt] = []
        for _name, addr in route.master_addrs():
            r = await self.invoke(addr, create_request(RequestCode.QUERY_MESSAGE, fields), timeout=self.timeout * 3)
            if r.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            for msg in decode_messages(self.check(r, f"query of key {key!r} on {addr}").body):
                if msg.topic != topic:
                    continue
                if unique_key and msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) != key:
                    continue
                if not unique_key and key not in msg.key_list():
                    continue
                found.append(msg)
        found.sort(key=lambda m: (m.store_host, m.commit_log_offset))
        return found[:max_num] if not unique_key else found

    async def query_message_by_id(self, msg_id: str, topic: str | None = None) -> list[MessageExt]:
        """``queryMsgById``: an offset message id is looked at directly; a client id (``UNIQ_KEY``) is looked up
        in the index of ``topic``. A client id of a rocketq or Java producer also decodes as an offset id, so
        that path is tried first only when no topic is given."""
        if topic:
            msgs = await self.query_message(topic, msg_id, unique_key=True)
            if msgs:
                return msgs[:1] if len({m.commit_log_offset for m in msgs}) == 1 else msgs
        try:
            return [await self.view_message(msg_id)]
        except AdminError as exc:
            hint = "" if topic else "; give -t TOPIC to look a client message id (UNIQ_KEY) up in the index"
            raise NotFoundError(f"message {msg_id} not found: {exc}{hint}") from None

    async def pull(self, addr: str, topic: str, queue_id: int, offset: int, max_nums: int = 32, *,
                   group: str = TOOLS_CONSUMER_GROUP, subscription: str = "*") -> PullResult:  # fmt: skip
        fields = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
                  "maxMsgNums": max_nums, "sysFlag": PULL_FLAG_SUBSCRIPTION, "commitOffset": 0,
                  "suspendTimeoutMillis": 0, "subscription": subscription, "subVersion": 0,
                  "expressionType": "TAG"}  # fmt: skip
        r = await self.invoke(addr, create_request(RequestCode.PULL_MESSAGE, fields))
        if r.code not in PULL_STATUS:
            self.check(r, f"pull {topic}:{queue_id} at {offset} from {addr}")
        h = r.header
        msgs = decode_messages(r.body) if r.code == ResponseCode.SUCCESS else []
        return PullResult(PULL_STATUS[ResponseCode(r.code)], as_int(h.get_str("nextBeginOffset", "0")),
                          as_int(h.get_str("minOffset", "0")), as_int(h.get_str("maxOffset", "0")), msgs)  # fmt: skip

    async def message_at(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt:
        """``queryMsgByOffset``: the message at one queue offset."""
        route = await self.topic_route(topic)
        addr = route.master_addr(broker_name)
        if addr is None:
            raise NotFoundError(f"broker {broker_name!r} is not in the route of topic {topic!r}")
        result = await self.pull(addr, topic, queue_id, offset, 1)
        if not result.messages:
            raise NotFoundError(f"no message at {topic} {broker_name}:{queue_id} offset {offset} "
                                f"({result.status}, queue holds {result.min_offset}..{result.max_offset})")  # fmt: skip
        return result.messages[0]

    def _next_queue(self, queues: list[tuple[str, int]]) -> tuple[str, int]:
        self._send_index += 1
        return queues[self._send_index % len(queues)]

    async def publish_route(self, topic: str) -> tuple[TopicRouteData, bool]:
        """The route a producer sends by: the topic's own, or ``TBW102``'s (True) when the topic has none."""
        try:
            return await self.topic_route(topic), False
        except NotFoundError:
            try:
                return await self.topic_route(AUTO_CREATE_TOPIC_KEY_TOPIC), True
            except NotFoundError:
                raise NotFoundError(f"topic {topic!r} not found, and no broker allows auto-creation "
                                    f"({AUTO_CREATE_TOPIC_KEY_TOPIC} has no route)") from None  # fmt: skip

    async def send_message(self, topic: str, body: bytes, *, tags: str | None = None, keys: str | None = None,
                           properties: Mapping[str, str] | None = None, broker_name: str | None = None,
                           queue_id: int | None = None, route: TopicRouteData | None = None,
                           by_default_topic: bool = False, group: str = TOOLS_PRODUCER_GROUP,
                           uniq_key: str | None = None) -> SendResult:  # fmt: skip
        """``DefaultMQProducer.send``: SEND_MESSAGE_V2 to the next writable queue (or the one given), with a new
        client message id unless *uniq_key* is given (a message sent again keeps its own)."""
        if route is None:
            route, by_default_topic = await self.publish_route(topic)
        queues = route.write_queues(DEFAULT_TOPIC_QUEUE_NUMS if by_default_topic else None)
        if broker_name is not None:
            queues = [q for q in queues if q[0] == broker_name]
            if queue_id is not None:
                queues = [q for q in queues if q[1] == queue_id]
            if not queues:
                raise NotFoundError(f"no writable queue {broker_name}:{'*' if queue_id is None else queue_id} "
                                    f"in the route of topic {topic!r}")  # fmt: skip
        if not queues:
            raise AdminError(f"topic {topic!r} has no writable queue")
        bname, qid = self._next_queue(queues)
        addr = route.master_addr(bname)
        assert addr is not None
        props: dict[str, str] = {}
        if keys:
            props[PROPERTY_KEYS] = keys
        if tags:
            props[PROPERTY_TAGS] = tags
        props[PROPERTY_WAIT_STORE_MSG_OK] = "true"
        props.update(properties or {})
        uniq = uniq_key or self._uniq.next_id()
        props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq
        fields = {"a": group, "b": topic, "c": AUTO_CREATE_TOPIC_KEY_TOPIC, "d": DEFAULT_TOPIC_QUEUE_NUMS,
                  "e": qid, "f": 0, "g": time.time_ns() // 1_000_000, "h": 0, "i": properties_to_string(props),
                  "j": 0, "k": False, "m": False}  # fmt: skip
        r = await self.invoke(addr, create_request(RequestCode.SEND_MESSAGE_V2, fields, body))
        if r.code not in SEND_STATUS:
            self.check(r, f"send to {topic} {bname}:{qid} ({addr})")
        h = r.header
        return SendResult(SEND_STATUS[ResponseCode(r.code)], uniq, h.get_str("msgId", ""), bname,
                          as_int(h.get_str("queueId", str(qid))), as_int(h.get_str("queueOffset", "-1")))  # fmt: skip

    async def consume(self, topic: str, *, broker_name: str | None = None, queue_id: int | None = None,
                      offset: int | None = None, begin: int = 0, end: int = 0, count: int = 128,
                      group: str = TOOLS_CONSUMER_GROUP) -> list[MessageExt]:  # fmt: skip
        """``consumeMessage``: read up to ``count`` messages of the topic (or one broker / queue), oldest first,
        without committing anything."""
        route = await self.topic_route(topic)
        queues = route.read_queues()
        if broker_name is not None:
            queues = [q for q in queues if q[0] == broker_name]
            if queue_id is not None:
                queues = [q for q in queues if q[1] == queue_id]
            if not queues:
                raise NotFoundError(f"no readable queue {broker_name}:{'*' if queue_id is None else queue_id} "
                                    f"in the route of topic {topic!r}")  # fmt: skip
        out: list[MessageExt] = []
        for bname, qid in queues:
            if len(out) >= count:
                break
            addr = route.master_addr(bname)
            if addr is None:
                continue
            lo = await self.min_offset(addr, topic, qid)
            hi = await self.max_offset(addr, topic, qid)
            if begin > 0:
                lo = max(lo, await self.search_offset(addr, topic, qid, begin))
            if end > 0:  # the message the end time finds is read too, as mqadmin's consumeMessage reads it
                hi = min(hi, await self.search_offset(addr, topic, qid, end) + 1)
            if offset is not None:
                lo = max(lo, offset)
            pos = lo
            while pos < hi and len(out) < count:
                result = await self.pull(addr, topic, qid, pos, min(32, hi - pos, count - len(out)), group=group)
                out.extend(result.messages)
                if result.status == "FOUND" or result.status == "NO_MATCHED_MSG":
                    if result.next_begin_offset <= pos:
                        break
                    pos = result.next_begin_offset
                else:
                    break
        return out[:count]


#: What 4.x's brokers mean by 209-211 in answer to an ACL request (5.x gave these codes other names).
_ACL_FAILURES = {209: "UPDATE_AND_CREATE_ACL_CONFIG_FAILED", 210: "DELETE_ACL_CONFIG_FAILED",
                 211: "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED"}  # fmt: skip
_ACL_REQUESTS = frozenset({RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,
                           RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG})  # fmt: skip


def _addr(host: str, port: int) -> str:
    """``host:port`` to connect to, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _plain(value: Any) -> Any:
    """A decoded body with hashable keys turned into plain values (FrozenObject → dict key text)."""
    if isinstance(value, Mapping):
        return {(k if isinstance(k, str | int) else json_compat.dumps(_plain(k))): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value

