"""The name server process: RocketMQ's ``NamesrvController``.

Owns the route table, the KV config and a :class:`RemotingServer`; every 5 s it
expires brokers that stopped registering, and it forgets a broker at once when
its connection closes (remoting-protocol §7.0).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

from rocketq.namesrv.default_request_processor import DefaultRequestProcessor
from rocketq.namesrv.kv_config_manager import KVConfigManager
from rocketq.namesrv.route_info_manager import RouteInfoManager
from rocketq.remoting.transport import RemotingConnection, RemotingServer

log = logging.getLogger(__name__)
SCAN_INTERVAL_S = 5.0


class NamesrvController:
    def __init__(self, host: str = "127.0.0.1", port: int = 9876,
                 kv_config_path: str | os.PathLike[str] | None = None) -> None:  # fmt: skip
        self.routes = RouteInfoManager()
        self.kv = KVConfigManager(kv_config_path)
        self.server = RemotingServer(host, port, name="namesrv")
        self.processor = DefaultRequestProcessor(self.routes, self.kv)
        self.processor.register(self.server)
        self.server.add_close_listener(self._on_close)
        self._scan_task: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        return self.server.address

    async def start(self) -> None:
        self.kv.load()
        await self.server.start()
        self.processor.config["listenPort"] = str(self.port)
        self._scan_task = asyncio.create_task(self._scan_loop(), name="namesrv-scan")
        log.info("name server listening on %s", self.address)

    async def stop(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
            self._scan_task = None
        await self.server.stop()

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(SCAN_INTERVAL_S)
            for addr in self.routes.scan_not_active_brokers():
                log.warning("broker %s expired: no registration within its timeout", addr)

    def _on_close(self, conn: RemotingConnection) -> None:
        for addr in self.routes.on_connection_closed(conn):
            log.info("broker %s went away with its connection", addr)
