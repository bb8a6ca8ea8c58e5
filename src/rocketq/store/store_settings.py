"""Which config a store directory is opened with: ``-c broker.conf`` or what its files say.

The settings every reader of a store directory needs before opening it (``rocketq store …``, the Spark
jobs and data source): the directory itself checked (:func:`store_directory`), and a
:class:`~rocketq.store.store_config.MessageStoreConfig` whose file sizes come from a ``broker.conf`` or,
without one, from the files (:func:`store_settings`). RocketMQ has no such inference (a broker is always
started with its config); it mirrors what ``mqadmin`` tools ask the user for.

Without a conf the commit-log and consume-queue file sizes are the lengths of the first files. The
index slot and entry counts are not recoverable from a length alone; they are taken, in this order, from
the RocketMQ defaults when the files have the default size, from a ``broker.conf`` next to the directory
(``DIR/../broker.conf``), or from a full index file (its indexCount is maxIndexNum); otherwise a conf is
required.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocketq.common.errors import StoreError
from rocketq.store.index_file import INDEX_HEADER_SIZE, index_file_size
from rocketq.store.store_config import MessageStoreConfig, load_broker_conf

__all__ = ["INDEX_HEADER", "StoreSettings", "index_files", "read_index_header", "store_directory",
           "store_settings"]  # fmt: skip

#: beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount (store-format §5.2)
INDEX_HEADER: Final = struct.Struct(">qqqqii")


def store_directory(raw: str) -> Path:
    """*raw* as a path to an existing directory, or a :class:`StoreError` saying what it is instead."""
    p = Path(raw).expanduser()
    if not p.exists():
        raise StoreError(f"{raw}: no such directory")
    if not p.is_dir():
        raise StoreError(f"{raw}: not a directory (give the store directory, the one holding commitlog/)")
    return p


@dataclass
class StoreSettings:
    """The config to open a store directory with, and where each size came from."""

    config: MessageStoreConfig
    sources: dict[str, str] = field(default_factory=dict)


def _first_file_size(directory: Path, depth: int) -> tuple[int, Path] | None:
    """Size of the first non-empty data file *depth* directory levels below *directory*."""
    if not directory.is_dir():
        return None
    pattern = "/".join(["*"] * (depth + 1))
    for p in sorted(directory.glob(pattern)):
        if p.is_file() and p.name.isdigit():
            size = p.stat().st_size
            if size > 0:
                return size, p
    return None


def index_files(index_dir: Path) -> list[Path]:
    if not index_dir.is_dir():
        return []
    return sorted(p for p in index_dir.iterdir() if p.is_file() and p.name.isdigit())


def read_index_header(path: Path) -> tuple[int, int, int, int, int, int]:
    with open(path, "rb") as f:
        head = f.read(INDEX_HEADER_SIZE)
    if len(head) < INDEX_HEADER_SIZE:
        raise StoreError(f"{path}: too short for an index file ({len(head)} bytes)")
    return INDEX_HEADER.unpack(head)


def _infer_index_sizes(cfg: MessageStoreConfig, store_dir: Path, sources: dict[str, str]) -> None:
    files = index_files(cfg.index_path)
    if not files:
        sources["index"] = "RocketMQ default (no index files)"
        return
    sizes = {p.stat().st_size for p in files}
    if len(sizes) > 1:
        raise StoreError(
            f"{cfg.index_path}: index files of different sizes {sorted(sizes)}; "
            "give the store's broker.conf with -c (Spark: option conf)"
        )
    size = sizes.pop()
    if size == index_file_size(cfg.max_hash_slot_num, cfg.max_index_num):
        sources["index"] = "RocketMQ default (matches the index file size)"
        return
    sibling = store_dir.parent / "broker.conf"
    if sibling.is_file():
        other = load_broker_conf(sibling)
        if index_file_size(other.max_hash_slot_num, other.max_index_num) == size:
            cfg.max_hash_slot_num, cfg.max_index_num = other.max_hash_slot_num, other.max_index_num
            sources["index"] = f"{sibling}"
            return
    for p in files[:-1]:  # a file before the last is full: its indexCount is maxIndexNum
        *_, slot_count, index_count = read_index_header(p)
        rest = size - INDEX_HEADER_SIZE - index_count * 20
        if index_count >= 2 and rest > 0 and rest % 4 == 0 and 0 <= slot_count <= rest // 4:
            cfg.max_hash_slot_num, cfg.max_index_num = rest // 4, index_count
            sources["index"] = f"inferred from the full index file {p.name}"
            return
    default = index_file_size(cfg.max_hash_slot_num, cfg.max_index_num)
    raise StoreError(
        f"{cfg.index_path}: index files are {size} bytes, not the {default} bytes of the defaults "
        f"(maxHashSlotNum={cfg.max_hash_slot_num}, maxIndexNum={cfg.max_index_num}); "
        "give the broker.conf the store was written with: -c broker.conf (Spark: option conf)"
    )


def _rebase_commit_log_path(cfg: MessageStoreConfig, store_dir: Path, sources: dict[str, str]) -> None:
    """Keep ``storePathCommitLog`` relative to DIR when the conf put it under its own store root."""
    raw = cfg.store_path_commit_log
    if not raw:
        return
    conf_root = Path(cfg.store_path_root_dir).expanduser()
    p = Path(raw).expanduser()
    try:
        cfg.store_path_commit_log = str(store_dir / p.relative_to(conf_root))
        return
    except ValueError:
        pass
    if not p.is_dir() and (store_dir / "commitlog").is_dir():
        sources["commitLogPath"] = f"{store_dir / 'commitlog'} (storePathCommitLog {raw} does not exist)"
        cfg.store_path_commit_log = ""


def store_settings(store_dir: Path, conf: str | None) -> StoreSettings:
    """The config to open *store_dir* with: from *conf* (a ``broker.conf``) or inferred from the files (see the
    module doc)."""
    sources: dict[str, str] = {}
    if conf is not None:
        cfg = load_broker_conf(conf)
        _rebase_commit_log_path(cfg, store_dir, sources)
        cfg.store_path_root_dir = str(store_dir)
        for key in ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "index"):
            sources.setdefault(key, str(conf))
        return StoreSettings(cfg, sources)
    cfg = MessageStoreConfig(store_path_root_dir=str(store_dir))
    found = _first_file_size(cfg.commit_log_path, 0)
    if found is not None:
        cfg.mapped_file_size_commit_log = found[0]
        sources["mappedFileSizeCommitLog"] = f"size of {found[1].name}"
    else:
        sources["mappedFileSizeCommitLog"] = "RocketMQ default"
    found = _first_file_size(cfg.consume_queue_path, 2)
    if found is not None:
        cfg.mapped_file_size_consume_queue = found[0]
        sources["mappedFileSizeConsumeQueue"] = f"size of {found[1].relative_to(cfg.consume_queue_path)}"
    else:
        sources["mappedFileSizeConsumeQueue"] = "RocketMQ default"
    _infer_index_sizes(cfg, store_dir, sources)
    return StoreSettings(cfg, sources)
