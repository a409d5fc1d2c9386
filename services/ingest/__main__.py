"""``python -m services.ingest``: load the config, connect to the archive, serve until SIGTERM, then drain."""

from __future__ import annotations

from meshcore import run_service, setup_observability
from services.ingest.config import Config
from services.ingest.server import build, connect


async def main() -> None:
    """Wiring only: config, dependencies, server, serve (graceful shutdown hooks are set by build)."""
    cfg = Config.from_env()
    provider = setup_observability(cfg.runtime)
    deps = await connect(cfg)
    mesh = build(cfg, deps)
    await mesh.serve_forever()
    provider.shutdown()


if __name__ == "__main__":
    run_service(main)
