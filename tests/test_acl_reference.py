"""The plain ACL against the real Apache RocketMQ 4.9.4 (opt-in, marker ``reference``), both ways:

- rocketq's Python client, signing with the account ``RocketMQ`` of the release's stock ``conf/plain_acl.yml``,
  against a 4.9.4 broker with ``aclEnable=true`` (which reads that file): what it may and may not do, and that a
  wrong secret or no credentials are refused (``test_acl.scenario_acl``);
- the Java client 4.9.4 (``AclClientRPCHook``) and mqadmin 4.9.4 (which signs with the release's
  ``conf/tools.yml``, the admin account ``rocketmq2``) against ``rocketq start`` with ``aclEnable=true`` and the
  same accounts: the ``acl`` section of ``tests/java/ClientCompatCheck.java``, then mqadmin's ACL verbs.

Runs only where ``RMQ_HOME`` points at the unpacked 4.9.4 binary release; CI has no RocketMQ.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import test_client_e2e as e2e
from reference_support import JAVA_DIR, RMQ_HOME, reference_env, rocketmq_running, rocketq_start, script
from test_acl import STOCK_ACL, _home, scenario_acl

pytestmark = pytest.mark.reference


def test_release_acl_file_is_the_one_the_tests_copy() -> None:
    if not RMQ_HOME:
        pytest.skip("RMQ_HOME is not set")
    stock = yaml.safe_load((Path(RMQ_HOME) / "conf" / "plain_acl.yml").read_text())
    assert stock == yaml.safe_load(STOCK_ACL)


def test_python_client_against_rocketmq_with_acl(tmp_path: Path) -> None:
    with rocketmq_running(tmp_path, "aclEnable=true") as (_, ns, _):
        e2e.run(scenario_acl(e2e.Cluster(ns, "rocketmq-4.9.4")))


@pytest.mark.timeout(900)
def test_java_client_and_mqadmin_against_rocketq_with_acl(tmp_path: Path) -> None:
    env = reference_env(tmp_path / "rmq")
    script(env, "compile-client", str(JAVA_DIR))
    home = _home(tmp_path)
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerClusterName=DefaultCluster\nbrokerName=broker-a\naclEnable=true\nrocketmqHome={home}\n")
    with rocketq_start(conf, tmp_path / "s") as (ns, broker):
        env["NAMESRV_ADDR"] = ns

        def admin(*args: str) -> str:
            out = script(env, "admin", *args, "-n", ns, timeout=120)
            assert "command failed" not in out, out[-3000:]
            return out

        out = script(env, "java-client", "ClientCompatCheck", ns, "acl", timeout=300)
        assert "RESULT acl bad=0" in out, out[-4000:]
        assert "broker-a" in admin("clusterList")
        assert "msgPutTotalTodayNow" in admin("brokerStatus", "-b", broker)  # signed with tools.yml's rocketmq2
        assert "success" in admin("updateAclConfig", "-b", broker, "-a", "mqadminuser", "-s", "mqadminsecret",
                                  "-i", "PUB", "-t", "topicA=DENY")  # fmt: skip
        accounts = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())["accounts"]
        assert {"accessKey": "mqadminuser", "secretKey": "mqadminsecret", "admin": False, "defaultTopicPerm": "PUB",
                "topicPerms": ["topicA=DENY"]}.items() <= accounts[-1].items()  # fmt: skip
        out = admin("getAclConfig", "-b", broker)
        assert "mqadminuser" in out and "10.10.103.*" in out, out
        out = admin("clusterAclConfigVersion", "-c", "DefaultCluster")
        assert "broker-a" in out and "plain_acl.yml" in out, out
        assert "success" in admin("deleteAclConfig", "-b", broker, "-a", "mqadminuser")
        assert "mqadminuser" not in (home / "conf" / "plain_acl.yml").read_text()
        assert "success" in admin("updateGlobalWhiteAddr", "-b", broker, "-g", "10.10.103.*,192.168.0.*,10.1.1.*",
                                  "-p", str(home / "conf" / "plain_acl.yml"))  # fmt: skip
        white = yaml.safe_load((home / "conf" / "plain_acl.yml").read_text())["globalWhiteRemoteAddresses"]
        assert white == ["10.10.103.*", "192.168.0.*", "10.1.1.*"]
