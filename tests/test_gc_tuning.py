"""The one collection and freeze of a started process (:mod:`rocketq.common.gc_tuning`), each case in a fresh
interpreter: a freeze is for the life of a process."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_freeze_once_per_process_and_not_when_the_collector_is_off() -> None:
    assert _run("""
        import gc
        from rocketq.common.gc_tuning import freeze_startup_objects
        before = gc.get_freeze_count()
        print(before, freeze_startup_objects(), gc.get_freeze_count() > 1000, freeze_startup_objects())
    """) == "0 True True False"
    assert _run("""
        import gc
        from rocketq.common.gc_tuning import freeze_startup_objects
        gc.disable()
        print(freeze_startup_objects(), gc.get_freeze_count())
    """) == "False 0"


def test_a_full_collection_after_the_freeze_skips_the_frozen_objects() -> None:
    """What the freeze is for: a full collection visits only what was made since."""
    out = _run("""
        import gc, time
        import rocketq.client, rocketq.broker.broker_controller  # a process's worth of modules
        from rocketq.common.gc_tuning import freeze_startup_objects
        def full():
            best = 1.0
            for _ in range(5):
                t = time.perf_counter(); gc.collect(); best = min(best, time.perf_counter() - t)
            return best
        before = full()
        freeze_startup_objects()
        print(len(gc.get_objects()), full() < before / 3)
    """)
    tracked, faster = out.split()
    assert int(tracked) < 2000 and faster == "True"


def test_a_client_freezes_at_start_unless_told_not_to() -> None:
    code = """
        import asyncio, gc
        from rocketq.client.client_config import ClientConfig
        from rocketq.client.client_instance import ClientInstance
        async def main():
            instance = ClientInstance(ClientConfig(namesrv_addr="127.0.0.1:1", freeze_gc_at_start={flag}), "t@1")
            await instance.start()
            frozen = gc.get_freeze_count()
            await instance.shutdown()
            print(frozen > 1000)
        asyncio.run(main())
    """
    assert _run(code.format(flag=True)) == "True"
    assert _run(code.format(flag=False)) == "False"
