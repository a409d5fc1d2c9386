"""A minimal service wired exactly as a real ``__main__`` is, for the SIGTERM and exit-code tests.

Run as ``python -m tests.unit.meshcore.sigterm_app`` with ``SIGAPP_*`` variables. Prints
``READY <port> <pid>`` once serving, ``BLOCKED`` when a ``Block`` call is in flight, and
``HOOK RAN`` from its after-drain shutdown hook, then (``SIGAPP_REPORT_HEAP``) ``HEAP <frozen objects>
<young threshold>``: what ``serve_forever`` left the collector at.
"""

from __future__ import annotations

import asyncio
import gc
import os
from dataclasses import dataclass

from meshcore import FromEnv, RuntimeConfig, build_server, run_service, runtime_settings, setup_observability
from meshcore.config import setting
from meshcore.parsers import parse_bool
from tests.unit.meshcore.support import RawService


@dataclass(frozen=True, kw_only=True)
class AppConfig(FromEnv):
    """The test app's settings."""

    runtime: RuntimeConfig = runtime_settings("SIGAPP", service_name="sigapp", grpc_port=0, metrics_port=-1)
    crash: bool = setting("SIGAPP_CRASH", parse_bool(), default="false", doc="Raise instead of serving.")
    report_heap: bool = setting(
        "SIGAPP_REPORT_HEAP", parse_bool(), default="false", doc="Print the heap state after the drain."
    )


async def main() -> None:
    """Load config, set up observability, serve until a signal."""
    cfg = AppConfig.from_env()
    provider = setup_observability(cfg.runtime)
    if cfg.crash:
        raise RuntimeError("crash requested")
    service = RawService()
    mesh = build_server(cfg.runtime, [service.registration()])

    async def announce_block() -> None:
        await service.block_started.wait()
        print("BLOCKED", flush=True)  # lets the test know a call is in flight

    announcer = asyncio.ensure_future(announce_block())

    async def hook() -> None:
        print("HOOK RAN", flush=True)
        if cfg.report_heap:
            print(f"HEAP {gc.get_freeze_count()} {gc.get_threshold()[0]}", flush=True)

    mesh.add_shutdown_hook(hook, after_drain=True)
    await mesh.start()
    print(f"READY {mesh.port} {os.getpid()}", flush=True)
    await mesh.serve_forever()
    announcer.cancel()
    provider.shutdown()


if __name__ == "__main__":
    run_service(main)
