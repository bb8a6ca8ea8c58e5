"""``rocketq namesrv``: run a name server (RocketMQ's ``mqnamesrv``) until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
from pathlib import Path

from rocketq.cli.args import port
from rocketq.cli.signals import stop_signals
from rocketq.common.gc_tuning import freeze_startup_objects
from rocketq.namesrv.namesrv_controller import NamesrvController
from rocketq.remoting import eventloop


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
    p.add_argument("-p", "--port", type=port, default=9876, help="port to listen on (default 9876)")
    p.add_argument("--kv-config", metavar="FILE", type=Path, default=None,
                   help="KV config file (default ~/namesrv/kvConfig.json)")  # fmt: skip
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
    ctl = NamesrvController(args.host, args.port, kv_config_path=args.kv_config)
    eventloop.run(serve_until_stopped(ctl))
    return 0
