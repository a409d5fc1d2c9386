"""Interop over waku/1 with a real status-go v0.60.0 node (tools/interop/statuspeer060, docs/interop.md).

status-go v0.60.0 registers waku/0 and waku/1; against our edge peer (waku/1, waku/0, shh/6) devp2p runs
waku/1 — asserted on both sides. Everything on the status-go side is status-go's code: its go-ethereum fork's
RLPx, the ``waku`` package with ``waku/v1`` (Status and Status Update with integer option keys, topic
interest, bloom mode, confirmations), its mailserver client forms and its parse of our 0x7d, and its
mailserver (LevelDB).

The edge peer of this module answers Messages with confirmations (``EDGE_CONFIRMATIONS=true``), so the
Message Response and Batch Ack are checked in both directions: status-go raises its own "batch acknowledged"
events for our answers, and we keep the session when it answers ours.

1. status-go dials us: waku/1 both ways, our Status as status-go decodes it; its envelopes (PoW 0.2) archived
   bit-exact and confirmed; a fresh *light* status-go node pages through them with cursors in every request
   form v0.60.0 sends (envelope-wrapped symmetric, MessagesRequest by bloom, by topics); the envelope
   encrypted to our node key gets the refusal status-go's own waku mailserver gives it.
2. We dial status-go: envelopes both ways with PoW (one below its 0.2 is held back); its Status Updates —
   topic interest grown by a new filter, a switch to a bloom, a raised PoW, a light-node flag — each change
   what our relay sends it, and the options merge (a later update keeps the earlier ones).
3. Our client library over waku/1 against status-go v0.60.0's mailserver (confirmations on): status-go's
   Message Response for our post; both request forms page through its archive bit-exact; a request by topics
   alone ("bloom filter is empty") and one encrypted to its node key ("failed to decrypt p2p request") are
   refused there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from mailmeshcli.compose import Encryption, compose_envelope
from tests.e2e.e2e_rlpx_support import Mesh, archived, eventually, mesh_fixture
from tests.interop.peers_support import (
    DEFAULT_POW,
    MS_PASSWORD,
    PASSWORD,
    STATUSPEER060,
    TOPICS,
    Event,
    GoPeer,
    channel_posts,
    edge_view,
    go_peer,
    posted_envelopes,
    run,
    topic,
)
from wakucodec import rlp, secp
from wakucodec.bloom import topic_to_bloom
from wakucodec.envelope import Envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.keccak import keccak256
from wakucodec.pow import calculate_pow
from wakucodec.requestdialects import decode_plain
from wakucodec.requests import DecodedRequest, RejectedRequest, decode_p2p_request
from wakucodec.symmetric import key_from_password
from wakunode.client import WakuClient
from wakunode.errors import RequestFailed

# As test_interop_statusgo: the suite's 120 s per test, for the test bodies only.
pytestmark = pytest.mark.timeout(120, func_only=True)
COUNT = 12
LIMIT = 5
ARCHIVE_TIMEOUT_S = 30.0
TOPIC_HISTORY = TOPICS["status060-history"]
TOPIC_BOTH_WAYS = TOPICS["status060-both-ways"]
TOPIC_SUBSCRIBED = TOPICS["status060-subscribed"]
TOPIC_BLOOM = TOPICS["status060-bloom"]
TOPIC_MS = TOPICS["status060-mailserver"]
#: waku/1 option values as raw RLP (hex), as the tap prints them.
POW_0_000002 = "883ec0c6f7a0b5ed8d"  # RLP(uint64 bits of 0.000002): EDGE_MIN_POW
POW_0_2 = "883fc999999999999a"  # RLP(uint64 bits of 0.2): status-go's DefaultMinimumPoW
FULL_BLOOM = "b840" + "ff" * 64
NO_LIMITS = "c3808080"  # RateLimits{0, 0, 0}
#: The waku/1 option keys as status-go writes them: RLP integers 0..6 (0 is the empty string 0x80).
INT_KEYS = {"0": "80", "1": "01", "2": "02", "3": "03", "4": "04", "5": "05", "6": "06"}
PUBLISHED = edgepeer_pb2.PUBLISH_STATUS_PUBLISHED
NO_PEERS = edgepeer_pb2.PUBLISH_STATUS_NO_PEERS


@pytest.fixture(scope="module")
def mesh060(tmp_path_factory: pytest.TempPathFactory, interop_peers: None) -> Iterator[Mesh]:
    """archive + ingest + history + one edge peer that answers Messages with confirmations."""
    env = {"EDGE_MAILSERVER_PASSWORDS": MS_PASSWORD, "EDGE_CONFIRMATIONS": "true"}
    yield from mesh_fixture(tmp_path_factory.mktemp("interop-mesh060"), replicas=1, edge_env=env)


@pytest.fixture
def status_bin(interop_peers: None) -> Path:
    return STATUSPEER060


def in_order(envelopes: list[Envelope]) -> list[Envelope]:
    """The mailserver order: (sent, hash) ascending (status-go's LevelDB key; our history's order)."""
    return sorted(envelopes, key=lambda e: (e.sent, e.hash))


def assert_waku1_session(peer: GoPeer) -> None:
    """devp2p ran waku/1 (status-go offers waku/0 and waku/1, we offer waku/1 first)."""
    session = peer.select("session")[0]
    assert "waku/1" in session["caps"] and "waku/0" in session["caps"]
    assert session["protocol"] == "waku/1"
    assert peer.started["caps"] == ["waku/0", "waku/1"]


def assert_status_we_sent(peer: GoPeer) -> None:
    """Our waku/1 Status as status-go received it: the bare option list, integer keys in ascending order
    (0, 1, 2, 3, 4, 6: no topic interest), our PoW, a full bloom, confirmations on, zero rate limits."""
    status = peer.wait_event(lambda e: e["event"] == "status" and e["dir"] == "in")
    assert status["protocol"] == "waku/1" and "version" not in status  # no [version, options] wrapper
    assert status["keys"] == [INT_KEYS[k] for k in ("0", "1", "2", "3", "4", "6")]
    assert status["options"] == {
        "0": POW_0_000002,
        "1": FULL_BLOOM,
        "2": "80",  # not a light node
        "3": "01",  # EDGE_CONFIRMATIONS=true
        "4": NO_LIMITS,
        "6": NO_LIMITS,
    }


def batches(peer: GoPeer, direction: str, envelopes: list[Envelope]) -> list[str]:
    """The Messages packets (by batch hash: keccak256 of the payload) that carried ``envelopes`` in
    ``direction``, in order; waits for each (the tap prints a packet written once it is written)."""

    def carrying(h: str) -> Callable[[Event], bool]:
        return lambda e: e["event"] == "batch" and e["dir"] == direction and h in e["envelopes"]

    out: list[str] = []
    for env in envelopes:
        batch = str(peer.wait_event(carrying(env.hash.hex()))["hash"])
        out += [] if batch in out else [batch]
    return out


def confirmation(kind: str, batch: str) -> Callable[[Event], bool]:
    """Matches the tap's ``message-response`` or ``batch-ack`` line for ``batch``."""
    return lambda e: e["event"] == kind and e.get("batch") == batch


def envelope_event(kind: str, **fields: object) -> Callable[[Event], bool]:
    """Matches status-go's envelope event ``kind`` (``waku/common/events.go``) with these fields."""
    return lambda e: (
        e["event"] == "envelope-event" and e["type"] == kind and all(e.get(k) == v for k, v in fields.items())
    )


def we_confirmed(peer: GoPeer, batch: str) -> None:
    """status-go got our Message Response (version 1, no errors) and Batch Ack for its packet ``batch`` and
    raised its own "batch acknowledged" event for each (``waku/v1/peer.go`` handleMessageResponseCode: with
    the error list; handleBatchAcknowledgeCode: without)."""
    response = peer.wait_event(confirmation("message-response", batch))
    assert response["dir"] == "in" and response["version"] == 1 and response["errors"] == 0
    assert peer.wait_event(confirmation("batch-ack", batch))["dir"] == "in"
    acknowledged = envelope_event("batch.acknowledged", batch=batch)
    assert peer.wait_event(lambda e: acknowledged(e) and e.get("errors") == [])  # from the Message Response
    assert peer.wait_event(lambda e: acknowledged(e) and "errors" not in e)  # from the Batch Ack


def they_confirmed(peer: GoPeer, batch: str) -> None:
    """status-go answered our Messages packet ``batch`` with a Message Response without errors, then a
    Batch Ack, both written (``waku/v1/peer.go`` sendConfirmation)."""
    response = peer.wait_event(confirmation("message-response", batch))
    assert response["dir"] == "out" and response["version"] == 1 and response["errors"] == 0
    assert peer.wait_event(confirmation("batch-ack", batch))["dir"] == "out"


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
        assert len(bytes.fromhex(cursor)) == 36
        assert pages < 10


def first_requests(peer: GoPeer) -> dict[str, dict[str, object]]:
    """The ``done`` line of the first request of each kind the peer sent."""
    first: dict[str, dict[str, object]] = {}
    for done in peer.select("done"):
        kind = str(done["cmd"]).split()[0]
        if kind.startswith("request"):
            first.setdefault(kind, done)
    return first


def assert_request_forms(peer: GoPeer, lower: int, upper: int) -> None:
    """What each request command put on the wire (its first page), decoded by our codec: the wakuext envelope
    opens with the mailserver key, the asymmetric one does not; the transport's
    MessagesRequest has a UUID as 32 hex characters for ID and the zero topic's bloom bit, no topics; the
    by-topics one has the topic and no bloom."""
    first = first_requests(peer)
    sent = [bytes.fromhex(e["raw"]) for e in peer.select("p2p-request", dir="out")]
    by_hash = {keccak256(raw).hex(): raw for raw in sent}  # an envelope request's ID is its envelope hash
    tpc = topic(TOPIC_HISTORY)

    def decode(raw: bytes) -> DecodedRequest:
        keys = [key_from_password(MS_PASSWORD)]
        return decode_p2p_request(raw, symmetric_keys=keys, private_key=None, min_pow=0, now=int(time.time()))

    decoded = decode(by_hash[str(first["request"]["request"])])
    assert decoded.dialect is Dialect.STATUS_ENVELOPE and decoded.request.batch
    assert decoded.request.bloom == topic_to_bloom(tpc) and decoded.request.topics == ()
    with pytest.raises(RejectedRequest, match="failed to decrypt"):
        decode(by_hash[str(first["request-asym"]["request"])])
    for kind in ("request-plain", "request-topics"):
        raw = bytes.fromhex(str(first[kind]["payload"]))
        assert raw in sent
        req, raw_id = decode_plain(raw)
        assert len(raw_id) == 32 and len(bytes.fromhex(raw_id.decode("ascii"))) == 16
        assert (req.lower, req.upper, req.limit, req.cursor) == (lower, upper, LIMIT, b"")
        if kind == "request-plain":
            with_zero = bytes(
                x | y for x, y in zip(topic_to_bloom(tpc), topic_to_bloom(bytes(4)), strict=True)
            )
            assert req.topics == () and req.bloom == with_zero
        else:
            assert req.topics == (tpc,) and req.bloom is None


def test_statusgo060_dials_us_over_waku1_is_confirmed_and_pages_through_history(
    mesh060: Mesh, status_bin: Path, tmp_path: Path
) -> None:
    edge = mesh060.edges[0]
    history = mesh060.get("history").address
    args = ["-dial", edge.enode, "-topic", TOPIC_HISTORY, "-password", PASSWORD, "-payload", "from v0.60 A"]
    with (
        go_peer(status_bin, args, tmp_path / "status060-a.log") as a,
        grpc.insecure_channel(edge.address) as channel,
    ):
        a.command("wait-peer 20")
        assert a.select("session")[0]["inbound"] is False
        assert_waku1_session(a)
        assert_status_we_sent(a)
        # status-go's waku/1 Status, on its side of the wire and as we decoded it.
        theirs = a.wait_event(lambda e: e["event"] == "status" and e["dir"] == "out")
        assert theirs["keys"] == [INT_KEYS[k] for k in ("0", "2", "3", "4", "5", "6")]  # no bloom (key 1)
        assert theirs["options"]["0"] == POW_0_2 and theirs["options"]["5"] == "c584" + TOPIC_HISTORY[2:]
        view = edge_view(channel, a)
        assert view.capability == "waku/1" and view.direction == edgepeer_pb2.PEER_DIRECTION_INBOUND
        assert view.client_id.startswith("Statusd/v0.60.0/") and view.snappy
        assert view.pow_requirement == DEFAULT_POW and view.topic_interest_count == 1 and view.bloom == b""
        assert not view.confirmations_enabled and not view.light_node

        a.command(f"post {COUNT}")
        sent = posted_envelopes(a)
        assert all(calculate_pow(e) >= DEFAULT_POW for e in sent)
        eventually(lambda: archived(history, [e.hash for e in sent]) == COUNT, "archived", ARCHIVE_TIMEOUT_S)
        assert {e["raw"] for e in a.select("envelope", dir="out", code="messages")} == {
            e.raw.hex() for e in sent
        }
        # Every Messages packet it sent was confirmed by us, and status-go tagged its "sent" events with the
        # batch hash because our Status announced confirmations.
        for batch in batches(a, "out", sent):
            we_confirmed(a, batch)
        for env in sent:
            a.wait_event(
                envelope_event("envelope.sent", hash=env.hash.hex(), batch=batches(a, "out", [env])[0])
            )
        assert a.select("peer-dropped") == []

    expected = [e.hash.hex() for e in in_order(sent)]
    raw = {e.hash.hex(): e.raw.hex() for e in sent}
    lower, upper = min(e.sent for e in sent), max(e.sent for e in sent)
    # A light node, as the Status app runs on phones: it announces it in its handshake (key 2).
    args = ["-dial", edge.enode, "-topic", TOPIC_HISTORY, "-password", PASSWORD, "-light"]
    args += ["-mailserver-password", MS_PASSWORD]
    forms = ("request", "request-plain", "request-topics")
    with (
        go_peer(status_bin, args, tmp_path / "status060-b.log") as b,
        grpc.insecure_channel(edge.address) as channel,
    ):
        b.command("wait-peer 20")
        assert_waku1_session(b)
        assert b.wait_event(lambda e: e["event"] == "status" and e["dir"] == "out")["options"]["2"] == "01"
        view = edge_view(channel, b)
        assert view.capability == "waku/1" and view.light_node
        # 12 envelopes, limit 5: pages of 5, 5, 2 in every form (a cursor only while more remain).
        for command in forms:
            got, pages = page_through(b, command, lower, upper, TOPIC_HISTORY)
            assert got == expected, command
            assert pages == 3, command
        # wakuext without a SymKeyID encrypts to the mailserver's node key. status-go v0.60.0's own waku
        # mailserver opens requests only with its password's key (WakuMailServer.Init sets no AsymKey) and
        # refuses it with this text; so do we.
        b.command(f"request-asym {lower} {upper} {TOPIC_HISTORY} {LIMIT}")
        refused = b.command("wait-complete 30")
        assert refused["error"] == "failed to decrypt p2p request" and refused["envelopes"] == []
        assert_request_forms(b, lower, upper)
        # Every 0x7f was a list (waku's form) of envelopes byte-identical to what status-go A sealed.
        wire = b.select("envelope", dir="in", code="p2p")
        assert len(wire) == len(forms) * COUNT and all(e["raw"] == raw[e["hash"]] for e in wire)
        # An inverted range (the envelope form: SendMessagesRequest refuses one before sending): our ERROR=
        # answer, parsed by status-go as a failed request.
        b.command(f"request {upper + 1} {lower} {TOPIC_HISTORY} {LIMIT}")
        failed = b.command("wait-complete 30")
        assert "query range is invalid: lower > upper" in failed["error"] and failed["envelopes"] == []
        b.command(f"wait-messages {COUNT} 20")  # status-go's filter opened every one
        delivered = {m["payload"] for m in b.select("message") if not m["own"]}
        assert delivered == {f"from v0.60 A #{i}" for i in range(COUNT)}
        assert b.select("peer-dropped") == []


def sealed(text: str, topic_text: str, pow_target: float, signer: bytes) -> Envelope:
    """One envelope on the shared channel, sealed by our codecs to ``pow_target`` (TTL 60 s)."""
    return compose_envelope(
        text.encode(),
        topic=topic(topic_text),
        ttl=60,
        pow_target=pow_target,
        encryption=Encryption.from_password(PASSWORD),
        signing_key=signer,
    )


def publish(stub: edgepeer_pb2_grpc.EdgePeerServiceStub, envelopes: list[Envelope]) -> list[int]:
    """Publish through the edge peer, waiting for the relay; the per-envelope statuses."""
    request = edgepeer_pb2.PublishRequest(
        envelopes=[e.raw for e in envelopes], relay_timeout=Duration(seconds=10)
    )
    return [r.status for r in stub.Publish(request, timeout=30).results]


def next_update(peer: GoPeer, start: int) -> Event:
    """The first Status Update status-go sent from event index ``start`` on."""
    return peer.wait_event(lambda e: e["event"] == "status" and e["code"] == "status-update", start=start)


def view_until(
    channel: grpc.Channel, peer: GoPeer, what: str, ok: Callable[[edgepeer_pb2.Peer], bool]
) -> None:
    """Wait until our ListPeers entry for ``peer`` satisfies ``ok`` (a Status Update is applied a moment
    after status-go wrote it; bounded poll of another process's state)."""
    eventually(lambda: ok(edge_view(channel, peer)), what, ARCHIVE_TIMEOUT_S)


def received(peer: GoPeer, envelope: Envelope) -> Event:
    """Wait until ``envelope`` arrived at status-go in a Messages packet; its tap line."""
    h = envelope.hash.hex()
    return peer.wait_event(lambda e: e["event"] == "envelope" and e["dir"] == "in" and e["hash"] == h)


def test_we_dial_statusgo060_and_our_relay_follows_its_status_updates(
    mesh060: Mesh, status_bin: Path, tmp_path: Path
) -> None:
    edge = mesh060.edges[0]
    history = mesh060.get("history").address
    args = ["-topic", TOPIC_BOTH_WAYS, "-password", PASSWORD, "-payload", "from v0.60 C", "-confirmations"]
    with (
        go_peer(status_bin, args, tmp_path / "status060-c.log") as c,
        grpc.insecure_channel(edge.address) as channel,
    ):
        stub = edgepeer_pb2_grpc.EdgePeerServiceStub(channel)
        stub.AddPeer(edgepeer_pb2.AddPeerRequest(enode=c.enode), timeout=10)  # we are the RLPx initiator
        c.command("wait-peer 20")
        assert c.select("session")[0]["inbound"] is True
        assert_waku1_session(c)
        assert_status_we_sent(c)
        view = edge_view(channel, c)
        assert view.capability == "waku/1" and view.direction == edgepeer_pb2.PEER_DIRECTION_OUTBOUND
        assert view.client_id.startswith("Statusd/v0.60.0/") and view.snappy
        assert view.pow_requirement == DEFAULT_POW and view.topic_interest_count == 1
        assert view.confirmations_enabled and not view.light_node

        # status-go → us, confirmed by us.
        c.command("post 6")
        theirs = posted_envelopes(c)
        eventually(lambda: archived(history, [e.hash for e in theirs]) == 6, "archived", ARCHIVE_TIMEOUT_S)
        for batch in batches(c, "out", theirs):
            we_confirmed(c, batch)

        # us → status-go with PoW: five at 0.25 reach its filter; one below its 0.2 is held back.
        signer = secp.generate_private_key()
        ours = channel_posts("from mailmesh", TOPIC_BOTH_WAYS, 5, signer)
        weak = sealed("too weak", TOPIC_BOTH_WAYS, 0.01, signer)
        assert calculate_pow(weak) < DEFAULT_POW
        assert publish(stub, [*ours, weak]) == [PUBLISHED] * 5 + [NO_PEERS]
        c.command("wait-messages 5 20")
        delivered = [m for m in c.select("message") if not m["own"]]
        assert {m["payload"] for m in delivered} == {f"from mailmesh #{i}" for i in range(5)}
        assert {m["src"] for m in delivered} == {secp.public_key(signer).hex()}
        wire = {e["hash"]: e["raw"] for e in c.select("envelope", dir="in", code="messages")}
        assert {e.hash.hex(): e.raw.hex() for e in ours}.items() <= wire.items()
        assert not {e.hash.hex() for e in theirs} & wire.keys()  # not echoed back
        for batch in batches(c, "in", ours):
            they_confirmed(c, batch)

        # 1. A new filter: status-go re-announces its whole topic interest (key 5 alone); the envelope we
        #    held back for want of interest goes out once the new interest admits it.
        early = sealed("before the interest", TOPIC_SUBSCRIBED, 0.25, signer)
        assert publish(stub, [early]) == [NO_PEERS]
        mark = len(c.events)
        c.command(f"subscribe {TOPIC_SUBSCRIBED}")
        update = next_update(c, mark)
        assert update["keys"] == [INT_KEYS["5"]]
        interest = rlp.decode(bytes.fromhex(update["options"]["5"]))
        assert isinstance(interest, list) and set(interest) == {
            topic(TOPIC_BOTH_WAYS),
            topic(TOPIC_SUBSCRIBED),
        }
        view_until(channel, c, "topic interest of 2", lambda v: v.topic_interest_count == 2)
        received(c, early)
        assert publish(stub, [sealed("after the interest", TOPIC_SUBSCRIBED, 0.25, signer)]) == [PUBLISHED]

        # 2. A bloom instead (key 1 alone): topic interest is dropped, the bloom rules.
        mark = len(c.events)
        bloom = topic_to_bloom(topic(TOPIC_BLOOM))
        assert c.command(f"set-bloom {TOPIC_BLOOM}")["bloom"] == bloom.hex()  # status-go's ToBloom = ours
        update = next_update(c, mark)
        assert update["keys"] == [INT_KEYS["1"]] and update["options"]["1"] == "b840" + bloom.hex()
        view_until(channel, c, "the bloom", lambda v: v.bloom == bloom and v.topic_interest_count == 0)
        in_bloom = sealed("in the bloom", TOPIC_BLOOM, 0.25, signer)
        outside = sealed("outside the bloom", TOPIC_SUBSCRIBED, 0.25, signer)
        assert publish(stub, [in_bloom, outside]) == [PUBLISHED, NO_PEERS]
        received(c, in_bloom)

        # 3. A higher PoW requirement (key 0 alone), between two envelopes' PoW: only the stronger goes.
        low = sealed("low PoW", TOPIC_BLOOM, 0.25, signer)
        high = sealed("high PoW", TOPIC_BLOOM, 2.5 * calculate_pow(low), signer)
        requirement = (calculate_pow(low) + calculate_pow(high)) / 2
        mark = len(c.events)
        c.command(f"set-pow {requirement!r}")
        update = next_update(c, mark)
        assert update["keys"] == [INT_KEYS["0"]]
        view_until(channel, c, "the new PoW", lambda v: v.pow_requirement == requirement)
        assert publish(stub, [low, high]) == [NO_PEERS, PUBLISHED]
        received(c, high)

        # 4. A light-node flag (key 2 alone): recorded, and the options merge — the bloom and PoW stay.
        mark = len(c.events)
        assert c.command("light-update true")["sessions"] == 1
        update = next_update(c, mark)
        assert update["keys"] == [INT_KEYS["2"]] and update["options"] == {"2": "01"}
        view_until(channel, c, "a light node", lambda v: v.light_node)
        view = edge_view(channel, c)
        assert view.bloom == bloom and view.pow_requirement == requirement and view.confirmations_enabled
        last = sealed("to a light node", TOPIC_BLOOM, 2.5 * calculate_pow(low), signer)
        assert publish(stub, [last]) == [PUBLISHED]  # light nodes still receive
        received(c, last)

        arrived = {e["hash"] for e in c.select("envelope", dir="in", code="messages")}
        assert not {weak.hash.hex(), low.hash.hex(), outside.hash.hex()} & arrived
        for batch in batches(c, "in", [early, in_bloom, high, last]):  # status-go is done writing to us
            they_confirmed(c, batch)
        assert c.select("peer-dropped") == []
        stub.RemovePeer(edgepeer_pb2.RemovePeerRequest(enode=c.enode), timeout=10)
        assert c.wait_event(lambda e: e["event"] == "peer-dropped")["error"] == "disconnect requested"


def test_our_client_uses_statusgo060_mailserver_over_waku1(status_bin: Path, tmp_path: Path) -> None:
    args = ["-topic", TOPIC_MS, "-password", PASSWORD, "-payload", "archived by v0.60", "-confirmations"]
    args += ["-mailserver", str(tmp_path / "status060-ms-db"), "-mailserver-password", MS_PASSWORD]
    with go_peer(status_bin, args, tmp_path / "status060-d.log") as d:
        d.command(f"post {COUNT}")  # status-go's add() archives its own envelopes in its mailserver
        theirs = posted_envelopes(d)
        signer = secp.generate_private_key()
        ours = channel_posts("posted by mailmesh", TOPIC_MS, 3, signer)
        expected = in_order([*theirs, *ours])
        lower, upper = min(e.sent for e in expected), int(time.time()) + 5
        request = HistoryRequest(lower, upper, topic_to_bloom(topic(TOPIC_MS)), (topic(TOPIC_MS),), LIMIT)

        async def fetch() -> dict[str, tuple[list[Envelope], int]]:
            results: dict[str, tuple[list[Envelope], int]] = {}
            async with WakuClient() as client:
                info = await client.connect(d.enode)  # our devp2p as initiator, status-go as recipient
                assert info.capability == "waku/1"
                posted = await client.post(info.pubkey, ours, confirm_timeout=20)
                # status-go's Message Response for our batch, decoded by our client: no envelope refused.
                assert posted.response is not None and posted.response.batch_hash == posted.batch_hash
                assert posted.response.errors == ()
                d.command("wait-messages 3 20")  # validated (PoW ≥ 0.2), archived and opened by status-go
                for dialect in (Dialect.STATUS_PLAIN, Dialect.STATUS_ENVELOPE):
                    walk = client.follow_cursor(
                        info.pubkey, request, dialect, password=MS_PASSWORD, timeout=20
                    )
                    results[dialect.value] = ([e async for e in walk], len(walk.pages))
                # Topics alone (what later clients send) are still refused by v0.60.0's server.
                topics_only = replace(request, bloom=None)
                refused = client.request_history(
                    info.pubkey, topics_only, Dialect.STATUS_PLAIN, password=MS_PASSWORD, timeout=20
                )
                with pytest.raises(RequestFailed, match="bloom filter is empty"):
                    _ = [e async for e in refused]
                # An envelope request to its node key (wakuext without SymKeyID): its server cannot open it.
                asym = client.request_history(
                    info.pubkey, request, Dialect.STATUS_ENVELOPE, public_key=info.pubkey, timeout=20
                )
                with pytest.raises(RequestFailed, match="failed to decrypt p2p request"):
                    _ = [e async for e in asym]
            return results

        results = run(fetch())
        for dialect, (got, pages) in results.items():
            assert [e.raw for e in got] == [e.raw for e in expected], dialect
            # status-go returns a cursor whenever the limit was reached (as v0.50.0): 15 envelopes at limit 5
            # take three full pages and a fourth, empty one without a cursor.
            assert pages == 4, dialect
        assert d.select("session")[0]["protocol"] == "waku/1"
        ours_status = d.wait_event(lambda e: e["event"] == "status" and e["dir"] == "in")
        # Our client's waku/1 Status: an empty topic interest (relay it nothing) instead of a bloom.
        assert ours_status["keys"] == [INT_KEYS[k] for k in ("0", "2", "3", "4", "5", "6")]
        assert ours_status["options"]["5"] == "c0"
        assert {e["error"] for e in d.select("peer-dropped")} <= {"client quitting"}
