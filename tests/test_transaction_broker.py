"""Transactions through the broker over raw frames: the golden store's half, op and committed records, the
check-back (CHECK_TRANSACTION_STATE → END_TRANSACTION ``fromTransactionCheck``), ``transactionCheckMax`` and the
discard to ``TRANS_CHECK_MAX_TIME_TOPIC``, and check-back across a broker restart (store-format §9.3,
remoting-protocol §6.11, §11.6)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from broker_support import (
    client_of,
    decode_records,
    heartbeat,
    props,
    pull_request,
    run,
    running_broker,
    send_v2,
    settle,
)
from conftest import copy_store
from rocketq.broker.broker_controller import BrokerController
from rocketq.broker.transactional_message_service import CID_RMQ_SYS_TRANS
from rocketq.common.codec import decode_record
from rocketq.common.message import MessageExt, string_to_properties
from rocketq.common.message_id import decode_offset_message_id
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request
from rocketq.remoting.transport import RemotingClient, RemotingConnection

HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
FAST_CHECKS = {"transactionTimeOut": "300", "transactionCheckInterval": "200"}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _golden(golden_clean: Path, offset: int) -> MessageExt:
    data = (golden_clean / "store" / "commitlog" / "00000000000000000000").read_bytes()
    return decode_record(data, offset)


def _read(broker: BrokerController, topic: str, queue_id: int = 0) -> list[MessageExt]:
    return [decode_record(m) for m in broker.store.get_message("t", topic, queue_id, 0, 64).messages]


async def _until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        await asyncio.sleep(0.02)


class CheckedProducer:
    """A raw producer of group ``txg``: heartbeats and records the CHECK_TRANSACTION_STATE it gets."""

    def __init__(self, client: RemotingClient) -> None:
        self.client = client
        self.checks: list[tuple[RemotingConnection, RemotingCommand]] = []
        self.answer: int | None = None  # END_TRANSACTION value to answer checks with (None: stay silent)
        self.sent = 0
        self._replies: set[asyncio.Task[None]] = set()
        client.register_processor(RequestCode.CHECK_TRANSACTION_STATE, self._on_check)

    def _on_check(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        self.checks.append((conn, request))
        if self.answer is not None:
            task = asyncio.ensure_future(self.reply(conn, request, self.answer))
            self._replies.add(task)
            task.add_done_callback(self._replies.discard)

    async def reply(self, conn: RemotingConnection, request: RemotingCommand, action: int) -> None:
        h = request.header
        end = create_request(RequestCode.END_TRANSACTION, {
            "producerGroup": "txg", "tranStateTableOffset": h.get_long("tranStateTableOffset"),
            "commitLogOffset": h.get_long("commitLogOffset"), "commitOrRollback": action,
            "fromTransactionCheck": True, "msgId": h.get_str("msgId")}, oneway=True)  # fmt: skip
        await conn.invoke_oneway(end)

    async def register(self) -> None:
        r = await self.client.invoke(heartbeat("10.0.0.9@tx", "", {}, producer_groups=("txg",)))
        assert r.code == ResponseCode.SUCCESS

    async def send_half(self, body: bytes, queue_id: int = 1, **extra: str) -> dict[str, str]:
        self.sent += 1  # every transactional producer gives its message an id (the broker makes none)
        p = props(KEYS="tx", TRAN_MSG="true", PGROUP="txg", WAIT="true", TAGS="T",
                  UNIQ_KEY=f"7F000001{os.getpid():08X}{self.sent:016X}", **extra)  # fmt: skip
        r = await self.client.invoke(send_v2("Tx", body, queue_id=queue_id, properties=p, f=4, a="txg",
                                             g=_now_ms()))  # fmt: skip
        assert r.code == ResponseCode.SUCCESS
        return r.ext_fields or {}


@asynccontextmanager
async def producer_of(broker: BrokerController) -> AsyncIterator[CheckedProducer]:
    async with client_of(broker) as client:
        producer = CheckedProducer(client)
        await producer.register()
        yield producer


def test_golden_transaction_records_read_back_and_need_no_check(tmp_path: Path, golden_clean: Path) -> None:
    store = copy_store(golden_clean / "store", tmp_path / "store")

    async def scenario() -> None:
        async with running_broker(store, mappedFileSizeCommitLog=str(1 << 20), transactionCheckInterval="600000") \
                as broker:  # fmt: skip
            svc = broker.transactional_message_check_service
            await svc.check_once()
            # Both half messages have op records: nothing to ask, both offsets move past them.
            assert svc.listener.checks_sent == 0 and svc.transactional_message_service.stats.renewed == 0
            offsets = broker.consumer_offset_manager
            assert offsets.query_offset(CID_RMQ_SYS_TRANS, HALF, 0) == 2
            assert offsets.query_offset(CID_RMQ_SYS_TRANS, OP, 0) == 2
            halves, ops, committed = _read(broker, HALF), _read(broker, OP), _read(broker, "GoldenTx")
            assert [m.properties["tx"] for m in halves] == ["commit", "rollback"]
            assert [(m.tags, m.body) for m in ops] == [("d", b"0"), ("d", b"1")]
            assert len(committed) == 1 and committed[0].sys_flag == 8
            assert committed[0].prepared_transaction_offset == halves[0].commit_log_offset
            assert broker.store.find_consume_queue("TRANS_CHECK_MAX_TIME_TOPIC", 0, create=False) is None

    run(scenario())


def test_half_commit_and_op_records_as_rocketmq_writes_them(tmp_path: Path, golden_clean: Path) -> None:
    """The golden producer's sends again: rocketq's half, committed and op records have the golden property
    bytes and fields."""
    golden_half, golden_commit, golden_op = (_golden(golden_clean, o) for o in (473864, 475064, 475646))
    sent = {k: v for k, v in golden_half.properties.items() if k not in ("CLUSTER", "REAL_TOPIC", "REAL_QID")}
    # in the order the Java producer's map has them: WAIT first (the Message constructor), PGROUP later
    # (sendMessageInTransaction); the broker moves WAIT behind PGROUP, the other key of its bucket
    sent = {"WAIT": sent.pop("WAIT"), **sent}

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", transactionCheckInterval="600000") as broker, \
                client_of(broker) as client:  # fmt: skip
            r = await client.invoke(send_v2("GoldenTx", golden_half.body, queue_id=0, properties=props(**sent), f=4,
                                            a="GoldenTxProducerGroup", g=golden_half.born_timestamp))  # fmt: skip
            assert r.code == ResponseCode.SUCCESS
            ext = r.ext_fields or {}
            end = create_request(RequestCode.END_TRANSACTION, {
                "producerGroup": "GoldenTxProducerGroup", "tranStateTableOffset": ext["queueOffset"],
                "commitLogOffset": decode_offset_message_id(ext["msgId"])[1], "commitOrRollback": 8,
                "fromTransactionCheck": False, "msgId": sent["UNIQ_KEY"]}, oneway=True)  # fmt: skip
            await client.invoke_oneway(end)
            await _until(lambda: broker.store.get_max_offset_in_queue(OP, 0) == 1, 5, "the op record")
            (half,), (commit,), (op,) = _read(broker, HALF), _read(broker, "GoldenTx"), _read(broker, OP)
            for mine, golden in ((half, golden_half), (commit, golden_commit), (op, golden_op)):
                assert mine.properties_bytes == golden.properties_bytes, golden.topic
                for name in ("topic", "queue_id", "queue_offset", "body", "flag", "sys_flag", "reconsume_times"):
                    assert getattr(mine, name) == getattr(golden, name), (golden.topic, name)
            assert commit.prepared_transaction_offset == half.commit_log_offset
            assert commit.born_timestamp == half.born_timestamp == golden_half.born_timestamp
            assert op.born_host == op.store_host == broker.store_host

    run(scenario())


def test_end_transaction_answers_as_java_does(tmp_path: Path) -> None:
    """A commit's answer has no remark; a rollback's keeps the default remark of the response Java makes it from
    (``checkPrepareMessage``'s ``createResponseCommand(null)``)."""
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", transactionCheckInterval="600000") as broker, \
                client_of(broker) as client:  # fmt: skip
            remarks = {}
            for action in (8, 12):  # commit, rollback
                r = await client.invoke(send_v2("Tx", b"x", queue_id=2, properties=props(TRAN_MSG="true", PGROUP="pg"),
                                                f=4, a="pg", g=_now_ms()))  # fmt: skip
                ext = r.ext_fields or {}
                assert ext["queueId"] == "2"  # the queue asked for, not the half topic's (SendResult's queue)
                end = await client.invoke(create_request(RequestCode.END_TRANSACTION, {
                    "producerGroup": "pg", "tranStateTableOffset": ext["queueOffset"],
                    "commitLogOffset": decode_offset_message_id(ext["msgId"])[1], "commitOrRollback": action,
                    "fromTransactionCheck": False, "msgId": ext["msgId"]}))  # fmt: skip
                remarks[action] = (end.code, end.remark)
            assert remarks == {8: (ResponseCode.SUCCESS, None), 12: (ResponseCode.SUCCESS, "not set any response code")}
            wrong = await client.invoke(create_request(RequestCode.END_TRANSACTION, {
                "producerGroup": "pg", "tranStateTableOffset": 0, "commitLogOffset": 0, "commitOrRollback": 4,
                "fromTransactionCheck": False, "msgId": "x"}))  # fmt: skip
            assert (wrong.code, wrong.remark) == (ResponseCode.SYSTEM_ERROR, "commitOrRollback field wrong")
            store = broker.store
            await _until(lambda: sum(store.get_max_offset_in_queue("Tx", q) for q in range(4)) == 1, 5, "the commit")

    run(scenario())


def test_check_back_then_commit_or_rollback(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", **FAST_CHECKS) as broker, producer_of(broker) as producer:
            first = await producer.send_half(b"commit-on-check")
            second = await producer.send_half(b"rollback-on-check")
            await _until(lambda: len(producer.checks) >= 2, 5, "two checks")
            conn, check = producer.checks[0]
            h = check.header
            assert check.is_oneway and check.code == RequestCode.CHECK_TRANSACTION_STATE
            # The check names the renewed copy at the end of the half queue, not the first half message.
            assert h.get_long("tranStateTableOffset") == 2
            renewed = broker.store.look_message_by_offset(h.get_long("commitLogOffset"))
            assert renewed is not None and renewed.topic == HALF and renewed.queue_offset == 2
            assert renewed.properties["TRANSACTION_CHECK_TIMES"] == "1"
            assert h.get_str("msgId") == h.get_str("transactionId") == renewed.uniq_key
            assert h.get_str("offsetMsgId") == renewed.msg_id
            body = decode_records(check.body)[0]
            assert (body.topic, body.queue_id, body.body) == ("Tx", 1, b"commit-on-check")
            assert body.commit_log_offset == renewed.commit_log_offset and body.properties["PGROUP"] == "txg"
            # as 4.9.4: the stored copy keeps the producer's WAIT, the checked message says false (Java's copy
            # shares the map it then sets WAIT=false in)
            assert renewed.properties["WAIT"] == "true" and body.properties["WAIT"] == "false"
            assert decode_offset_message_id(first["msgId"])[1] != renewed.commit_log_offset
            await producer.reply(conn, check, 8)
            await producer.reply(*producer.checks[1], 12)
            pulled = decode_records((await producer.client.invoke(pull_request("g", "Tx", 1, 0,
                                                                               suspend_ms=3000))).body)  # fmt: skip
            assert [m.body for m in pulled] == [b"commit-on-check"]
            assert pulled[0].sys_flag & 0xC == 8 and pulled[0].prepared_transaction_offset == h.get_long(
                "commitLogOffset")
            await _until(lambda: broker.store.get_max_offset_in_queue(OP, 0) == 2, 5, "two op records")
            assert sorted(m.body for m in _read(broker, OP)) == [b"2", b"3"]
            checks = len(producer.checks)
            await asyncio.sleep(0.8)  # resolved: no more checks
            assert len(producer.checks) == checks == 2
            await _until(lambda: broker.consumer_offset_manager.query_offset(CID_RMQ_SYS_TRANS, HALF, 0) == 4, 3,
                         "the half offset past every resolved message")  # fmt: skip
            assert second["queueOffset"] == "1"

    run(scenario())


def test_unanswered_checks_stop_at_check_max_and_discard(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", transactionCheckMax="2", **FAST_CHECKS) as broker, \
                producer_of(broker) as producer:  # fmt: skip
            await producer.send_half(b"never-answered")
            await _until(lambda: broker.store.get_max_offset_in_queue("TRANS_CHECK_MAX_TIME_TOPIC", 0) == 1, 8,
                         "the discard")  # fmt: skip
            assert len(producer.checks) == 2
            times = [string_to_properties((decode_records(c.body)[0].properties_bytes or b"").decode())
                     ["TRANSACTION_CHECK_TIMES"] for _, c in producer.checks]  # fmt: skip
            assert times == ["1", "2"]
            (discarded,) = _read(broker, "TRANS_CHECK_MAX_TIME_TOPIC")
            assert discarded.body == b"never-answered" and discarded.properties["REAL_TOPIC"] == "Tx"
            assert discarded.properties["TRANSACTION_CHECK_TIMES"] == "2"
            await asyncio.sleep(0.6)
            assert len(producer.checks) == 2
            assert broker.store.get_max_offset_in_queue("Tx", 1) == 0

    run(scenario())


def test_a_half_message_with_immunity_is_put_back_until_its_time_then_checked(tmp_path: Path) -> None:
    """``CHECK_IMMUNITY_TIME_IN_SECONDS``: while the message is younger, each check pass puts a copy back that
    names the first half message's queue offset (``TRAN_PREPARED_QUEUE_OFFSET``), as 4.9.4's
    ``checkPrepareQueueOffset`` does; its properties string is made again from the map Java shares with the
    half message, so it says ``WAIT=false``. Once the time is up the producer is asked."""
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", **FAST_CHECKS) as broker, producer_of(broker) as producer:
            sent = time.monotonic()
            await producer.send_half(b"immune", CHECK_IMMUNITY_TIME_IN_SECONDS="2")
            await _until(lambda: broker.store.get_max_offset_in_queue(HALF, 0) >= 2, 5, "a copy put back")
            assert producer.checks == [] and time.monotonic() - sent < 2
            first, copy = _read(broker, HALF)[:2]
            assert first.properties["WAIT"] == "true" and "TRAN_PREPARED_QUEUE_OFFSET" not in first.properties
            assert copy.body == b"immune" and copy.properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
            assert copy.properties["WAIT"] == "false"
            await _until(lambda: len(producer.checks) >= 1, 6, "the check once the immunity is over")
            assert time.monotonic() - sent >= 1.9
            assert decode_records(producer.checks[0][1].body)[0].body == b"immune"

    run(scenario())


def test_no_producer_connected_means_no_check_sent_but_checks_counted(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", **FAST_CHECKS) as broker, client_of(broker) as client:
            p = props(TRAN_MSG="true", PGROUP="nobody", TAGS="T")
            r = await client.invoke(send_v2("Tx", b"orphan", properties=p, f=4, a="nobody", g=_now_ms()))
            assert r.code == ResponseCode.SUCCESS
            await asyncio.sleep(1.0)
            svc = broker.transactional_message_check_service
            assert svc.listener.checks_sent == 0 and svc.transactional_message_service.stats.renewed >= 2

    run(scenario())


def test_the_first_check_comes_an_interval_after_start(tmp_path: Path) -> None:
    """As Java's TransactionalMessageCheckService: no check at start, the first one a ``transactionCheckInterval``
    later, so that producers reconnecting after a restart are not counted out of a check first."""
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", transactionCheckInterval="1500") as broker:
            stats = broker.transactional_message_check_service.transactional_message_service.stats
            await asyncio.sleep(1.0)
            assert stats.checks == 0
            await _until(lambda: stats.checks >= 1, 5, "the first check")

    run(scenario())


def test_check_back_survives_a_broker_restart(tmp_path: Path) -> None:
    store = tmp_path / "s"
    conf = {"transactionCheckMax": "3", **FAST_CHECKS}
    state: dict[str, int] = {}

    async def before() -> None:
        async with running_broker(store, **conf) as broker, producer_of(broker) as producer:
            state["port"] = broker.port
            await producer.send_half(b"across-restart")
            await _until(lambda: len(producer.checks) == 1, 5, "the first check")
            state["half"] = broker.consumer_offset_manager.query_offset(CID_RMQ_SYS_TRANS, HALF, 0)

    async def after() -> None:
        async with running_broker(store, listenPort=str(state["port"]), **conf) as broker, \
                producer_of(broker) as producer:  # fmt: skip
            # Progress came back from consumerOffset.json: the walk goes on from the renewed copy.
            assert broker.consumer_offset_manager.query_offset(CID_RMQ_SYS_TRANS, HALF, 0) == state["half"] >= 1
            producer.answer = 8
            await _until(lambda: broker.store.get_max_offset_in_queue("Tx", 1) == 1, 5, "the commit")
            _conn, check = producer.checks[0]
            assert decode_records(check.body)[0].properties["TRANSACTION_CHECK_TIMES"] == "2"
            await asyncio.sleep(0.6)
            assert len(producer.checks) == 1 and broker.store.get_max_offset_in_queue("Tx", 1) == 1
            assert broker.store.find_consume_queue("TRANS_CHECK_MAX_TIME_TOPIC", 0, create=False) is None

    run(before())
    run(after())


def test_resume_check_half_message_puts_it_back_with_check_times_zero(tmp_path: Path) -> None:
    """RESUME_CHECK_HALF_MESSAGE (DefaultMQAdminExt.resumeCheckHalfMessage): the half record at the offset id is
    stored again at the end of the half topic, TRANSACTION_CHECK_TIMES reset to 0, body and origin kept."""

    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            p = props(TRAN_MSG="true", PGROUP="txg", TAGS="T", TRANSACTION_CHECK_TIMES="9", KEYS="k1")
            sent = await client.invoke(send_v2("Tx", b"parked", queue_id=1, properties=p, f=4, a="txg", g=5))
            assert sent.code == ResponseCode.SUCCESS
            msg_id = (sent.ext_fields or {})["msgId"]
            r = await client.invoke(create_request(RequestCode.RESUME_CHECK_HALF_MESSAGE, {"msgId": msg_id}))
            assert r.code == ResponseCode.SUCCESS and r.remark is None
            await settle(broker)
            first, again = _read(broker, HALF)
            assert decode_offset_message_id(msg_id)[1] == first.commit_log_offset
            assert again.body == b"parked" and again.queue_id == 0 and again.born_timestamp == 5
            assert again.properties["TRANSACTION_CHECK_TIMES"] == "0"
            assert (again.properties["REAL_TOPIC"], again.properties["REAL_QID"]) == ("Tx", "1")
            assert again.properties["PGROUP"] == "txg" and again.properties["KEYS"] == "k1"
            for bad in ("7F00000100002A9F00000000DEADBEEF", "not-an-id"):
                r = await client.invoke(create_request(RequestCode.RESUME_CHECK_HALF_MESSAGE, {"msgId": bad}))
                assert r.code == ResponseCode.SYSTEM_ERROR
                assert r.remark == "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."
            await settle(broker)
            assert len(_read(broker, HALF)) == 2

    run(scenario())


def test_a_half_message_resumed_on_a_sync_master_with_no_slave_waits_for_none(tmp_path: Path) -> None:
    """RESUME_CHECK_HALF_MESSAGE puts its copy back as Java's toMessageExtBrokerInner makes it, waiting for no
    slave: on a SYNC_MASTER with no slave it succeeds, as in 4.9.4 (it failed waiting for one)."""
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", brokerRole="SYNC_MASTER") as broker, client_of(broker) as client:
            p = props(TRAN_MSG="true", PGROUP="txg", TAGS="T", WAIT="false", UNIQ_KEY="AB" * 16)
            sent = await client.invoke(send_v2("Tx", b"parked", queue_id=1, properties=p, f=4, a="txg", g=5))
            assert sent.code == ResponseCode.SUCCESS  # WAIT=false: no slave waited for
            msg_id = (sent.ext_fields or {})["msgId"]
            r = await client.invoke(create_request(RequestCode.RESUME_CHECK_HALF_MESSAGE, {"msgId": msg_id}))
            assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
            await settle(broker)
            assert len(_read(broker, HALF)) == 2

    run(scenario())


def test_a_transaction_ended_at_once_commits_with_a_transient_store_pool(tmp_path: Path) -> None:
    """transientStorePoolEnable: the half message is in a write buffer until the commit service copies it into its
    file (200 ms, 4 pages). An END_TRANSACTION that comes at once, as producers send it, still finds it: the
    committed message is there for consumers then, not after the broker's check asks the producer again."""

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", transientStorePoolEnable="true", transientStorePoolSize="2",
                                  transactionCheckInterval="600000") as broker, \
                producer_of(broker) as producer:  # fmt: skip
            assert broker.store.services is not None and broker.store.services.commit is not None
            for i in range(3):
                half = await producer.send_half(f"at-once-{i}".encode())
                end = create_request(RequestCode.END_TRANSACTION, {
                    "producerGroup": "txg", "tranStateTableOffset": half["queueOffset"],
                    "commitLogOffset": decode_offset_message_id(half["msgId"])[1], "commitOrRollback": 8,
                    "fromTransactionCheck": False, "msgId": half["msgId"]})  # fmt: skip
                r = await producer.client.invoke(end)
                assert (r.code, r.remark) == (ResponseCode.SUCCESS, None)
            # The last committed message is readable at the commit service's next round (200 ms).
            await _until(lambda: broker.store.get_max_offset_in_queue("Tx", 1) == 3, 3, "three committed messages")
            pulled = decode_records((await producer.client.invoke(pull_request("g", "Tx", 1, 0,
                                                                               suspend_ms=3000))).body)  # fmt: skip
            assert [m.body for m in pulled] == [b"at-once-0", b"at-once-1", b"at-once-2"]
            assert producer.checks == []

    run(scenario())
