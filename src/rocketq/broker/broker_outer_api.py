"""The broker's calls to name servers: RocketMQ's ``broker/out/BrokerOuterAPI`` (spec §7.2, §7.3, §11.1).

REGISTER_BROKER goes to every name server at once, with the headers ``brokerAddr``, ``brokerId``,
``brokerName``, ``clusterName``, ``haServerAddr``, ``compressed`` and ``bodyCrc32`` (CRC32 of the body,
top bit cleared) and a RegisterBrokerBody JSON body (golden capture 000)::

    {"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{...},"topicConfigTable":{...}}}

UNREGISTER_BROKER goes to every name server at shutdown. A name server that does not answer is logged and
skipped; the next periodic registration tries it again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from rocketq.broker.broker_config import BrokerConfig
from rocketq.common import json_compat
from rocketq.common.javacompat import crc32_masked
from rocketq.remoting.codes import RequestCode, ResponseCode
from rocketq.remoting.command import RemotingCommand, create_request
from rocketq.remoting.errors import RemotingError
from rocketq.remoting.transport import RemotingClient

log = logging.getLogger(__name__)


class BrokerOuterAPI:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.client = RemotingClient(name="broker-outer-api")
        #: Name server -> whether the last registration with it was answered SUCCESS (not kept for one-way ones).
        self.registered: dict[str, bool] = {}

    def not_registered(self) -> list[str]:
        """The configured name servers that did not take the last registration (or were not asked yet)."""
        return [addr for addr in self.config.namesrv_addrs() if not self.registered.get(addr)]

    async def close(self) -> None:
        await self.client.close()

    def register_broker_request(self, wrapper: Mapping[str, object]) -> RemotingCommand:
        c = self.config
        body = json_compat.dumps_bytes({"filterServerList": [], "topicConfigSerializeWrapper": wrapper})
        header = {
            "brokerAddr": c.broker_addr, "brokerId": c.broker_id, "brokerName": c.broker_name,
            "clusterName": c.broker_cluster_name, "haServerAddr": c.ha_server_addr, "compressed": False,
            "bodyCrc32": crc32_masked(body),
        }  # fmt: skip
        return create_request(RequestCode.REGISTER_BROKER, header, body)

    async def register_broker_all(self, wrapper: Mapping[str, object], *,
                                  oneway: bool = False) -> list[RemotingCommand]:  # fmt: skip
        """Register with every name server concurrently; the answers of those that answered SUCCESS."""
        addrs = self.config.namesrv_addrs()
        if not addrs:
            return []
        timeout = self.config.register_broker_timeout_mills / 1000.0
        results = await asyncio.gather(*(self._register_one(addr, wrapper, oneway, timeout) for addr in addrs))
        return [r for r in results if r is not None]

    async def _register_one(self, addr: str, wrapper: Mapping[str, object], oneway: bool,
                            timeout: float) -> RemotingCommand | None:  # fmt: skip
        request = self.register_broker_request(wrapper)
        try:
            if oneway:
                await self.client.invoke_oneway(request, addr=addr)
                return None
            response = await self.client.invoke(request, timeout, addr=addr)
        except (RemotingError, OSError) as exc:
            log.warning("register broker to name server %s failed: %s", addr, exc)
            self.registered[addr] = False
            return None
        if response.code != ResponseCode.SUCCESS:
            log.warning("register broker to name server %s refused: %d %s", addr, response.code, response.remark)
            self.registered[addr] = False
            return None
        log.info("register broker[%d]to name server %s OK", self.config.broker_id, addr)
        self.registered[addr] = True
        return response

    async def unregister_broker_all(self) -> None:
        c = self.config
        header = {"brokerAddr": c.broker_addr, "brokerId": c.broker_id, "brokerName": c.broker_name,
                  "clusterName": c.broker_cluster_name}  # fmt: skip

        async def one(addr: str) -> None:
            try:
                await self.client.invoke(create_request(RequestCode.UNREGISTER_BROKER, header), 3.0, addr=addr)
                log.info("unregister broker from name server %s OK", addr)
            except (RemotingError, OSError) as exc:
                log.warning("unregister broker from name server %s failed: %s", addr, exc)

        await asyncio.gather(*(one(a) for a in self.config.namesrv_addrs()))
