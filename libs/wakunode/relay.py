"""The relay engine: acceptance of envelopes (protocol-notes §1.5), the seen/expiry cache, and forwarding
(protocol-notes §3.8).

- :meth:`Relay.on_messages` handles a Messages (0x01) packet: decode (an undecodable packet is counted as
  ``invalid_data`` and the peer kept, as status-go's waku does), validate each envelope against *our*
  settings, cache the new ones, mark every cached one as known to the sender, hand the new ones to the
  :class:`EnvelopeSink`, then answer with Message Response + Batch Ack when confirmations are on (§3.6) —
  after the sink, as status-go archives (``Waku.add`` → ``mailServer.Archive``) before it confirms
  (``handleMessagesCode``), and listing what the sink did not take as errors: a Batch Ack never covers an
  envelope this node dropped.
- :meth:`Relay.admit` with no holder does the same for locally published envelopes (EdgePeerService.Publish);
  :meth:`Relay.push` then writes those to every ready peer that admits them at once, instead of at the next
  round: a message this node originates has no reason to wait up to 300 ms. The round sees the pushed
  envelopes as known to those peers (their known-sets), so no peer gets one twice; envelopes received from
  peers keep status-go's rhythm (the round below).
- :meth:`Relay.forward_round` runs every ``transmission_cycle`` (300 ms): for each ready peer, the cached
  envelopes it does not know, whose PoW reaches its requirement and whose topic matches its topic interest
  or bloom, go out in one Messages packet (several only if they exceed the max message size). A peer whose
  previous write has not finished is skipped for this round, so a slow reader never delays the others.
- :meth:`Relay.prune` runs every ``expiration_cycle`` (1 s) and drops expired envelopes with their
  known-sets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from devp2p.errors import PeerDisconnected
from wakucodec.envelope import Envelope, decode_envelopes
from wakucodec.errors import CodecError
from wakucodec.responses import bundle_envelopes, encode_p2p_messages
from wakucodec.validation import AcceptancePolicy, Verdict, check_envelope
from wakunode.cache import CachedEnvelope, EnvelopeCache
from wakunode.config import NodeConfig
from wakunode.confirmations import (
    EnvelopeError,
    batch_hash,
    encode_batch_ack,
    encode_message_response,
    envelope_error,
)
from wakunode.constants import BATCH_ACK_CODE, ENVELOPE_OTHER_ERROR, MESSAGE_RESPONSE_CODE, MESSAGES_CODE
from wakunode.metrics import WakuMetrics
from wakunode.peerstate import WakuPeer
from wakunode.ports import Clock, EnvelopeSink

__all__ = ["Admission", "Relay"]

log = logging.getLogger(__name__)

#: The Message Response text for envelopes the sink did not take (code 22, ``EnvelopeOtherError``).
NOT_STORED = "not stored: the node could not take it now, send it again"


@dataclass(frozen=True, slots=True)
class Admission:
    """What happened to one envelope offered to the relay."""

    envelope: Envelope
    """The envelope."""
    entry: CachedEnvelope | None
    """Its cache entry (new or existing); None when refused."""
    new: bool
    """True when it was added to the cache by this call."""
    verdict: Verdict | None
    """The validation outcome for a new envelope; None for a cache hit."""


class Relay:
    """Cache, validation and forwarding shared by every session of one node."""

    def __init__(
        self,
        config: NodeConfig,
        policy: AcceptancePolicy,
        metrics: WakuMetrics,
        clock: Clock,
        sink: EnvelopeSink | None,
        sessions: Callable[[], Iterable[WakuPeer]],
    ) -> None:
        self.config = config
        #: Our own acceptance settings (replaced by ``WakuNode.update_settings``).
        self.policy = policy
        self.metrics = metrics
        self.clock = clock
        self.sink = sink
        self.cache = EnvelopeCache(config.max_cache_bytes)
        self._sessions = sessions
        self._round_done = asyncio.Event()
        #: Per session id: envelopes a queued push will write once the session's current write finished.
        self._queued: dict[int, list[CachedEnvelope]] = {}

    # --- acceptance ----------------------------------------------------------------------------------------

    def admit(self, envelopes: Sequence[Envelope], now: float, holder: WakuPeer | None) -> list[Admission]:
        """Validate and cache ``envelopes`` (§1.5 + cache step); mark cached ones as known to ``holder``."""
        metrics, cache, policy = self.metrics, self.cache, self.policy
        out: list[Admission] = []
        for env in envelopes:
            metrics.envelopes_received_total += 1
            entry = cache.get(env.hash)
            if entry is not None:  # checked first: a cached envelope was valid when it arrived
                metrics.envelopes_cached_total["hit"] += 1
                if holder is not None:
                    entry.holders.add(holder.session)
                out.append(Admission(env, entry, False, None))
                continue
            verdict = check_envelope(env, now, policy)
            if verdict.fault is not None:
                metrics.envelopes_cache_failures_total[verdict.fault.value] += 1
                if not verdict.fault.silent:
                    metrics.envelopes_rejected_total["invalid_envelope"] += 1
                out.append(Admission(env, None, False, verdict))
                continue
            metrics.envelopes_validated_total += 1
            metrics.envelopes_cached_total["miss"] += 1
            metrics.envelopes_size_bytes.observe(env.size)
            entry, evicted = cache.add(env, verdict.pow, int.from_bytes(env.bloom, "big"))
            metrics.cache_evictions_total += len(evicted)
            if holder is not None:
                entry.holders.add(holder.session)
                holder.envelopes_received += 1
            out.append(Admission(env, entry, True, verdict))
        return out

    async def on_messages(self, session: WakuPeer, payload: bytes) -> None:
        """Handle a Messages packet from ``session`` (see the module docstring)."""
        try:
            envelopes = decode_envelopes(payload, max_size=self.config.max_message_size)
        except CodecError as err:
            self.metrics.envelopes_rejected_total["invalid_data"] += 1
            log.info("invalid Messages payload from %s: %s", session.peer.client_id, err)
            return
        now = self.clock.time()
        admissions = self.admit(envelopes, now, session)
        # New envelopes, and cached ones the sink refused before (the peer sends them again).
        fresh = [
            a.envelope for a in admissions if a.new or (a.entry is not None and a.entry.delivered is False)
        ]
        await self.deliver(session.peer.remote_id_hash, fresh, now)
        if self.config.confirmations:
            errors = [
                envelope_error(a.envelope.hash, a.verdict)
                for a in admissions
                if a.verdict is not None and a.verdict.fault is not None and not a.verdict.fault.silent
            ]
            # Not taken by the sink — refused now, or another peer's copy is still being handed over and may
            # yet be refused: the peer is told to send it again rather than given an ack for it.
            errors += [
                EnvelopeError(a.envelope.hash, ENVELOPE_OTHER_ERROR, NOT_STORED)
                for a in admissions
                if a.entry is not None and a.entry.delivered is not True
            ]
            await self._confirm(session, payload, errors)

    async def _confirm(self, session: WakuPeer, payload: bytes, errors: list[EnvelopeError]) -> None:
        digest = batch_hash(payload)
        await session.peer.send(
            session.protocol, MESSAGE_RESPONSE_CODE, encode_message_response(digest, errors)
        )
        await session.peer.send(session.protocol, BATCH_ACK_CODE, encode_batch_ack(digest))
        self.metrics.confirmations_sent_total += 1

    async def deliver(
        self, peer_id: bytes | None, envelopes: list[Envelope], now: float, *, ephemeral: bool = False
    ) -> bool:
        """Hand envelopes to the sink within ``sink_timeout`` (EnvelopeSink back-pressure contract) and record
        the outcome on their cache entries; True when the sink took them (or there is no sink), False when
        it refused them, timed out or raised."""
        if not envelopes:
            return True
        taken = self.sink is None
        if self.sink is not None:
            try:
                async with asyncio.timeout(self.config.sink_timeout):
                    taken = await self.sink.accept(peer_id, envelopes, now, ephemeral=ephemeral)
            except TimeoutError:
                self.metrics.sink_failures["timeout"] += 1
                log.warning("envelope sink timed out; %d envelopes not delivered", len(envelopes))
            except Exception:
                self.metrics.sink_failures["error"] += 1
                log.exception("envelope sink failed; %d envelopes not delivered", len(envelopes))
        for env in envelopes:
            entry = self.cache.get(env.hash)
            if entry is not None and entry.delivered is not True:  # another copy may have been taken
                entry.delivered = taken
        return taken

    # --- forwarding ----------------------------------------------------------------------------------------

    def forward_round(self) -> int:
        """Start one forwarding round; return how many peers got a write scheduled."""
        cache = self.cache
        scheduled = 0
        for session in self._sessions():
            if not session.ready or (session.sending is not None and not session.sending.done()):
                continue
            batch = [
                entry
                for entry in cache.since(session.cursor)
                if session.session not in entry.holders and session.admits(entry)
            ]
            session.cursor = cache.last_seq
            if batch:
                session.sending = asyncio.get_running_loop().create_task(
                    self._send(session, batch), name="waku-forward"
                )
                scheduled += 1
        done, self._round_done = self._round_done, asyncio.Event()
        done.set()
        return scheduled

    def push(self, entries: Sequence[CachedEnvelope]) -> int:
        """Write ``entries`` (envelopes this node just published) to every ready peer that admits them and
        does not know them yet, now; return how many peers got a write scheduled.

        The write becomes the session's ``sending`` task, so the forwarding round skips the session until
        it is done, and by then the envelopes are in the peer's known-set: the round never sends them again.
        When the session is busy with a write, one follower task per session waits for it and then writes
        everything pushed meanwhile (a slow peer holds at most that one queued batch, never a task per
        publish, and never delays other peers).
        """
        scheduled = 0
        loop = asyncio.get_running_loop()
        for session in self._sessions():
            if not session.ready:
                continue
            batch = [e for e in entries if session.session not in e.holders and session.admits(e)]
            if not batch:
                continue
            scheduled += 1
            queued = self._queued.get(session.session)
            if queued is not None:  # a follower is already waiting for this session's write
                queued.extend(batch)
                continue
            current = session.sending
            if current is None or current.done():
                session.sending = loop.create_task(self._send(session, batch), name="waku-push")
            else:
                self._queued[session.session] = batch
                session.sending = loop.create_task(self._send_after(current, session), name="waku-push")
        return scheduled

    async def _send_after(self, current: asyncio.Task[None], session: WakuPeer) -> None:
        """Wait for ``session``'s write in progress, then write what was pushed meanwhile."""
        try:
            await asyncio.wait({current})
        except asyncio.CancelledError:
            current.cancel()  # the session (or the node) is closing: the write it waited for goes too
            self._queued.pop(session.session, None)
            raise
        batch = self._queued.pop(session.session, [])
        # Pruned meanwhile, or taken by the write it waited for: not written again.
        await self._send(session, [e for e in batch if e.alive and session.session not in e.holders])

    async def _send(self, session: WakuPeer, batch: list[CachedEnvelope]) -> None:
        """Write ``batch`` in as few Messages packets as the max message size allows (normally one)."""
        by_raw = {entry.envelope.raw: entry for entry in batch}
        try:
            for bundle in bundle_envelopes(by_raw, self.config.max_message_size):
                await session.peer.send(session.protocol, MESSAGES_CODE, encode_p2p_messages(bundle))
                for raw in bundle:
                    by_raw[raw].holders.add(session.session)  # status-go marks only after a good send
                session.envelopes_sent += len(bundle)
                self.metrics.envelopes_sent_total += len(bundle)
                self.metrics.messages_packets_sent_total += 1
        except PeerDisconnected:
            pass  # the session is ending; its state goes with it
        except Exception:
            log.exception("forwarding to %s failed", session.peer.client_id)

    async def next_round(self) -> None:
        """Wait until the next forwarding round has been scheduled."""
        await self._round_done.wait()

    async def run_forwarding(self) -> None:
        """Forward every ``transmission_cycle`` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.config.transmission_cycle)
            self.forward_round()

    def prune(self, now: float) -> int:
        """Drop envelopes with ``Expiry < now`` (their known-sets go with them); return how many."""
        return len(self.cache.prune(int(now)))

    async def run_pruning(self, extra: Callable[[float], None] | None = None) -> None:
        """Prune every ``expiration_cycle`` seconds until cancelled; ``extra(now)`` runs each time too."""
        while True:
            await asyncio.sleep(self.config.expiration_cycle)
            now = self.clock.time()
            self.prune(now)
            if extra is not None:
                extra(now)
