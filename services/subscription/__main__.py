"""``python -m services.subscription``: load the config, open the store, serve until SIGTERM."""

from __future__ import annotations

from meshcore import run_service, setup_observability
from services.subscription.config import Config
from services.subscription.server import build, connect


async def main() -> None:
    """Wiring only: config, dependencies, server, serve (start and shutdown hooks are set by build)."""
    cfg = Config.from_env()
    provider = setup_observability(cfg.runtime)
    deps = connect(cfg)
    mesh = build(cfg, deps)
    await mesh.serve_forever()
    provider.shutdown()


if __name__ == "__main__":
    run_service(main)
