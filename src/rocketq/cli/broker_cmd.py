"""``rocketq broker`` (RocketMQ's ``mqbroker``) and ``rocketq start`` (a name server and a broker in one process).

``rocketq broker -c broker.conf [-n ADDR]`` runs a broker configured by a ``broker.conf`` with RocketMQ's
property names; ``-n`` overrides ``namesrvAddr``. ``rocketq start [-c broker.conf] [--store DIR]
[--namesrv-port N] [--broker-port N]`` runs a name server on 127.0.0.1:9876 and a broker on 127.0.0.1:10911
(and :10909 for old clients) registered with it, the store under ``~/store`` unless told otherwise. Both
print where they listen once ready and shut down cleanly on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from rocketq.broker.broker_config import BrokerConfigError, load_broker_config
from rocketq.broker.broker_controller import BrokerController
from rocketq.cli.args import port
from rocketq.cli.signals import stop_signals
from rocketq.common.gc_tuning import freeze_startup_objects
from rocketq.remoting import eventloop

DEFAULT_NAMESRV_PORT = 9876
DEFAULT_BROKER_PORT = 10911
LOCALHOST = "127.0.0.1"


def register_broker(groups: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = groups.add_parser(
        "broker",
        help="run a broker",
        description="Run a RocketMQ-compatible broker configured by a broker.conf (RocketMQ's property names: "
        "brokerClusterName, brokerName, brokerId, listenPort, namesrvAddr, brokerIP1, storePathRootDir, "
        "flushDiskType, brokerRole, autoCreateTopicEnable, ...). Runs until Ctrl-C or SIGTERM.",
        epilog="example:\n  rocketq broker -c conf/broker.conf -n 127.0.0.1:9876",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-c", "--config", metavar="FILE", type=Path, required=True, help="the broker.conf to use")
    p.add_argument("-n", "--namesrv-addr", metavar="ADDR", default=None,
                   help="name server address(es), host:port separated by ';' (overrides namesrvAddr)")  # fmt: skip
    p.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    p.set_defaults(func=cmd_broker)


def register_start(groups: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    s = groups.add_parser(
        "start",
        help="run a name server and a broker in one process",
        description="Run a name server and a broker in one process: the name server on 127.0.0.1:9876, the "
        "broker on 127.0.0.1:10911 (and 10909 for old clients) with its store under ~/store, registered "
        "with the name server. Runs until Ctrl-C or SIGTERM.",
        epilog="example:\n  rocketq start --store /tmp/rq-store --broker-port 10911",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("-c", "--config", metavar="FILE", type=Path, default=None,
                   help="a broker.conf for the broker (its namesrvAddr becomes this name server)")  # fmt: skip
    s.add_argument("--store", metavar="DIR", type=Path, default=None,
                   help="store directory (storePathRootDir; default: the config's, else ~/store)")  # fmt: skip
    s.add_argument("--namesrv-port", metavar="N", type=port, default=DEFAULT_NAMESRV_PORT,
                   help=f"name server port (default {DEFAULT_NAMESRV_PORT})")  # fmt: skip
    s.add_argument("--broker-port", metavar="N", type=port, default=None,
                   help=f"broker port, listenPort (default: the config's, else {DEFAULT_BROKER_PORT})")  # fmt: skip
    s.add_argument("--grpc-port", metavar="N", type=port, default=None,
                   help="also serve RocketMQ 5 (gRPC) clients on this port, grpcServerPort (5.x's proxy uses "
                        "8081; needs the extra grpc: pip install 'rocketq[grpc]')")  # fmt: skip
    s.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    s.set_defaults(func=cmd_start)


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip


def _describe_broker(broker: BrokerController) -> str:
    c = broker.broker_config
    vip = f" (and :{broker.vip_port} for old clients)" if broker.fast_remoting_server.started else ""
    role = broker.store_config.broker_role
    if broker.store.ha_service is not None:
        ha = f"{role}, slaves connect to {c.ha_server_addr}"
    else:
        ha = f"{role} of the master its name servers name" if not broker.store_config.ha_master_address else \
            f"{role} of {broker.store_config.ha_master_address}"  # fmt: skip
    grpc = f", RocketMQ 5 (gRPC) clients on {c.broker_ip1}:{c.grpc_server_port}" if broker.grpc_service else ""
    return (f"rocketq broker {c.broker_name} (cluster {c.broker_cluster_name}, id {c.broker_id}) listening on "
            f"{broker.broker_addr}{vip}{grpc}, store {broker.store_config.root}, {eventloop.loop_name()} loop; "
            f"{ha}")  # fmt: skip


def _registration(broker: BrokerController) -> str:
    """Which name servers took the broker's first registration, and which did not (the broker asks those again
    after 1 s, then less often: :meth:`BrokerController._registration_waits`)."""
    addrs = broker.broker_config.namesrv_addrs()
    if not addrs:
        return "rocketq broker registered with no name server (none set: -n ADDR or namesrvAddr): no client finds it"
    failed = broker.outer_api.not_registered()
    ok = [a for a in addrs if a not in failed]
    lines = [f"rocketq broker registered with name server(s): {';'.join(ok)}"] if ok else []
    if failed:
        lines.append(f"rocketq broker could not register with name server(s) {';'.join(failed)} yet; trying again "
                     "after 1 s, then less often")  # fmt: skip
    return "\n".join(lines)


async def run_broker(broker: BrokerController) -> None:
    with stop_signals() as stop:
        await broker.start()
        freeze_startup_objects()
        try:
            print(_describe_broker(broker), flush=True)
            print(_registration(broker), flush=True)
            await stop.wait()
        finally:
            await broker.shutdown()
            print("rocketq broker stopped", flush=True)


def cmd_broker(args: argparse.Namespace) -> int:
    _setup_logging(args.verbose)
    overrides: dict[str, Any] = {}
    if args.namesrv_addr:
        overrides["namesrv_addr"] = args.namesrv_addr
    broker_config, store_config = load_broker_config(args.config, **overrides)
    broker = BrokerController(broker_config, store_config)
    broker.config_file = args.config.resolve()  # updateBrokerConfig writes there, as Java's BrokerStartup sets it
    eventloop.run(run_broker(broker))
    return 0


def _check_start_ports(namesrv_port: int, broker: Any) -> None:
    """The name server's port is none of the broker's (listenPort, listenPort - 2 for old clients, the HA port):
    refused before anything starts, rather than a broker that fails, or runs without one of its listeners."""
    if not namesrv_port or not broker.listen_port:
        return
    ha = broker.ha_listen_port or broker.listen_port + 1
    taken = {broker.listen_port: "listenPort", broker.vip_port: "listenPort - 2 (old clients)", ha: "the HA port"}
    if namesrv_port in taken:
        raise BrokerConfigError(f"--namesrv-port {namesrv_port} is the broker's {taken[namesrv_port]}: the "
                                f"broker listens on {broker.listen_port}, {broker.vip_port} and {ha}; choose ports "
                                "apart")  # fmt: skip


async def run_start(args: argparse.Namespace) -> None:
    from rocketq.namesrv.namesrv_controller import NamesrvController

    # (port 0: any free one; the broker learns the name server's address once it listens)
    overrides: dict[str, Any] = {"namesrv_addr": f"{LOCALHOST}:{args.namesrv_port}" if args.namesrv_port else None}
    if args.store is not None:
        overrides["store_path_root_dir"] = str(args.store.expanduser())
    if args.broker_port is not None:
        overrides["listen_port"] = args.broker_port
    if args.grpc_port is not None:
        overrides["grpc_server_port"] = args.grpc_port
    if args.config is None:
        overrides.setdefault("listen_port", DEFAULT_BROKER_PORT)
        overrides["broker_ip1"] = LOCALHOST
    broker_config, store_config = load_broker_config(args.config, **overrides)
    _check_start_ports(args.namesrv_port, broker_config)
    namesrv = NamesrvController(LOCALHOST, args.namesrv_port)
    with stop_signals() as stop:
        await namesrv.start()
        try:
            print(f"rocketq name server listening on {namesrv.address}", flush=True)
            broker_config.namesrv_addr = namesrv.address
            broker = BrokerController(broker_config, store_config)
            if args.config is not None:
                broker.config_file = args.config.resolve()
            await broker.start()
            freeze_startup_objects()
            try:
                print(_describe_broker(broker), flush=True)
                print("rocketq ready (Ctrl-C to stop)", flush=True)
                await stop.wait()
            finally:
                await broker.shutdown()
                print("rocketq broker stopped", flush=True)
        finally:
            await namesrv.stop()
            print("rocketq name server stopped", flush=True)


def cmd_start(args: argparse.Namespace) -> int:
    _setup_logging(args.verbose)
    eventloop.run(run_start(args))
    return 0
