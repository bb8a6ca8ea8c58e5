"""Consumers seen through heartbeats: RocketMQ's ``broker/client/ConsumerManager``, ``ConsumerGroupInfo``,
``ClientChannelInfo`` and the ``ConsumerIdsChangeListener`` events (spec §6.5, §6.6, §6.10).

A group holds the connections (channels) that heartbeated it, each with the client's id, language and
version, and one subscription per topic (a newer ``subVersion`` replaces an older one; a topic missing from
a heartbeat is dropped). When the set of channels or subscriptions of a group changes, the listener gets a
``CHANGE`` event with the group's live channels, on which the broker pushes NOTIFY_CONSUMER_IDS_CHANGED.
A channel is forgotten when its connection closes, on UNREGISTER_CLIENT, or 120 s after its last
heartbeat.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocketq.common.heartbeat import ConsumeType, SubscriptionData
from rocketq.remoting.codes import LanguageCode
from rocketq.remoting.transport import RemotingConnection

log = logging.getLogger(__name__)

#: ``CHANNEL_EXPIRED_TIMEOUT``: a client silent for this long is dropped.
CHANNEL_EXPIRED_TIMEOUT_MS = 120_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(eq=False)
class ClientChannelInfo:
    """``ClientChannelInfo``: one client connection, as its heartbeat described it."""

    connection: RemotingConnection
    client_id: str
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    last_update_timestamp: int = field(default_factory=now_ms)


class ConsumerGroupEvent(enum.Enum):
    CHANGE = "CHANGE"
    UNREGISTER = "UNREGISTER"
    REGISTER = "REGISTER"


ConsumerIdsChangeListener = Callable[..., None]


class ConsumerGroupInfo:
    """``ConsumerGroupInfo``: the channels and subscriptions of one group."""

    def __init__(self, group_name: str, consume_type: str | None, message_model: str | None,
                 consume_from_where: str | None) -> None:  # fmt: skip
        self.group_name = group_name
        self.channel_info_table: dict[RemotingConnection, ClientChannelInfo] = {}
        self.subscription_table: dict[str, SubscriptionData] = {}
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.last_update_timestamp = now_ms()

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        for info in self.channel_info_table.values():
            if info.client_id == client_id:
                return info
        return None

    def all_channels(self) -> list[RemotingConnection]:
        return list(self.channel_info_table)

    def all_client_ids(self) -> list[str]:
        return [info.client_id for info in self.channel_info_table.values()]

    def unregister_channel(self, info: ClientChannelInfo) -> bool:
        old = self.channel_info_table.pop(info.connection, None)
        if old is not None:
            log.info("unregister a consumer[%s] from consumerGroupInfo %s", self.group_name, old.client_id)
        return old is not None

    def do_channel_close_event(self, conn: RemotingConnection) -> bool:
        info = self.channel_info_table.pop(conn, None)
        if info is not None:
            log.warning("remove not active channel[%s] from ConsumerGroupInfo, consumer group: %s",
                        info.client_id, self.group_name)  # fmt: skip
            return True
        return False

    def update_channel(self, info_new: ClientChannelInfo, consume_type: str | None, message_model: str | None,
                       consume_from_where: str | None) -> bool:  # fmt: skip
        """``updateChannel``: True when the channel is new to the group."""
        updated = False
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        info_old = self.channel_info_table.get(info_new.connection)
        if info_old is None:
            self.channel_info_table[info_new.connection] = info_new
            log.info("new consumer connected, group: %s %s %s channel: %s", self.group_name, consume_type,
                     message_model, info_new.client_id)  # fmt: skip
            updated = True
            info_old = info_new
        elif info_old.client_id != info_new.client_id:
            log.error("consumer channel exists in broker, but clientId differs. group: %s old: %s new: %s",
                      self.group_name, info_old.client_id, info_new.client_id)  # fmt: skip
            self.channel_info_table[info_new.connection] = info_new
            info_old = info_new
        self.last_update_timestamp = now_ms()
        info_old.last_update_timestamp = self.last_update_timestamp
        return updated

    def update_subscription(self, sub_list: list[SubscriptionData]) -> bool:
        """``updateSubscription``: True when a topic was added or removed (a newer version replaces silently)."""
        updated = False
        topics = set()
        for sub in sub_list:
            topics.add(sub.topic)
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                updated = True
                log.info("subscription changed, add new topic, group: %s %s", self.group_name, sub.topic)
            elif sub.sub_version > old.sub_version:
                if self.consume_type == ConsumeType.CONSUME_PASSIVELY.name:
                    log.info("subscription changed, group: %s topic %s: %r -> %r", self.group_name, sub.topic,
                             old.sub_string, sub.sub_string)  # fmt: skip
                self.subscription_table[sub.topic] = sub
        for old_topic in list(self.subscription_table):
            if old_topic not in topics:
                log.warning("subscription changed, group: %s remove topic %s", self.group_name, old_topic)
                del self.subscription_table[old_topic]
                updated = True
        self.last_update_timestamp = now_ms()
        return updated

    def find_subscription_data(self, topic: str) -> SubscriptionData | None:
        return self.subscription_table.get(topic)


class ConsumerManager:
    """``ConsumerManager``: group name → :class:`ConsumerGroupInfo`."""

    def __init__(self, listener: ConsumerIdsChangeListener | None = None) -> None:
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        self.listener = listener

    def _fire(self, event: ConsumerGroupEvent, group: str, *args: Any) -> None:
        if self.listener is not None:
            try:
                self.listener(event, group, *args)
            except Exception:
                log.exception("consumer ids change listener failed for %s %s", event.name, group)

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.consumer_table.get(group)
        return info.find_channel(client_id) if info is not None else None

    def find_subscription_data(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumer_table.get(group)
        return info.find_subscription_data(topic) if info is not None else None

    def get_consumer_group_info(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumer_table.get(group)

    def find_subscription_data_count(self, group: str) -> int:
        info = self.consumer_table.get(group)
        return len(info.subscription_table) if info is not None else 0

    def register_consumer(self, group: str, info: ClientChannelInfo, consume_type: str | None,
                          message_model: str | None, consume_from_where: str | None,
                          sub_list: list[SubscriptionData], notify: bool = True) -> bool:  # fmt: skip
        """``registerConsumer``: True when the group's channels or subscribed topics changed."""
        group_info = self.consumer_table.get(group)
        if group_info is None:
            group_info = self.consumer_table[group] = ConsumerGroupInfo(group, consume_type, message_model,
                                                                        consume_from_where)  # fmt: skip
        r1 = group_info.update_channel(info, consume_type, message_model, consume_from_where)
        r2 = group_info.update_subscription(sub_list)
        if (r1 or r2) and notify:
            self._fire(ConsumerGroupEvent.CHANGE, group, group_info.all_channels())
        self._fire(ConsumerGroupEvent.REGISTER, group, sub_list)
        return r1 or r2

    def unregister_consumer(self, group: str, info: ClientChannelInfo, notify: bool = True) -> None:
        group_info = self.consumer_table.get(group)
        if group_info is None:
            return
        group_info.unregister_channel(info)
        if not group_info.channel_info_table and self.consumer_table.pop(group, None) is not None:
            log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
            self._fire(ConsumerGroupEvent.UNREGISTER, group)
        if notify:
            self._fire(ConsumerGroupEvent.CHANGE, group, group_info.all_channels())

    def do_channel_close_event(self, conn: RemotingConnection) -> None:
        for group, group_info in list(self.consumer_table.items()):
            if not group_info.do_channel_close_event(conn):
                continue
            if not group_info.channel_info_table and self.consumer_table.pop(group, None) is not None:
                log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
                self._fire(ConsumerGroupEvent.UNREGISTER, group)
            self._fire(ConsumerGroupEvent.CHANGE, group, group_info.all_channels())

    def scan_not_active_channel(self, now: int | None = None) -> list[RemotingConnection]:
        """Drop channels silent for 120 s; returns their connections (the caller closes them)."""
        now = now_ms() if now is None else now
        expired: list[RemotingConnection] = []
        for group, group_info in list(self.consumer_table.items()):
            for conn, info in list(group_info.channel_info_table.items()):
                if now - info.last_update_timestamp > CHANNEL_EXPIRED_TIMEOUT_MS:
                    log.warning("SCAN: remove expired channel from ConsumerManager consumerTable. channel=%s, "
                                "consumerGroup=%s", conn.remote_address, group)  # fmt: skip
                    del group_info.channel_info_table[conn]
                    expired.append(conn)
            if not group_info.channel_info_table:
                log.warning("SCAN: remove expired channel from ConsumerManager consumerTable, all clear, "
                            "consumerGroup=%s", group)  # fmt: skip
                del self.consumer_table[group]
        return expired

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {g for g, info in self.consumer_table.items() if topic in info.subscription_table}
