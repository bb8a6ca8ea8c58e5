"""``rocketq spark stats DIR``: per topic and queue, what the store holds and how fast it came in.

From one cached projection of the ``rocketq`` source (no bodies): per topic and
queue the message count, bytes (TOTALSIZE), first and last store time and mean
rate; per topic the most frequent tags and keys; and the message rate over time
per topic, in buckets of a round width chosen so the store's time span makes
about :data:`TARGET_BUCKETS` of them, drawn as a PNG line chart (matplotlib,
Agg backend). :func:`format_table` renders it all for a terminal.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rocketq.spark.export import read_store

TARGET_BUCKETS = 120
_WIDTHS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
             7 * 86400, 30 * 86400)  # fmt: skip
MAX_TOPICS_CHARTED = 10


@dataclass(slots=True)
class QueueStats:
    topic: str
    queue_id: int
    messages: int
    bytes: int
    first_ms: int
    last_ms: int

    @property
    def rate(self) -> float | None:
        """Mean messages per second between the first and the last message (None: all in one millisecond)."""
        span = (self.last_ms - self.first_ms) / 1000
        return self.messages / span if span > 0 else None


@dataclass(slots=True)
class StoreStats:
    store: str
    queues: list[QueueStats] = field(default_factory=list)
    top_tags: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    top_keys: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    bucket_seconds: int = 0
    rate: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # topic -> [(bucket start ms, count)]
    chart: str | None = None

    def topics(self) -> dict[str, QueueStats]:
        """Per-topic totals (queue id -1)."""
        out: dict[str, QueueStats] = {}
        for q in self.queues:
            t = out.get(q.topic)
            if t is None:
                out[q.topic] = QueueStats(q.topic, -1, q.messages, q.bytes, q.first_ms, q.last_ms)
            else:
                t.messages += q.messages
                t.bytes += q.bytes
                t.first_ms = min(t.first_ms, q.first_ms)
                t.last_ms = max(t.last_ms, q.last_ms)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "queues": [{"topic": q.topic, "queueId": q.queue_id, "messages": q.messages, "bytes": q.bytes,
                        "firstStoreTimestamp": q.first_ms, "lastStoreTimestamp": q.last_ms,
                        "ratePerSecond": q.rate} for q in self.queues],
            "topTags": {t: [{"tag": k, "count": c} for k, c in v] for t, v in self.top_tags.items()},
            "topKeys": {t: [{"key": k, "count": c} for k, c in v] for t, v in self.top_keys.items()},
            "bucketSeconds": self.bucket_seconds,
            "rate": {t: [{"start": s, "messages": c} for s, c in v] for t, v in self.rate.items()},
            "chart": self.chart,
        }


def bucket_width(first_ms: int, last_ms: int) -> int:
    """A round bucket width in seconds giving about :data:`TARGET_BUCKETS` buckets over the span."""
    span = max(0, last_ms - first_ms) / 1000
    for w in _WIDTHS_S:
        if span / w <= TARGET_BUCKETS:
            return w
    return _WIDTHS_S[-1]


def _top(rows: list[Any], name: str, top: int) -> dict[str, list[tuple[str, int]]]:
    out: dict[str, list[tuple[str, int]]] = {}
    for r in rows:
        out.setdefault(r["topic"], []).append((r[name], int(r["n"])))
    return {t: sorted(v, key=lambda x: (-x[1], x[0]))[:top] for t, v in out.items()}


def store_stats(spark: Any, store: str, *, conf: str | None = None, options: Mapping[str, str] | None = None,
                top: int = 5) -> StoreStats:  # fmt: skip
    """Compute :class:`StoreStats` (see the module doc)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = read_store(spark, store, conf, options).select(
        "topic", "queueId", "storeSize", F.unix_millis("storeTimestamp").alias("ts"), "tags", "keys"
    )
    df = df.cache()
    try:
        result = StoreStats(str(store))
        per_queue = df.groupBy("topic", "queueId").agg(
            F.count("*").alias("n"), F.sum("storeSize").alias("bytes"), F.min("ts").alias("first"),
            F.max("ts").alias("last"),
        ).orderBy("topic", "queueId").collect()  # fmt: skip
        result.queues = [QueueStats(r["topic"], int(r["queueId"]), int(r["n"]), int(r["bytes"]), int(r["first"]),
                                    int(r["last"])) for r in per_queue]  # fmt: skip
        if not result.queues:
            return result
        rank = Window.partitionBy("topic").orderBy(F.desc("n"), F.asc("value"))

        def ranked(frame: Any, name: str) -> list[Any]:
            counted = frame.groupBy("topic", F.col(name).alias("value")).agg(F.count("*").alias("n"))
            kept = counted.withColumn("r", F.row_number().over(rank)).where(F.col("r") <= top)
            return kept.withColumnRenamed("value", name).collect()

        result.top_tags = _top(ranked(df.where(F.col("tags").isNotNull()), "tags"), "tags", top)
        keys = df.select("topic", F.explode("keys").alias("key"))
        result.top_keys = _top(ranked(keys, "key"), "key", top)
        first = min(q.first_ms for q in result.queues)
        last = max(q.last_ms for q in result.queues)
        width = bucket_width(first, last)
        result.bucket_seconds = width
        step = width * 1000
        buckets = (df.groupBy("topic", (F.floor(F.col("ts") / step) * step).alias("start"))
                   .agg(F.count("*").alias("n")).orderBy("topic", "start").collect())  # fmt: skip
        for r in buckets:
            result.rate.setdefault(r["topic"], []).append((int(r["start"]), int(r["n"])))
        return result
    finally:
        df.unpersist()


def draw_chart(stats: StoreStats, path: str) -> str:
    """The message rate over time per topic (the busiest :data:`MAX_TOPICS_CHARTED`) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    totals = stats.topics()
    chosen = sorted(stats.rate, key=lambda t: -totals[t].messages)[:MAX_TOPICS_CHARTED]
    width = max(stats.bucket_seconds, 1)
    step = width * 1000
    starts = [s for pts in stats.rate.values() for s, _ in pts]
    grid = range(min(starts), max(starts) + step, step) if starts else range(0)
    fig, ax = plt.subplots(figsize=(11, 5.5), dpi=100)
    try:
        for topic in chosen:
            counts = dict(stats.rate[topic])  # buckets without messages are zeros, not gaps to draw across
            ends = [*grid, grid[-1] + step]  # steps-post draws bucket i from its start to the next one's
            xs = [_dt.datetime.fromtimestamp(s / 1000, tz=_dt.UTC) for s in ends]
            ys = [counts.get(s, 0) / width for s in grid]
            ys.append(ys[-1])
            ax.plot(xs, ys, drawstyle="steps-post", linewidth=1.2, label=topic)
        ax.set_title(f"message rate per topic ({width} s buckets) - {stats.store}", fontsize=10)
        ax.set_xlabel("store time (UTC)")
        ax.set_ylabel("messages / s")
        ax.grid(True, alpha=0.3)
        if chosen:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.autofmt_xdate()
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    stats.chart = path
    return path


def _iso(ms: int) -> str:
    t = _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1f}"


def format_table(stats: StoreStats) -> list[str]:
    """The terminal report: a row per queue, a total per topic, then top tags and keys."""
    head = ("topic", "queue", "messages", "bytes", "first store time", "last store time", "msg/s")
    rows: list[tuple[str, ...]] = []
    totals = stats.topics()
    for topic, total in totals.items():
        for q in (q for q in stats.queues if q.topic == topic):
            rows.append((topic, str(q.queue_id), str(q.messages), str(q.bytes), _iso(q.first_ms), _iso(q.last_ms),
                         _rate(q.rate)))  # fmt: skip
        rows.append((topic, "all", str(total.messages), str(total.bytes), _iso(total.first_ms), _iso(total.last_ms),
                     _rate(total.rate)))  # fmt: skip
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    right = {1, 2, 3, 6}

    def fmt(r: tuple[str, ...]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths,
                                                                                                  strict=True)))

    lines = [fmt(head), "  ".join("-" * w for w in widths), *(fmt(r) for r in rows)]
    n = sum(t.messages for t in totals.values())
    lines.append(f"{n} messages in {len(totals)} topics, {len(stats.queues)} queues")
    for topic in totals:
        tags = ", ".join(f"{k} ({c})" for k, c in stats.top_tags.get(topic, [])) or "-"
        keys = ", ".join(f"{k} ({c})" for k, c in stats.top_keys.get(topic, [])) or "-"
        lines.append(f"{topic}: top tags {tags}; top keys {keys}")
    if stats.chart:
        lines.append(f"rate chart ({stats.bucket_seconds} s buckets): {stats.chart}")
    return lines
