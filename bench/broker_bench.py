"""Broker benchmark: the remoting protocol's send, one-way, batch and pull paths of ``rocketq start``, against
Redis Streams in the same run at the same concurrency and batching.

What runs (127.0.0.1 only, every server and process started and stopped by this script):

- ``rocketq start`` (name server + broker, ASYNC_FLUSH, store in a temporary directory) and ``redis-server``
  with ``appendonly yes`` + ``appendfsync everysec`` (Redis's own "flush about once a second", the nearest
  to ASYNC_FLUSH), both on free ports;
- load generators in separate processes (``--procs`` at most), each an asyncio loop whose senders pipeline
  requests: rocketq senders share one connection a process (:class:`rocketq.remoting.transport.RemotingClient`,
  as a RocketMQ producer does), Redis senders take connections from redis-py's pool.

Measured for 1, 16 and 64 concurrent senders, 1 KiB bodies (with tags, a key and a unique id as properties /
fields), each for ``--seconds``:

=========  ===========================================================  ============================================
mode       rocketq                                                      Redis Streams
=========  ===========================================================  ============================================
send       SEND_MESSAGE_V2, wait for each answer                        ``XADD``, wait for each answer
oneway     SEND_MESSAGE_V2 with the one-way bit (no answer)             ``XADD`` after ``CLIENT REPLY OFF`` (no answer)
batch      SEND_BATCH_MESSAGE of ``--batch`` messages                   a pipeline of ``--batch`` ``XADD``
consume    PULL_MESSAGE of 32 with the commit-offset flag, one lane      ``XREADGROUP COUNT 32`` + ``XACK``, one lane
           a queue (8), over the whole backlog                          a stream (8), over the whole backlog
=========  ===========================================================  ============================================

send/batch: messages per second and the latency of a request (p50/p99; a batch request's for batch);
oneway: messages per second until the server has stored all of them (rocketq: sum of the queues' max
offsets; Redis: ``XLEN``); consume: messages per second. Every row also gives the server process's CPU time
(user + system, all its threads, from ``/proc``) per message: throughput on a shared machine moves with what else
runs, the CPU a message costs much less. Prints a table and writes JSON
(``bench/results/broker_bench.json``). Needs ``redis-server`` (Debian: ``apt-get install -y redis-server``)
and redis-py (``pip install -e '.[bench]'``); ``--no-redis`` runs rocketq alone.

    python bench/broker_bench.py [--seconds 4] [--senders 1,16,64] [--batch 32] [--procs 2] [--no-redis]

Delay and transactions (``--delay-tx``: ``also`` after the table above, the default; ``only``; ``skip``), on a
``rocketq start`` of its own with short delay levels (details above :func:`run_delay_tx`):

- delayed-message lateness under load: the ``send`` load above runs while delay-level and timer messages are
  sent from a process of their own and a push consumer in this process takes them; p50/p99 of due time ->
  stored copy (broker) and due time -> listener call (consumer), target consumer p99 < 100 ms;
- transactional send TPS against plain send TPS, both with the Python client at the same concurrency.

    python bench/broker_bench.py --delay-tx only [--delay-seconds 10] [--delay-rate 200] [--delay-load-senders 16]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_servers import RedisServer, RocketqServer, process_cpu_s, write_report

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "broker_bench.json"
BODY_SIZE = 1024
QUEUES = 8
TOPIC = "BrokerBench"
STREAM = "bench"
GROUP = "BenchGroup"
PULL_BATCH = 32


# -- servers ---------------------------------------------------------------------------------------------------

#: The broker.conf of the measured broker.
# diskMaxUsedSpaceRatio at RocketMQ's highest (95): on a shared disk above 75 % used the broker deletes commit-log
# files that are not expired (as RocketMQ does), and the consume run found its backlog gone (0 msg/s).
BROKER_CONF = {"brokerName": "bench-broker", "brokerClusterName": "BenchCluster", "flushDiskType": "ASYNC_FLUSH",
               "brokerRole": "ASYNC_MASTER", "brokerIP1": "127.0.0.1", "diskMaxUsedSpaceRatio": "95"}  # fmt: skip
#: The same for the forced clean, which starts at 85 % used unless told otherwise (an environment entry).
BROKER_ENV = {"rocketmq.broker.diskSpaceCleanForciblyRatio": "0.95"}


# -- load generator (runs in worker processes: python bench/broker_bench.py --worker JSON) ------------------------


def _props(prefix: str, n: int) -> dict[str, str]:
    return {"TAGS": f"Tag{n % 4}", "KEYS": f"key-{prefix}-{n}", "UNIQ_KEY": f"{prefix}{n:012X}", "WAIT": "true"}


async def _rocketq_worker(spec: dict[str, Any], go: asyncio.Future[float]) -> dict[str, Any]:
    from rocketq.common.codec import encode_batch_body
    from rocketq.common.message import Message, properties_to_string
    from rocketq.remoting.codes import RequestCode
    from rocketq.remoting.command import create_request
    from rocketq.remoting.transport import RemotingClient

    mode, batch = spec["mode"], spec["batch"]
    body = os.urandom(BODY_SIZE)
    prefix = f"7F000001{os.getpid() & 0xFFFF:04X}{spec['index']:04X}"
    client = RemotingClient(spec["addr"], connect_timeout=10)
    conn = await client.connect()
    counter = 0

    def request() -> tuple[Any, int]:
        nonlocal counter
        n = counter
        counter += 1 if mode != "batch" else batch
        fields: dict[str, object] = {"a": "BenchProducer", "b": TOPIC, "c": "TBW102", "d": 4, "e": n % QUEUES,
                                     "f": 0, "g": int(time.time() * 1000), "h": 0, "j": 0, "k": False}  # fmt: skip
        if mode == "batch":
            msgs = [Message(TOPIC, body, 0, _props(prefix, n + i)) for i in range(batch)]
            fields["i"], fields["m"] = "", True
            return create_request(RequestCode.SEND_BATCH_MESSAGE, fields, encode_batch_body(msgs)), batch
        fields["i"], fields["m"] = properties_to_string(_props(prefix, n)), False
        return create_request(RequestCode.SEND_MESSAGE_V2, fields, body), 1

    latencies: list[float] = []
    done = 0
    errors = 0
    print("ready", flush=True)
    start = await go
    deadline = start + spec["seconds"]

    # A paced load (``rate``, messages a second for the worker): each sender keeps to its share of the rate.
    interval = spec["senders"] / spec["rate"] if spec.get("rate") else 0.0

    async def sender() -> None:
        nonlocal done, errors
        next_at = time.monotonic()
        while time.time() < deadline:
            if interval:
                next_at += interval
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            req, n = request()
            if mode == "oneway":
                await conn.invoke_oneway(req)
                done += n
                continue
            t0 = time.perf_counter()
            r = await conn.invoke(req, timeout=30)
            latencies.append((time.perf_counter() - t0) * 1000)
            if r.code == 0:
                done += n
            else:
                errors += 1

    await asyncio.gather(*(sender() for _ in range(spec["senders"])))
    end = time.time()
    await client.close()
    return {"messages": done, "errors": errors, "latencies": latencies, "start": start, "end": end}


def _resp(*args: bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


async def _redis_worker(spec: dict[str, Any], go: asyncio.Future[float]) -> dict[str, Any]:
    import redis.asyncio as aioredis

    mode, batch = spec["mode"], spec["batch"]
    body = os.urandom(BODY_SIZE)
    prefix = f"7F000001{os.getpid() & 0xFFFF:04X}{spec['index']:04X}"
    host, port = spec["addr"].rsplit(":", 1)
    counter = 0
    latencies: list[float] = []
    done = 0
    errors = 0

    def fields(n: int) -> dict[str, Any]:
        p = _props(prefix, n)
        return {"body": body, "tags": p["TAGS"], "keys": p["KEYS"], "uniq": p["UNIQ_KEY"]}

    if mode == "oneway":  # raw connections with CLIENT REPLY OFF: nothing comes back, as with a one-way request
        conns = [await asyncio.open_connection(host, int(port)) for _ in range(spec["senders"])]
        for _r, w in conns:
            w.write(_resp(b"CLIENT", b"REPLY", b"OFF"))
            await w.drain()
        print("ready", flush=True)
        start = await go
        deadline = start + spec["seconds"]

        async def oneway_sender(w: asyncio.StreamWriter) -> None:
            nonlocal counter, done
            while time.time() < deadline:
                n = counter
                counter += 1
                f = fields(n)
                key = f"{STREAM}:{n % QUEUES}".encode()
                w.write(_resp(b"XADD", key, b"*", b"body", f["body"], b"tags", f["tags"].encode(), b"keys",
                              f["keys"].encode(), b"uniq", f["uniq"].encode()))  # fmt: skip
                await w.drain()
                done += 1

        await asyncio.gather(*(oneway_sender(w) for _r, w in conns))
        end = time.time()
        for _r, w in conns:
            w.close()
        return {"messages": done, "errors": 0, "latencies": [], "start": start, "end": end}

    client = aioredis.Redis(host=host, port=int(port), max_connections=spec["senders"] + 1)
    await client.ping()
    print("ready", flush=True)
    start = await go
    deadline = start + spec["seconds"]

    async def sender() -> None:
        nonlocal counter, done, errors
        while time.time() < deadline:
            n = counter
            t0 = time.perf_counter()
            try:
                if mode == "batch":
                    counter += batch
                    pipe = client.pipeline(transaction=False)
                    for i in range(batch):
                        pipe.xadd(f"{STREAM}:{n % QUEUES}", fields(n + i))
                    await pipe.execute()
                    done += batch
                else:
                    counter += 1
                    await client.xadd(f"{STREAM}:{n % QUEUES}", fields(n))
                    done += 1
            except Exception:
                errors += 1
            latencies.append((time.perf_counter() - t0) * 1000)

    await asyncio.gather(*(sender() for _ in range(spec["senders"])))
    end = time.time()
    await client.aclose()
    return {"messages": done, "errors": errors, "latencies": latencies, "start": start, "end": end}


async def _rocketq_consume(spec: dict[str, Any], go: asyncio.Future[float]) -> dict[str, Any]:
    from rocketq.remoting.codes import RequestCode
    from rocketq.remoting.command import create_request
    from rocketq.remoting.transport import RemotingClient

    client = RemotingClient(spec["addr"], connect_timeout=10)
    conn = await client.connect()
    ends: list[int] = spec["ends"]
    print("ready", flush=True)
    start = await go
    deadline = start + spec["seconds"]
    got = 0
    failed: list[str] = []  # pulls that ended a lane before its queue's end (an answer other than FOUND)

    async def lane(queue_id: int) -> None:
        nonlocal got
        offset = 0
        while offset < ends[queue_id] and time.time() < deadline:
            fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": queue_id, "queueOffset": offset,
                      "maxMsgNums": PULL_BATCH, "sysFlag": 0x1 | 0x4, "commitOffset": offset,
                      "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0,
                      "expressionType": "TAG"}  # fmt: skip
            r = await conn.invoke(create_request(RequestCode.PULL_MESSAGE, fields), timeout=30)
            nxt = int((r.ext_fields or {}).get("nextBeginOffset", offset))
            if r.code != 0 or nxt <= offset:
                failed.append(f"queue {queue_id} at {offset}: code {r.code} {r.remark or ''}".strip())
                break
            got += nxt - offset
            offset = nxt

    await asyncio.gather(*(lane(q) for q in range(QUEUES)))
    end = time.time()
    await client.close()
    if failed:
        print(f"rocketq consume: {len(failed)} lane(s) stopped early: {'; '.join(failed)}", file=sys.stderr)
    return {"messages": got, "errors": len(failed), "latencies": [], "start": start, "end": end}


async def _redis_consume(spec: dict[str, Any], go: asyncio.Future[float]) -> dict[str, Any]:
    import redis.asyncio as aioredis

    host, port = spec["addr"].rsplit(":", 1)
    client = aioredis.Redis(host=host, port=int(port), max_connections=QUEUES + 1)
    for q in range(QUEUES):
        await client.xgroup_create(f"{STREAM}:{q}", GROUP, id="0", mkstream=True)
    ends: list[int] = spec["ends"]
    print("ready", flush=True)
    start = await go
    deadline = start + spec["seconds"]
    got = 0

    async def lane(q: int) -> None:
        nonlocal got
        key = f"{STREAM}:{q}"
        seen = 0
        while seen < ends[q] and time.time() < deadline:
            answer = await client.xreadgroup(GROUP, f"c{q}", {key: ">"}, count=PULL_BATCH)
            if not answer:
                break
            ids = [entry_id for entry_id, _fields in answer[0][1]]
            await client.xack(key, GROUP, *ids)
            seen += len(ids)
        got += seen

    await asyncio.gather(*(lane(q) for q in range(QUEUES)))
    end = time.time()
    await client.aclose()
    return {"messages": got, "errors": 0, "latencies": [], "start": start, "end": end}


def worker_main(spec: dict[str, Any]) -> None:
    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        go: asyncio.Future[float] = loop.create_future()

        async def wait_go() -> None:
            line = await asyncio.to_thread(sys.stdin.readline)
            start = float(line)
            # Every worker starts at the same instant: the rates are messages over (end - start).
            await asyncio.sleep(max(0.0, start - time.time()))
            go.set_result(start)

        waiter = asyncio.create_task(wait_go())
        table = {("rocketq", "consume"): _rocketq_consume, ("redis", "consume"): _redis_consume}
        default = _rocketq_worker if spec["system"] == "rocketq" else _redis_worker
        fn = table.get((spec["system"], spec["mode"]), default)
        try:
            result = await fn(spec, go)
        finally:
            waiter.cancel()
        # Printed before the loop closes: after a uvloop loop is closed, a large write to a pipe can come out short.
        print("result " + json.dumps(result), flush=True)
        return result

    from rocketq.remoting import eventloop

    # The same loop as the broker's (uvloop when installed, unless ROCKETQ_UVLOOP=0), for both systems' clients.
    eventloop.run(main())


# -- orchestration ------------------------------------------------------------------------------------------


def run_workers(specs: list[dict[str, Any]], timeout: float) -> list[dict[str, Any]]:
    """Start one process a spec, wait until all are connected, start them together, collect their results."""
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(s)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for s in specs]  # fmt: skip
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"worker did not get ready: {line!r}")
        go = time.time() + 0.2
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(f"{go}\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            line = next(x for x in out.splitlines() if x.startswith("result "))
            results.append(json.loads(line[len("result "):]))
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)


def split(senders: int, procs: int) -> list[int]:
    n = max(1, min(procs, senders))
    return [senders // n + (1 if i < senders % n else 0) for i in range(n)]


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[k]


async def rocketq_stored(addr: str) -> int:
    from rocketq.remoting.codes import RequestCode
    from rocketq.remoting.command import create_request
    from rocketq.remoting.transport import RemotingClient

    async with RemotingClient(addr) as c:
        total = 0
        for q in range(QUEUES):
            r = await c.invoke(create_request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": q}))
            total += int((r.ext_fields or {}).get("offset", 0))
        return total


def rocketq_queue_ends(addr: str) -> list[int]:
    from rocketq.remoting.codes import RequestCode
    from rocketq.remoting.command import create_request
    from rocketq.remoting.transport import RemotingClient

    async def ends() -> list[int]:
        async with RemotingClient(addr) as c:
            out = []
            for q in range(QUEUES):
                r = await c.invoke(create_request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": q}))
                out.append(int((r.ext_fields or {}).get("offset", 0)))
            return out

    return asyncio.run(ends())


def redis_stored(port: int) -> int:
    import redis

    c = redis.Redis(host="127.0.0.1", port=port)
    try:
        return sum(int(c.xlen(f"{STREAM}:{q}")) for q in range(QUEUES))
    finally:
        c.close()


def wait_stored(count_fn: Any, target: int, start: float, cap_s: float = 60.0) -> tuple[int, float]:
    """Poll the server's stored count until it reaches ``target`` (or stops growing); (count, seconds)."""
    last, last_change = count_fn(), time.time()
    deadline = time.time() + cap_s
    while last < target and time.time() < deadline:
        time.sleep(0.02)
        now = count_fn()
        if now != last:
            last, last_change = now, time.time()
        elif time.time() - last_change > 3.0:
            break
    return last, last_change - start


def measure(system: str, mode: str, senders: int, args: argparse.Namespace, addr: str,
            stored_fn: Any, server_pid: int | None = None) -> dict[str, Any]:  # fmt: skip
    """One run of *mode* with *senders*: throughput, latency and, given the server's pid, the server's CPU time per
    message (steadier than throughput on a shared machine: it does not count time the server waited for a core)."""
    batch = args.batch if mode == "batch" else 1
    cpu_before = process_cpu_s(server_pid)
    before = stored_fn() if mode == "oneway" else 0
    rate = getattr(args, "load_rate", None)  # messages a second in all, or as fast as they go
    specs = [{"system": system, "mode": mode, "senders": n, "batch": batch, "addr": addr, "seconds": args.seconds,
              "index": i, "rate": rate * n / senders if rate else None}
             for i, n in enumerate(split(senders, args.procs))]  # fmt: skip
    results = run_workers(specs, timeout=args.seconds + 120)
    start = min(r["start"] for r in results)
    end = max(r["end"] for r in results)
    sent = sum(r["messages"] for r in results)
    latencies = [x for r in results for x in r["latencies"]]
    row: dict[str, Any] = {"system": system, "mode": mode, "senders": senders, "batch": batch,
                           "processes": len(specs), "errors": sum(r["errors"] for r in results)}  # fmt: skip
    if mode == "oneway":
        stored, seconds = wait_stored(stored_fn, before + sent, start)
        row.update(messages=stored - before, sent=sent, seconds=seconds)
    else:
        row.update(messages=sent, seconds=end - start)
    row["msgs_per_s"] = row["messages"] / row["seconds"] if row["seconds"] > 0 else 0.0
    row["mb_per_s"] = row["msgs_per_s"] * BODY_SIZE / 1e6
    row["p50_ms"] = percentile(latencies, 50)
    row["p99_ms"] = percentile(latencies, 99)
    cpu_after = process_cpu_s(server_pid)
    row["server_cpu_us_per_msg"] = (cpu_after - cpu_before) / row["messages"] * 1e6 \
        if cpu_before is not None and cpu_after is not None and row["messages"] else None  # fmt: skip
    return row


def measure_consume(system: str, args: argparse.Namespace, addr: str, ends: list[int],
                    server_pid: int | None = None) -> dict[str, Any]:  # fmt: skip
    spec = {"system": system, "mode": "consume", "senders": QUEUES, "batch": PULL_BATCH, "addr": addr,
            "seconds": args.consume_seconds, "index": 0, "ends": ends}  # fmt: skip
    cpu_before = process_cpu_s(server_pid)
    r = run_workers([spec], timeout=args.consume_seconds + 120)[0]
    cpu_after = process_cpu_s(server_pid)
    seconds = r["end"] - r["start"]
    rate = r["messages"] / seconds if seconds > 0 else 0.0
    cpu = (cpu_after - cpu_before) / r["messages"] * 1e6 \
        if cpu_before is not None and cpu_after is not None and r["messages"] else None  # fmt: skip
    return {"system": system, "mode": "consume", "senders": QUEUES, "batch": PULL_BATCH, "processes": 1,
            "errors": r["errors"], "messages": r["messages"], "seconds": seconds, "msgs_per_s": rate,
            "mb_per_s": rate * BODY_SIZE / 1e6, "p50_ms": None, "p99_ms": None,
            "server_cpu_us_per_msg": cpu}  # fmt: skip


def create_topic(namesrv: str, broker: str) -> None:
    from rocketq.client.admin import MQAdmin

    async def create() -> None:
        async with MQAdmin(namesrv) as admin:
            await admin.create_topic(topic=TOPIC, broker_addr=broker, read_queue_nums=QUEUES,
                                     write_queue_nums=QUEUES)  # fmt: skip

    asyncio.run(create())


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    base = {(r["mode"], r["senders"]): r for r in rows if r["system"] == "redis"}
    head = (f"{'system':<8} {'mode':<8} {'senders':>7} {'batch':>5} {'msgs/s':>10} {'MB/s':>7} {'p50 ms':>8} "
            f"{'p99 ms':>8} {'vs redis':>8} {'srv us/msg':>10}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for r in rows:
        ref = base.get((r["mode"], r["senders"]))
        ratio = f"{r['msgs_per_s'] / ref['msgs_per_s']:.2f}x" if r["system"] == "rocketq" and ref and \
            ref["msgs_per_s"] else ""  # fmt: skip
        print(f"{r['system']:<8} {r['mode']:<8} {r['senders']:>7} {r['batch']:>5} {r['msgs_per_s']:>10,.0f} "
              f"{r['mb_per_s']:>7.1f} {_fmt(r['p50_ms'], '8.2f'):>8} {_fmt(r['p99_ms'], '8.2f'):>8} {ratio:>8} "
              f"{_fmt(r.get('server_cpu_us_per_msg'), '10.1f'):>10}"
              + (f"  errors={r['errors']}" if r["errors"] else ""))  # fmt: skip


# -- delay and transaction section (--delay-tx) -----------------------------------------------------------------
#
# Its own `rocketq start` (bench_servers.RocketqServer, with short delay levels and a 1 ms timer precision) in a
# temporary directory, so that its figures do not depend on what the throughput section left in a store:
#
# 1. lateness under load: the `send` load above (worker processes, --delay-load-senders senders, as fast as they
#    go, or paced at --delay-load-rate messages a second in all) runs while a process of its own sends
#    --delay-rate messages a second with delay level 1 or 2 (1 s, 2 s) and as many with TIMER_DELAY_MS
#    500..2500, and a push consumer alone in this process takes both topics (so that what is measured is the
#    broker's delivery, not a consumer sharing its loop with a producer). The load starts 2 s before the delayed
#    sends and lasts until the last of them is due. After the broker stops, its store is read back: the due time
#    of a message is its parked record's store time + the level's delay; for a timer message its TIMER_OUT_MS, or
#    the parked record's store time (TIMER_ENQUEUE_MS) if that is later (with --timer-precision-ms 1000, a 500 ms
#    delay rounded down to the second can fall before the message is even stored: it is delivered at once, as
#    5.x does, and that is no lateness of the delivery). Broker lateness = the delivered copy's store time - due;
#    consumer lateness = this process's clock when the listener gets the message - due (the same machine's
#    clock). Target: consumer p99 < 100 ms.
# 2. transactional vs plain send: --tx-senders concurrent sends of the Python client for --delay-seconds each,
#    Producer.send, then TransactionProducer.send_message_in_transaction (the local transaction commits at once:
#    half message, END_TRANSACTION, committed copy and op record on the broker).

DELAY_CONF = {"messageDelayLevel": "1s 2s 3s " + " ".join(["1h"] * 15), "timerPrecisionMs": "1",
              "transactionCheckInterval": "600000"}  # fmt: skip
DELAY_LEVEL_MS = {1: 1000, 2: 2000}
TIMER_DELAY_MS = (500, 2500)
DELAY_TOPIC = "BenchDelay"
TIMER_BENCH_TOPIC = "BenchTimer"
TX_TOPIC = "BenchTx"
DELAY_QUEUES = 4
LOAD_WARMUP_S = 2.0


async def _send_delayed(namesrv: str, rate: float, seconds: float, start_at: float) -> tuple[int, int]:
    """From ``start_at`` (epoch s), delay-level and timer messages at ``rate`` a second each for ``seconds``; how
    many sends succeeded and how many failed (a client timeout under load: the message may be stored or not)."""
    import random

    from rocketq.client import ClientConfig, Producer, new_message

    body = os.urandom(BODY_SIZE)
    sends: list[asyncio.Task[Any]] = []
    async with Producer("BenchDelayPG", config=ClientConfig(namesrv_addr=namesrv, instance_name="bench-delayer")) as p:
        await p.send(new_message(TOPIC, body))  # routes and connection before the clock starts
        await asyncio.sleep(max(0.0, start_at - time.time()))
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < seconds:
            i += 1
            delay_ms = random.randint(*TIMER_DELAY_MS)
            timer = {"TIMER_DELAY_MS": str(delay_ms)}
            for msg in (new_message(DELAY_TOPIC, body, delay_level=1 + i % 2),
                        new_message(TIMER_BENCH_TOPIC, body, properties=timer)):  # fmt: skip
                sends.append(asyncio.ensure_future(p.send(msg)))
            await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
        results = await asyncio.gather(*sends, return_exceptions=True)
    ok = sum(1 for r in results if getattr(r, "ok", False))
    return ok, len(results) - ok


def _send_load(senders: int, load_args: argparse.Namespace, broker: str) -> dict[str, Any]:
    """The send load of the lateness run (in a process of its own)."""
    return measure("rocketq", "send", senders, load_args, broker, _nothing_stored)


def _nothing_stored() -> int:
    return 0


def _delayed_sender_process(namesrv: str, rate: float, seconds: float, start_at: float, pipe: Any) -> None:
    """The delayed sends, in a process of their own so that the consumer's process only consumes."""
    pipe.send(asyncio.run(_send_delayed(namesrv, rate, seconds, start_at)))


async def _delay_lateness_run(args: argparse.Namespace, rq: RocketqServer) -> dict[str, Any]:
    import multiprocessing

    from rocketq.client import ClientConfig, ConsumeConcurrentlyStatus, ConsumeFromWhere, Producer, PushConsumer

    cfg = ClientConfig(namesrv_addr=rq.namesrv, instance_name="bench-delay")
    received: dict[str, float] = {}

    async def listener(msgs: list[Any], _context: Any) -> ConsumeConcurrentlyStatus:
        now = time.time() * 1000
        for m in msgs:
            received[m.uniq_key] = now
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with Producer("BenchDelayAdmin", config=cfg) as admin:
        for topic in (DELAY_TOPIC, TIMER_BENCH_TOPIC):
            await admin.create_topic(topic, DELAY_QUEUES)
    consumer = PushConsumer("BenchDelayCG", config=cfg.copy(instance_name="bench-delay-consumer"), listener=listener,
                            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe(DELAY_TOPIC)
    consumer.subscribe(TIMER_BENCH_TOPIC)
    ctx = multiprocessing.get_context("spawn")
    pipe, child_pipe = ctx.Pipe()
    async with consumer:
        await asyncio.sleep(2.0)  # the first rebalance assigns the queues
        longest = max(max(DELAY_LEVEL_MS.values()), TIMER_DELAY_MS[1]) / 1000.0
        load_args = argparse.Namespace(**{**vars(args), "seconds": LOAD_WARMUP_S + args.delay_seconds + longest,
                                          "load_rate": args.delay_load_rate})  # fmt: skip
        # The load's driver in a process of its own too, so that the consumer is alone in this one (a thread here
        # shared its GIL: reading back the workers' latencies at the end of the load).
        load_pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx)
        load = asyncio.get_running_loop().run_in_executor(load_pool, _send_load, args.delay_load_senders, load_args,
                                                          rq.broker)  # fmt: skip
        # The load's processes start and connect (about a second), then run LOAD_WARMUP_S before the delayed sends.
        sender = ctx.Process(target=_delayed_sender_process, args=(rq.namesrv, args.delay_rate, args.delay_seconds,
                             time.time() + 1.0 + LOAD_WARMUP_S, child_pipe), daemon=True)  # fmt: skip
        sender.start()
        try:
            ready = await asyncio.to_thread(pipe.poll, args.delay_seconds + LOAD_WARMUP_S + 120)
            if not ready:
                raise RuntimeError("the delayed sender did not finish")
            sent, failed = pipe.recv()
        finally:
            # Off the loop: the sender takes a few hundred ms to exit, while delayed messages still come due and the
            # consumer on this loop must take them (a join here showed up as 200-400 ms of consumer lateness).
            await asyncio.to_thread(sender.join, 10)
            if sender.is_alive():
                sender.kill()
        try:
            load_row = await load
        finally:
            load_pool.shutdown()
        deadline = time.monotonic() + 15.0
        while len(received) < sent and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
    return {"sent": sent, "failed": failed, "received": received, "load": load_row}


def _store_lateness(store_dir: Path, received: dict[str, float]) -> dict[str, Any]:
    """Read the stopped broker's store: due time, delivered copy's store time and receipt of each message."""
    from rocketq.common.codec import decode_record
    from rocketq.common.mixall import RMQ_SYS_SCHEDULE_TOPIC
    from rocketq.store.message_store import MessageStore
    from rocketq.store.store_config import MessageStoreConfig

    cfg = MessageStoreConfig(store_path_root_dir=str(store_dir), message_delay_level=DELAY_CONF["messageDelayLevel"])

    def records(store: MessageStore, topic: str, queues: range) -> list[Any]:
        out = []
        for q in queues:
            offset = 0
            while True:
                r = store.get_message("bench", topic, q, offset, 512)
                if not r.messages:
                    break
                out += [decode_record(m) for m in r.messages]
                offset = r.next_begin_offset
        return out

    result: dict[str, Any] = {}
    with MessageStore(cfg, read_only=True) as store:
        parked = {m.uniq_key: m.store_timestamp + DELAY_LEVEL_MS[m.queue_id + 1]
                  for m in records(store, RMQ_SYS_SCHEDULE_TOPIC, range(len(DELAY_LEVEL_MS)))}  # fmt: skip
        for kind, topic in (("delay level", DELAY_TOPIC), ("timer", TIMER_BENCH_TOPIC)):
            broker: list[float] = []
            consumer: list[float] = []
            for m in records(store, topic, range(DELAY_QUEUES)):
                if kind == "delay level":
                    due = parked.get(m.uniq_key)
                else:
                    due = max(int(m.properties["TIMER_OUT_MS"]), int(m.properties["TIMER_ENQUEUE_MS"]))
                if due is None:
                    continue
                broker.append(m.store_timestamp - due)
                if m.uniq_key in received:
                    consumer.append(received[m.uniq_key] - due)
            result[kind] = {"delivered": len(broker), "consumed": len(consumer),
                            "broker_p50_ms": percentile(broker, 50), "broker_p99_ms": percentile(broker, 99),
                            "broker_max_ms": max(broker, default=None),
                            "consumer_p50_ms": percentile(consumer, 50), "consumer_p99_ms": percentile(consumer, 99),
                            "consumer_max_ms": max(consumer, default=None)}  # fmt: skip
    return result


async def _tx_vs_plain_run(args: argparse.Namespace, namesrv: str) -> dict[str, Any]:
    from rocketq.client import ClientConfig, Producer, new_message
    from rocketq.client.transaction_producer import LocalTransactionState, TransactionProducer

    cfg = ClientConfig(namesrv_addr=namesrv, instance_name="bench-tx")
    body = os.urandom(BODY_SIZE)

    async def drive(send: Any) -> dict[str, Any]:
        deadline = time.monotonic() + args.delay_seconds
        latencies: list[float] = []

        async def sender() -> None:
            while time.monotonic() < deadline:
                t0 = time.perf_counter()
                await send()
                latencies.append((time.perf_counter() - t0) * 1000)

        start = time.monotonic()
        await asyncio.gather(*(sender() for _ in range(args.tx_senders)))
        return {"msgs_per_s": len(latencies) / (time.monotonic() - start), "p50_ms": percentile(latencies, 50),
                "p99_ms": percentile(latencies, 99)}  # fmt: skip

    async with Producer("BenchPlainPG", config=cfg) as plain:
        await plain.create_topic(TX_TOPIC, DELAY_QUEUES)
        await plain.send(new_message(TX_TOPIC, body))
        plain_row = await drive(lambda: plain.send(new_message(TX_TOPIC, body)))
    tx = TransactionProducer("BenchTxPG", config=cfg.copy(instance_name="bench-tx-producer"),
                             execute=lambda _m, _a: LocalTransactionState.COMMIT_MESSAGE,
                             check=lambda _m: LocalTransactionState.COMMIT_MESSAGE)  # fmt: skip
    async with tx:
        await tx.send_message_in_transaction(new_message(TX_TOPIC, body))
        tx_row = await drive(lambda: tx.send_message_in_transaction(new_message(TX_TOPIC, body)))
    ratio = tx_row["msgs_per_s"] / plain_row["msgs_per_s"] if plain_row["msgs_per_s"] else None
    return {"senders": args.tx_senders, "plain": plain_row, "transactional": tx_row, "tx_vs_plain": ratio}


def run_delay_tx(args: argparse.Namespace) -> dict[str, Any]:
    """The delay and transaction section: its own broker, the lateness run, the send comparison, the store read."""
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="broker-bench-delay-") as tmp:
        conf = {**DELAY_CONF, "timerPrecisionMs": str(args.timer_precision_ms)}
        rq = RocketqServer(Path(tmp), {**BROKER_CONF, **conf}, env=BROKER_ENV)
        rq.start()
        try:
            create_topic(rq.namesrv, rq.broker)  # the load generator's topic
            run = asyncio.run(_delay_lateness_run(args, rq))
            send = asyncio.run(_tx_vs_plain_run(args, rq.namesrv))
        finally:
            rq.stop()
        lateness = _store_lateness(Path(tmp) / "store", run["received"])
    load = run["load"]
    return {"config": {"seconds": args.delay_seconds, "delay_rate": args.delay_rate, **conf,
                       "timer_delay_ms": list(TIMER_DELAY_MS), "load_rate": args.delay_load_rate},
            "load": {k: load[k] for k in ("senders", "processes", "messages", "msgs_per_s", "p50_ms", "p99_ms",
                                          "errors")},
            "delayed_sent": run["sent"], "delayed_send_failed": run["failed"],
            "delayed_consumed": len(run["received"]), "lateness": lateness,
            "send": send, "machine_loadavg_1m": {"before": load_before[0], "after": os.getloadavg()[0]},
            "broker_log": {"counts": rq.log_counts, "last": rq.log_tail}}  # fmt: skip


def print_delay_tx(r: dict[str, Any]) -> None:
    load = r["load"]
    paced = r["config"].get("load_rate")
    pace = f"paced at {paced:,.0f} msg/s" if paced else "as fast as they go"
    print(f"\ndelayed-message lateness (ms after the due time) under a send load of {load['msgs_per_s']:,.0f} msg/s "
          f"({load['senders']} senders, {pace}, p99 {_fmt(load['p99_ms'], '.1f')} ms); {r['delayed_sent']} delayed "
          "sent "
          f"({r['delayed_send_failed']} sends failed), "
          f"{r['delayed_consumed']} consumed; machine load average {r['machine_loadavg_1m']['before']:.1f} before, "
          f"{r['machine_loadavg_1m']['after']:.1f} after")  # fmt: skip
    head = (f"{'kind':<12} {'msgs':>6} {'broker p50':>10} {'broker p99':>10} {'max':>6} {'consumer p50':>12} "
            f"{'consumer p99':>12} {'max':>6}")  # fmt: skip
    print(head)
    print("-" * len(head))
    for kind, x in r["lateness"].items():
        print(f"{kind:<12} {x['delivered']:>6} {_fmt(x['broker_p50_ms'], '10.1f')} {_fmt(x['broker_p99_ms'], '10.1f')} "
              f"{_fmt(x['broker_max_ms'], '6.0f')} {_fmt(x['consumer_p50_ms'], '12.1f')} "
              f"{_fmt(x['consumer_p99_ms'], '12.1f')} {_fmt(x['consumer_max_ms'], '6.0f')}")  # fmt: skip
    logged = r["broker_log"]
    if any(logged["counts"].values()):
        print(f"broker log: {logged['counts']['WARNING']} warnings, {logged['counts']['ERROR']} errors; last: "
              f"{logged['last'][-1]}")  # fmt: skip
    s = r["send"]
    print(f"\nPython client, {s['senders']} concurrent sends")
    head = f"{'send':<14} {'msgs/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs plain':>8}"
    print(head)
    print("-" * len(head))
    for name, ratio in (("plain", 1.0), ("transactional", s["tx_vs_plain"])):
        x = s[name]
        print(f"{name:<14} {x['msgs_per_s']:>8,.0f} {_fmt(x['p50_ms'], '8.1f')} {_fmt(x['p99_ms'], '8.1f')} "
              f"{_fmt(ratio, '7.2f')}x")  # fmt: skip


def delay_tx_main(args: argparse.Namespace) -> int:
    """``--delay-tx only``: the delay and transaction section alone, written as the full run writes it."""
    result = run_delay_tx(args)
    print_delay_tx(result)
    write_report(args.out, "broker_bench", {
        "config": {"body_size": BODY_SIZE, "queues": QUEUES, "procs": args.procs, "rocketq_flush": "ASYNC_FLUSH"},
        "rows": [], "delay_tx": result})  # fmt: skip
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each send run (4)")
    ap.add_argument("--consume-seconds", type=float, default=10.0, help="cap of each consume run (10)")
    ap.add_argument("--senders", default="1,16,64", help="concurrent senders (1,16,64)")
    ap.add_argument("--modes", default="send,oneway,batch", help="send modes (send,oneway,batch)")
    ap.add_argument("--batch", type=int, default=32, help="messages per batch request (32)")
    ap.add_argument("--procs", type=int, default=2, help="load-generator processes at most (2)")
    ap.add_argument("--no-redis", action="store_true", help="skip the Redis Streams baseline")
    ap.add_argument("--out", type=Path, default=RESULTS, help=f"JSON results ({RESULTS.relative_to(ROOT)})")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--delay-tx", choices=("also", "only", "skip"), default="also",
                    help="the delay-lateness and transactional-send section: after the others, alone, or not (also)")
    ap.add_argument("--delay-seconds", type=float, default=10.0, help="delay-tx: length of each run (10)")
    ap.add_argument("--delay-rate", type=float, default=200.0,
                    help="delay-tx: delay-level sends a second, and as many timer sends (200)")
    ap.add_argument("--delay-load-senders", type=int, default=16, help="delay-tx: senders of the send load (16)")
    ap.add_argument("--delay-load-rate", type=float, default=None,
                    help="delay-tx: messages a second of the send load, in all (default: as fast as the senders go)")
    ap.add_argument("--tx-senders", type=int, default=32, help="delay-tx: concurrent plain/transactional sends (32)")
    ap.add_argument("--timer-precision-ms", type=int, default=1,
                    help="delay-tx: timerPrecisionMs (1; at 5.x's 1000 a second's timer messages come due at once)")
    args = ap.parse_args()
    if args.worker:
        worker_main(json.loads(args.worker))
        return 0
    if args.delay_tx == "only":
        return delay_tx_main(args)
    senders = [int(x) for x in args.senders.split(",") if x.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not args.no_redis:
        try:
            import redis
        except ImportError:
            raise SystemExit("redis-py is missing: pip install -e '.[bench]' (or run with --no-redis)") from None
        if shutil.which("redis-server") is None:
            raise SystemExit("redis-server not found: apt-get install -y redis-server (or run with --no-redis)")

    rows: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="broker-bench-") as tmp:
        work = Path(tmp)
        (work / "rocketq").mkdir()
        (work / "redis").mkdir()
        rq = RocketqServer(work / "rocketq", BROKER_CONF, env=BROKER_ENV)
        rd = None if args.no_redis else RedisServer(work / "redis", appendfsync="everysec")
        old_term = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        try:
            rq.start()
            create_topic(rq.namesrv, rq.broker)
            if rd is not None:
                rd.start()
                meta["redis_version"] = rd.version
            rq_count = lambda: asyncio.run(rocketq_stored(rq.broker))  # noqa: E731
            rq_pid = rq.proc.pid if rq.proc is not None else None
            rd_pid = rd.proc.pid if rd is not None and rd.proc is not None else None
            # Warm-up (not reported): connections, code paths, the first mapped files.
            measure("rocketq", "send", 16, argparse.Namespace(**{**vars(args), "seconds": 1.5}), rq.broker, rq_count)
            for mode in modes:
                for n in senders:
                    for system in ("rocketq", "redis"):
                        if system == "redis" and rd is None:
                            continue
                        if system == "rocketq":
                            row = measure("rocketq", mode, n, args, rq.broker, rq_count, rq_pid)
                        else:
                            assert rd is not None
                            row = measure("redis", mode, n, args, f"127.0.0.1:{rd.port}",
                                          lambda: redis_stored(rd.port), rd_pid)  # type: ignore[union-attr]  # fmt: skip
                        rows.append(row)
                        print(f"  {system:<8} {mode:<7} {n:>3} senders: {row['msgs_per_s']:>10,.0f} msg/s", flush=True)
            ends = rocketq_queue_ends(rq.broker)
            rows.append(measure_consume("rocketq", args, rq.broker, ends, rq_pid))
            if rd is not None:
                import redis

                c = redis.Redis(host="127.0.0.1", port=rd.port)
                rends = [int(c.xlen(f"{STREAM}:{q}")) for q in range(QUEUES)]
                c.close()
                rows.append(measure_consume("redis", args, f"127.0.0.1:{rd.port}", rends, rd_pid))
        finally:
            signal.signal(signal.SIGTERM, old_term)
            rq.stop()
            if rd is not None:
                rd.stop()
    print()
    print_table(rows)
    delay_tx = run_delay_tx(args) if args.delay_tx == "also" else None
    if delay_tx is not None:
        print_delay_tx(delay_tx)
    write_report(args.out, "broker_bench", {
        "config": {"body_size": BODY_SIZE, "queues": QUEUES, "seconds": args.seconds, "batch": args.batch,
                   "procs": args.procs, "rocketq_flush": "ASYNC_FLUSH",
                   "redis_persistence": "appendonly yes, appendfsync everysec", **meta},
        "rows": rows,
        **({"delay_tx": delay_tx} if delay_tx is not None else {}),
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
