"""Choosing the queue of a message yourself, for ordered messages: Java's ``MessageQueueSelector`` and its
``SelectMessageQueueByHash`` / ``SelectMessageQueueByRandom``.

Messages with the same key sent through ``SelectMessageQueueByHash`` land in the same queue, so an
orderly consumer sees them in the order they were sent. The hash is Java's ``hashCode`` of the key
(``String.hashCode`` for text, the value for a 32-bit integer, ``Long.hashCode`` beyond), so a Python
and a Java producer put the same key in the same queue. Any callable ``(queues, message, arg) → queue``
is a selector too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from rocketq.client.message_queue import MessageQueue
from rocketq.common.javacompat import java_string_hash
from rocketq.common.message import Message

__all__ = ["MessageQueueSelector", "SelectMessageQueueByHash", "SelectMessageQueueByRandom", "java_hash_code"]


@runtime_checkable
class MessageQueueSelector(Protocol):
    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue: ...


def java_hash_code(value: object) -> int:
    """The ``hashCode`` Java would give the boxed value (signed 32-bit)."""
    if isinstance(value, str):
        return java_string_hash(value)
    if isinstance(value, bool):
        return 1231 if value else 1237
    if isinstance(value, int):
        if -(1 << 31) <= value < (1 << 31):
            return value
        v = value & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF
        return h - (1 << 32) if h & 0x80000000 else h
    if isinstance(value, bytes):
        return java_string_hash(value.decode("latin-1"))
    return hash(value) & 0x7FFFFFFF


class SelectMessageQueueByHash:
    """Queue ``|hashCode(arg)| mod n``."""

    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
        return mqs[abs(java_hash_code(arg)) % len(mqs)]


class SelectMessageQueueByRandom:
    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: object) -> MessageQueue:
        return random.choice(list(mqs))
