"""The Grafana dashboard the chart embeds: current with its generator, valid PromQL against ``${datasource}``,
rates over ``$__rate_interval``, every query scoped to one service's (or the mesh's) job and the namespace
variable, an overview row then one row per service, and a layout Grafana can place.

That every metric a panel names is exported by the service it selects is checked against a running mesh in
tests/e2e/test_e2e_observability.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tools.dashboards import DASHBOARD, JOBS, expressions, render
from tools.dashboards.selectors import RATE_SENTINEL, selectors, services_of

ROWS = [
    "Overview",
    "edge-peer",
    "ingest",
    "archive",
    "history-query",
    "send",
    "subscription",
    "health",
    "gateway",
    "gRPC (every service)",
]
# What issue 13 asks the overview to show, as the metric each of those panels must read.
OVERVIEW_METRICS = {
    "envelopes in": "waku_envelopes_received_total",
    "archived": "mailmesh_archive_put_items_total",
    "rejections by reason": "waku_envelopes_rejected_total",
    "history p50/p99": "mailserver_delivery_duration_seconds_bucket",
    "0x7f bytes": "mailserver_sent_envelope_batch_size_bytes_sum",
    "peers by capability": "edge_peers",
    "sends/retries/pending": "waku_send_pending",
    "health state": "mailmesh_health_status",
    "Cassandra errors": "mailmesh_archive_store_errors_total",
    "REST request rate and 5xx": "mailmesh_gateway_http_requests_total",
}
# What the gateway's row must show (issue 12's operations story), as the metric each panel reads.
GATEWAY_METRICS = {
    "requests/s by route and code": "mailmesh_gateway_http_requests_total",
    "p50/p99 latency": "mailmesh_gateway_http_request_duration_seconds_bucket",
    "SSE clients": "mailmesh_gateway_sse_clients",
    "dropped slow clients": "mailmesh_gateway_sse_dropped_clients_total",
    "rate-limited requests": "mailmesh_gateway_rejected_total",
    "long polls": "mailmesh_gateway_http_requests_in_flight",
}


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def test_the_committed_json_is_what_the_generator_writes() -> None:
    assert DASHBOARD.read_text() == render(), "stale: run .venv/bin/python -m tools.dashboards"


def test_datasource_and_namespace_variables_and_every_query_uses_the_datasource(
    dashboard: dict[str, Any],
) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (
        variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    )
    assert variables["namespace"]["allValue"] == ".*" and variables["namespace"]["includeAll"]
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert panels
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_every_expression_parses_and_is_scoped_to_a_service_and_the_namespace(
    dashboard: dict[str, Any],
) -> None:
    checked = 0
    for title, expr in expressions(dashboard):
        found = selectors(expr)
        assert found, f"{title}: no selector in {expr}"
        for sel in found:
            assert services_of(sel), f"{title}: {sel.metric} selects no service's job: {expr}"
            assert sel.matchers.get("namespace") == ("Re", ".*"), f"{title}: {sel.metric} ignores $namespace"
            # Every range is Grafana's $__rate_interval: at least four scrapes, whatever the interval.
            assert sel.range in (None, RATE_SENTINEL), f"{title}: {sel.metric} has a fixed range"
            checked += 1
    assert checked >= 70


def test_an_overview_row_then_one_row_per_service(dashboard: dict[str, Any]) -> None:
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == ROWS
    overview: list[str] = []
    for panel in dashboard["panels"][1:]:
        if panel["type"] == "row":
            break
        overview += [sel.metric for t in panel["targets"] for sel in selectors(t["expr"])]
    missing = {what: metric for what, metric in OVERVIEW_METRICS.items() if metric not in overview}
    assert not missing, f"the overview lacks {missing}"
    per_row: dict[str, set[str]] = {}
    row = ""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            continue
        for target in panel["targets"]:
            for sel in selectors(target["expr"]):
                per_row.setdefault(row, set()).update(services_of(sel))
    # A service's row reads that service only (the overview and the gRPC row span several).
    for service, title in zip(JOBS, ROWS[1:-1], strict=True):
        assert per_row[title] == {service}, title


def test_the_gateway_row_shows_the_rest_api_and_leaves_waits_out_of_latency(
    dashboard: dict[str, Any],
) -> None:
    panels: list[dict[str, Any]] = []
    row = ""
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
        elif row == "gateway":
            panels.append(panel)
    read = {sel.metric for p in panels for t in p["targets"] for sel in selectors(t["expr"])}
    missing = {what: metric for what, metric in GATEWAY_METRICS.items() if metric not in read}
    assert not missing, f"the gateway row lacks {missing}"
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    latency = [t["expr"] for p in panels if p["title"].startswith("Latency") for t in p["targets"]]
    assert len(latency) == 2  # p50 and p99
    for expr in latency:
        # A long poll's or an SSE stream's duration is the client's wait: a quantile would show the wait.
        route = next(s for s in selectors(expr) if s.metric.endswith("_bucket")).matchers["route"]
        assert route[0] == "NotRe" and all(r in route[1] for r in ("/events", "/messages", "/health")), expr
    codes = {sel.matchers.get("code", ("", ""))[1] for e in exprs for sel in selectors(e)}
    assert "[45].." in codes  # 4xx and 5xx
    assert any("4xx" in p["title"] for p in panels)


def test_panels_have_unique_ids_and_do_not_overlap(dashboard: dict[str, Any]) -> None:
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        mine = {
            (x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])
        }
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
