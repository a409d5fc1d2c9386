"""``python -m services.edge_peer``: config, node key, clients, edge peer, gRPC server; serve to SIGTERM."""

from __future__ import annotations

from devp2p.nodekey import load_or_create_node_key
from meshcore import run_service, setup_observability
from services.edge_peer.clients import HistoryClient, IngestClient
from services.edge_peer.config import Config
from services.edge_peer.server import Deps, assemble, build, instance_name


async def main() -> None:
    """Wiring only (docs/service-template.md)."""
    cfg = Config.from_env()
    provider = setup_observability(cfg.runtime)
    node_key = load_or_create_node_key(cfg.node_key_file)
    max_bytes = cfg.runtime.max_message_bytes
    ingest = IngestClient.connect(cfg.ingest_addr, source=instance_name(cfg), max_message_bytes=max_bytes)
    history = HistoryClient.connect(
        cfg.history_addr, timeout_s=cfg.request_timeout_s, max_message_bytes=max_bytes
    )
    edge = assemble(cfg, node_key, ingest, history)
    mesh = build(cfg, Deps(edge, closers=(ingest.close, history.close)))
    await edge.start()
    await mesh.serve_forever()
    provider.shutdown()


if __name__ == "__main__":
    run_service(main)
