"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE and END_TRANSACTION over a real socket (spec §6.1, §6.11)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from broker_support import client_of, decode_records, props, pull_request, run, running_broker, send_v2, settle
from rocketq.common.codec import encode_batch_body
from rocketq.common.message import Message
from rocketq.common.message_id import decode_offset_message_id
from rocketq.remoting.codes import RequestCode, ResponseCode, SerializeType
from rocketq.remoting.command import RemotingCommand, UnescapedCommand, create_request
from rocketq.remoting.transport import RemotingClient, RemotingConnection


def test_send_v2_v1_and_rocketmq_header_store_and_answer_like_java(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            r1 = await client.invoke(send_v2("T1", b"one", properties=props(TAGS="TagA", KEYS="k1", WAIT="true")))
            assert r1.code == ResponseCode.SUCCESS and r1.remark is None
            ext = r1.ext_fields or {}
            assert ext["queueId"] == "0" and ext["queueOffset"] == "0"
            assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
            (host, port), phys = decode_offset_message_id(ext["msgId"])
            assert (host, port, phys) == ("127.0.0.1", broker.port, 0)
            long_form = {"producerGroup": "pg", "topic": "T1", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                         "queueId": 0, "sysFlag": 0, "bornTimestamp": 5, "flag": 7,
                         "properties": props(TAGS="TagB"), "reconsumeTimes": 0, "unitMode": False}  # fmt: skip
            r2 = await client.invoke(create_request(RequestCode.SEND_MESSAGE, long_form, b"two"))
            assert r2.code == ResponseCode.SUCCESS and (r2.ext_fields or {})["queueOffset"] == "1"
            binary = RemotingClient(broker.broker_addr, serialize_type=SerializeType.ROCKETMQ)
            try:
                r3 = await binary.invoke(send_v2("T1", b"three", properties=props(TAGS="TagC")))
            finally:
                await binary.close()
            assert r3.code == ResponseCode.SUCCESS and r3.serialize_type == SerializeType.ROCKETMQ  # as 4.9.4 answers
            await settle(broker)
            pulled = await client.invoke(pull_request("g", "T1", 0, 0))
            msgs = decode_records(pulled.body)
            assert [m.body for m in msgs] == [b"one", b"two", b"three"]
            first = msgs[0]
            # WAIT is not stored, CLUSTER is added, the store host is the broker's address. No UNIQ_KEY is made
            # for a message sent without one (ali-ons sends none), as a 4.9.4 broker makes none: nor is there a
            # transactionId in the answer.
            assert "WAIT" not in first.properties and first.properties["CLUSTER"] == "DefaultCluster"
            assert "UNIQ_KEY" not in first.properties and "transactionId" not in ext
            assert first.msg_id == ext["msgId"] and not broker.store.query_message("T1", "", 32).messages
            assert first.store_host == ("127.0.0.1", broker.port) and first.born_host[0] == "127.0.0.1"
            assert msgs[1].flag == 7 and msgs[1].born_timestamp == 5

    run(scenario())


def test_a_send_answer_escapes_the_transaction_id_only_when_it_needs_it(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer carries the message's UNIQ_KEY as transactionId: a hex one goes out as an UnescapedCommand,
    any other text through the escaping encoder, and both read back as sent."""
    answers: list[RemotingCommand] = []
    enqueue = RemotingConnection._enqueue

    def spy(self: RemotingConnection, cmd: RemotingCommand) -> None:
        if cmd.is_response and cmd.ext_fields and "transactionId" in cmd.ext_fields:
            answers.append(cmd)
        enqueue(self, cmd)

    monkeypatch.setattr(RemotingConnection, "_enqueue", spy)

    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            odd = 'id "quoted" \\ tab\t é \u2028'
            for uniq in ("7F0000010001ABCDEF0123456789", odd):
                r = await client.invoke(send_v2("T1", b"x", properties=props(UNIQ_KEY=uniq)))
                assert r.code == ResponseCode.SUCCESS and (r.ext_fields or {})["transactionId"] == uniq
            assert [type(a) for a in answers] == [UnescapedCommand, RemotingCommand]

    run(scenario())


def test_batch_send_one_queue_consecutive_offsets_and_comma_joined_ids(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            items = [Message("B", f"m{i}".encode(), 0, {"KEYS": f"b{i}", "UNIQ_KEY": f"U{i}"}) for i in range(3)]
            request = send_v2("B", encode_batch_body(items), queue_id=1, properties=props(WAIT="true"),
                              code=RequestCode.SEND_BATCH_MESSAGE, m=True)  # fmt: skip
            r = await client.invoke(request)
            assert r.code == ResponseCode.SUCCESS
            ext = r.ext_fields or {}
            ids = ext["msgId"].split(",")
            assert len(ids) == 3 and ext["queueId"] == "1" and ext["queueOffset"] == "0"
            await settle(broker)
            pulled = decode_records((await client.invoke(pull_request("g", "B", 1, 0))).body)
            assert [m.queue_offset for m in pulled] == [0, 1, 2]
            assert [m.msg_id for m in pulled] == ids
            # Entry properties first, then the batch's own (WAIT from the header, CLUSTER); no UNIQ_KEY added.
            assert pulled[0].properties == {"KEYS": "b0", "UNIQ_KEY": "U0", "WAIT": "true", "CLUSTER": "DefaultCluster"}
            # A C++ client sends batches as code 310 with m="1".
            cpp = send_v2("B", encode_batch_body(items[:2]), queue_id=1, m="1")
            assert (await client.invoke(cpp)).ext_fields["queueOffset"] == "3"  # type: ignore[index]
            retry = send_v2("%RETRY%g", encode_batch_body(items), code=RequestCode.SEND_BATCH_MESSAGE, m=True)
            bad = await client.invoke(retry)
            assert bad.code == ResponseCode.MESSAGE_ILLEGAL and "retry group" in (bad.remark or "")

    run(scenario())


def test_send_errors_carry_java_codes_and_remarks(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", autoCreateTopicEnable="false", maxMessageSize="1024") as broker, \
                client_of(broker) as client:  # fmt: skip
            r = await client.invoke(send_v2("NoSuchTopic", b"x"))
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            assert r.remark == ("topic[NoSuchTopic] not exist, apply first please!\n"
                                "See http://rocketmq.apache.org/docs/faq/ for further details.")  # fmt: skip
            assert (r.ext_fields or {}).get("MSG_REGION") == "DefaultRegion"
            r = await client.invoke(send_v2("SCHEDULE_TOPIC_XXXX", b"x"))
            assert r.code == ResponseCode.NO_PERMISSION
            assert r.remark == "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."
            r = await client.invoke(send_v2("bad topic!", b"x"))
            assert r.code == ResponseCode.INVALID_PARAMETER and "illegal characters" in (r.remark or "")
            r = await client.invoke(send_v2("T" * 128, b"x"))
            assert r.code == ResponseCode.INVALID_PARAMETER and "longer than topic max length" in (r.remark or "")
            r = await client.invoke(send_v2("SELF_TEST_TOPIC", b"x"))
            assert r.code == ResponseCode.NO_PERMISSION
            r = await client.invoke(send_v2("BenchmarkTest", b"x", queue_id=5000))
            assert r.code == ResponseCode.INVALID_PARAMETER and "queueId[5000] is illegal" in (r.remark or "")
            r = await client.invoke(send_v2("BenchmarkTest", b"x" * 2000))
            assert r.code == ResponseCode.MESSAGE_ILLEGAL and "msg body length limit 1024B" in (r.remark or "")
            missing = create_request(RequestCode.SEND_MESSAGE_V2, {"a": "pg"}, b"x")
            r = await client.invoke(missing)
            assert r.code == ResponseCode.SYSTEM_ERROR and "the custom field <b> is null" in (r.remark or "")
            r = await client.invoke(send_v2("BenchmarkTest", b"ok", queue_id=-1))  # negative: a random queue
            assert r.code == ResponseCode.SUCCESS and 0 <= int((r.ext_fields or {})["queueId"]) < 1024

    run(scenario())


def test_max_message_size_limits_a_body_and_a_batch_as_sent(tmp_path: Path) -> None:
    """As 4.9.4: ``maxMessageSize`` limits a message's body (the encoder's check), not the record it makes, so a
    body of exactly the limit is stored; a batch is limited by its size as sent (``checkMessages``), not by its
    messages one by one."""
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", maxMessageSize="1024") as broker, client_of(broker) as client:
            p = props(TAGS="t", KEYS="k" * 50)
            assert (await client.invoke(send_v2("M", b"x" * 1024, properties=p))).code == ResponseCode.SUCCESS
            r = await client.invoke(send_v2("M", b"x" * 1025, properties=p))
            assert r.code == ResponseCode.MESSAGE_ILLEGAL and "body of 1025 bytes" in (r.remark or "")
            items = [Message("M", b"y" * 400, 0, {"KEYS": f"b{i}"}) for i in range(3)]
            two, three = encode_batch_body(items[:2]), encode_batch_body(items)
            assert len(two) <= 1024 < len(three)
            ok = await client.invoke(send_v2("M", two, code=RequestCode.SEND_BATCH_MESSAGE, m=True))
            assert ok.code == ResponseCode.SUCCESS
            r = await client.invoke(send_v2("M", three, code=RequestCode.SEND_BATCH_MESSAGE, m=True))
            assert r.code == ResponseCode.MESSAGE_ILLEGAL and f"batch of {len(three)} bytes" in (r.remark or "")
            await settle(broker)
            assert broker.store.get_max_offset_in_queue("M", 0) == 3

    run(scenario())


def test_a_queue_past_the_write_queues_but_not_the_read_ones_takes_sends(tmp_path: Path) -> None:
    """As 4.9.4's msgCheck (and its store, which checks no queue count): a send is refused only at or past the
    greater of the read and write queue counts. A producer whose route is a moment old, while a topic's write queues
    shrink, still sends to the queues being retired."""
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", autoCreateTopicEnable="false") as broker, \
                client_of(broker) as client:  # fmt: skip
            r = await client.invoke(create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "Shrinking", "defaultTopic": "TBW102", "readQueueNums": 8, "writeQueueNums": 4, "perm": 6,
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}))  # fmt: skip
            assert r.code == ResponseCode.SUCCESS
            for queue_id in (3, 5, 7):
                r = await client.invoke(send_v2("Shrinking", b"x", queue_id=queue_id))
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert (r.ext_fields or {})["queueId"] == str(queue_id)
            r = await client.invoke(send_v2("Shrinking", b"x", queue_id=8))
            assert r.code == ResponseCode.INVALID_PARAMETER and "queueId[8] is illegal" in (r.remark or "")
            await settle(broker)
            assert broker.store.get_max_offset_in_queue("Shrinking", 5) == 1

    run(scenario())


def test_auto_create_from_tbw102_takes_min_of_client_and_template_queues(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", defaultTopicQueueNums="3") as broker, client_of(broker) as client:
            assert (await client.invoke(send_v2("Auto", b"x"))).code == ResponseCode.SUCCESS
            cfg = broker.topic_config_manager.select_topic_config("Auto")
            assert cfg is not None and (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == (3, 3, 6)
            tbw = broker.topic_config_manager.select_topic_config("TBW102")
            assert tbw is not None and tbw.perm == 7
            # No template with INHERIT: not created.
            r = await client.invoke(send_v2("Other", b"x", c="SELF_TEST_TOPIC"))
            assert r.code == ResponseCode.TOPIC_NOT_EXIST

    run(scenario())


def test_transaction_half_commit_and_rollback(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            results = []
            for body in (b"commit-me", b"roll-me-back"):
                # a producer's id, as every transactional producer sends one (the broker makes none)
                tx_props = props(KEYS="tx", TRAN_MSG="true", PGROUP="txg", WAIT="true", TAGS="T",
                                 UNIQ_KEY=body.hex().upper())  # fmt: skip
                r = await client.invoke(send_v2("Tx", body, queue_id=1, properties=tx_props, f=4, a="txg"))
                assert r.code == ResponseCode.SUCCESS
                results.append(r.ext_fields or {})
            # The half messages sit in RMQ_SYS_TRANS_HALF_TOPIC queue 0; nothing is visible in Tx yet.
            # (the answer names the queue asked for)
            assert [int(e["queueOffset"]) for e in results] == [0, 1] and results[0]["queueId"] == "1"
            held = await client.invoke(pull_request("g", "Tx", 1, 0, suspend_ms=200))
            assert held.code == ResponseCode.PULL_NOT_FOUND
            for ext, action in zip(results, (8, 12), strict=True):
                end = create_request(RequestCode.END_TRANSACTION, {
                    "producerGroup": "txg", "tranStateTableOffset": ext["queueOffset"],
                    "commitLogOffset": decode_offset_message_id(ext["msgId"])[1], "commitOrRollback": action,
                    "fromTransactionCheck": False, "msgId": ext["transactionId"]})  # fmt: skip
                assert (await client.invoke(end)).code == ResponseCode.SUCCESS
            pulled = decode_records((await client.invoke(pull_request("g", "Tx", 1, 0, suspend_ms=3000))).body)
            assert [m.body for m in pulled] == [b"commit-me"]
            committed = pulled[0]
            assert committed.sys_flag & 0xC == 8
            assert committed.prepared_transaction_offset == decode_offset_message_id(results[0]["msgId"])[1]
            await settle(broker)
            ops = decode_records((await client.invoke(pull_request("g", "RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, 0))).body)
            assert [(m.tags, m.body) for m in ops] == [("d", b"0"), ("d", b"1")]
            wrong = create_request(RequestCode.END_TRANSACTION, {
                "producerGroup": "other", "tranStateTableOffset": 0,
                "commitLogOffset": decode_offset_message_id(results[0]["msgId"])[1], "commitOrRollback": 8,
                "msgId": "x"})  # fmt: skip
            r = await client.invoke(wrong)
            assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "The producer group wrong"

    run(scenario())


def test_oneway_send_is_stored_without_answer(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as client:
            await client.invoke_oneway(send_v2("OW", b"fire-and-forget"))
            # A new queue's first consume-queue file is made by the reput thread, a few ms later under load:
            # bounded by time, not by a count of pulls that can all come before it.
            deadline = asyncio.get_running_loop().time() + 10
            while True:
                r = await client.invoke(pull_request("g", "OW", 0, 0, sys_flag=4))
                if r.code == ResponseCode.SUCCESS or asyncio.get_running_loop().time() > deadline:
                    break
                await asyncio.sleep(0.01)
            assert [m.body for m in decode_records(r.body)] == [b"fire-and-forget"]

    run(scenario())


def test_full_send_queue_answers_system_busy(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", sendThreadPoolQueueCapacity="0") as broker, \
                client_of(broker) as client:  # fmt: skip
            r = await client.invoke(send_v2("Busy", b"x"))
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_BUSY,
                                          "[OVERLOAD]system busy, start flow control for a while")  # fmt: skip

    run(scenario())


def test_sends_wait_for_the_flush_under_sync_flush_and_answer_at_once_under_async(tmp_path: Path) -> None:
    """Under ASYNC_FLUSH the send processor answers without awaiting; under SYNC_FLUSH it hands the transport an
    awaitable that completes once the group commit has the record on disk."""

    async def scenario(flush: str) -> tuple[bool, list[str]]:
        async with running_broker(tmp_path / flush, flushDiskType=flush) as broker, client_of(broker) as client:
            conn = await client.connect()
            server_side = broker.remoting_server.connections[0]
            direct = broker.send_message_processor.process_request(server_side, send_v2("F", b"direct"))
            waited = not isinstance(direct, RemotingCommand)
            if waited:
                direct = await direct  # type: ignore[misc]
            assert isinstance(direct, RemotingCommand) and direct.code == ResponseCode.SUCCESS
            one = await conn.invoke(send_v2("F", b"one"))
            items = [Message("F", f"b{i}".encode(), 0, {}) for i in range(2)]
            body = encode_batch_body(items)
            batch = await conn.invoke(send_v2("F", body, code=RequestCode.SEND_BATCH_MESSAGE, m=True))
            assert one.code == batch.code == ResponseCode.SUCCESS
            if flush == "SYNC_FLUSH":  # acknowledged means flushed
                end = broker.store.commit_log.get_max_offset()
                assert broker.store.get_flushed_offset() >= end
            return waited, [(direct.ext_fields or {})["queueOffset"], (one.ext_fields or {})["queueOffset"],
                            (batch.ext_fields or {})["queueOffset"]]  # fmt: skip

    assert run(scenario("ASYNC_FLUSH")) == (False, ["0", "1", "2"])
    assert run(scenario("SYNC_FLUSH")) == (True, ["0", "1", "2"])


_NUMBER_TEXTS = ["0", "5", "-1", "1023", "1024", "2147483647", "2147483648", "-2147483648", "007", "+5", " 5", "5 ",
                 "1795307277238", "999999999999999999", "9223372036854775807", "9223372036854775808",
                 "99999999999999999999", "\u0663", "1_000", "", "x"]  # fmt: skip


@pytest.mark.parametrize("born", _NUMBER_TEXTS)
@pytest.mark.parametrize("queue_id", ["3", "1024", "2147483647", "2147483648", "03", "\u0663"])
def test_the_v2_header_parse_reads_numbers_as_the_careful_parse_does(born: str, queue_id: str) -> None:
    """The one-pass V2 parse (used for every send) gives what the field-by-field getters give, or leaves the
    header to them: born timestamps and queue ids in every writing, canonical or not, in range or not."""
    from rocketq.broker.send_message_processor import _parse_v2_fast
    from rocketq.remoting.command import HeaderFieldError, HeaderFields

    fields = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": queue_id, "f": "0", "g": born, "h": "0"}
    fast = _parse_v2_fast(fields)
    view = HeaderFields(fields)
    try:
        careful = (view.get_int("e"), view.get_long("g"))
    except HeaderFieldError:
        careful = None
    if fast is not None:
        assert careful == (fast.queue_id, fast.born_timestamp)
    else:
        # Left to the careful parse: anything it refuses, or a writing Python would not write back.
        assert careful is None or str(careful[0]) != queue_id or str(careful[1]) != born


def test_concurrent_sends_under_sync_flush_all_succeed(tmp_path: Path) -> None:
    """Many sends in flight under SYNC_FLUSH, on one connection and on several: the ones that arrive in one read
    wait for the same group-commit round, and every one is answered SUCCESS once flushed, at its own queue offset.
    (Each send's processor takes its first step before it becomes a task; a round's future awaited that way by
    several sends at once made all but the first fail with SYSTEM_ERROR, though their messages were stored.)"""

    async def scenario() -> None:
        async with running_broker(tmp_path / "s", flushDiskType="SYNC_FLUSH") as broker, \
                contextlib.AsyncExitStack() as stack:  # fmt: skip
            clients = [await stack.enter_async_context(client_of(broker)) for _ in range(3)]
            sends = [client.invoke(send_v2("SyncConc", f"m{c}-{i}".encode()))
                     for i in range(40) for c, client in enumerate(clients)]  # fmt: skip
            answers = await asyncio.gather(*sends)
            assert [(r.code, r.remark) for r in answers if r.code != ResponseCode.SUCCESS] == []
            offsets = sorted(int((r.ext_fields or {})["queueOffset"]) for r in answers)
            assert offsets == list(range(len(sends)))
            assert broker.store.get_flushed_offset() >= broker.store.commit_log.get_max_offset()

    run(scenario())
