"""Interop with a real status-go v0.50.0 Waku node (tools/interop/statuspeer, docs/interop.md).

status-go v0.50.0 speaks ``waku/0`` (Waku v1 arrived in later releases, which the module proxy reachable here
does not serve; see docs/interop.md). Everything on the status-go side is status-go's code: its go-ethereum
fork's RLPx, the ``waku`` package (sealing, filters, topic interest), its mailserver *client* (the
envelope-wrapped request exactly as ``wakuext.RequestMessages`` builds it, and the plain ``MessagesRequest``
of ``Waku.SendMessagesRequest``) with its own parse of our 0x7d, and its mailserver (LevelDB).

1. status-go dials the edge peer and posts envelopes: archived bit-exact. A fresh status-go node pages
   through them with cursors (limit 5) in both request forms and gets exactly those, byte for byte; status-go
   parses our completions (last envelope hash, cursor) and our ``ERROR=`` answer.
2. The edge peer dials status-go (confirmations on): envelopes both ways; status-go's Message Response and
   Batch Ack do not disturb us; our Disconnect reaches it as "disconnect requested".
3. Our client library against status-go's mailserver: both status-go request forms page through its
   archive bit-exact; the forms it cannot decode get its ``ERROR=`` (a documented difference).
4. ``mailmesh history --topic …`` against status-go's mailserver: the CLI sends the topics' bloom along with
   the topics, which v0.50.0 requires ("bloom filter is empty" otherwise), and pages through its archive.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from mailmeshcli.cli import main as mailmesh_cli
from tests.e2e.e2e_rlpx_support import Mesh, archived, eventually
from tests.interop.peers_support import (
    DEFAULT_POW,
    MS_PASSWORD,
    PASSWORD,
    STATUSPEER,
    TOPICS,
    GoPeer,
    channel_posts,
    edge_view,
    go_peer,
    posted_envelopes,
    run,
    topic,
)
from wakucodec import secp
from wakucodec.bloom import topic_to_bloom
from wakucodec.envelope import Envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.pow import calculate_pow
from wakunode.client import WakuClient
from wakunode.errors import RequestFailed

# The suite's 120 s per test, for the test bodies only: the first test's set-up builds the Go peers (minutes
# on a fresh machine; bounded by peers_support.BUILD_TIMEOUT_S) and starts the mesh (bounded by its deadline).
pytestmark = pytest.mark.timeout(120, func_only=True)
COUNT = 12
LIMIT = 5
ARCHIVE_TIMEOUT_S = 30.0
TOPIC_HISTORY = TOPICS["status-history"]
TOPIC_BOTH_WAYS = TOPICS["status-both-ways"]
TOPIC_MS = TOPICS["status-mailserver"]
#: waku/0 Status option keys are the strings "0".."5" (bytes 0x30..); values as RLP, hex.
POW_0_000002 = "883ec0c6f7a0b5ed8d"  # RLP(uint64 bits of 0.000002): EDGE_MIN_POW
FULL_BLOOM = "b840" + "ff" * 64


@pytest.fixture
def status_bin(interop_peers: None) -> Path:
    return STATUSPEER


def in_order(envelopes: list[Envelope]) -> list[Envelope]:
    """The mailserver order: (sent, hash) ascending (status-go's LevelDB key; our history's order)."""
    return sorted(envelopes, key=lambda e: (e.sent, e.hash))


def assert_status_we_sent(peer: GoPeer) -> None:
    """Our waku/0 Status as status-go received it: [0, options] with string keys, our PoW, a full bloom."""
    status = peer.wait_event(lambda e: e["event"] == "status" and e["dir"] == "in")
    assert status["version"] == 0
    options = status["options"]
    assert options["30"] == POW_0_000002 and options["31"] == FULL_BLOOM
    assert options["32"] == "80" and options["33"] == "80"  # not a light node, no confirmations
    assert set(options) == {"30", "31", "32", "33", "34"}  # waku/0 keys "0".."4" (no topic interest, no 6)


def page_through(peer: GoPeer, command: str, lower: int, upper: int, tpc: str) -> tuple[list[str], int]:
    """Follow cursors with status-go's client until it reports no cursor: (envelope hashes, pages)."""
    hashes: list[str] = []
    cursor, pages = "", 0
    while True:
        peer.command(f"{command} {lower} {upper} {tpc} {LIMIT} {cursor}".rstrip())
        done = peer.command("wait-complete 30")  # status-go's EventMailServerRequestCompleted
        pages += 1
        assert done["error"] == "", done
        page = done["envelopes"]
        assert len(page) <= LIMIT
        if page:
            assert done["last"] == page[-1]  # status-go's parse of our 0x7d: the last envelope's hash
        hashes += page
        cursor = done["cursor"]
        if not cursor:
            return hashes, pages
        assert len(bytes.fromhex(cursor)) == 36  # status-go's clients accept 0 or 36 bytes
        assert pages < 10


def test_statusgo_dials_us_posts_and_pages_through_history(
    mesh: Mesh, status_bin: Path, tmp_path: Path
) -> None:
    edge = mesh.edges[0]
    history = mesh.get("history").address
    started = time.monotonic()
    args = [
        "-dial",
        edge.enode,
        "-topic",
        TOPIC_HISTORY,
        "-password",
        PASSWORD,
        "-payload",
        "from status-go A",
    ]
    with go_peer(status_bin, args, tmp_path / "status-a.log") as a:
        a.command("wait-peer 20")
        assert a.select("session")[0]["inbound"] is False
        assert_status_we_sent(a)
        a.command(f"post {COUNT}")
        sent = posted_envelopes(a)
        assert all(calculate_pow(e) >= DEFAULT_POW for e in sent)
        hashes = [e.hash for e in sent]
        eventually(lambda: archived(history, hashes) == COUNT, "archived", ARCHIVE_TIMEOUT_S)
        assert {e["raw"] for e in a.select("envelope", dir="out", code="messages")} == {
            e.raw.hex() for e in sent
        }
        assert a.select("peer-dropped") == []

    expected = [e.hash.hex() for e in in_order(sent)]
    raw = {e.hash.hex(): e.raw.hex() for e in sent}
    lower, upper = min(e.sent for e in sent), max(e.sent for e in sent)
    args = ["-dial", edge.enode, "-topic", TOPIC_HISTORY, "-password", PASSWORD]
    args += ["-mailserver-password", MS_PASSWORD]
    with go_peer(status_bin, args, tmp_path / "status-b.log") as b:
        b.command("wait-peer 20")
        # 12 envelopes, limit 5: pages of 5, 5, 2 (history returns a cursor only while more remain).
        for command in ("request", "request-plain"):
            got, pages = page_through(b, command, lower, upper, TOPIC_HISTORY)
            assert got == expected, command
            assert pages == 3, command
        # Every 0x7f was a list (waku's form) of envelopes byte-identical to what status-go A sealed.
        wire = b.select("envelope", dir="in", code="p2p")
        assert len(wire) == 2 * COUNT and all(e["raw"] == raw[e["hash"]] for e in wire)
        # An inverted range: our ERROR= answer, parsed by status-go as a failed request.
        b.command(f"request {upper + 1} {lower} {TOPIC_HISTORY} {LIMIT}")
        failed = b.command("wait-complete 30")
        assert "query range is invalid: lower > upper" in failed["error"] and failed["envelopes"] == []
        b.command(f"wait-messages {COUNT} 20")  # status-go's filter opened every one
        delivered = {m["payload"] for m in b.select("message") if not m["own"]}
        assert delivered == {f"from status-go A #{i}" for i in range(COUNT)}
        assert b.select("peer-dropped") == []
    assert time.monotonic() - started < 60


def test_we_dial_statusgo_and_envelopes_flow_both_ways(mesh: Mesh, status_bin: Path, tmp_path: Path) -> None:
    edge = mesh.edges[0]
    history = mesh.get("history").address
    args = [
        "-topic",
        TOPIC_BOTH_WAYS,
        "-password",
        PASSWORD,
        "-payload",
        "from status-go C",
        "-confirmations",
    ]
    with (
        go_peer(status_bin, args, tmp_path / "status-c.log") as c,
        grpc.insecure_channel(edge.address) as channel,
    ):
        stub = edgepeer_pb2_grpc.EdgePeerServiceStub(channel)
        stub.AddPeer(edgepeer_pb2.AddPeerRequest(enode=c.enode), timeout=10)  # we are the RLPx initiator
        c.command("wait-peer 20")
        assert c.select("session")[0]["inbound"] is True
        assert_status_we_sent(c)
        # status-go's Hello and waku/0 Status as we decoded them.
        view = edge_view(channel, c)
        assert view.capability == "waku/0" and view.direction == edgepeer_pb2.PEER_DIRECTION_OUTBOUND
        assert view.snappy and view.client_id.startswith("Statusd/v0.50.0/")
        assert view.pow_requirement == DEFAULT_POW and view.topic_interest_count == 1
        assert view.confirmations_enabled and not view.light_node
        # status-go advertises topic interest (its filter's topic), not a bloom.
        theirs = c.wait_event(lambda e: e["event"] == "status" and e["dir"] == "out")
        assert theirs["options"]["35"] == "c584" + TOPIC_BOTH_WAYS.removeprefix("0x")

        c.command("post 6")
        sent = posted_envelopes(c)
        eventually(lambda: archived(history, [e.hash for e in sent]) == 6, "archived", ARCHIVE_TIMEOUT_S)

        signer = secp.generate_private_key()
        ours = channel_posts("from mailmesh", TOPIC_BOTH_WAYS, 5, signer)
        publish = edgepeer_pb2.PublishRequest(
            envelopes=[e.raw for e in ours], relay_timeout=Duration(seconds=10)
        )
        reply = stub.Publish(publish, timeout=30)
        assert [r.status for r in reply.results] == [edgepeer_pb2.PUBLISH_STATUS_PUBLISHED] * len(ours)
        c.command("wait-messages 5 20")
        delivered = [m for m in c.select("message") if not m["own"]]
        assert {m["payload"] for m in delivered} == {f"from mailmesh #{i}" for i in range(5)}
        assert {m["src"] for m in delivered} == {secp.public_key(signer).hex()}
        wire = {e["hash"]: e["raw"] for e in c.select("envelope", dir="in", code="messages")}
        assert {e.hash.hex(): e.raw.hex() for e in ours}.items() <= wire.items()
        assert not {e.hash.hex() for e in sent} & wire.keys()  # not echoed back
        # status-go confirmed our Messages packet (Message Response, then Batch Ack); we kept the session.
        c.wait_event(lambda e: e["event"] == "batch-ack" and e["dir"] == "out")
        assert c.select("message-response", dir="out")
        assert c.select("peer-dropped") == []

        stub.RemovePeer(edgepeer_pb2.RemovePeerRequest(enode=c.enode), timeout=10)
        assert c.wait_event(lambda e: e["event"] == "peer-dropped")["error"] == "disconnect requested"


def test_our_client_uses_statusgo_mailserver(status_bin: Path, tmp_path: Path) -> None:
    args = ["-topic", TOPIC_MS, "-password", PASSWORD, "-payload", "archived by status-go"]
    args += ["-mailserver", str(tmp_path / "status-ms-db"), "-mailserver-password", MS_PASSWORD]
    with go_peer(status_bin, args, tmp_path / "status-d.log") as d:
        d.command(f"post {COUNT}")  # status-go's add() archives its own envelopes in its mailserver
        theirs = posted_envelopes(d)
        signer = secp.generate_private_key()
        ours = channel_posts("posted by mailmesh", TOPIC_MS, 3, signer)
        expected = in_order([*theirs, *ours])
        lower, upper = min(e.sent for e in expected), int(time.time()) + 5
        # Topics *and* their bloom: status-go v0.50.0's server refuses an empty bloom ("bloom filter is
        # empty"; later versions accept topics alone), so its clients of the time sent both, as we do here.
        request = HistoryRequest(lower, upper, topic_to_bloom(topic(TOPIC_MS)), (topic(TOPIC_MS),), LIMIT)

        async def fetch() -> dict[str, tuple[list[Envelope], int]]:
            results: dict[str, tuple[list[Envelope], int]] = {}
            async with WakuClient() as client:
                info = await client.connect(d.enode)  # our devp2p as initiator, status-go as recipient
                assert info.capability == "waku/0"
                await client.post(info.pubkey, ours)
                d.command("wait-messages 3 20")  # validated (PoW ≥ 0.2), archived and opened by status-go
                for dialect in (Dialect.STATUS_PLAIN, Dialect.STATUS_ENVELOPE):
                    walk = client.follow_cursor(
                        info.pubkey, request, dialect, password=MS_PASSWORD, timeout=20
                    )
                    results[dialect.value] = ([e async for e in walk], len(walk.pages))
                # status-go decodes exactly the 7-item payload: the older 6-item form gets its ERROR=.
                by_bloom = replace(request, topics=())  # the 6-item form has no topics field
                legacy = client.request_history(
                    info.pubkey, by_bloom, Dialect.STATUS_LEGACY_6, password=MS_PASSWORD, timeout=20
                )
                with pytest.raises(RequestFailed, match="failed to decode data"):
                    _ = [e async for e in legacy]
            return results

        results = run(fetch())
        for dialect, (got, pages) in results.items():
            assert [e.raw for e in got] == [e.raw for e in expected], dialect
            # status-go returns a cursor whenever the limit was reached, even with nothing left: 15 envelopes
            # at limit 5 take three full pages and a fourth, empty one without a cursor.
            assert pages == 4, dialect
        assert {e["error"] for e in d.select("peer-dropped")} <= {"client quitting"}


@pytest.mark.parametrize("dialect", ["status-plain", "status-envelope"])
def test_cli_history_by_topic_against_statusgo_mailserver(
    status_bin: Path, tmp_path: Path, dialect: str
) -> None:
    args = ["-topic", TOPIC_MS, "-password", PASSWORD, "-payload", "archived by status-go"]
    args += ["-mailserver", str(tmp_path / "status-ms-db"), "-mailserver-password", MS_PASSWORD]
    with go_peer(status_bin, args, tmp_path / "status-e.log") as e:
        e.command("post 7")
        expected = in_order(posted_envelopes(e))
        lower, upper = min(env.sent for env in expected), int(time.time()) + 5
        out = io.StringIO()
        argv = [
            "history", e.enode, "--dialect", dialect, "--from", str(lower), "--to", str(upper),
            "--topic", TOPIC_MS, "--password", MS_PASSWORD, "--limit", str(LIMIT), "--follow",
            "--timeout", "20",
        ]  # fmt: skip
        code = mailmesh_cli(argv, out)
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        # Topics only would get "request is invalid: bloom filter is empty" from v0.50.0.
        assert code == 0, lines
        summary = lines.pop()
        assert [line["hash"] for line in lines] == ["0x" + env.hash.hex() for env in expected]
        assert summary["filter"] == "topics" and summary["page_sizes"] == [5, 2]
        assert summary["ended_by"] == "completion" and summary["next_cursor"] == ""
        assert {ev["error"] for ev in e.select("peer-dropped")} <= {"client quitting"}
