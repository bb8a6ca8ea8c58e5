"""A queue of a topic on one broker: Java's ``common/message/MessageQueue``.

Its identity is the triple (topic, broker name, queue id); it sorts in that order, as the Java class
compares, which is the order rebalancing allocates queues in. As JSON (lock bodies, local offset files)
it is the bean ``{"brokerName":…,"queueId":…,"topic":…}`` (remoting-protocol §8.7).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MessageQueue"]


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        # MessageQueue.toString(): the consistent-hash strategy hashes exactly this text.
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_json(cls, value: Mapping[Any, Any]) -> MessageQueue:
        return cls(str(value["topic"]), str(value["brokerName"]), int(value["queueId"]))
