"""``rocketq namesrv``: run a name server (RocketMQ's ``mqnamesrv``) until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from rocketq.cli.args import port
from rocketq.cli.signals import stop_signals
from rocketq.common.errors import RocketqError
from rocketq.common.gc_tuning import freeze_startup_objects
from rocketq.namesrv.namesrv_controller import NamesrvController
from rocketq.remoting import eventloop
from rocketq.store.store_config import parse_properties

log = logging.getLogger(__name__)


def register(groups: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = groups.add_parser(
        "namesrv",
        help="run a name server",
        description="Run a RocketMQ-compatible name server: brokers register with it, clients ask it for "
        "routes. Runs until Ctrl-C or SIGTERM.",
        epilog="example:\n  rocketq namesrv --port 9876",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("-p", "--port", type=port, default=None, help="port to listen on (default 9876)")
    p.add_argument("--kv-config", metavar="FILE", type=Path, default=None,
                   help="KV config file (default ~/namesrv/kvConfig.json)")  # fmt: skip
    p.add_argument("-c", "--config", metavar="FILE", type=Path, default=None,
                   help="properties file with NamesrvConfig settings, as mqnamesrv -c takes: orderMessageEnable "
                        "(serve ORDER_TOPIC_CONFIG entries with routes; default false), clusterTest, kvConfigPath, "
                        "listenPort (options given here win)")  # fmt: skip
    p.set_defaults(func=cmd_namesrv)


async def serve_until_stopped(ctl: NamesrvController) -> None:
    """Start, report where it listens, and stop cleanly on SIGINT/SIGTERM."""
    with stop_signals() as stop:
        await ctl.start()
        freeze_startup_objects()
        print(f"rocketq name server listening on {ctl.address}", flush=True)
        try:
            await stop.wait()
        finally:
            await ctl.stop()
            print("rocketq name server stopped", flush=True)


def cmd_namesrv(args: argparse.Namespace) -> int:
    props: dict[str, str] = {}
    if args.config is not None:
        props = parse_properties(args.config.read_text(encoding="utf-8"))  # (an OSError is reported by main)
    kv_path = args.kv_config or props.pop("kvConfigPath", None)
    listen = props.pop("listenPort", None)
    listen_port = args.port
    if listen_port is None:
        try:
            listen_port = port(listen) if listen is not None else 9876
        except argparse.ArgumentTypeError as e:
            raise RocketqError(f"{args.config}: listenPort: {e}") from None
    ctl = NamesrvController(args.host, listen_port, kv_config_path=kv_path)
    skipped = ctl.processor.update(props)
    if args.config is not None:  # as mqnamesrv -c: updateNamesrvConfig writes its settings back to the file
        ctl.processor.config["configStorePath"] = str(args.config.resolve())
    if skipped:
        log.warning("%s: ignored %s (not a setting of this name server, or a value that does not parse)",
                    args.config, ", ".join(sorted(skipped)))  # fmt: skip
    eventloop.run(serve_until_stopped(ctl))
    return 0
