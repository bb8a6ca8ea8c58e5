"""Request processors of the name server: RocketMQ's ``namesrv.processor.DefaultRequestProcessor``.

One function per request code of remoting-protocol §7, each ``(connection, request) -> response``.
Bodies are written as a 4.9.4 name server writes them (golden captures): routes in the
standard JSON form (string broker ids), cluster info in fastjson's default form (bare integer
broker ids), topic lists as ``{"topicList":[...]}``.
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocketq.common import json_compat
from rocketq.common.java_settings import netty_server_settings, parse_like
from rocketq.common.mixall import TOPIC_SYS_FLAG_UNIT, TOPIC_SYS_FLAG_UNIT_SUB
from rocketq.namesrv.kv_config_manager import ORDER_TOPIC_CONFIG, KVConfigManager
from rocketq.namesrv.route_info_manager import DEFAULT_BROKER_TIMEOUT_MS, RouteInfoManager
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, make_response_for
from rocketq.remoting.errors import HeaderFieldError, RequestBodyError
from rocketq.remoting.transport import RemotingConnection, RemotingServer
from rocketq.store.config_json import write_config_file
from rocketq.store.store_config import parse_properties

log = logging.getLogger(__name__)

#: Settings UPDATE_NAMESRV_CONFIG refuses (5.x's ``NamesrvConfig.configBlackList``).
CONFIG_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath"})
FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."

Processor = Callable[[RemotingConnection, RemotingCommand], RemotingCommand]


class DefaultRequestProcessor:
    def __init__(self, routes: RouteInfoManager, kv: KVConfigManager) -> None:
        self.routes = routes
        self.kv = kv
        #: ``NamesrvConfig`` as getNamesrvConfig shows it, Java's defaults: routes carry ``orderTopicConf`` only
        #: with ``orderMessageEnable=true`` (``rocketq namesrv -c FILE``, or updateNamesrvConfig, which writes every
        #: setting to ``configStorePath``: the -c file, else ~/namesrv/namesrv.properties, as Java's).
        self.config: dict[str, str] = {
            "rocketmqHome": os.environ.get("ROCKETMQ_HOME", ""), "kvConfigPath": str(kv.path),
            "configStorePath": str(Path.home() / "namesrv" / "namesrv.properties"), "productEnvName": "center",
            "clusterTest": "false", "orderMessageEnable": "false",
            # NettyServerConfig, listed and kept as Java's are (common/java_settings.py); the controller sets
            # listenPort to the port it listens on.
            "listenPort": "9876", "serverChannelMaxIdleTimeSeconds": "120", **netty_server_settings(),
        }  # fmt: skip
        self.handlers: dict[int, Processor] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kvlist_by_namespace,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_routeinfo_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.REGISTER_TOPIC_IN_NAMESRV: self.register_topic_in_namesrv,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self._topics_flagged(_has_unit_flag),
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self._topics_flagged(_has_unit_sub_flag),
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self._topics_flagged(
                lambda flag: _has_unit_sub_flag(flag) and not _has_unit_flag(flag)),
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
        }

    def register(self, server: RemotingServer) -> None:
        for code, handler in self.handlers.items():
            server.register_processor(code, self._guard(handler))

    @staticmethod
    def _guard(handler: Processor) -> Processor:
        """A missing or malformed header field is the caller's mistake: answer it, do not fail."""

        def run(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            try:
                return handler(conn, request)
            except HeaderFieldError as e:
                return make_response_for(request, ResponseCode.SYSTEM_ERROR, str(e))
            except json_compat.JsonDecodeError as e:
                return make_response_for(request, ResponseCode.SYSTEM_ERROR, f"bad request body: {e}")

        return run

    # --- KV config -----------------------------------------------------------------------
    def put_kv_config(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        h = req.header
        self.kv.put(h.get_str("namespace"), h.get_str("key"), h.get_str("value"))
        return make_response_for(req)

    def get_kv_config(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        h = req.header
        ns, key = h.get_str("namespace"), h.get_str("key")
        value = self.kv.get(ns, key)
        if value is None:
            return make_response_for(req, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")
        return make_response_for(req, ext_fields={"value": value})

    def delete_kv_config(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        h = req.header
        self.kv.delete(h.get_str("namespace"), h.get_str("key"))
        return make_response_for(req)

    def get_kvlist_by_namespace(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        ns = req.header.get_str("namespace")
        table = self.kv.list_namespace(ns)
        if table is None:
            return make_response_for(req, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")
        return make_response_for(req, body=json_compat.dumps_bytes({"table": table}))

    # --- the name server's own settings -------------------------------------------------------------------------
    def get_config(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG (mqadmin getNamesrvConfig): ``key=value`` lines."""
        text = "".join(f"{k}={v}\n" for k, v in self.config.items())
        return make_response_for(req, body=text.encode("utf-8"))

    def update_config(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG (mqadmin updateNamesrvConfig): a properties body; as Java's
        ``Configuration.update``, unknown keys and values that do not parse are skipped, and every setting is then
        written to ``configStorePath`` (the ``-c`` file), so the change outlives a restart.

        The paths the name server writes to cannot be set this way (``configBlackList``, as 5.x refuses them:
        4.9.4 took them, and with them a request could make it write a file anywhere, CVE-2023-37582)."""
        props = parse_properties((req.body or b"").decode("utf-8", "replace"))
        log.info("updateNamesrvConfig called by %s: %s", conn.remote_address, props)
        refused = sorted(set(props) & CONFIG_BLACK_LIST)
        if refused:
            log.warning("updateNamesrvConfig refused: %s cannot be changed remotely", ", ".join(refused))
            return make_response_for(req, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        self.update(props)
        try:
            self.persist_config()
        except OSError as e:
            log.warning("updateNamesrvConfig: cannot write %s: %s", self.config["configStorePath"], e)
        return make_response_for(req)

    def persist_config(self) -> None:
        """``Configuration.persist``: every setting, ``key=value`` a line, to ``configStorePath``."""
        path = Path(self.config["configStorePath"]).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        write_config_file(path, "".join(f"{k}={v}\n" for k, v in self.config.items()))

    def update(self, props: dict[str, str]) -> list[str]:
        """Take the ``NamesrvConfig`` settings of *props*; the keys skipped (unknown, or a value that does not
        parse)."""
        skipped = []
        for key, value in props.items():
            if key not in self.config:
                skipped.append(key)
                continue
            try:
                self.config[key] = parse_like(value, self.config[key])
            except ValueError:
                skipped.append(key)
        return skipped

    # --- brokers ---------------------------------------------------------------------------
    def register_broker(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        h = req.header
        body = req.body or b""
        crc = h.get_int("bodyCrc32", 0)
        if crc != 0 and (zlib.crc32(body) & 0x7FFFFFFF) != crc:
            return make_response_for(req, ResponseCode.SYSTEM_ERROR, "crc32 not match")
        # No body: an empty table of data version 0 at time 0, as Java's default RegisterBrokerBody says.
        wrapper: dict[str, Any] | None = {"dataVersion": {"counter": 0, "timestamp": 0}, "topicConfigTable": {}}
        filter_servers: list[str] | None = None
        if body:
            try:
                wrapper, filter_servers = _decode_register_body(body, h.get_bool("compressed", False))
            except (ValueError, TypeError, AttributeError, KeyError, IndexError, zlib.error) as exc:
                # (json_compat's and zlib's errors are ValueErrors; the others come of a JSON of another shape)
                raise RequestBodyError(f"Failed to decode RegisterBrokerBody: {exc}") from exc
        result = self.routes.register_broker(
            h.get_str("clusterName"), h.get_str("brokerAddr"), h.get_str("brokerName"), h.get_long("brokerId"),
            h.get_str("haServerAddr", ""), wrapper, connection=conn,
            timeout_ms=h.get_long("heartbeatTimeoutMillis", DEFAULT_BROKER_TIMEOUT_MS),
            filter_server_list=filter_servers,
        )  # fmt: skip
        ext: dict[str, object] = {}
        if result.ha_server_addr is not None:
            ext["haServerAddr"] = result.ha_server_addr
        if result.master_addr is not None:
            ext["masterAddr"] = result.master_addr
        return make_response_for(req, ext_fields=ext, body=self._order_topic_table())

    def _order_topic_table(self) -> bytes | None:
        """The ``ORDER_TOPIC_CONFIG`` namespace as a KVTable body (even empty: a broker then unmarks its ordered
        topics), None when the namespace was never used."""
        order_conf = self.kv.list_namespace(ORDER_TOPIC_CONFIG)
        return json_compat.dumps_bytes({"table": order_conf}) if order_conf is not None else None

    def unregister_broker(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        h = req.header
        self.routes.unregister_broker(h.get_str("clusterName"), h.get_str("brokerAddr"), h.get_str("brokerName"),
                                      h.get_long("brokerId"))  # fmt: skip
        return make_response_for(req)

    def broker_heartbeat(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        self.routes.update_live(req.header.get_str("brokerAddr"))
        return make_response_for(req)

    def query_data_version(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        addr = req.header.get_str("brokerAddr")
        version = _plain(json_compat.loads(req.body)) if req.body else None
        changed = self.routes.is_data_version_changed(addr, version)
        if not changed:  # a broker whose topics changed is alive only once it registers them (Java's rule)
            self.routes.update_live(addr)
        stored = self.routes.data_version_of(addr)
        return make_response_for(req, ext_fields={"changed": changed},
                                 body=json_compat.dumps_bytes(stored) if stored is not None else None)  # fmt: skip

    def wipe_write_perm_of_broker(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        count = self.routes.wipe_write_perm_of_broker(req.header.get_str("brokerName"))
        return make_response_for(req, ext_fields={"wipeTopicCount": count})

    def add_write_perm_of_broker(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        count = self.routes.add_write_perm_of_broker(req.header.get_str("brokerName"))
        return make_response_for(req, ext_fields={"addTopicCount": count})

    # --- routes and lists ---------------------------------------------------------------------
    def get_routeinfo_by_topic(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        topic = req.header.get_str("topic")
        route = self.routes.route_data(topic)
        if route is None:
            remark = f"No topic route info in name server for the topic: {topic}{FAQ_SUFFIX}"
            return make_response_for(req, ResponseCode.TOPIC_NOT_EXIST, remark)
        order_conf = self.kv.get(ORDER_TOPIC_CONFIG, topic)
        if order_conf and self.config["orderMessageEnable"] == "true":
            route["orderTopicConf"] = order_conf
        # The standard form (string broker ids) parses in every client (spec §7.1).
        return make_response_for(req, body=json_compat.dumps_bytes(route, standard=True))

    def get_broker_cluster_info(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        return make_response_for(req, body=json_compat.dumps_bytes(self.routes.cluster_info()))

    def get_all_topic_list(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        return make_response_for(req, body=_topic_list(self.routes.all_topics()))

    def get_topics_by_cluster(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        return make_response_for(req, body=_topic_list(self.routes.topics_by_cluster(req.header.get_str("cluster"))))

    def get_system_topic_list(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        names, addr = self.routes.system_topics()
        return make_response_for(req, body=_topic_list(names, addr))

    def _topics_flagged(self, wanted: Callable[[int], bool]) -> Processor:
        """GET_UNIT_TOPIC_LIST and its kin: the topics whose ``topicSysFlag`` has the unit bits *wanted*."""

        def answer(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
            return make_response_for(req, body=_topic_list(self.routes.topics_whose_first_queue_data(wanted)))

        return answer

    def delete_topic_in_namesrv(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        h = req.header
        self.routes.delete_topic(h.get_str("topic"), h.get_str("clusterName", None))
        return make_response_for(req)

    def register_topic_in_namesrv(self, conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        body = _plain(json_compat.loads(req.body)) if req.body else {}
        queue_datas = body.get("queueDatas") if isinstance(body, dict) else None
        self.routes.register_topic(req.header.get_str("topic"), list(queue_datas or []))
        return make_response_for(req)


def _topic_list(topics: list[str], broker_addr: str | None = None) -> bytes:
    body: dict[str, Any] = {"topicList": list(topics)}
    if broker_addr is not None:
        body["brokerAddr"] = broker_addr
    return json_compat.dumps_bytes(body)


def _plain(value: Any) -> Any:
    """JSON from the lenient reader as plain dicts/lists (hashable wrappers unwrapped)."""
    if isinstance(value, dict):
        return {(str(k) if not isinstance(k, (str, int)) else k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _decode_register_body(body: bytes, compressed: bool) -> tuple[dict[str, Any] | None, list[str] | None]:
    """A REGISTER_BROKER body: its topic config wrapper, checked for the shape the route table reads, and its
    filter server list (None: the body has none). Raises ValueError (or TypeError, ...) for a body of another
    layout or shape."""
    if compressed:
        wrapper, filter_servers = _decode_compressed_register_body(body)
    else:
        decoded = _plain(json_compat.loads(body))
        if not isinstance(decoded, dict):
            return None, None  # (a JSON null or list: no table, as a Java broker's body never is)
        # Since version 37 the body is a RegisterBrokerBody; before, the bare wrapper.
        wrapper = decoded.get("topicConfigSerializeWrapper", decoded)
        servers = decoded.get("filterServerList")
        filter_servers = [str(s) for s in servers] if isinstance(servers, list) else None
    if wrapper is None:
        return None, filter_servers
    if not isinstance(wrapper, dict):
        raise ValueError("topicConfigSerializeWrapper is not an object")
    version = wrapper.get("dataVersion")
    table = wrapper.get("topicConfigTable") or {}
    if version is not None and not isinstance(version, dict):
        raise ValueError("dataVersion is not an object")
    if not isinstance(table, dict):
        raise ValueError("topicConfigTable is not an object")
    for name, cfg in table.items():
        if not isinstance(cfg, dict):
            raise ValueError(f"the topic config of {name} is not an object")
        for key in ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag", "topicSynFlag"):
            if key in cfg:
                int(cfg[key])
    return wrapper, filter_servers


def _decode_compressed_register_body(body: bytes) -> tuple[dict[str, Any], list[str] | None]:
    """The compressed REGISTER_BROKER body (spec §7.2): zlib of length-prefixed parts; the topic config wrapper
    and the filter server list."""
    raw = zlib.decompress(body)
    pos = 0

    def take() -> bytes:
        nonlocal pos
        n = int.from_bytes(raw[pos : pos + 4], "big", signed=True)
        pos += 4
        part = raw[pos : pos + n]
        pos += n
        return part

    version = _plain(json_compat.loads(take()))
    count = int.from_bytes(raw[pos : pos + 4], "big", signed=True)
    pos += 4
    table: dict[str, Any] = {}
    for _ in range(count):
        fields = take().decode("utf-8").split(" ", 5)
        name, read, write, perm, filter_type = fields[:5]
        table[name] = {"topicName": name, "readQueueNums": int(read), "writeQueueNums": int(write),
                       "perm": int(perm), "topicFilterType": filter_type}  # fmt: skip
    filter_servers: list[str] | None = None
    if pos + 4 <= len(raw):
        try:
            servers = json_compat.loads(take())
        except json_compat.JsonDecodeError:  # Java logs it and takes an empty list
            servers = []
        filter_servers = [str(s) for s in servers] if isinstance(servers, (list, tuple)) else []
    return {"dataVersion": version, "topicConfigTable": table}, filter_servers


def _has_unit_flag(flag: int) -> bool:
    return flag & TOPIC_SYS_FLAG_UNIT == TOPIC_SYS_FLAG_UNIT


def _has_unit_sub_flag(flag: int) -> bool:
    return flag & TOPIC_SYS_FLAG_UNIT_SUB == TOPIC_SYS_FLAG_UNIT_SUB

