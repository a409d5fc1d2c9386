"""Interop with a real go-ethereum v1.9.20 Whisper v6 node (tools/interop/gethpeer, docs/interop.md).

The mesh runs as processes (archive on SQLite, ingest, history-query, one edge peer; tests/e2e's runner);
geth is the real thing — its p2p.Server (RLPx, EIP-8), whisperv6 (shh/6), its envelope sealing, filters and
its mailserver — driven over stdin and observed through JSON lines, including a wire tap of every shh/6
packet it reads or writes.

1. geth dials the edge peer (geth = RLPx initiator), posts envelopes sealed to its default PoW 0.2; they are
   archived bit-exact. A second, fresh geth node asks our mailserver for them exactly as cmd/wnode does
   (geth-binary request) and gets exactly those envelopes, byte for byte, in single-envelope 0x7f packets
   its own client code decodes and decrypts.
2. The edge peer dials geth (geth = RLPx recipient, added with AddPeer); envelopes flow both ways: geth's
   are archived, ours (Publish) reach geth's filter — and one below geth's advertised PoW 0.2 is not
   forwarded to it (geth would drop the connection).
3. Our client library dials geth's own mailserver (whisper/mailserver, LevelDB): posts to it and fetches its
   archive in the geth-binary dialect, bit-exact. geth never sends a 0x7d, so the pages end by idleness
   (the client's default for that dialect); so does ``mailmesh history --dialect geth-binary``.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from mailmeshcli.cli import main as mailmesh_cli
from mailmeshcli.compose import Encryption, compose_envelope
from tests.e2e.e2e_rlpx_support import Mesh, archived, eventually
from tests.interop.peers_support import (
    DEFAULT_POW,
    GETHPEER,
    MS_PASSWORD,
    PASSWORD,
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
from wakucodec.bloom import bloom_match, topic_to_bloom
from wakucodec.envelope import Envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.payload import open_symmetric
from wakucodec.pow import calculate_pow
from wakucodec.symmetric import key_from_password
from wakunode.client import GETH_IDLE_END_S, HistoryPage, PageEnd, WakuClient

GETH_POW = DEFAULT_POW  # geth's DefaultMinimumPoW: what it advertises, requires, and seals to by default
# The suite's 120 s per test, for the test bodies only: the first test's set-up builds the Go peers (minutes
# on a fresh machine; bounded by peers_support.BUILD_TIMEOUT_S) and starts the mesh (bounded by its deadline).
pytestmark = pytest.mark.timeout(120, func_only=True)
COUNT = 20
ARCHIVE_TIMEOUT_S = 30.0
TOPIC_HISTORY = TOPICS["geth-history"]
TOPIC_BOTH_WAYS = TOPICS["geth-both-ways"]
TOPIC_GETH_MS = TOPICS["geth-mailserver"]
TOPIC_MARKER = TOPICS["geth-marker"]


@pytest.fixture
def geth_bin(interop_peers: None) -> Path:
    return GETHPEER


def test_scenario_topics_have_disjoint_blooms() -> None:
    for a in map(topic, TOPICS.values()):
        for b in map(topic, TOPICS.values()):
            assert a == b or not bloom_match(topic_to_bloom(a), topic_to_bloom(b)), (a.hex(), b.hex())


def assert_status_we_sent(peer: GoPeer) -> None:
    """Our shh/6 Status as geth decoded it: version 6, a PoW requirement geth's envelopes meet, full bloom."""
    status = peer.wait_event(lambda e: e["event"] == "status" and e["dir"] == "in")
    assert status["version"] == 6
    assert status["pow"] == pytest.approx(0.000002)  # EDGE_MIN_POW, well below geth's 0.2
    assert status["bloom"] == "full" and status["light"] is False
    assert status["items"] == 6  # [6, pow, bloom, light, confirmations, rate limits] (status-go's extension)


def test_geth_dials_us_posts_and_fetches_its_history(mesh: Mesh, geth_bin: Path, tmp_path: Path) -> None:
    edge = mesh.edges[0]
    history = mesh.get("history").address
    started = time.monotonic()

    quitting = edge.metric("devp2p_disconnects_received_total", reason="quitting")

    # --- geth A: RLPx initiator towards our edge peer; posts envelopes sealed by geth (PoW 0.2, signed).
    args = ["-dial", edge.enode, "-topic", TOPIC_HISTORY, "-password", PASSWORD, "-payload", "from geth A"]
    with go_peer(geth_bin, args, tmp_path / "geth-a.log") as a:
        a.command("wait-peer 20")
        session = a.select("session")[0]
        assert session["inbound"] is False and session["caps"] == ["shh/6", "waku/0", "waku/1"]
        assert session["name"].startswith("mailmesh/")
        assert_status_we_sent(a)
        a.command(f"post {COUNT}")
        sent = posted_envelopes(a)
        assert len(sent) == COUNT and all(calculate_pow(e) >= GETH_POW for e in sent)  # our PoW = geth's
        hashes = [e.hash for e in sent]
        eventually(lambda: archived(history, hashes) == COUNT, "geth's envelopes archived", ARCHIVE_TIMEOUT_S)
        # geth relayed them in Messages packets, exactly the bytes it sealed; nothing made it drop us.
        assert {e["raw"] for e in a.select("envelope", dir="out", code="messages")} == {
            e.raw.hex() for e in sent
        }
        assert a.select("peer-dropped") == []
    # geth said goodbye with Disconnect 0x08 (client quitting), and we decoded it as such.
    eventually(
        lambda: edge.metric("devp2p_disconnects_received_total", reason="quitting") == quitting + 1,
        "geth's Disconnect(quitting) counted",
    )

    # Our codecs open geth's envelopes: the payload, and the signer is geth A's node key.
    key = key_from_password(PASSWORD)
    for i, env in enumerate(sorted(sent, key=lambda e: e.hash)):
        message = open_symmetric(env.data, key)
        assert message.payload.startswith(b"from geth A #") and message.signer == a.pubkey, i

    # --- geth B: a fresh node asks our mailserver (cmd/wnode's request: geth-binary, signed, PoW 0.2).
    # Its bloom is all zeros, so our relay must not push the (still cached) envelopes to it over 0x01:
    # everything it gets comes from the mailserver.
    lower, upper = min(e.sent for e in sent), max(e.sent for e in sent)
    args = ["-dial", edge.enode, "-topic", TOPIC_HISTORY, "-password", PASSWORD, "-bloom", "none"]
    args += ["-mailserver-password", MS_PASSWORD]
    with go_peer(geth_bin, args, tmp_path / "geth-b.log") as b:
        b.command("wait-peer 20")
        request = b.command(f"request {lower} {upper} {TOPIC_HISTORY}")
        assert request["pow"] >= GETH_POW
        b.command("wait-complete 30")  # our 0x7d (geth itself ignores code 125; the tap sees it)
        got = b.select("envelope", dir="in", code="p2p")
        assert b.select("envelope", dir="in", code="p2p-list") == []  # geth decodes one envelope per 0x7f
        in_order = sorted(sent, key=lambda e: (e.sent, e.hash))
        # exactly those, bit-exact, oldest first
        assert [e["raw"] for e in got] == [e.raw.hex() for e in in_order]
        b.command(f"wait-messages {COUNT} 20")  # geth's filter (AllowP2P) decrypted every one of them
        delivered = [m for m in b.select("message") if not m["own"]]
        assert {m["hash"] for m in delivered} == {h.hex() for h in hashes}
        assert {m["payload"] for m in delivered} == {f"from geth A #{i}" for i in range(COUNT)}
        assert {m["src"] for m in delivered} == {a.pubkey.hex()}
        assert b.select("envelope", dir="in", code="messages") == []  # zero bloom honoured by our relay
        complete = b.select("p2p-complete", dir="in")
        assert len(complete) == 1
        payload = bytes.fromhex(complete[0]["payload"])
        # status-go's completion: RLP string of requestID(32) ‖ lastEnvelopeHash(32) [‖ cursor]; the
        # request ID of an envelope request is the request envelope's hash.
        assert payload[:2] == b"\xb8\x40" and payload[2:34].hex() == request["hash"]
        assert payload[34:66] == in_order[-1].hash
        # wnode's "everything": lower 0, upper 0 → 0xFFFFFFFF (status-go's LevelDB range would wrap to empty).
        start = len(b.events)
        b.command(f"request 0 0 {TOPIC_HISTORY}")
        b.wait_event(lambda e: e["event"] == "p2p-complete", start=start)
        again = [e["raw"] for e in b.events[start:] if e["event"] == "envelope" and e.get("code") == "p2p"]
        assert again == [e.raw.hex() for e in in_order]
        assert b.select("peer-dropped") == []
    assert time.monotonic() - started < 60


def test_we_dial_geth_and_envelopes_flow_both_ways(mesh: Mesh, geth_bin: Path, tmp_path: Path) -> None:
    edge = mesh.edges[0]
    history = mesh.get("history").address
    args = ["-topic", TOPIC_BOTH_WAYS, "-password", PASSWORD, "-payload", "from geth C"]
    with (
        go_peer(geth_bin, args, tmp_path / "geth-c.log") as c,
        grpc.insecure_channel(edge.address) as channel,
    ):
        stub = edgepeer_pb2_grpc.EdgePeerServiceStub(channel)
        stub.AddPeer(edgepeer_pb2.AddPeerRequest(enode=c.enode), timeout=10)  # we are the RLPx initiator
        c.command("wait-peer 20")
        session = c.select("session")[0]
        assert session["inbound"] is True and session["caps"] == ["shh/6", "waku/0", "waku/1"]
        assert_status_we_sent(c)
        # geth's Hello and shh/6 Status as we decoded them.
        view = edge_view(channel, c)
        assert view.capability == "shh/6" and view.direction == edgepeer_pb2.PEER_DIRECTION_OUTBOUND
        assert view.snappy and view.client_id.startswith("Geth/v1.9.20-stable/")
        assert view.pow_requirement == GETH_POW and not view.light_node
        # Quirk: geth sends an *empty* bloom in Status while its bloom was never set (Whisper.BloomFilter()
        # is nil) — "full node"; we keep it as received and relay everything to it (checked below).
        theirs = c.wait_event(lambda e: e["event"] == "status" and e["dir"] == "out")
        assert theirs["bloom"] == "" and view.bloom == b""

        # geth → us: archived bit-exact.
        c.command("post 10")
        sent = posted_envelopes(c)
        eventually(lambda: archived(history, [e.hash for e in sent]) == 10, "archived", ARCHIVE_TIMEOUT_S)

        # us → geth: sealed by our codecs to geth's PoW, encrypted with the channel key, signed.
        signer = secp.generate_private_key()
        encryption = Encryption.from_password(PASSWORD)
        ours = channel_posts("from mailmesh", TOPIC_BOTH_WAYS, 5, signer)
        # Unsealed, then the first nonce whose PoW is below geth's 0.2 but above our own 0.000002 (sealing to
        # a low target could overshoot 0.2 by luck).
        weak = compose_envelope(
            b"below geth's PoW", topic=topic(TOPIC_BOTH_WAYS), ttl=60, pow_target=0, encryption=encryption
        )
        weak = next(
            w for w in map(weak.with_nonce, range(1000)) if 0.000002 <= calculate_pow(w) < GETH_POW / 2
        )
        publish = edgepeer_pb2.PublishRequest(
            envelopes=[weak.raw, *(e.raw for e in ours)], relay_timeout=Duration(seconds=10)
        )
        reply = stub.Publish(publish, timeout=30)  # returns once every envelope reached every eligible peer
        # geth advertised PoW 0.2: the weak one has no eligible peer (sending it would get us disconnected).
        assert [r.status for r in reply.results] == [edgepeer_pb2.PUBLISH_STATUS_NO_PEERS] + [
            edgepeer_pb2.PUBLISH_STATUS_PUBLISHED
        ] * len(ours)
        assert [r.relayed_to for r in reply.results] == [0] + [1] * len(ours)
        c.command("wait-messages 5 20")
        delivered = [m for m in c.select("message") if not m["own"]]
        assert {m["payload"] for m in delivered} == {f"from mailmesh #{i}" for i in range(5)}
        assert {m["src"] for m in delivered} == {secp.public_key(signer).hex()}
        wire = {e["hash"]: e["raw"] for e in c.select("envelope", dir="in", code="messages")}
        assert {e.hash.hex(): e.raw.hex() for e in ours}.items() <= wire.items()  # bit-exact on geth's side
        assert weak.hash.hex() not in wire  # published in the same call: same or earlier relay round
        assert not {e.hash.hex() for e in sent} & wire.keys()  # geth's own envelopes are not echoed back
        assert c.select("peer-dropped") == []

        # Our Disconnect (0x00, RemovePeer) as geth decodes it.
        stub.RemovePeer(edgepeer_pb2.RemovePeerRequest(enode=c.enode), timeout=10)
        dropped = c.wait_event(lambda e: e["event"] == "peer-dropped")
        assert dropped["error"] == "disconnect requested"


def test_our_client_uses_geths_mailserver(geth_bin: Path, tmp_path: Path) -> None:
    args = ["-topic", TOPIC_GETH_MS, "-password", PASSWORD, "-payload", "archived by geth"]
    args += ["-mailserver", str(tmp_path / "geth-ms-db"), "-mailserver-password", MS_PASSWORD]
    with go_peer(geth_bin, args, tmp_path / "geth-d.log") as d:
        d.command("post 8")  # geth's add() archives its own envelopes in its mailserver
        from_geth = posted_envelopes(d)
        signer = secp.generate_private_key()
        ours = channel_posts("posted by mailmesh", TOPIC_GETH_MS, 4, signer)
        marker = compose_envelope(
            b"marker", topic=topic(TOPIC_MARKER), ttl=60, pow_target=0.25, encryption=None, signing_key=None
        )

        lower = min(e.sent for e in [*from_geth, *ours, marker]) - 1
        upper = int(time.time()) + 5

        async def fetch(
            client: WakuClient, pubkey: bytes, tpc: str
        ) -> tuple[HistoryPage, list[Envelope], float]:
            # geth's mailserver answers with 0x7f packets only, never a 0x7d: in the geth-binary dialect the
            # client ends the page once no 0x7f came for GETH_IDLE_END_S (its default there).
            page = client.request_history(
                pubkey,
                HistoryRequest(lower, upper, topic_to_bloom(topic(tpc))),
                Dialect.GETH_BINARY,
                password=MS_PASSWORD,
                pow_target=0.0,
                timeout=20,
            )
            started = time.monotonic()
            got = [e async for e in page]
            return page, got, time.monotonic() - started

        async def exchange() -> list[tuple[HistoryPage, list[Envelope], float]]:
            async with WakuClient() as client:
                info = await client.connect(d.enode)  # our devp2p as initiator, geth as recipient
                assert info.capability == "shh/6"
                await client.post(info.pubkey, [*ours, marker])
                # geth validated them (PoW ≥ 0.2), cached, archived and opened them
                d.command("wait-messages 4 20")
                # geth processes requests one at a time in its read loop: had the first page ended early,
                # the rest of its answer would show up in the second (the marker's topic).
                return [await fetch(client, info.pubkey, tpc) for tpc in (TOPIC_GETH_MS, TOPIC_MARKER)]

        (page, first, first_s), (marker_page, second, _) = run(exchange())
        expected = sorted([*from_geth, *ours], key=lambda e: (e.sent, e.hash))
        # geth's LevelDB key is sent(4) ‖ hash(32): oldest first, bit-exact (geth re-encodes; canonical RLP).
        assert [e.raw for e in first] == [e.raw for e in expected]
        assert [e.raw for e in second] == [marker.raw]  # nothing of the first answer was left over
        for done, got in ((page, first), (marker_page, second)):
            result = done.result
            assert result is not None and result.end is PageEnd.IDLE and result.completion is None
            assert result.cursor == b"" and result.last_envelope_hash == got[-1].hash
        assert GETH_IDLE_END_S - 0.01 <= first_s < 20  # ended by idleness, not by the timeout

        # The CLI the same way: exit 0, every envelope, the page ended by idleness (no --idle-end given).
        out = io.StringIO()
        argv = [
            "history", d.enode, "--dialect", "geth-binary", "--from", str(lower), "--to", str(upper),
            "--topic", TOPIC_GETH_MS, "--password", MS_PASSWORD, "--follow", "--timeout", "20",
        ]  # fmt: skip
        code = mailmesh_cli(argv, out)
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        assert code == 0, lines
        summary = lines.pop()
        assert [line["hash"] for line in lines] == ["0x" + e.hash.hex() for e in expected]
        assert summary["ended_by"] == "idle" and summary["pages"] == 1 and summary["next_cursor"] == ""
        delivered = {m["payload"] for m in d.select("message") if not m["own"]}
        assert delivered == {f"posted by mailmesh #{i}" for i in range(4)}
        # The only goodbye geth saw is our client's Disconnect(0x08) when it stopped: no protocol trouble.
        assert {e["error"] for e in d.select("peer-dropped")} <= {"client quitting"}
