"""The name server's KV config: RocketMQ's ``KVConfigManager`` (remoting spec §7.6).

``namespace -> key -> value``, persisted after every change to ``kvConfig.json``
(by default ``~/namesrv/kvConfig.json``, as the Java name server) in the shape
``{"configTable":{"<ns>":{"<key>":"<value>"}}}``. The file is written to a
temporary name and renamed, with the previous content kept as ``.bak``.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from rocketq.common.errors import RocketqError

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KvConfigError(RocketqError):
    """The KV config file exists but cannot be read."""


class KVConfigManager:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else Path.home() / "namesrv" / "kvConfig.json"
        self.table: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                text = candidate.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            except OSError as e:
                raise KvConfigError(f"{candidate}: cannot read: {e.strerror}") from None
            if not text.strip():
                continue
            try:
                data = json.loads(text)
            except ValueError:
                continue
            table = data.get("configTable") if isinstance(data, dict) else None
            if isinstance(table, dict):
                self.table = {str(ns): {str(k): str(v) for k, v in kv.items()}
                              for ns, kv in table.items() if isinstance(kv, dict)}  # fmt: skip
                return
        if self.path.exists() and self.path.stat().st_size:
            raise KvConfigError(f"{self.path}: not a kvConfig.json file (and no usable .bak)")

    def persist(self) -> None:
        with self._lock:
            text = json.dumps({"configTable": self.table}, separators=(",", ":"), ensure_ascii=False)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self.table.setdefault(namespace, {})[key] = value
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        with self._lock:
            kv = self.table.get(namespace)
            if kv is None or key not in kv:
                return
            del kv[key]  # an emptied namespace stays, as Java's map does: it lists as an empty table
        self.persist()

    def list_namespace(self, namespace: str) -> dict[str, str] | None:
        """``getKVListByNamespace``: the namespace's table (empty once its last key was deleted), None when the
        namespace never had a key."""
        kv = self.table.get(namespace)
        return dict(kv) if kv is not None else None
