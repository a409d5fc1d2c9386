"""The PromQL pieces every panel is built from: one selector per service, rates, quantiles, panel records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["JOBS", "MESH", "Panel", "Row", "agg", "gauge", "quantile", "rate", "sel"]

RATE = "$__rate_interval"

JOBS = {
    "edge_peer": ".*edge-peer",
    "ingest": ".*ingest",
    "archive": ".*archive",
    "history": ".*history(-query)?",
    "send": ".*send",
    "subscription": ".*subscription",
    "health": ".*health",
    "gateway": ".*gateway",
}
"""Catalog service name -> the regex its ``job`` label matches (the whole value, as PromQL anchors it)."""
MESH = ".*(" + "|".join(j.removeprefix(".*") for j in JOBS.values()) + ")"


def sel(service: str, extra: str = "") -> str:
    """The label selector of one service's series (``service`` = a JOBS key, or "mesh" for all)."""
    job = MESH if service == "mesh" else JOBS[service]
    return "{" + f'job=~"{job}", namespace=~"$namespace"' + (f", {extra}" if extra else "") + "}"


def rate(metric: str, service: str, extra: str = "") -> str:
    """``rate()`` of a counter of one service over the panel's rate interval."""
    return f"rate({metric}{sel(service, extra)}[{RATE}])"


def quantile(q: float, metric: str, service: str, extra: str = "", by: str = "") -> str:
    """The ``q`` quantile of a histogram (``metric`` without ``_bucket``), summed over replicas."""
    labels = ", ".join(x for x in ("le", by) if x)
    return f"histogram_quantile({q}, sum by ({labels}) ({rate(metric + '_bucket', service, extra)}))"


@dataclass(frozen=True)
class Panel:
    """One panel: a title, its queries as ``(expr, legend)`` and how to show them."""

    title: str
    queries: Sequence[tuple[str, str]]
    unit: str = "short"
    kind: str = "timeseries"
    width: int = 8
    description: str = ""
    mappings: Sequence[dict[str, Any]] = ()


@dataclass(frozen=True)
class Row:
    """A titled row of panels."""

    title: str
    panels: Sequence[Panel] = field(default_factory=tuple)


def agg(op: str, expr: str, by: str = "") -> str:
    """``op by (by) (expr)``, e.g. ``sum by (reason) (rate(...))``; no ``by`` sums everything."""
    return f"{op} by ({by}) ({expr})" if by else f"{op}({expr})"


def gauge(metric: str, service: str, extra: str = "") -> str:
    """A gauge of one service, unaggregated."""
    return metric + sel(service, extra)


_HEALTH_NAMES = [(0, "Unhealthy", "red"), (1, "MinimallyHealthy", "yellow"), (2, "Healthy", "green")]
HEALTH_MAPPINGS = [
    {"type": "value", "options": {str(v): {"text": name, "color": color} for v, name, color in _HEALTH_NAMES}}
]
# The node's health as one number: 2 Healthy, 1 MinimallyHealthy, 0 Unhealthy (one-hot status gauge).
HEALTH_VALUE = (
    agg("max", gauge("mailmesh_health_status", "health", 'status="Healthy"'))
    + " * 2 + "
    + agg("max", gauge("mailmesh_health_status", "health", 'status="MinimallyHealthy"'))
)
# Codes that mean "the server failed", not "the caller asked for something wrong" (go-grpc-prometheus labels).
SERVER_FAULTS = 'grpc_code=~"Unknown|Internal|Unavailable|DeadlineExceeded|DataLoss|Unimplemented"'
