"""``python -m services.health``: load the config, start evaluating, serve until SIGTERM."""

from __future__ import annotations

from meshcore import run_service, setup_observability
from services.health.config import Config
from services.health.server import build, connect


async def main() -> None:
    """Wiring only: config, dependencies, server, serve (graceful shutdown hooks are set by build)."""
    cfg = Config.from_env()
    provider = setup_observability(cfg.runtime)
    deps = connect(cfg)
    mesh = build(cfg, deps)
    await mesh.serve_forever()
    provider.shutdown()


if __name__ == "__main__":
    run_service(main)
