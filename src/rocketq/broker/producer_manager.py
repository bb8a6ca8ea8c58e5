"""Producers seen through heartbeats: RocketMQ's ``broker/client/ProducerManager`` (spec §6.5, §6.6).

Group → {connection → :class:`ClientChannelInfo`}. The table answers GET_PRODUCER_CONNECTION_LIST and
names a live connection of a producer group, which is where a transaction check would go. A channel is
forgotten when its connection closes, on UNREGISTER_CLIENT, or 120 s after its last heartbeat; a group only on
UNREGISTER_CLIENT of its last channel, as in 4.9.4.
"""

from __future__ import annotations

import logging
import random

from rocketq.broker.consumer_manager import CHANNEL_EXPIRED_TIMEOUT_MS, ClientChannelInfo, now_ms
from rocketq.remoting.transport import RemotingConnection

log = logging.getLogger(__name__)


class ProducerManager:
    def __init__(self) -> None:
        self.group_channel_table: dict[str, dict[RemotingConnection, ClientChannelInfo]] = {}

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.group_channel_table.setdefault(group, {})
        old = channels.get(info.connection)
        if old is None:
            channels[info.connection] = info
            log.info("new producer connected, group: %s channel: %s", group, info.client_id)
            old = info
        old.last_update_timestamp = now_ms()

    def unregister_producer(self, group: str, info: ClientChannelInfo) -> None:
        channels = self.group_channel_table.get(group)
        if channels is None:
            return
        if channels.pop(info.connection, None) is not None:
            log.info("unregister a producer[%s] from groupChannelTable %s", group, info.client_id)
        if not channels:
            del self.group_channel_table[group]
            log.info("unregister a producer group[%s] from groupChannelTable", group)

    def do_channel_close_event(self, conn: RemotingConnection) -> None:
        for group, channels in list(self.group_channel_table.items()):
            if channels.pop(conn, None) is not None:
                log.info("NETTY EVENT: remove channel[%s] from ProducerManager groupChannelTable, producer group: %s",
                         conn.remote_address, group)  # fmt: skip
        # (a group left without channels stays, as in 4.9.4: producerConnection then lists no connection, where
        # a group never seen "does not exist"; only UNREGISTER_CLIENT forgets it)

    def scan_not_active_channel(self, now: int | None = None) -> list[RemotingConnection]:
        now = now_ms() if now is None else now
        expired: list[RemotingConnection] = []
        for group, channels in list(self.group_channel_table.items()):
            for conn, info in list(channels.items()):
                if now - info.last_update_timestamp > CHANNEL_EXPIRED_TIMEOUT_MS:
                    del channels[conn]
                    expired.append(conn)
                    log.warning("SCAN: remove expired channel[%s] from ProducerManager groupChannelTable, "
                                "producer group name: %s", conn.remote_address, group)  # fmt: skip
        return expired

    def get_available_channel(self, group: str) -> RemotingConnection | None:
        """A random live connection of the group (``getAvailableChannel``), for CHECK_TRANSACTION_STATE."""
        channels = [c for c in self.group_channel_table.get(group, {}) if not c.closed]
        return random.choice(channels) if channels else None

    def find_channel(self, client_id: str) -> RemotingConnection | None:
        for channels in self.group_channel_table.values():
            for conn, info in channels.items():
                if info.client_id == client_id and not conn.closed:
                    return conn
        return None
