"""Local publishing (edge-peer ``Publish``): validate, cache, hand to the sink, wait for the relay.

A published envelope is checked exactly like one received from a peer (protocol-notes §1.5 — a recently
expired one is rejected here rather than dropped silently, since the caller wants to know), cached, written
at once to every ready peer whose PoW requirement and bloom/topic interest admit it (:meth:`Relay.push`;
envelopes relayed from peers still wait for the 300 ms round), and given to the
:class:`~wakunode.ports.EnvelopeSink` with ``peer_id=None``. With ``relay_timeout > 0`` the call waits until
every such peer has it (its write finished), or the timeout passes; ``relayed_to`` counts the distinct
connected remotes holding it. Publishing an envelope the cache already holds (a retry) does the same for the
peers that do not have it yet, and answers ALREADY_KNOWN.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wakucodec.constants import MAX_MESSAGE_SIZE
from wakucodec.envelope import Envelope, decode_envelope
from wakucodec.errors import CodecError
from wakucodec.validation import EnvelopeFault
from wakunode.cache import CachedEnvelope
from wakunode.peerstate import WakuPeer
from wakunode.relay import Admission, Relay

__all__ = ["PublishResult", "PublishStatus", "publish"]


class PublishStatus(enum.Enum):
    """Outcome of one published envelope (edge-peer ``PublishStatus``)."""

    PUBLISHED = "published"  #: accepted and written to at least one peer
    ALREADY_KNOWN = "already_known"  #: already in the relay cache
    QUEUED = "queued"  #: accepted; not waited for (``relay_timeout=0``) and not yet written
    NO_PEERS = "no_peers"  #: accepted, but no peer took it within ``relay_timeout``
    REJECTED = "rejected"  #: refused by validation (see ``fault``) or malformed


@dataclass(frozen=True, slots=True)
class PublishResult:
    """What :meth:`WakuNode.publish` did with one envelope."""

    hash: bytes
    """Envelope hash (empty for undecodable input)."""
    status: PublishStatus
    """Outcome."""
    relayed_to: int = 0
    """Distinct connected remotes holding the envelope when the call returned."""
    fault: EnvelopeFault | None = None
    """Validation rule broken; None for undecodable input (then ``error`` says why)."""
    error: str = ""
    """Human-readable reason for REJECTED."""


def _holders(entry: CachedEnvelope, ready: Sequence[WakuPeer]) -> int:
    return len({s.pubkey for s in ready if s.session in entry.holders})


async def _await_relay(
    relay: Relay, entries: list[CachedEnvelope], ready: Callable[[], list[WakuPeer]], timeout: float
) -> None:
    def done() -> bool:
        sessions = ready()
        return all(s.session in e.holders for e in entries for s in sessions if s.admits(e))

    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout):
            while True:
                # The pushed writes (or a round's) first: a peer holds an envelope once its write is done.
                writes = [s.sending for s in ready() if s.sending is not None and not s.sending.done()]
                if writes:
                    await asyncio.wait(writes)
                if done():
                    return
                await relay.next_round()  # a peer that was busy or not ready yet gets it in a round


def _result(adm: Admission, ready: Sequence[WakuPeer], waited: bool) -> PublishResult:
    env_hash = adm.envelope.hash
    if adm.entry is None:
        verdict = adm.verdict
        fault = verdict.fault if verdict else None
        text = (verdict.message if verdict else "") or (fault.value if fault else "rejected")
        return PublishResult(env_hash, PublishStatus.REJECTED, fault=fault, error=text)
    holders = _holders(adm.entry, ready)
    if not adm.new:
        status = PublishStatus.ALREADY_KNOWN
    elif holders:
        status = PublishStatus.PUBLISHED
    else:
        status = PublishStatus.NO_PEERS if waited else PublishStatus.QUEUED
    return PublishResult(env_hash, status, holders)


async def publish(
    relay: Relay,
    forwardable: Callable[[], list[WakuPeer]],
    envelopes: Sequence[Envelope | bytes],
    *,
    ephemeral: bool,
    relay_timeout: float,
) -> list[PublishResult]:
    """The body of :meth:`WakuNode.publish`; ``forwardable`` lists the sessions the relay writes to."""
    now = relay.clock.time()
    slots: list[PublishResult | None] = []
    valid: list[Envelope] = []
    for item in envelopes:
        if isinstance(item, Envelope):
            valid.append(item)
            slots.append(None)
            continue
        try:
            valid.append(decode_envelope(item, max_size=MAX_MESSAGE_SIZE))
            slots.append(None)
        except CodecError as err:
            slots.append(PublishResult(b"", PublishStatus.REJECTED, error=f"malformed envelope: {err}"))
    admissions = relay.admit(valid, now, None)
    # New and already cached alike: a retry of an envelope cached while no peer was there goes at once to
    # the peers that connected since, and its Publish waits for them like a first one.
    entries = [a.entry for a in admissions if a.entry is not None]
    relay.push(entries)  # before the sink, which may wait for ingest's buffer room
    await relay.deliver(None, [a.envelope for a in admissions if a.new], now, ephemeral=ephemeral)
    if relay_timeout > 0:
        await _await_relay(relay, entries, forwardable, relay_timeout)
    ready = forwardable()
    pending = iter(admissions)
    return [slot if slot is not None else _result(next(pending), ready, relay_timeout > 0) for slot in slots]
