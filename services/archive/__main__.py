"""``python -m services.archive``: wiring only (config, observability, store, server, serve until SIGTERM)."""

from __future__ import annotations

from archivestore.factory import create_store
from meshcore.server import run_service, setup_observability
from services.archive.config import Config
from services.archive.server import Deps, build


async def main() -> None:
    """Load the config, open the store, serve until SIGTERM/SIGINT, then shut down gracefully."""
    cfg = Config.from_env()  # every bad or missing variable in one ConfigError (exit 2)
    provider = setup_observability(cfg.runtime)
    mesh = build(cfg, Deps(store=create_store(cfg.store)))
    await mesh.serve_forever()  # store opened first; SIGTERM: NOT_SERVING, duties stop, drain, close
    provider.shutdown()  # flush batched spans


if __name__ == "__main__":
    run_service(main)
