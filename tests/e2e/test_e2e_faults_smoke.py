"""End to end (issue 14 item 3): three cases of the fault campaign (`make test-faults` runs every case).

The whole mesh as processes with a fault proxy on each internal hop (bench/faults_mesh.py), a real RLPx peer
posting confirmed envelopes and a client sending through the send service:

- ingest → archive black-holed: PutEnvelopes hits its 1 s deadline (retried at most 3 times per write),
  nothing hangs, and every envelope the edge peer confirmed is archived once the black hole clears;
- edge peer → ingest black-holed: the Ingest stream (no deadline of its own) is dropped by keepalive, the
  edge peer resends what was unacknowledged, nothing is lost;
- send → edge peer reset: Publish fails UNAVAILABLE, the send service retries on its schedule, every
  acknowledged Send ends SUCCEEDED.

Every rule of bench/faults_cases.py holds for each (the report's ``failures`` is empty), every service exits
0 on SIGTERM and writes no ERROR record and no stray output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.faults import SMOKE, run_campaign


@pytest.mark.timeout(900)
async def test_three_hops_under_faults_fail_by_deadline_never_hang_and_lose_nothing(tmp_path: Path) -> None:
    report = await run_campaign(SMOKE, tmp_path / "work")
    assert report["failures"] == [] and report["passed"], report["failures"]
    by: dict[tuple[str, str], dict[str, Any]] = {(r["hop"], r["fault"]): r for r in report["cases"]}

    writes = by[("ingest→archive", "blackhole")]
    # Calls ended while the hop was silent — by their 1 s deadline, or, for a call that started late in the
    # black hole (a loaded machine delays the writes), by keepalive dropping the silent connection (1 s + 2 s)
    # first: either way the client ended them, not the fault clearing (bench/faults_cases.py FAULT_CODES).
    assert sum(writes["ended"].get(code, 0) for code in ("DeadlineExceeded", "Unavailable")) > 0
    assert writes["attempts_on_wire"] <= 3 * (writes["calls"] + writes["in_flight_at_fault"])
    assert writes["acknowledged"] > 0 and writes["lost"] == 0

    stream = by[("edge_peer→ingest", "blackhole")]
    assert stream["ended"].get("Unavailable", 0) >= 1  # keepalive dropped the silent stream
    assert stream["acknowledged"] > 0 and stream["lost"] == 0

    publish = by[("send→edge_peer", "reset")]
    assert publish["ended"].get("Unavailable", 0) >= 1 and publish["resets"] >= 1
    assert publish["acknowledged"] > 0 and publish["lost"] == 0
