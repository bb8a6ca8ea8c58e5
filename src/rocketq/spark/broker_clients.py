"""The broker clients of the Spark data source: one started client per process, kept for the next task.

Spark runs the source's and the sink's code in Python worker processes it reuses from task to task
(spec spark-datasource §2.1). Starting a client costs a name-server round trip, a connection and a
heartbeat, and stopping it the reverse; a task of a micro-batch often reads a few dozen messages. So
the clients here are made on first use in a process and kept (keyed by the process id too, since a
forked process cannot use its parent's event-loop thread): :func:`pull_consumer` and
:func:`producer` (:mod:`rocketq.client.blocking`). They go with the process; :func:`close_all`
stops them earlier, each within a bounded time (:func:`close_quietly`), so that a client whose shutdown
does not finish cannot hold a Spark task or a test. :class:`PatientConsumer` wraps a pull consumer so that
its calls wait for a broker out of reach (the source's reads, the sink's lookups).

Nothing here is needed for correctness: a pooled client is the same client a task would have made.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import Any

from rocketq.client.blocking import BlockingProducer, BlockingPullConsumer

log = logging.getLogger("rocketq.spark")

CLOSE_TIMEOUT = 5.0
_CLIENTS: dict[tuple[Any, ...], Any] = {}
_GUARD = threading.Lock()


def instance_name() -> str:
    """A client instance name of its own, so that the broker sees one member per client."""
    return f"rocketq-spark-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def pull_consumer(namesrv: str, group: str) -> BlockingPullConsumer:
    """A started pull consumer of *group* (nothing is committed with it), shared in this process."""
    key = ("pull", os.getpid(), namesrv, group)
    with _GUARD:
        client = _CLIENTS.get(key)
        if client is None:
            client = BlockingPullConsumer(group, namesrv, instance_name=instance_name()).start()
            _CLIENTS[key] = client
        return client  # type: ignore[no-any-return]


def producer(namesrv: str, group: str, send_timeout: float) -> BlockingProducer:
    """A started producer without the client's own send retries (the sink settles unknown outcomes itself)."""
    key = ("producer", os.getpid(), namesrv, group, send_timeout)
    with _GUARD:
        client = _CLIENTS.get(key)
        if client is None:
            client = BlockingProducer(group, namesrv, instance_name=instance_name(), send_timeout=send_timeout,
                                      retry_times_when_send_failed=0).start()  # fmt: skip
            _CLIENTS[key] = client
        return client  # type: ignore[no-any-return]


def close_quietly(client: Any, timeout: float = CLOSE_TIMEOUT) -> bool:
    """Shut *client* down, waiting at most *timeout* seconds; whether it finished. A shutdown that does
    not finish is left running in a daemon thread (logged), never waited for."""
    done = threading.Event()

    def stop() -> None:
        try:
            client.shutdown()
        except Exception as e:  # the client is going away either way
            log.info("rocketq: shutting a broker client down failed: %s", e)
        finally:
            done.set()

    threading.Thread(target=stop, name="rocketq-spark-close", daemon=True).start()
    if not done.wait(timeout):
        log.warning("rocketq: a broker client did not shut down within %.0f s; left behind", timeout)
        return False
    return True


def close_all(timeout: float = CLOSE_TIMEOUT) -> None:
    """Shut down the clients this process keeps (each within *timeout*)."""
    with _GUARD:
        mine = [k for k in _CLIENTS if k[1] == os.getpid()]
        clients = [_CLIENTS.pop(k) for k in mine]
    for client in clients:
        close_quietly(client, timeout)


class PatientConsumer:
    """A pull consumer whose calls are tried again while the broker or name server cannot be reached (a
    connection refused or lost, a timeout), for up to *patience* seconds from the first failure of a call: a
    broker restarting, or failing over, holds a query's micro-batches and tasks up for that long, as RocketMQ's
    own consumers pull again after ``pullTimeDelayMillsWhenException``, instead of ending the query."""

    def __init__(self, consumer: BlockingPullConsumer, patience: float) -> None:
        self._consumer = consumer
        self._patience = patience

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._consumer, name)
        if name not in _RETRIED or not callable(attr):
            return attr

        def patiently(*args: Any, **kwargs: Any) -> Any:
            deadline = time.monotonic() + self._patience
            delay = 0.5
            while True:
                try:
                    return attr(*args, **kwargs)
                except (ConnectionError, TimeoutError) as e:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise
                    log.warning("rocketq: %s: %s; trying again for %.0f s more (option brokerRetrySeconds)",
                                name, e, left)  # fmt: skip
                    time.sleep(min(delay, left))
                    delay = min(delay * 2, 5.0)

        return patiently


#: The calls :class:`PatientConsumer` tries again.
_RETRIED = frozenset({"fetch_subscribe_message_queues", "max_offset", "min_offset", "pull",
                      "query_message_by_unique_key"})
