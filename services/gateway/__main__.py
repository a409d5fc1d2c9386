"""``python -m services.gateway``: load the config, connect the upstreams, serve REST until SIGTERM.

The process runs on uvloop (libuv) rather than asyncio's default loop: the gateway is HTTP socket I/O and
small callbacks, which uvloop does with less CPU (docs/benchmarks.md, "Gateway CPU per POST /send": 0.71 →
0.58 ms per request against a stub send service). grpc.aio runs on any asyncio loop (its completion queue
is polled from its own thread and handed to the loop), so the upstream calls are unchanged. Only this
process's loop changes: code importing the gateway (tests) keeps the loop it runs on.
"""

from __future__ import annotations

import asyncio

import uvloop

from meshcore import run_service, setup_observability
from services.gateway.config import Config
from services.gateway.server import build, connect


async def main() -> None:
    """Wiring only: config, dependencies, servers, serve (graceful shutdown hooks are set by build)."""
    cfg = Config.from_env()
    provider = setup_observability(cfg.runtime)
    deps = connect(cfg)
    mesh, _ = build(cfg, deps)
    # serve_forever settles the heap (meshcore.heap: what start-up built — the app with its routes and models,
    # the channels — is frozen out of the collector's generations; docs/benchmarks.md "Gateway CPU per POST
    # /send": p99 59–148 → 27–94 ms).
    await mesh.serve_forever()
    provider.shutdown()


if __name__ == "__main__":
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    run_service(main)
