"""Store confirmation against external Waku v1 mailservers (``MSGAPI_STORE_NODES``) over the mailserver
protocol (WAKU-MAILSERVER: a 0x7e request, 0x7f envelopes, a 0x7d completion with a cursor).

MESSAGING-API "Acknowledgements": the recurring store query asks the configured ``storeNodes`` first. Over
Waku v1 there is no lookup by hash, so the query is the envelope's topic and a time window around its sent
time, and the answer is searched for the envelope hash, page after page (cursor) until it is found or the
window is exhausted. The nodes are asked in configuration order; the first that holds the envelope
settles it. The request is status-go's plain ``MessagesRequest`` (``Dialect.STATUS_PLAIN``), which
status-go's waku mailserver and Mailmesh's edge peer both answer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from devp2p.config import ServerConfig
from devp2p.enode import parse_enode
from devp2p.errors import DevP2PError
from meshcore.errors import Unavailable
from msgstore.types import OutboxEntry
from services.send.sealing import envelope_fields
from wakucodec.bloom import topic_to_bloom
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakunode.client import WakuClient
from wakunode.errors import WakuError

__all__ = ["WINDOW_S", "StoreNodes"]

_log = logging.getLogger(__name__)
#: Seconds either side of the envelope's sent time the query covers: a store node files an envelope
#: under its sent time, so a small window keeps the answer short (DefaultSyncAllowance is 10 s).
WINDOW_S = 30
_PAGE_LIMIT = 1000  # status-go's maximum envelopes per page


class StoreNodes:
    """Asks the configured mailservers whether they hold a sent envelope (a ``ports.StoreChecker``)."""

    def __init__(self, enodes: Sequence[str], *, timeout_s: float, client: WakuClient | None = None) -> None:
        self._enodes = tuple(enodes)
        self._timeout_s = timeout_s
        self._client = client or WakuClient(server_config=ServerConfig(listen=False))
        self._connected: set[bytes] = set()

    async def start(self) -> None:
        """Start the dial-only devp2p node (connections are made on first use)."""
        await self._client.start()

    async def close(self) -> None:
        """Disconnect from every store node."""
        await self._client.stop()

    async def holds(self, entry: OutboxEntry) -> bool:
        """True when a store node holds the entry's envelope; Unavailable when none could be asked."""
        expiry, ttl, topic, _ = envelope_fields(entry)
        sent = expiry - ttl
        # The topic and its bloom: status-go v0.50.0's mailserver refuses a request whose bloom is empty
        # ("bloom filter is empty"); later servers use the topics and ignore the bloom.
        request = HistoryRequest(
            lower=max(0, sent - WINDOW_S),
            upper=sent + WINDOW_S,
            bloom=topic_to_bloom(topic),
            topics=(topic,),
            limit=_PAGE_LIMIT,
        )
        failures = []
        for enode in self._enodes:
            try:
                if await self._ask(enode, request, entry.envelope_hash):
                    return True
            except (OSError, TimeoutError, WakuError, DevP2PError) as err:
                failures.append(f"{enode[:24]}…: {err}")
                self._connected.discard(parse_enode(enode).pubkey)
        if failures and len(failures) == len(self._enodes):
            raise Unavailable("no store node answered: " + "; ".join(failures))
        return False

    async def _ask(self, enode: str, request: HistoryRequest, envelope_hash: bytes) -> bool:
        pubkey = parse_enode(enode).pubkey
        if pubkey not in self._connected:
            await self._client.connect(enode, timeout=self._timeout_s)
            self._connected.add(pubkey)
        walk = self._client.follow_cursor(pubkey, request, Dialect.STATUS_PLAIN, timeout=self._timeout_s)
        async for envelope in walk:
            if envelope.hash == envelope_hash:
                return True
        return False
