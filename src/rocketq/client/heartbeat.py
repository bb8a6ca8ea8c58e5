"""The client's side of what it tells brokers about itself: the heartbeat bodies and consumer enums (defined once,
in :mod:`rocketq.common.heartbeat`, for client and broker alike) and ``build_subscription``, which checks a
subscription expression the way a Java client's ``FilterAPI.buildSubscriptionData`` does before building it
(remoting-protocol §6.5, §8.6, §11.7).
"""

from __future__ import annotations

from rocketq.client.errors import InvalidMessageError
from rocketq.common.heartbeat import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    SUB_ALL,
    CheckClientRequestBody,
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
    SubscriptionData,
    build_subscription_data,
)

__all__ = [
    "EXPRESSION_TYPE_SQL92",
    "EXPRESSION_TYPE_TAG",
    "SUB_ALL",
    "CheckClientRequestBody",
    "ConsumeFromWhere",
    "ConsumeType",
    "ConsumerData",
    "HeartbeatData",
    "MessageModel",
    "ProducerData",
    "SubscriptionData",
    "build_subscription",
]


def build_subscription(topic: str, expression: str | None = SUB_ALL,
                       expression_type: str = EXPRESSION_TYPE_TAG) -> SubscriptionData:  # fmt: skip
    """A subscription to ``topic``: ``*``/empty → all; tags split on ``||`` and trimmed; SQL92 kept as written.

    Raises ``InvalidMessageError`` for an unknown expression type, an empty SQL92 expression, or a tag
    expression without a tag (``" || "``)."""
    expression_type = (expression_type or EXPRESSION_TYPE_TAG).upper()
    if expression_type not in (EXPRESSION_TYPE_TAG, EXPRESSION_TYPE_SQL92):
        raise InvalidMessageError(f"unknown expression type {expression_type!r}: use TAG or SQL92")
    if expression_type == EXPRESSION_TYPE_SQL92 and (not expression or not expression.strip()):
        raise InvalidMessageError("an SQL92 subscription needs an expression")
    sub = build_subscription_data(topic, expression, expression_type)
    if sub.is_tag_type and sub.sub_string != SUB_ALL and not sub.tags_set:
        raise InvalidMessageError(f"subscription expression {expression!r} holds no tag")
    return sub
