"""Security end to end: the whole mesh as processes, mutual TLS and token auth on, known secrets configured.

- Every class of RPC against the real services, over mutual TLS: grpc.health.v1 open; the Messaging API with
  a client token; internal APIs refusing a client token and taking the service token; the admin RPCs
  (archive ``DeleteBuckets``/``Expire``/``PutShardPlan``, edge peer ``AddPeer``/``RemovePeer``/``SetTrusted``)
  refusing the service token and taking the admin one; no or a wrong token → UNAUTHENTICATED; plaintext →
  no connection.
- The services reach each other with their certificate and service token: an RLPx peer's envelopes go edge
  peer → ingest → archive, its history request goes edge peer → history → archive and pages with a cursor.
- No secret — any token, the cursor secret, the node key, the Cassandra password, the TLS key — appears in
  any log line (at DEBUG, so refusals and library chatter are written too) or any /metrics exposition.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from devp2p.nodekey import save_node_key
from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from mailmesh.common.v1 import common_pb2
from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from mailmesh.health.v1 import health_pb2 as node_health_pb2
from mailmesh.health.v1 import health_pb2_grpc as node_health_pb2_grpc
from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from mailmesh.subscription.v1 import subscription_pb2, subscription_pb2_grpc
from meshharness import CATALOG, Allow, FreePorts, ServiceSpec, plan, start_mesh
from meshharness import Mesh as ProcessMesh
from tests.e2e.e2e_rlpx_support import START_DEADLINE_S, STOP_GRACE_S, _enode, assert_clean_stop
from tests.integration.edge_peer.edge_peer_support import envelopes, relay_client
from tests.security_support import MESH_NAME, Pki, TlsPaths
from wakucodec.historyrequest import Dialect, HistoryRequest

SERVICES = ["archive", "ingest", "history", "edge_peer", "health", "send", "subscription"]
CLIENT_TOKEN = "client-tok-4f1c9a7e2b6d8035"
SERVICE_TOKEN = "service-tok-9d27e1b0c4a65f83"
ADMIN_TOKEN = "admin-tok-0b8e3f5a9c1d7264"
CURSOR_SECRET = "5c" * 16 + "a1" * 16
NODE_KEY = bytes.fromhex("4b" * 31 + "01")
CASSANDRA_PASSWORD = "cassandra-pw-7e3b1f0a"
TOPIC = b"\x5e\xc0\x00\x01"
WAIT_S = 120.0
REFUSED = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


@dataclasses.dataclass(frozen=True)
class Secured:
    processes: ProcessMesh
    tls: TlsPaths

    def channel(self, name: str) -> grpc.Channel:
        credentials = grpc.ssl_channel_credentials(
            self.tls.ca.read_bytes(), self.tls.key.read_bytes(), self.tls.cert.read_bytes()
        )
        options = [("grpc.ssl_target_name_override", MESH_NAME)]
        return grpc.secure_channel(self.processes.get(name).address, credentials, options=options)

    def secrets(self) -> dict[str, str]:
        key_body = [line for line in self.tls.key.read_text().splitlines() if line and "-----" not in line]
        return {
            "client token": CLIENT_TOKEN,
            "service token": SERVICE_TOKEN,
            "admin token": ADMIN_TOKEN,
            "cursor secret": CURSOR_SECRET,
            "node key": NODE_KEY.hex(),
            "node key (upper)": NODE_KEY.hex().upper(),
            "cassandra password": CASSANDRA_PASSWORD,
            **{f"TLS key line {i}": line for i, line in enumerate(key_body)},
        }


def bearer(token: str | None) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    state = tmp_path_factory.mktemp("security-mesh")
    tls = Pki(state).issue("mesh")  # one certificate for every service, checked by name
    cursor_file = state / CATALOG["history"].state_files["HISTORY_CURSOR_SECRET_FILE"]
    cursor_file.write_text(CURSOR_SECRET + "\n")
    cursor_file.chmod(0o600)
    save_node_key(state / CATALOG["edge_peer"].state_files["EDGE_NODE_KEY_FILE"], NODE_KEY)
    admin_file = state / "admin.tokens"
    admin_file.write_text(f"# operators\n{ADMIN_TOKEN}\n")
    shared = {
        **tls.env(server_name=MESH_NAME),
        "MAILMESH_AUTH": "token",
        "MAILMESH_AUTH_CLIENT_TOKENS": CLIENT_TOKEN,
        "MAILMESH_AUTH_SERVICE_TOKENS": SERVICE_TOKEN,
        "MAILMESH_AUTH_ADMIN_TOKENS_FILE": str(admin_file),
        "MAILMESH_LOG_LEVEL": "DEBUG",
    }
    # SQLite stores, but a Cassandra login configured all the same: the settings are loaded (and could leak).
    login = {"CASSANDRA_USERNAME": "mailmesh", "CASSANDRA_PASSWORD": CASSANDRA_PASSWORD}
    env: dict[str, dict[str, str]] = {
        "archive": {"ARCHIVE_BACKEND": "sqlite", **{f"ARCHIVE_{k}": v for k, v in login.items()}},
        "ingest": {"INGEST_MIN_POW": "0"},
        "edge_peer": {"EDGE_MIN_POW": "0"},
    }
    for name in ("send", "subscription"):
        env[name] = {"MSGSTORE_BACKEND": "sqlite", **{f"MSGSTORE_{k}": v for k, v in login.items()}}

    def specs() -> list[ServiceSpec]:
        return plan(SERVICES, ports=FreePorts(), state_dir=state, env=env, shared_env=shared)

    processes = start_mesh(specs, timeout=3 * START_DEADLINE_S, log_dir=state / "logs")
    try:
        yield Secured(processes, tls)
    finally:
        codes = processes.stop(STOP_GRACE_S)
    # gRPC's C core reports the plaintext probe of test_health_is_open_but_only_over_mutual_tls on stderr.
    assert_clean_stop(
        processes, codes, [Allow(r"ssl_transport_security.*Handshake failed with error SSL_ERROR_SSL")]
    )


def code_of(call: object) -> grpc.StatusCode:
    """The status of ``call()`` (a bound stub method with its arguments)."""
    try:
        result = call()  # type: ignore[operator]
        if hasattr(result, "__iter__") and not hasattr(result, "ListFields"):
            list(result)  # a response stream: read it to its status
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def test_each_class_of_rpc_needs_its_credential(secured: Secured) -> None:
    archive = archive_pb2_grpc.ArchiveServiceStub(secured.channel("archive"))
    edge = edgepeer_pb2_grpc.EdgePeerServiceStub(secured.channel("edge_peer"))
    send = send_pb2_grpc.SendServiceStub(secured.channel("send"))
    subscription = subscription_pb2_grpc.SubscriptionServiceStub(secured.channel("subscription"))
    node_health = node_health_pb2_grpc.HealthServiceStub(secured.channel("health"))
    history = history_pb2_grpc.HistoryQueryServiceStub(secured.channel("history"))
    message = common_pb2.WakuMessage(payload=b"auth", content_topic="/waku/1/0x5ec00001/rfc26")

    def calls(token: str | None) -> dict[str, object]:
        md = bearer(token)
        return {
            "send.Send": lambda: send.Send(send_pb2.SendRequest(message=message), timeout=10, metadata=md),
            "subscription.ListSubscriptions": lambda: subscription.ListSubscriptions(
                subscription_pb2.ListSubscriptionsRequest(), timeout=10, metadata=md
            ),
            "health.GetHealth": lambda: node_health.GetHealth(
                node_health_pb2.GetHealthRequest(), timeout=10, metadata=md
            ),
            "archive.Stats": lambda: archive.Stats(archive_pb2.StatsRequest(), timeout=10, metadata=md),
            "history.Lookup": lambda: history.Lookup(history_pb2.LookupRequest(), timeout=10, metadata=md),
            "edge.ListPeers": lambda: edge.ListPeers(
                edgepeer_pb2.ListPeersRequest(), timeout=10, metadata=md
            ),
            "archive.Expire": lambda: archive.Expire(archive_pb2.ExpireRequest(), timeout=30, metadata=md),
            "archive.DeleteBuckets": lambda: archive.DeleteBuckets(
                archive_pb2.DeleteBucketsRequest(), timeout=10, metadata=md
            ),
            "archive.PutShardPlan": lambda: archive.PutShardPlan(
                archive_pb2.PutShardPlanRequest(), timeout=10, metadata=md
            ),
            "edge.AddPeer": lambda: edge.AddPeer(edgepeer_pb2.AddPeerRequest(), timeout=10, metadata=md),
            "edge.RemovePeer": lambda: edge.RemovePeer(
                edgepeer_pb2.RemovePeerRequest(), timeout=10, metadata=md
            ),
            "edge.SetTrusted": lambda: edge.SetTrusted(
                edgepeer_pb2.SetTrustedRequest(), timeout=10, metadata=md
            ),
        }

    client_class = {"send.Send", "subscription.ListSubscriptions", "health.GetHealth"}
    service_class = {"archive.Stats", "history.Lookup", "edge.ListPeers"}
    for token in (None, "not-a-known-token-123"):
        for name, call in calls(token).items():
            assert code_of(call) is grpc.StatusCode.UNAUTHENTICATED, (name, token)
    for name, call in calls(CLIENT_TOKEN).items():
        if name in client_class:
            assert code_of(call) not in REFUSED, name
        else:
            assert code_of(call) is grpc.StatusCode.PERMISSION_DENIED, name
    for name, call in calls(SERVICE_TOKEN).items():
        expected_refused = name not in client_class | service_class
        assert (code_of(call) is grpc.StatusCode.PERMISSION_DENIED) is expected_refused, name
    for name, call in calls(ADMIN_TOKEN).items():
        assert code_of(call) not in REFUSED, name  # empty admin requests may be INVALID_ARGUMENT: not refused


def test_health_is_open_but_only_over_mutual_tls(secured: Secured) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    for name in SERVICES:
        with secured.channel(name) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, name
        with grpc.insecure_channel(secured.processes.get(name).address) as plain:
            call = health_pb2_grpc.HealthStub(plain).Check
            assert (
                code_of(lambda c=call: c(health_pb2.HealthCheckRequest(), timeout=10))
                is grpc.StatusCode.UNAVAILABLE
            )


async def _drive_rlpx(secured: Secured) -> tuple[int, bytes, int]:
    client = relay_client()
    await client.start()
    try:
        info = await client.connect(_enode(secured.processes.get("edge_peer")))
        posted = envelopes(5, topic=TOPIC, first=70)
        await client.post(info.pubkey, posted)
        async with asyncio.timeout(WAIT_S):
            while await asyncio.to_thread(_stored, secured, [e.hash for e in posted]) < len(posted):
                await asyncio.sleep(
                    0.05
                )  # polling the archive's state (bounded above), not a synchronisation
        now = int(time.time())
        first = client.request_history(
            info.pubkey, HistoryRequest(now - 3600, now + 60, None, (TOPIC,), 2), Dialect.STATUS_PLAIN
        )
        got = [e async for e in first]
        assert first.result is not None
        cursor = first.result.cursor
        rest = client.request_history(
            info.pubkey,
            HistoryRequest(now - 3600, now + 60, None, (TOPIC,), 100, cursor),
            Dialect.STATUS_PLAIN,
        )
        more = [e async for e in rest]
        return len(got), cursor, len(more)
    finally:
        await client.stop()


def _stored(secured: Secured, hashes: list[bytes]) -> int:
    with secured.channel("history") as channel:
        stub = history_pb2_grpc.HistoryQueryServiceStub(channel)
        reply = stub.Lookup(
            history_pb2.LookupRequest(envelope_hashes=hashes), timeout=10, metadata=bearer(SERVICE_TOKEN)
        )
        return len(reply.stored_envelope_hashes)


def test_services_reach_each_other_with_their_credentials(secured: Secured) -> None:
    first, cursor, rest = asyncio.run(_drive_rlpx(secured))
    assert (first, rest) == (2, 3) and cursor  # edge peer → history → archive, a cursor signed and honoured


def test_no_secret_in_any_log_line_or_metric(secured: Secured) -> None:
    # Runs last in this module: everything above (refusals, traffic) has been logged by now.
    secrets = secured.secrets()
    leaks: list[str] = []
    lines = 0
    for process in secured.processes.services:
        for line in process.logs.lines:
            lines += 1
            leaks += [
                f"{process.name} log: {what}: {line.text[:200]}"
                for what, s in secrets.items()
                if s in line.text
            ]
        url = f"http://127.0.0.1:{process.spec.metrics_port}/metrics"
        exposition = urllib.request.urlopen(url, timeout=10).read().decode()
        assert "grpc_server_handled_total" in exposition
        leaks += [f"{process.name} /metrics: {what}" for what, s in secrets.items() if s in exposition]
    assert not leaks, "\n".join(leaks)
    refusals = [
        line
        for process in secured.processes.services
        for line in process.logs.lines
        if line.record and line.record.get("grpc_code") in ("Unauthenticated", "PermissionDenied")
    ]
    assert refusals and lines > 100  # the scan saw the refusals and the DEBUG chatter it must be clean of


def test_the_key_files_are_what_the_scan_looks_for(secured: Secured) -> None:
    # A scan for the wrong strings would pass vacuously: the configured files hold exactly these secrets.
    state = Path(secured.tls.ca).parent
    assert CURSOR_SECRET in (state / "cursor.secret").read_text()
    assert (state / "edge-peer.nodekey").read_text().strip() == NODE_KEY.hex()
    assert len(secured.secrets()) > 8
