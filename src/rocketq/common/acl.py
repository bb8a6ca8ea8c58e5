"""Request signing of RocketMQ's plain ACL: what a client adds to a request and what a broker checks.

Mirrors ``acl/common`` of RocketMQ 4.9 (``AclClientRPCHook``, ``AclUtils.combineRequestContent``,
``AclSigner``, ``SessionCredentials``). A signed request carries three more ``extFields``:

- ``AccessKey``: the account;
- ``SecurityToken``: only when the credentials have one;
- ``Signature``: ``Base64(HmacSHA1(secretKey, content))``, where *content* is the UTF-8 text of every other
  ``extFields`` value (``AccessKey`` and ``SecurityToken`` included) in the order of their names, sorted as
  Java's ``TreeMap`` sorts strings, followed by the body's bytes.

The broker recomputes the content from the fields it received, leaving out ``Signature`` and
``_UNIQUE_KEY_QUERY`` (``PlainAccessValidator.parse``), and compares the signatures.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "ACCESS_KEY",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "SessionCredentials",
    "calc_signature",
    "request_content",
    "sign_fields",
]

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
#: ``MixAll.UNIQUE_MSG_QUERY_FLAG``: the broker leaves it out of the signed content.
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An account's keys (``SessionCredentials``); ``security_token`` is optional and sent as given."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("ACL credentials need both an access key and a secret key")

    def __repr__(self) -> str:  # never print the secret
        return f"SessionCredentials(access_key={self.access_key!r}, secret_key='***')"


def _java_sort_key(name: str) -> bytes:
    # String.compareTo compares UTF-16 code units; UTF-16-BE bytes compare the same way.
    return name.encode("utf-16-be", "surrogatepass")


def request_content(fields: Mapping[str, str], body: bytes | None, *, skip: tuple[str, ...] = (SIGNATURE,)) -> bytes:
    """``AclUtils.combineRequestContent``: the values of *fields* but those named in *skip*, by sorted name, in
    UTF-8, then the body."""
    text = "".join(fields[name] for name in sorted(fields, key=_java_sort_key) if name not in skip)
    content = text.encode("utf-8", "surrogatepass")
    return content + body if body else content


def calc_signature(content: bytes, secret_key: str) -> str:
    """``AclSigner.calSignature``: Base64 of the HmacSHA1 of *content* under *secret_key* (UTF-8)."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign_fields(fields: dict[str, str], body: bytes | None, credentials: SessionCredentials) -> dict[str, str]:
    """``AclClientRPCHook.doBeforeRequest`` on a request's ``extFields`` (changed in place and returned): the
    access key and security token added, then the signature of all of them with the body."""
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        fields[SECURITY_TOKEN] = credentials.security_token
    fields.pop(SIGNATURE, None)
    # The broker leaves _UNIQUE_KEY_QUERY out of what it checks; Java's hook signs it, so its unique-key queries
    # fail under ACL. It is left out here too, so that they work.
    content = request_content(fields, body, skip=(SIGNATURE, UNIQUE_MSG_QUERY_FLAG))
    fields[SIGNATURE] = calc_signature(content, credentials.secret_key)
    return fields
