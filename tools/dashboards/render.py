"""Grafana's JSON model of the rows, the file the chart embeds, and the command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tools.dashboards.gateway import gateway
from tools.dashboards.overview import edge_peer, overview
from tools.dashboards.query import Panel, Row
from tools.dashboards.services import archive, grpc, health, history, ingest, send, subscription

__all__ = ["DASHBOARD", "build", "expressions", "main", "render", "rows"]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "charts" / "mailmesh" / "files" / "dashboards" / "mailmesh.json"
UID = "mailmesh-overview"
DS = {"type": "prometheus", "uid": "${datasource}"}


def rows() -> list[Row]:
    """Every row, in order."""
    return [
        overview(),
        edge_peer(),
        ingest(),
        archive(),
        history(),
        send(),
        subscription(),
        health(),
        gateway(),
        grpc(),
    ]


def _panel_json(panel: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": panel.unit}
    if panel.mappings:
        defaults["mappings"] = list(panel.mappings)
    options: dict[str, Any] = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}}
    if panel.kind == "stat":
        options = {
            "colorMode": "background",
            "graphMode": "none",
            "reduceOptions": {"calcs": ["lastNotNull"]},
        }
    return {
        "id": pid,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DS,
        "gridPos": {"h": 8, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": options,
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(panel.queries)
        ],
    }


def build() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model (schemaVersion 39)."""
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for row in rows():
        panels.append(
            {"id": pid, "type": "row", "title": row.title, "collapsed": False, "panels": [],
             "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}}
        )  # fmt: skip
        pid, y, x = pid + 1, y + 1, 0
        for panel in row.panels:
            if x + panel.width > 24:
                x, y = 0, y + 8
            panels.append(_panel_json(panel, pid, x, y))
            pid, x = pid + 1, x + panel.width
        y += 8
    variables = [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1},
        {"name": "namespace", "label": "Namespace", "type": "query", "datasource": DS,
         "query": {"query": "label_values(grpc_server_started_total, namespace)", "refId": "namespace"},
         "definition": "label_values(grpc_server_started_total, namespace)", "includeAll": True,
         "allValue": ".*", "multi": True, "current": {}, "hide": 0, "refresh": 2, "sort": 1},
    ]  # fmt: skip
    return {
        "uid": UID,
        "title": "Mailmesh",
        "description": "Waku/Whisper mailserver mesh: overview, then a row per service (docs/operations.md).",
        "tags": ["mailmesh", "waku"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "templating": {"list": variables},
        "annotations": {"list": []},
        "panels": panels,
    }


def render() -> str:
    """The JSON text written to :data:`DASHBOARD`."""
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def expressions(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Every ``(panel title, expr)`` of a dashboard JSON model (rows' nested panels included)."""
    for panel in dashboard.get("panels", []):
        for nested in panel.get("panels", []):
            yield from expressions({"panels": [nested]})
        for target in panel.get("targets", []):
            yield panel.get("title", ""), target["expr"]


def main(argv: Sequence[str] | None = None) -> int:
    """Write the dashboard, or with ``--check`` report whether the committed one is current."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed JSON differs")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not DASHBOARD.is_file() or DASHBOARD.read_text() != text:
            print(
                f"{DASHBOARD.relative_to(ROOT)} is stale: run .venv/bin/python -m tools.dashboards",
                file=sys.stderr,
            )
            return 1
        return 0
    DASHBOARD.parent.mkdir(parents=True, exist_ok=True)
    DASHBOARD.write_text(text)
    print(f"wrote {DASHBOARD.relative_to(ROOT)}")
    return 0
