"""The devp2p :class:`~devp2p.abc.SubProtocol` for waku/1, waku/0 and shh/6: handshake and dispatch.

One instance per capability, all sharing one :class:`~wakunode.session_host.SessionHost` (the
:class:`~wakunode.node.WakuNode` that built them; this module never imports it). Per session:

- ``on_start``: register the session and send our Status (waku/1: the options list; waku/0: ``[0, options]``;
  shh/6: ``[6, pow, bloom, light, confirmations, limits]``), and start the Status timer;
- every packet first goes through the packet/byte rate limiter (protocol-notes §4.7) and the
  max-message-size check (oversized → disconnect, §1.5);
- the first packet must be the peer's Status (anything else, an undecodable or invalid one, or none within
  ``status_timeout`` → disconnect 0x10); a later Status is ignored (§3.4);
- then: Messages → relay; Status Update (waku) → merge options, a bad one is counted and ignored (status-go
  only logs handler errors); PoW requirement / bloom exchange (shh) → apply, a bad one disconnects (geth);
  Batch Ack / Message Response → confirmation waiters; 0x7e → mailserver (if any); 0x7f / 0x7d → the P2P
  listener, from trusted peers only; unknown codes are ignored.
"""

from __future__ import annotations

import logging

from devp2p.abc import PeerAPI, SubProtocol
from wakucodec.bloom import topics_to_bloom
from wakucodec.envelope import decode_envelope
from wakucodec.errors import CodecError
from wakucodec.responses import decode_completion, decode_p2p_messages
from wakunode import constants as c
from wakunode.confirmations import MessageResponse, decode_batch_ack, decode_message_response
from wakunode.errors import BadStatus
from wakunode.peerstate import Flavor, WakuPeer
from wakunode.session_host import SessionHost
from wakunode.status_options import (
    StatusOptions,
    decode_options,
    decode_shh_bloom,
    decode_shh_pow,
    decode_shh_status,
    decode_waku0_status,
    encode_options,
    encode_shh_status,
    encode_waku0_status,
)

__all__ = ["WakuSubProtocol", "encode_status"]

log = logging.getLogger(__name__)


def encode_status(flavor: Flavor, options: StatusOptions) -> bytes:
    """Our Status payload for ``flavor``."""
    if flavor is Flavor.WAKU1:
        return encode_options(options, version=c.WAKU_V1)
    if flavor is Flavor.WAKU0:
        return encode_waku0_status(options)
    if options.topic_interest is not None:  # shh/6 has no topic interest: announce its bloom
        options = StatusOptions(
            pow_requirement=options.pow_requirement,
            bloom=topics_to_bloom(options.topic_interest),
            light_node=options.light_node,
            confirmations=options.confirmations,
            packet_rate_limits=options.packet_rate_limits,
        )
    return encode_shh_status(options)


def decode_status(flavor: Flavor, payload: bytes) -> StatusOptions:
    """The peer's Status, decoded, validated and with status-go's handshake defaults applied."""
    if flavor is Flavor.WAKU1:
        options = decode_options(payload, version=c.WAKU_V1)
    elif flavor is Flavor.WAKU0:
        options = decode_waku0_status(payload)
    else:
        options = decode_shh_status(payload)
    options = options.with_defaults()
    options.validate()
    return options


class WakuSubProtocol(SubProtocol):
    """waku/1, waku/0 or shh/6 for every peer of one node."""

    length = c.NUMBER_OF_MESSAGE_CODES

    def __init__(self, host: SessionHost, flavor: Flavor) -> None:
        #: The node that owns the sessions (the only way this class reaches it).
        self.host = host
        self.flavor = flavor
        self.name, self.version = flavor.value

    async def on_start(self, peer: PeerAPI) -> None:
        """Register the session, send our Status, arm the Status timer."""
        session = self.host.open_session(peer, self, self.flavor)
        await peer.send(self, c.STATUS_CODE, encode_status(self.flavor, self.host.status_options))
        self.host.arm_status_timer(session)

    async def on_stop(self, peer: PeerAPI, reason: int) -> None:
        """Drop the session's state."""
        self.host.close_session(peer, self)

    async def handle(self, peer: PeerAPI, code: int, payload: bytes) -> None:
        """Check limits, then handshake or dispatch (module docstring)."""
        host = self.host
        session = host.session_for(peer, self)
        if session is None:
            return
        host.check_packet(session, payload)
        if not session.handshake.is_set():
            if code != c.STATUS_CODE:
                host.metrics.peer_disconnects["bad_status"] += 1
                raise BadStatus(f"sent packet {code:#x} before status packet")
            self._on_status(session, payload)
            return
        if code == c.MESSAGES_CODE:
            await host.relay_messages(session, payload)
        elif code == c.STATUS_CODE:
            host.metrics.ignored_packets["second_status"] += 1
        elif code == c.STATUS_UPDATE_CODE and not self.flavor.is_shh:
            self._on_status_update(session, payload)
        elif code in (c.POW_REQUIREMENT_CODE, c.BLOOM_EXCHANGE_CODE) and self.flavor.is_shh:
            self._on_shh_setting(session, code, payload)
        elif code in (c.BATCH_ACK_CODE, c.MESSAGE_RESPONSE_CODE):
            self._on_confirmation(code, payload)
        elif code == c.P2P_REQUEST_CODE:
            await host.serve_history_request(session, payload)
        elif code in (c.P2P_MESSAGE_CODE, c.P2P_REQUEST_COMPLETE_CODE):
            self._on_p2p(session, code, payload)
        else:
            host.metrics.ignored_packets["unknown_code"] += 1

    # --- handlers ------------------------------------------------------------------------------------------

    def _on_status(self, session: WakuPeer, payload: bytes) -> None:
        try:
            options = decode_status(self.flavor, payload)
        except BadStatus:
            self.host.metrics.peer_disconnects["bad_status"] += 1
            raise
        session.apply_options(options)
        self.host.complete_handshake(session)

    def _on_status_update(self, session: WakuPeer, payload: bytes) -> None:
        try:
            update = decode_options(payload, version=self.version)
            merged = (session.options or StatusOptions().with_defaults()).merged(update)
            merged.validate()
        except BadStatus as err:
            self.host.metrics.envelopes_rejected_total["invalid_settings_changed"] += 1
            log.info("bad status update from %s: %s", session.peer.client_id, err)
            return
        session.apply_options(merged)

    def _on_shh_setting(self, session: WakuPeer, code: int, payload: bytes) -> None:
        current = session.options or StatusOptions().with_defaults()
        try:
            if code == c.POW_REQUIREMENT_CODE:
                update = StatusOptions(pow_requirement=decode_shh_pow(payload))
            else:
                update = StatusOptions(bloom=decode_shh_bloom(payload))
        except BadStatus:
            self.host.metrics.peer_disconnects["protocol"] += 1
            raise  # geth returns an error from the message loop: disconnect
        session.apply_options(current.merged(update))

    def _on_confirmation(self, code: int, payload: bytes) -> None:
        try:
            if code == c.BATCH_ACK_CODE:  # a whole-batch ack (6/WAKU1 §Packet usage)
                self.host.resolve_confirmation(MessageResponse(decode_batch_ack(payload), ()))
            else:
                response = decode_message_response(payload)
                if response is not None:
                    self.host.resolve_confirmation(response)
        except CodecError:
            self.host.metrics.envelopes_rejected_total["invalid_confirmation"] += 1

    def _on_p2p(self, session: WakuPeer, code: int, payload: bytes) -> None:
        host = self.host
        if not host.is_trusted(session.pubkey):  # §3.7: only from trusted peers
            host.metrics.envelopes_rejected_total["untrusted_p2p"] += 1
            return
        listener = host.p2p_listener
        try:
            if code == c.P2P_REQUEST_COMPLETE_CODE:
                completion = decode_completion(payload)
                if listener is not None:
                    listener.on_p2p_complete(session.pubkey, completion)
                return
            raws, form = decode_p2p_messages(payload, max_size=host.max_message_size)
        except CodecError:
            host.metrics.envelopes_rejected_total["invalid_p2p"] += 1
            return
        host.metrics.p2p_messages_received_total[form.value] += 1
        envelopes = []
        for raw in raws:
            try:
                envelopes.append(decode_envelope(raw))
            except CodecError:
                host.metrics.envelopes_rejected_total["invalid_p2p"] += 1
        if listener is None:
            host.metrics.ignored_packets["unsolicited_p2p"] += 1
        else:
            listener.on_p2p_envelopes(session.pubkey, envelopes)
