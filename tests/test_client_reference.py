"""The end-to-end scenarios of ``test_client_e2e.py`` against the real Apache RocketMQ 4.9.4 (opt-in).

Runs only where ``RMQ_HOME`` points at an unpacked 4.9.4 binary release (see
``shared/reference/README.md``): a name server and a broker are started with ``rmq-reference.sh`` on free
127.0.0.1 ports in a temporary work directory, and stopped afterwards. CI has no RocketMQ: these tests
are skipped there.

One difference is RocketMQ's, not the client's: a 4.9.4 broker answers QUERY_CONSUMER_OFFSET with 0 for
a group that never committed on a queue whose messages are all in memory (it ignores the 5.x
``setZeroIfNotFound`` field), so a new group on a young topic starts at 0 whatever its
``ConsumeFromWhere``; the timestamp scenario only checks that the new messages arrive.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import test_client_e2e as e2e
from reference_support import rocketmq_running

pytestmark = pytest.mark.reference

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[e2e.Cluster]:
    with rocketmq_running(tmp_path_factory.mktemp("rmq-reference"), "enablePropertyFilter=true") as (_, ns, _):
        yield e2e.Cluster(ns, "rocketmq-4.9.4")


def test_send_every_way_and_pull(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_send_every_way_and_pull(cluster))


def test_tag_filtered_push_consumer(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_tag_filtered_push(cluster))


def test_sql92_filtered_consumers(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_sql92_filtered_consumers(cluster))


def test_orderly_consumption_keeps_queue_order_across_a_restart(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_orderly_across_restart(cluster))


def test_orderly_queues_pass_between_members_in_order(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_orderly_member_joins(cluster))


def test_clustering_members_join_and_leave_while_producing(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_clustering_join_and_leave(cluster))


def test_broadcasting_gives_every_member_every_message(cluster: e2e.Cluster, tmp_path: Path) -> None:
    e2e.run(e2e.scenario_broadcasting(cluster, tmp_path))


def test_retry_then_dead_letter_queue(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_retry_and_dlq(cluster))


def test_consume_from_timestamp(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_consume_from_timestamp(cluster, exact=False))


def test_reset_offset_of_an_online_group(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_reset_offset_of_an_online_group(cluster))


def test_lite_pull_consumer(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_lite_pull(cluster))


def test_flow_control_by_cached_count(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_flow_control(cluster))


def test_cli_produce_and_consume(cluster: e2e.Cluster) -> None:
    e2e.test_cli_produce_and_consume(cluster)


def test_blocking_api(cluster: e2e.Cluster) -> None:
    e2e.test_blocking_api(cluster)


def test_request_reply(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_request_reply(cluster))


def test_admin_calls_to_a_consumer(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_admin_calls_to_a_consumer(cluster))


def test_sends_without_a_writable_queue(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_sends_without_a_writable_queue(cluster))


def test_groups_are_checked_at_start(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_groups_are_checked_at_start(cluster))


def test_a_hung_listener_is_let_go_after_the_consume_timeout(cluster: e2e.Cluster) -> None:
    e2e.run(e2e.scenario_a_hung_listener_is_let_go_after_the_consume_timeout(cluster))
