"""``python -m services.send``: load the config, serve until SIGTERM."""

from __future__ import annotations

from meshcore import run_service, setup_observability
from services.send.config import Config
from services.send.server import build, connect


async def main() -> None:
    """Wiring only: config, dependencies, server, serve (start and shutdown hooks are set by build)."""
    cfg = Config.from_env()
    provider = setup_observability(cfg.runtime)
    mesh = build(cfg, connect(cfg))
    await mesh.serve_forever()
    provider.shutdown()


if __name__ == "__main__":
    run_service(main)
