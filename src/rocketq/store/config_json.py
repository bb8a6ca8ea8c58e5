"""The broker's config JSON files under ``<store root>/config/``, in fastjson's dialect.

Mirrors these Apache RocketMQ 4.9 classes (spec: store-format §8):

- ``common/ConfigManager`` (load with ``.bak`` fallback, persist) and
  ``MixAll.string2File`` (``.tmp`` + ``.bak`` + rename): ``ConfigManager``,
  ``read_config_json``, ``write_config_file``;
- ``broker/topic/TopicConfigManager`` (``topics.json``): ``TopicConfigManager``;
- ``broker/offset/ConsumerOffsetManager`` (``consumerOffset.json``):
  ``ConsumerOffsetManager``;
- ``store/schedule/ScheduleMessageService``'s delay offsets (``delayOffset.json``):
  ``DelayOffsetManager``;
- ``broker/subscription/SubscriptionGroupManager`` (``subscriptionGroup.json``):
  ``SubscriptionGroupManager``;
- ``broker/filter/ConsumerFilterManager`` (``consumerFilter.json``):
  ``ConsumerFilterManager``.

Format (``JSON.toJSONString(obj, prettyFormat=true)`` of fastjson 1.x)::

    {                                      bean: members sorted by name, nulls left out
    \t"dataVersion":{                      one tab per nesting level, "name":value
    \t\t"counter":3,
    \t\t"timestamp":1700000000000
    \t},
    \t"offsetTable":{                      map: entries in iteration order
    \t\t"TopicTest@g1":{0:12,1:7,2:9      Integer keys: unquoted, inline, no newline
    \t\t}                                  closing brace at the member's indentation
    \t},
    \t"empty":{}                           an empty map is {}
    }                                      no newline at the end of the file

Strings escape ``"`` and ``\\``, ``\\b \\t \\n \\f \\r`` by letter, the other
control characters, U+007F..U+009F and U+2028/U+2029 as ``\\uXXXX`` (upper-case
hex); everything else, non-ASCII included, is written as is, in UTF-8.

Writing follows 4.9: ``<file>.tmp`` is written and fsynced, the previous content
of ``<file>`` is copied to ``<file>.bak``, then the tmp file replaces ``<file>``.
Reading takes ``<file>``, or ``<file>.bak`` when ``<file>`` is missing, empty or
does not decode. Three deliberate differences from 4.9, all on the safe side:
the rename is one atomic ``os.replace`` (4.9 deletes then renames); an empty
previous file, or one that failed to load, is not copied over a good ``.bak``;
and a corrupt ``<file>`` with no usable ``.bak`` is an error (``ConfigFileError``),
where 4.9 silently starts with an empty table.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from rocketq.common import json_compat
from rocketq.common.errors import StoreError
from rocketq.common.json_compat import JsonDecodeError

__all__ = [
    "ConfigFileError",
    "ConfigManager",
    "ConsumerFilterManager",
    "ConsumerOffsetManager",
    "DataVersion",
    "DelayOffsetManager",
    "FastjsonDecodeError",
    "SubscriptionGroupConfig",
    "SubscriptionGroupManager",
    "TopicConfig",
    "TopicConfigManager",
    "config_dir",
    "dumps_fastjson",
    "loads_fastjson",
    "read_config_json",
    "write_config_file",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_B = TypeVar("_B")


class ConfigFileError(StoreError):
    """A config file (and its ``.bak``) cannot be read, decoded or written."""


# The shared reader's error; the old name stays for callers of this module.
FastjsonDecodeError = JsonDecodeError


# --------------------------------------------------------------------------------------------------
# Serializer and beans: the shared fastjson dialect, pretty-printed
# --------------------------------------------------------------------------------------------------


def dumps_fastjson(obj: object) -> str:
    """Serialize *obj* the way fastjson 1.x ``JSON.toJSONString(obj, true)`` does.

    ``dict``/``Mapping``: a Java map, entries in the order given, ``None`` values left out;
    ``str`` keys are quoted, each on its own line; ``int`` keys are unquoted and inline.
    Dataclass instances: Java beans, fields named in camelCase and sorted, ``None`` left out
    (a field marked ``metadata={"fastjson": "extra"}`` holds extra members merged in).
    ``list``/``tuple``: pretty-printed with two items or more; ``set``: inline.
    ``Enum``: its name. No newline at the end. The writer is :func:`rocketq.common.json_compat.dumps`.
    """
    return json_compat.dumps(obj, pretty=True)


_EXTRA_META = {"fastjson": "extra"}  # marks the field holding members this class does not know


def _bean_from_json(cls: type[_B], obj: object, what: str, **defaults: object) -> _B:
    """Build dataclass *cls* from a decoded JSON object, leniently as fastjson reads; *defaults* (by
    attribute name) fill members the object lacks or has as null; unknown members go to its extra field."""
    if defaults and isinstance(obj, Mapping):
        names = {f.name: json_compat.json_name(f) for f in dataclasses.fields(typing.cast(Any, cls))}
        present = {k: v for k, v in obj.items() if v is not None}
        obj = {**{names[k]: v for k, v in defaults.items()}, **present}
    bean: _B = json_compat.from_json(cls, obj, path=what)
    return bean


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclasses.dataclass
class DataVersion:
    """``common/DataVersion``: 4.9 writes counter and timestamp; 5.x adds stateVersion."""

    counter: int = 0
    timestamp: int = dataclasses.field(default_factory=_now_ms)
    state_version: int | None = None
    extra: dict[str, object] = dataclasses.field(default_factory=dict, metadata=_EXTRA_META, compare=False)

    def next_version(self) -> None:
        """A change: the counter goes up by one, the timestamp takes the current time."""
        self.timestamp = _now_ms()
        self.counter += 1


@dataclasses.dataclass
class TopicConfig:
    """``common/TopicConfig`` (perm 6 = read + write; filter type SINGLE_TAG or MULTI_TAG)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    extra: dict[str, object] = dataclasses.field(default_factory=dict, metadata=_EXTRA_META, compare=False)


@dataclasses.dataclass
class SubscriptionGroupConfig:
    """``common/subscription/SubscriptionGroupConfig`` as written by 4.9."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    extra: dict[str, object] = dataclasses.field(default_factory=dict, metadata=_EXTRA_META, compare=False)


# --------------------------------------------------------------------------------------------------
# Lenient parser
# --------------------------------------------------------------------------------------------------

def loads_fastjson(text: str) -> object:
    """Parse JSON as fastjson writes it: unquoted integer map keys become ``int`` keys.

    Strict JSON is accepted too (quoted keys stay ``str``; managers convert them where
    an integer key is expected). The reader is :func:`rocketq.common.json_compat.loads`,
    shared with the protocol layer; it raises ``JsonDecodeError`` on anything else.
    """
    return json_compat.loads(text)


# --------------------------------------------------------------------------------------------------
# Files: MixAll.string2File and ConfigManager.load
# --------------------------------------------------------------------------------------------------


def config_dir(store_root: str | os.PathLike[str]) -> Path:
    """``<store root>/config``, where the broker keeps its JSON files."""
    return Path(store_root) / "config"


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # not possible on every platform
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_config_file(path: str | os.PathLike[str], text: str, *, backup: bool = True) -> None:
    """Replace *path* with *text* the way 4.9's ``MixAll.string2File`` does, durably.

    Writes and fsyncs ``<path>.tmp``; when *backup* is true and the current file is not
    empty, copies it to ``<path>.bak``; then renames the tmp file over *path*.
    Raises ``ConfigFileError`` when the file system refuses.
    """
    target = Path(path)
    tmp = _sibling(target, ".tmp")
    bak = _sibling(target, ".bak")
    # Java's encoder writes '?' for an unpaired surrogate.
    data = text.encode("utf-8", "replace")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_synced(tmp, data)
        if backup:
            try:
                previous = target.read_bytes()
            except FileNotFoundError:
                previous = b""
            if previous:
                _write_synced(bak, previous)
        os.replace(tmp, target)
        _sync_dir(target.parent)
    except OSError as e:
        raise ConfigFileError(f"cannot write config file {target}: {e}") from e


def _read_text(path: Path) -> str | None:
    """The file's text (malformed UTF-8 replaced, as Java decodes), or None when it is missing."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return data.decode("utf-8", "replace")


def read_config_json(path: str | os.PathLike[str], decode: Callable[[object], _T]) -> tuple[_T, Path] | None:
    """Load a config file as 4.9's ``ConfigManager.load``/``loadBak`` do.

    Parses *path* and passes the value to *decode* (which raises ``ValueError``,
    ``TypeError`` or ``KeyError`` when the content is not what it should be). When
    *path* is missing, empty or does not decode, ``<path>.bak`` is tried instead.
    Returns ``(decode's result, the file it came from)``, or ``None`` when neither
    file has any content. Raises ``ConfigFileError`` when a file has content but
    neither it nor the ``.bak`` decodes.
    """
    main = Path(path)
    bak = _sibling(main, ".bak")
    notes: list[str] = []
    failed = False
    for candidate in (main, bak):
        try:
            text = _read_text(candidate)
        except OSError as e:
            notes.append(f"{candidate}: {e}")
            failed = True
            continue
        if not text:
            notes.append(f"{candidate}: {'missing' if text is None else 'empty'}")
            continue
        try:
            result = decode(loads_fastjson(text))
        except (ValueError, TypeError, KeyError) as e:
            notes.append(f"{candidate}: {e}")
            failed = True
            continue
        if notes:
            log.warning("config file %s not usable (%s); loaded %s", main, "; ".join(notes), candidate)
        return result, candidate
    if not failed:
        return None
    raise ConfigFileError(f"config file {main} cannot be loaded: " + "; ".join(notes))


# --------------------------------------------------------------------------------------------------
# Managers
# --------------------------------------------------------------------------------------------------


def _as_mapping(value: object, what: str) -> Mapping[Any, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{what}: expected an object, found {type(value).__name__}")
    return value


def _as_int(value: object, what: str) -> int:
    number: int = json_compat.from_json(int, value, path=what)
    return number


def _int_keyed(value: object, what: str) -> dict[int, int]:
    """``{queueId or level: offset}``; quoted numeric keys (strict JSON) are accepted."""
    return {
        _as_int(k, f"{what} key"): _as_int(v, f"{what}[{k}]") for k, v in _as_mapping(value, what).items()
    }


def _ascending(table: Mapping[int, int]) -> dict[int, int]:
    # A Java ConcurrentHashMap<Integer, Long> iterates small keys in ascending order.
    return dict(sorted(table.items()))


class ConfigManager:
    """``common/ConfigManager``: one JSON file under ``<store root>/config``.

    Subclasses set ``file_name`` and implement ``_to_json`` and ``_decode``. ``_decode``
    must build its new state completely before assigning it, so that a file that fails
    to decode leaves the manager unchanged.
    """

    file_name: ClassVar[str]

    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        self.store_root = Path(store_root)
        self._lock = threading.RLock()  # guards the in-memory state
        self._persist_lock = threading.Lock()  # one writer of the file at a time
        # After a load that had to fall back to the .bak, the main file holds bad content:
        # the next persist must not copy it over the good backup.
        self._keep_bak = False

    @property
    def config_path(self) -> Path:
        return config_dir(self.store_root) / self.file_name

    def _to_json(self) -> dict[str, object]:
        raise NotImplementedError

    def _decode(self, obj: object) -> None:
        raise NotImplementedError

    def encode(self) -> str:
        """The file's content, as fastjson pretty format."""
        with self._lock:
            return dumps_fastjson(self._to_json())

    def decode(self, text: str) -> None:
        """Replace the in-memory state with the content of *text*."""
        with self._lock:
            self._decode(loads_fastjson(text))

    def load(self, *, strict: bool = True) -> bool:
        """Read the file (or its ``.bak``); a missing file leaves the defaults and is fine.

        Returns True when loaded. When the file has content but neither it nor the
        ``.bak`` decodes, raises ``ConfigFileError``; with ``strict=False`` logs it and
        returns False instead, as RocketMQ's ``load`` does.
        """
        try:
            with self._persist_lock, self._lock:
                loaded = read_config_json(self.config_path, self._decode)
                self._keep_bak = loaded is not None and loaded[1] != self.config_path
        except ConfigFileError:
            if strict:
                raise
            log.exception("cannot load %s", self.config_path)
            return False
        return True

    def persist(self) -> None:
        """Write the file atomically, keeping the previous content in ``.bak``."""
        with self._persist_lock:
            text = self.encode()
            write_config_file(self.config_path, text, backup=not self._keep_bak)
            self._keep_bak = False


class TopicConfigManager(ConfigManager):
    """``broker/topic/TopicConfigManager``: ``topics.json``.

    Changes bump the data version; call ``persist`` to write them (RocketMQ persists
    right after each update).
    """

    file_name = "topics.json"

    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        super().__init__(store_root)
        self.data_version = DataVersion()
        self.topic_config_table: dict[str, TopicConfig] = {}

    def get(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def names(self) -> list[str]:
        return list(self.topic_config_table)

    def put(self, config: TopicConfig) -> None:
        """Add or replace a topic (``updateTopicConfig``); a new topic goes last."""
        with self._lock:
            self.topic_config_table[config.topic_name] = config
            self.data_version.next_version()

    update = put

    def remove(self, topic: str) -> TopicConfig | None:
        """``deleteTopicConfig``: the removed config, or None when there was none."""
        with self._lock:
            old = self.topic_config_table.pop(topic, None)
            if old is not None:
                self.data_version.next_version()
            return old

    def _to_json(self) -> dict[str, object]:
        return {"dataVersion": self.data_version, "topicConfigTable": dict(self.topic_config_table)}

    def _decode(self, obj: object) -> None:
        root = _as_mapping(obj, self.file_name)
        version = _bean_from_json(DataVersion, root.get("dataVersion") or {}, "dataVersion")
        table: dict[str, TopicConfig] = {}
        for name, value in _as_mapping(root.get("topicConfigTable"), "topicConfigTable").items():
            what = f"topicConfigTable[{name!r}]"
            default_name = {"topic_name": str(name)}
            table[str(name)] = _bean_from_json(TopicConfig, value, what, **default_name)
        self.data_version, self.topic_config_table = version, table


class ConsumerOffsetManager(ConfigManager):
    """``broker/offset/ConsumerOffsetManager``: ``consumerOffset.json``.

    ``offset_table`` maps ``"<topic>@<group>"`` to ``{queue id: next offset to consume}``.
    """

    file_name = "consumerOffset.json"
    SEPARATOR: ClassVar[str] = "@"

    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        super().__init__(store_root)
        self.offset_table: dict[str, dict[int, int]] = {}

    @classmethod
    def key(cls, topic: str, group: str) -> str:
        return f"{topic}{cls.SEPARATOR}{group}"

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self.offset_table.setdefault(self.key(topic, group), {})[queue_id] = offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when there is none."""
        return self.offset_table.get(self.key(topic, group), {}).get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int]:
        """A copy of ``{queue id: offset}`` of one group on one topic (empty when none)."""
        return dict(self.offset_table.get(self.key(topic, group), {}))

    def _split(self, key: str) -> tuple[str, str] | None:
        parts = key.split(self.SEPARATOR)
        return (parts[0], parts[1]) if len(parts) == 2 else None

    def topics_of_group(self, group: str) -> list[str]:
        """``whichTopicByConsumer``."""
        return [tg[0] for key in list(self.offset_table) if (tg := self._split(key)) and tg[1] == group]

    def groups_of_topic(self, topic: str) -> list[str]:
        """``whichGroupByTopic``."""
        return [tg[1] for key in list(self.offset_table) if (tg := self._split(key)) and tg[0] == topic]

    def remove_group(self, group: str) -> list[str]:
        """``removeOffset(group)``: drop every ``<topic>@<group>`` entry; returns the keys."""
        with self._lock:
            removed = [key for key in self.offset_table if (tg := self._split(key)) and tg[1] == group]
            for key in removed:
                del self.offset_table[key]
            return removed

    def _to_json(self) -> dict[str, object]:
        return {"offsetTable": {key: _ascending(queues) for key, queues in self.offset_table.items()}}

    def _decode(self, obj: object) -> None:
        root = _as_mapping(obj, self.file_name)
        table = {
            str(key): _int_keyed(queues, f"offsetTable[{key!r}]")
            for key, queues in _as_mapping(root.get("offsetTable"), "offsetTable").items()
        }
        self.offset_table = table


class DelayOffsetManager(ConfigManager):
    """``ScheduleMessageService``'s offsets: ``delayOffset.json``.

    ``offset_table`` maps a delay level (1-based) to the next offset to deliver from
    queue ``level - 1`` of ``SCHEDULE_TOPIC_XXXX``.
    """

    file_name = "delayOffset.json"

    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        super().__init__(store_root)
        self.offset_table: dict[int, int] = {}

    def query_offset(self, level: int, default: int = 0) -> int:
        """The level's offset; RocketMQ starts a level without one from 0."""
        return self.offset_table.get(level, default)

    def update_offset(self, level: int, offset: int) -> None:
        with self._lock:
            self.offset_table[level] = offset

    def _to_json(self) -> dict[str, object]:
        return {"offsetTable": _ascending(self.offset_table)}

    def _decode(self, obj: object) -> None:
        root = _as_mapping(obj, self.file_name)
        self.offset_table = _int_keyed(root.get("offsetTable"), "offsetTable")


class SubscriptionGroupManager(ConfigManager):
    """``broker/subscription/SubscriptionGroupManager``: ``subscriptionGroup.json``."""

    file_name = "subscriptionGroup.json"

    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        super().__init__(store_root)
        self.data_version = DataVersion()
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {}

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.subscription_group_table.get(group)

    def names(self) -> list[str]:
        return list(self.subscription_group_table)

    def put(self, config: SubscriptionGroupConfig) -> None:
        """Add or replace a group (``updateSubscriptionGroupConfig``); a new group goes last."""
        with self._lock:
            self.subscription_group_table[config.group_name] = config
            self.data_version.next_version()

    update = put

    def remove(self, group: str) -> SubscriptionGroupConfig | None:
        """``deleteSubscriptionGroupConfig``: the removed config, or None."""
        with self._lock:
            old = self.subscription_group_table.pop(group, None)
            if old is not None:
                self.data_version.next_version()
            return old

    def _to_json(self) -> dict[str, object]:
        return {
            "dataVersion": self.data_version,
            "subscriptionGroupTable": dict(self.subscription_group_table),
        }

    def _decode(self, obj: object) -> None:
        root = _as_mapping(obj, self.file_name)
        version = _bean_from_json(DataVersion, root.get("dataVersion") or {}, "dataVersion")
        table: dict[str, SubscriptionGroupConfig] = {}
        groups = _as_mapping(root.get("subscriptionGroupTable"), "subscriptionGroupTable")
        for name, value in groups.items():
            what = f"subscriptionGroupTable[{name!r}]"
            default_name = {"group_name": str(name)}
            table[str(name)] = _bean_from_json(SubscriptionGroupConfig, value, what, **default_name)
        self.data_version, self.subscription_group_table = version, table


class ConsumerFilterManager(ConfigManager):
    """``broker/filter/ConsumerFilterManager``: ``consumerFilter.json``.

    Only SQL92/class filtering uses it; the content is kept as loaded and written back.
    """

    file_name = "consumerFilter.json"

    def __init__(self, store_root: str | os.PathLike[str]) -> None:
        super().__init__(store_root)
        self.filter_data_by_topic: dict[str, object] = {}

    def _to_json(self) -> dict[str, object]:
        return {"filterDataByTopic": dict(self.filter_data_by_topic)}

    def _decode(self, obj: object) -> None:
        root = _as_mapping(obj, self.file_name)
        table = _as_mapping(root.get("filterDataByTopic"), "filterDataByTopic")
        self.filter_data_by_topic = {str(k): v for k, v in table.items()}
