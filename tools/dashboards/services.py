"""One row per service behind the edge peer, and the gRPC row of every service."""

from __future__ import annotations

from tools.dashboards.query import (
    SERVER_FAULTS,
    Panel,
    Row,
    agg,
    gauge,
    quantile,
    rate,
)

__all__ = ["archive", "grpc", "health", "history", "ingest", "send", "subscription"]


def ingest() -> Row:
    """Validation, de-duplication and archive writes."""
    i = "ingest"
    return Row(
        "ingest",
        [
            Panel(
                "Envelopes received, validated, cache hits/misses",
                [
                    (agg("sum", rate("waku_envelopes_received_total", i)), "received"),
                    (agg("sum", rate("waku_envelopes_validated_total", i)), "validated"),
                    (agg("sum", rate("waku_envelopes_cached_total", i), "cache"), "cache {{cache}}"),
                ],
                unit="ops",
            ),
            Panel(
                "Pending for the archive",
                [
                    (agg("sum", gauge("ingest_pending_envelopes", i)), "envelopes"),
                    (agg("sum", gauge("ingest_pending_bytes", i)), "bytes"),
                ],
            ),
            Panel(
                "Archive writes: p99 latency, failures",
                [
                    (quantile(0.99, "ingest_archive_write_seconds", i), "write p99 (s)"),
                    (quantile(0.99, "ingest_batch_ack_seconds", i), "ack p99 (s)"),
                    (agg("sum", rate("ingest_archive_write_failures_total", i)), "failures/s"),
                ],
            ),
        ],
    )


def archive() -> Row:
    """Writes, queries and the store."""
    a = "archive"
    return Row(
        "archive",
        [
            Panel(
                "PutEnvelopes items by outcome",
                [
                    (agg("sum", rate("mailmesh_archive_put_items_total", a), "outcome"), "{{outcome}}"),
                    (agg("sum", rate("mailserver_archived_envelopes_failures_total", a)), "write failures"),
                ],
                unit="ops",
            ),
            Panel(
                "Latency p99: put batch, query by filter",
                [
                    (quantile(0.99, "mailmesh_archive_put_batch_seconds", a), "put"),
                    (quantile(0.99, "mailmesh_archive_query_seconds", a, by="filter"), "query {{filter}}"),
                ],
                unit="s",
            ),
            Panel(
                "Store errors by operation and kind",
                [
                    (
                        agg("sum", rate("mailmesh_archive_store_errors_total", a), "db, operation, kind"),
                        "{{db}} {{operation}} {{kind}}",
                    ),
                    (
                        agg("sum", rate("mailmesh_archive_purged_envelopes_total", a)),
                        "purged (SQLite cleaner)",
                    ),
                ],
                unit="ops",
            ),
        ],
    )


def history() -> Row:
    """history-query: its Query calls and its reads of the archive."""
    h = "history"
    query = 'grpc_method="Query"'
    return Row(
        "history-query",
        [
            Panel(
                "Query calls by code",
                [(agg("sum", rate("grpc_server_handled_total", h, query), "grpc_code"), "{{grpc_code}}")],
                unit="ops",
            ),
            Panel(
                "Query p50 / p99; archive read p99",
                [
                    (quantile(0.5, "grpc_server_handling_seconds", h, query), "Query p50"),
                    (quantile(0.99, "grpc_server_handling_seconds", h, query), "Query p99"),
                    (
                        quantile(0.99, "grpc_client_handling_seconds", h, 'grpc_method="QueryEnvelopes"'),
                        "archive read p99",
                    ),
                ],
                unit="s",
            ),
            Panel(
                "Failures by type; queries by kind",
                [
                    (agg("sum", rate("mailserver_delivery_failures_total", h), "type"), "failure {{type}}"),
                    (
                        agg("sum", rate("mailserver_envelope_queries_total", h), "filter, history"),
                        "filter {{filter}}, history {{history}}",
                    ),
                ],
                unit="ops",
            ),
        ],
    )


def send() -> Row:
    """The outbox: outcomes, attempts, latency to sent and stored."""
    s = "send"
    return Row(
        "send",
        [
            Panel(
                "Attempts by result",
                [(agg("sum", rate("waku_send_attempts_total", s), "result"), "{{result}}")],
                unit="ops",
            ),
            Panel(
                "Time to sent / stored (p50, p99)",
                [
                    (quantile(0.5, "waku_send_time_to_sent_seconds", s), "sent p50"),
                    (quantile(0.99, "waku_send_time_to_sent_seconds", s), "sent p99"),
                    (quantile(0.99, "waku_send_time_to_stored_seconds", s), "stored p99"),
                ],
                unit="s",
            ),
            Panel(
                "Shards owned, paused replicas",
                [
                    (agg("sum", gauge("waku_send_shards_owned", s)), "shards owned"),
                    (agg("sum", gauge("waku_send_paused", s)), "replicas paused"),
                ],
            ),
        ],
    )


def subscription() -> Row:
    """Records, events and their consumers."""
    s = "subscription"
    return Row(
        "subscription",
        [
            Panel(
                "Records written by origin; events by name",
                [
                    (
                        agg("sum", rate("mailmesh_subscription_records_written_total", s), "origin"),
                        "{{origin}}",
                    ),
                    (agg("sum", rate("mailmesh_subscription_events_emitted_total", s), "event"), "{{event}}"),
                ],
                unit="ops",
            ),
            Panel(
                "Consumers and the slowest one's lag",
                [
                    (agg("sum", gauge("mailmesh_subscription_event_consumers", s)), "consumers"),
                    (
                        agg("max", gauge("mailmesh_subscription_slowest_consumer_lag_events", s)),
                        "lag (events)",
                    ),
                ],
            ),
            Panel(
                "Writer, subscriptions, unstored records",
                [
                    (agg("sum", gauge("mailmesh_subscription_writer", s)), "writers (want 1)"),
                    (agg("max", gauge("mailmesh_subscription_subscriptions", s)), "subscriptions"),
                    (agg("max", gauge("mailmesh_subscription_unstored_records", s)), "unstored records"),
                ],
            ),
        ],
    )


def health() -> Row:
    """What the health service sees."""
    h = "health"
    return Row(
        "health",
        [
            Panel(
                "Peers and edge peers",
                [
                    (agg("max", gauge("mailmesh_health_peers", h)), "Waku peers"),
                    (agg("max", gauge("mailmesh_health_edge_peers_reachable", h)), "edge peers reachable"),
                    (agg("max", gauge("mailmesh_health_edge_peers", h)), "edge peers"),
                ],
            ),
            Panel(
                "Services not SERVING",
                [
                    (
                        agg("count", gauge("mailmesh_health_service_serving", h) + " == 0", "service"),
                        "{{service}}",
                    )
                ],
            ),
            Panel(
                "Status changes; evaluation p99",
                [
                    (
                        agg("sum", rate("mailmesh_health_transitions_total", h), "from, to"),
                        "{{from}} to {{to}}",
                    ),
                    (quantile(0.99, "mailmesh_health_evaluation_seconds", h), "evaluation p99 (s)"),
                ],
            ),
        ],
    )


def grpc() -> Row:
    """go-grpc-prometheus metrics of every service (server and client side)."""
    return Row(
        "gRPC (every service)",
        [
            Panel(
                "Server RPCs by service",
                [(agg("sum", rate("grpc_server_started_total", "mesh"), "job"), "{{job}}")],
                unit="ops",
            ),
            Panel(
                "Server p99 by method",
                [
                    (
                        quantile(0.99, "grpc_server_handling_seconds", "mesh", by="job, grpc_method"),
                        "{{job}} {{grpc_method}}",
                    )
                ],
                unit="s",
            ),
            Panel(
                "Client faults by callee",
                [
                    (
                        agg(
                            "sum",
                            rate("grpc_client_handled_total", "mesh", SERVER_FAULTS),
                            "job, grpc_service, grpc_code",
                        ),
                        "{{job}} to {{grpc_service}} {{grpc_code}}",
                    )
                ],
                unit="ops",
            ),
        ],
    )
