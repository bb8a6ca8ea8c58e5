"""The broker's topic table: RocketMQ's ``broker/topic/TopicConfigManager``.

The table itself, its data version and ``topics.json`` belong to the store
(:class:`rocketq.store.config_json.TopicConfigManager`, loaded with the store); this class adds what the
broker does with it (spec §6.1 step 3, §6.15):

- the system topics a broker creates at start (``TBW102`` when ``autoCreateTopicEnable``, the cluster- and
  broker-name topics, ``SELF_TEST_TOPIC``, ``BenchmarkTest``, ``OFFSET_MOVED_EVENT``,
  ``SCHEDULE_TOPIC_XXXX``, ``<cluster>_REPLY_TOPIC``, the two transaction topics, the trace topic when
  enabled); a ``topics.json`` entry wins over the built-in one, as in Java;
- ``create_topic_in_send_message``: auto-creation from a template topic whose perm has INHERIT;
- ``create_topic_in_send_message_back``: retry and DLQ topics (and ``%RETRY%`` topics sent to directly);
- every change bumps the data version, is persisted, and calls ``on_change`` (the controller registers
  the broker with the name servers again).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection

from rocketq.broker.broker_config import BrokerConfig
from rocketq.broker.topic_validator import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    REPLY_TOPIC_POSTFIX,
    RMQ_SYS_BENCHMARK_TOPIC,
    RMQ_SYS_OFFSET_MOVED_EVENT,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_SELF_TEST_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    is_inherited,
    is_system_topic,
)
from rocketq.store.config_json import DataVersion, TopicConfig
from rocketq.store.config_json import TopicConfigManager as TopicConfigTable

log = logging.getLogger(__name__)

SCHEDULE_TOPIC_QUEUE_NUM = 18


class BrokerTopicConfigManager:
    """``TopicConfigManager`` of a broker, over the store's topic table."""

    def __init__(self, table: TopicConfigTable, config: BrokerConfig, *, schedule_queue_nums: int = 18) -> None:
        self.table = table
        self.config = config
        self.schedule_queue_nums = schedule_queue_nums or SCHEDULE_TOPIC_QUEUE_NUM
        self._lock = threading.RLock()
        # Topics of this broker that are system topics on top of TopicValidator's set.
        self.system_topics: set[str] = {config.broker_cluster_name, config.broker_name}
        #: Called after a topic was created or changed (the controller re-registers the broker).
        self.on_change: Callable[[TopicConfig], None] | None = None

    # --- start ------------------------------------------------------------------------------------
    def builtin_topics(self) -> list[TopicConfig]:
        """The topics a broker creates at start (``TopicConfigManager``'s constructor)."""
        c = self.config
        rw = PERM_READ | PERM_WRITE

        def topic(name: str, queues: int, perm: int = rw) -> TopicConfig:
            return TopicConfig(name, read_queue_nums=queues, write_queue_nums=queues, perm=perm)

        topics = [topic(RMQ_SYS_SELF_TEST_TOPIC, 1)]
        if c.auto_create_topic_enable:
            topics.append(topic(AUTO_CREATE_TOPIC_KEY_TOPIC, c.default_topic_queue_nums, PERM_INHERIT | rw))
        topics.append(topic(RMQ_SYS_BENCHMARK_TOPIC, 1024))
        topics.append(topic(c.broker_cluster_name, 16, PERM_INHERIT | (rw if c.cluster_topic_enable else 0)))
        topics.append(topic(c.broker_name, 1, PERM_INHERIT | (rw if c.broker_topic_enable else 0)))
        topics.append(topic(RMQ_SYS_OFFSET_MOVED_EVENT, 1))
        topics.append(topic(RMQ_SYS_SCHEDULE_TOPIC, self.schedule_queue_nums))
        if c.trace_topic_enable:
            topics.append(topic(c.msg_trace_topic_name, 1))
            self.system_topics.add(c.msg_trace_topic_name)
        reply = f"{c.broker_cluster_name}_{REPLY_TOPIC_POSTFIX}"
        topics.append(topic(reply, 1))
        self.system_topics.add(reply)
        topics.append(topic(RMQ_SYS_TRANS_HALF_TOPIC, 1))
        topics.append(topic(RMQ_SYS_TRANS_OP_HALF_TOPIC, 1))
        if c.timer_wheel_enable:  # 5.x's timer topic (rocketq's timer: broker/timer_message_service.py)
            topics.append(topic(SYSTEM_TOPIC_PREFIX + "wheel_timer", 1))
        return topics

    def add_builtin_topics(self) -> bool:
        """Add the built-in topics that ``topics.json`` does not have; True when any was added."""
        added = False
        with self._lock:
            for cfg in self.builtin_topics():
                if self.table.get(cfg.topic_name) is None:
                    self.table.put(cfg)
                    added = True
        if added:
            self.persist()
        return added

    # --- reading ------------------------------------------------------------------------------------
    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def is_system_topic(self, topic: str) -> bool:
        return is_system_topic(topic, self.system_topics)

    def is_order_topic(self, topic: str) -> bool:
        cfg = self.table.get(topic)
        return cfg is not None and cfg.order

    @property
    def data_version(self) -> DataVersion:
        return self.table.data_version

    def topic_config_table(self) -> dict[str, TopicConfig]:
        return dict(self.table.topic_config_table)

    # --- changing -----------------------------------------------------------------------------------
    def persist(self) -> None:
        try:
            self.table.persist()
        except OSError:
            log.exception("cannot persist %s", self.table.config_path)

    def _created(self, cfg: TopicConfig, announce: bool = True) -> None:
        self.persist()
        if announce and self.on_change is not None:
            self.on_change(cfg)

    def update_topic_config(self, cfg: TopicConfig, *, announce: bool = True) -> None:
        """``updateTopicConfig``: create or replace a topic (UPDATE_AND_CREATE_TOPIC). *announce*: let the broker
        register again with the name servers (False: the caller registers the change itself)."""
        with self._lock:
            self.table.put(cfg)
        self._created(cfg, announce)

    def update_order_topic_config(self, order_topics: Collection[str]) -> bool:
        """``updateOrderTopicConfig``: the topics a name server's ``ORDER_TOPIC_CONFIG`` names become ordered and
        every other stops being so (a name server answers a registration with that table); a change bumps the
        data version and is persisted. Whether anything changed."""
        changed = False
        with self._lock:
            for name, cfg in list(self.table.topic_config_table.items()):
                order = name in order_topics
                if cfg.order != order:
                    cfg.order = order
                    changed = True
                    log.info("update order topic config, topic=%s, order=%s", name, order)
            if changed:
                self.table.data_version.next_version()
        if changed:
            self.persist()
        return changed

    def delete_topic_config(self, topic: str) -> TopicConfig | None:
        with self._lock:
            old = self.table.remove(topic)
        if old is not None:
            self.persist()
        return old

    def create_topic_in_send_message(self, topic: str, default_topic: str, remote_address: str,
                                     client_default_topic_queue_nums: int,
                                     topic_sys_flag: int) -> TopicConfig | None:  # fmt: skip
        """``createTopicInSendMessageMethod``: a new topic shaped by a template topic with INHERIT."""
        with self._lock:
            cfg = self.table.get(topic)
            if cfg is not None:
                return cfg
            template = self.table.get(default_topic)
            if template is None:
                log.warning("create new topic failed, because the default topic[%s] does not exist, producer: %s",
                         default_topic, remote_address)  # fmt: skip
                return None
            perm = template.perm
            if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.config.auto_create_topic_enable:
                perm = PERM_READ | PERM_WRITE  # Java strips INHERIT from TBW102 when auto-creation is off
            if not is_inherited(perm):
                log.warning("create new topic failed, because the default topic[%s] has no perm [%d] producer: %s",
                         default_topic, perm, remote_address)  # fmt: skip
                return None
            queue_nums = max(0, min(client_default_topic_queue_nums, template.write_queue_nums))
            cfg = TopicConfig(topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums,
                              perm=perm & ~PERM_INHERIT, topic_filter_type=template.topic_filter_type,
                              topic_sys_flag=topic_sys_flag)  # fmt: skip
            self.table.put(cfg)
        log.info("create new topic by default topic %s: %s, producer: %s", default_topic, cfg, remote_address)
        self._created(cfg)
        return cfg

    def create_topic_in_send_message_back(self, topic: str, client_default_topic_queue_nums: int, perm: int,
                                          topic_sys_flag: int = 0) -> TopicConfig:  # fmt: skip
        """``createTopicInSendMessageBackMethod``: the topic as it is, or a new one with these queues and perm."""
        cfg = self.table.get(topic)
        if cfg is not None:
            return cfg
        with self._lock:
            cfg = self.table.get(topic)
            if cfg is not None:
                return cfg
            n = client_default_topic_queue_nums
            cfg = TopicConfig(topic, read_queue_nums=n, write_queue_nums=n, perm=perm, topic_sys_flag=topic_sys_flag)
            self.table.put(cfg)
        log.info("create new topic %s", cfg)
        self._created(cfg)
        return cfg

    # --- registration -------------------------------------------------------------------------------
    def build_topic_config_serialize_wrapper(self, only: TopicConfig | None = None) -> dict[str, object]:
        """``TopicConfigSerializeWrapper``: what REGISTER_BROKER carries and GET_ALL_TOPIC_CONFIG answers; with
        *only*, that topic alone and the current data version (``registerIncrementBrokerData``'s)."""
        with self._lock:
            version = DataVersion(counter=self.data_version.counter, timestamp=self.data_version.timestamp)
            table = {only.topic_name: only} if only is not None else dict(self.table.topic_config_table)
            return {"dataVersion": version, "topicConfigTable": table}
