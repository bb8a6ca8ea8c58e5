"""``rocketq spark query DIR --key K | --time-range A B [--topic T]``: messages found across the whole store.

Unlike ``rocketq store query`` (the index, one topic, hash candidates), this
scans every record in parallel: ``--key`` matches a ``KEYS`` token or the
``UNIQ_KEY`` exactly, in any topic unless ``--topic`` is given (then only that
topic's consume queues are read); ``--time-range`` keeps store times in
[A, B] (options ``startTime`` / ``endTime`` of the source, so records outside
are dropped before their bodies are decoded). Results come back in
commit-log order as dicts with the source's column names (timestamps in ms,
body as base64, as ``rocketq store dump --json`` gives them).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from rocketq.spark.export import read_store


@dataclass(slots=True)
class QueryResult:
    messages: list[dict[str, Any]]
    truncated: bool


def query(spark: Any, store: str, *, key: str | None = None, time_range: tuple[int, int] | None = None,
          topic: str | None = None, conf: str | None = None, limit: int = 1000,
          permissive: bool = False) -> QueryResult:  # fmt: skip
    """Messages with *key* and/or stored in *time_range* (ms, both ends inclusive), at most *limit*."""
    from pyspark.sql import functions as F

    if key is None and time_range is None:
        raise ValueError("give a key or a time range")
    options: dict[str, str] = {"mode": "PERMISSIVE"} if permissive else {}
    if topic is not None:
        options["topics"] = topic
    if time_range is not None:
        options["startTime"] = str(time_range[0])
        options["endTime"] = str(time_range[1] + 1)
    df = read_store(spark, store, conf, options)
    if key is not None:
        df = df.where(F.array_contains(F.col("keys"), key) | (F.col("uniqKey") == key))
    cols = [c for c in df.columns if c not in ("bornTimestamp", "storeTimestamp")]
    df = df.select(*cols, F.unix_millis("bornTimestamp").alias("bornTimestamp"),
                   F.unix_millis("storeTimestamp").alias("storeTimestamp"))  # fmt: skip
    rows = df.orderBy("commitLogOffset").limit(limit + 1).collect()
    out = []
    for r in rows[:limit]:
        d = r.asDict(recursive=True)
        d["body"] = base64.b64encode(bytes(d["body"] or b"")).decode("ascii")
        out.append(d)
    return QueryResult(out, len(rows) > limit)
