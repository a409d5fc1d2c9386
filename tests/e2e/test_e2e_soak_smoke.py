"""End to end (issue 14 item 5): the soak's code with tiny numbers — ``make soak`` is the 10-minute run.

archive (SQLite), ingest, history-query and the edge peer as processes; publishers, history clients and
hostile peers as three more processes, for ~15 s of load; then the ledger against the archive by hash and
exact cursor walks (bench/soak.py, docs/soak.md). The smoke holds the run to every criterion except the
slopes (15 s of samples is all warm-up): nothing acknowledged lost, nothing foreign archived, no error in a
good client, no hostile move finding a defect, services alive, quiet and exiting 0.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bench.soak import run_soak
from bench.soak_hostile import EXPECTED
from bench.soak_settings import SMOKE

PROCESSES = {
    "archive",
    "ingest",
    "history",
    "edge-peer",
    "role publish",
    "role history",
    "role hostile",
    "coordinator",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("soak")
    result = asyncio.run(run_soak(SMOKE, work=out / "work", out=out / "soak.json", plot=out / "soak.svg"))
    result["_dir"] = str(out)
    return result


@pytest.mark.timeout(900)
def test_nothing_acknowledged_is_lost_and_nothing_foreign_is_archived(report: dict[str, Any]) -> None:
    assert report["failures"] == [] and report["passed"]
    archive = report["archive"]
    assert archive["acked"] > 0 and archive["acked"] == archive["posted"] - archive["unacked"]
    assert archive["lost"] == 0 and archive["acked_present"] == archive["acked"]
    assert archive["foreign_in_archive"] == 0
    walks = report["exact_walks"]
    assert walks["walks"] == SMOKE.final_walks and walks["failures"] == [] and walks["envelopes"] > 0


@pytest.mark.timeout(900)
def test_good_clients_saw_no_error_and_were_served(report: dict[str, Any]) -> None:
    publish, history = report["roles"]["publish"], report["roles"]["history"]
    assert publish["errors"] == {} and history["errors"] == {}
    assert publish["ack_latency"]["n"] > 0
    assert history["pages"] > 0 and history["walks_complete"] > 0 and history["envelopes"] > 0
    assert report["edge_counters"].get("waku_confirmations_sent_total", 0) > 0


@pytest.mark.timeout(900)
def test_hostile_peers_misbehaved_and_the_edge_defended_itself(report: dict[str, Any]) -> None:
    hostile = report["roles"]["hostile"]
    assert hostile["defects"] == 0 and hostile["unexpected"] == {}
    # Each peer's first move always finishes within the load (peers start at moves 0, 3 and 6).
    for move in ("random_bytes", "oversized_auth", "slowloris_handshake"):
        assert hostile["outcomes"][move].get(EXPECTED[move][0], 0) >= 1, hostile["outcomes"]
    counters = report["edge_counters"]
    rejected = sum(v for k, v in counters.items() if k.startswith("devp2p_rejected_connections"))
    assert rejected >= 3
    logs = report["services"]["logs"]
    assert all(log["errors"] == 0 for log in logs.values()), logs
    assert all(code == 0 for code in report["services"]["exit_codes"].values())


@pytest.mark.timeout(900)
def test_every_process_is_sampled_and_the_outputs_are_written(report: dict[str, Any]) -> None:
    assert set(report["processes"]) == PROCESSES
    for name, p in report["processes"].items():
        assert p["rss_mib_start"] > 0 and p["fds_start"] > 0, name
        assert isinstance(p["rss_mib_per_min"], float) and isinstance(p["fds_per_min"], float)
    written = json.loads((Path(report["_dir"]) / "soak.json").read_text())
    assert written["figures"] == report["figures"]
    assert len(written["series"]["t_s"]) >= SMOKE.duration_s
    assert set(written["series"]["rss_mib"]) == PROCESSES
    svg = (Path(report["_dir"]) / "soak.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 4 + 2 * len(PROCESSES)
