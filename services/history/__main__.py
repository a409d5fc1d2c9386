"""``python -m services.history``: load config, connect to the archive, serve until SIGTERM."""

from __future__ import annotations

from meshcore import run_service, setup_observability
from services.history.clients import ArchiveReader
from services.history.config import Config
from services.history.cursorkeys import load_cursor_secrets
from services.history.server import Deps, build


async def main() -> None:
    """Wiring only (docs/service-template.md)."""
    cfg = Config.from_env()
    provider = setup_observability(cfg.runtime)
    secrets = load_cursor_secrets(cfg)
    archive = ArchiveReader.connect(cfg)
    mesh = build(cfg, Deps(archive=archive, cursor_secrets=secrets))
    mesh.add_shutdown_hook(archive.close, after_drain=True)
    await mesh.serve_forever()
    provider.shutdown()


if __name__ == "__main__":
    run_service(main)
