"""Drives the official RocketMQ 5 Python client (``rocketmq-python-client``, gRPC) against an endpoint, for
tests/test_grpc_proxy.py. Run as a process of its own (the client writes its log under ``$HOME`` and keeps
threads): ``python grpc_client_script.py HOST:PORT '<plan as JSON>'``; prints one JSON object.

The plan: ``{"produce": [message, ...], "consume": {...}, "push": {...}}``, each optional, in that order.

- a message: ``topic``, ``body``, and optionally ``tag``, ``keys`` (list), ``props`` (dict), ``group`` (a message
  group: FIFO), ``delay_s`` (delivered that many seconds from now), ``tx`` ("commit", "rollback" or "open":
  left to the broker's check, which the producer answers with ``checker``, "commit" or "rollback", staying up
  to ``linger`` seconds for ``checks`` of them);
- consume: ``group``, ``topic``, ``tag`` (a tag expression, default ``*``), ``want`` (messages to wait for),
  ``seconds`` (at most), ``invisible`` (s), ``await`` (long polling, s), ``ack`` (bool), ``change_to`` (s: make
  each message invisible for that long instead of acknowledging it);
- push: a push consumer: ``group``, ``topic``, ``tag``, ``want`` (deliveries to wait for), ``seconds``, ``fail``
  (bodies whose first delivery the listener fails), ``fail_always`` (bodies it always fails), ``linger`` (s to go
  on after).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any


def main() -> int:
    endpoint, plan = sys.argv[1], json.loads(sys.argv[2])
    from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message, Producer,  # noqa: I001
                          SimpleConsumer, TransactionChecker, TransactionResolution)

    class Checker(TransactionChecker):  # the broker's check of an open transaction: the plan's answer
        def check(self, message: Any) -> Any:
            out["checked"].append(message.body.decode())
            commit = plan.get("checker") == "commit"
            return TransactionResolution.COMMIT if commit else TransactionResolution.ROLLBACK

    config = ClientConfiguration(endpoint, Credentials(), request_timeout=5)
    out: dict[str, Any] = {"sent": [], "received": [], "errors": [], "checked": []}
    messages = plan.get("produce") or []
    if messages:
        checker = Checker() if any(m.get("tx") for m in messages) else None
        producer = Producer(config, tuple({m["topic"] for m in messages}), checker)
        producer.startup()
        try:
            for spec in messages:
                msg = Message()
                msg.topic = spec["topic"]
                msg.body = spec["body"].encode()
                if spec.get("tag"):
                    msg.tag = spec["tag"]
                for key in spec.get("keys") or ():
                    msg.keys = key  # each assignment adds one
                for key, value in (spec.get("props") or {}).items():
                    msg.add_property(key, value)
                if spec.get("group"):
                    msg.message_group = spec["group"]
                if spec.get("delay_s"):
                    msg.delivery_timestamp = int(time.time()) + int(spec["delay_s"])
                try:
                    if spec.get("tx"):
                        transaction = producer.begin_transaction()
                        receipt = producer.send(msg, transaction)
                        if spec["tx"] == "commit":
                            transaction.commit()
                        elif spec["tx"] == "rollback":
                            transaction.rollback()  # "open": left to the broker's check
                    else:
                        receipt = producer.send(msg)
                    out["sent"].append({"message_id": receipt.message_id, "offset": receipt.offset})
                except Exception as exc:  # the test reads what went wrong
                    out["errors"].append(f"{type(exc).__name__}: {exc}")
            deadline = time.monotonic() + plan.get("linger", 0)
            while time.monotonic() < deadline and len(out["checked"]) < plan.get("checks", 0):
                time.sleep(0.1)  # the producer stays for the broker's transaction check
        finally:
            producer.shutdown()
    consume = plan.get("consume")
    if consume:
        consumer = SimpleConsumer(config, consume["group"],
                                  {consume["topic"]: FilterExpression(consume.get("tag", "*"))},
                                  await_duration=consume.get("await", 5))  # fmt: skip
        consumer.startup()
        try:
            deadline = time.monotonic() + consume.get("seconds", 20)
            while len(out["received"]) < consume.get("want", 1) and time.monotonic() < deadline:
                try:
                    got = consumer.receive(32, consume.get("invisible", 15))
                except Exception as exc:
                    out["errors"].append(f"{type(exc).__name__}: {exc}")
                    time.sleep(0.2)
                    continue
                for m in got:
                    out["received"].append({
                        "body": m.body.decode(), "tag": m.tag, "keys": sorted(m.keys), "props": dict(m.properties),
                        "attempt": m.delivery_attempt, "group": m.message_group, "message_id": m.message_id,
                    })  # fmt: skip
                    if consume.get("change_to") is not None:
                        consumer.change_invisible_duration(m, consume["change_to"])
                    elif consume.get("ack", True):
                        consumer.ack(m)
        finally:
            consumer.shutdown()
    push = plan.get("push")
    if push:
        import threading

        from rocketmq import ConsumeResult, MessageListener, PushConsumer

        lock = threading.Lock()
        failures = set(push.get("fail", ()))  # bodies whose first delivery fails
        hopeless = set(push.get("fail_always", ()))  # bodies whose every delivery fails

        class Listener(MessageListener):
            def consume(self, message: Any) -> Any:
                body = message.body.decode()
                with lock:
                    out["received"].append({"body": body, "attempt": message.delivery_attempt})
                    if body in failures or body in hopeless:
                        failures.discard(body)
                        return ConsumeResult.FAILURE
                return ConsumeResult.SUCCESS

        subscription = {push["topic"]: FilterExpression(push.get("tag", "*"))}
        pusher = PushConsumer(config, push["group"], Listener(), subscription)
        pusher.startup()
        try:
            deadline = time.monotonic() + push.get("seconds", 20)
            while time.monotonic() < deadline:
                with lock:
                    if len(out["received"]) >= push["want"]:
                        break
                time.sleep(0.1)
            time.sleep(push.get("linger", 0))
        finally:
            pusher.shutdown()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
