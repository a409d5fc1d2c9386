"""Two replicas each of the archive (on the real Cassandra node), ingest and history-query behind one edge
peer, balanced by their clients (meshcore round-robin over both addresses), with a real RLPx peer posting
confirmed envelopes all along. SIGKILL one replica of each mid-load:

- the edge peer's Ingest stream (on the killed ingest replica, picked by its metrics) fails over to the
  other; ingest's writes and history's reads go to the surviving archive (retried when they were in flight);
- every envelope the edge peer confirmed is in the archive afterwards, none dropped by the edge peer;
- a history cursor the killed replica issued is valid on the survivor (one cursor secret for both), and the
  pages it yields join the first one without a gap or an overlap;
- history queries over the balanced channel keep being answered; any that failed failed UNAVAILABLE.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from meshharness import CATALOG, Allow, FreePorts, ServiceSpec, plan, start_mesh
from meshharness import Mesh as ProcessMesh
from tests.e2e.e2e_replicas_support import (
    HISTORY,
    Poster,
    archived,
    balanced,
    client_channel,
    history_page,
    open_calls,
)
from tests.e2e.e2e_rlpx_support import (
    START_DEADLINE_S,
    STOP_GRACE_S,
    _enode,
    assert_clean_stop,
    killed_by_test,
)
from tests.integration.archive import cassandra_fixtures as cf
from tests.integration.edge_peer.edge_peer_support import envelopes, relay_client
from tools.cassandra import ctl

pytestmark = pytest.mark.cassandra
cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin
cassandra_keyspace = cf.cassandra_keyspace

LOAD = b"\x0f\x1e\x2d\x3c"
PAGED = b"\x0f\x1e\x2d\x3d"
PAGE = 20
ALLOW = (
    # The edge peer's stream to the killed ingest replica ends; it reconnects (to the other one) and resends.
    Allow(r"ingest stream failed", logger="services.edge_peer.forwarder"),
)


@pytest.fixture
async def processes(
    tmp_path: Path, cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
) -> AsyncIterator[ProcessMesh]:
    cf.truncate_keyspace(cassandra_admin, cassandra_keyspace)
    secret = tmp_path / CATALOG["history"].state_files["HISTORY_CURSOR_SECRET_FILE"]
    secret.write_text(os.urandom(32).hex() + "\n")  # one secret, as the chart's Secret gives every replica
    secret.chmod(0o600)
    archive = {
        "ARCHIVE_BACKEND": "cassandra",
        "ARCHIVE_CASSANDRA_HOSTS": cassandra_node.host,
        "ARCHIVE_CASSANDRA_PORT": str(cassandra_node.native_port),
        "ARCHIVE_CASSANDRA_KEYSPACE": cassandra_keyspace,
    }

    def specs() -> list[ServiceSpec]:
        return plan(
            ["archive", "ingest", "history", "edge_peer"],
            ports=FreePorts(),
            state_dir=tmp_path,
            replicas={"archive": 2, "ingest": 2, "history": 2},
            env={
                "archive": archive,
                "ingest": {"INGEST_MIN_POW": "0"},
                "edge_peer": {"EDGE_MIN_POW": "0", "EDGE_CONFIRMATIONS": "true"},
            },
        )

    mesh = await asyncio.to_thread(start_mesh, specs, timeout=START_DEADLINE_S, log_dir=tmp_path / "logs")
    try:
        yield mesh
    finally:
        killed = killed_by_test(mesh)
        codes = await mesh.stop_async(STOP_GRACE_S)
    assert_clean_stop(mesh, codes, ALLOW, killed=killed)


async def _page_all(channel: grpc.aio.Channel, cursor: bytes) -> list[bytes]:
    """Every further page of PAGED from ``cursor`` on."""
    hashes: list[bytes] = []
    while cursor:
        page, cursor = await history_page(channel, PAGED, limit=PAGE, cursor=cursor)
        hashes.extend(page)
    return hashes


async def _query_meanwhile(channel: grpc.aio.Channel, stop: asyncio.Event, outcomes: list[str]) -> None:
    """History pages over the balanced channel while replicas die: each an answer or UNAVAILABLE."""
    while not stop.is_set():
        try:
            await history_page(channel, LOAD, limit=50)
            outcomes.append("OK")
        except grpc.aio.AioRpcError as err:
            outcomes.append(err.code().name)


@pytest.mark.timeout(600)
async def test_one_replica_of_each_killed_mid_load_loses_nothing_acknowledged(processes: ProcessMesh) -> None:
    edge = processes.get("edge_peer")
    archives, ingests, histories = (processes.of_kind(k) for k in ("archive", "ingest", "history"))
    client = relay_client()
    await client.start()
    history = client_channel(balanced(histories), HISTORY, idempotent=("Query",))
    try:
        info = await client.connect(_enode(edge))
        paged = envelopes(3 * PAGE + 5, topic=PAGED)
        assert (await client.post(info.pubkey, paged, confirm_timeout=30)).response is not None
        wanted = [e.hash for e in paged]
        async with asyncio.timeout(60):
            while await archived(archives[0], wanted) != set(wanted):
                await asyncio.sleep(0.1)  # polling the archive until ingest's batch landed
        async with grpc.aio.insecure_channel(histories[1].address) as doomed:
            first_page, cursor = await history_page(doomed, PAGED, limit=PAGE)  # by the replica we kill
        assert len(first_page) == PAGE and cursor

        poster = Poster(client, info.pubkey, LOAD)
        posting = asyncio.create_task(poster.run())
        stop_queries, outcomes = asyncio.Event(), list[str]()
        querying = asyncio.create_task(_query_meanwhile(history, stop_queries, outcomes))
        await poster.until_confirmed(100)
        [streaming] = [i for i in ingests if open_calls(i, "Ingest") > 0]  # the edge peer's stream
        victims = [streaming, archives[1], histories[1]]
        for victim in victims:
            victim.send_signal(signal.SIGKILL)
        for victim in victims:
            assert await victim.wait_exit_async(30) == -signal.SIGKILL
        answered_before = outcomes.count("OK")
        killed_at = len(poster.confirmed)
        await poster.until_confirmed(killed_at + 200)  # the load goes on through the survivors
        async with asyncio.timeout(120):
            while outcomes.count("OK") < answered_before + 3:
                await asyncio.sleep(0.05)  # polling the list the query task appends to
        poster.stop()
        stop_queries.set()
        await asyncio.gather(posting, querying)

        # The dead replica's cursor goes on where it stopped, on the survivor, without a gap or overlap.
        rest = await _page_all(history, cursor)
        assert sorted(first_page + rest) == sorted(wanted) and len(first_page + rest) == len(wanted)
        # Everything the edge peer confirmed is archived (the edge peer resent what the dead ingest held).
        survivor = next(a for a in archives if a.returncode is None)
        async with asyncio.timeout(120):
            while (held := await archived(survivor, poster.confirmed)) != set(poster.confirmed):
                await asyncio.sleep(0.2)  # polling the archive while the edge peer's buffer drains
        assert len(held) == len(poster.confirmed) > killed_at
        assert edge.metric("edge_ingest_dropped_envelopes_total", reason="buffer_full") == 0
        [alive] = [i for i in ingests if i.returncode is None]
        assert open_calls(alive, "Ingest") == 1  # the stream moved over
        assert set(outcomes) <= {"OK", "UNAVAILABLE"}, outcomes
    finally:
        await history.close()
        await client.stop()
