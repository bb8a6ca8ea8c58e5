"""Store settings under RocketMQ's own names: ``MessageStoreConfig`` (+ the few
``BrokerConfig`` values the store writes into records).

Attributes are snake_case; :meth:`MessageStoreConfig.from_properties` and
:func:`load_broker_conf` take the camelCase keys of a ``broker.conf``
(``storePathRootDir``, ``mappedFileSizeCommitLog``, ``maxHashSlotNum`` …).
Keys that are not store settings are ignored, as a broker would hand them to
another config object. Defaults are those of RocketMQ 4.9 (store-format §13).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketq.common.errors import StoreError

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_TIME_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return JAVA_NAMES.get(name) or head + "".join(p[:1].upper() + p[1:] for p in rest)


#: Attributes whose Java property name is not their camelCase (``MessageStoreConfig``'s field names).
JAVA_NAMES = {"broker_ip1": "brokerIP1", "check_crc_on_recover": "checkCRCOnRecover"}


@dataclass
class MessageStoreConfig:
    store_path_root_dir: str = field(default_factory=lambda: str(Path.home() / "store"))
    store_path_commit_log: str = ""  # default <root>/commitlog
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: str = ASYNC_FLUSH
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    flush_commit_log_timed: bool = True
    commit_interval_commit_log: int = 200
    commit_commit_log_least_pages: int = 4
    commit_commit_log_thorough_interval: int = 200
    sync_flush_timeout: int = 5000
    # rocketq's own: SYNC_FLUSH's fdatasync for an event loop's puts in a helper process (store/sync_helper.py).
    sync_flush_helper_enable: bool = True
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 5
    max_message_size: int = 1024 * 1024 * 4
    check_crc_on_recover: bool = True
    message_index_enable: bool = True
    message_index_safe: bool = False
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    max_msgs_num_batch: int = 64
    max_transfer_bytes_on_message_in_memory: int = 1024 * 256
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 1024 * 64
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    clean_resource_interval: int = 10_000
    delete_commit_log_files_interval: int = 100
    delete_consume_queue_files_interval: int = 100
    destroy_maped_file_interval_forcibly: int = 120_000
    clean_file_forcibly_enable: bool = True
    disk_space_warning_level_ratio: int = 90  # percent (5.x; 4.9: system property, 0.90)
    disk_space_clean_forcibly_ratio: int = 85  # percent (5.x; 4.9: system property, 0.85)
    delete_file_batch_max: int = 10
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    flush_delay_offset_interval: int = 10_000
    broker_role: str = "ASYNC_MASTER"
    # Master/slave replication (store/ha.py); the master's port is the broker's (haListenPort, listenPort + 1).
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20_000
    ha_transfer_batch_size: int = 32 * 1024
    ha_master_address: str | None = None
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    slave_timeout: int = 3000
    offset_check_in_slave: bool = False
    warm_maped_file_enable: bool = False
    max_topic_length: int = 127
    # BrokerConfig values the store needs.
    broker_ip1: str = "127.0.0.1"
    listen_port: int = 10911
    broker_cluster_name: str = "DefaultCluster"
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 8

    # --- derived -------------------------------------------------------------
    @property
    def root(self) -> Path:
        return Path(self.store_path_root_dir).expanduser()

    @property
    def commit_log_path(self) -> Path:
        return Path(self.store_path_commit_log).expanduser() if self.store_path_commit_log else self.root / "commitlog"

    @property
    def consume_queue_path(self) -> Path:
        return self.root / "consumequeue"

    @property
    def index_path(self) -> Path:
        return self.root / "index"

    @property
    def config_path(self) -> Path:
        return self.root / "config"

    @property
    def store_host(self) -> tuple[str, int]:
        return (self.broker_ip1, self.listen_port)

    def delay_level_table(self) -> dict[int, int]:
        """``messageDelayLevel`` parsed: level (1-based) → delay in ms."""
        table: dict[int, int] = {}
        for i, item in enumerate(self.message_delay_level.split(), start=1):
            unit = item[-1:]
            if unit not in _TIME_UNITS or not item[:-1].isdigit():
                raise StoreError(f"messageDelayLevel: bad level {item!r} (use e.g. 1s 5m 2h 1d)")
            table[i] = int(item[:-1]) * _TIME_UNITS[unit]
        return table

    # --- loading ---------------------------------------------------------------
    @classmethod
    def field_names(cls) -> dict[str, dataclasses.Field[Any]]:
        """camelCase property name → field."""
        return {_camel(f.name): f for f in dataclasses.fields(cls)}

    @classmethod
    def from_properties(cls, props: dict[str, str], **overrides: Any) -> MessageStoreConfig:
        cfg = cls()
        cfg.apply_properties(props)
        for k, v in overrides.items():
            setattr(cfg, k, v)
        return cfg

    def apply_properties(self, props: dict[str, str]) -> None:
        fields = self.field_names()
        for key, raw in props.items():
            f = fields.get(PROPERTY_ALIASES.get(key, key))
            if f is None:
                continue
            setattr(self, f.name, _convert(key, raw, f))


#: Earlier rocketq names of store settings, still read.
PROPERTY_ALIASES = {"brokerIp1": "brokerIP1", "checkCrcOnRecover": "checkCRCOnRecover"}


def _convert(key: str, raw: str, f: dataclasses.Field[Any]) -> Any:
    value = raw.strip()
    default = f.default if f.default is not dataclasses.MISSING else None
    if isinstance(default, bool):
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise StoreError(f"{key}: expected true or false, got {raw!r}")
    if isinstance(default, int):
        try:
            return int(value)
        except ValueError:
            raise StoreError(f"{key}: expected an integer, got {raw!r}") from None
    if key == "flushDiskType" and value not in (ASYNC_FLUSH, SYNC_FLUSH):
        raise StoreError(f"flushDiskType: expected ASYNC_FLUSH or SYNC_FLUSH, got {raw!r}")
    if key == "brokerRole" and value not in BROKER_ROLES:
        raise StoreError(f"brokerRole: expected one of {', '.join(BROKER_ROLES)}, got {raw!r}")
    return value


#: ``BrokerRole``: a master answers a put once stored (ASYNC) or once a slave holds it too (SYNC); a slave takes
#: its commit log from its master only (store/ha.py).
BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")

_CONT = re.compile(r"(\\+)$")


def parse_properties(text: str) -> dict[str, str]:
    """Parse a Java ``.properties`` text (``key=value``, ``key: value``, comments, continuations)."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while True:
            m = _CONT.search(line)
            if m and len(m.group(1)) % 2 == 1 and i < len(lines):
                line = line[:-1] + lines[i].lstrip()
                i += 1
            else:
                break
        m2 = re.match(r"((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", line)
        if m2:
            key, value = m2.group(1), m2.group(2)
        else:
            key, value = line, ""
        props[key.replace("\\", "")] = value.rstrip()
    return props


def update_properties_text(text: str, changes: dict[str, str]) -> str:
    """*text*, a ``.properties`` file, with each key of *changes* set: its line (and any continuation lines) is
    replaced where the key is set, else ``key=value`` is appended. Comments and other lines stay as they are."""
    out: list[str] = []
    done: set[str] = set()
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        stripped = line.lstrip()
        if not stripped or stripped[0] in "#!":
            out.append(line)
            continue
        logical = [line]
        while (m := _CONT.search(logical[-1])) and len(m.group(1)) % 2 == 1 and i < len(lines):
            logical.append(lines[i])
            i += 1
        key = next(iter(parse_properties("\n".join(logical))), None)
        if key in changes:
            if key not in done:  # a key set twice: Java's Properties keep the last; one line of it is enough
                out.append(f"{key}={changes[key]}")
                done.add(key)
            continue
        out.extend(logical)
    out.extend(f"{k}={v}" for k, v in changes.items() if k not in done)
    return "".join(x + "\n" for x in out)


def load_broker_conf(path: str | os.PathLike[str], **overrides: Any) -> MessageStoreConfig:
    """Read a ``broker.conf`` into a :class:`MessageStoreConfig`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StoreError(f"{p}: no such config file") from None
    except OSError as e:
        raise StoreError(f"{p}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise StoreError(f"{p}: not a text properties file") from None
    return MessageStoreConfig.from_properties(parse_properties(text), **overrides)
