"""End-to-end client benchmark: produce → consume through ``rocketq start``, with Redis Streams as the baseline.

What runs (everything on 127.0.0.1, separate processes):

- ``rocketq start`` (name server + broker, store in a temporary directory) and ``redis-server`` (no
  persistence), both on free ports, started and stopped by this script;
- ``--producers`` producer processes and ``--consumers`` consumer processes for each system:
  rocketq: ``rocketq.client.Producer.send_batch`` of ``--batch`` 1 KiB messages a request (``--inflight``
  requests in flight a producer) into a topic of ``--queues`` queues, ``PushConsumer`` members of one group
  (clustering); Redis: a pipeline of ``--batch`` ``XADD`` a round trip, ``XREADGROUP COUNT <batch>
  BLOCK`` + ``XACK`` by members of one consumer group: the same batching on both sides.

Two phases per system:

1. peak: producers send as fast as they can for ``--seconds``; throughput = messages / (last consumed −
   first sent);
2. half load: producers paced at half of rocketq's peak rate (the same offered load for both systems) for
   ``--seconds``; born-to-consume latency p50/p99 = consumer clock − the producer's clock written into each
   body just before sending.

Each phase also gives the CPU time per message consumed of the server process (all its threads), of the producers
and of the consumers (each summed over its processes): throughput on a shared machine moves with what else runs,
the CPU a message costs much less, and the three say where the two cores go.

Prints a table and writes ``bench/results/client_bench.json``. Needs ``redis-server`` (Debian
``redis-server``) and redis-py (``pip install -e '.[bench]'``).

    python bench/client_bench.py --producers 2 --consumers 2 --batch 32 --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_servers import RedisServer, RocketqServer, process_cpu_s, write_report

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "client_bench.json"
BODY_SIZE = 1024
TOPIC = "BenchTopic"
GROUP = "BenchGroup"
STREAM = "bench"
_STAMP = struct.Struct(">qq")  # born time (ns), sequence


# -- workers (separate processes) --------------------------------------------------------------------------


def make_body(seq: int) -> bytes:
    return _STAMP.pack(time.time_ns(), seq) + b"x" * (BODY_SIZE - _STAMP.size)


def pace(start: float, sent: int, rate: float | None) -> float:
    """Seconds to wait so that ``sent`` messages since ``start`` do not exceed ``rate`` msg/s."""
    if not rate:
        return 0.0
    return max(0.0, start + sent / rate - time.monotonic())


def rocketq_producer(namesrv: str, index: int, args: dict[str, Any], go_at: float, rate: float | None,
                     out: Any) -> None:  # fmt: skip
    from rocketq.client import Producer, new_message

    async def main() -> None:
        async with Producer(f"BenchProducer{index}", namesrv, send_timeout=10) as producer:
            mqs = await producer.fetch_publish_message_queues(TOPIC)
            await asyncio.sleep(max(0.0, go_at - time.time()))
            cpu0 = time.process_time()
            start = time.monotonic()
            deadline = start + args["seconds"]
            sent = 0
            seq = index << 40
            lock = asyncio.Lock()

            async def lane(lane_no: int) -> None:
                nonlocal sent, seq
                q = lane_no
                while time.monotonic() < deadline:
                    async with lock:
                        delay = pace(start, sent, rate)
                        sent += args["batch"]
                        first = seq
                        seq += args["batch"]
                    if delay:
                        await asyncio.sleep(delay)
                    msgs = [new_message(TOPIC, make_body(first + i)) for i in range(args["batch"])]
                    mq = mqs[q % len(mqs)]
                    q += args["inflight"]
                    if args["batch"] > 1:
                        await producer.send_batch(msgs, queue=mq)
                    else:
                        await producer.send(msgs[0], queue=mq)

            await asyncio.gather(*(lane(i + index) for i in range(args["inflight"])))
            out.put(("producer", index, sent, start, time.monotonic(), time.process_time() - cpu0))

    asyncio.run(main())


def rocketq_consumer(namesrv: str, index: int, args: dict[str, Any], counter: Any, stop: Any, ready: Any,
                     out: Any) -> None:  # fmt: skip
    from rocketq.client import ConsumeFromWhere, PushConsumer

    latencies: list[float] = []
    count = 0
    last = 0.0

    async def listener(msgs: list[Any], context: Any) -> None:
        nonlocal count, last
        now = time.time_ns()
        for m in msgs:
            latencies.append((now - _STAMP.unpack_from(m.body)[0]) / 1e6)
        count += len(msgs)
        last = time.monotonic()
        with counter.get_lock():
            counter.value += len(msgs)

    async def main() -> None:
        consumer = PushConsumer(GROUP, namesrv, instance_name=f"bench-c{index}", listener=listener,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                                consume_message_batch_max_size=args["batch"], pull_batch_size=max(32, args["batch"]),
                                consume_thread_nums=4)  # fmt: skip
        consumer.config.rebalance_interval = 1.0
        consumer.subscribe(TOPIC)
        async with consumer:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                mine = [mq for mq in consumer.assignment() if mq.topic == TOPIC]
                if mine and len(mine) <= args["queues"] // args["consumers"] + 1:
                    break
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)
            cpu0 = time.process_time()
            ready.release()
            while not stop.is_set():
                await asyncio.sleep(0.05)
            cpu = time.process_time() - cpu0
        out.put(("consumer", index, count, last, latencies, cpu))

    asyncio.run(main())


def redis_producer(port: int, index: int, args: dict[str, Any], go_at: float, rate: float | None, out: Any) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    time.sleep(max(0.0, go_at - time.time()))
    cpu0 = time.process_time()
    start = time.monotonic()
    deadline = start + args["seconds"]
    sent = 0
    seq = index << 40
    import threading

    lock = threading.Lock()

    def lane() -> None:
        nonlocal sent, seq
        conn = redis.Redis(host="127.0.0.1", port=port)
        while time.monotonic() < deadline:
            with lock:
                delay = pace(start, sent, rate)
                sent += args["batch"]
                first = seq
                seq += args["batch"]
            if delay:
                time.sleep(delay)
            pipe = conn.pipeline(transaction=False)
            for i in range(args["batch"]):
                pipe.xadd(STREAM, {"b": make_body(first + i)}, maxlen=200_000, approximate=True)
            pipe.execute()

    threads = [threading.Thread(target=lane) for _ in range(args["inflight"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    out.put(("producer", index, sent, start, time.monotonic(), time.process_time() - cpu0))


def redis_consumer(port: int, index: int, args: dict[str, Any], counter: Any, stop: Any, ready: Any,
                   out: Any) -> None:  # fmt: skip
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    latencies: list[float] = []
    count = 0
    last = 0.0
    name = f"c{index}"
    cpu0 = time.process_time()
    ready.release()
    while not stop.is_set():
        reply = client.xreadgroup(GROUP, name, {STREAM: ">"}, count=args["batch"], block=100)
        if not reply:
            continue
        now = time.time_ns()
        entries = reply[0][1]
        ids = []
        for entry_id, fields in entries:
            latencies.append((now - _STAMP.unpack_from(fields[b"b"])[0]) / 1e6)
            ids.append(entry_id)
        client.xack(STREAM, GROUP, *ids)
        count += len(ids)
        last = time.monotonic()
        with counter.get_lock():
            counter.value += len(ids)
    out.put(("consumer", index, count, last, latencies, time.process_time() - cpu0))


# -- one phase ---------------------------------------------------------------------------------------------


def run_phase(system: str, server: Any, args: dict[str, Any], rate: float | None) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    counter = ctx.Value("q", 0)
    stop = ctx.Event()
    ready = ctx.Semaphore(0)
    if system == "rocketq":
        target: Any = (rocketq_consumer, rocketq_producer)
        where: Any = server.namesrv
    else:
        import redis

        client = redis.Redis(host="127.0.0.1", port=server.port)
        client.delete(STREAM)
        client.xgroup_create(STREAM, GROUP, id="$", mkstream=True)
        target = (redis_consumer, redis_producer)
        where = server.port
    consumers = [ctx.Process(target=target[0], args=(where, i, args, counter, stop, ready, out))
                 for i in range(args["consumers"])]  # fmt: skip
    for p in consumers:
        p.start()
    for _ in consumers:
        if not ready.acquire(timeout=90):
            raise RuntimeError(f"{system} consumers did not get ready")
    per_producer = rate / args["producers"] if rate else None
    server_pid = server.proc.pid if server.proc is not None else None
    cpu_before = process_cpu_s(server_pid)
    go_at = time.time() + 2.0
    producers = [ctx.Process(target=target[1], args=(where, i, args, go_at, per_producer, out))
                 for i in range(args["producers"])]  # fmt: skip
    for p in producers:
        p.start()
    results: list[tuple[Any, ...]] = []
    for _ in producers:
        results.append(out.get(timeout=args["seconds"] + 120))
    sent = sum(r[2] for r in results if r[0] == "producer")
    deadline = time.monotonic() + 60
    while counter.value < sent and time.monotonic() < deadline:
        time.sleep(0.05)
    cpu_after = process_cpu_s(server_pid)
    stop.set()
    for _ in consumers:
        results.append(out.get(timeout=120))
    for p in producers + consumers:
        p.join(60)
        if p.is_alive():
            p.kill()
    prods = [r for r in results if r[0] == "producer"]
    cons = [r for r in results if r[0] == "consumer"]
    consumed = sum(r[2] for r in cons)
    first_send = min(r[3] for r in prods)
    last_consume = max((r[3] for r in cons if r[3]), default=first_send)
    lat = sorted(x for r in cons for x in r[4])
    elapsed = max(1e-9, last_consume - first_send)
    return {
        "system": system,
        "offered_rate": rate,
        "sent": sent,
        "consumed": consumed,
        "lost": max(0, sent - consumed),
        "seconds": round(elapsed, 3),
        "throughput": round(consumed / elapsed, 1),
        "mib_per_s": round(consumed * BODY_SIZE / elapsed / 2**20, 2),
        "p50_ms": round(_pct(lat, 50), 3) if lat else None,
        "p99_ms": round(_pct(lat, 99), 3) if lat else None,
        "max_ms": round(lat[-1], 3) if lat else None,
        # The server's CPU time (all its threads) per message consumed, from the producers' start to the last
        # message consumed: steadier than throughput on a shared machine.
        "server_cpu_us_per_msg": round((cpu_after - cpu_before) / consumed * 1e6, 1)
        if cpu_before is not None and cpu_after is not None and consumed else None,
        # The clients' own CPU time (each process's, summed) per message: what the producers and the consumers
        # cost on the same two cores as the server.
        "producer_cpu_us_per_msg": round(sum(r[5] for r in prods) / consumed * 1e6, 1) if consumed else None,
        "consumer_cpu_us_per_msg": round(sum(r[5] for r in cons) / consumed * 1e6, 1) if consumed else None,
    }


def _pct(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    k = (len(sorted_values) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


# -- main --------------------------------------------------------------------------------------------------


def create_topic(namesrv: str, queues: int) -> None:
    from rocketq.client import Producer

    async def go() -> None:
        async with Producer("BenchAdmin", namesrv) as producer:
            await producer.create_topic(TOPIC, queues)

    asyncio.run(go())


_CPU_COLUMNS = ("server_cpu_us_per_msg", "producer_cpu_us_per_msg", "consumer_cpu_us_per_msg")


def table(rows: list[dict[str, Any]]) -> str:
    head = ["system", "phase", "offered msg/s", "sent", "consumed", "msg/s", "MiB/s", "p50 ms", "p99 ms",
            "server us/msg", "producers us/msg", "consumers us/msg"]
    lines = [head]
    for r in rows:
        lines.append([r["system"], r["phase"], f"{r['offered_rate']:.0f}" if r["offered_rate"] else "max",
                      str(r["sent"]), str(r["consumed"]), f"{r['throughput']:.0f}", f"{r['mib_per_s']:.1f}",
                      "-" if r["p50_ms"] is None else f"{r['p50_ms']:.2f}",
                      "-" if r["p99_ms"] is None else f"{r['p99_ms']:.2f}",
                      *("-" if r[k] is None else f"{r[k]:.1f}" for k in _CPU_COLUMNS)])  # fmt: skip
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32, help="messages per request / pipeline (default 32)")
    parser.add_argument("--inflight", type=int, default=4, help="requests in flight per producer (default 4)")
    parser.add_argument("--queues", type=int, default=8, help="queues of the rocketq topic (default 8)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase (default 10)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    ns = parser.parse_args(argv)
    args = vars(ns).copy()
    args.pop("out")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="client-bench-") as tmp:
        work = Path(tmp)
        rocketq = RocketqServer(work)
        redis_server = RedisServer(work)  # no persistence
        try:
            rocketq.start()
            redis_server.start()
            create_topic(rocketq.namesrv, ns.queues)
            for system, server in (("rocketq", rocketq), ("redis-streams", redis_server)):
                peak = run_phase(system, server, args, None)
                peak["phase"] = "peak"
                rows.append(peak)
                print(f"{system} peak: {peak['throughput']:.0f} msg/s", flush=True)
            half = rows[0]["throughput"] / 2
            for system, server in (("rocketq", rocketq), ("redis-streams", redis_server)):
                res = run_phase(system, server, args, half)
                res["phase"] = "half load"
                rows.append(res)
                print(f"{system} at {half:.0f} msg/s: p50 {res['p50_ms']} ms, p99 {res['p99_ms']} ms", flush=True)
        finally:
            with contextlib.suppress(Exception):
                redis_server.stop()
            rocketq.stop()
    print()
    print(table(rows))
    write_report(ns.out, "client_bench", {
        "settings": {**args, "body_size": BODY_SIZE},
        "results": rows,
        "targets": {
            "throughput_vs_redis": rows[0]["throughput"] / max(1e-9, rows[1]["throughput"]),
            "p99_ms_at_half_load": rows[2]["p99_ms"],
            "p99_under_10ms": rows[2]["p99_ms"] is not None and rows[2]["p99_ms"] < 10,
        },
        "latency_ms": {f"{r['system']} {r['phase']}": {"p50": r["p50_ms"], "p99": r["p99_ms"], "max": r["max_ms"]}
                       for r in rows},
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
