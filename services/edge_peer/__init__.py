"""edge-peer service: the mesh's RLPx node (waku/1, waku/0, shh/6), relay into ingest, 0x7e via history."""
