"""A slave broker's copy of its master's metadata: RocketMQ's ``broker/slave/SlaveSynchronize``.

The commit log reaches a slave through replication (:mod:`rocketq.store.ha`); what lives beside it in
``config/`` does not. Every 10 s (the first time 3 s after start) a slave asks its master, at the remoting address
the name server gave it (``masterAddr`` of the REGISTER_BROKER answer), for

- GET_ALL_TOPIC_CONFIG: the topic table, taken whole when its data version differs from the slave's;
- GET_ALL_CONSUMER_OFFSET: the consumer offsets, merged over the slave's (the master's win);
- GET_ALL_DELAY_OFFSET: the delay levels' progress (``delayOffset.json``);
- GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the subscription groups, as the topics;

and writes each to its file. A master that cannot be reached is logged and asked again next time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rocketq.common.errors import StoreError
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import create_request
from rocketq.remoting.errors import RemotingError
from rocketq.store.config_json import ConfigManager, ConsumerOffsetManager, DataVersion

if TYPE_CHECKING:
    from rocketq.broker.broker_controller import BrokerController

__all__ = ["SLAVE_SYNC_DELAY_S", "SLAVE_SYNC_INTERVAL_S", "SlaveSynchronize"]

log = logging.getLogger(__name__)

SLAVE_SYNC_DELAY_S = 3.0
SLAVE_SYNC_INTERVAL_S = 10.0
TIMEOUT_S = 3.0


class SlaveSynchronize:
    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller
        #: The master's remoting address (``masterAddr``), None until a name server has named it.
        self.master_addr: str | None = None
        self.synced = 0  # rounds that reached the master, for tests and status

    async def _fetch(self, code: int) -> str | None:
        addr = self.master_addr
        if not addr or addr == self.controller.broker_addr:
            return None
        response = await self.controller.outer_api.client.invoke(create_request(code), TIMEOUT_S, addr=addr)
        if response.code != ResponseCode.SUCCESS:
            raise RemotingError(f"{RequestCode(code).name}: {response.code} {response.remark or ''}".strip())
        return (response.body or b"{}").decode("utf-8")

    async def sync_all(self) -> None:
        """``syncAll``: topics, consumer offsets, delay offsets, subscription groups, each on its own."""
        if not self.master_addr:
            return
        reached = False
        for what, code, apply in (
            ("topic config", RequestCode.GET_ALL_TOPIC_CONFIG, self._apply_topics),
            ("consumer offsets", RequestCode.GET_ALL_CONSUMER_OFFSET, self._apply_offsets),
            ("delay offsets", RequestCode.GET_ALL_DELAY_OFFSET, self._apply_delay_offsets),
            ("subscription groups", RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self._apply_groups),
        ):
            try:
                text = await self._fetch(code)
                if text is not None:
                    reached = True
                    await asyncio.to_thread(apply, text)
            except (RemotingError, OSError, StoreError, ValueError) as exc:
                log.warning("slave synchronize: %s from master %s failed: %s", what, self.master_addr, exc)
        if reached:
            self.synced += 1

    @staticmethod
    def _replace_versioned(table: ConfigManager, text: str) -> bool:
        """Take the master's table whole when its data version is not ours; True when it was taken."""
        incoming = type(table)(table.store_root)
        incoming.decode(text)
        version: DataVersion = incoming.data_version  # type: ignore[attr-defined]
        if version == table.data_version:  # type: ignore[attr-defined]
            return False
        table.decode(text)
        table.persist()
        return True

    def _apply_topics(self, text: str) -> None:
        if self._replace_versioned(self.controller.topic_config_manager.table, text):
            log.info("slave: topic config updated from master %s", self.master_addr)

    def _apply_groups(self, text: str) -> None:
        if self._replace_versioned(self.controller.subscription_group_manager.table, text):
            log.info("slave: subscription groups updated from master %s", self.master_addr)

    def _apply_offsets(self, text: str) -> None:
        mine = self.controller.consumer_offset_manager
        incoming = ConsumerOffsetManager(mine.store_root)
        incoming.decode(text)
        with mine._lock:  # the manager's own lock: the periodic persist may be reading the table
            mine.offset_table.update(incoming.offset_table)
        mine.persist()

    def _apply_delay_offsets(self, text: str) -> None:
        delay = self.controller.store.delay_offset_manager
        delay.decode(text)
        delay.persist()
