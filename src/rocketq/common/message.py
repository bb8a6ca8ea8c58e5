"""The message model: what a producer sends and what the store keeps.

Mirrors RocketMQ's ``Message`` / ``MessageExt`` / ``MessageExtBrokerInner``
(``common/message``), and the names of ``MessageConst`` and ``MessageSysFlag``.
The byte layout of a stored message lives in :mod:`rocketq.common.codec`; this
module only holds the fields and the property-string rules (store-format §3.5).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import methodcaller
from typing import Final

from rocketq.common.javacompat import parse_java_int

# --- MessageSysFlag (store-format §3.4) ------------------------------------
COMPRESSED_FLAG: Final = 0x1
MULTI_TAGS_FLAG: Final = 0x2
TRANSACTION_NOT_TYPE: Final = 0x0
TRANSACTION_PREPARED_TYPE: Final = 0x4
TRANSACTION_COMMIT_TYPE: Final = 0x8
TRANSACTION_ROLLBACK_TYPE: Final = 0xC
TRANSACTION_MASK: Final = 0xC
BORNHOST_V6_FLAG: Final = 0x10
STOREHOSTADDRESS_V6_FLAG: Final = 0x20
NEED_UNWRAP_FLAG: Final = 0x40
INNER_BATCH_FLAG: Final = 0x80
COMPRESSION_TYPE_MASK: Final = 0x700  # the compression type: rocketq.common.compression


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_MASK


# --- MessageConst property names (§3.5.3) -----------------------------------
PROPERTY_KEYS: Final = "KEYS"
PROPERTY_TAGS: Final = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK: Final = "WAIT"
PROPERTY_DELAY_TIME_LEVEL: Final = "DELAY"
PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID: Final = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
PROPERTY_CLUSTER: Final = "CLUSTER"
PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
# Request-reply (4.6+): what a request carries, and what marks and stamps its reply.
PROPERTY_CORRELATION_ID: Final = "CORRELATION_ID"
PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
PROPERTY_MESSAGE_TTL: Final = "TTL"
PROPERTY_REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
PROPERTY_PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
PROPERTY_MESSAGE_TYPE: Final = "MSG_TYPE"
PROPERTY_CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"

# MessageConst.STRING_HASH_SET of 4.9.4: the names a user property may not have (putUserProperty).
RESERVED_PROPERTY_NAMES: Final = frozenset({
    "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG",
    "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
    "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "INSTANCE_ID",
    "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER", "MSG_TYPE",
    "INNER_MULTI_QUEUE_OFFSET",
})  # fmt: skip
REPLY_MESSAGE_FLAG: Final = "reply"  # MixAll.REPLY_MESSAGE_FLAG: MSG_TYPE of a reply
TRANSIENT_PREFIX: Final = "__RMQ.TRANSIENT."
KEY_SEPARATOR: Final = " "

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"


def wait_store_msg_ok(value: str | None) -> bool:
    """``Message.isWaitStoreMsgOK`` of a ``WAIT`` property's value: true when unset, else whether it says true."""
    return value is None or value.strip().lower() == "true"


def delay_level_of(props: dict[str, str]) -> int:
    """``Message.getDelayTimeLevel``: the ``DELAY`` property as a level; 0 when it is absent, empty or not an
    integer (the store refuses a message whose ``DELAY`` is not one, as 4.9.4's put fails there)."""
    raw = props.get(PROPERTY_DELAY_TIME_LEVEL)
    return (parse_java_int(raw) or 0) if raw else 0


def producer_batch_size(bodies: Iterable[bytes], properties_bytes: Iterable[bytes]) -> int:
    """The length of a batch as a producer encodes it (``MessageDecoder.encodeMessages``: per message 20 bytes of
    header, the body, 2 bytes of property length and the properties): what 4.9.4 holds against
    ``maxMessageSize``."""
    n = 0
    total = 0
    for body in bodies:
        n += 1
        total += len(body)
    return 22 * n + total + sum(map(len, properties_bytes))


def properties_to_string(properties: dict[str, str]) -> str:
    """``MessageDecoder.messageProperties2String`` of RocketMQ 4.9: entries in dict order.

    ``name 0x01 value`` entries joined by 0x02, with no separator after the last
    one (what a 4.9.4 broker stores; 5.x adds a trailing 0x02, which readers
    accept either way). Entries whose value is None are skipped, as are
    transient names, which are never stored.
    """
    s = "\x02".join([f"{name}\x01{value}" for name, value in properties.items() if value is not None])
    if TRANSIENT_PREFIX in s:  # rare: filter exactly
        s = "\x02".join([
            f"{name}\x01{value}" for name, value in properties.items()
            if value is not None and not name.startswith(TRANSIENT_PREFIX)
        ])  # fmt: skip
    return s


def string_to_properties(s: str) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties`` (§3.5.2).

    A segment needs a non-empty name and value; anything else is dropped, and a
    later duplicate name wins.
    """
    # A split, then a partition a segment: 13.6k machine instructions a batch entry against 18.0k for one regex
    # findall in C (callgrind, the joined properties of a 32-message batch).
    props = {}
    for segment in s.split("\x02"):
        name, _, value = segment.partition("\x01")
        if name and value:
            props[name] = value
    return props


def properties_of_bytes(raws: Iterable[bytes]) -> list[dict[str, str]]:
    """:func:`string_to_properties` of each property string in *raws*, decoded as Java decodes them (malformed
    UTF-8 → U+FFFD)."""
    return list(map(string_to_properties, map(_DECODE_JAVA, raws)))


_DECODE_JAVA = methodcaller("decode", "utf-8", "replace")


HostPort = tuple[str, int]


@dataclass(slots=True)
class Message:
    """What a producer hands over: topic, body, flag and user/system properties."""

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)


@dataclass(slots=True)
class MessageExt:
    """A message as the store keeps it: one CommitLog record, every field.

    ``properties_bytes`` holds the stored property string as it was on disk so
    that a decoded record re-encodes byte for byte; when it is None the string
    is built from ``properties`` in dict order. ``properties_parsed`` says that
    ``properties`` is exactly the map those bytes read back as
    (``string2messageProperties``), so that the append path may hand it to dispatch
    instead of dispatch reading the record back; whoever sets it vouches for it.
    """

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostPort = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: HostPort = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    store_size: int = 0
    body_crc: int = 0
    magic: int = 0
    properties_bytes: bytes | None = None
    properties_parsed: bool = field(default=False, compare=False, repr=False)
    #: ``isWaitStoreMsgOK``: whether the put waits for its flush (SYNC_FLUSH) and its slave (SYNC_MASTER); a
    #: broker takes it from the producer's ``WAIT`` property, which it does not store
    wait_store_msg_ok: bool = field(default=True, compare=False, repr=False)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def offset_msg_id(self) -> str:
        """The offset message id: store host + port + commit-log offset (§3.10)."""
        from rocketq.common.message_id import create_offset_message_id

        return create_offset_message_id(self.store_host, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """The message id as the broker and store know it (``MessageExt.getMsgId``): the offset message id."""
        return self.offset_msg_id

    def key_list(self) -> list[str]:
        keys = self.keys
        return [k for k in keys.split(KEY_SEPARATOR) if k] if keys else []


class MessageClientExt(MessageExt):
    """A message as a client receives it from a pull or a query (Java's ``MessageClientExt``): its
    :attr:`msg_id` is the id its producer gave it and a send returned (``UNIQ_KEY``), when it has one, else
    the offset message id, which :attr:`offset_msg_id` always is. The same fields as :class:`MessageExt`
    (an instance of either can become the other by a class change)."""

    __slots__ = ()

    @property
    def msg_id(self) -> str:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id


@dataclass(slots=True)
class MessageExtBatch:
    """A producer batch as the broker stores it (RocketMQ's ``MessageExtBatch``): the records of one send, one
    topic and queue, sharing the send's flags, hosts and times, with each message's own parts held column by
    column (``flags``, ``bodies``, ``properties_bytes``: the property bytes to store).

    ``properties`` are the maps those bytes read back as (:func:`properties_of_bytes`); whoever makes a batch
    vouches for them, as for :attr:`MessageExt.properties_parsed`. The commit log encodes the whole batch with no
    Python call per message (``CommitLog.put_message_batch``).
    """

    topic: str
    queue_id: int
    flags: list[int]
    bodies: list[bytes]
    properties_bytes: list[bytes]
    properties: list[dict[str, str]]
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostPort = ("127.0.0.1", 0)
    store_host: HostPort = ("127.0.0.1", 0)
    reconsume_times: int = 0
    #: The length of the batch as its producer sent it (the request body), which ``maxMessageSize`` limits;
    #: -1: worked out from the columns (:meth:`wire_size`).
    sent_size: int = -1
    #: ``isWaitStoreMsgOK`` of the batch (see :attr:`MessageExt.wait_store_msg_ok`)
    wait_store_msg_ok: bool = True

    def __len__(self) -> int:
        return len(self.bodies)

    def wire_size(self) -> int:
        """The batch's length as its producer sent it (:func:`producer_batch_size` of the columns when not given)."""
        if self.sent_size >= 0:
            return self.sent_size
        return producer_batch_size(self.bodies, self.properties_bytes)
