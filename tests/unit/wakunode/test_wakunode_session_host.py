"""The subprotocol ↔ node seam: WakuSubProtocol driven against a recording SessionHost (no WakuNode), so
the calls it makes, and their order, are exactly the ones ``wakunode.session_host`` documents."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from devp2p.abc import PeerAPI, SubProtocol
from tests.unit.wakunode.support import FakePeer
from wakunode import constants as c
from wakunode.confirmations import (
    EnvelopeError,
    MessageResponse,
    encode_batch_ack,
    encode_message_response,
)
from wakunode.errors import OversizedPacket
from wakunode.metrics import WakuMetrics
from wakunode.peerstate import Flavor, WakuPeer
from wakunode.ports import P2PListener
from wakunode.protocol import WakuSubProtocol, encode_status
from wakunode.session_host import SessionHost
from wakunode.status_options import StatusOptions, encode_options


@dataclass
class RecordingHost:
    """A SessionHost that keeps one session per peer and records every hook called, by name."""

    calls: list[str] = field(default_factory=list)
    sessions: dict[bytes, WakuPeer] = field(default_factory=dict)
    confirmed: list[MessageResponse] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    sent_when_armed: int | None = None
    max_message_size: int = 1000
    metrics: WakuMetrics = field(default_factory=WakuMetrics)
    status_options: StatusOptions = field(default_factory=lambda: StatusOptions(pow_requirement=0.5))
    p2p_listener: P2PListener | None = None

    def is_trusted(self, pubkey: bytes) -> bool:
        self.calls.append("is_trusted")
        return False

    def open_session(self, peer: PeerAPI, protocol: SubProtocol, flavor: Flavor) -> WakuPeer:
        self.calls.append("open_session")
        self.sessions[peer.remote_id] = session = WakuPeer(peer, protocol, flavor)
        return session

    def session_for(self, peer: PeerAPI, protocol: SubProtocol) -> WakuPeer | None:
        self.calls.append("session_for")
        return self.sessions.get(peer.remote_id)

    def close_session(self, peer: PeerAPI, protocol: SubProtocol) -> None:
        self.calls.append("close_session")
        del self.sessions[peer.remote_id]

    def arm_status_timer(self, session: WakuPeer) -> None:
        self.calls.append("arm_status_timer")
        assert isinstance(session.peer, FakePeer)
        self.sent_when_armed = len(session.peer.sent)

    def check_packet(self, session: WakuPeer, payload: bytes) -> None:
        self.calls.append("check_packet")
        if len(payload) > self.max_message_size:
            raise OversizedPacket(len(payload), self.max_message_size)

    def complete_handshake(self, session: WakuPeer) -> None:
        self.calls.append("complete_handshake")
        session.handshake.set()

    async def relay_messages(self, session: WakuPeer, payload: bytes) -> None:
        self.calls.append("relay_messages")
        self.payloads.append(payload)

    async def serve_history_request(self, session: WakuPeer, payload: bytes) -> None:
        self.calls.append("serve_history_request")
        self.payloads.append(payload)

    def resolve_confirmation(self, response: MessageResponse) -> None:
        self.calls.append("resolve_confirmation")
        self.confirmed.append(response)


def subprotocol(host: RecordingHost, flavor: Flavor = Flavor.WAKU1) -> WakuSubProtocol:
    typed: SessionHost = host  # the recording host is a complete SessionHost (checked by mypy)
    return WakuSubProtocol(typed, flavor)


async def test_a_session_runs_through_the_documented_hooks_in_order() -> None:
    host, peer = RecordingHost(), FakePeer()
    proto = subprotocol(host)
    await proto.on_start(peer)
    assert host.calls == ["open_session", "arm_status_timer"]
    assert [(s.code, s.payload) for s in peer.sent] == [
        (c.STATUS_CODE, encode_status(Flavor.WAKU1, host.status_options))
    ]
    assert host.sent_when_armed == 1  # the Status timer starts once our Status is out
    host.calls.clear()
    await proto.handle(peer, c.STATUS_CODE, encode_options(StatusOptions(pow_requirement=0.2)))
    assert host.calls == ["session_for", "check_packet", "complete_handshake"]
    session = host.sessions[peer.remote_id]
    assert session.options is not None and session.options.pow_requirement == 0.2  # applied before completing
    host.calls.clear()
    await proto.handle(peer, c.MESSAGES_CODE, b"\xc0")
    await proto.handle(peer, c.P2P_REQUEST_CODE, b"\xc1\x80")
    per_packet = ["session_for", "check_packet"]
    assert host.calls == [*per_packet, "relay_messages", *per_packet, "serve_history_request"]
    assert host.payloads == [b"\xc0", b"\xc1\x80"]
    host.calls.clear()
    await proto.on_stop(peer, 0x10)
    assert host.calls == ["close_session"] and host.sessions == {}


async def test_both_confirmation_forms_resolve_through_one_hook() -> None:
    host, peer = RecordingHost(), FakePeer()
    proto = subprotocol(host)
    await proto.on_start(peer)
    await proto.handle(peer, c.STATUS_CODE, encode_options(StatusOptions()))
    error = EnvelopeError(b"\x02" * 32, 1, "too old")
    await proto.handle(peer, c.BATCH_ACK_CODE, encode_batch_ack(b"\x01" * 32))
    await proto.handle(peer, c.MESSAGE_RESPONSE_CODE, encode_message_response(b"\x03" * 32, [error]))
    assert host.confirmed == [MessageResponse(b"\x01" * 32, ()), MessageResponse(b"\x03" * 32, (error,))]


async def test_a_packet_of_an_unknown_session_reaches_no_hook_but_the_lookup() -> None:
    host, peer = RecordingHost(), FakePeer()
    await subprotocol(host).handle(peer, c.MESSAGES_CODE, b"\xc0")
    assert host.calls == ["session_for"] and host.payloads == []


async def test_the_host_check_runs_before_any_decoding_and_its_error_ends_the_session() -> None:
    host, peer = RecordingHost(max_message_size=4), FakePeer()
    proto = subprotocol(host)
    await proto.on_start(peer)
    with pytest.raises(OversizedPacket):
        await proto.handle(peer, c.STATUS_CODE, b"\xff" * 5)  # undecodable too: the size check came first
    assert host.calls[-2:] == ["session_for", "check_packet"] and host.metrics.peer_disconnects == {}


async def test_p2p_packets_ask_the_host_for_trust_first() -> None:
    host, peer = RecordingHost(), FakePeer()
    proto = subprotocol(host, Flavor.SHH6)
    await proto.on_start(peer)
    await proto.handle(peer, c.STATUS_CODE, encode_status(Flavor.SHH6, StatusOptions()))
    host.calls.clear()
    await proto.handle(peer, c.P2P_MESSAGE_CODE, b"\xc0")
    assert host.calls == ["session_for", "check_packet", "is_trusted"]
    assert host.metrics.envelopes_rejected_total == {"untrusted_p2p": 1}
