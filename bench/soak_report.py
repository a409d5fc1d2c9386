"""The soak's verdict, figures and outputs: ``bench/results/soak.json`` and the SVG plot.

A run **fails** (docs/soak.md "Criteria") when an acknowledged envelope is missing from the archive, a good
client saw any error, a hostile move found a defect, the archive holds an envelope nobody posted, an exact
walk differs from the ledger, the edge peer counted an envelope it could not hand to ingest, a service died,
exited non-zero or logged an ERROR; and — when :attr:`~bench.soak_settings.SoakSettings.strict` (``make
soak``) — when fewer envelopes per second than the target were acknowledged during the load (reported with
the machine's load and CPU pressure: on a shared machine that is what the mesh sustained under it), or a
process's RSS or descriptor slope over the second half of the run exceeds its bound.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.soak_plot import moving_average, render_svg
from bench.soak_sampler import Sampler, steady_slopes
from bench.soak_settings import SoakSettings

__all__ = ["build_report", "per_second", "write_outputs"]

#: Counters of the edge peer that mean an envelope did not reach ingest.
LOSS_COUNTERS = ("edge_ingest_dropped_envelopes_total", "waku_sink_failures_total")
#: Processes whose memory is not ours to bound (the JVM sizes its heap itself); reported only.
UNBOUNDED = ("cassandra",)


def per_second(cumulative: Sequence[float | None]) -> list[float]:
    """Per-sample increases of a cumulative counter (a failed scrape counts as no change)."""
    out: list[float] = []
    last: float | None = None
    for value in cumulative:
        if value is None or last is None:
            out.append(0.0)
        else:
            out.append(max(0.0, value - last))
        last = value if value is not None else last
    return out


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 1) if values else None


def _total(errors: dict[str, int]) -> int:
    return sum(errors.values())


def _figures(
    settings: SoakSettings, sampler: Sampler, roles: dict[str, dict[str, Any]], archive: dict[str, Any]
) -> dict[str, Any]:
    publish, history, hostile = roles["publish"], roles["history"], roles["hostile"]
    span = max(sampler.t[-1] - sampler.t[0], 1e-9) if len(sampler.t) > 1 else 1e-9
    archived = per_second(sampler.counters.get("ingest.archived", []))
    windows = [sum(archived[i : i + 10]) / 10 for i in range(0, max(len(archived) - 9, 0), 10)]
    ours = sum(v[-1] - v[0] for v in sampler.cpu_s.values())
    machine = sampler.machine_cpu[-1] - sampler.machine_cpu[0] if sampler.machine_cpu else 0.0
    duration = int(settings.duration_s)
    acked_in_load = sum(publish["acked_per_s"][:duration])
    achieved = acked_in_load / settings.duration_s
    return {
        "target_rate": settings.rate,
        # Envelopes acknowledged (confirmed before expiry) within the load, per second of it: the rate the
        # mesh sustained. Confirmations that came after the load are in acked_after_load.
        "achieved_rate": round(achieved, 1),
        "rate_target_met": achieved >= 0.99 * settings.rate,
        "acked_after_load": archive["acked"] - acked_in_load,
        "archived_rate_mean": round(sum(archived) / span, 1),
        "archived_rate_min_10s": round(min(windows), 1) if windows else None,
        "posted": archive["posted"],
        "acked": archive["acked"],
        "lost": archive["lost"],
        "unacked": archive["unacked"],
        "foreign_in_archive": archive["foreign_in_archive"],
        "drain_s": archive["drain_s"],
        "ack_latency": publish["ack_latency"],
        "publisher_errors": _total(publish["errors"]),
        "history_errors": _total(history["errors"]),
        "history_pages": history["pages"],
        "history_envelopes": history["envelopes"],
        "history_walks_complete": history["walks_complete"],
        "history_page": history["page"],
        "hostile_sessions": hostile["sessions"],
        "hostile_moves": sum(sum(c.values()) for c in hostile["outcomes"].values()),
        "hostile_defects": hostile["defects"],
        "load1_mean": round(statistics.fmean(sampler.load1), 2) if sampler.load1 else None,
        "cpu_pressure_mean_pct": _mean(sampler.cpu_pressure),
        "io_pressure_mean_pct": _mean(sampler.io_pressure),
        "load1_max": round(max(sampler.load1), 2) if sampler.load1 else None,
        "cores_used_by_soak": round(ours / span, 2),
        "cores_used_by_others": round(max(machine - ours, 0.0) / span, 2),
    }


def _buffer_note(sampler: Sampler, fraction: float) -> str:
    """What the edge peer's ingest buffer (bounded, EDGE_INGEST_BUFFER_*) did over the steady part."""
    buffered = sampler.counters.get("edge.ingest_buffered", [])
    steady = [v for v in buffered[int(len(buffered) * (1 - fraction)) :] if v is not None]
    if not steady:
        return ""
    return f"; its ingest buffer went from {steady[0]:.0f} to {steady[-1]:.0f} envelopes meanwhile"


def _failures(
    settings: SoakSettings,
    processes: dict[str, dict[str, float]],
    roles: dict[str, dict[str, Any]],
    archive: dict[str, Any],
    walks: dict[str, Any],
    edge_counters: dict[str, float],
    services: dict[str, Any],
    buffer_note: str,
    figures: dict[str, Any],
) -> list[str]:
    out: list[str] = []
    if archive["lost"]:
        out.append(f"{archive['lost']} acknowledged envelopes are not in the archive")
    if archive["foreign_in_archive"]:
        out.append(f"the archive holds {archive['foreign_in_archive']} envelopes nobody posted")
    for role in ("publish", "history"):
        if roles[role]["errors"]:
            out.append(f"{role} clients saw errors: {roles[role]['errors']}")
    if roles["hostile"]["defects"]:
        out.append(f"hostile moves found {roles['hostile']['defects']} defects")
    out += walks["failures"][:20]
    out += [f"edge peer counted {k} = {v:g}" for k, v in edge_counters.items() if k.startswith(LOSS_COUNTERS)]
    out += [
        f"{name} died during the load" for name, alive in services["alive_after_load"].items() if not alive
    ]
    out += [f"{name} exited {code} on SIGTERM" for name, code in services["exit_codes"].items() if code != 0]
    out += [
        f"{name} logged {log['errors']} ERROR lines: {log['first_errors'][:2]}"
        for name, log in services["logs"].items()
        if log["errors"]
    ]
    if settings.strict and not figures["rate_target_met"]:
        out.append(
            f"{figures['achieved_rate']} envelopes/s acknowledged, target {settings.rate:g} (machine load "
            f"{figures['load1_mean']}, CPU pressure {figures['cpu_pressure_mean_pct']} %)"
        )
    if settings.strict:
        for name, p in processes.items():
            if name in UNBOUNDED:
                continue
            if p["rss_mib_per_min"] > settings.rss_slope_bound:
                out.append(
                    f"{name}: RSS grows {p['rss_mib_per_min']} MiB/min (bound {settings.rss_slope_bound})"
                    + (buffer_note if name == "edge-peer" else "")
                )
            if p["fds_per_min"] > settings.fd_slope_bound:
                out.append(
                    f"{name}: descriptors grow {p['fds_per_min']}/min (bound {settings.fd_slope_bound})"
                )
    return out


def build_report(
    settings: SoakSettings,
    *,
    sampler: Sampler,
    roles: dict[str, dict[str, Any]],
    load_s: float,
    archive: dict[str, Any],
    walks: dict[str, Any],
    edge_counters: dict[str, float],
    services: dict[str, Any],
) -> dict[str, Any]:
    """Everything the run measured, the verdict and the reasons for it."""
    processes = steady_slopes(sampler, settings.steady_fraction)
    note = _buffer_note(sampler, settings.steady_fraction)
    figures = _figures(settings, sampler, roles, archive)
    failures = _failures(settings, processes, roles, archive, walks, edge_counters, services, note, figures)
    series = {
        **sampler.to_json(),
        "acked_per_s": roles["publish"]["acked_per_s"],
        "posted_per_s": roles["publish"]["posted_per_s"],
        "history_envelopes_per_s": roles["history"]["envelopes_per_s"],
    }
    role_summaries = {
        name: {k: v for k, v in summary.items() if not k.endswith("_per_s")}
        for name, summary in roles.items()
    }
    return {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "passed": not failures,
        "failures": failures,
        "figures": figures,
        "bounds": {
            "rss_mib_per_min": settings.rss_slope_bound,
            "fds_per_min": settings.fd_slope_bound,
            "slopes_over_last_fraction": settings.steady_fraction,
            "enforced": settings.strict,
        },
        "processes": processes,
        "settings": settings.to_json(),
        "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version()},
        "load_s": round(load_s, 1),
        "archive": archive,
        "exact_walks": walks,
        "roles": role_summaries,
        "edge_counters": edge_counters,
        "services": services,
        "series": series,
    }


def write_outputs(report: dict[str, Any], out: Path | None, plot: Path | None) -> None:
    """The JSON (one readable header, the per-second series compact on the last line) and the SVG."""
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        head = json.dumps({k: v for k, v in report.items() if k != "series"}, indent=2)
        series = json.dumps(report["series"], separators=(",", ":"))
        out.write_text(head[:-2] + ',\n  "series": ' + series + "\n}\n")
    if plot is not None:
        plot.parent.mkdir(parents=True, exist_ok=True)
        plot.write_text(_svg(report))


def _svg(report: dict[str, Any]) -> str:
    s = report["series"]
    f = report["figures"]
    throughput = {
        "archived (ingest → archive)": moving_average(per_second(s["counters"].get("ingest.archived", []))),
        "acknowledged to publishers": moving_average([float(v) for v in s["acked_per_s"]]),
        "received by the edge peer": moving_average(per_second(s["counters"].get("edge.received", []))),
        "served to history clients": moving_average([float(v) for v in s["history_envelopes_per_s"]]),
    }
    title = (
        f"Soak {report['when']}: {report['settings']['duration_s']:g} s, {f['achieved_rate']:g} of "
        f"{f['target_rate']:g} envelopes/s acknowledged, {f['lost']} lost; machine load {f['load1_mean']}"
    )
    return render_svg(title, s["t_s"], throughput, s["rss_mib"], s["fds"])
