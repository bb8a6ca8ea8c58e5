"""The Python client's transactional producer against rocketq's name server and broker (one event loop,
127.0.0.1, free ports): commit, rollback, unknown answered by a check, a failing local transaction, the
END_TRANSACTION frame as Java 4.9.4 sends it, and a check-back answered after the broker restarted."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from broker_support import run
from rocketq.broker.broker_config import load_broker_config
from rocketq.broker.broker_controller import BrokerController
from rocketq.client import ClientConfig, MessageExt, new_message
from rocketq.client.transaction_producer import LocalTransactionState, TransactionProducer
from rocketq.common.codec import decode_record
from rocketq.common.message import Message
from rocketq.namesrv.namesrv_controller import NamesrvController
from rocketq.remoting.codes import RequestCode

FAST_CHECKS = {"transaction_time_out": 400, "transaction_check_interval": 200}


class Servers:
    """A name server and a broker on the running loop; the broker can be restarted on the same store and port."""

    def __init__(self, root: Path, **broker_options: Any) -> None:
        self.root = root
        self.options = broker_options
        self.namesrv: NamesrvController | None = None
        self.broker: BrokerController | None = None

    async def start_broker(self, port: int = 0) -> BrokerController:
        assert self.namesrv is not None
        broker_config, store_config = load_broker_config(
            None, namesrv_addr=self.namesrv.address, listen_port=port, broker_ip1="127.0.0.1",
            broker_name="broker-a", store_path_root_dir=str(self.root / "store"),
            mapped_file_size_commit_log=8 * 1024 * 1024, **self.options)  # fmt: skip
        self.broker = BrokerController(broker_config, store_config)
        await self.broker.start()
        return self.broker

    async def stop_broker(self) -> int:
        assert self.broker is not None
        port = self.broker.port
        await self.broker.shutdown()
        self.broker = None
        return port


@contextlib.asynccontextmanager
async def servers(root: Path, **broker_options: Any) -> AsyncIterator[Servers]:
    s = Servers(root, **broker_options)
    s.namesrv = NamesrvController("127.0.0.1", 0, kv_config_path=root / "kvConfig.json")
    await s.namesrv.start()
    try:
        await s.start_broker()
        yield s
    finally:
        if s.broker is not None:
            await s.broker.shutdown()
        await s.namesrv.stop()


def config(s: Servers) -> ClientConfig:
    assert s.namesrv is not None
    return ClientConfig(namesrv_addr=str(s.namesrv.address), poll_name_server_interval=1.0,
                        heartbeat_broker_interval=0.5, instance_name=uuid.uuid4().hex[:8])  # fmt: skip


def stored(broker: BrokerController, topic: str) -> list[MessageExt]:
    out: list[MessageExt] = []
    for qid in range(8):
        out += [decode_record(m) for m in broker.store.get_message("t", topic, qid, 0, 64).messages]
    return out


async def until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        await asyncio.sleep(0.05)


class Ledger:
    """A local 'database': what the local transactions decided, and the checks the broker made."""

    def __init__(self) -> None:
        self.decided: dict[str, LocalTransactionState] = {}
        self.checked: list[MessageExt] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState | None:
        if arg == "boom":
            raise RuntimeError("local transaction failed")
        return {"commit": LocalTransactionState.COMMIT_MESSAGE, "rollback": LocalTransactionState.ROLLBACK_MESSAGE,
                "unknown": LocalTransactionState.UNKNOW, "none": None}[arg]  # fmt: skip

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append(msg)
        body = msg.body.decode()
        return LocalTransactionState.ROLLBACK_MESSAGE if body.startswith("boom") else \
            LocalTransactionState.COMMIT_MESSAGE  # fmt: skip


def test_commit_rollback_unknown_and_check_back(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with servers(tmp_path, **FAST_CHECKS) as s:
            assert s.broker is not None
            ledger = Ledger()
            frames: list[Any] = []
            original = s.broker.processors.lookup(RequestCode.END_TRANSACTION)
            assert original is not None

            async def spy(conn: Any, request: Any) -> Any:
                frames.append(request)
                return await original(conn, request)  # type: ignore[misc]

            s.broker.processors.register(RequestCode.END_TRANSACTION, spy)
            async with TransactionProducer("TxPG", listener=ledger, config=config(s)) as producer:
                await producer.producer.create_topic("TxT", 2)
                results = {}
                for arg in ("commit", "rollback", "unknown", "none", "boom"):
                    msg = new_message("TxT", f"{arg}-body".encode(), tags="T", keys=arg, delay_level=3)
                    results[arg] = await producer.send_message_in_transaction(msg, arg)
                assert results["commit"].local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
                assert results["rollback"].local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
                for arg in ("unknown", "none", "boom"):
                    assert results[arg].local_transaction_state is LocalTransactionState.UNKNOW
                # The END_TRANSACTION frame carries Java 4.9.4's fields (golden 008-json-END_TRANSACTION).
                await until(lambda: len(frames) >= 5, 5, "five END_TRANSACTION frames")
                first = frames[0]
                assert first.is_oneway and set(first.ext_fields) >= {"producerGroup", "commitLogOffset", "msgId",
                                                                     "tranStateTableOffset", "commitOrRollback",
                                                                     "fromTransactionCheck"}  # fmt: skip
                assert first.ext_fields["commitOrRollback"] == "8" and first.ext_fields["fromTransactionCheck"] == \
                    "false"  # fmt: skip
                assert frames[4].remark and "local transaction failed" in frames[4].remark
                broker = s.broker
                # Committed at once: only "commit". Checks then commit "unknown" and "none", roll "boom" back.
                await until(lambda: len(stored(broker, "TxT")) == 3, 10, "the checked transactions")
                await asyncio.sleep(0.6)
                bodies = sorted(m.body for m in stored(broker, "TxT"))
                assert bodies == [b"commit-body", b"none-body", b"unknown-body"]
                assert sorted(m.body for m in ledger.checked) == [b"boom-body", b"none-body", b"unknown-body"]
                checked = ledger.checked[0]
                assert checked.topic == "TxT" and checked.properties["PGROUP"] == "TxPG"
                assert checked.uniq_key in {r.msg_id for r in results.values()}
                for m in stored(broker, "TxT"):
                    assert m.sys_flag & 0xC == 8 and "DELAY" not in m.properties  # the delay level was dropped
                answers = [f for f in frames if f.ext_fields.get("fromTransactionCheck") == "true"]
                assert len(answers) == 3

    run(scenario(), timeout=60)


def test_check_back_after_a_broker_restart(tmp_path: Path) -> None:
    """The local transaction says UNKNOW and the broker goes down before it checks; the restarted broker asks,
    and the producer (reconnected by its heartbeats) commits."""

    async def scenario() -> None:
        async with servers(tmp_path, transaction_time_out=1500, transaction_check_interval=200) as s:
            ledger = Ledger()
            async with TransactionProducer("TxRestart", listener=ledger, config=config(s)) as producer:
                await producer.producer.create_topic("TxR", 1)
                result = await producer.send_message_in_transaction(new_message("TxR", b"later"), "unknown")
                assert result.local_transaction_state is LocalTransactionState.UNKNOW
                port = await s.stop_broker()
                assert ledger.checked == []
                broker = await s.start_broker(port)
                await until(lambda: len(stored(broker, "TxR")) == 1, 15, "the commit after the restart")
                assert [m.body for m in ledger.checked] == [b"later"]
                (committed,) = stored(broker, "TxR")
                assert committed.uniq_key == result.msg_id and committed.sys_flag & 0xC == 8

    run(scenario(), timeout=60)


def test_function_callbacks_and_missing_listener(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with servers(tmp_path) as s:
            seen: list[Any] = []

            def execute(msg: Message, arg: Any) -> LocalTransactionState:
                seen.append(arg)
                return LocalTransactionState.COMMIT_MESSAGE

            def check(msg: MessageExt) -> LocalTransactionState:
                return LocalTransactionState.COMMIT_MESSAGE

            async with TransactionProducer("TxFn", execute=execute, check=check, config=config(s)) as producer:
                await producer.producer.create_topic("TxF", 1)
                r = await producer.send_message_in_transaction(new_message("TxF", b"x"), {"order": 1})
                assert r.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE and seen == [{"order": 1}]
                assert s.broker is not None
                broker = s.broker
                await until(lambda: len(stored(broker, "TxF")) == 1, 5, "the commit")
            async with TransactionProducer("TxNone", config=config(s)) as bare:
                try:
                    await bare.send_message_in_transaction(new_message("TxF", b"y"))
                except Exception as exc:
                    assert "TransactionListener is null" in str(exc)
                else:
                    raise AssertionError("a transaction without a listener was sent")

    run(scenario(), timeout=60)
