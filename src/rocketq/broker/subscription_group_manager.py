"""Consumer groups of a broker: RocketMQ's ``broker/subscription/SubscriptionGroupManager``.

The table and ``subscriptionGroup.json`` belong to the store
(:class:`rocketq.store.config_json.SubscriptionGroupManager`); this class adds the built-in groups of
``init()`` and ``findSubscriptionGroupConfig``, which creates a group on first use when
``autoCreateSubscriptionGroup`` is on (default) or when it is a ``CID_RMQ_SYS_`` group (spec §6.3).
"""

from __future__ import annotations

import logging
import threading

from rocketq.broker.broker_config import BrokerConfig
from rocketq.broker.topic_validator import (
    CID_ONSAPI_OWNER_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_PULL_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    TOOLS_CONSUMER_GROUP,
    is_sys_consumer_group,
)
from rocketq.store.config_json import SubscriptionGroupConfig
from rocketq.store.config_json import SubscriptionGroupManager as SubscriptionGroupTable

log = logging.getLogger(__name__)


class BrokerSubscriptionGroupManager:
    """``SubscriptionGroupManager`` of a broker, over the store's group table."""

    def __init__(self, table: SubscriptionGroupTable, config: BrokerConfig) -> None:
        self.table = table
        self.config = config
        self._lock = threading.RLock()

    def add_builtin_groups(self) -> None:
        """``init()``: the tool and ONS groups, unless ``subscriptionGroup.json`` has them."""
        with self._lock:
            for name in (TOOLS_CONSUMER_GROUP, FILTERSRV_CONSUMER_GROUP, SELF_TEST_CONSUMER_GROUP):
                if self.table.get(name) is None:
                    self.table.subscription_group_table[name] = SubscriptionGroupConfig(name)
            for name in (ONS_HTTP_PROXY_GROUP, CID_ONSAPI_PULL_GROUP, CID_ONSAPI_PERMISSION_GROUP,
                         CID_ONSAPI_OWNER_GROUP):  # fmt: skip
                if self.table.get(name) is None:
                    self.table.subscription_group_table[name] = SubscriptionGroupConfig(
                        name, consume_broadcast_enable=True)

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created with the defaults when auto-creation allows it; else None."""
        cfg = self.table.get(group)
        if cfg is not None:
            return cfg
        if not (self.config.auto_create_subscription_group or is_sys_consumer_group(group)):
            return None
        with self._lock:
            cfg = self.table.get(group)
            if cfg is not None:
                return cfg
            cfg = SubscriptionGroupConfig(group)
            self.table.put(cfg)
        log.info("auto create a subscription group, %s", group)
        self.persist()
        return cfg

    def update_subscription_group_config(self, cfg: SubscriptionGroupConfig) -> None:
        with self._lock:
            self.table.put(cfg)
        self.persist()

    def delete_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        with self._lock:
            old = self.table.remove(group)
        if old is not None:
            self.persist()
        return old

    def persist(self) -> None:
        try:
            self.table.persist()
        except OSError:
            log.exception("cannot persist %s", self.table.config_path)
