"""``python -m services.gateway``: load the config, connect the upstreams, serve REST until SIGTERM."""

from __future__ import annotations

from meshcore import run_service, setup_observability
from services.gateway.config import Config
from services.gateway.server import build, connect


async def main() -> None:
    """Wiring only: config, dependencies, servers, serve (graceful shutdown hooks are set by build)."""
    cfg = Config.from_env()
    provider = setup_observability(cfg.runtime)
    deps = connect(cfg)
    mesh, _ = build(cfg, deps)
    await mesh.serve_forever()
    provider.shutdown()


if __name__ == "__main__":
    run_service(main)
