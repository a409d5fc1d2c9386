"""Turning an outbox entry into its Waku v1 envelope (DESIGN "Mapping onto Waku v1").

Topic: the content topic's 4-byte Waku v1 topic (``/waku/1/0x<8 hex>/rfc26`` → those bytes, any other →
keccak256 prefix); Data: the payload as is; sent time: the message timestamp in whole seconds; expiry:
sent + TTL. The nonce is mined (go-ethereum ``Envelope.Seal``) to the PoW the edge peers' Waku peers
require, capped by ``SEND_MAX_POW``. Mining starts at nonce 0 and is deterministic, so a retry seals the
same envelope (same hash): an edge peer that cached it answers ALREADY_KNOWN instead of relaying a copy.
Mining is CPU work and runs in the default executor, off the event loop.
"""

from __future__ import annotations

import asyncio
import functools

from msgstore.types import OutboxEntry
from wakucodec.contenttopic import content_topic_to_v1_topic
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.pow import seal

__all__ = ["NS_PER_S", "Sealer", "envelope_fields"]

NS_PER_S = 1_000_000_000


def envelope_fields(entry: OutboxEntry) -> tuple[int, int, bytes, bytes]:
    """(expiry, ttl, topic, data) of the entry's envelope."""
    sent = (entry.message.timestamp or 0) // NS_PER_S
    ttl = int(entry.ttl)
    return sent + ttl, ttl, content_topic_to_v1_topic(entry.message.content_topic), entry.message.payload


class Sealer:
    """Seals entries to a capped PoW target."""

    def __init__(self, *, max_pow: float, work_time_s: float) -> None:
        self._max_pow = max_pow
        self._work_time_s = work_time_s

    async def seal(self, entry: OutboxEntry, required_pow: float) -> Envelope:
        """The entry's envelope with a nonce meeting ``min(required_pow, max_pow)``."""
        expiry, ttl, topic, data = envelope_fields(entry)
        target = min(max(0.0, required_pow), self._max_pow)
        if target <= 0:
            return make_envelope(expiry=expiry, ttl=ttl, topic=topic, data=data)
        job = functools.partial(
            seal, expiry, ttl, topic, data, target_pow=target, work_time_s=self._work_time_s
        )
        return await asyncio.get_running_loop().run_in_executor(None, job)
