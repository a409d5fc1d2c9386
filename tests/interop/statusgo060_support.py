"""Shared by the status-go v0.60.0 interop tests (test_interop_statusgo060*.py): the waku/1 wire values as
status-go's tap prints them, and helpers that wait on its JSON lines (peers_support.GoPeer) for confirmations,
Status Updates, history pages and request forms, or drive our edge peer (Publish, ListPeers).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from mailmeshcli.compose import Encryption, compose_envelope
from tests.e2e.e2e_rlpx_support import eventually
from tests.interop.peers_support import (
    MS_PASSWORD,
    PASSWORD,
    TOPICS,
    Event,
    GoPeer,
    edge_view,
    topic,
)
from wakucodec.bloom import topic_to_bloom
from wakucodec.envelope import Envelope
from wakucodec.historyrequest import Dialect
from wakucodec.keccak import keccak256
from wakucodec.pow import calculate_pow, rlp_without_nonce
from wakucodec.requestdialects import decode_plain
from wakucodec.requests import DecodedRequest, RejectedRequest, decode_p2p_request
from wakucodec.symmetric import key_from_password

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
POW_0_4 = "883fd999999999999a"  # RLP(uint64 bits of 0.4)
FULL_BLOOM = "b840" + "ff" * 64
NO_LIMITS = "c3808080"  # RateLimits{0, 0, 0}
#: The waku/1 option keys as status-go writes them: RLP integers 0..6 (0 is the empty string 0x80).
INT_KEYS = {"0": "80", "1": "01", "2": "02", "3": "03", "4": "04", "5": "05", "6": "06"}
PUBLISHED = edgepeer_pb2.PUBLISH_STATUS_PUBLISHED
NO_PEERS = edgepeer_pb2.PUBLISH_STATUS_NO_PEERS


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


def sealed(text: str, topic_text: str, pow_target: float, signer: bytes) -> Envelope:
    """One envelope on the shared channel, sealed by our codecs to at least ``pow_target`` (TTL 60 s)."""
    return compose_envelope(
        text.encode(),
        topic=topic(topic_text),
        ttl=60,
        pow_target=pow_target,
        encryption=Encryption.from_password(PASSWORD),
        signing_key=signer,
    )


def sealed_below(text: str, topic_text: str, lower: float, upper: float, signer: bytes) -> Envelope:
    """One envelope whose PoW is in ``[lower, upper)``: the first nonce from 0 that lands there. (Sealing to a
    target stops at the first nonce that reaches it, which may exceed it by any power of two — by luck, as
    often as not; a test that needs a PoW *below* a bound has to pick the nonce.)"""
    env = sealed(text, topic_text, 0, signer)  # nonce 0, unsealed
    short = rlp_without_nonce(env)  # what the PoW hashes with the nonce (protocol-notes §1.3)
    divisor = len(short) * env.ttl
    for nonce in range(1 << 24):
        lz = 256 - int.from_bytes(keccak256(short + nonce.to_bytes(8, "big")), "big").bit_length()
        if lower <= 2.0**lz / divisor < upper:
            found = env.with_nonce(nonce)
            assert lower <= calculate_pow(found) < upper  # the codec's own formula agrees
            return found
    raise AssertionError(f"no nonce gives a PoW in [{lower}, {upper})")


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
