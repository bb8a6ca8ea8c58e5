"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325) over a real socket: the broker pushes the reply to the
requester named in REPLY_TO_CLIENT (PUSH_REPLY_MESSAGE_TO_CLIENT, 326), answers as Java's ReplyMessageProcessor
does, and stores the reply in its topic with the properties as sent."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_support import (
    Recorder,
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
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import create_request, make_response_for
from rocketq.remoting.transport import ProcessorTable, RemotingClient

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def reply_props(to: str | None, correlation: str = "corr-1") -> str:
    kv = {"MSG_TYPE": "reply", "CORRELATION_ID": correlation, "TTL": "3000", "UNIQ_KEY": "7F00000100002A9F0000000A"}
    if to is not None:
        kv["REPLY_TO_CLIENT"] = to
    return props(**kv)


def test_a_reply_is_pushed_to_the_requester_and_stored(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as responder:
            pushed = Recorder(lambda req: make_response_for(req, ResponseCode.SUCCESS))
            table = ProcessorTable()
            table.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, pushed)
            requester = RemotingClient(broker.broker_addr, processors=table)
            try:
                hb = await requester.invoke(heartbeat("10.0.0.9@requester", "", {}, producer_groups=("ReqGroup",)))
                assert hb.code == ResponseCode.SUCCESS
                sent = props(**{"MSG_TYPE": "reply", "CORRELATION_ID": "corr-1", "REPLY_TO_CLIENT":
                                "10.0.0.9@requester", "TTL": "3000", "UNIQ_KEY": "7F00000100002A9F0000000A",
                                "TAGS": "ReplyTag"})  # fmt: skip
                answer = await responder.invoke(send_v2(REPLY_TOPIC, b"the answer", properties=sent, h=3,
                                                        code=RequestCode.SEND_REPLY_MESSAGE_V2))  # fmt: skip
            finally:
                await requester.close()
            assert answer.code == ResponseCode.SUCCESS and answer.remark is None
            ext = answer.ext_fields or {}
            assert ext["queueId"] == "0" and ext["queueOffset"] == "0" and ext["msgId"] != "0"  # the stored one's
            assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
            # The push: ReplyMessageRequestHeader (long names), the body as sent, PUSH_REPLY_TIME added.
            (push,) = pushed.requests
            assert push.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and push.body == b"the answer"
            h = push.ext_fields or {}
            assert h["topic"] == REPLY_TOPIC and h["producerGroup"] == "pg" and h["flag"] == "3"
            assert h["queueId"] == "0" and h["sysFlag"] == "0" and h["bornTimestamp"] == "1795307277238"
            assert h["storeHost"] == broker.broker_addr and h["bornHost"].startswith("127.0.0.1:")
            assert int(h["storeTimestamp"]) > 0 and h["unitMode"] == "false"
            pushed_props = dict(p.split("\x01") for p in h["properties"].split("\x02"))
            assert pushed_props["CORRELATION_ID"] == "corr-1" and int(pushed_props["PUSH_REPLY_TIME"]) > 0
            # Stored in the reply topic with the properties exactly as the responder sent them.
            await settle(broker)
            pulled = await responder.invoke(pull_request("g", REPLY_TOPIC, 0, 0))
            (stored,) = decode_records(pulled.body)
            assert stored.body == b"the answer" and stored.flag == 3
            assert stored.properties_bytes == sent.encode() and "PUSH_REPLY_TIME" not in stored.properties
            assert stored.msg_id == ext["msgId"]

    run(scenario())


def test_a_reply_nobody_can_take_is_refused_with_javas_remark_but_stored(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s") as broker, client_of(broker) as responder:
            unknown = await responder.invoke(send_v2(REPLY_TOPIC, b"r1", properties=reply_props("1.2.3.4@gone"),
                                                     code=RequestCode.SEND_REPLY_MESSAGE_V2))  # fmt: skip
            assert unknown.code == ResponseCode.SYSTEM_ERROR
            assert unknown.remark == "push reply message fail, channel of <1.2.3.4@gone> not found."
            assert (unknown.ext_fields or {})["queueOffset"] == "0"  # stored all the same
            long_form = {"producerGroup": "pg", "topic": REPLY_TOPIC, "defaultTopic": "TBW102",
                         "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0, "bornTimestamp": 5, "flag": 0,
                         "properties": reply_props(None)}  # fmt: skip
            nobody = await responder.invoke(create_request(RequestCode.SEND_REPLY_MESSAGE, long_form, b"r2"))
            assert nobody.code == ResponseCode.SYSTEM_ERROR
            assert nobody.remark == "reply message properties[REPLY_TO_CLIENT] is null"
            assert (nobody.ext_fields or {})["queueOffset"] == "1"
            await settle(broker)
            pulled = await responder.invoke(pull_request("g", REPLY_TOPIC, 0, 0))
            assert [m.body for m in decode_records(pulled.body)] == [b"r1", b"r2"]

    run(scenario())


def test_a_failed_push_and_store_reply_message_enable_off(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path / "s", storeReplyMessageEnable="false") as broker, \
                client_of(broker) as responder:  # fmt: skip
            refusing = Recorder(lambda req: make_response_for(req, ResponseCode.SYSTEM_ERROR, "no thanks"))
            table = ProcessorTable()
            table.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, refusing)
            requester = RemotingClient(broker.broker_addr, processors=table)
            try:
                await requester.invoke(heartbeat("10.0.0.9@req", "", {}, producer_groups=("ReqGroup",)))
                refused = await responder.invoke(send_v2(REPLY_TOPIC, b"r", properties=reply_props("10.0.0.9@req"),
                                                         code=RequestCode.SEND_REPLY_MESSAGE_V2))  # fmt: skip
                assert refused.code == ResponseCode.SYSTEM_ERROR
                assert refused.remark == "push reply message to 10.0.0.9@reqfail."  # sic, as Java words it
                # A negative queue id: one is picked, as for a send.
                gone = await asyncio.wait_for(responder.invoke(send_v2(REPLY_TOPIC, b"r", queue_id=-1,
                                                                       properties=reply_props("nobody"),
                                                                       code=RequestCode.SEND_REPLY_MESSAGE_V2)), 10)
                assert gone.code == ResponseCode.SYSTEM_ERROR and "queueOffset" not in (gone.ext_fields or {})
            finally:
                await requester.close()
            # Nothing stored, and a bad topic is refused as a send is.
            await settle(broker)
            assert broker.store.get_max_offset_in_queue(REPLY_TOPIC, 0) == 0
            bad = await responder.invoke(send_v2("bad topic!", b"r", properties=reply_props("x"),
                                                 code=RequestCode.SEND_REPLY_MESSAGE_V2))  # fmt: skip
            assert bad.code == ResponseCode.INVALID_PARAMETER and "illegal characters" in (bad.remark or "")

    run(scenario())
