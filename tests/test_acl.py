"""The plain ACL (``aclEnable=true``): request signing, the broker's checks, its files and admin codes, and the
client and CLI that sign.

The account file is RocketMQ 4.9.4's own ``conf/plain_acl.yml`` (its two accounts and their permissions), so the
end-to-end scenario here is the one ``test_acl_reference.py`` runs against the real broker, whose release ships
that file.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import test_client_e2e as e2e
from rocketq.broker.plain_acl import (
    DENY,
    PUB,
    SUB,
    AclError,
    PlainAccessConfig,
    PlainAccessValidator,
    PlainPermissionManager,
    check_permission,
    check_resource_perms,
    expand_ip,
    parse_perm,
    remote_address_strategy,
)
from rocketq.cli.main import main as rocketq_main
from rocketq.client import ClientConfig, ConsumeFromWhere, LitePullConsumer, Producer, new_message
from rocketq.client.acl import AclClientRPCHook
from rocketq.client.errors import ClientError
from rocketq.common.acl import SessionCredentials, calc_signature, request_content, sign_fields
from rocketq.common.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from rocketq.remoting.codes import RequestCode
from rocketq.remoting.command import create_request

#: RocketMQ 4.9.4's conf/plain_acl.yml, its comments left out.
STOCK_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""
ACCOUNT = SessionCredentials("RocketMQ", "12345678")
ADMIN = SessionCredentials("rocketmq2", "12345678")


def _home(root: Path, text: str = STOCK_ACL) -> Path:
    home = root / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(text, encoding="utf-8")
    return home


# --- signing ------------------------------------------------------------------------------------------------


def test_signature_is_hmac_sha1_of_the_sorted_values_then_the_body() -> None:
    fields = {"topic": "T", "AccessKey": "ak1234567", "b": "2", "a": "1", "Signature": "old"}
    content = request_content(fields, b"BODY")
    # TreeMap order of the names: AccessKey, a, b, topic (upper case sorts first); Signature left out
    assert content == b"ak123456712TBODY"
    expected = base64.b64encode(hmac.new(b"secret12", content, hashlib.sha1).digest()).decode()
    assert calc_signature(content, "secret12") == expected
    signed = sign_fields({"topic": "T", "a": "1", "b": "2"}, b"BODY", SessionCredentials("ak1234567", "secret12"))
    assert signed["AccessKey"] == "ak1234567" and signed["Signature"] == expected
    assert "SecurityToken" not in signed


def test_a_unique_key_query_is_signed_as_the_broker_checks_it(tmp_path: Path) -> None:
    """The broker leaves _UNIQUE_KEY_QUERY out of the signed content; the client does too (Java's hook signs it,
    and its unique-key queries under ACL fail with "Check signature failed")."""
    validator = PlainAccessValidator(PlainPermissionManager(_home(tmp_path), watch_interval=None))
    request = create_request(RequestCode.QUERY_MESSAGE, {"topic": "topicB", "key": "K", "maxNum": 32,
                                                         "beginTimestamp": 0, "endTimestamp": 1,
                                                         "_UNIQUE_KEY_QUERY": True})  # fmt: skip
    AclClientRPCHook(ACCOUNT).before_request("127.0.0.1:10911", request)
    validator.before_request("127.0.0.1:50000", request)


def test_security_token_is_sent_and_signed() -> None:
    creds = SessionCredentials("ak1234567", "secret12", "tok")
    signed = sign_fields({"x": "1"}, None, creds)
    assert signed["SecurityToken"] == "tok"
    assert signed["Signature"] == calc_signature(b"ak1234567tok1", "secret12")  # AccessKey, SecurityToken, x


def test_credentials_need_both_keys_and_never_print_the_secret() -> None:
    with pytest.raises(ValueError):
        SessionCredentials("ak", "")
    assert "12345678" not in repr(ACCOUNT)


def test_client_hook_signs_what_the_broker_checks(tmp_path: Path) -> None:
    manager = PlainPermissionManager(_home(tmp_path), watch_interval=None)
    validator = PlainAccessValidator(manager)
    request = create_request(RequestCode.SEND_MESSAGE_V2, {"a": "groupB", "b": "topicB", "e": 3, "k": False}, b"x")
    AclClientRPCHook(ACCOUNT).before_request("127.0.0.1:10911", request)
    assert request.ext_fields is not None and request.ext_fields["e"] == "3" and request.ext_fields["k"] == "false"
    validator.before_request("127.0.0.1:50000", request)  # passes
    request.body = b"y"  # the body is signed too
    with pytest.raises(AclError, match="Check signature failed for accessKey=RocketMQ"):
        validator.before_request("127.0.0.1:50000", request)


# --- permissions and addresses ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("needed", "owned", "ok"), [
    (PUB, PUB, True), (PUB, SUB, False), (SUB, PUB | SUB, True), (PUB, DENY, False), (PUB, DENY | PUB, False),
    (1 << 1, SUB, True), (1 << 1, DENY, False),
])  # fmt: skip
def test_check_permission(needed: int, owned: int, ok: bool) -> None:
    assert check_permission(needed, owned) is ok


def test_parse_perm_and_resource_lists() -> None:
    assert parse_perm("PUB|SUB") == parse_perm(" SUB|PUB ") == PUB | SUB
    assert parse_perm(None) == parse_perm("READ") == DENY
    check_resource_perms(["a=PUB", "b=DENY", "c=SUB|PUB"])
    with pytest.raises(AclError, match="format error"):
        check_resource_perms(["noperm"])
    with pytest.raises(AclError, match="permission error"):
        check_resource_perms(["a=READ"])


@pytest.mark.parametrize(("pattern", "remote", "ok"), [
    ("", "127.0.0.1", False),
    ("*", "10.1.2.3", True),
    ("*.*.*.*", "10.1.2.3", True),
    ("192.168.0.*", "192.168.0.77", True),
    ("192.168.0.*", "192.168.1.77", False),
    ("192.168.*.*", "192.168.9.1", True),
    ("192.*.*.*", "193.168.9.1", False),
    ("192.168.1.10-20", "192.168.1.15", True),
    ("192.168.1.10-20", "192.168.1.21", False),
    ("192.168.1.{1,2,3}", "192.168.1.2", True),
    ("192.168.1.{1,2,3}", "192.168.1.4", False),
    ("127.0.0.1,10.0.0.1", "10.0.0.1", True),
    ("127.0.0.1", "127.0.0.1", True),
    ("127.0.0.1", "127.0.0.2", False),
    ("::1", "0:0:0:0:0:0:0:1", True),
    ("1050:0:0:0:5:600:300c:*", "1050::5:600:300c:326b", True),
    ("1050:0:0:0:5:600:300c:*", "1050::5:600:300d:326b", False),
])  # fmt: skip
def test_remote_address_strategies(pattern: str, remote: str, ok: bool) -> None:
    assert remote_address_strategy(pattern)(remote) is ok


@pytest.mark.parametrize("bad", ["300.1.1.1", "192.168.1.{1,x}", "192.168.1.-5", "192.168.1.20-10", "a.b.c.d"])
def test_malformed_white_list_entries_are_refused(bad: str) -> None:
    with pytest.raises(AclError):
        remote_address_strategy(bad)


def test_expand_ip() -> None:
    assert expand_ip("1050::5:600:300c:326b", 8) == "1050:0000:0000:0000:0005:0600:300C:326B"


# --- the broker's checks ------------------------------------------------------------------------------------------


def _signed(code: int, fields: dict[str, object], body: bytes | None = None,
            creds: SessionCredentials | None = ACCOUNT):  # type: ignore[no-untyped-def]  # fmt: skip
    request = create_request(code, fields, body)
    if creds is not None:
        AclClientRPCHook(creds).before_request("", request)
    return request


def test_validator_resources_of_each_request_code(tmp_path: Path) -> None:
    validator = PlainAccessValidator(PlainPermissionManager(_home(tmp_path), watch_interval=None))
    here = "127.0.0.1:40000"

    def ok(request: object) -> None:
        validator.before_request(here, request)  # type: ignore[arg-type]

    def refused(request: object, why: str) -> None:
        with pytest.raises(AclError, match=why):
            validator.before_request(here, request)  # type: ignore[arg-type]

    send = {"a": "groupB", "b": "topicB", "e": 0}
    ok(_signed(RequestCode.SEND_MESSAGE_V2, send))
    refused(_signed(RequestCode.SEND_MESSAGE_V2, {**send, "b": "topicC"}), "No default permission for topic:topicC")
    refused(_signed(RequestCode.SEND_MESSAGE_V2, {**send, "b": "topicA"}), "topic:topicA")
    refused(_signed(RequestCode.SEND_MESSAGE, {"producerGroup": "g", "topic": "other"}), "topic:other")
    ok(_signed(RequestCode.SEND_MESSAGE, {"producerGroup": "groupA", "topic": "%RETRY%groupA"}))  # as 4.9.4
    refused(_signed(RequestCode.SEND_BATCH_MESSAGE, {**send, "b": "other"}), "topic:other")
    # a retry topic is the group's: SUB on the group
    ok(_signed(RequestCode.SEND_MESSAGE_V2, {**send, "a": "groupB", "b": "%RETRY%groupB"}))
    refused(_signed(RequestCode.SEND_MESSAGE_V2, {**send, "a": "groupA", "b": "%RETRY%groupA"}), "group:groupA")
    ok(_signed(RequestCode.PULL_MESSAGE, {"consumerGroup": "groupC", "topic": "topicC"}))
    refused(_signed(RequestCode.PULL_MESSAGE, {"consumerGroup": "groupA", "topic": "topicC"}), "group:groupA")
    # 5.x's LITE_PULL_MESSAGE, which rocketq serves, is a pull: the same checks (it read denied topics)
    refused(_signed(RequestCode.LITE_PULL_MESSAGE, {"consumerGroup": "groupC", "topic": "topicA"}), "topic:topicA")
    refused(_signed(RequestCode.LITE_PULL_MESSAGE, {"consumerGroup": "groupA", "topic": "topicC"}), "group:groupA")
    ok(_signed(RequestCode.LITE_PULL_MESSAGE, {"consumerGroup": "groupC", "topic": "topicC"}))
    # both refused: the one named is the first of Java's HashMap of them (topicA's bucket comes before %RETRY%groupA's)
    refused(_signed(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "groupA", "topic": "topicA"}),
            "No default permission for topic:topicA")  # fmt: skip
    ok(_signed(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "anyGroup"}))  # defaultGroupPerm SUB
    ok(_signed(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "groupB", "topic": "topicB"}))
    refused(_signed(RequestCode.QUERY_MESSAGE, {"topic": "topicA"}), "topic:topicA")
    heartbeat = HeartbeatData(client_id="c", consumer_data_set=[
        ConsumerData(group_name="groupB", subscription_data_set=[SubscriptionData(topic="topicA")])])
    refused(_signed(RequestCode.HEART_BEAT, {}, heartbeat.encode()), "topic:topicA")
    # admin codes need an admin account; any account reads runtime info
    refused(_signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}), "Need admin permission for request code=17")
    ok(_signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, creds=ADMIN))
    ok(_signed(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
    # the trace topic takes anyone's signed sends
    ok(_signed(RequestCode.SEND_MESSAGE_V2, {**send, "b": "RMQ_SYS_TRACE_TOPIC"}))
    refused(_signed(RequestCode.GET_BROKER_RUNTIME_INFO, {}, creds=None), "No accessKey is configured")
    refused(_signed(RequestCode.GET_BROKER_RUNTIME_INFO, {}, creds=SessionCredentials("nobody1", "secret12")),
            "No acl config for nobody1")  # fmt: skip
    # the global white list lets a host in without anything; an account's white host skips the signature
    validator.before_request("192.168.0.5:1234", create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {}))
    unsigned = create_request(RequestCode.SEND_MESSAGE_V2, {**send, "AccessKey": "rocketmq2"})
    validator.before_request("192.168.1.9:1234", unsigned)
    with pytest.raises(AclError, match="Check signature failed"):
        validator.before_request("192.168.2.9:1234", unsigned)


def test_accounts_over_several_files_first_one_wins(tmp_path: Path) -> None:
    home = _home(tmp_path)
    (home / "conf" / "acl" / "team").mkdir(parents=True)
    (home / "conf" / "acl" / "team" / "more.yaml").write_text(
        "globalWhiteRemoteAddresses: [10.9.9.*]\naccounts:\n"
        "  - {accessKey: teamuser1, secretKey: teamsecret, defaultTopicPerm: PUB}\n"
        "  - {accessKey: RocketMQ, secretKey: another1, admin: true}\n", encoding="utf-8")  # fmt: skip
    (home / "conf" / "acl" / "notes.txt").write_text("not an ACL file", encoding="utf-8")
    manager = PlainPermissionManager(home, watch_interval=None)
    validator = PlainAccessValidator(manager)
    validator.before_request("10.9.9.1:1", create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {}))
    team = SessionCredentials("teamuser1", "teamsecret")
    validator.before_request("127.0.0.1:1", _signed(RequestCode.SEND_MESSAGE_V2, {"b": "anyTopic"}, creds=team))
    # RocketMQ is in both files: conf/acl/ is read before plain_acl.yml, so its account there is the one in force
    validator.before_request("127.0.0.1:1", _signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {},
                                                    creds=SessionCredentials("RocketMQ", "another1")))  # fmt: skip
    assert len(manager.data_versions()) == 2


@pytest.mark.parametrize("text", [
    "accounts:\n  - {accessKey: short, secretKey: 12345678}\n",
    "accounts:\n  - {accessKey: longenough, secretKey: 12345678, topicPerms: [justaname]}\n",
    "accounts:\n  - {accessKey: longenough, secretKey: 12345678, whiteRemoteAddress: 300.1.1.1}\n",
    "globalWhiteRemoteAddresses: [not-an-ip]\n",
    "accounts: [\n",
])  # fmt: skip
def test_a_bad_acl_file_stops_the_start_with_a_reason(tmp_path: Path, text: str) -> None:
    with pytest.raises(AclError):
        PlainPermissionManager(_home(tmp_path, text), watch_interval=None)


@pytest.mark.parametrize(("value", "admin"), [
    ("true", True), ("1", True), ('"1"', True), ('"Y"', True), ('"T"', True), ("1.0", True), ("yes", True),
    ("false", False), ("0", False), ('"N"', False), ('"F"', False), ("2", False), ("", False),
    ('"yes"', None), ('" true "', None), ('"maybe"', None),
])  # fmt: skip
def test_admin_values_are_read_as_fastjson_reads_them(tmp_path: Path, value: str, admin: bool | None) -> None:
    """fastjson's castToBoolean: 1, "1", "Y" and "T" make an admin too; a word it does not know makes the file
    invalid (4.9.4 does not start with it; "yes" unquoted is YAML's true)."""
    text = f"accounts:\n  - accessKey: someone1\n    secretKey: 12345678\n    admin: {value}\n"
    if admin is None:
        with pytest.raises(AclError, match="can not cast to boolean"):
            PlainPermissionManager(_home(tmp_path, text), watch_interval=None)
        return
    manager = PlainPermissionManager(_home(tmp_path, text), watch_interval=None)
    assert manager._state.accounts["someone1"].admin is admin


def test_permissions_must_be_lists(tmp_path: Path) -> None:
    text = "accounts:\n  - {accessKey: someone1, secretKey: 12345678, topicPerms: topicA=PUB}\n"
    with pytest.raises(AclError, match="topicPerms is not a list"):
        PlainPermissionManager(_home(tmp_path, text), watch_interval=None)


def test_linked_files_and_directories(tmp_path: Path) -> None:
    """As 4.9.4 (File.listFiles, writing in place): a linked directory under conf/acl is read (a loop of links
    once); a rewritten file keeps its mode, and a link is written through, not replaced."""
    home = _home(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deeper").mkdir(parents=True)
    (elsewhere / "deeper" / "extra.yml").write_text(
        "accounts:\n  - {accessKey: linkeduser, secretKey: 12345678, defaultTopicPerm: PUB}\n", encoding="utf-8")
    (home / "conf" / "acl").mkdir()
    (home / "conf" / "acl" / "team").symlink_to(elsewhere)
    (elsewhere / "deeper" / "loop").symlink_to(elsewhere)  # a cycle of links
    default = home / "conf" / "plain_acl.yml"
    real_default = tmp_path / "secrets" / "plain_acl.yml"
    real_default.parent.mkdir()
    real_default.write_text(default.read_text(), encoding="utf-8")
    real_default.chmod(0o600)
    default.unlink()
    default.symlink_to(real_default)
    manager = PlainPermissionManager(home, watch_interval=None)
    assert "linkeduser" in manager._state.accounts
    assert [Path(f).name for f in manager.acl_files()] == ["extra.yml", "plain_acl.yml"]
    manager.update_access_config(PlainAccessConfig("newbie01", "newsecret"))
    assert manager.update_global_white_addrs(["127.0.0.*"])
    assert default.is_symlink() and (real_default.stat().st_mode & 0o777) == 0o600
    data = yaml.safe_load(real_default.read_text())
    assert data["globalWhiteRemoteAddresses"] == ["127.0.0.*"] and data["accounts"][-1]["accessKey"] == "newbie01"
    assert not list(real_default.parent.glob("*.tmp"))


def test_an_emptied_file_keeps_its_accounts_until_it_says_something(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """4.9.4's reload of one file skips a file with no data: its accounts stay. A reload that fails is logged
    once, not at every look."""
    home = _home(tmp_path)
    manager = PlainPermissionManager(home, watch_interval=0.05)
    validator = PlainAccessValidator(manager)
    request = _signed(RequestCode.SEND_MESSAGE_V2, {"a": "groupB", "b": "topicB"})
    default = home / "conf" / "plain_acl.yml"
    try:
        default.write_text("", encoding="utf-8")
        time.sleep(0.3)
        validator.before_request("127.0.0.1:1", request)  # RocketMQ is still known
        default.write_text("accounts: [\n", encoding="utf-8")
        time.sleep(0.5)
        assert len([r for r in caplog.records if "not read again" in r.getMessage()]) == 1
        default.write_text("accounts:\n  - {accessKey: someone1, secretKey: 12345678}\n", encoding="utf-8")
        deadline = time.monotonic() + 10
        while "someone1" not in manager._state.accounts and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(AclError, match="No acl config for RocketMQ"):
            validator.before_request("127.0.0.1:1", request)
    finally:
        manager.shutdown()


def test_missing_default_file_is_made_empty(tmp_path: Path) -> None:
    manager = PlainPermissionManager(tmp_path / "nohome", watch_interval=None)
    assert manager.default_file.exists() and manager.default_file.read_text() == ""
    with pytest.raises(AclError, match="No acl config"):
        PlainAccessValidator(manager).before_request("127.0.0.1:1", _signed(RequestCode.HEART_BEAT, {}, b"{}"))


def test_admin_updates_rewrite_the_file_with_a_new_version(tmp_path: Path) -> None:
    home = _home(tmp_path)
    manager = PlainPermissionManager(home, watch_interval=None)
    validator = PlainAccessValidator(manager)
    newbie = SessionCredentials("newbie01", "newsecret")
    manager.update_access_config(PlainAccessConfig("newbie01", "newsecret", default_topic_perm="PUB",
                                                   topic_perms=["topicA=SUB"]))  # fmt: skip
    data = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
    assert data["dataVersion"][0]["counter"] == 1
    assert [a["accessKey"] for a in data["accounts"]] == ["RocketMQ", "rocketmq2", "newbie01"]
    validator.before_request("127.0.0.1:1", _signed(RequestCode.SEND_MESSAGE_V2, {"b": "x"}, creds=newbie))
    with pytest.raises(AclError, match="topic:topicA"):
        validator.before_request("127.0.0.1:1", _signed(RequestCode.SEND_MESSAGE_V2, {"b": "topicA"}, creds=newbie))
    # updating an account keeps its other members, and moves it to the end (as RocketMQ does)
    manager.update_access_config(PlainAccessConfig("RocketMQ", "87654321", default_topic_perm="PUB"))
    data = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())
    updated = data["accounts"][-1]
    assert updated["accessKey"] == "RocketMQ" and updated["secretKey"] == "87654321"
    assert updated["topicPerms"][0] == "topicA=DENY" and updated["defaultTopicPerm"] == "PUB"
    assert data["dataVersion"][0]["counter"] == 2 and manager.data_version().counter == 2
    with pytest.raises(AclError, match="longer than 6"):
        manager.update_access_config(PlainAccessConfig("tiny", "newsecret"))
    with pytest.raises(AclError, match="Parse resource permission error"):
        manager.update_access_config(PlainAccessConfig("newbie02", "newsecret", topic_perms=["t=WRITE"]))
    assert manager.delete_access_config("newbie01") and not manager.delete_access_config("newbie01")
    with pytest.raises(AclError, match="No acl config for newbie01"):
        validator.before_request("127.0.0.1:1", _signed(RequestCode.SEND_MESSAGE_V2, {"b": "x"}, creds=newbie))
    assert manager.update_global_white_addrs(["127.0.0.*"])
    validator.before_request("127.0.0.1:1", create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {}))
    assert not manager.update_global_white_addrs(["1.1.1.1"], str(tmp_path / "elsewhere.yml"))
    white, accounts = manager.all_config()
    assert white == ["127.0.0.*"] and [a.access_key for a in accounts] == ["rocketmq2", "RocketMQ"]


def test_files_are_read_again_when_they_change(tmp_path: Path) -> None:
    home = _home(tmp_path)
    manager = PlainPermissionManager(home, watch_interval=0.05)
    validator = PlainAccessValidator(manager)
    late = SessionCredentials("lateuser", "latesecret")
    request = _signed(RequestCode.SEND_MESSAGE_V2, {"b": "x"}, creds=late)
    try:
        with pytest.raises(AclError, match="No acl config for lateuser"):
            validator.before_request("127.0.0.1:1", request)
        (home / "conf" / "acl").mkdir()
        (home / "conf" / "acl" / "late.yml").write_text(
            "accounts:\n  - {accessKey: lateuser, secretKey: latesecret, defaultTopicPerm: PUB}\n", encoding="utf-8")
        deadline = time.monotonic() + 10
        while "lateuser" not in manager._state.accounts and time.monotonic() < deadline:
            time.sleep(0.05)
        validator.before_request("127.0.0.1:1", request)
        # a broken edit leaves the accounts in force
        (home / "conf" / "acl" / "late.yml").write_text("accounts: [\n", encoding="utf-8")
        time.sleep(0.3)
        validator.before_request("127.0.0.1:1", request)
    finally:
        manager.shutdown()


# --- end to end: the client and the CLI against a broker with aclEnable=true ----------------------------------------


async def scenario_acl(cluster: e2e.Cluster) -> None:
    """What RocketMQ 4.9.4's stock plain_acl.yml allows the account RocketMQ, through the Python client."""
    topic_ok, topic_denied, group = "topicB", "topicA", "groupB"
    cfg = e2e.client_config(cluster, credentials=ACCOUNT)
    body = f"acl-{time.time_ns()}".encode()
    async with Producer("groupB", config=cfg, send_timeout=10) as producer:
        sent = await producer.send(new_message(topic_ok, body, tags="acl"))
        assert sent.msg_id
        with pytest.raises(ClientError, match="No default permission for topic:topicA"):
            await producer.send(new_message(topic_denied, b"no"))
    for creds, why in ((SessionCredentials("RocketMQ", "wrongsecret"), "Check signature failed"),
                       (None, "No accessKey is configured")):  # fmt: skip
        async with Producer("groupB", config=e2e.client_config(cluster, credentials=creds), send_timeout=5) as p:
            with pytest.raises(ClientError, match=why):
                await p.send(new_message(topic_ok, b"no"))
    consumer = LitePullConsumer(group, config=cfg, pull_batch_size=32,
                                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)  # fmt: skip
    consumer.subscribe(topic_ok, "*")
    async with consumer:
        deadline = time.monotonic() + 30
        seen: list[bytes] = []
        while body not in seen and time.monotonic() < deadline:
            seen.extend(m.body for m in await consumer.poll(timeout=1.0))
        assert body in seen


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[e2e.Cluster, Path]]:
    root = tmp_path_factory.mktemp("acl-cluster")
    home = _home(root)
    servers = e2e.InProcessServers(root, acl_enable=True, rocketmq_home=str(home))
    try:
        addr = servers.start()
        yield e2e.Cluster(addr, "rocketq", servers.stop), home
    finally:
        servers.stop()


def test_client_against_a_broker_with_acl(acl_cluster: tuple[e2e.Cluster, Path]) -> None:
    e2e.run(scenario_acl(acl_cluster[0]))


def _cli(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = rocketq_main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_acl_verbs_and_signed_produce(acl_cluster: tuple[e2e.Cluster, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    cluster, home = acl_cluster
    ns = cluster.namesrv_addr
    admin = ("--access-key", "rocketmq2", "--secret-key", "12345678")
    code, out, err = _cli("admin", "-n", ns, "clusterList", capsys=capsys)  # the name server takes anyone
    assert code == 0, err
    broker = out.split("broker-a", 1)[1].split()[1]
    code, out, err = _cli("admin", "-n", ns, "updateAclConfig", "-b", broker, "-a", "cliuser1", "-s", "clisecret",
                          "-i", "PUB", "-t", "topicA=DENY", *admin, capsys=capsys)  # fmt: skip
    assert code == 0 and f"create or update plain access config to {broker} success." in out, err
    code, out, err = _cli("admin", "-n", ns, "getAclConfig", "-b", broker, "--json", *admin, capsys=capsys)
    assert code == 0 and '"cliuser1"' in out and '"10.10.103.*"' in out, err
    code, out, err = _cli("admin", "-n", ns, "getAclConfig", "-b", broker, *admin, capsys=capsys)
    # as Java prints them: [a, b], false, {k=v}; no Python reprs
    assert code == 0 and "10.10.103.*, " in out and "admin             : false" in out, err
    assert "['" not in out and "False" not in out and "None" not in out
    # as mqadmin: no line of its own for the broker, nothing where a field is null
    assert "#broker" not in out and out.startswith("\nglobalWhiteRemoteAddresses: [")
    cli_user = out.split("accessKey         : cliuser1\n", 1)[1]
    assert cli_user.splitlines()[1] == "  whiteRemoteAddress: "
    code, out, err = _cli("admin", "-n", ns, "clusterAclConfigVersion", "-c", "DefaultCluster", *admin,
                          capsys=capsys)  # fmt: skip
    assert code == 0 and "plain_acl.yml" in out and out.startswith("#Cluster Name"), err
    assert out.endswith("get cluster's plain access config version success.\n")
    row = next(line for line in out.splitlines() if "plain_acl.yml" in line)
    assert len(row.split()[-2]) == 10 and len(row.split()[-1]) == 8  # yyyy-MM-dd HH:mm:ss
    code, out, err = _cli("admin", "-n", ns, "clusterAclConfigVersion", "-b", broker, *admin, capsys=capsys)
    assert code == 0 and not out.startswith("#") and "plain_acl.yml" in out, err
    assert out.endswith("get broker's plain access config version success.\n")
    code, out, err = _cli("produce", "-n", ns, "-t", "cliTopic", "--count", "3", "--access-key", "cliuser1",
                          "--secret-key", "clisecret", capsys=capsys)  # fmt: skip
    assert code == 0, err
    code, out, err = _cli("produce", "-n", ns, "-t", "cliTopic", "--access-key", "cliuser1", capsys=capsys)
    assert code == 2 and "--access-key and --secret-key go together" in err
    code, out, err = _cli("admin", "-n", ns, "deleteAclConfig", "-b", broker, "-a", "cliuser1", *admin,
                          capsys=capsys)  # fmt: skip
    assert code == 0 and "account's accesskey is:cliuser1" in out, err
    code, out, err = _cli("admin", "-n", ns, "deleteAclConfig", "-b", broker, "-a", "cliuser1", *admin,
                          capsys=capsys)  # fmt: skip
    assert code == 1 and "has been deleted failed" in err
    code, out, err = _cli("admin", "-n", ns, "brokerStatus", "-b", broker, capsys=capsys)
    assert code == 1 and "No accessKey is configured" in err
    code, out, err = _cli("admin", "-n", ns, "updateGlobalWhiteAddr", "-b", broker, "-g", "127.0.0.1,10.10.103.*",
                          *admin, capsys=capsys)  # fmt: skip
    assert code == 0 and "update global white remote addresses" in out, err
    code, out, err = _cli("admin", "-n", ns, "brokerStatus", "-b", broker, capsys=capsys)
    assert code == 0, err  # 127.0.0.1 is white-listed now
    assert "127.0.0.1" in yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())["globalWhiteRemoteAddresses"]
    _cli("admin", "-n", ns, "updateGlobalWhiteAddr", "-b", broker, "-g", "10.10.103.*,192.168.0.*", capsys=capsys)


def test_acl_admin_codes_on_a_broker_without_acl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers = e2e.InProcessServers(tmp_path)
    try:
        ns = servers.start()
        broker = f"127.0.0.1:{servers.broker.port}"
        code, _out, err = _cli("admin", "-n", ns, "getAclConfig", "-b", broker, capsys=capsys)
        assert code == 1 and "ACL is not enabled on this broker" in err
        code, _out, err = _cli("admin", "-n", ns, "updateAclConfig", "-b", broker, "-a", "someone1", "-s",
                               "somesecret", capsys=capsys)  # fmt: skip
        assert code == 1 and "aclEnable=true" in err
        # a signed request is served by a broker that does not check: the fields are ignored
        async def signed_send() -> None:
            cfg = ClientConfig(namesrv_addr=ns, credentials=ACCOUNT)
            async with Producer("anyGroup", config=cfg) as producer:
                assert (await producer.send(new_message("AnyTopic", b"x"))).msg_id

        asyncio.run(asyncio.wait_for(signed_send(), 60))
    finally:
        servers.stop()


def test_acl_failures_are_named_as_4x_names_them() -> None:
    """209-211 answer an ACL request with 4.x's ACL failures; 5.x reused the numbers for POLLING_FULL & co."""
    from rocketq.client.admin import AdminError, MQAdmin
    from rocketq.remoting.command import make_response_for

    failed = make_response_for(create_request(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG), 209, "accessKey is null")
    with pytest.raises(AdminError, match=r"UPDATE_AND_CREATE_ACL_CONFIG_FAILED \(209\): accessKey is null"):
        MQAdmin.check(failed, "update ACL account", request_code=RequestCode.UPDATE_AND_CREATE_ACL_CONFIG)
    with pytest.raises(AdminError, match=r"POLLING_FULL \(209\)"):
        MQAdmin.check(failed, "pop")
