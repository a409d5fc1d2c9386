"""``python -m bench.faults`` (``make test-faults``): every internal hop × every fault, through a fault proxy.

The whole mesh runs as processes (:mod:`bench.faults_mesh`); each case (:mod:`bench.faults_cases`) injects
one fault into one hop under that hop's load (:mod:`bench.faults_traffic`) and checks that the fault shows
as errors (deadlines fire, resets and silent connections are noticed), that nothing hangs, that retries are
bounded and that nothing acknowledged is lost once it clears. The report (``bench/results/faults.json`` and
its table ``bench/results/faults.md``) holds every figure; the run fails when any case broke a rule.
``tests/e2e/test_e2e_faults_smoke.py`` runs a few cases of the same code in ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.faults_cases import FAULTS, HopSpec, run_case
from bench.faults_mesh import HOPS, KEEPALIVE, SETTINGS, FaultMesh
from bench.faults_traffic import HealthReads, HistoryReads, Posts, RlpxHistory, Sends

__all__ = ["SPECS", "main", "render", "run_campaign"]

ROOT = Path(__file__).resolve().parents[1]
EDGE = "mailmesh.edgepeer.v1.EdgePeerService"
SPECS: dict[str, HopSpec] = {
    s.name: s
    for s in (
        HopSpec(
            ("edge_peer", "ingest"),
            ("mailmesh.ingest.v1.IngestService",),
            Posts,
            stream=True,
        ),
        HopSpec(
            ("edge_peer", "history"),
            ("mailmesh.history.v1.HistoryQueryService",),
            RlpxHistory,
            max_attempts=3,
        ),
        HopSpec(("ingest", "archive"), ("mailmesh.archive.v1.ArchiveService",), Posts, max_attempts=3),
        HopSpec(
            ("history", "archive"), ("mailmesh.archive.v1.ArchiveService",), HistoryReads, max_attempts=3
        ),
        HopSpec(("send", "edge_peer"), (EDGE,), Sends),
        HopSpec(
            ("subscription", "edge_peer"),
            (EDGE,),
            lambda mesh: Posts(mesh, recorded=True),
            stream=True,
        ),
        HopSpec(
            ("subscription", "send"),
            ("mailmesh.send.v1.SendService",),
            lambda mesh: Sends(mesh, recorded=True),
            stream=True,
        ),
        HopSpec(("health", "edge_peer"), (EDGE, "grpc.health.v1.Health"), HealthReads),
    )
}
"""Every hop of :data:`bench.faults_mesh.HOPS`, by name."""
assert {s.hop for s in SPECS.values()} == set(HOPS)

GRPC_CORE_NOTICE = re.compile(
    r"^(?!.*(too_many_pings|ENHANCE_YOUR_CALM))"  # those would be a server refusing our keepalive
    r"[IWE]\d{4} [\d:.]+ +\d+ chttp2_transport\.cc:\d+\] .*(GOAWAY|goaway)"
)
"""gRPC core (C) logs to stderr when a peer ends a connection with GOAWAY — keepalive's ping_timeout
included — at the default verbosity; under a fault that is the expected news. Not ``too_many_pings``:
that would mean a server refusing our keepalive (meshcore.balancing)."""

SMOKE: tuple[tuple[str, str], ...] = (
    ("ingest→archive", "blackhole"),
    ("edge_peer→ingest", "blackhole"),
    ("send→edge_peer", "reset"),
)
"""The cases ``make test`` runs (tests/e2e/test_e2e_faults_smoke.py)."""


async def run_campaign(
    cases: Sequence[tuple[str, str]], work: Path, keepalive: tuple[float, float] = KEEPALIVE
) -> dict[str, Any]:
    """Run ``cases`` (hop name, fault name) on one mesh; the report."""
    load = os.getloadavg()
    began = time.monotonic()
    mesh = await FaultMesh.start(work, keepalive=keepalive)
    records: list[dict[str, Any]] = []
    try:
        for hop, fault in cases:
            record = await run_case(mesh, SPECS[hop], FAULTS[fault])
            print(json.dumps(record), flush=True)
            records.append(record)
    finally:
        codes = await mesh.stop()
    # Services warn while a dependency is faulted (that is the point); what must never appear is an ERROR
    # record or stray output (a traceback). gRPC core's own notices of a connection going away are expected.
    raw = {
        name: [
            line.text
            for line in lines
            if (line.record is None and not GRPC_CORE_NOTICE.match(line.text))
            or line.level in ("ERROR", "CRITICAL")
        ]
        for name, lines in mesh.processes.unexpected(()).items()
    }
    problems = [f"{r['hop']} / {r['fault']}: {f}" for r in records for f in r["failures"]]
    problems += [f"{name} exited {code} on SIGTERM" for name, code in codes.items() if code != 0]
    problems += [f"{name}: {text}" for name, texts in raw.items() for text in texts]
    return {
        "cases": records,
        "settings": {kind: dict(values) for kind, values in SETTINGS.items()},
        "keepalive_s": {"time": keepalive[0], "timeout": keepalive[1]},
        "machine": {"cpus": os.cpu_count(), "loadavg_at_start": [round(x, 1) for x in load]},
        "duration_s": round(time.monotonic() - began, 1),
        "failures": problems,
        "passed": not problems,
    }


def render(report: dict[str, Any]) -> str:
    """The report as a Markdown table (``bench/results/faults.md``)."""
    columns = (
        "hop",
        "fault",
        "expect",
        "shown after s",
        "calls",
        "ended",
        "attempts on wire (max/call)",
        "connections",
        "recovered s",
        "acknowledged",
        "lost",
        "result",
    )
    head = "| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|\n"
    rows = []
    for r in report["cases"]:
        ended = ", ".join(f"{k} {v}" for k, v in sorted(r.get("ended", {}).items())) or "—"
        cells = (
            r["hop"],
            r["fault"],
            r["expect"],
            r.get("shown_s", "—"),
            r.get("calls", "—"),
            ended,
            f"{r.get('attempts_on_wire', '—')} ({r.get('max_attempts', '—')})",
            r.get("connections", "—"),
            r.get("recovered_s", "—"),
            r.get("acknowledged", "—"),
            r.get("lost", "—"),
            "ok" if not r["failures"] else "FAILED",
        )
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    return head + "\n".join(rows) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``--only HOP`` / ``--faults NAME`` narrow the matrix; the report goes to ``--out``."""
    parser = argparse.ArgumentParser(prog="python -m bench.faults", description=__doc__)
    parser.add_argument("--only", nargs="*", default=list(SPECS), help=f"hops ({', '.join(SPECS)})")
    parser.add_argument("--faults", nargs="*", default=list(FAULTS), help=f"faults ({', '.join(FAULTS)})")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "faults.json")
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "faults")
    parser.add_argument(
        "--keepalive",
        nargs=2,
        type=float,
        default=KEEPALIVE,
        metavar=("TIME", "TIMEOUT"),
        help="keepalive of every process, seconds (3600 600: nearly none, to see a hop without it)",
    )
    args = parser.parse_args(argv)
    cases = [(hop, fault) for hop in args.only for fault in args.faults]
    report = asyncio.run(run_campaign(cases, args.work, tuple(args.keepalive)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(render(report))
    for problem in report["failures"]:
        print(f"FAILED: {problem}", file=sys.stderr)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
