"""The compiled SQL92 subscriptions of consumer groups: RocketMQ's ``broker/filter/ConsumerFilterManager`` and
``ConsumerFilterData``.

A pull without its subscription in the request (how push consumers pull) is filtered with what the group's
heartbeats registered here: per topic and group, the expression, its type, the client's subscription version
(``clientVersion``), when it was registered (``bornTime``) and, once no client of the group subscribes any more,
when it died (``deadTime``). A newer version replaces an older one; an older or equal version never replaces what
is registered (a heartbeat of a client that has not seen the change yet). Tag subscriptions are not kept.

The table is persisted as ``consumerFilter.json`` (through the store's
:class:`rocketq.store.config_json.ConsumerFilterManager`) with the broker's other configuration, so that pulls
after a restart find the filters before the next heartbeat; entries loaded from the file count as dead since 30 s
before the start, as Java's ``decode`` marks them, and entries dead for ``filterDataCleanTimeSpan`` (24 h) are
dropped when the file is written. Java's bloom filter data (``bloomFilterData``, used with
``enableCalcFilterBitMap``, which rocketq does not build) is kept as loaded and written back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rocketq.common.heartbeat import EXPRESSION_TYPE_SQL92, SubscriptionData, is_tag_type
from rocketq.common.sql92 import Selector, SelectorError, compile_selector
from rocketq.store.config_json import ConsumerFilterManager as ConsumerFilterFile

__all__ = [
    "FILTER_DATA_CLEAN_TIME_SPAN_MS",
    "ConsumerFilterData",
    "ConsumerFilterManager",
    "compile_expression",
]

log = logging.getLogger(__name__)

#: The members of an entry of ``consumerFilter.json`` that :class:`ConsumerFilterData` holds; others are kept as read.
_FIELDS = frozenset({"consumerGroup", "topic", "expression", "expressionType", "clientVersion", "bornTime", "deadTime"})

#: ``BrokerConfig.filterDataCleanTimeSpan``: how long a dead entry stays.
FILTER_DATA_CLEAN_TIME_SPAN_MS = 24 * 3600 * 1000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def compile_expression(expression_type: str | None, expression: str | None) -> Selector:
    """``FilterFactory.INSTANCE.get(type).compile(expression)``; raises :class:`SelectorError` for a bad expression
    or a type no filter handles (4.9 has SQL92 only)."""
    if expression_type != EXPRESSION_TYPE_SQL92:
        raise SelectorError(f"no filter for expression type {expression_type!r}")
    return compile_selector(expression or "")


@dataclass
class ConsumerFilterData:
    """``ConsumerFilterData``: one group's compiled subscription of one topic."""

    consumer_group: str
    topic: str
    expression: str
    expression_type: str
    client_version: int
    born_time: int = field(default_factory=_now_ms)
    dead_time: int = 0
    selector: Selector | None = field(default=None, repr=False)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)  # fields of the file rocketq does not use

    @property
    def is_dead(self) -> bool:
        return self.dead_time >= self.born_time

    def how_long_after_death(self, now: int) -> int:
        return now - self.dead_time if self.is_dead else -1

    def to_json(self) -> dict[str, Any]:
        return {**self.extra, "consumerGroup": self.consumer_group, "topic": self.topic,
                "expression": self.expression, "expressionType": self.expression_type,
                "clientVersion": self.client_version, "bornTime": self.born_time,
                "deadTime": self.dead_time}  # fmt: skip


def build(topic: str, group: str, expression: str | None, expression_type: str | None,
          client_version: int) -> ConsumerFilterData | None:  # fmt: skip
    """``ConsumerFilterManager.build``: None for a tag subscription or an expression that does not compile."""
    if is_tag_type(expression_type):
        return None
    try:
        selector = compile_expression(expression_type, expression)
    except SelectorError as e:
        log.warning("the %s expression of group %s on topic %s does not compile: %s", expression_type, group, topic,
                    e)  # fmt: skip
        return None
    return ConsumerFilterData(group, topic, expression or "", expression_type or "", client_version,
                              selector=selector)  # fmt: skip


class ConsumerFilterManager:
    """Topic → group → :class:`ConsumerFilterData`, kept in the store's ``consumerFilter.json``."""

    def __init__(self, clean_time_span_ms: int = FILTER_DATA_CLEAN_TIME_SPAN_MS) -> None:
        self._file: ConsumerFilterFile | None = None
        self.clean_time_span_ms = clean_time_span_ms
        self._lock = threading.Lock()  # the table is written on the loop and read by the persisting thread
        self.filter_data_by_topic: dict[str, dict[str, ConsumerFilterData]] = {}
        self.dirty = False

    def attach(self, file: ConsumerFilterFile) -> None:
        """Take the entries of the store's ``consumerFilter.json`` (once the store has loaded it) and write back
        there from now on."""
        self._file = file
        table = file.filter_data_by_topic
        dead_time = _now_ms() - 30_000
        for topic, by_topic in table.items():
            groups = by_topic.get("groupFilterData") if isinstance(by_topic, dict) else None
            if not isinstance(groups, dict):
                continue
            for group, raw in groups.items():
                if not isinstance(raw, dict):
                    continue
                try:
                    data = ConsumerFilterData(str(raw.get("consumerGroup") or group), str(raw.get("topic") or topic),
                                              str(raw.get("expression") or ""), str(raw.get("expressionType") or ""),
                                              int(raw.get("clientVersion") or 0), int(raw.get("bornTime") or 0),
                                              int(raw.get("deadTime") or 0),
                                              extra={k: v for k, v in raw.items() if k not in _FIELDS})  # fmt: skip
                except (TypeError, ValueError):
                    log.warning("consumerFilter.json: entry %s/%s is not readable; ignored", topic, group)
                    continue
                try:
                    data.selector = compile_expression(data.expression_type, data.expression)
                except SelectorError as e:
                    log.warning("consumerFilter.json: %s/%s does not compile: %s", topic, group, e)
                if data.dead_time == 0:
                    data.dead_time = max(dead_time, data.born_time)
                self.filter_data_by_topic.setdefault(str(topic), {})[str(group)] = data

    # --- registering ---------------------------------------------------------------------------------
    def register_group(self, group: str, subscriptions: Iterable[SubscriptionData]) -> None:
        """``register(consumerGroup, subList)``: each SQL92 subscription of a heartbeat; the group's entries of
        topics it no longer subscribes die."""
        subs = list(subscriptions)
        for sub in subs:
            self.register(sub.topic, group, sub.sub_string, sub.expression_type, sub.sub_version)
        topics = {sub.topic for sub in subs}
        now = _now_ms()
        with self._lock:
            for by_group in self.filter_data_by_topic.values():
                data = by_group.get(group)
                if data is not None and data.topic not in topics and not data.is_dead:
                    data.dead_time = now
                    self.dirty = True

    def register(self, topic: str, group: str, expression: str | None, expression_type: str | None,
                 client_version: int) -> bool:  # fmt: skip
        """One subscription; True when the table changed."""
        if is_tag_type(expression_type) or not expression:
            return False
        with self._lock:
            by_group = self.filter_data_by_topic.setdefault(topic, {})
            old = by_group.get(group)
            if old is None or client_version > old.client_version:
                data = build(topic, group, expression, expression_type, client_version)
                if data is None:
                    return False
                if old is not None:
                    log.warning("group %s topic %s: filter %s %r replaced by %s %r (version %d > %d)", group, topic,
                                old.expression_type, old.expression, expression_type, expression, client_version,
                                old.client_version)  # fmt: skip
                by_group[group] = data
                self.dirty = True
                return True
            if (old.expression_type, old.expression) != (expression_type, expression):
                log.warning("group %s topic %s: ignored filter %s %r of version %d, %d has %s %r", group, topic,
                            expression_type, expression, client_version, old.client_version, old.expression_type,
                            old.expression)  # fmt: skip
            if client_version == old.client_version and old.is_dead:
                old.dead_time = 0  # reAlive
                self.dirty = True
                return True
            return False

    def unregister(self, group: str) -> None:
        """``unRegister``: the group's last client left; its entries die (and are dropped a day later)."""
        now = _now_ms()
        with self._lock:
            for by_group in self.filter_data_by_topic.values():
                data = by_group.get(group)
                if data is not None and not data.is_dead:
                    data.dead_time = now
                    self.dirty = True

    # --- reading -------------------------------------------------------------------------------------
    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        by_group = self.filter_data_by_topic.get(topic)
        return by_group.get(group) if by_group else None

    # --- persisting ----------------------------------------------------------------------------------
    def to_file(self) -> None:
        """Write the table into the store's ``consumerFilter.json`` manager (after dropping long-dead entries);
        the store persists it with its other configuration."""
        now = _now_ms()
        with self._lock:
            table: dict[str, object] = {}
            for topic, by_group in list(self.filter_data_by_topic.items()):
                for group, data in list(by_group.items()):
                    if data.how_long_after_death(now) >= self.clean_time_span_ms:
                        del by_group[group]
                if not by_group:
                    del self.filter_data_by_topic[topic]
                    continue
                table[topic] = {"topic": topic, "groupFilterData": {g: d.to_json() for g, d in by_group.items()}}
            self.dirty = False
        if self._file is not None:
            self._file.filter_data_by_topic = table

    def persist(self) -> None:
        """Write ``consumerFilter.json`` if the table changed since the last time."""
        if self._file is not None and self.dirty:
            self.to_file()
            self._file.persist()
