"""``python -m services.send`` in the mesh as ``make run`` starts it (process harness, free ports, the
catalog's dependencies): it owns every outbox shard, follows the health service (no Waku peer: Unhealthy,
so a Send waits PAUSED without an attempt), answers the queries and Cancel, and every service exits 0 on
SIGTERM with a quiet log. Delivery to real RLPx peers is covered in tests/integration/send."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from meshharness import CATALOG, FreePorts, ServiceSpec, plan, start_mesh
from meshharness import Mesh as ProcessMesh
from tests.e2e.e2e_rlpx_support import START_DEADLINE_S, STOP_GRACE_S, eventually

TOPIC = "/waku/1/0x0a0b0c0d/rfc26"


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[ProcessMesh]:
    secret = tmp_path / CATALOG["history"].state_files["HISTORY_CURSOR_SECRET_FILE"]
    secret.write_text(os.urandom(32).hex() + "\n")
    secret.chmod(0o600)

    def specs() -> list[ServiceSpec]:
        return plan(
            ["archive", "ingest", "history", "edge_peer", "health", "send"],
            ports=FreePorts(),
            state_dir=tmp_path,
            env={
                "archive": {"ARCHIVE_BACKEND": "sqlite"},
                "health": {"HEALTH_SEND_ADDR": "", "HEALTH_SUBSCRIPTION_ADDR": ""},
                "send": {"MSGSTORE_BACKEND": "sqlite"},
            },
        )

    mesh = start_mesh(specs, timeout=START_DEADLINE_S, log_dir=tmp_path / "logs")
    try:
        yield mesh
    finally:
        codes = mesh.stop(STOP_GRACE_S)
    assert not {n: c for n, c in codes.items() if c != 0}
    noisy = mesh.unexpected(())
    assert not noisy, "\n".join(f"{n}: {line.text}" for n, lines in noisy.items() for line in lines)


def test_send_is_paused_without_peers_and_reports_every_state(processes: ProcessMesh) -> None:
    send = processes.get("send")
    assert send.metric("waku_send_shards_owned") == 16
    with grpc.insecure_channel(send.address) as channel:
        stub = send_pb2_grpc.SendServiceStub(channel)
        message = common_pb2.WakuMessage(payload=b"e2e", content_topic=TOPIC)
        reply = stub.Send(send_pb2.SendRequest(message=message), timeout=10)
        assert reply.created

        def state() -> int:
            request = send_pb2.GetSendStatusRequest(request_id=reply.request_id)
            return int(stub.GetSendStatus(request, timeout=10).status.progress.state)

        # No Waku peer: the health service says Unhealthy, so the request waits without an attempt.
        eventually(lambda: state() == common_pb2.SEND_STATE_PAUSED, "the request paused", timeout=30)
        pending = stub.ListPendingRequests(send_pb2.ListPendingRequestsRequest(), timeout=10)
        assert list(pending.request_ids) == [reply.request_id]
        canceled = stub.Cancel(send_pb2.CancelRequest(request_id=reply.request_id), timeout=10)
        assert canceled.canceled and canceled.state == common_pb2.SEND_STATE_CANCELED
