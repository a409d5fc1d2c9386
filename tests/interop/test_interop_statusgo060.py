"""Interop over waku/1 with a real status-go v0.60.0 node (tools/interop/statuspeer060, docs/interop.md):
the edge peer and status-go, in both directions.

status-go v0.60.0 registers waku/0 and waku/1; against our edge peer (waku/1, waku/0, shh/6) devp2p runs
waku/1 — asserted on both sides. Everything on the status-go side is status-go's code: its go-ethereum fork's
RLPx, the ``waku`` package with ``waku/v1`` (Status and Status Update with integer option keys, topic
interest, bloom mode, confirmations), its mailserver client forms and its parse of our 0x7d.

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
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from tests.e2e.e2e_rlpx_support import Mesh, archived, eventually, mesh_fixture
from tests.interop.peers_support import (
    DEFAULT_POW,
    MS_PASSWORD,
    PASSWORD,
    STATUSPEER060,
    channel_posts,
    edge_view,
    go_peer,
    posted_envelopes,
    topic,
)
from tests.interop.statusgo060_support import (
    ARCHIVE_TIMEOUT_S,
    COUNT,
    INT_KEYS,
    LIMIT,
    NO_PEERS,
    POW_0_2,
    POW_0_4,
    PUBLISHED,
    TOPIC_BLOOM,
    TOPIC_BOTH_WAYS,
    TOPIC_HISTORY,
    TOPIC_SUBSCRIBED,
    assert_request_forms,
    assert_status_we_sent,
    assert_waku1_session,
    batches,
    envelope_event,
    in_order,
    next_update,
    page_through,
    publish,
    received,
    sealed,
    sealed_below,
    they_confirmed,
    view_until,
    we_confirmed,
)
from wakucodec import rlp, secp
from wakucodec.bloom import topic_to_bloom
from wakucodec.pow import calculate_pow

# As test_interop_statusgo: the suite's 120 s per test, for the test bodies only.
pytestmark = pytest.mark.timeout(120, func_only=True)


@pytest.fixture(scope="module")
def mesh060(tmp_path_factory: pytest.TempPathFactory, interop_peers: None) -> Iterator[Mesh]:
    """archive + ingest + history + one edge peer that answers Messages with confirmations."""
    env = {"EDGE_MAILSERVER_PASSWORDS": MS_PASSWORD, "EDGE_CONFIRMATIONS": "true"}
    yield from mesh_fixture(tmp_path_factory.mktemp("interop-mesh060"), replicas=1, edge_env=env)


@pytest.fixture
def status_bin(interop_peers: None) -> Path:
    return STATUSPEER060


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
        weak = sealed_below("too weak", TOPIC_BOTH_WAYS, 0, DEFAULT_POW, signer)
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

        # 3. A higher PoW requirement (key 0 alone): an envelope that passed 0.2 but not 0.4 is held back, one
        #    sealed to 0.4 goes.
        low = sealed_below("low PoW", TOPIC_BLOOM, DEFAULT_POW, 0.4, signer)
        high = sealed("high PoW", TOPIC_BLOOM, 0.4, signer)
        mark = len(c.events)
        c.command("set-pow 0.4")
        update = next_update(c, mark)
        assert update["keys"] == [INT_KEYS["0"]] and update["options"]["0"] == POW_0_4
        view_until(channel, c, "the new PoW", lambda v: v.pow_requirement == 0.4)
        assert publish(stub, [low, high]) == [NO_PEERS, PUBLISHED]
        received(c, high)

        # 4. A light-node flag (key 2 alone): recorded, and the options merge — the bloom and PoW stay.
        mark = len(c.events)
        assert c.command("light-update true")["sessions"] == 1
        update = next_update(c, mark)
        assert update["keys"] == [INT_KEYS["2"]] and update["options"] == {"2": "01"}
        view_until(channel, c, "a light node", lambda v: v.light_node)
        view = edge_view(channel, c)
        assert view.bloom == bloom and view.pow_requirement == 0.4 and view.confirmations_enabled
        last = sealed("to a light node", TOPIC_BLOOM, 0.4, signer)
        assert publish(stub, [last]) == [PUBLISHED]  # light nodes still receive
        received(c, last)

        arrived = {e["hash"] for e in c.select("envelope", dir="in", code="messages")}
        assert not {weak.hash.hex(), low.hash.hex(), outside.hash.hex()} & arrived
        for batch in batches(c, "in", [early, in_bloom, high, last]):  # status-go is done writing to us
            they_confirmed(c, batch)
        assert c.select("peer-dropped") == []
        stub.RemovePeer(edgepeer_pb2.RemovePeerRequest(enode=c.enode), timeout=10)
        assert c.wait_event(lambda e: e["event"] == "peer-dropped")["error"] == "disconnect requested"
