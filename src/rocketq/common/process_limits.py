"""Process limits of a server: the open-files limit raised as the JVM raises it for RocketMQ's processes.

A broker holds a descriptor per mapped file (commit-log files, one or more per consume queue, index files) and
one per connection. The JVM raises its soft ``RLIMIT_NOFILE`` to the hard limit when it starts
(``-XX:+MaxFDLimit``, on by default), so a RocketMQ broker started under the common soft limit of 1024 can hold
thousands of queues and connections; :func:`raise_open_files_limit` does the same for rocketq's servers, and
says when even the hard limit is low.
"""

from __future__ import annotations

import logging

__all__ = ["LOW_OPEN_FILES", "raise_open_files_limit"]

log = logging.getLogger(__name__)

#: Below this many open files a broker of a few hundred queues and clients runs out.
LOW_OPEN_FILES = 4096
#: The soft limit asked for when the hard one is unlimited.
_UNLIMITED_SOFT = 1 << 20


def raise_open_files_limit() -> int | None:
    """Raise the soft open-files limit to the hard limit; the limit now in force (None where there is none to
    set). Logs a warning when it stays under :data:`LOW_OPEN_FILES`."""
    try:
        import resource
    except ImportError:  # not a POSIX system
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = _UNLIMITED_SOFT if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (OSError, ValueError) as e:
            log.debug("open files limit left at %d: %s", soft, e)
    if soft != resource.RLIM_INFINITY and soft < LOW_OPEN_FILES:
        log.warning("the open files limit is %d: a broker of many queues or clients needs more (ulimit -n; the "
                    "hard limit is %s)", soft, "unlimited" if hard == resource.RLIM_INFINITY else hard)  # fmt: skip
    return None if soft == resource.RLIM_INFINITY else int(soft)
