"""The gateway's row: the REST API as its clients see it (services/gateway/metrics.py)."""

from __future__ import annotations

from tools.dashboards.query import Panel, Row, agg, gauge, quantile, rate

__all__ = ["LONG_POLL_ROUTES", "SHORT_ROUTES", "gateway", "rest_overview"]

# Routes whose request can last as long as the client asks: `wait=` long polls (GET /events, /messages,
# /health; MESSAGING-API "Store API SHOULD be used" and the events resource) and the SSE stream, whose
# duration is its whole life. Their latency is the wait, so the latency panels and alerts leave them out.
LONG_POLL_ROUTES = "/events|/messages|/health"
SHORT_ROUTES = f'route!~"{LONG_POLL_ROUTES}|/events/stream"'
REQUESTS = "mailmesh_gateway_http_requests_total"
DURATION = "mailmesh_gateway_http_request_duration_seconds"
G = "gateway"


def rest_overview() -> Panel:
    """The overview's REST panel: requests answered and the 5xx among them."""
    return Panel(
        "REST requests and 5xx (gateway)",
        [
            (agg("sum", rate(REQUESTS, G)), "requests"),
            (agg("sum", rate(REQUESTS, G, 'code=~"5.."')), "5xx"),
        ],
        unit="reqps",
        width=16,
    )


def gateway() -> Row:
    """Requests by route and code, latency, errors, SSE clients, refusals and long polls."""
    return Row(
        "gateway",
        [
            Panel(
                "Requests by route and code",
                [(agg("sum", rate(REQUESTS, G), "route, code"), "{{route}} {{code}}")],
                unit="reqps",
            ),
            Panel(
                "Latency p50 / p99 (long polls and SSE left out)",
                [
                    (quantile(0.5, DURATION, G, SHORT_ROUTES), "p50"),
                    (quantile(0.99, DURATION, G, SHORT_ROUTES, by="route"), "p99 {{route}}"),
                ],
                unit="s",
                description="Long polls (wait=) and SSE streams last as long as the client asks; "
                "they are in the long-poll panel.",
            ),
            Panel(
                "4xx and 5xx by code",
                [(agg("sum", rate(REQUESTS, G, 'code=~"[45].."'), "code"), "{{code}}")],
                unit="reqps",
                description="503: an upstream unavailable; 504: its deadline; 502: it failed "
                "(services/gateway/errors.py).",
            ),
            Panel(
                "SSE clients; slow clients dropped",
                [
                    (agg("sum", gauge("mailmesh_gateway_sse_clients", G)), "SSE clients"),
                    (
                        agg("sum", rate("mailmesh_gateway_sse_dropped_clients_total", G)),
                        "dropped (buffer full) /s",
                    ),
                ],
            ),
            Panel(
                "Refused before routing: rate-limited, unauthenticated, too large",
                [(agg("sum", rate("mailmesh_gateway_rejected_total", G), "reason"), "{{reason}}")],
                unit="reqps",
            ),
            Panel(
                "Long polls: open requests, answered by route, p50 wait",
                [
                    (
                        agg("sum", gauge("mailmesh_gateway_http_requests_in_flight", G))
                        + " - "
                        + agg("sum", gauge("mailmesh_gateway_sse_clients", G)),
                        "open requests besides SSE (long polls waiting)",
                    ),
                    (
                        agg("sum", rate(REQUESTS, G, f'route=~"{LONG_POLL_ROUTES}", method="GET"'), "route"),
                        "{{route}} answered /s",
                    ),
                    (quantile(0.5, DURATION, G, 'route="/events"'), "GET /events p50 (s)"),
                ],
            ),
        ],
    )
