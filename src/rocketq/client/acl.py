"""The client's side of RocketMQ's plain ACL: every request signed with an account's keys (``AclClientRPCHook``).

Give a producer, consumer or admin client ``credentials=SessionCredentials(access_key, secret_key)`` (or set them
on the :class:`~rocketq.client.client_config.ClientConfig`) to talk to a broker with ``aclEnable=true``; the
signature is :mod:`rocketq.common.acl`'s. A broker without ACL ignores the three extra header fields.
"""

from __future__ import annotations

from rocketq.common.acl import SessionCredentials, sign_fields
from rocketq.remoting.command import RemotingCommand, ext_dict

__all__ = ["AclClientRPCHook", "SessionCredentials"]


class AclClientRPCHook:
    """A :class:`~rocketq.remoting.transport.RpcHook` that signs each request before it is sent."""

    def __init__(self, credentials: SessionCredentials) -> None:
        self.credentials = credentials

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        fields = ext_dict(request.ext_fields) or {}  # signed as they will go on the wire
        request.ext_fields = sign_fields(fields, request.body, self.credentials)
