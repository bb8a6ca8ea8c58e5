"""One full collection at start, then the objects of a started process out of the cyclic collector's reach.

CPython's cyclic collector runs a full (generation 2) collection whenever the objects that survived earlier
collections have grown by a quarter, and a full collection visits every tracked object of the process: modules,
classes, functions, configuration, some 30,000 objects in a client process. On this project's machines one such
collection took 30-55 ms, during which the process answered nothing: a consumer's every message in flight waited
that long, which was most of the 99th percentile of born-to-consume latency at half load (client_bench).

:func:`freeze_startup_objects` runs once per process, after the servers or the first client have started: a
collection, then ``gc.freeze()``, which moves every object then alive to a permanent generation that later
collections skip (CPython's advice for long-running processes). Those objects are still freed by reference
counting as usual; only a reference cycle among them, dropped later, would never be collected. A full collection
afterwards visits what was made since, and takes about a millisecond. Java's brokers and clients have the same
problem on the JVM, where it is the collector's configuration.
"""

from __future__ import annotations

import gc
import logging

__all__ = ["freeze_startup_objects"]

log = logging.getLogger(__name__)

_frozen = False


def freeze_startup_objects() -> bool:
    """Collect, then freeze the objects alive now, once per process; False when already done or when the
    collector is disabled (the program manages it itself)."""
    global _frozen
    if _frozen or not gc.isenabled():
        return False
    _frozen = True
    gc.collect()
    gc.freeze()
    log.debug("%d objects frozen out of the cyclic collector's reach", gc.get_freeze_count())
    return True
