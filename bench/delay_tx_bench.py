"""Delay and transaction benchmark: how late delayed messages come under load, and what a transaction costs.

(``bench/broker_bench.py`` did not exist yet when this was written; this is its delay/transaction part, to be
folded into it.)

What runs (127.0.0.1 only): a rocketq name server and broker in a child process (own event loop, store in a
temporary directory, ``messageDelayLevel`` "1s 2s 3s …", ``timerPrecisionMs`` 1), and the Python client in
this process.

1. **Delay lateness under load.** For ``--seconds``: ``--load-senders`` tasks send plain 1 KiB messages as
   fast as they can (the load), while ``--delay-rate`` messages a second are sent with delay level 1 or 2,
   and as many with ``TIMER_DELAY_MS`` between 500 and 2500 ms; a push consumer consumes the delayed topics.
   Afterwards the store is read back: broker lateness = the delivered copy's store time − its due time (the
   parked record's store time + the level's delay; ``TIMER_OUT_MS`` for a timer message); consumer lateness =
   the consumer's clock at delivery − the due time. Target: p99 < 100 ms after the due time.
2. **Transactional vs plain send.** ``--senders`` concurrent tasks for ``--seconds`` each: ``Producer.send``
   of 1 KiB messages, then ``TransactionProducer.send_message_in_transaction`` (the local transaction
   commits at once: half message, END_TRANSACTION, committed copy and op record on the broker).

Prints a table and writes ``bench/results/delay_tx_bench.json``.

    python bench/delay_tx_bench.py --seconds 10 --delay-rate 200 --load-senders 16 --senders 32
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "delay_tx_bench.json"
LEVELS = "1s 2s 3s " + " ".join(["1h"] * 15)
LEVEL_MS = {1: 1000, 2: 2000}
BODY = b"x" * 1024


# -- the servers, in a child process -------------------------------------------------------------------------
def _serve(root: str, pipe: Any) -> None:
    asyncio.run(_serve_async(root, pipe))


async def _serve_async(root: str, pipe: Any) -> None:
    from rocketq.broker.broker_config import load_broker_config
    from rocketq.broker.broker_controller import BrokerController
    from rocketq.namesrv.namesrv_controller import NamesrvController

    namesrv = NamesrvController("127.0.0.1", 0, kv_config_path=Path(root) / "kvConfig.json")
    await namesrv.start()
    broker_config, store_config = load_broker_config(
        None, namesrv_addr=namesrv.address, listen_port=0, broker_ip1="127.0.0.1", broker_name="broker-a",
        store_path_root_dir=str(Path(root) / "store"), message_delay_level=LEVELS, timer_precision_ms=1,
        mapped_file_size_commit_log=256 * 1024 * 1024, transaction_check_interval=600_000)  # fmt: skip
    broker = BrokerController(broker_config, store_config)
    await broker.start()
    pipe.send(str(namesrv.address))
    await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
    await broker.shutdown()
    await namesrv.stop()
    pipe.send("stopped")


class Servers:
    def __init__(self, root: Path) -> None:
        self.root = root
        ctx = mp.get_context("spawn")
        self.pipe, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(str(root), child), daemon=True)

    def start(self) -> str:
        self.proc.start()
        if not self.pipe.poll(60):
            raise RuntimeError("the servers did not start within 60 s")
        return str(self.pipe.recv())

    def stop(self) -> None:
        if self.proc.is_alive():
            self.pipe.send("stop")
            if self.pipe.poll(60):
                self.pipe.recv()
            self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()


# -- measurements ------------------------------------------------------------------------------------------
def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def _load(producer: Any, topic: str, stop: float, counter: list[int]) -> None:
    from rocketq.client import new_message

    while time.monotonic() < stop:
        await producer.send(new_message(topic, BODY))
        counter[0] += 1


async def _delayed(producer: Any, rate: float, stop: float, sent: list[int]) -> None:
    from rocketq.client import new_message

    i = 0
    start = time.monotonic()
    pending: set[asyncio.Task[Any]] = set()
    while time.monotonic() < stop:
        i += 1
        level = 1 + i % 2
        msg = new_message("DelayT", BODY, delay_level=level, properties={"i": str(i)})
        tmsg = new_message("TimerT", BODY, properties={"TIMER_DELAY_MS": str(random.randint(500, 2500))})
        for m in (msg, tmsg):
            t = asyncio.ensure_future(producer.send(m))
            pending.add(t)
            t.add_done_callback(pending.discard)
        sent[0] += 2
        await asyncio.sleep(max(0.0, start + i / rate - time.monotonic()))
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


async def delay_phase(addr: str, args: argparse.Namespace) -> dict[str, Any]:
    from rocketq.client import ClientConfig, ConsumeConcurrentlyStatus, ConsumeFromWhere, Producer, PushConsumer

    cfg = ClientConfig(namesrv_addr=addr, rebalance_interval=1.0, instance_name="bench")
    received: dict[str, float] = {}

    async def listener(msgs: list[Any], _context: Any) -> ConsumeConcurrentlyStatus:
        now = time.time() * 1000
        for m in msgs:
            received[m.uniq_key] = now
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async with Producer("BenchLoadPG", config=cfg) as load, Producer("BenchDelayPG", config=cfg.copy(
            instance_name="bench-delay")) as delayer:  # fmt: skip
        for topic in ("LoadT", "DelayT", "TimerT"):
            await load.create_topic(topic, 4)
        consumer = PushConsumer("BenchDelayCG", config=cfg.copy(instance_name="bench-consumer"), listener=listener,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
        consumer.subscribe("DelayT")
        consumer.subscribe("TimerT")
        async with consumer:
            await asyncio.sleep(2.0)
            stop = time.monotonic() + args.seconds
            load_count, sent = [0], [0]
            t0 = time.monotonic()
            await asyncio.gather(*(_load(load, "LoadT", stop, load_count) for _ in range(args.load_senders)),
                                 _delayed(delayer, args.delay_rate, stop, sent))  # fmt: skip
            load_rate = load_count[0] / (time.monotonic() - t0)
            deadline = time.monotonic() + 3.0 + 15.0
            while len(received) < sent[0] and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
    return {"received": received, "sent": sent[0], "load_rate": load_rate}


def store_lateness(root: Path, received: dict[str, float]) -> dict[str, Any]:
    from rocketq.common.codec import decode_record
    from rocketq.store.message_store import MessageStore
    from rocketq.store.store_config import MessageStoreConfig

    cfg = MessageStoreConfig(store_path_root_dir=str(root / "store"), mapped_file_size_commit_log=256 * 1024 * 1024,
                             message_delay_level=LEVELS)  # fmt: skip
    out: dict[str, Any] = {}
    with MessageStore(cfg, read_only=True) as store:
        def records(topic: str, queues: range) -> list[Any]:
            msgs = []
            for q in queues:
                offset = 0
                while True:
                    r = store.get_message("bench", topic, q, offset, 512)
                    if not r.messages:
                        break
                    msgs += [decode_record(m) for m in r.messages]
                    offset = r.next_begin_offset
            return msgs

        parked = {m.uniq_key: m.store_timestamp + LEVEL_MS[m.queue_id + 1] for m in records("SCHEDULE_TOPIC_XXXX",
                                                                                         range(2))}  # fmt: skip
        for kind, topic in (("delay level", "DelayT"), ("timer", "TimerT")):
            broker_late, consumer_late = [], []
            for m in records(topic, range(4)):
                due = parked.get(m.uniq_key) if kind == "delay level" else int(m.properties["TIMER_OUT_MS"])
                if due is None:
                    continue
                broker_late.append(m.store_timestamp - due)
                if m.uniq_key in received:
                    consumer_late.append(received[m.uniq_key] - due)
            out[kind] = {
                "messages": len(broker_late),
                "broker_p50_ms": _pct(broker_late, 50), "broker_p99_ms": _pct(broker_late, 99),
                "broker_max_ms": max(broker_late, default=float("nan")),
                "consumer_p50_ms": _pct(consumer_late, 50), "consumer_p99_ms": _pct(consumer_late, 99),
            }  # fmt: skip
    return out


async def tps_phase(addr: str, args: argparse.Namespace) -> dict[str, Any]:
    from rocketq.client import ClientConfig, Producer, new_message
    from rocketq.client.transaction_producer import LocalTransactionState, TransactionProducer

    cfg = ClientConfig(namesrv_addr=addr, instance_name="bench-tps")

    async def drive(send: Any) -> tuple[float, list[float]]:
        stop = time.monotonic() + args.seconds
        count = [0]
        lat: list[float] = []

        async def worker() -> None:
            while time.monotonic() < stop:
                t = time.perf_counter()
                await send()
                lat.append((time.perf_counter() - t) * 1000)
                count[0] += 1

        t0 = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(args.senders)))
        return count[0] / (time.monotonic() - t0), lat

    async with Producer("BenchPlainPG", config=cfg) as plain:
        await plain.create_topic("TpsT", 4)
        await plain.send(new_message("TpsT", BODY))
        plain_tps, plain_lat = await drive(lambda: plain.send(new_message("TpsT", BODY)))
    tx = TransactionProducer("BenchTxPG", config=cfg.copy(instance_name="bench-tx"),
                             execute=lambda m, a: LocalTransactionState.COMMIT_MESSAGE,
                             check=lambda m: LocalTransactionState.COMMIT_MESSAGE)  # fmt: skip
    async with tx:
        await tx.send_message_in_transaction(new_message("TpsT", BODY))
        tx_tps, tx_lat = await drive(lambda: tx.send_message_in_transaction(new_message("TpsT", BODY)))
    return {"plain_tps": plain_tps, "tx_tps": tx_tps, "ratio": tx_tps / plain_tps if plain_tps else float("nan"),
            "plain_p50_ms": _pct(plain_lat, 50), "plain_p99_ms": _pct(plain_lat, 99),
            "tx_p50_ms": _pct(tx_lat, 50), "tx_p99_ms": _pct(tx_lat, 99)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--delay-rate", type=float, default=200.0, help="delayed sends a second (as many timer ones)")
    ap.add_argument("--load-senders", type=int, default=16, help="tasks sending plain messages during phase 1")
    ap.add_argument("--senders", type=int, default=32, help="concurrent sends in phase 2")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="delay-tx-bench-") as tmp:
        root = Path(tmp)
        servers = Servers(root)
        addr = servers.start()
        try:
            delay = asyncio.run(delay_phase(addr, args))
            tps = asyncio.run(tps_phase(addr, args))
        finally:
            servers.stop()
        lateness = store_lateness(root, delay["received"])
    result = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "args": vars(args),
        "load_rate_msgs_per_s": delay["load_rate"],
        "delayed_sent": delay["sent"],
        "delayed_received": len(delay["received"]),
        "lateness": lateness,
        "send": tps,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"load: {delay['load_rate']:.0f} plain sends/s from {args.load_senders} tasks; delayed+timer sent "
          f"{delay['sent']}, consumed {len(delay['received'])}")
    print(f"{'kind':<12} {'msgs':>6} {'broker p50':>11} {'broker p99':>11} {'max':>7} {'consumer p50':>13} "
          f"{'consumer p99':>13}   (ms after due)")
    for kind, r in lateness.items():
        print(f"{kind:<12} {r['messages']:>6} {r['broker_p50_ms']:>11.1f} {r['broker_p99_ms']:>11.1f} "
              f"{r['broker_max_ms']:>7.0f} {r['consumer_p50_ms']:>13.1f} {r['consumer_p99_ms']:>13.1f}")
    print(f"plain send:         {tps['plain_tps']:>8.0f} msg/s  (p50 {tps['plain_p50_ms']:.1f} ms, "
          f"p99 {tps['plain_p99_ms']:.1f} ms)")
    print(f"transactional send: {tps['tx_tps']:>8.0f} msg/s  (p50 {tps['tx_p50_ms']:.1f} ms, "
          f"p99 {tps['tx_p99_ms']:.1f} ms)  = {tps['ratio']:.2f} × plain")
    with contextlib.suppress(Exception):
        print(f"written to {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
