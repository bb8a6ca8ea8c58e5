"""One message as a JSON object: the shape of ``rocketq store dump --json`` and ``rocketq consume --json``.

Field names are those of the golden manifests' ``finalRead.messages`` (RocketMQ's ``MessageExt``
getters)::

    topic queueId queueOffset commitLogOffset storeSize msgId uniqKey tags keys
    sysFlag flag bodyCRC reconsumeTimes preparedTransactionOffset
    bornTimestamp bornHost storeTimestamp storeHost properties
    bodyLength bodyCrc32 body

``msgId`` is the offset message id, ``uniqKey``/``tags``/``keys`` the ``UNIQ_KEY``/``TAGS``/``KEYS``
properties (``null`` when absent), hosts ``"ip:port"`` (``"[v6]:port"``), ``body`` base64 of the message's
body as the caller holds it (the store's dump: as stored; a consumer: as delivered, inflated), with
``bodyLength``/``bodyCrc32`` (plain CRC-32) of those bytes. Lives in ``common`` so that the store's dump
and the client's consumer write one shape (:mod:`rocketq.store.dump` re-exports it).
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

from rocketq.common.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    HostPort,
    MessageExt,
)

__all__ = ["host_to_string", "message_to_dict"]


def host_to_string(host: HostPort) -> str:
    """``"ip:port"``; an IPv6 address is bracketed."""
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def message_to_dict(msg: MessageExt) -> dict[str, Any]:
    """The JSON object of one message (see the module docstring for the fields)."""
    body = msg.body or b""
    props = msg.properties
    return {
        "topic": msg.topic,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "storeSize": msg.store_size,
        "msgId": msg.offset_msg_id,
        "uniqKey": props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        "tags": props.get(PROPERTY_TAGS),
        "keys": props.get(PROPERTY_KEYS),
        "sysFlag": msg.sys_flag,
        "flag": msg.flag,
        "bodyCRC": msg.body_crc,
        "reconsumeTimes": msg.reconsume_times,
        "preparedTransactionOffset": msg.prepared_transaction_offset,
        "bornTimestamp": msg.born_timestamp,
        "bornHost": host_to_string(msg.born_host),
        "storeTimestamp": msg.store_timestamp,
        "storeHost": host_to_string(msg.store_host),
        "properties": dict(props),
        "bodyLength": len(body),
        "bodyCrc32": zlib.crc32(body),
        "body": base64.b64encode(body).decode("ascii"),
    }
