"""Queue allocation strategies give exactly what the Java 4.9.4 classes give for the same inputs.

The expected shares were printed by ``AllocateMessageQueueAveragely``, ``…AveragelyByCircle`` and
``…ConsistentHash`` of the RocketMQ 4.9.4 client jar (16 queues on two brokers, three members), so a
Python member and Java members of one group agree on who takes which queue.
"""

from __future__ import annotations

import pytest

from rocketq.client.allocate_strategy import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    strategy_by_name,
)
from rocketq.client.message_queue import MessageQueue

MQS = sorted(MessageQueue("TopicTest", b, i) for b in ("broker-a", "broker-b") for i in range(8))
CIDS = ["127.0.0.1@1", "127.0.0.1@2", "192.168.0.7@33#123"]

JAVA = {
    "AVG": {
        "127.0.0.1@1": "a0 a1 a2 a3 a4 a5",
        "127.0.0.1@2": "a6 a7 b0 b1 b2",
        "192.168.0.7@33#123": "b3 b4 b5 b6 b7",
    },
    "AVG_BY_CIRCLE": {
        "127.0.0.1@1": "a0 a3 a6 b1 b4 b7",
        "127.0.0.1@2": "a1 a4 a7 b2 b5",
        "192.168.0.7@33#123": "a2 a5 b0 b3 b6",
    },
    "CONSISTENT_HASH": {
        "127.0.0.1@1": "a1 a3 a4 a5 a7 b3 b7",
        "127.0.0.1@2": "a0 a6 b4 b5 b6",
        "192.168.0.7@33#123": "a2 b0 b1 b2",
    },
}


def short(mqs: list[MessageQueue]) -> str:
    return " ".join(f"{mq.broker_name[-1]}{mq.queue_id}" for mq in mqs)


@pytest.mark.parametrize(
    "strategy",
    [AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle(), AllocateMessageQueueConsistentHash()],
    ids=lambda s: s.name,
)
def test_shares_match_the_java_client(strategy: AllocateMessageQueueStrategy) -> None:
    assert isinstance(strategy, AllocateMessageQueueStrategy)
    for cid in CIDS:
        assert short(strategy.allocate("G", cid, MQS, CIDS)) == JAVA[strategy.name][cid]


@pytest.mark.parametrize("strategy", [AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle(),
                                      AllocateMessageQueueConsistentHash()], ids=lambda s: s.name)  # fmt: skip
@pytest.mark.parametrize("n_queues,n_members", [(1, 1), (3, 5), (8, 3), (16, 4), (7, 7), (32, 5)])
def test_every_queue_has_exactly_one_owner(strategy: AllocateMessageQueueStrategy, n_queues: int,
                                           n_members: int) -> None:  # fmt: skip
    mqs = sorted(MessageQueue("T", "b", i) for i in range(n_queues))
    cids = sorted(f"10.0.0.{i}@{i}" for i in range(n_members))
    owners: dict[MessageQueue, list[str]] = {}
    for cid in cids:
        for mq in strategy.allocate("G", cid, mqs, cids):
            owners.setdefault(mq, []).append(cid)
    assert sorted(owners) == mqs
    assert all(len(v) == 1 for v in owners.values())


def test_averagely_with_more_members_than_queues_leaves_the_last_ones_idle() -> None:
    mqs = MQS[:3]
    cids = ["a", "b", "c", "d", "e"]
    got = [short(AllocateMessageQueueAveragely().allocate("G", c, mqs, cids)) for c in cids]
    assert got == ["a0", "a1", "a2", "", ""]


def test_a_member_missing_from_the_list_gets_nothing() -> None:
    assert AllocateMessageQueueAveragely().allocate("G", "x@9", MQS, CIDS) == []


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="no message queue"):
        AllocateMessageQueueAveragely().allocate("G", CIDS[0], [], CIDS)
    with pytest.raises(ValueError, match="no consumer id"):
        AllocateMessageQueueAveragely().allocate("G", CIDS[0], MQS, [])


def test_consistent_hash_moves_few_queues_when_a_member_leaves() -> None:
    strategy = AllocateMessageQueueConsistentHash()
    before = {mq: cid for cid in CIDS for mq in strategy.allocate("G", cid, MQS, CIDS)}
    rest = CIDS[:2]
    after = {mq: cid for cid in rest for mq in strategy.allocate("G", cid, MQS, rest)}
    moved = [mq for mq in MQS if before[mq] != after[mq]]
    assert all(before[mq] == CIDS[2] for mq in moved)  # only the leaver's queues move


def test_by_config_and_names() -> None:
    mine = [MQS[0], MQS[5]]
    assert AllocateMessageQueueByConfig(mine).allocate("G", "anyone", MQS, CIDS) == mine
    assert isinstance(strategy_by_name("averagely"), AllocateMessageQueueAveragely)
    assert isinstance(strategy_by_name("AVG_BY_CIRCLE"), AllocateMessageQueueAveragelyByCircle)
    assert isinstance(strategy_by_name("hash"), AllocateMessageQueueConsistentHash)
    with pytest.raises(ValueError):
        strategy_by_name("nearby")
