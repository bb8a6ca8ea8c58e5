"""The broker's access control with ``aclEnable=true``: RocketMQ 4.9's plain ACL.

Mirrors ``acl/plain`` (``PlainAccessValidator``, ``PlainPermissionManager``, ``RemoteAddressStrategyFactory``)
and ``acl/common/Permission``. Accounts come from YAML files under the broker's ``rocketmqHome``:
``conf/plain_acl.yml`` (made empty when missing, as RocketMQ does) and every ``*.yml``/``*.yaml`` below
``conf/acl/``::

    globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.*]   # these hosts need no credentials at all
    accounts:
      - accessKey: RocketMQ          # more than 6 characters, as the secret key
        secretKey: 12345678
        whiteRemoteAddress:          # a host (pattern) that needs no signature for this account
        admin: false                 # admin: the topic/group/config admin codes, and every resource
        defaultTopicPerm: DENY       # DENY | PUB | SUB | PUB|SUB, for topics not listed below
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]

The files are looked at every 5 s and read again when one changed or one came or went
(``AclFileWatchService``); the ACL admin codes (``mqadmin updateAclConfig`` …) rewrite them.

Every request to the broker is checked before it is processed (:meth:`PlainAccessValidator.before_request`): a
host on the global white list passes; otherwise the request must name a known account, come from its
white-listed host or carry a valid signature (:mod:`rocketq.common.acl`), and the account must hold the
permissions the request code needs (the resources ``PlainAccessValidator.parse`` reads off the request: the topic
of a send needs PUB, the topic of a pull and the retry topic of its group SUB, …). A refused request is answered
``SYSTEM_ERROR`` with ``org.apache.rocketmq.acl.common.AclException: <why>`` as the remark, the text Java's
broker sends.

One difference from 4.9.4 on purpose: a batch send (``SEND_BATCH_MESSAGE``) needs PUB on its topic as a single
send does; 4.9.4 leaves batch sends out of its resource table, so they are checked only for the signature.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import logging
import os
import stat
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from rocketq.broker.protocol import decode_body
from rocketq.common import json_compat
from rocketq.common.acl import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    UNIQUE_MSG_QUERY_FLAG,
    calc_signature,
    request_content,
)
from rocketq.common.errors import RocketqError
from rocketq.common.heartbeat import HeartbeatData
from rocketq.common.javacompat import hashmap_key_order
from rocketq.common.mixall import RETRY_GROUP_TOPIC_PREFIX
from rocketq.remoting.codes import RequestCode
from rocketq.remoting.command import RemotingCommand, ext_value
from rocketq.store.config_json import DataVersion

__all__ = [
    "AclError",
    "PlainAccessConfig",
    "PlainAccessValidator",
    "PlainPermissionManager",
    "check_permission",
    "parse_perm",
    "remote_address_strategy",
]

log = logging.getLogger(__name__)

# --- Permission ------------------------------------------------------------------------------------------------

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3
#: Request codes only an admin account may send (``Permission.ADMIN_CODE``).
ADMIN_CODES = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP,
})  # fmt: skip
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
WATCH_INTERVAL_S = 5.0  # AclFileWatchService.WATCH_INTERVAL
KEY_MIN_LENGTH = 6  # AclConstants.ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH: keys must be longer
_PERMS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


class AclError(RocketqError):
    """``AclException``; ``remark`` is the text a refused request is answered with."""

    @property
    def remark(self) -> str:
        return f"org.apache.rocketmq.acl.common.AclException: {self}"


def check_permission(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & PUB or owned & SUB)
    return bool(needed & owned)


def parse_perm(text: str | None) -> int:
    """``Permission.parsePermFromString``: anything unknown (or nothing) is DENY."""
    return DENY if text is None else _PERMS.get(text.strip(), DENY)


def _split_resource(item: str) -> list[str]:
    # StringUtils.split(resource, "="): separators collapse, empty tokens dropped
    return [part for part in item.split("=") if part]


def check_resource_perms(resources: Iterable[str] | None) -> None:
    """``Permission.checkResourcePerms``: every item is ``name=PERM`` with a known PERM."""
    for item in resources or ():
        parts = _split_resource(item)
        if len(parts) != 2:
            raise AclError(f"Parse Resource format error for {item}.\n"
                           "The expected resource format is 'Res=Perm'. For example: topicA=SUB")  # fmt: skip
        if parts[1].strip() != "DENY" and parse_perm(parts[1]) == DENY:
            raise AclError(f"Parse resource permission error for {item}.\n"
                           "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")  # fmt: skip


def retry_topic(group: str | None) -> str | None:
    return None if group is None else RETRY_GROUP_TOPIC_PREFIX + group


def _describe_resource(resource: str, is_group: bool) -> str:
    """``PlainAccessResource.printStr``."""
    return f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX):]}" if is_group else f"topic:{resource}"


# --- remote addresses (RemoteAddressStrategyFactory) --------------------------------------------------------------

AddressMatch = Callable[[str], bool]


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


def expand_ip(address: str, part: int) -> str:
    """``AclUtils.expandIP``: upper case, ``::`` widened to *part* groups, every group four digits."""
    address = address.upper()
    pad = part - address.count(":")
    if pad > 0:
        address = address.replace("::", ":" * (pad + 1))
    return ":".join(group.rjust(4, "0") for group in address.split(":"))


def _octet(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise AclError(f"Netaddress examine scope Exception netaddress is {text}") from None


def _in_scope(address: str, count: int) -> bool:
    """``AclUtils.isScope``: the first *count* groups of *address* are in range."""
    if ":" in address:
        groups = [g for g in expand_ip(address, 8).split(":") if g]
        try:
            return all(0 <= int(g, 16) <= 0xFFFF for g in groups[:count])
        except ValueError:
            return False
    parts = [p for p in address.split(".") if p]
    return len(parts) == 4 and all(0 <= _octet(p) <= 255 for p in parts[:count])


def _multiple(addresses: Iterable[str]) -> AddressMatch:
    members: set[str] = set()
    for address in addresses:
        if _is_ipv4(address):
            members.add(address)
        elif _is_ipv6(address):
            members.add(expand_ip(address, 8))
        else:
            raise AclError(f"Netaddress examine Exception netaddress is {address}")

    def match(remote: str) -> bool:
        return (expand_ip(remote, 8) if _is_ipv6(remote) else remote) in members

    return match


def _braces(address: str, last: str) -> list[str]:
    """``AclUtils.getAddresses``: ``1.2.3.{4,5}`` → ``1.2.3.4``, ``1.2.3.5``."""
    prefix = address[: address.index("{")]
    return [prefix + item for item in last[1:-1].split(",") if item]


def _range(address: str) -> AddressMatch:
    """``RangeRemoteAddressStrategy``: ``192.168.0.*``, ``192.168.1-10.*``, ``1:2:3:4:5:6:7:*`` …"""
    ipv6 = ":" in address
    parts = [p for p in address.split(":" if ipv6 else ".") if p]
    index = start = end = 0
    for i in range(1, len(parts) if ipv6 else 4):
        if i >= len(parts):
            raise AclError(f"Netaddress examine scope Exception netaddress is {address}")
        value = parts[i].strip()
        index = i
        if value == "*":
            start, end = 0, 0xFFFF if ipv6 else 255
        elif "-" in value:
            if value.startswith("-"):
                raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception value {value} ")
            bounds = [b for b in value.split("-") if b]
            try:
                start, end = (int(b, 16 if ipv6 else 10) for b in bounds[:2])
            except ValueError:
                raise AclError(f"Netaddress examine scope Exception netaddress is {address}") from None
            top = 0xFFFF if ipv6 else 255
            if not (0 <= start <= end <= top):
                raise AclError(f"RangeRemoteAddressStrategy netaddress examine scope Exception start is {start} , "
                               f"end is {end}")  # fmt: skip
        if end > 0:
            break
    else:
        raise AclError(f"Netaddress examine scope Exception netaddress is {address}")
    if not _in_scope(address, index - 1):
        raise AclError(f"Netaddress examine scope Exception netaddress is {address}")
    if ipv6:
        if "*" in address and "-" in address:
            groups, head_source = 6, address[: address[: address.rindex(":")].rindex(":")]
        elif "*" in address or "-" in address:
            groups, head_source = 7, address[: address.rindex(":")]
        else:
            groups, head_source = 8, address
        head = expand_ip(head_source, groups)
        index = len([g for g in head.split(":") if g])

        def match6(remote: str) -> bool:
            if not _is_ipv6(remote):
                return False
            full = expand_ip(remote, 8)
            if not full.startswith(head):
                return False
            return start <= int(full[5 * index : 5 * index + 4], 16) <= end

        return match6
    head = "".join(p.strip() + "." for p in parts[:index])

    def match4(remote: str) -> bool:
        if not _is_ipv4(remote) or not remote.startswith(head):
            return False
        rest = remote[len(head) :].split(".")
        return start <= int(rest[0]) <= end

    return match4


def remote_address_strategy(address: str | None) -> AddressMatch:
    """``RemoteAddressStrategyFactory.getRemoteAddressStrategy``: who a white-list entry lets in.

    Blank: nobody; ``*`` (``*.*.*.*``, ``*:*:*:*:*:*:*:*``): everybody; ``1.2.3.{4,5}`` or ``a,b``: those hosts;
    a ``*`` or an ``x-y`` range in one group: that range; otherwise that one host. A malformed entry raises
    :class:`AclError`.
    """
    address = "" if address is None else str(address)
    if not address.strip():
        return lambda _remote: False
    if address in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda _remote: True
    if address.endswith("}"):
        sep = ":" if ":" in address else "."
        parts = [p for p in address.split(sep) if p]
        if sep == "." and len(parts) < 4:
            raise AclError(f"MultipleRemoteAddressStrategy has got a/some wrong format IP(s) {address}")
        if not parts[-1].startswith("{"):
            raise AclError(f"MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress {address}")
        return _multiple(_braces(address, parts[-1]))
    if "," in address:
        return _multiple(p for p in address.split(",") if p)
    if "*" in address or "-" in address:
        return _range(address)
    if not (_is_ipv4(address) or _is_ipv6(address)):
        raise AclError(f"Netaddress examine Exception netaddress is {address}")
    want = expand_ip(address, 8)
    return lambda remote: expand_ip(remote, 8) == want


# --- accounts -------------------------------------------------------------------------------------------------------


def _texts(value: Any, name: str) -> list[str] | None:
    """A YAML list as the Java bean's List<String> gets it (``ext_value`` of each item); fastjson refuses
    anything else there, and so the file."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [t for t in map(ext_value, value) if t is not None]
    raise AclError(f"{name} is not a list: {value!r}")


def _fastjson_bool(value: Any, name: str) -> bool:
    """A YAML value as fastjson's ``castToBoolean`` makes the Java bean's boolean of it: true, 1, "1", "Y" and
    "T" are true; false, 0, "0", "N", "F", "", "null" and nothing are false; anything else makes the file
    invalid (4.9.4 does not read it)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, (int, float)):
        return int(value) == 1
    if isinstance(value, str):
        if value in ("", "null", "NULL", "0", "N") or value.lower() == "false" or value.upper() == "F":
            return False
        if value in ("1", "T") or value.lower() == "true" or value.upper() == "Y":
            return True
    raise AclError(f"can not cast to boolean, {name} : {value}")


@dataclasses.dataclass
class PlainAccessConfig:
    """An account as written in a file (``PlainAccessConfig``)."""

    access_key: str | None = None
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None

    @classmethod
    def from_yaml(cls, item: Mapping[str, Any]) -> PlainAccessConfig:
        return cls(ext_value(item.get("accessKey")), ext_value(item.get("secretKey")),
                   ext_value(item.get("whiteRemoteAddress")), _fastjson_bool(item.get("admin"), "admin"),
                   ext_value(item.get("defaultTopicPerm")), ext_value(item.get("defaultGroupPerm")),
                   _texts(item.get("topicPerms"), "topicPerms"),
                   _texts(item.get("groupPerms"), "groupPerms"))  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """The members fastjson writes (sorted, nulls left out), for GET_BROKER_CLUSTER_ACL_CONFIG."""
        members = {"accessKey": self.access_key, "admin": self.admin, "defaultGroupPerm": self.default_group_perm,
                   "defaultTopicPerm": self.default_topic_perm, "groupPerms": self.group_perms,
                   "secretKey": self.secret_key, "topicPerms": self.topic_perms,
                   "whiteRemoteAddress": self.white_remote_address}  # fmt: skip
        return {k: v for k, v in members.items() if v is not None}

    def check(self) -> None:
        """``checkPlainAccessConfig``."""
        if self.access_key is None or self.secret_key is None or len(self.access_key) <= KEY_MIN_LENGTH \
                or len(self.secret_key) <= KEY_MIN_LENGTH:  # fmt: skip
            raise AclError(f"The accessKey={self.access_key} and secretKey={self.secret_key} cannot be null and "
                           "length should longer than 6")  # fmt: skip


@dataclasses.dataclass
class Account:
    """An account as the checks use it (``PlainAccessResource`` built by ``buildPlainAccessResource``)."""

    access_key: str
    secret_key: str
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int] | None  # topic, or %RETRY%group, → permission
    white: AddressMatch

    @classmethod
    def build(cls, config: PlainAccessConfig) -> Account:
        config.check()
        perms: dict[str, int] = {}
        for items, is_topic in ((config.group_perms, False), (config.topic_perms, True)):
            for item in items or ():
                parts = _split_resource(item)
                if len(parts) != 2:
                    kind = "topic" if is_topic else "group"
                    raise AclError(f"Parse resource permission failed for {kind}:{item}")
                name = parts[0].strip()
                perms[name if is_topic else RETRY_GROUP_TOPIC_PREFIX + name] = parse_perm(parts[1])
        assert config.access_key is not None and config.secret_key is not None
        return cls(config.access_key, config.secret_key, config.admin, parse_perm(config.default_topic_perm),
                   parse_perm(config.default_group_perm), perms or None,
                   remote_address_strategy(config.white_remote_address))  # fmt: skip


@dataclasses.dataclass
class AccessRequest:
    """What a request asks for (``PlainAccessResource`` made by ``PlainAccessValidator.parse``).

    The signed content is put together only when a signature is checked (:meth:`content`): a white-listed
    host's requests never need it."""

    remote: str
    code: int
    access_key: str | None = None
    signature: str | None = None
    security_token: str | None = None
    perms: dict[str, int] | None = None
    fields: Mapping[str, str] | None = None
    body: bytes | None = None

    def content(self) -> bytes:
        """``AclUtils.combineRequestContent`` of the fields received but the signature and
        ``_UNIQUE_KEY_QUERY``, then the body."""
        return request_content(self.fields or {}, self.body, skip=(SIGNATURE, UNIQUE_MSG_QUERY_FLAG))

    def need(self, resource: str | None, perm: int) -> None:
        if resource is None:
            return
        if self.perms is None:
            self.perms = {}
        self.perms[resource] = perm


@dataclasses.dataclass(frozen=True)
class _Snapshot:
    """Everything the files say, swapped whole on a reload: checks read it without a lock."""

    files: tuple[str, ...] = ()
    accounts: Mapping[str, Account] = dataclasses.field(default_factory=dict)  # access key → account
    key_files: Mapping[str, str] = dataclasses.field(default_factory=dict)  # access key → its file
    global_white: tuple[AddressMatch, ...] = ()
    versions: Mapping[str, DataVersion] = dataclasses.field(default_factory=dict)  # file → its dataVersion


class PlainPermissionManager:
    """The accounts of the ACL files under *home* and the checks against them (``PlainPermissionManager``).

    Raises :class:`AclError` at construction when a file says something invalid (the broker does not start);
    a later reload that fails is logged and the accounts in force stay.
    """

    def __init__(self, home: str | Path, *, watch_interval: float | None = WATCH_INTERVAL_S) -> None:
        self.home = Path(home)
        self.acl_dir = self.home / "conf" / "acl"
        self.default_file = self.home / "conf" / "plain_acl.yml"
        self._lock = threading.RLock()  # writers: a reload, an admin update
        self._state = _Snapshot()
        self._stamps: dict[str, float] = {}
        self._failed_stamps: dict[str, float] | None = None  # the files as they were when a reload failed
        self._file_data: dict[str, dict[str, Any]] = {}  # what each file said when last read with data
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.load()
        if watch_interval:
            self._thread = threading.Thread(target=self._watch, args=(watch_interval,), name="AclFileWatchService",
                                            daemon=True)  # fmt: skip
            self._thread.start()

    # --- files -------------------------------------------------------------------------------------------------
    def acl_files(self) -> list[str]:
        """``conf/acl/**/*.yml|yaml`` and ``conf/plain_acl.yml``, as ``getAllAclFiles`` lists them."""
        found: list[str] = []
        if self.acl_dir.is_dir():
            seen: set[str] = set()  # directories by their real path: links are followed (as File.listFiles does),
            for root, dirs, names in os.walk(self.acl_dir, followlinks=True):  # but a loop of links only once
                real = os.path.realpath(root)
                if real in seen:
                    dirs.clear()
                    continue
                seen.add(real)
                dirs.sort()
                for name in sorted(names):
                    if name.endswith((".yml", ".yaml")) and name != "tools.yml":
                        found.append(str(Path(root) / name))
        default = str(self.default_file)
        if self.default_file.exists() and default not in found:
            found.append(default)
        return found

    def _read(self, path: str) -> dict[str, Any]:
        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f)
        except FileNotFoundError:
            return {}
        except (OSError, yaml.YAMLError) as e:
            raise AclError(f"cannot read the ACL file {path}: {e}") from e
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise AclError(f"the ACL file {path} is not a map of globalWhiteRemoteAddresses and accounts")
        return data

    def load(self, *, reload: bool = False) -> None:
        """Read every ACL file (``load()``); the default file is made, empty, when missing. On a *reload* a file
        that says nothing now keeps what it said before, as 4.9.4's reload of a file skips a file with no data."""
        with self._lock:
            if not self.default_file.exists():
                try:
                    self.default_file.parent.mkdir(parents=True, exist_ok=True)
                    self.default_file.touch()
                except OSError as e:
                    raise AclError(f"cannot create {self.default_file}: {e.strerror}") from e
            accounts: dict[str, Account] = {}
            key_files: dict[str, str] = {}
            white: list[AddressMatch] = []
            versions: dict[str, DataVersion] = {}
            files = self.acl_files()
            stamps = _modified_times(files)
            file_data: dict[str, dict[str, Any]] = {}
            for path in files:
                data = self._read(path)
                if not data:
                    kept = self._file_data.get(path) if reload else None
                    if kept is None:
                        continue
                    log.warning("No data in %s, skip it: what it said before stays in force", path)
                    data = kept
                file_data[path] = data
                try:
                    for entry in data.get("globalWhiteRemoteAddresses") or ():
                        white.append(remote_address_strategy(ext_value(entry)))
                    built = [Account.build(PlainAccessConfig.from_yaml(_account_item(item)))
                             for item in data.get("accounts") or ()]  # fmt: skip
                except AclError as e:
                    raise AclError(f"{path}: {e}") from None
                for account in built:
                    if account.access_key in key_files:
                        log.warning("access key %s is in several ACL files: the one of %s is used",
                                    account.access_key, key_files[account.access_key])  # fmt: skip
                        continue
                    accounts[account.access_key] = account
                    key_files[account.access_key] = path
                versions[path] = _data_version(data)
            self._state = _Snapshot(tuple(files), accounts, key_files, tuple(white), versions)
            self._stamps = stamps
            self._file_data = file_data

    def _watch(self, interval: float) -> None:
        while not self._stopped.wait(interval):
            stamps: dict[str, float] | None = None
            try:
                stamps = _modified_times(self.acl_files())
                if stamps != self._stamps and stamps != self._failed_stamps:  # a failure is told once a change
                    self.load(reload=True)
                    self._failed_stamps = None
                    log.info("ACL files read again: %d accounts", len(self._state.accounts))
            except AclError as e:
                self._failed_stamps = stamps
                log.error("ACL files not read again, the accounts in force stay: %s", e)
            except Exception:  # pragma: no cover - the watch must go on
                log.exception("watching the ACL files failed")

    def shutdown(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _write(self, path: str, data: dict[str, Any]) -> None:
        """``updateAclConfigFileVersion`` then ``writeDataObject``: next dataVersion, file rewritten, read again.

        Written whole beside the file, then renamed over it (a crash leaves the old file or the new one, never
        half of one), with the file's own mode (its secret keys stay as private as they were), through a
        symbolic link to the file it names, as 4.9.4's writing in place keeps both."""
        version = _data_version(data)
        version.next_version()
        data["dataVersion"] = [{"counter": version.counter, "timestamp": version.timestamp}]
        real = os.path.realpath(path)
        tmp = f"{real}.tmp"
        try:
            try:
                mode = stat.S_IMODE(os.stat(real).st_mode)
            except FileNotFoundError:
                mode = 0o644
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with open(fd, "w", encoding="utf-8") as f:
                os.fchmod(fd, mode)  # as it was, whatever the umask
                yaml.safe_dump(data, f, default_flow_style=False, sort_keys=False, allow_unicode=True)
            os.replace(tmp, real)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise AclError(f"cannot write {path}: {e.strerror}") from e
        self.load(reload=True)

    # --- the ACL admin codes ----------------------------------------------------------------------------------
    def update_access_config(self, config: PlainAccessConfig) -> None:
        """``updateAccessConfig``: the account updated in its file (moved to the end of its list, as RocketMQ
        does), or added to the default file."""
        config.check()
        check_resource_perms(config.topic_perms)
        check_resource_perms(config.group_perms)
        Account.build(config)  # refuses a bad white-list address before anything is written
        with self._lock:
            path = self._state.key_files.get(config.access_key or "", str(self.default_file))
            data = self._read(path)
            accounts = [a for a in data.get("accounts") or () if isinstance(a, dict)]
            for i, item in enumerate(accounts):
                if ext_value(item.get("accessKey")) == config.access_key:
                    del accounts[i]
                    accounts.append(_account_map(item, config))
                    break
            else:
                accounts.append(_account_map(None, config))
            data["accounts"] = accounts
            self._write(path, data)

    def delete_access_config(self, access_key: str | None) -> bool:
        """``deleteAccessConfig``: False when no file holds the account."""
        if not access_key:
            return False
        with self._lock:
            path = self._state.key_files.get(access_key)
            if path is None:
                return False
            data = self._read(path)
            accounts = [a for a in data.get("accounts") or () if isinstance(a, dict)]
            kept = [a for a in accounts if ext_value(a.get("accessKey")) != access_key]
            if len(kept) == len(accounts):
                return False
            data["accounts"] = kept
            self._write(path, data)
            return True

    def update_global_white_addrs(self, addrs: list[str], file: str | None = None) -> bool:
        """``updateGlobalWhiteAddrsConfig``: the white list of *file* (the default file when not given)."""
        path = file or str(self.default_file)
        target = Path(path)
        if not target.is_file():
            log.error("ACL file %s does not exist or is a directory", path)
            return False
        if not os.path.join(os.getcwd(), path).startswith(os.path.abspath(self.home)):  # as 4.9.4: the path as given
            log.error("ACL file %s is not under %s", path, self.home)
            return False
        for addr in addrs:
            remote_address_strategy(addr)  # a malformed entry is refused, not written
        with self._lock:
            data = self._read(path)
            data["globalWhiteRemoteAddresses"] = list(addrs)
            self._write(path, data)
        return True

    def data_version(self) -> DataVersion:
        """The default file's dataVersion (``getAclConfigDataVersion``)."""
        return self._state.versions.get(str(self.default_file)) or DataVersion()

    def data_versions(self) -> dict[str, DataVersion]:
        return dict(self._state.versions)

    def all_config(self) -> tuple[list[str], list[PlainAccessConfig]]:
        """``getAllAclConfig``: every file's white list and accounts (the first of an access key)."""
        white: list[str] = []
        configs: list[PlainAccessConfig] = []
        seen: set[str] = set()
        for path in self._state.files:
            data = self._read(path)
            white.extend(t for t in map(ext_value, data.get("globalWhiteRemoteAddresses") or ()) if t is not None)
            for item in data.get("accounts") or ():
                if isinstance(item, dict):
                    config = PlainAccessConfig.from_yaml(item)
                    if config.access_key not in seen:
                        seen.add(config.access_key or "")
                        configs.append(config)
        return white, configs

    # --- checks ------------------------------------------------------------------------------------------------
    def validate(self, request: AccessRequest) -> None:
        """``PlainPermissionManager.validate``: raises :class:`AclError` when *request* may not go on."""
        state = self._state
        for white in state.global_white:
            if white(request.remote):
                return
        if request.access_key is None:
            raise AclError("No accessKey is configured")
        account = state.accounts.get(request.access_key)
        if account is None:
            raise AclError(f"No acl config for {request.access_key}")
        if account.white(request.remote):
            return
        if calc_signature(request.content(), account.secret_key) != request.signature:
            raise AclError(f"Check signature failed for accessKey={request.access_key}")
        if request.perms is not None and request.perms.get(RMQ_SYS_TRACE_TOPIC) == PUB:
            return
        self._check_perms(request, account)

    @staticmethod
    def _check_perms(request: AccessRequest, account: Account) -> None:
        if request.code in ADMIN_CODES and not account.admin:
            raise AclError(f"Need admin permission for request code={request.code}, but accessKey="
                           f"{account.access_key} is not")  # fmt: skip
        needed = request.perms
        if needed is None or (account.perms is None and account.admin):
            return
        owned = account.perms or {}
        # In the order Java's HashMap of them iterates: the first refused names the same resource as 4.9.4's.
        for resource in (needed if len(needed) < 2 else hashmap_key_order(needed)):
            perm = needed[resource]
            is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
            has = owned.get(resource)
            if has is None:
                has = account.default_group_perm if is_group else account.default_topic_perm
            if not check_permission(perm, has):
                raise AclError(f"No default permission for {_describe_resource(resource, is_group)}")


def _modified_times(files: Iterable[str]) -> dict[str, float]:
    """The modification time of each file that is there (what the watch compares)."""
    out: dict[str, float] = {}
    for path in files:
        with contextlib.suppress(OSError):
            out[path] = os.stat(path).st_mtime
    return out


def _account_item(item: Any) -> Mapping[str, Any]:
    if not isinstance(item, dict):
        raise AclError(f"an account is not a map of accessKey, secretKey, ...: {item!r}")
    return item


def _data_version(data: Mapping[str, Any]) -> DataVersion:
    versions = data.get("dataVersion")
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        first = versions[0]
        with contextlib.suppress(TypeError, ValueError):
            return DataVersion(counter=int(first.get("counter", 0)), timestamp=int(first.get("timestamp", 0)))
    return DataVersion()


def _account_map(existing: dict[str, Any] | None, config: PlainAccessConfig) -> dict[str, Any]:
    """``createAclAccessConfigMap``: the account's members as the file keeps them."""
    out: dict[str, Any] = dict(existing) if existing is not None else {}
    out["accessKey"] = config.access_key
    if config.secret_key:
        out["secretKey"] = config.secret_key
    if config.white_remote_address is not None:
        out["whiteRemoteAddress"] = config.white_remote_address
    out["admin"] = config.admin
    if config.default_topic_perm:
        out["defaultTopicPerm"] = config.default_topic_perm
    if config.default_group_perm:
        out["defaultGroupPerm"] = config.default_group_perm
    if config.topic_perms is not None:
        out["topicPerms"] = list(config.topic_perms)
    if config.group_perms is not None:
        out["groupPerms"] = list(config.group_perms)
    return out


# --- the hook ---------------------------------------------------------------------------------------------------

# Request code → header field of the topic a send names, and the field of the group whose retry topic a send to a
# retry topic needs. (4.9.4 reads "group" for SEND_MESSAGE, a field its header does not have: such a send to a
# retry topic needs nothing, as there.)
_SEND_TOPIC = {
    RequestCode.SEND_MESSAGE: ("topic", "group"),
    RequestCode.SEND_MESSAGE_V2: ("b", "a"),
    RequestCode.SEND_BATCH_MESSAGE: ("b", "a"),
}


class PlainAccessValidator:
    """The broker's ACL hook (``PlainAccessValidator``): parse what a request needs, then validate it."""

    def __init__(self, manager: PlainPermissionManager) -> None:
        self.manager = manager

    def before_request(self, remote_addr: str, request: RemotingCommand) -> None:
        self.manager.validate(self.parse(request, remote_addr))

    @staticmethod
    def parse(request: RemotingCommand, remote_addr: str) -> AccessRequest:
        """``PlainAccessValidator.parse``: the account, signature, needed permissions and signed content."""
        remote = remote_addr.rsplit(":", 1)[0] if ":" in remote_addr else remote_addr
        if remote.startswith("[") and remote.endswith("]"):
            remote = remote[1:-1]
        access = AccessRequest(remote, request.code)
        fields = request.ext_fields
        if fields is None:
            return access
        access.access_key = fields.get(ACCESS_KEY)
        access.signature = fields.get(SIGNATURE)
        access.security_token = fields.get(SECURITY_TOKEN)
        code = request.code
        try:
            send = _SEND_TOPIC.get(code)
            if send is not None:
                topic = fields.get(send[0])
                if topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    access.need(retry_topic(fields.get(send[1])), SUB)
                else:
                    access.need(topic, PUB)
            elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
                access.need(retry_topic(fields.get("group")), SUB)
            elif code in (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE):  # 5.x's lite pull: a pull
                access.need(fields.get("topic"), SUB)
                access.need(retry_topic(fields.get("consumerGroup")), SUB)
            elif code == RequestCode.QUERY_MESSAGE:
                access.need(fields.get("topic"), SUB)
            elif code == RequestCode.HEART_BEAT:
                heartbeat: HeartbeatData = decode_body(HeartbeatData, request.body)
                for consumer in heartbeat.consumer_data_set:
                    access.need(retry_topic(consumer.group_name), SUB)
                    for sub in consumer.subscription_data_set:
                        access.need(sub.topic, SUB)
            elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
                access.need(retry_topic(fields.get("consumerGroup")), SUB)
            elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
                access.need(retry_topic(fields.get("consumerGroup")), SUB)
                access.need(fields.get("topic"), SUB)
        except Exception as e:  # a body that does not decode: refused, as Java's parse wraps it
            raise AclError(str(e)) from e
        access.fields, access.body = fields, request.body
        return access


def acl_config_body(manager: PlainPermissionManager) -> bytes:
    """GET_BROKER_CLUSTER_ACL_CONFIG's body (``GetBrokerClusterAclConfigResponseBody``)."""
    white, configs = manager.all_config()
    return json_compat.dumps({"globalWhiteAddrs": white,
                              "plainAccessConfigs": [c.to_json() for c in configs]}).encode("utf-8")  # fmt: skip

