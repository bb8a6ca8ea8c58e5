"""The messages of RocketMQ 5's gRPC protocol (package ``apache.rocketmq.v2``), built at import.

RocketMQ 5 clients speak gRPC to a proxy (``MessagingService``). The wire format of a protobuf message is its
field numbers and types; this module states the part of the protocol rocketq serves as a table (names, numbers,
types, as the protocol defines them) and builds the message classes from it with protobuf's descriptor API, so
nothing is generated at install time and no ``.proto`` file ships.

Only what rocketq reads or writes is stated: a field left out here is skipped when it comes in (protobuf keeps
unknown fields aside) and never sent. The classes live in a descriptor pool of their own, so they do not clash
with a client library of the same protocol loaded into the same process (the tests load the official one).

Usage: ``from rocketq.proxy.schema import pb``; ``pb.SendMessageRequest.FromString(data)``, ``pb.Code.OK``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, timestamp_pb2

__all__ = ["PACKAGE", "SERVICE", "pb"]

PACKAGE = "apache.rocketmq.v2"
SERVICE = f"{PACKAGE}.MessagingService"

# --- enums: name -> [(value name, number)] -------------------------------------------------------------------
ENUMS: dict[str, list[tuple[str, int]]] = {
    "TransactionResolution": [("TRANSACTION_RESOLUTION_UNSPECIFIED", 0), ("COMMIT", 1), ("ROLLBACK", 2)],
    "TransactionSource": [("SOURCE_UNSPECIFIED", 0), ("SOURCE_CLIENT", 1), ("SOURCE_SERVER_CHECK", 2)],
    "Permission": [("PERMISSION_UNSPECIFIED", 0), ("NONE", 1), ("READ", 2), ("WRITE", 3), ("READ_WRITE", 4)],
    "FilterType": [("FILTER_TYPE_UNSPECIFIED", 0), ("TAG", 1), ("SQL", 2)],
    "AddressScheme": [("ADDRESS_SCHEME_UNSPECIFIED", 0), ("IPv4", 1), ("IPv6", 2), ("DOMAIN_NAME", 3)],
    "MessageType": [("MESSAGE_TYPE_UNSPECIFIED", 0), ("NORMAL", 1), ("FIFO", 2), ("DELAY", 3), ("TRANSACTION", 4)],
    "DigestType": [("DIGEST_TYPE_UNSPECIFIED", 0), ("CRC32", 1), ("MD5", 2), ("SHA1", 3)],
    "ClientType": [("CLIENT_TYPE_UNSPECIFIED", 0), ("PRODUCER", 1), ("PUSH_CONSUMER", 2), ("SIMPLE_CONSUMER", 3),
                   ("PULL_CONSUMER", 4)],
    "Encoding": [("ENCODING_UNSPECIFIED", 0), ("IDENTITY", 1), ("GZIP", 2)],
    "Code": [
        ("CODE_UNSPECIFIED", 0), ("OK", 20000), ("MULTIPLE_RESULTS", 30000), ("BAD_REQUEST", 40000),
        ("ILLEGAL_ACCESS_POINT", 40001), ("ILLEGAL_TOPIC", 40002), ("ILLEGAL_CONSUMER_GROUP", 40003),
        ("ILLEGAL_MESSAGE_TAG", 40004), ("ILLEGAL_MESSAGE_KEY", 40005), ("ILLEGAL_MESSAGE_GROUP", 40006),
        ("ILLEGAL_MESSAGE_PROPERTY_KEY", 40007), ("INVALID_TRANSACTION_ID", 40008), ("ILLEGAL_MESSAGE_ID", 40009),
        ("ILLEGAL_FILTER_EXPRESSION", 40010), ("ILLEGAL_INVISIBLE_TIME", 40011), ("ILLEGAL_DELIVERY_TIME", 40012),
        ("INVALID_RECEIPT_HANDLE", 40013), ("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", 40014),
        ("UNRECOGNIZED_CLIENT_TYPE", 40015), ("MESSAGE_CORRUPTED", 40016), ("CLIENT_ID_REQUIRED", 40017),
        ("ILLEGAL_POLLING_TIME", 40018), ("UNAUTHORIZED", 40100), ("FORBIDDEN", 40300), ("NOT_FOUND", 40400),
        ("MESSAGE_NOT_FOUND", 40401), ("TOPIC_NOT_FOUND", 40402), ("CONSUMER_GROUP_NOT_FOUND", 40403),
        ("REQUEST_TIMEOUT", 40800), ("PAYLOAD_TOO_LARGE", 41300), ("MESSAGE_BODY_TOO_LARGE", 41301),
        ("MESSAGE_BODY_EMPTY", 41302), ("PRECONDITION_FAILED", 42800), ("TOO_MANY_REQUESTS", 42900),
        ("MESSAGE_PROPERTIES_TOO_LARGE", 43101), ("INTERNAL_ERROR", 50000), ("INTERNAL_SERVER_ERROR", 50001),
        ("HA_NOT_AVAILABLE", 50002), ("NOT_IMPLEMENTED", 50100), ("PROXY_TIMEOUT", 50400),
        ("MASTER_PERSISTENCE_TIMEOUT", 50401), ("SLAVE_PERSISTENCE_TIMEOUT", 50402), ("UNSUPPORTED", 50500),
        ("VERSION_UNSUPPORTED", 50501), ("VERIFY_FIFO_MESSAGE_UNSUPPORTED", 50502),
        ("FAILED_TO_CONSUME_MESSAGE", 60000),
    ],
    "Language": [("LANGUAGE_UNSPECIFIED", 0), ("JAVA", 1), ("CPP", 2), ("DOT_NET", 3), ("GOLANG", 4), ("RUST", 5),
                 ("PYTHON", 6), ("PHP", 7), ("NODE_JS", 8), ("RUBY", 9), ("OBJECTIVE_C", 10), ("DART", 11),
                 ("KOTLIN", 12)],
}  # fmt: skip

# --- messages: name -> [(number, field name, type, how)] -----------------------------------------------------
# type: a scalar ("string", "bytes", "bool", "int32", "int64", "float"), "Timestamp" / "Duration" (the
# well-known types), or an enum or message of this table. how: "" (plain proto3), "repeated", "optional"
# (proto3 ``optional``: presence is kept), "map" (map<string, string>), or "oneof:<name>".
MESSAGES: dict[str, list[tuple[int, str, str, str]]] = {
    "FilterExpression": [(1, "type", "FilterType", ""), (2, "expression", "string", "")],
    "RetryPolicy": [(1, "max_attempts", "int32", ""),
                    (2, "exponential_backoff", "ExponentialBackoff", "oneof:strategy"),
                    (3, "customized_backoff", "CustomizedBackoff", "oneof:strategy")],
    "ExponentialBackoff": [(1, "initial", "Duration", ""), (2, "max", "Duration", ""), (3, "multiplier", "float", "")],
    "CustomizedBackoff": [(1, "next", "Duration", "repeated")],
    "Resource": [(1, "resource_namespace", "string", ""), (2, "name", "string", "")],
    "SubscriptionEntry": [(1, "topic", "Resource", ""), (2, "expression", "FilterExpression", "")],
    "Address": [(1, "host", "string", ""), (2, "port", "int32", "")],
    "Endpoints": [(1, "scheme", "AddressScheme", ""), (2, "addresses", "Address", "repeated")],
    "Broker": [(1, "name", "string", ""), (2, "id", "int32", ""), (3, "endpoints", "Endpoints", "")],
    "MessageQueue": [(1, "topic", "Resource", ""), (2, "id", "int32", ""), (3, "permission", "Permission", ""),
                     (4, "broker", "Broker", ""), (5, "accept_message_types", "MessageType", "repeated")],
    "Digest": [(1, "type", "DigestType", ""), (2, "checksum", "string", "")],
    "SystemProperties": [
        (1, "tag", "string", "optional"), (2, "keys", "string", "repeated"), (3, "message_id", "string", ""),
        (4, "body_digest", "Digest", ""), (5, "body_encoding", "Encoding", ""), (6, "message_type", "MessageType", ""),
        (7, "born_timestamp", "Timestamp", ""), (8, "born_host", "string", ""),
        (9, "store_timestamp", "Timestamp", "optional"), (10, "store_host", "string", ""),
        (11, "delivery_timestamp", "Timestamp", "optional"), (12, "receipt_handle", "string", "optional"),
        (13, "queue_id", "int32", ""), (14, "queue_offset", "int64", "optional"),
        (15, "invisible_duration", "Duration", "optional"), (16, "delivery_attempt", "int32", "optional"),
        (17, "message_group", "string", "optional"), (18, "trace_context", "string", "optional"),
        (19, "orphaned_transaction_recovery_duration", "Duration", "optional"),
    ],
    "Message": [(1, "topic", "Resource", ""), (2, "user_properties", "string", "map"),
                (3, "system_properties", "SystemProperties", ""), (4, "body", "bytes", "")],
    "Assignment": [(1, "message_queue", "MessageQueue", "")],
    "Status": [(1, "code", "Code", ""), (2, "message", "string", "")],
    "UA": [(1, "language", "Language", ""), (2, "version", "string", ""), (3, "platform", "string", ""),
           (4, "hostname", "string", "")],
    "Settings": [
        (1, "client_type", "ClientType", "optional"), (2, "access_point", "Endpoints", "optional"),
        (3, "backoff_policy", "RetryPolicy", "optional"), (4, "request_timeout", "Duration", "optional"),
        (5, "publishing", "Publishing", "oneof:pub_sub"), (6, "subscription", "Subscription", "oneof:pub_sub"),
        (7, "user_agent", "UA", ""), (8, "metric", "Metric", ""),
    ],
    "Publishing": [(1, "topics", "Resource", "repeated"), (2, "max_body_size", "int32", ""),
                   (3, "validate_message_type", "bool", "")],
    "Subscription": [(1, "group", "Resource", "optional"), (2, "subscriptions", "SubscriptionEntry", "repeated"),
                     (3, "fifo", "bool", "optional"), (4, "receive_batch_size", "int32", "optional"),
                     (5, "long_polling_timeout", "Duration", "optional")],
    "Metric": [(1, "on", "bool", ""), (2, "endpoints", "Endpoints", "optional")],
    "QueryRouteRequest": [(1, "topic", "Resource", ""), (2, "endpoints", "Endpoints", "")],
    "QueryRouteResponse": [(1, "status", "Status", ""), (2, "message_queues", "MessageQueue", "repeated")],
    "SendMessageRequest": [(1, "messages", "Message", "repeated")],
    "SendResultEntry": [(1, "status", "Status", ""), (2, "message_id", "string", ""),
                        (3, "transaction_id", "string", ""), (4, "offset", "int64", "")],
    "SendMessageResponse": [(1, "status", "Status", ""), (2, "entries", "SendResultEntry", "repeated")],
    "QueryAssignmentRequest": [(1, "topic", "Resource", ""), (2, "group", "Resource", ""),
                               (3, "endpoints", "Endpoints", "")],
    "QueryAssignmentResponse": [(1, "status", "Status", ""), (2, "assignments", "Assignment", "repeated")],
    "ReceiveMessageRequest": [
        (1, "group", "Resource", ""), (2, "message_queue", "MessageQueue", ""),
        (3, "filter_expression", "FilterExpression", ""), (4, "batch_size", "int32", ""),
        (5, "invisible_duration", "Duration", "optional"), (6, "auto_renew", "bool", ""),
        (7, "long_polling_timeout", "Duration", "optional"), (8, "attempt_id", "string", "optional"),
    ],
    "ReceiveMessageResponse": [(1, "status", "Status", "oneof:content"), (2, "message", "Message", "oneof:content"),
                               (3, "delivery_timestamp", "Timestamp", "oneof:content")],
    "AckMessageEntry": [(1, "message_id", "string", ""), (2, "receipt_handle", "string", "")],
    "AckMessageRequest": [(1, "group", "Resource", ""), (2, "topic", "Resource", ""),
                          (3, "entries", "AckMessageEntry", "repeated")],
    "AckMessageResultEntry": [(1, "message_id", "string", ""), (2, "receipt_handle", "string", ""),
                              (3, "status", "Status", "")],
    "AckMessageResponse": [(1, "status", "Status", ""), (2, "entries", "AckMessageResultEntry", "repeated")],
    "ForwardMessageToDeadLetterQueueRequest": [
        (1, "group", "Resource", ""), (2, "topic", "Resource", ""), (3, "receipt_handle", "string", ""),
        (4, "message_id", "string", ""), (5, "delivery_attempt", "int32", ""),
        (6, "max_delivery_attempts", "int32", ""),
    ],
    "ForwardMessageToDeadLetterQueueResponse": [(1, "status", "Status", "")],
    "HeartbeatRequest": [(1, "group", "Resource", "optional"), (2, "client_type", "ClientType", "")],
    "HeartbeatResponse": [(1, "status", "Status", "")],
    "EndTransactionRequest": [
        (1, "topic", "Resource", ""), (2, "message_id", "string", ""), (3, "transaction_id", "string", ""),
        (4, "resolution", "TransactionResolution", ""), (5, "source", "TransactionSource", ""),
        (6, "trace_context", "string", ""),
    ],
    "EndTransactionResponse": [(1, "status", "Status", "")],
    "RecoverOrphanedTransactionCommand": [(1, "message", "Message", ""), (2, "transaction_id", "string", "")],
    "TelemetryCommand": [
        (1, "status", "Status", "optional"), (2, "settings", "Settings", "oneof:command"),
        (5, "recover_orphaned_transaction_command", "RecoverOrphanedTransactionCommand", "oneof:command"),
    ],
    "NotifyClientTerminationRequest": [(1, "group", "Resource", "optional")],
    "NotifyClientTerminationResponse": [(1, "status", "Status", "")],
    "ChangeInvisibleDurationRequest": [
        (1, "group", "Resource", ""), (2, "topic", "Resource", ""), (3, "receipt_handle", "string", ""),
        (4, "invisible_duration", "Duration", ""), (5, "message_id", "string", ""),
    ],
    "ChangeInvisibleDurationResponse": [(1, "status", "Status", ""), (2, "receipt_handle", "string", "")],
}  # fmt: skip

_SCALARS = {
    "string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    "float": descriptor_pb2.FieldDescriptorProto.TYPE_FLOAT,
}
_WELL_KNOWN = {"Timestamp": ".google.protobuf.Timestamp", "Duration": ".google.protobuf.Duration"}


def _type_of(field: descriptor_pb2.FieldDescriptorProto, type_name: str) -> None:
    fdp = descriptor_pb2.FieldDescriptorProto
    if type_name in _SCALARS:
        field.type = _SCALARS[type_name]
    elif type_name in _WELL_KNOWN:
        field.type = fdp.TYPE_MESSAGE
        field.type_name = _WELL_KNOWN[type_name]
    elif type_name in ENUMS:
        field.type = fdp.TYPE_ENUM
        field.type_name = f".{PACKAGE}.{type_name}"
    elif type_name in MESSAGES:
        field.type = fdp.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{type_name}"
    else:  # pragma: no cover - a mistake in the tables above
        raise ValueError(f"unknown type {type_name}")


def _message(name: str, fields: list[tuple[int, str, str, str]]) -> descriptor_pb2.DescriptorProto:
    fdp = descriptor_pb2.FieldDescriptorProto
    msg = descriptor_pb2.DescriptorProto(name=name)
    oneofs: dict[str, int] = {}
    synthetic: list[tuple[descriptor_pb2.FieldDescriptorProto, str]] = []
    for number, field_name, type_name, how in fields:
        field = msg.field.add(name=field_name, number=number, label=fdp.LABEL_OPTIONAL)
        if how == "map":  # map<string, string>: a repeated nested entry type marked as a map entry
            entry_name = "".join(part.capitalize() for part in field_name.split("_")) + "Entry"
            entry = msg.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, label=fdp.LABEL_OPTIONAL, type=fdp.TYPE_STRING)
            entry.field.add(name="value", number=2, label=fdp.LABEL_OPTIONAL, type=fdp.TYPE_STRING)
            field.label = fdp.LABEL_REPEATED
            field.type = fdp.TYPE_MESSAGE
            field.type_name = f".{PACKAGE}.{name}.{entry_name}"
            continue
        _type_of(field, type_name)
        if how == "repeated":
            field.label = fdp.LABEL_REPEATED
        elif how.startswith("oneof:"):
            group = how.split(":", 1)[1]
            if group not in oneofs:
                oneofs[group] = len(msg.oneof_decl)
                msg.oneof_decl.add(name=group)
            field.oneof_index = oneofs[group]
        elif how == "optional":
            synthetic.append((field, f"_{field_name}"))
    # proto3 ``optional``: each such field in a oneof of its own, declared after the real ones.
    for field, oneof_name in synthetic:
        field.proto3_optional = True
        field.oneof_index = len(msg.oneof_decl)
        msg.oneof_decl.add(name=oneof_name)
    return msg


def _build() -> SimpleNamespace:
    pool = descriptor_pool.DescriptorPool()
    for wkt in (timestamp_pb2, duration_pb2):
        pool.AddSerializedFile(wkt.DESCRIPTOR.serialized_pb)
    f = descriptor_pb2.FileDescriptorProto(name="rocketq/proxy/apache_rocketmq_v2.proto", package=PACKAGE,
                                           syntax="proto3")  # fmt: skip
    f.dependency.extend(["google/protobuf/timestamp.proto", "google/protobuf/duration.proto"])
    for enum_name, values in ENUMS.items():
        e = f.enum_type.add(name=enum_name)
        for value_name, number in values:
            e.value.add(name=value_name, number=number)
    for msg_name, fields in MESSAGES.items():
        f.message_type.append(_message(msg_name, fields))
    file_desc = pool.Add(f)
    ns: dict[str, Any] = {}
    for msg_name in MESSAGES:
        ns[msg_name] = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{msg_name}"))
    for enum_name in ENUMS:
        # Value names as attributes (pb.Code.OK), and Name(number) for messages.
        desc = pool.FindEnumTypeByName(f"{PACKAGE}.{enum_name}")
        values = {v.name: v.number for v in desc.values}
        values["Name"] = lambda number, _d=desc: (_d.values_by_number[number].name
                                                  if number in _d.values_by_number else str(number))  # fmt: skip
        ns[enum_name] = SimpleNamespace(**values)
    ns["FILE"] = file_desc
    return SimpleNamespace(**ns)


#: The message classes (``pb.SendMessageRequest``) and enums (``pb.Code.OK``, ``pb.Code.Name(20000)``).
pb = _build()
