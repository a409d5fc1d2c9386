"""Cassandra nodes killed under sustained ingest through the edge peer (docs/cassandra.md "Cluster").

The mesh — archive, ingest, history-query, one edge peer, each its own process — runs on the 3-node cluster
(RF 3, LOCAL_QUORUM). Real RLPx peers post envelopes to the edge peer the whole time, a prober calls
``IngestBatch`` once a second, a requester pages history through the edge peer once a second
(tests/cluster/campaign/load.py). Nothing of ours is restarted in either test.

1. **One node SIGKILLed** (node 3), left down, started again: ingest keeps acknowledging, history keeps
   answering, and once the node is back (hints replayed) and again after ``nodetool repair``, every envelope
   any peer posted and every one ingest acknowledged is archived.
2. **Two nodes SIGKILLed** (nodes 1 and 2; node 3, the one test 1 brought back, survives): ingest refuses
   (UNAVAILABLE) within a bound and acknowledges nothing while quorum is lost, history answers ERROR within a
   bound, the edge peer pushes back on its peers; node 3 alone holds everything test 1 verified (a read at
   ONE only it can answer: hints and repair did their job); once the nodes are back the same processes
   acknowledge again, and nothing acknowledged is missing.

Bounds are generous on purpose (a loaded, shared 2-core machine); the measured values go to the figures file.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from archivestore.cassandra.schema import KEYS_TABLE, TIME_TABLE, TOPIC_TABLE
from meshharness import Mesh
from tests.cluster.campaign.cluster_mesh import (
    EDGE_BUFFER,
    enode_of,
    missing,
    node_hashes,
    pending_hints,
    start_cluster_mesh,
)
from tests.cluster.campaign.load import Load, LoadPlan, answer_gap, between, first, longest_gap, summary
from tests.cluster.results import Results
from tools.cassandra import cluster
from tools.cassandra.cluster import ClusterConfig

pytestmark = [pytest.mark.timeout(3600)]

RATE = float(os.environ.get("CLUSTER_RATE", "100"))
"""Envelopes per second the peers post (CLUSTER_RATE)."""
WARMUP_S = 20.0
OUTAGE_S = 40.0
AFTER_S = 15.0
DRAIN_S = 600.0
#: One node down: the longest the edge peer may go without an ingest acknowledgement, and the longest the
#: requester may go without a page.
ONE_DOWN_GAP_S = 30.0
#: Two nodes down: a refused IngestBatch or history request ends within this, and the first refusal comes
#: within this after the kill (ingest's archive deadline is 5 s, a write's Cassandra timeout 5 s).
FAIL_WITHIN_S = 60.0
VICTIM = 2
"""Node 3 (127.0.0.4): killed in test 1, the survivor in test 2."""
ACKED = "edge_ingest_envelopes_acked_total"


@pytest.fixture(scope="module")
def mesh(
    cassandra_cluster: ClusterConfig,
    campaign_keyspace: str,
    tmp_path_factory: pytest.TempPathFactory,
    results: Results,
) -> Iterator[Mesh]:
    """The four services on the cluster; they must exit 0 on SIGTERM at the end."""
    processes = start_cluster_mesh(
        cassandra_cluster, campaign_keyspace, tmp_path_factory.mktemp("cluster-mesh")
    )
    try:
        yield processes
    finally:
        codes = processes.stop(15)
    noisy = {name: len(lines) for name, lines in processes.unexpected().items()}
    results.context.setdefault("warning_lines_by_service", {}).update(noisy)
    assert all(code == 0 for code in codes.values()), codes


@pytest.fixture(scope="module")
def verified() -> set[bytes]:
    """Envelopes test 1 found archived after the repair (test 2 looks for them on the survivor alone)."""
    return set()


def pids(mesh: Mesh) -> dict[str, int]:
    """Each service's pid; the same before and after a test means nothing was restarted."""
    assert all(s.returncode is None for s in mesh.services), "a service exited"
    return {s.name: s.pid for s in mesh.services}


def load_for(mesh: Mesh) -> Load:
    """A load on ``mesh`` at :data:`RATE`."""
    return Load(enode_of(mesh), mesh.get("ingest").address, mesh.get("edge_peer"), LoadPlan(rate=RATE))


def dropped(mesh: Mesh) -> int:
    """Envelopes the edge peer dropped so far: batches it held back longer than
    EDGE_INGEST_BUFFER_WAIT_SECONDS, counted and never acknowledged (docs/edge-peer.md "Relay → ingest")."""
    return int(mesh.get("edge_peer").metric("edge_ingest_dropped_envelopes_total", reason="buffer_full"))


async def drain(mesh: Mesh) -> None:
    """Wait (bounded) until the edge peer's ingest buffer is empty: everything it holds is acknowledged."""
    edge = mesh.get("edge_peer")
    for _ in range(int(DRAIN_S)):
        if await asyncio.to_thread(edge.metric, "edge_ingest_buffered_envelopes") == 0:
            return
        await asyncio.sleep(1.0)  # polling the edge peer's buffer level, bounded above
    pytest.fail(f"the edge peer's ingest buffer did not empty within {DRAIN_S:.0f} s")


async def hints_delivered(cc: ClusterConfig, holders: list[int], target: str, already_s: float) -> float:
    """Seconds (bounded) until no node in ``holders`` has hints pending for ``target``, counted from when the
    target was back (``already_s`` ago)."""
    began = time.monotonic() - already_s
    for _ in range(int(DRAIN_S)):
        pending = await asyncio.to_thread(pending_hints, cc, holders)
        if not any(addr == target for rows in pending.values() for addr, _ in rows):
            return time.monotonic() - began
        await asyncio.sleep(1.0)  # polling the nodes' hint tables, bounded above
    pytest.fail(f"hints for {target} still pending after {DRAIN_S:.0f} s")


def timeline(load: Load, **marks: float) -> dict[str, Any]:
    """What the figures file keeps of a run: marks, outcomes per actor, the edge peer's counters."""
    last = load.samples[-1].values if load.samples else {}
    return {
        "marks_s": {k: round(v, 1) for k, v in marks.items()},
        "posted": len(load.posted),
        "prober": summary(load.probes),
        "pager": summary(load.pages),
        "edge_counters_at_end": last,
    }


async def test_one_node_killed_during_ingest(
    mesh: Mesh,
    cassandra_cluster: ClusterConfig,
    campaign_keyspace: str,
    results: Results,
    verified: set[bytes],
) -> None:
    cc, before, dropped_before = cassandra_cluster, pids(mesh), dropped(mesh)
    load = load_for(mesh)
    await load.start()
    await load.run_for(WARMUP_S)
    t_kill = load.now()
    await asyncio.to_thread(cluster.kill, cc, VICTIM)
    await load.run_for(OUTAGE_S)
    others = [i for i in range(len(cc.hosts)) if i != VICTIM]
    hints_down = await asyncio.to_thread(pending_hints, cc, others)
    t_restart = load.now()
    started = await asyncio.to_thread(cluster.start_node, cc, VICTIM)
    t_back = load.now()
    await load.run_for(AFTER_S)
    hints_s = await hints_delivered(cc, others, cc.hosts[VICTIM], load.now() - t_back)
    await load.stop(DRAIN_S)
    assert pids(mesh) == before

    ack_gap = longest_gap(load.samples, ACKED, t_kill, t_back)
    page_gap = answer_gap(load.pages, t_kill, t_back)
    probe_gap = answer_gap(load.probes, t_kill, t_back)
    marks = {"kill": t_kill, "restart": t_restart, "node_back": t_back, "end": load.now()}
    results.add(
        "one node down: longest stretch without an ingest acknowledgement (edge peer)",
        ack_gap,
        "s",
        **timeline(load, **marks),
        node_start_to_cql_s=round(started.seconds, 1),
        outage_prober=summary(between(load.probes, t_kill, t_back)),
        outage_pager=summary(between(load.pages, t_kill, t_back)),
    )
    results.add("one node down: longest stretch without a history page", page_gap, "s")
    results.add("one node down: longest stretch without an IngestBatch ack", probe_gap, "s")
    assert ack_gap <= ONE_DOWN_GAP_S and probe_gap <= ONE_DOWN_GAP_S, "ingest stopped acknowledging"
    assert page_gap <= ONE_DOWN_GAP_S, "history stopped answering"

    await drain(mesh)
    lost_to_drops = await asyncio.to_thread(dropped, mesh) - dropped_before
    wanted = load.posted + load.acked
    lost = await asyncio.to_thread(missing, mesh.get("archive").address, wanted)
    results.add(
        "one node down: posted or acknowledged envelopes missing after the node returned",
        len(lost),
        "envelopes",
        checked=len(wanted),
        edge_dropped=lost_to_drops,
        pending_hints_while_down=hints_down,
    )
    # The others kept hints for node 3 while it was down and handed them over once it was back.
    assert any(addr == cc.hosts[VICTIM] for rows in hints_down.values() for addr, _ in rows), hints_down
    results.add("one node down: hints for the returned node delivered, after it was UN", hints_s, "s")
    assert lost_to_drops == 0, "the edge peer had to drop envelopes while one node was down"
    assert not lost

    began = time.monotonic()
    repair = await asyncio.to_thread(cluster.nodetool, cc, VICTIM, "repair", "-full", campaign_keyspace)
    repair_s = time.monotonic() - began
    assert repair.returncode == 0, repair.stdout + repair.stderr
    lost = await asyncio.to_thread(missing, mesh.get("archive").address, wanted)
    results.add(
        "one node down: missing after nodetool repair -full",
        len(lost),
        "envelopes",
        checked=len(wanted),
        repair_s=round(repair_s, 1),
    )
    assert not lost
    verified.update(wanted)


async def test_two_nodes_down_refuses_then_recovers(
    mesh: Mesh,
    cassandra_cluster: ClusterConfig,
    campaign_keyspace: str,
    results: Results,
    verified: set[bytes],
) -> None:
    assert verified, "runs after test_one_node_killed_during_ingest (it checks what that test verified)"
    cc, before, dropped_before = cassandra_cluster, pids(mesh), dropped(mesh)
    down = [i for i in range(3) if i != VICTIM]
    load = load_for(mesh)
    await load.start()
    await load.run_for(WARMUP_S)
    t_kill = load.now()
    for i in down:
        await asyncio.to_thread(cluster.kill, cc, i)
    t_down = load.now()  # both processes gone: from here no write can reach a quorum
    await load.run_for(OUTAGE_S)

    alone = await asyncio.to_thread(node_hashes, cc, VICTIM, campaign_keyspace)
    for table in (TIME_TABLE, TOPIC_TABLE, KEYS_TABLE):
        assert verified <= alone[table], f"{len(verified - alone[table])} envelopes not on node 3 ({table})"

    t_restart = load.now()
    await asyncio.to_thread(cluster.start_node, cc, down[0])
    t_quorum = load.now()
    await asyncio.to_thread(cluster.start_node, cc, down[1])
    t_all = load.now()
    await load.run_for(AFTER_S)
    await load.stop(DRAIN_S)
    assert pids(mesh) == before

    refused = first(load.probes, t_down, lambda r: r.outcome != "ok")
    failed_page = first(load.pages, t_down, lambda r: r.outcome != "ok")
    assert refused is not None and failed_page is not None
    refusal_s = refused.at + refused.seconds - t_down
    page_error_s = failed_page.at + failed_page.seconds - t_down
    lost_quorum = between(load.probes, t_down, t_restart)
    calls = between(load.probes, t_kill, t_quorum) + between(load.pages, t_kill, t_quorum)
    slowest = max(r.seconds for r in calls)
    full = first_sample(load, t_down, lambda v: v["edge_ingest_buffered_envelopes"] >= EDGE_BUFFER)
    resumed = first(load.probes, t_quorum, lambda r: r.outcome == "ok")
    marks = {
        "first_kill": t_kill,
        "both_gone": t_down,
        "restart": t_restart,
        "quorum_back": t_quorum,
        "all_back": t_all,
        "end": load.now(),
    }
    results.add(
        "two nodes down: first IngestBatch refusal after both nodes were gone",
        refusal_s,
        "s",
        **timeline(load, **marks),
        refusal=refused.outcome,
        outage_prober=summary(between(load.probes, t_kill, t_quorum)),
        outage_pager=summary(between(load.pages, t_kill, t_quorum)),
    )
    results.add(
        "two nodes down: first history ERROR after both nodes were gone",
        page_error_s,
        "s",
        error=failed_page.outcome,
    )
    results.add("two nodes down: slowest IngestBatch or history call", slowest, "s")
    if full is not None:
        results.add(
            "two nodes down: edge peer buffer full (back-pressure on peers) after both nodes were gone",
            full - t_down,
            "s",
        )
    assert refusal_s <= FAIL_WITHIN_S and page_error_s <= FAIL_WITHIN_S and slowest <= FAIL_WITHIN_S
    assert lost_quorum and all(r.outcome != "ok" for r in lost_quorum), "acknowledged without a quorum"
    assert full is not None, "the edge peer never pushed back"
    assert resumed is not None, "ingest never acknowledged again"
    results.add(
        "two nodes down: first IngestBatch ack after quorum returned",
        resumed.at + resumed.seconds - t_quorum,
        "s",
    )

    await drain(mesh)
    lost_to_drops = await asyncio.to_thread(dropped, mesh) - dropped_before
    acked_lost = await asyncio.to_thread(missing, mesh.get("archive").address, load.acked)
    posted_lost = await asyncio.to_thread(missing, mesh.get("archive").address, load.posted)
    results.add(
        "two nodes down: acknowledged envelopes missing after recovery",
        len(acked_lost),
        "envelopes",
        checked=len(load.acked),
        posted=len(load.posted),
        posted_not_archived=len(posted_lost),
        edge_dropped=lost_to_drops,
    )
    assert not acked_lost
    # What the edge peer could not hold back longer than EDGE_INGEST_BUFFER_WAIT_SECONDS it counted as dropped
    # (never acknowledged): exactly those, and nothing else, are absent.
    assert len(posted_lost) == lost_to_drops


def first_sample(load: Load, after: float, test: Any) -> float | None:
    """When the edge peer's counters first passed ``test`` at or after ``after``."""
    return next((s.at for s in load.samples if s.at >= after and test(s.values)), None)
