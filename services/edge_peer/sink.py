"""The :class:`wakunode.EnvelopeSink` of the edge peer: live subscribers first, then ingest.

The node calls :meth:`EdgeSink.accept` with the *new, valid* envelopes of each Messages packet (and of each
local Publish). They are sequenced into the live feed at once (never waits), and — unless ephemeral — handed
to the ingest forwarder, which may wait for buffer room: that wait is the back-pressure the relay feels
(wakunode's EnvelopeSink contract).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.edge_peer.feed import LiveFeed
from services.edge_peer.forwarder import IngestForwarder
from wakucodec.envelope import Envelope

__all__ = ["EdgeSink"]


class EdgeSink:
    """Feed + forwarder behind the node's sink port."""

    def __init__(self, feed: LiveFeed, forwarder: IngestForwarder) -> None:
        self.feed = feed
        self.forwarder = forwarder
        #: Envelopes published as ephemeral (never sent to ingest).
        self.ephemeral_envelopes = 0

    async def accept(
        self,
        peer_id: bytes | None,
        envelopes: Sequence[Envelope],
        received_at: float,
        *,
        ephemeral: bool = False,
    ) -> bool:
        """Sequence for subscribers; forward to ingest unless ephemeral (see the module docstring).

        False when the forwarder had to drop the batch (no buffer room in time, or shutting down): the node
        then lists these envelopes as errors in its confirmation instead of acknowledging them.
        """
        self.feed.publish(peer_id, envelopes, received_at, ephemeral=ephemeral)
        if ephemeral:
            self.ephemeral_envelopes += len(envelopes)
            return True
        return await self.forwarder.submit(peer_id, [env.raw for env in envelopes], received_at)
