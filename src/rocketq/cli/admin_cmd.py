"""``rocketq admin -n ADDR <verb>``: RocketMQ's ``mqadmin`` (``tools/command/**``) with its verbs and option letters.

Verbs: clusterList, topicList, topicRoute, topicStatus, updateTopic, deleteTopic, brokerStatus, consumerProgress,
consumerConnection, updateSubGroup, queryMsgById, queryMsgByKey, queryMsgByOffset, sendMessage, consumeMessage,
consumerStatus, deleteSubGroup, resetOffsetByTime, getBrokerConfig, updateBrokerConfig, producerConnection,
topicClusterList, and the plain ACL's updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr,
clusterAclConfigVersion, getAclConfig. Each prints a table laid out like mqadmin 4.9's (same columns and widths),
or one JSON document with ``--json`` (before or after the verb). ``-n`` may be given before or after the verb and
falls back to ``NAMESRV_ADDR``; several name servers are separated by ``;``. Boolean options take a value, as in
mqadmin (``-o true``). ``--access-key``/``--secret-key`` sign every call for brokers with ``aclEnable=true``
(mqadmin reads them from ``conf/tools.yml``).

The calls themselves live in :mod:`rocketq.client.admin`; a failure (no name server at the address, an
unknown topic, cluster, group or message, a broker that refuses) is one ``rocketq: error: ...`` line on
stderr and exit status 1 (see :mod:`rocketq.cli.main`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as _dt
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from rocketq.cli.args import add_credentials, credentials, non_negative, positive, seconds
from rocketq.cli.store_cmd import CommandError
from rocketq.client.admin import (
    RETRY_GROUP_TOPIC_PREFIX,
    TOOLS_CONSUMER_GROUP,
    AdminError,
    MQAdmin,
    NotFoundError,
    TopicRouteData,
)
from rocketq.common.javacompat import hashmap_key_order
from rocketq.common.message import MessageExt
from rocketq.common.message_json import host_to_string, message_to_dict
from rocketq.common.mixall import DLQ_GROUP_TOPIC_PREFIX
from rocketq.remoting.codes import version_desc
from rocketq.remoting.command import ext_value
from rocketq.store.store_config import PROPERTY_ALIASES

#: ``QueryMsgByIdSubCommand``'s producer, which sends a message again.
RESEND_PRODUCER_GROUP = "ReSendMsgById"
Verb = Callable[[MQAdmin, argparse.Namespace], Awaitable[Any]]
_VERBS: dict[str, Verb] = {}
_PARSERS: dict[str, Callable[[argparse.ArgumentParser], None]] = {}
_HELP: dict[str, tuple[str, str]] = {}


def verb(name: str, summary: str, example: str) -> Callable[[Verb], Verb]:
    """Register ``rocketq admin <name>``; the function's ``options`` attribute adds its options."""

    def wrap(fn: Verb) -> Verb:
        _VERBS[name] = fn
        _HELP[name] = (summary, example)
        return fn

    return wrap


def options(name: str) -> Callable[[Callable[[argparse.ArgumentParser], None]], Callable[..., None]]:
    def wrap(fn: Callable[[argparse.ArgumentParser], None]) -> Callable[..., None]:
        _PARSERS[name] = fn
        return fn

    return wrap


# --------------------------------------------------------------------------------------------------
# Formatting helpers
# --------------------------------------------------------------------------------------------------


def _bool(text: str) -> bool:
    """mqadmin's ``Boolean.parseBoolean``: true, in any case; any other word is refused rather than taken for
    false (mqadmin takes ``yes`` and ``1`` for false, which a script's author rarely means)."""
    t = text.strip().lower()
    if t == "true":
        return True
    if t == "false":
        return False
    raise argparse.ArgumentTypeError(f"expected true or false (as mqadmin reads it), not {text!r}")


def _timestamp(text: str) -> int:
    """Milliseconds since the epoch, ``now``, or a local time ``YYYY-MM-DD[ T#]HH:MM:SS[.mmm]`` (mqadmin's
    ``yyyy-MM-dd#HH:mm:ss:SSS`` too)."""
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    if t.lower() == "now":
        return int(time.time() * 1000)
    if t.count(":") == 3:  # mqadmin's HH:mm:ss:SSS
        head, _, millis = t.rpartition(":")
        t = f"{head}.{millis}"
    try:
        when = _dt.datetime.fromisoformat(t.replace("#", "T"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a timestamp (ms, or YYYY-MM-DDTHH:MM:SS): {text!r}") from None
    return int(when.timestamp() * 1000)


def _human_time(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: ``yyyy-MM-dd HH:mm:ss,SSS`` in local time."""
    if ms <= 0:
        return ""
    when = _dt.datetime.fromtimestamp(ms / 1000)
    return when.strftime("%Y-%m-%d %H:%M:%S,") + f"{ms % 1000:03d}"


def _body_text(body: bytes, limit: int | None = None) -> str:
    """UTF-8 text when the body is printable text, else ``base64:...``."""
    try:
        text = body.decode("utf-8")
        printable = all(ch.isprintable() or ch in "\t\n\r" for ch in text)
    except UnicodeDecodeError:
        printable = False
    if not printable:
        text = "base64:" + base64.b64encode(body).decode("ascii")
    if limit is not None and len(text) > limit:
        return text[: limit - 3] + "..."
    return text


def _client_id(msg: MessageExt) -> str:
    return msg.uniq_key or msg.offset_msg_id


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


Tracks = list[dict[str, Any]] | str  # what each consumer group did with a message, or why that is not known


def _print_message_detail(msg: MessageExt, tracks: Tracks | None = None, *, offset_id: bool = True) -> None:
    """``QueryMsgByIdSubCommand.printMsg``, with the body printed instead of written to a temp file, then what
    each consumer group did with it (``messageTrackDetail``) when *tracks* are given."""
    rows = [("OffsetID:", msg.offset_msg_id)] if offset_id else []
    rows += [
        ("MsgId:", _client_id(msg)),
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.tags}]"),
        ("Keys:", f"[{msg.keys}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.commit_log_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", _human_time(msg.born_timestamp)),
        ("Store Timestamp:", _human_time(msg.store_timestamp)),
        ("Born Host:", host_to_string(msg.born_host)),
        ("Store Host:", host_to_string(msg.store_host)),
        ("System Flag:", msg.sys_flag),
        ("Properties:", "{" + ", ".join(f"{k}={v}" for k, v in msg.properties.items()) + "}"),
        ("Message Body:", _body_text(msg.body)),
    ]
    for label, value in rows:
        print(f"{label:<20} {value}")
    if tracks is None:
        return
    print()
    if isinstance(tracks, str):
        print(f"WARN: what consumers did with it is not known: {tracks}")
        return
    if not tracks:
        print("WARN: No Consumer")
    for t in tracks:  # MessageTrack.toString
        print(f"MessageTrack [consumerGroup={t['consumerGroup']}, trackType={t['trackType']}, "
              f"exceptionDesc={_java_text(t['exceptionDesc'])}]")  # fmt: skip


async def _tracked(admin: MQAdmin, msgs: list[MessageExt]) -> list[tuple[MessageExt, Tracks]]:
    tracked: list[tuple[MessageExt, Tracks]] = []
    for m in msgs:
        try:
            tracked.append((m, await admin.message_track(m)))
        except AdminError as exc:  # the message is shown all the same (mqadmin prints a stack trace there)
            tracked.append((m, str(exc)))
    return tracked


def _print_tracked(tracked: list[tuple[MessageExt, Tracks]], json_out: bool, *, offset_id: bool = True) -> None:
    """Messages with their consumer tracks: as JSON (each message's ``messageTracks``) or as mqadmin prints."""
    if json_out:
        _emit_json({"messages": [{**message_to_dict(m), "messageTracks": t} for m, t in tracked]})
        return
    for i, (msg, tracks) in enumerate(tracked):
        if i:
            print()
        _print_message_detail(msg, tracks, offset_id=offset_id)


def _messages_json(msgs: list[MessageExt]) -> dict[str, Any]:
    return {"messages": [message_to_dict(m) for m in msgs]}


def _broker_or_cluster(p: argparse.ArgumentParser, what: str, *, every: str = "every master") -> None:
    """mqadmin's -b/-c pair: one broker, or *every* broker of a cluster; one of them required."""
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("-b", "--brokerAddr", dest="broker_addr", help=f"{what} on this broker")
    where.add_argument("-c", "--clusterName", dest="cluster", help=f"{what} on {every} of this cluster")


# --------------------------------------------------------------------------------------------------
# Verbs
# --------------------------------------------------------------------------------------------------


@options("clusterList")
def _cluster_list_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-m", "--moreStats", dest="more_stats", action="store_true", help="print more stats")
    p.add_argument("-c", "--clusterName", dest="cluster", help="only this cluster")
    p.add_argument("-i", "--interval", type=positive, metavar="SECONDS",
                   help="print again every SECONDS until interrupted (Ctrl-C)")
    p.add_argument("--count", type=positive, metavar="N",
                   help="with -i: stop after printing N times (rocketq only)")


@verb("clusterList", "List clusters and their brokers with runtime figures.",
      "rocketq admin -n 127.0.0.1:9876 clusterList")  # fmt: skip
async def cluster_list(admin: MQAdmin, args: argparse.Namespace) -> None:
    if args.count is not None and args.interval is None:
        raise AdminError("--count goes with -i (the interval)")
    times = 0
    while True:  # mqadmin's -i: the same table again every interval
        await _print_cluster_list(admin, args)
        times += 1
        if args.interval is None or (args.count is not None and times >= args.count):
            return
        sys.stdout.flush()
        await asyncio.sleep(args.interval)


async def _print_cluster_list(admin: MQAdmin, args: argparse.Namespace) -> None:
    info = await admin.cluster_info()
    clusters = info.cluster_addr_table
    if args.cluster:
        info.brokers_of(args.cluster)  # raises for an unknown cluster
        clusters = {args.cluster: clusters[args.cluster]}
    rows: list[dict[str, Any]] = []
    now = _dt.datetime.now().timestamp() * 1000
    for cluster, names in clusters.items():
        for name in names:
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            for bid, addr in data.broker_addrs.items():
                try:
                    kv = await admin.broker_runtime_info(addr)
                except AdminError:
                    kv = {}
                earliest = int(kv.get("earliestMessageTimeStamp") or 0)
                rows.append({
                    "cluster": cluster, "brokerName": name, "brokerId": bid, "addr": addr,
                    "version": kv.get("brokerVersionDesc", ""),
                    "inTps": float((kv.get("putTps") or "0").split(" ")[0] or 0),
                    "outTps": float((kv.get("getTransferedTps") or "0").split(" ")[0] or 0),
                    "sendQueue": kv.get("sendThreadPoolQueueSize", ""),
                    "pullQueue": kv.get("pullThreadPoolQueueSize", ""),
                    "sendWaitMs": kv.get("sendThreadPoolQueueHeadWaitTimeMills", ""),
                    "pullWaitMs": kv.get("pullThreadPoolQueueHeadWaitTimeMills", ""),
                    "pageCacheLockTimeMills": kv.get("pageCacheLockTimeMills", ""),
                    "hours": (now - earliest) / 3_600_000 if earliest > 0 else 0.0,
                    "space": float(kv.get("commitLogDiskRatio") or 0),
                    "inTotalYest": _diff(kv, "msgPutTotalTodayMorning", "msgPutTotalYesterdayMorning"),
                    "outTotalYest": _diff(kv, "msgGetTotalTodayMorning", "msgGetTotalYesterdayMorning"),
                    "inTotalToday": _diff(kv, "msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
                    "outTotalToday": _diff(kv, "msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
                    "reachable": bool(kv),
                })  # fmt: skip
    if args.json:
        _emit_json({**info.to_json(), "brokers": rows})
        return
    if args.more_stats:
        print(f"{'#Cluster Name':<16}  {'#Broker Name':<32} {'#InTotalYest':>14} {'#OutTotalYest':>14} "
              f"{'#InTotalToday':>14} {'#OutTotalToday':>14}")  # fmt: skip
        for r in rows:
            print(f"{r['cluster']:<16}  {r['brokerName']:<32} {r['inTotalYest']:>14} {r['outTotalYest']:>14} "
                  f"{r['inTotalToday']:>14} {r['outTotalToday']:>14}")  # fmt: skip
        return
    print(f"{'#Cluster Name':<16}  {'#Broker Name':<22}  {'#BID':<4}  {'#Addr':<22} {'#Version':<16} "
          f"{'#InTPS(LOAD)':>19} {'#OutTPS(LOAD)':>19} {'#PCWait(ms)':>10} {'#Hour':>5} {'#SPACE':>6}")  # fmt: skip
    for r in rows:
        in_tps = f"{r['inTps']:9.2f}({r['sendQueue']},{r['sendWaitMs']}ms)"
        out_tps = f"{r['outTps']:9.2f}({r['pullQueue']},{r['pullWaitMs']}ms)"
        print(f"{r['cluster']:<16}  {r['brokerName']:<22}  {r['brokerId']!s:<4}  {r['addr']:<22} "
              f"{r['version'] or '(unreachable)':<16} {in_tps:>19} {out_tps:>19} {r['pageCacheLockTimeMills']!s:>10} "
              f"{r['hours']:>5.2f} {r['space']:>6.4f}")  # fmt: skip


def _diff(kv: dict[str, str], a: str, b: str) -> int:
    try:
        return int(kv[a]) - int(kv[b])
    except (KeyError, ValueError):
        return 0


@options("topicList")
def _topic_list_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--clusterModel", dest="cluster_model", action="store_true",
                   help="also print each topic's cluster and consumer groups")  # fmt: skip


@verb("topicList", "List every topic the name server knows.", "rocketq admin -n 127.0.0.1:9876 topicList -c")
async def topic_list(admin: MQAdmin, args: argparse.Namespace) -> None:
    topics = await admin.topic_list()
    if not args.cluster_model:
        if args.json:
            _emit_json({"topicList": topics})
        else:
            for t in topics:
                print(t)
        return
    info = await admin.cluster_info()
    rows: list[dict[str, str]] = []
    for topic in topics:
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith("%DLQ%"):
            continue
        try:
            route = await admin.topic_route(topic)
        except NotFoundError:
            continue
        cluster = next((b.cluster for b in route.broker_datas if b.cluster), "")
        if not cluster and route.broker_datas:
            name = route.broker_datas[0].broker_name
            cluster = next((c for c, names in info.cluster_addr_table.items() if name in names), "")
        try:
            groups = await admin.topic_consumed_by(topic, route)
        except AdminError:  # a broker that does not say: the topic is listed without groups
            groups = []
        for group in groups or [""]:
            rows.append({"cluster": cluster, "topic": topic, "consumerGroup": group})
    if args.json:
        _emit_json({"topics": rows})
        return
    print(f"{'#Cluster Name':<20}  {'#Topic':<48}  #Consumer Group")
    for r in rows:
        print(f"{r['cluster']:<20}  {r['topic']:<64}  {r['consumerGroup']:<64}".rstrip())


@options("topicRoute")
def _topic_route_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-l", "--list", dest="as_list", action="store_true", help="print a table instead of JSON")


@verb("topicRoute", "Show the route of a topic: its brokers and queues.",
      "rocketq admin -n 127.0.0.1:9876 topicRoute -t TopicA -l")  # fmt: skip
async def topic_route(admin: MQAdmin, args: argparse.Namespace) -> None:
    route = await admin.topic_route(args.topic.strip())
    if args.json or not args.as_list:
        _emit_json(route.to_json())
        return
    _print_route_list(route)


def _print_route_list(route: TopicRouteData) -> None:
    print(f"{'#ClusterName':<45} {'#BrokerName':<32} {'#BrokerAddrs':<50} {'#ReadQueue':<10} {'#WriteQueue':<10} "
          "#Perm")  # fmt: skip
    total_read = total_write = 0
    for q in route.queue_datas:
        b = route.broker(q.broker_name)
        cluster = b.cluster if b else ""
        addrs = json.dumps(b.to_json()["brokerAddrs"], separators=(",", ":")) if b else "{}"
        print(f"{cluster:<45} {q.broker_name:<32} {addrs:<50} {q.read_queue_nums:<10} {q.write_queue_nums:<10} "
              f"{q.perm}")  # fmt: skip
        total_read += q.read_queue_nums
        total_write += q.write_queue_nums
    print(f"\nTotal: {len(route.broker_datas)} broker(s), {total_read} read queue(s), {total_write} write queue(s)")


@options("topicStatus")
def _topic_status_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")


@verb("topicStatus", "Show min and max offsets of every queue of a topic.",
      "rocketq admin -n 127.0.0.1:9876 topicStatus -t TopicA")  # fmt: skip
async def topic_status(admin: MQAdmin, args: argparse.Namespace) -> None:
    topic = args.topic.strip()
    rows = await admin.topic_stats(topic)
    if args.json:
        _emit_json({"topic": topic, "queues": [r.to_json() for r in rows]})
        return
    print(f"{'#Broker Name':<32}  {'#QID':<4}  {'#Min Offset':<20}  {'#Max Offset':<20}    #Last Updated")
    for r in rows:
        print(f"{r.broker_name:<32}  {r.queue_id:<4}  {r.min_offset:<20}  {r.max_offset:<20}    "
              f"{_human_time(r.last_update_timestamp)}".rstrip())  # fmt: skip


@options("updateTopic")
def _update_topic_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "create the topic")
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-r", "--readQueueNums", dest="read_queue_nums", type=positive, default=8, help="read queues (8)")
    p.add_argument("-w", "--writeQueueNums", dest="write_queue_nums", type=positive, default=8, help="write queues (8)")
    p.add_argument("-p", "--perm", type=int, default=6, choices=(2, 4, 6), help="permission: 2 W, 4 R, 6 RW (6)")
    p.add_argument("-o", "--order", type=_bool, default=False, help="ordered topic: true|false (false)")
    p.add_argument("-u", "--unit", type=_bool, default=False, help="unit topic: true|false (false)")
    p.add_argument("-s", "--hasUnitSub", dest="has_unit_sub", type=_bool, default=False,
                   help="has unit subscription: true|false (false)")  # fmt: skip


@verb("updateTopic", "Create a topic, or update its queues and permission.",
      "rocketq admin -n 127.0.0.1:9876 updateTopic -c DefaultCluster -t TopicA -r 4 -w 4")  # fmt: skip
async def update_topic(admin: MQAdmin, args: argparse.Namespace) -> None:
    topic = args.topic.strip()
    sys_flag = (1 if args.unit else 0) | (2 if args.has_unit_sub else 0)
    addrs = await admin.create_topic(topic=topic, broker_addr=args.broker_addr, cluster=args.cluster,
                                     read_queue_nums=args.read_queue_nums, write_queue_nums=args.write_queue_nums,
                                     perm=args.perm, order=args.order, topic_sys_flag=sys_flag)  # fmt: skip
    config = {"topicName": topic, "readQueueNums": args.read_queue_nums, "writeQueueNums": args.write_queue_nums,
              "perm": args.perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": sys_flag,
              "order": args.order}  # fmt: skip
    if args.order:
        info = await admin.cluster_info()
        names = sorted({info.broker_name_of(a) or a for a in addrs})
        await admin.put_order_conf(topic, ";".join(f"{n}:{args.write_queue_nums}" for n in names))
    if args.json:
        _emit_json({"topic": topic, "brokers": addrs, "topicConfig": config})
        return
    for addr in addrs:
        print(f"create topic to {addr} success.")
    print(f"TopicConfig [topicName={topic}, readQueueNums={args.read_queue_nums}, "
          f"writeQueueNums={args.write_queue_nums}, perm={_perm_text(args.perm)}, topicFilterType=SINGLE_TAG, "
          f"topicSysFlag={sys_flag}, order={str(args.order).lower()}]")  # fmt: skip


def _perm_text(perm: int) -> str:
    return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")


@options("deleteTopic")
def _delete_topic_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="delete from this cluster")


@verb("deleteTopic", "Delete a topic from the brokers of a cluster and from the name servers.",
      "rocketq admin -n 127.0.0.1:9876 deleteTopic -c DefaultCluster -t TopicA")  # fmt: skip
async def delete_topic(admin: MQAdmin, args: argparse.Namespace) -> None:
    topic = args.topic.strip()
    try:
        await admin.topic_route(topic)
    except NotFoundError:  # an unknown topic is an error, not a silent success; one only the brokers hold is not
        if not await admin.masters_with_topic(topic, args.cluster):
            raise
    addrs = await admin.delete_topic(topic, args.cluster)
    if args.json:
        _emit_json({"topic": topic, "cluster": args.cluster, "brokers": addrs})
        return
    print(f"delete topic [{topic}] from cluster [{args.cluster}] success.")
    print(f"delete topic [{topic}] from NameServer success.")


async def _per_broker(admin: MQAdmin, args: argparse.Namespace,
                      fetch: Callable[[str], Awaitable[dict[str, str]]]) -> dict[str, dict[str, str]]:  # fmt: skip
    """*fetch* of each broker that ``-b`` / ``-c`` name, by address; with ``--json`` they are printed here and
    nothing is returned for a table."""
    tables = {addr: await fetch(addr) for addr in await admin.broker_addrs(args.cluster, args.broker_addr)}
    if args.json:
        _emit_json(tables)
        return {}
    return tables


@options("brokerStatus")
def _broker_status_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "runtime figures", every="every broker")


@verb("brokerStatus", "Show a broker's runtime figures (GET_BROKER_RUNTIME_INFO).",
      "rocketq admin -n 127.0.0.1:9876 brokerStatus -b 127.0.0.1:10911")  # fmt: skip
async def broker_status(admin: MQAdmin, args: argparse.Namespace) -> None:
    tables = await _per_broker(admin, args, admin.broker_runtime_info)
    for addr, kv in tables.items():
        for k, v in kv.items():
            if args.cluster:
                print(f"{addr:<24} {k:<32}: {v}")
            else:
                print(f"{k:<32}: {v}")


@options("consumerProgress")
def _consumer_progress_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--groupName", dest="group", help="consumer group (without it: every group)")
    p.add_argument("-t", "--topicName", dest="topic", help="only this topic")
    p.add_argument("-s", "--showClientIP", dest="show_client_ip", type=_bool, default=False,
                   help="true: with -g, also the host of the client that holds each queue")


@verb("consumerProgress", "Show how far consumer groups are behind, queue by queue.",
      "rocketq admin -n 127.0.0.1:9876 consumerProgress -g GroupA")  # fmt: skip
async def consumer_progress(admin: MQAdmin, args: argparse.Namespace) -> None:
    if args.group:
        group = args.group.strip()
        rows, tps = await admin.consume_stats(group, args.topic)
        diff_total = sum(r.diff for r in rows)
        holders = await _queue_holders(admin, group) if args.show_client_ip else {}
        if args.json:
            queues = [r.to_json() for r in rows]
            if args.show_client_ip:
                for q, r in zip(queues, rows, strict=True):
                    q["clientIP"] = holders.get((r.topic, r.broker_name, r.queue_id))
            _emit_json({"group": args.group, "consumeTps": tps, "diffTotal": diff_total, "queues": queues})
            return
        ip_head = f"{'#Client IP':<20} " if args.show_client_ip else ""
        print(f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  {'#Consumer Offset':<20}  "
              f"{ip_head}{'#Diff':<20}  #LastTime")  # fmt: skip
        for r in rows:
            last = _dt.datetime.fromtimestamp(r.last_timestamp / 1000).strftime("%Y-%m-%d %H:%M:%S") \
                if r.last_timestamp else "N/A"  # fmt: skip
            ip = f"{holders.get((r.topic, r.broker_name, r.queue_id)) or 'N/A':<20} " if args.show_client_ip else ""
            print(f"{r.topic:<64}  {r.broker_name:<32}  {r.queue_id:<4}  {r.broker_offset:<20}  "
                  f"{r.consumer_offset:<20}  {ip}{r.diff:<20}  {last}")  # fmt: skip
        print()
        print(f"Consume TPS: {tps:.2f}")
        print(f"Diff Total: {diff_total}")
        return
    groups: list[dict[str, Any]] = []
    for topic in await admin.topic_list():
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            continue
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
        row: dict[str, Any] = {"group": group, "count": 0, "version": "OFFLINE", "type": "", "model": "",
                               "tps": 0, "diffTotal": 0}  # fmt: skip
        try:
            rows, tps = await admin.consume_stats(group)
            row["tps"], row["diffTotal"] = int(tps), sum(r.diff for r in rows)
        except NotFoundError:
            pass
        try:
            cc = await admin.consumer_connection(group)
            conns = cc.get("connectionSet") or []
            row["count"] = len(conns)
            row["type"] = {"CONSUME_ACTIVELY": "PULL", "CONSUME_PASSIVELY": "PUSH"}.get(str(cc.get("consumeType")), "")
            row["model"] = str(cc.get("messageModel") or "")
            versions = [int(c.get("version", 0)) for c in conns if isinstance(c, dict)]
            row["version"] = version_desc(min(versions)) if versions else "OFFLINE"
        except NotFoundError:
            pass
        groups.append(row)
    if args.json:
        _emit_json({"groups": groups})
        return
    print(f"{'#Group':<64}  {'#Count':<6}  {'#Version':<24} {'#Type':<5}  {'#Model':<14}  {'#TPS':<7}  #Diff Total")
    for g in groups:
        print(f"{g['group']:<64}  {g['count']:<6}  {g['version']:<24} {g['type']:<5}  {g['model']:<14}  "
              f"{g['tps']:<7}  {g['diffTotal']}")  # fmt: skip


async def _queue_holders(admin: MQAdmin, group: str) -> dict[tuple[str, str, int], str]:
    """``getMessageQueueAllocationResult``: (topic, broker name, queue id) to the host (the client id's part before
    its first '@') of the online client that holds the queue, as each client reports; nothing when the group is
    not online."""
    holders: dict[tuple[str, str, int], str] = {}
    try:
        conns = (await admin.consumer_connection(group)).get("connectionSet") or []
        for conn in conns:
            client_id = str(conn.get("clientId", ""))
            info = await admin.consumer_running_info(group, client_id)
            for q in info.get("mqTable") or []:
                holders[(q["topic"], q["brokerName"], q["queueId"])] = client_id.split("@")[0]
    except AdminError:
        pass  # as mqadmin: a client that does not answer leaves its queues N/A
    return holders


@options("consumerConnection")
def _consumer_connection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="ask this broker only")


@verb("consumerConnection", "Show a consumer group's clients, their versions and subscriptions.",
      "rocketq admin -n 127.0.0.1:9876 consumerConnection -g GroupA")  # fmt: skip
async def consumer_connection(admin: MQAdmin, args: argparse.Namespace) -> None:
    cc = await admin.consumer_connection(args.group.strip(), args.broker_addr)
    if args.json:
        _emit_json(cc)
        return
    print(f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version")
    for c in cc.get("connectionSet") or []:
        print(f"{c.get('clientId', '')!s:<36} {c.get('clientAddr', '')!s:<22} {c.get('language', '')!s:<10} "
              f"{_version_shown(c.get('version', ''))}")  # fmt: skip
    print("\nBelow is subscription:")
    print(f"{'#Topic':<20} #SubExpression")
    for topic, sub in (cc.get("subscriptionTable") or {}).items():
        expr = sub.get("subString", "") if isinstance(sub, dict) else sub
        print(f"{topic!s:<20} {expr}")
    print()
    print(f"ConsumeType: {cc.get('consumeType')}")
    print(f"MessageModel: {cc.get('messageModel')}")
    print(f"ConsumeFromWhere: {cc.get('consumeFromWhere')}")


@options("consumerStatus")
def _consumer_status_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--consumerGroup", dest="group", required=True, help="consumer group")
    p.add_argument("-i", "--clientId", dest="client_id", help="one client, in detail (default: every client, in brief)")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="list the clients this broker knows")
    p.add_argument("-s", "--jstack", dest="jstack", action="store_true", help="also the client's thread stacks")


@verb("consumerStatus", "Ask a consumer group's clients about their consumers: settings, queues held, rates.",
      "rocketq admin -n 127.0.0.1:9876 consumerStatus -g GroupA -i 192.0.2.2@12345")  # fmt: skip
async def consumer_status(admin: MQAdmin, args: argparse.Namespace) -> None:
    group = args.group.strip()
    if args.client_id:
        info = await admin.consumer_running_info(group, args.client_id.strip(), jstack=args.jstack)
        if args.json:
            _emit_json(info)
        else:
            _print_running_info(info)
        return
    broker = args.broker_addr.strip() if args.broker_addr else None
    clients = [str(c.get("clientId", "")) for c in
               (await admin.consumer_connection(group, broker)).get("connectionSet") or []]  # fmt: skip
    infos = {cid: await admin.consumer_running_info(group, cid, jstack=args.jstack) for cid in sorted(clients)}
    if args.json:
        _emit_json(infos)
        return
    print(f"{'#Index':<10} {'#ClientId':<40} #Version")
    for i, (cid, info) in enumerate(infos.items(), 1):
        print(f"{i:<10} {cid:<40} {(info.get('properties') or {}).get('PROP_CLIENT_VERSION', '')}")
    subscriptions = {json.dumps(sorted((s.get("topic"), s.get("subString")) for s in info.get("subscriptionSet") or []))
                     for info in infos.values()}  # fmt: skip
    print()
    print("Same subscription in the same group of consumer" if len(subscriptions) <= 1 else
          "WARN: Different subscription in the same group of consumer!!!")  # fmt: skip
    print()
    print("Rebalance OK")  # as mqadmin 4.9 says: it checks nothing more


def _print_running_info(info: dict[str, Any]) -> None:
    """``ConsumerRunningInfo.formatString``: properties, subscriptions, offsets, queue detail, rates."""
    print("#Consumer Properties#")
    for name, value in sorted((info.get("properties") or {}).items()):
        print(f"{name:<40}: {value}")
    print("\n\n#Consumer Subscription#")
    for i, sub in enumerate(info.get("subscriptionSet") or [], 1):
        print(f"{i:03d} Topic: {sub.get('topic', '')!s:<40} ClassFilter: {str(sub.get('classFilterMode')).lower():<8}"
              f" SubExpression: {sub.get('subString', '')}")  # fmt: skip
    print("\n\n#Consumer Offset#")
    print(f"{'#Topic':<64} {'#Broker Name':<32} {'#QID':<4} #Consumer Offset")
    for q in info.get("mqTable") or []:
        print(f"{q['topic']:<64} {q['brokerName']:<32} {q['queueId']:<4} {q.get('commitOffset', '')}")
    print("\n\n#Consumer MQ Detail#")
    print(f"{'#Topic':<64} {'#Broker Name':<32} {'#QID':<4} #ProcessQueueInfo")
    for q in info.get("mqTable") or []:
        detail = ", ".join(f"{k}={v}" for k, v in q.items() if k not in ("topic", "brokerName", "queueId"))
        print(f"{q['topic']:<64} {q['brokerName']:<32} {q['queueId']:<4} ProcessQueueInfo [{detail}]")
    print("\n\n#Consumer RT&TPS#")
    print(f"{'#Topic':<64} {'#Pull RT':>12} {'#Pull TPS':>12} {'#Consume RT':>12} {'#ConsumeOK TPS':>15} "
          f"{'#ConsumeFailed TPS':>19} {'#ConsumeFailedMsgsInHour':>25}")  # fmt: skip
    for topic, st in sorted((info.get("statusTable") or {}).items()):
        print(f"{topic:<64} {st.get('pullRT', 0):>12.2f} {st.get('pullTPS', 0):>12.2f} {st.get('consumeRT', 0):>12.2f} "
              f"{st.get('consumeOKTPS', 0):>15.2f} {st.get('consumeFailedTPS', 0):>19.2f} "
              f"{st.get('consumeFailedMsgs', 0):>25}")  # fmt: skip
    if info.get("jstack"):
        print("\n\n#Consumer jstack#")
        print(info["jstack"])


@options("updateSubGroup")
def _update_sub_group_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "create the group")
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")
    p.add_argument("-s", "--consumeEnable", dest="consume_enable", type=_bool, default=True,
                   help="whether the group may consume (true)")  # fmt: skip
    p.add_argument("-m", "--consumeFromMinEnable", dest="consume_from_min_enable", type=_bool, default=False,
                   help="a new member starts at the queue's first message (false)")  # fmt: skip
    p.add_argument("-d", "--consumeBroadcastEnable", dest="consume_broadcast_enable", type=_bool, default=False,
                   help="the group may consume in broadcasting mode (false)")  # fmt: skip
    p.add_argument("-o", "--consumeMessageOrderly", dest="consume_message_orderly", type=_bool, default=False,
                   help="the group consumes orderly (false)")  # fmt: skip
    p.add_argument("-q", "--retryQueueNums", dest="retry_queue_nums", type=non_negative, default=1,
                   help="queues of the group's retry topic (1)")  # fmt: skip
    p.add_argument("-r", "--retryMaxTimes", dest="retry_max_times", type=int, default=16,
                   help="times a message is retried before the dead-letter queue (16)")  # fmt: skip
    p.add_argument("-i", "--brokerId", dest="broker_id", type=non_negative, default=0, help="read from broker id (0)")
    p.add_argument("-w", "--whichBrokerWhenConsumeSlowly", dest="which_broker_when_consume_slowly", type=int,
                   default=1, help="broker id to read from when consumption falls behind (1)")  # fmt: skip
    p.add_argument("-a", "--notifyConsumerIdsChanged", dest="notify_consumer_ids_changed_enable", type=_bool,
                   default=True, help="(true)")  # fmt: skip


@verb("updateSubGroup", "Create a consumer (subscription) group, or update its settings.",
      "rocketq admin -n 127.0.0.1:9876 updateSubGroup -c DefaultCluster -g GroupA -r 3")  # fmt: skip
async def update_sub_group(admin: MQAdmin, args: argparse.Namespace) -> None:
    config = {
        "groupName": args.group.strip(), "consumeEnable": args.consume_enable,
        "consumeFromMinEnable": args.consume_from_min_enable,
        "consumeBroadcastEnable": args.consume_broadcast_enable,
        "consumeMessageOrderly": args.consume_message_orderly, "retryQueueNums": args.retry_queue_nums,
        "retryMaxTimes": args.retry_max_times, "brokerId": args.broker_id,
        "whichBrokerWhenConsumeSlowly": args.which_broker_when_consume_slowly,
        "notifyConsumerIdsChangedEnable": args.notify_consumer_ids_changed_enable,
    }  # fmt: skip
    addrs = await admin.create_subscription_group(config, broker_addr=args.broker_addr, cluster=args.cluster)
    if args.json:
        _emit_json({"groupName": config["groupName"], "brokers": addrs, "config": config})
        return
    for addr in addrs:
        print(f"create subscription group to {addr} success.")
    print("SubscriptionGroupConfig [" + ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                                                for k, v in config.items()) + "]")  # fmt: skip


@options("deleteSubGroup")
def _delete_sub_group_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "delete the group")
    p.add_argument("-g", "--groupName", dest="group", required=True, help="consumer group name")
    p.add_argument("-r", "--removeOffset", dest="remove_offset", type=_bool, default=False,
                   help="delete the group's offsets too (false)")  # fmt: skip


@verb("deleteSubGroup", "Delete a consumer (subscription) group's config from brokers.",
      "rocketq admin -n 127.0.0.1:9876 deleteSubGroup -c DefaultCluster -g GroupA -r true")  # fmt: skip
async def delete_sub_group(admin: MQAdmin, args: argparse.Namespace) -> None:
    addrs = await admin.delete_subscription_group(args.group, broker_addr=args.broker_addr, cluster=args.cluster,
                                                  remove_offset=args.remove_offset)  # fmt: skip
    deleted: list[str] = []
    if args.cluster:  # as mqadmin's: the group's retry and dead-letter topics go too, from brokers and name servers
        for topic in (RETRY_GROUP_TOPIC_PREFIX + args.group, DLQ_GROUP_TOPIC_PREFIX + args.group):
            try:
                await admin.delete_topic(topic, args.cluster)
                deleted.append(topic)
            except AdminError as e:  # (mqadmin prints the stack trace and goes on)
                print(f"rocketq: warning: {topic}: {e}", file=sys.stderr)
    if args.json:
        _emit_json({"groupName": args.group, "brokers": addrs, "topicsDeleted": deleted})
        return
    where = f" in cluster [{args.cluster}]" if args.cluster else ""
    for addr in addrs:
        print(f"delete subscription group [{args.group}] from broker [{addr}]{where} success.")
    for topic in deleted:
        print(f"delete topic [{topic}] from cluster [{args.cluster}] success.")


@options("resetOffsetByTime")
def _reset_offset_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--group", dest="group", required=True, help="consumer group")
    p.add_argument("-t", "--topic", required=True, help="topic")
    p.add_argument("-s", "--timestamp", dest="timestamp", required=True,
                   help="ms since the epoch, yyyy-MM-dd#HH:mm:ss:SSS (local time), or now or -1 (the end)")  # fmt: skip
    p.add_argument("-f", "--force", dest="force", type=_bool, default=True,
                   help="move offsets forward too, not only back (true)")  # fmt: skip
    p.add_argument("-c", "--cplus", dest="cplus", action="store_true",
                   help="the group's clients are C++ clients (they get the new offsets in their own body layout)")


@verb("resetOffsetByTime", "Move a consumer group's offsets of a topic to a point in time.",
      "rocketq admin -n 127.0.0.1:9876 resetOffsetByTime -g GroupA -t TopicA -s 2026-11-27#08:00:00:000"
      )  # fmt: skip
async def reset_offset_by_time(admin: MQAdmin, args: argparse.Namespace) -> None:
    try:
        # "now" is -1 here, the end of every queue, as mqadmin's ResetOffsetByTimeCommand reads it (the current
        # time would find the last message, and leave it to be consumed again)
        when = -1 if args.timestamp.strip().lower() == "now" else _timestamp(args.timestamp)
    except argparse.ArgumentTypeError as e:
        raise AdminError(str(e)) from None
    rows = await admin.reset_offset_by_time(args.topic, args.group, when, args.force, cplus=args.cplus)
    if args.json:
        _emit_json({"group": args.group, "topic": args.topic, "timestamp": when, "force": args.force,
                    "offsets": [r.to_json() for r in rows]})  # fmt: skip
        return
    print(f"rollback consumer offset by specified consumerGroup[{args.group}], topic[{args.topic}], "
          f"force[{str(args.force).lower()}], timestamp(string)[{args.timestamp}], "
          f"timestamp(long)[{when}]")  # fmt: skip
    if rows and all(r.timestamp_offset is not None for r in rows):  # reset by the tool: ResetOffsetByTimeOldCommand
        print(f"{'#brokerName':<20}  {'#queueId':<20}  {'#brokerOffset':<20}  {'#consumerOffset':<20}  "
              f"{'#timestampOffset':<20}  {'#rollbackOffset':<20}")  # fmt: skip
        for r in rows:
            print(f"{r.broker_name:<20}  {r.queue_id:<20}  {r.broker_offset:<20}  {r.consumer_offset:<20}  "
                  f"{r.timestamp_offset:<20}  {r.offset:<20}")  # fmt: skip
        return
    print(f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}")
    for r in rows:
        print(f"{r.broker_name:<40}  {r.queue_id:<40}  {r.offset:<40}")


@options("getBrokerConfig")
def _get_broker_config_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "the settings", every="every broker")


@verb("getBrokerConfig", "Show a broker's settings.",
      "rocketq admin -n 127.0.0.1:9876 getBrokerConfig -b 127.0.0.1:10911")  # fmt: skip
async def get_broker_config(admin: MQAdmin, args: argparse.Namespace) -> None:
    for addr, config in (await _per_broker(admin, args, admin.broker_config)).items():
        print(f"============{addr}============")
        for key in sorted(config):
            print(f"{key:<50}=  {config[key]}")


@options("updateBrokerConfig")
def _update_broker_config_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "change the setting", every="every broker")
    p.add_argument("-k", "--key", required=True, help="setting name (broker.conf's)")
    p.add_argument("-v", "--value", required=True, help="its new value")


@verb("updateBrokerConfig", "Change one setting of running brokers (their broker.conf files are not rewritten).",
      "rocketq admin -n 127.0.0.1:9876 updateBrokerConfig -c DefaultCluster -k fileReservedTime -v 24")  # fmt: skip
async def update_broker_config(admin: MQAdmin, args: argparse.Namespace) -> None:
    addrs = await admin.update_broker_config(args.key, args.value, broker_addr=args.broker_addr, cluster=args.cluster)
    # A broker answers success whatever it made of the setting (Java's Configuration.update skips an unknown key
    # or a value that does not parse in silence): read it back, and say where it did not take.
    problems = []
    shown_as = PROPERTY_ALIASES.get(args.key, args.key)  # an earlier name is listed under the current one
    for addr in addrs:
        now = (await admin.broker_config(addr)).get(shown_as)
        if now is None:
            problems.append(f"{addr}: {args.key} is not a setting of this broker (ignored; see getBrokerConfig)")
        elif not _same_setting(now, args.value):
            problems.append(f"{addr}: {args.key} is still {now}: {args.value!r} does not parse as its value, or the "
                            "setting cannot change while the broker runs")  # fmt: skip
    if problems:
        raise AdminError("; ".join(problems))
    if args.json:
        _emit_json({"brokers": addrs, args.key: args.value})
        return
    for addr in addrs:
        print(f"update broker config success, {addr}")


def _same_setting(shown: str, given: str) -> bool:
    """Whether getBrokerConfig's *shown* value is *given* as Java parses it (true/false in any case, 024 = 24)."""
    a, b = shown.strip(), given.strip()
    if a == b or a.lower() == b.lower():
        return True
    try:
        return int(a) == int(b)
    except ValueError:
        return False


@options("producerConnection")
def _producer_connection_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-g", "--producerGroup", dest="group", required=True, help="producer group")
    p.add_argument("-t", "--topic", required=True, help="a topic the group sends to")


@verb("producerConnection", "Show a producer group's clients.",
      "rocketq admin -n 127.0.0.1:9876 producerConnection -g ProducerGroupA -t TopicA")  # fmt: skip
async def producer_connection(admin: MQAdmin, args: argparse.Namespace) -> None:
    connections = await admin.producer_connection(args.group, args.topic)
    if args.json:
        _emit_json({"connectionSet": connections})
        return
    for i, c in enumerate(connections, 1):
        print(f"{i:04d}  {c.get('clientId', ''):<32} {c.get('clientAddr', ''):<22} {c.get('language', ''):<8} "
              f"{_version_shown(c.get('version'))}")  # fmt: skip


def _version_shown(version: object) -> str:
    """A client's version as mqadmin shows it (``MQVersion.getVersionDesc``: V4_9_4 for 401)."""
    return version_desc(int(version)) if isinstance(version, int) else str(version)


@options("topicClusterList")
def _topic_cluster_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic")


@verb("topicClusterList", "List the clusters a topic is on.",
      "rocketq admin -n 127.0.0.1:9876 topicClusterList -t TopicA")  # fmt: skip
async def topic_cluster_list(admin: MQAdmin, args: argparse.Namespace) -> None:
    route = await admin.topic_route(args.topic)
    names = {b.broker_name for b in route.broker_datas}
    info = await admin.cluster_info()
    clusters = sorted(c for c, brokers in info.cluster_addr_table.items() if names & set(brokers))
    if args.json:
        _emit_json({"topic": args.topic, "clusters": clusters})
        return
    for cluster in clusters:
        print(cluster)


@options("updateAclConfig")
def _update_acl_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "update the account")
    p.add_argument("-a", "--accessKey", dest="acl_access_key", required=True, help="the account's access key")
    p.add_argument("-s", "--secretKey", dest="acl_secret_key", required=True, help="its secret key")
    p.add_argument("-w", "--whiteRemoteAddress", dest="white", help="a host (pattern) that needs no signature")
    p.add_argument("-i", "--defaultTopicPerm", dest="default_topic_perm", help="DENY, PUB, SUB or PUB|SUB")
    p.add_argument("-u", "--defaultGroupPerm", dest="default_group_perm", help="DENY, PUB, SUB or PUB|SUB")
    p.add_argument("-t", "--topicPerms", dest="topic_perms", help="e.g. topicA=DENY,topicD=SUB")
    p.add_argument("-g", "--groupPerms", dest="group_perms", help="e.g. groupA=DENY,groupD=SUB")
    p.add_argument("-m", "--admin", dest="admin", type=_bool, default=False, help="an admin account (false)")


@verb("updateAclConfig", "Create or update an ACL account in the brokers' plain_acl.yml.",
      "rocketq admin -n 127.0.0.1:9876 updateAclConfig -c DefaultCluster -a RocketMQ -s 12345678 "
      "-t topicA=PUB")  # fmt: skip
async def update_acl_config(admin: MQAdmin, args: argparse.Namespace) -> None:
    fields = {"accessKey": args.acl_access_key, "secretKey": args.acl_secret_key, "whiteRemoteAddress": args.white,
              "defaultTopicPerm": args.default_topic_perm, "defaultGroupPerm": args.default_group_perm,
              "topicPerms": args.topic_perms, "groupPerms": args.group_perms, "admin": args.admin}  # fmt: skip
    addrs = await admin.update_acl_config(fields, broker_addr=args.broker_addr, cluster=args.cluster)
    shown = {k: v for k, v in fields.items() if v is not None and k != "secretKey"}
    if args.json:
        _emit_json({"brokers": addrs, "account": shown})
        return
    for addr in addrs:
        print(f"create or update plain access config to {addr} success.")
    print("PlainAccessConfig{" + ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                                          for k, v in shown.items()) + "}")  # fmt: skip


@options("deleteAclConfig")
def _delete_acl_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "delete the account")
    p.add_argument("-a", "--accessKey", dest="acl_access_key", required=True, help="the account's access key")


@verb("deleteAclConfig", "Delete an ACL account from the brokers' ACL files.",
      "rocketq admin -n 127.0.0.1:9876 deleteAclConfig -c DefaultCluster -a RocketMQ")  # fmt: skip
async def delete_acl_config(admin: MQAdmin, args: argparse.Namespace) -> None:
    addrs = await admin.delete_acl_config(args.acl_access_key, broker_addr=args.broker_addr, cluster=args.cluster)
    if args.json:
        _emit_json({"brokers": addrs, "accessKey": args.acl_access_key})
        return
    for addr in addrs:
        print(f"delete plain access config account from {addr} success.")
    print(f"account's accesskey is:{args.acl_access_key}")


@options("updateGlobalWhiteAddr")
def _white_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "update the white list")
    p.add_argument("-g", "--globalWhiteRemoteAddresses", dest="white", required=True,
                   help="hosts that need no credentials, e.g. 10.10.103.*,192.168.0.*")  # fmt: skip
    p.add_argument("-p", "--aclFileFullPath", dest="acl_file", help="the ACL file (default: conf/plain_acl.yml)")


@verb("updateGlobalWhiteAddr", "Set the global white list of hosts that need no ACL credentials.",
      "rocketq admin -n 127.0.0.1:9876 updateGlobalWhiteAddr -c DefaultCluster -g 10.10.103.*")  # fmt: skip
async def update_global_white_addr(admin: MQAdmin, args: argparse.Namespace) -> None:
    addrs = await admin.update_global_white_addrs(args.white, args.acl_file, broker_addr=args.broker_addr,
                                                  cluster=args.cluster)  # fmt: skip
    if args.json:
        _emit_json({"brokers": addrs, "globalWhiteRemoteAddresses": args.white.split(",")})
        return
    for addr in addrs:
        print(f"update global white remote addresses to {addr} success.")


@options("clusterAclConfigVersion")
def _acl_version_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "read the ACL versions")


@verb("clusterAclConfigVersion", "Show the version of every ACL file of the brokers.",
      "rocketq admin -n 127.0.0.1:9876 clusterAclConfigVersion -c DefaultCluster")  # fmt: skip
async def cluster_acl_config_version(admin: MQAdmin, args: argparse.Namespace) -> None:
    rows = await admin.acl_config_versions(broker_addr=args.broker_addr, cluster=args.cluster)
    if args.json:
        _emit_json({"brokers": rows})
        return
    if args.cluster:  # as mqadmin: a header for a cluster's table only
        print(f"{'#Cluster Name':<16}  {'#Broker Name':<22}  {'#Broker Addr':<22}  {'#AclFilePath':<20}  "
              f"{'#AclConfigVersionNum':<22}  {'#AclLastUpdateTime':<22}")  # fmt: skip
    for row in rows:
        files = row["files"]
        for path in hashmap_key_order(files):  # the order of the HashMap mqadmin reads the files into
            version = files[path]
            when = _dt.datetime.fromtimestamp(int(version.get("timestamp", 0)) / 1000).strftime("%Y-%m-%d %H:%M:%S")
            print(f"{row['clusterName']:<16}  {row['brokerName']:<22}  {row['brokerAddr']:<22}  {path:<20}  "
                  f"{version.get('counter', 0)!s:<22}  {when:<22}")  # fmt: skip
    print(f"get {'cluster' if args.cluster else 'broker'}'s plain access config version success.")


@options("getAclConfig")
def _get_acl_options(p: argparse.ArgumentParser) -> None:
    _broker_or_cluster(p, "read the ACL config")


@verb("getAclConfig", "Show the brokers' ACL white lists and accounts.",
      "rocketq admin -n 127.0.0.1:9876 getAclConfig -b 127.0.0.1:10911")  # fmt: skip
async def get_acl_config(admin: MQAdmin, args: argparse.Namespace) -> None:
    configs = await admin.acl_configs(broker_addr=args.broker_addr, cluster=args.cluster)
    if args.json:
        _emit_json({"brokers": [{"brokerAddr": addr, **body} for addr, body in configs]})
        return
    for _addr, body in configs:  # GetAccessConfigSubCommand.printClusterBaseInfo, broker after broker
        print()
        print(f"{'globalWhiteRemoteAddresses':<20}: {_java_text(body.get('globalWhiteAddrs') or [])}")
        print("\naccounts:")
        for account in body.get("plainAccessConfigs") or []:
            for name in ("accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
                         "defaultGroupPerm", "topicPerms", "groupPerms"):  # PlainAccessConfig's fields, in order
                value = account.get(name, False if name == "admin" else None)  # admin: a boolean, never null
                print(f"  {name:<18}: {'' if value is None else _java_text(value)}")
            print()


def _java_text(value: object) -> str:
    """*value* as Java's ``String.valueOf`` writes it: null, true/false, [a, b] for a list, {k=v} for a map."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_java_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_java_text(k)}={_java_text(v)}" for k, v in value.items()) + "}"
    text = ext_value(value)  # scalars as Java writes them: true/false, enum names, Double.toString
    return "null" if text is None else text


def _consume_directly_options(p: argparse.ArgumentParser) -> None:
    """-g and -d of the message queries: have one client of a group consume the message again."""
    p.add_argument("-g", "--consumerGroup", dest="group", help="with -d: have this group's client consume it again")
    p.add_argument("-d", "--clientId", dest="client_id", help="with -g: the client that consumes it (its listener "
                   "is called directly; nothing is committed)")  # fmt: skip


def _check_consume_directly(args: argparse.Namespace) -> None:
    if bool(args.group) != bool(args.client_id):
        raise AdminError("-g and -d go together: the consumer group and the client id of the consumer to use")


@options("queryMsgById")
def _query_by_id_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True,
                   help="offset message id, or a client message id (UNIQ_KEY) with -t; "
                   "several separated by ','")  # fmt: skip
    p.add_argument("-t", "--topic", help="topic, to look a client message id up in the index")
    _consume_directly_options(p)
    p.add_argument("-s", "--sendMessage", dest="resend", type=_bool, default=False,
                   help="true: send the message again, as a producer would (same topic, body and properties)")
    p.add_argument("-u", "--unitName", dest="unit_name",
                   help="with -s: the unit of the producer that sends it again (accepted as mqadmin takes it: it only "
                   "names the producer)")  # fmt: skip


@verb("queryMsgById", "Show a message by its offset message id, or by its client id within a topic.",
      "rocketq admin -n 127.0.0.1:9876 queryMsgById -t TopicA -i 7F00000100002A9F0000000000000000")  # fmt: skip
async def query_msg_by_id(admin: MQAdmin, args: argparse.Namespace) -> None:
    _check_consume_directly(args)
    msgs: list[MessageExt] = []
    for msg_id in [m.strip() for m in args.msg_id.split(",") if m.strip()]:
        msgs.extend(await admin.query_message_by_id(msg_id, args.topic.strip() if args.topic else None))
    if args.group:
        results = [await admin.consume_message_directly(args.group.strip(), args.client_id.strip(), m) for m in msgs]
        if args.json:
            _emit_json(results)
            return
        for r in results:
            _print_directly_result(r)
        return
    if args.resend:
        await _resend(admin, msgs, args.json)
        return
    _print_tracked(await _tracked(admin, msgs), args.json)


async def _resend(admin: MQAdmin, msgs: list[MessageExt], json_out: bool) -> None:
    """``QueryMsgByIdSubCommand.sendMsg``: each message sent again to its topic as it was stored (tags, keys,
    properties, its client message id), by a producer's queue choice."""
    results = []
    for m in msgs:
        results.append((m, await admin.send_message(m.topic, m.body, properties=m.properties,
                                                    uniq_key=m.uniq_key or None,
                                                    group=RESEND_PRODUCER_GROUP)))  # fmt: skip
    if json_out:
        _emit_json({"results": [{"originalMsgId": m.offset_msg_id, **r.to_json()} for m, r in results]})
        return
    for m, r in results:
        print(f"prepare resend msg. originalMsgId={m.offset_msg_id}")
        print(f"SendResult [sendStatus={r.status}, msgId={r.msg_id}, offsetMsgId={r.offset_msg_id}, messageQueue="
              f"MessageQueue [topic={m.topic}, brokerName={r.broker_name}, queueId={r.queue_id}], "
              f"queueOffset={r.queue_offset}]")  # fmt: skip


@options("queryMsgByUniqueKey")
def _query_by_unique_key_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--msgId", dest="msg_id", required=True, help="the client message id (UNIQ_KEY)")
    p.add_argument("-t", "--topic", required=True, help="topic of the message")
    _consume_directly_options(p)
    p.add_argument("-a", "--showAll", dest="show_all", action="store_true",
                   help="every message stored with that id (at most 32), not only the first stored")


@verb("queryMsgByUniqueKey", "Show a message by its client message id (UNIQ_KEY), looked up in the topic's index.",
      "rocketq admin -n 127.0.0.1:9876 queryMsgByUniqueKey -t TopicA -i 7F0000010C2B18B4AAC2337A2E4C0000"
      )  # fmt: skip
async def query_msg_by_unique_key(admin: MQAdmin, args: argparse.Namespace) -> None:
    _check_consume_directly(args)
    topic, msg_id = args.topic.strip(), args.msg_id.strip()
    msgs = await admin.query_message(topic, msg_id, max_num=32, unique_key=True)
    if not msgs:  # as queryMessageByUniqKey: "query message by key finished, but no message."
        raise NotFoundError(f"no message of topic {topic!r} has the client message id {msg_id}")
    msgs.sort(key=lambda m: m.store_timestamp)  # a message sent again is stored again: the first one counts
    if args.group:
        result = await admin.consume_message_directly(args.group.strip(), args.client_id.strip(), msgs[0])
        if args.json:
            _emit_json(result)
        else:
            _print_directly_result(result)
        return
    _print_tracked(await _tracked(admin, msgs if args.show_all else msgs[:1]), args.json, offset_id=False)


def _print_directly_result(r: dict[str, Any]) -> None:
    """``ConsumeMessageDirectlyResult.toString``, as mqadmin prints it."""
    print(f"ConsumeMessageDirectlyResult [order={str(r.get('order')).lower()}, autoCommit="
          f"{str(r.get('autoCommit')).lower()}, consumeResult={r.get('consumeResult')}, remark="
          f"{_java_text(r.get('remark'))}, spentTimeMills={r.get('spentTimeMills')}]")  # fmt: skip


@options("queryMsgByKey")
def _query_by_key_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-k", "--msgKey", dest="key", required=True, help="message key")
    p.add_argument("-b", "--beginTimestamp", dest="begin", type=_timestamp, default=0, help="store time from (ms)")
    p.add_argument("-e", "--endTimestamp", dest="end", type=_timestamp, default=2**63 - 1,
                   help="store time up to (ms)")  # fmt: skip
    p.add_argument("-m", "--maxNum", dest="max_num", type=positive, default=64, help="at most this many (64)")


@verb("queryMsgByKey", "Look messages up by key in the brokers' index.",
      "rocketq admin -n 127.0.0.1:9876 queryMsgByKey -t TopicA -k order-1")  # fmt: skip
async def query_msg_by_key(admin: MQAdmin, args: argparse.Namespace) -> None:
    topic = args.topic.strip()
    msgs = await admin.query_message(topic, args.key, max_num=args.max_num, begin=args.begin, end=args.end)
    if not msgs:  # as mqadmin's queryMessage: "query message by key finished, but no message."
        raise AdminError(f"no message of topic {topic!r} has key {args.key!r}")
    if args.json:
        _emit_json(_messages_json(msgs))
        return
    print(f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40}")
    for m in msgs:
        print(f"{_client_id(m):<50} {m.queue_id:>4} {m.queue_offset:>40}")


@options("queryMsgByOffset")
def _query_by_offset_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-b", "--brokerName", dest="broker_name", required=True, help="broker name")
    p.add_argument("-i", "--queueId", dest="queue_id", type=non_negative, required=True, help="queue id")
    p.add_argument("-o", "--offset", type=non_negative, required=True, help="queue offset")


@verb("queryMsgByOffset", "Show the message at one queue offset.",
      "rocketq admin -n 127.0.0.1:9876 queryMsgByOffset -t TopicA -b broker-a -i 0 -o 0")  # fmt: skip
async def query_msg_by_offset(admin: MQAdmin, args: argparse.Namespace) -> None:
    msg = await admin.message_at(args.topic.strip(), args.broker_name.strip(), args.queue_id, args.offset)
    _print_tracked(await _tracked(admin, [msg]), args.json)


@options("sendMessage")
def _send_message_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-p", "--body", required=True, help="message body (UTF-8 text)")
    p.add_argument("-k", "--key", help="message keys (separated by spaces)")
    p.add_argument("-c", "--tags", help="message tag")
    p.add_argument("-b", "--broker", help="send to this broker name")
    p.add_argument("-i", "--qid", type=non_negative, help="send to this queue (needs -b)")
    p.add_argument("-m", "--msgTraceEnable", dest="trace", type=_bool, default=False,
                   help="message trace: accepted for mqadmin compatibility, "
                   "rocketq has no trace topic (false)")  # fmt: skip
    p.add_argument("--property", dest="properties", action="append", default=[], metavar="NAME=VALUE",
                   help="a user property (repeatable; rocketq only)")  # fmt: skip
    p.add_argument("--count", type=positive, default=1, help="send the message this many times (rocketq only; 1)")


@verb("sendMessage", "Send a message (round robin over the topic's writable queues unless -b/-i say where).",
      "rocketq admin -n 127.0.0.1:9876 sendMessage -t TopicA -p 'hello' -c TagA -k order-1")  # fmt: skip
async def send_message(admin: MQAdmin, args: argparse.Namespace) -> None:
    if args.qid is not None and not args.broker:
        raise AdminError("a queue (-i) needs a broker name (-b)")
    if args.count < 1:
        raise AdminError("--count must be at least 1")
    props: dict[str, str] = {}
    for item in args.properties:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise AdminError(f"a property is NAME=VALUE, not {item!r}")
        props[name] = value
    topic = args.topic.strip()
    route, by_default = await admin.publish_route(topic)
    results = []
    for _ in range(args.count):
        results.append(await admin.send_message(topic, args.body.encode("utf-8"), tags=args.tags, keys=args.key,
                                                properties=props, broker_name=args.broker, queue_id=args.qid,
                                                route=route, by_default_topic=by_default))  # fmt: skip
        if by_default:  # the first send created the topic: use its own route from now on
            route, by_default = await _fresh_route(admin, topic, route, by_default)
    if args.json:
        _emit_json({"results": [r.to_json() for r in results]})
        return
    print(f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #MsgId")
    for r in results:
        print(f"{r.broker_name:<32}  {r.queue_id!s:<4}  {r.status:<20}    {r.msg_id}")


async def _fresh_route(
    admin: MQAdmin, topic: str, route: TopicRouteData, by_default: bool
) -> tuple[TopicRouteData, bool]:
    for _ in range(20):
        try:
            return await admin.topic_route(topic), False
        except NotFoundError:
            await asyncio.sleep(0.05)
    return route, by_default


@options("consumeMessage")
def _consume_message_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-t", "--topic", required=True, help="topic name")
    p.add_argument("-b", "--brokerName", dest="broker_name", help="only this broker")
    p.add_argument("-i", "--queueId", dest="queue_id", type=non_negative, help="only this queue (needs -b)")
    p.add_argument("-o", "--offset", type=non_negative, help="from this queue offset (needs -i)")
    p.add_argument("-g", "--consumerGroup", dest="group", default=TOOLS_CONSUMER_GROUP,
                   help=f"consumer group to pull as ({TOOLS_CONSUMER_GROUP}); nothing is committed")  # fmt: skip
    p.add_argument("-s", "--beginTimestamp", dest="begin", type=_timestamp, default=0, help="stored from (ms)")
    p.add_argument("-e", "--endTimestamp", dest="end", type=_timestamp, default=0, help="stored up to (ms)")
    p.add_argument("-c", "--MessageNumber", dest="count", type=positive, default=128, help="at most this many (128)")


@verb("consumeMessage", "Read messages of a topic (pull, oldest first, nothing committed).",
      "rocketq admin -n 127.0.0.1:9876 consumeMessage -t TopicA -c 10")  # fmt: skip
async def consume_message(admin: MQAdmin, args: argparse.Namespace) -> None:
    if args.queue_id is not None and not args.broker_name:
        raise AdminError("a queue (-i) needs a broker name (-b)")
    if args.offset is not None and args.queue_id is None:
        raise AdminError("an offset (-o) needs a queue (-i)")
    msgs = await admin.consume(args.topic.strip(), broker_name=args.broker_name, queue_id=args.queue_id,
                               offset=args.offset, begin=args.begin, end=args.end, count=args.count,
                               group=args.group)  # fmt: skip
    if args.json:
        _emit_json(_messages_json(msgs))
        return
    print(f"{'#QID':<4}  {'#Offset':<10}  {'#MsgId':<32}  {'#Tags':<16}  {'#Keys':<24}  #Body")
    for m in msgs:
        print(f"{m.queue_id:<4}  {m.queue_offset:<10}  {_client_id(m):<32}  {m.tags or '':<16}  {m.keys or '':<24}  "
              f"{_body_text(m.body, 80)}")  # fmt: skip
    print(f"\n{len(msgs)} message(s)")


# --------------------------------------------------------------------------------------------------
# Registration and dispatch
# --------------------------------------------------------------------------------------------------


def register(groups: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = groups.add_parser(
        "admin",
        help="administer name servers and brokers (mqadmin)",
        description="Administer a RocketMQ-compatible cluster over the remoting protocol, with mqadmin's verbs and "
        "option letters. -n (or NAMESRV_ADDR) names the name server(s); --json prints one JSON document "
        "instead of a table. 'rocketq admin VERB --help' explains a verb.",
        epilog="examples:\n  rocketq admin -n 127.0.0.1:9876 clusterList\n"
        "  rocketq admin -n 127.0.0.1:9876 updateTopic -c DefaultCluster -t TopicA\n"
        "  rocketq admin -n 127.0.0.1:9876 topicStatus -t TopicA --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(p, top=True)
    verbs = p.add_subparsers(dest="verb", metavar="VERB", title="verbs")
    for name, fn in _VERBS.items():
        summary, example = _HELP[name]
        vp = verbs.add_parser(name, help=summary, description=summary, epilog=f"example:\n  {example}",
                              formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
        _common(vp, top=False)
        _PARSERS[name](vp)
        vp.set_defaults(admin_verb=fn)
    p.set_defaults(func=cmd_admin)


def _common(p: argparse.ArgumentParser, *, top: bool) -> None:
    default: Any = None if top else argparse.SUPPRESS
    p.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", metavar="ADDR", default=default,
                   help="name server address(es), host:port separated by ';' (default: $NAMESRV_ADDR)")  # fmt: skip
    p.add_argument("--json", action="store_true", default=False if top else argparse.SUPPRESS,
                   help="print JSON instead of a table")  # fmt: skip
    p.add_argument("--timeout", type=seconds, default=5.0 if top else argparse.SUPPRESS, metavar="SECONDS",
                   help="time allowed for each call (default 5)")  # fmt: skip
    add_credentials(p, default=default)


def cmd_admin(args: argparse.Namespace) -> int:
    fn: Verb | None = getattr(args, "admin_verb", None)
    if fn is None:
        raise CommandError("choose a verb: " + ", ".join(_VERBS) + " (see 'rocketq admin --help')", exit_code=2)
    addr = args.namesrv_addr or os.environ.get("NAMESRV_ADDR")
    account = credentials(args)

    async def run() -> None:
        admin = MQAdmin(addr, timeout=args.timeout, credentials=account)
        try:
            await fn(admin, args)
        finally:
            await admin.close()

    asyncio.run(run())
    return 0
