"""The run report: JSON for people and logs, Prometheus text for a textfile collector or a pushgateway.

Every number is a gauge about the last run (labels ``command``, ``backend``, ``dry_run``), so the
pushgateway and the textfile collector both hold the last run's picture; alert on
``time() - mailmesh_archive_job_last_success_timestamp_seconds``.

Definitions: ``rows_scanned`` rows read by the full scan, per table; ``envelopes_expired`` envelopes that
were visible and are past this run's cutoffs (what an expiry removes for readers); ``rows_moved`` rows
written into a new or current generation; ``rows_deleted`` physical rows in the partitions deleted whole
(copies of moved rows included); ``partitions_deleted`` whole partitions deleted (envelope and key tables).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge, push_to_gateway, write_to_textfile

from spark.archive_job.transform import PartitionSize

__all__ = ["PUSH_JOB", "Report"]

PUSH_JOB = "mailmesh_archive_job"
_P = "mailmesh_archive_job_"


@dataclass
class Report:
    """What one run did (or would do, when ``dry_run``)."""

    command: str
    backend: str
    dry_run: bool
    now: int
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    ok: bool | None = None
    error: str | None = None
    stages: dict[str, float] = field(default_factory=dict)
    rows_scanned: dict[str, int] = field(default_factory=dict)
    envelopes_expired: int = 0
    rows_moved: int = 0
    rows_deleted: int = 0
    partitions_deleted: int = 0
    buckets_moved: int = 0
    buckets_converged: int = 0
    plan_entries: list[dict[str, int | str]] = field(default_factory=list)
    plan: list[str] = field(default_factory=list)
    unreachable_partitions: int = 0
    largest_before: list[PartitionSize] = field(default_factory=list)
    largest_after: list[PartitionSize] | None = None

    @property
    def duration_s(self) -> float:
        """Seconds from start to finish (to now while running)."""
        return (self.finished_at or time.time()) - self.started_at

    def rate(self, rows: int, *stages: str) -> float | None:
        """Rows per second over the named stages (None when they took no measurable time)."""
        took = sum(self.stages.get(s, 0.0) for s in stages)
        return round(rows / took, 1) if took > 0 else None

    def finish(self, ok: bool, error: str | None = None) -> None:
        """Close the report."""
        self.finished_at = time.time()
        self.ok = ok
        self.error = error

    def as_dict(self) -> dict[str, object]:
        """JSON-ready."""
        after = None if self.largest_after is None else [p.as_dict() for p in self.largest_after]
        return {
            "command": self.command,
            "backend": self.backend,
            "dry_run": self.dry_run,
            "ok": self.ok,
            "error": self.error,
            "now": self.now,
            "started_at": round(self.started_at, 3),
            "duration_seconds": round(self.duration_s, 3),
            "stages": {k: round(v, 3) for k, v in self.stages.items()},
            "rows_scanned": self.rows_scanned,
            "envelopes_expired": self.envelopes_expired,
            "rows_moved": self.rows_moved,
            "rows_deleted": self.rows_deleted,
            "partitions_deleted": self.partitions_deleted,
            "buckets_moved": self.buckets_moved,
            "buckets_converged": self.buckets_converged,
            "plan_entries": self.plan_entries,
            "unreachable_partitions": self.unreachable_partitions,
            "largest_partitions_before": [p.as_dict() for p in self.largest_before],
            "largest_partitions_after": after,
            "scan_rows_per_second": self.rate(sum(self.rows_scanned.values()), "extract"),
            "rewrite_rows_per_second": self.rate(self.rows_moved, "copy", "converge"),
            "plan": self.plan,
        }

    def to_json(self) -> str:
        """The report as one JSON document."""
        return json.dumps(self.as_dict(), indent=2, sort_keys=False)

    def registry(self) -> CollectorRegistry:
        """The report's metrics in a fresh registry (gauges: each run replaces the last)."""
        reg = CollectorRegistry()
        base = {"command": self.command, "backend": self.backend, "dry_run": str(self.dry_run).lower()}
        names = tuple(base)

        def gauge(name: str, doc: str, value: float, **labels: str) -> None:
            g = Gauge(_P + name, doc, [*names, *labels], registry=reg)
            g.labels(**base, **labels).set(value)

        gauge(
            "last_run_timestamp_seconds", "When the last run finished (UNIX seconds).", self.finished_at or 0
        )
        gauge("success", "1 if the last run completed, 0 if it failed.", 1 if self.ok else 0)
        if self.ok:
            gauge(
                "last_success_timestamp_seconds",
                "When the last successful run finished.",
                self.finished_at or 0,
            )
        gauge("duration_seconds", "Wall time of the last run.", self.duration_s)
        stage = Gauge(_P + "stage_duration_seconds", "Wall time per stage.", [*names, "stage"], registry=reg)
        for name, took in self.stages.items():
            stage.labels(**base, stage=name).set(took)
        scanned = Gauge(
            _P + "rows_scanned", "Rows read by the full scan, per table.", [*names, "table"], registry=reg
        )
        for table, rows in self.rows_scanned.items():
            scanned.labels(**base, table=table).set(rows)
        gauge(
            "envelopes_expired",
            "Visible envelopes past this run's retention cutoffs.",
            self.envelopes_expired,
        )
        gauge("rows_moved", "Rows written into a new or the current shard generation.", self.rows_moved)
        gauge("rows_deleted", "Physical rows in the partitions deleted whole.", self.rows_deleted)
        gauge("partitions_deleted", "Partitions deleted whole.", self.partitions_deleted)
        gauge("buckets_moved", "Buckets rewritten into a new shard generation.", self.buckets_moved)
        gauge(
            "unreachable_partitions", "Partitions no reader reads (left alone).", self.unreachable_partitions
        )
        biggest = Gauge(
            _P + "largest_partition_rows",
            "Rows in the largest partition, before and after the run.",
            [*names, "when"],
            registry=reg,
        )
        for when, parts in (("before", self.largest_before), ("after", self.largest_after)):
            if parts is not None:
                biggest.labels(**base, when=when).set(max((p.rows for p in parts), default=0))
        for name, value in (
            ("scan_rows_per_second", self.rate(sum(self.rows_scanned.values()), "extract")),
            ("rewrite_rows_per_second", self.rate(self.rows_moved, "copy", "converge")),
        ):
            if value is not None:
                gauge(name, "Throughput of the last run.", value)
        return reg

    def emit(self, json_to: str, prom_to: str, pushgateway: str) -> None:
        """Write the JSON (``-`` = stdout), the textfile and push to the gateway, as configured."""
        if json_to == "-":
            print(self.to_json(), file=sys.stdout, flush=True)
        elif json_to:
            Path(json_to).write_text(self.to_json() + "\n")
        if prom_to:
            write_to_textfile(prom_to, self.registry())  # atomic: temp file, then rename
        if pushgateway:
            push_to_gateway(
                pushgateway, job=PUSH_JOB, registry=self.registry(), grouping_key={"command": self.command}
            )
