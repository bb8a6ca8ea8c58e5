"""Exceptions shared by every layer of rocketq.

A user's mistake (a wrong path, a file that is not a store, a bad option) is
reported with one of these and a clear message; the command line prints the
message, never a traceback.
"""


class RocketqError(Exception):
    """Base class of every error rocketq raises on purpose."""


class StoreError(RocketqError):
    """A store directory cannot be opened or is not what it should be."""


class CorruptRecordError(StoreError):
    """A commit-log record does not decode (bad magic, length or CRC)."""
