"""What a dashboard or alert expression reads: its series selectors, found by parsing it as PromQL.

The tests use this to hold the dashboard and the alert rules to what the services export: every selector names
a metric and a ``job`` that selects one or more services (:data:`~tools.dashboards.query.JOBS`). Grafana's
variables are replaced by values PromQL accepts before parsing (``$__rate_interval`` by :data:`RATE_SENTINEL`,
so a test can tell that every range came from it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta

import promql_parser

from tools.dashboards.query import JOBS

__all__ = ["PROMETHEUS_SERIES", "RATE_SENTINEL", "Selector", "job_name", "selectors", "services_of"]

RATE_SENTINEL = timedelta(seconds=7777)
"""What ``$__rate_interval`` becomes before parsing (a duration no hand-written range uses)."""
PROMETHEUS_SERIES = frozenset({"up"})
"""Series Prometheus makes itself for every target (the alerts may use them; no service exports them)."""
_GRAFANA = {"$__rate_interval": "7777s", "${namespace}": ".*", "$namespace": ".*"}


@dataclass(frozen=True)
class Selector:
    """One vector selector: the metric, its label matchers (``name -> (op, value)``), its range if any."""

    metric: str
    matchers: Mapping[str, tuple[str, str]]
    range: timedelta | None = None

    @property
    def job(self) -> str | None:
        """The ``job`` regex or value this selector matches, if it has a ``job`` matcher."""
        found = self.matchers.get("job")
        return found[1] if found else None

    @property
    def base(self) -> str:
        """The metric family: ``_bucket``, ``_sum`` and ``_count`` name a histogram's series."""
        return re.sub(r"_(bucket|sum|count)$", "", self.metric)


def _op(matcher: promql_parser.Matcher) -> str:
    return str(matcher.op).rsplit(".", 1)[-1]


def selectors(expr: str) -> list[Selector]:
    """Every selector of ``expr`` (Grafana variables substituted); ValueError if it is not PromQL."""
    for variable, value in _GRAFANA.items():
        expr = expr.replace(variable, value)
    found: list[Selector] = []
    inside_range = False  # the walk visits a range selector, then its vector selector: count them once

    def visit(node: promql_parser.Expr) -> bool:
        nonlocal inside_range
        if isinstance(node, promql_parser.MatrixSelector):
            found.append(_selector(node.vector_selector, node.range))
            inside_range = True
        elif isinstance(node, promql_parser.VectorSelector):
            if not inside_range:
                found.append(_selector(node, None))
            inside_range = False
        return True  # False would end the whole walk

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def _selector(node: promql_parser.VectorSelector, rng: timedelta | None) -> Selector:
    matchers = {m.name: (_op(m), m.value) for m in node.matchers.matchers if m.name != "__name__"}
    return Selector(node.name or "", matchers, rng)


def job_name(service: str) -> str:
    """The job label the chart gives a service: its component name (``edge_peer`` -> ``edge-peer``)."""
    return service.replace("_", "-")


def services_of(selector: Selector, services: Iterable[str] = JOBS) -> list[str]:
    """The catalog services whose job label the selector's ``job`` matcher selects (regexes are anchored)."""
    job = selector.matchers.get("job")
    if job is None:
        return []
    op, value = job
    names = list(services)
    if op in ("Re", "NotRe"):
        hit = [s for s in names if re.fullmatch(value, job_name(s))]
        return hit if op == "Re" else [s for s in names if s not in hit]
    if op in ("Equal", "NotEqual"):
        hit = [s for s in names if job_name(s) == value]
        return hit if op == "Equal" else [s for s in names if s not in hit]
    return []
