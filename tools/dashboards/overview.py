"""The overview row and the edge peer's row."""

from __future__ import annotations

from tools.dashboards.gateway import rest_overview
from tools.dashboards.query import (
    HEALTH_MAPPINGS,
    HEALTH_VALUE,
    SERVER_FAULTS,
    Panel,
    Row,
    agg,
    gauge,
    quantile,
    rate,
)

__all__ = ["edge_peer", "overview"]


def overview() -> Row:
    """The first row: the mesh end to end."""
    return Row(
        "Overview",
        [
            Panel("Node health", [(HEALTH_VALUE, "health")], kind="stat", width=4, mappings=HEALTH_MAPPINGS),
            Panel(
                "Envelopes in (from Waku peers) and archived",
                [
                    (agg("sum", rate("waku_envelopes_received_total", "edge_peer")), "received over RLPx"),
                    (
                        agg("sum", rate("mailmesh_archive_put_items_total", "archive", 'outcome="inserted"')),
                        "archived (new)",
                    ),
                ],
                unit="ops",
                width=10,
            ),
            Panel(
                "Envelopes archived",
                [(agg("max", gauge("mailserver_archived_envelopes_total", "archive")), "archived")],
                kind="stat",
                width=5,
            ),
            Panel(
                "Waku peers", [(agg("sum", gauge("p2p_peers", "edge_peer")), "peers")], kind="stat", width=5
            ),
            Panel(
                "Rejected envelopes by reason",
                [
                    (
                        agg("sum", rate("waku_envelopes_rejected_total", "ingest"), "reason"),
                        "ingest {{reason}}",
                    ),
                    (
                        agg("sum", rate("waku_envelopes_rejected_total", "edge_peer"), "reason"),
                        "edge {{reason}}",
                    ),
                ],
                unit="ops",
            ),
            Panel(
                "History over RLPx: p50 / p99 (0x7e to 0x7d)",
                [
                    (quantile(0.5, "mailserver_delivery_duration_seconds", "edge_peer"), "p50"),
                    (quantile(0.99, "mailserver_delivery_duration_seconds", "edge_peer"), "p99"),
                ],
                unit="s",
            ),
            Panel(
                "History bytes sent in 0x7f batches",
                [(agg("sum", rate("mailserver_sent_envelope_batch_size_bytes_sum", "edge_peer")), "0x7f")],
                unit="Bps",
            ),
            Panel(
                "Waku peers by capability",
                [(agg("sum", gauge("edge_peers", "edge_peer"), "capability"), "{{capability}}")],
            ),
            Panel(
                "Sends by outcome, retries, pending",
                [
                    (agg("sum", rate("waku_send_requests_total", "send"), "outcome"), "{{outcome}}"),
                    (agg("sum", rate("waku_send_retries_total", "send")), "retries"),
                    (agg("sum", gauge("waku_send_pending", "send")), "pending"),
                ],
            ),
            Panel(
                "Archive store: Cassandra errors and availability",
                [
                    (
                        agg(
                            "sum",
                            rate("mailmesh_archive_store_errors_total", "archive", 'db="cassandra"'),
                            "operation, kind",
                        ),
                        "{{operation}} {{kind}}",
                    ),
                    (agg("min", gauge("mailmesh_archive_store_up", "archive")), "store up"),
                ],
            ),
            Panel(
                "gRPC server faults by service",
                [(agg("sum", rate("grpc_server_handled_total", "mesh", SERVER_FAULTS), "job"), "{{job}}")],
                unit="ops",
            ),
            rest_overview(),
            Panel(
                "Node health over time",
                [(agg("max", gauge("mailmesh_health_status", "health"), "status"), "{{status}}")],
                kind="state-timeline",
                width=24,
            ),
        ],
    )


def edge_peer() -> Row:
    """RLPx sessions, rate limits, the ingest forwarder and history requests."""
    e = "edge_peer"
    return Row(
        "edge-peer",
        [
            Panel(
                "Sessions",
                [
                    (agg("sum", gauge("devp2p_connections", e)), "devp2p sessions"),
                    (agg("sum", gauge("p2p_peers", e)), "waku/shh peers"),
                    (agg("sum", gauge("edge_peers_max", e)), "max peers"),
                ],
            ),
            Panel(
                "Connections refused and dropped",
                [
                    (
                        agg("sum", rate("devp2p_rejected_connections_total", e), "reason"),
                        "refused {{reason}}",
                    ),
                    (agg("sum", rate("waku_peer_disconnects_total", e), "cause"), "dropped {{cause}}"),
                    (agg("sum", rate("waku_rate_limits_exceeded_total", e), "type"), "rate limit {{type}}"),
                ],
                unit="ops",
            ),
            Panel(
                "Ingest forwarder buffer",
                [
                    (agg("sum", gauge("edge_ingest_buffered_envelopes", e)), "buffered"),
                    (agg("sum", gauge("edge_ingest_buffer_max_envelopes", e)), "bound"),
                    (agg("min", gauge("edge_ingest_connected", e)), "connected (min)"),
                ],
            ),
            Panel(
                "Ingest back-pressure and drops",
                [
                    (agg("sum", rate("edge_ingest_backpressure_waits_total", e)), "waits"),
                    (
                        agg("sum", rate("edge_ingest_dropped_envelopes_total", e), "reason"),
                        "dropped {{reason}}",
                    ),
                    (agg("sum", rate("edge_ingest_batches_resent_total", e)), "batches resent"),
                ],
                unit="ops",
            ),
            Panel(
                "History requests by outcome",
                [
                    (agg("sum", rate("edge_history_requests_total", e), "outcome"), "{{outcome}}"),
                    (agg("sum", rate("mailserver_delivery_failures_total", e), "type"), "failure {{type}}"),
                ],
                unit="ops",
            ),
            Panel(
                "Relay and live feed",
                [
                    (agg("sum", rate("waku_envelopes_sent_total", e)), "relayed to peers"),
                    (agg("sum", rate("edge_stream_envelopes_published_total", e)), "live feed"),
                    (agg("sum", gauge("edge_stream_subscribers", e)), "stream subscribers"),
                ],
            ),
        ],
    )
