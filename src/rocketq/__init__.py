"""rocketq: a message broker and storage engine compatible with Apache RocketMQ."""

__version__ = "0.1.0"
