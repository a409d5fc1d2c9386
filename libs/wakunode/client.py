"""The requesting side, for the ``mailmesh`` CLI and tests: dial a mailserver, post, fetch history.

::

    async with WakuClient() as client:
        ms = await client.connect("enode://…@127.0.0.1:30303")          # trusted from now on
        await client.post(ms.pubkey, [envelope], confirm_timeout=2.0)
        page = client.request_history(ms.pubkey, request, Dialect.STATUS_PLAIN)
        async for envelope in page:
            ...
        print(page.completion.cursor)
        walk = client.follow_cursor(ms.pubkey, request, Dialect.STATUS_ENVELOPE, password="…")
        envelopes = [e async for e in walk]                              # every page until no cursor

0x7f packets carry no request ID, so one request per mailserver is outstanding at a time (a per-peer lock):
0x7f envelopes from that (trusted) peer belong to it, and the 0x7d whose request ID matches ends it (a 0x7d
for another ID — e.g. a late answer to a timed-out request — is ignored). As status-go, 0x7f/0x7d from
untrusted peers are dropped by the node. By default the client advertises an empty topic interest, so the
mailserver's relay does not flood it with live traffic.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType

from devp2p.config import ServerConfig
from devp2p.enode import parse_enode
from devp2p.server import Server
from wakucodec import secp
from wakucodec.envelope import Envelope, encode_envelopes
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.requests import EncodedRequest, encode_p2p_request
from wakucodec.responses import Completion
from wakucodec.symmetric import key_from_password
from wakunode.config import NodeConfig
from wakunode.confirmations import MessageResponse, batch_hash
from wakunode.constants import P2P_REQUEST_CODE
from wakunode.errors import RequestFailed, RequestTimeout
from wakunode.node import WakuNode
from wakunode.peerstate import PeerInfo
from wakunode.ports import EnvelopeSink

__all__ = ["CLIENT_CONFIG", "HistoryPage", "HistoryWalk", "PostResult", "WakuClient"]

log = logging.getLogger(__name__)

#: A client's node settings: interested in no topic (no live relay traffic), otherwise defaults.
CLIENT_CONFIG = NodeConfig(topic_interest=())


@dataclass(frozen=True, slots=True)
class PostResult:
    """What :meth:`WakuClient.post` sent."""

    batch_hash: bytes
    """keccak256 of the Messages payload (names the batch in confirmations, §3.6)."""
    response: MessageResponse | None = None
    """The Message Response (or a bare Batch Ack as an empty one) if one arrived within the timeout."""


@dataclass(eq=False)
class _Pending:
    request_id: bytes
    queue: asyncio.Queue[list[Envelope] | Completion] = field(default_factory=asyncio.Queue)


class HistoryPage:
    """One request's answer: iterate for its envelopes; then :attr:`completion` holds the 0x7d.

    Raises :class:`RequestFailed` on ``ERROR=`` and :class:`RequestTimeout` when the whole answer takes
    longer than ``timeout`` seconds.
    """

    def __init__(
        self, client: WakuClient, pubkey: bytes, encoded: EncodedRequest, dialect: Dialect, timeout: float
    ) -> None:
        self._client = client
        self._pubkey = pubkey
        self._encoded = encoded
        #: The dialect the request was sent in.
        self.dialect = dialect
        self._timeout = timeout
        #: The request ID the mailserver echoes in 0x7d.
        self.request_id = encoded.request_id
        #: The final 0x7d (success form), once iteration finished.
        self.completion: Completion | None = None
        #: Envelopes received so far.
        self.received = 0

    def __aiter__(self) -> AsyncIterator[Envelope]:
        return self._run()

    async def _run(self) -> AsyncIterator[Envelope]:
        client = self._client
        async with client._locks[self._pubkey]:
            pending = _Pending(self.request_id)
            client._pending[self._pubkey] = pending
            try:
                await client.node.send_packet(self._pubkey, P2P_REQUEST_CODE, self._encoded.payload)
                async with asyncio.timeout(self._timeout):
                    while True:
                        item = await pending.queue.get()
                        if isinstance(item, Completion):
                            if item.error is not None:
                                raise RequestFailed(item.request_id, item.error)
                            self.completion = item
                            return
                        for envelope in item:
                            self.received += 1
                            yield envelope
            except TimeoutError as err:
                raise RequestTimeout(
                    f"request {self.request_id.hex()[:16]} not answered within {self._timeout} s"
                ) from err
            finally:
                if client._pending.get(self._pubkey) is pending:
                    del client._pending[self._pubkey]


class HistoryWalk:
    """Every page of a query, following cursors until the mailserver returns none (or ``max_pages``)."""

    def __init__(
        self,
        page: Callable[[HistoryRequest], HistoryPage],
        request: HistoryRequest,
        max_pages: int,
        page_interval: float,
    ) -> None:
        self._page, self._request = page, request
        self._max_pages, self._interval = max_pages, page_interval
        #: The completion of each page, in order.
        self.pages: list[Completion] = []

    def __aiter__(self) -> AsyncIterator[Envelope]:
        return self._run()

    async def _run(self) -> AsyncIterator[Envelope]:
        request = self._request
        while len(self.pages) < self._max_pages:
            if self.pages and self._interval > 0:
                await asyncio.sleep(self._interval)  # pacing for a server's request rate limit, not sync
            page = self._page(request)
            async for envelope in page:
                yield envelope
            assert page.completion is not None
            self.pages.append(page.completion)
            if not page.completion.cursor:
                return
            request = replace(request, cursor=page.completion.cursor)


class WakuClient:
    """A dial-only node (by default) that talks to mailservers."""

    def __init__(
        self,
        node_key: bytes | None = None,
        *,
        config: NodeConfig | None = None,
        server_config: ServerConfig | None = None,
        sink: EnvelopeSink | None = None,
    ) -> None:
        self.node_key = node_key or secp.generate_private_key()
        #: The waku node (its metrics and peers are available).
        self.node = WakuNode(config or CLIENT_CONFIG, sink)
        #: The devp2p server (``listen=False`` by default).
        self.server = Server(self.node_key, self.node.protocols, server_config or ServerConfig(listen=False))
        self.node.attach(self.server)
        self.node.p2p_listener = self
        self._locks: defaultdict[bytes, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._pending: dict[bytes, _Pending] = {}

    async def start(self) -> None:
        """Start the devp2p server and the node's loops."""
        await self.node.start()
        await self.server.start()

    async def stop(self) -> None:
        """Disconnect everyone and stop."""
        await self.server.stop()
        await self.node.stop()

    async def __aenter__(self) -> WakuClient:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def connect(self, enode: str, *, timeout: float = 10.0, trust: bool = True) -> PeerInfo:
        """Dial ``enode``, wait for the waku/shh handshake, and (by default) trust it as our mailserver."""
        pubkey = parse_enode(enode).pubkey
        if trust:
            self.server.set_trusted(pubkey, True)  # before dialling: 0x7f may follow right after Status
        await self.server.dial(enode)
        return await self.node.wait_ready(pubkey, timeout)

    async def post(
        self, pubkey: bytes, envelopes: Sequence[Envelope], *, confirm_timeout: float | None = None
    ) -> PostResult:
        """Send envelopes to ``pubkey`` in one Messages packet; optionally wait for its confirmation."""
        digest = batch_hash(encode_envelopes(envelopes))
        waiter = self.node.expect_confirmation(digest) if confirm_timeout else None
        try:
            sent = await self.node.send_messages(pubkey, envelopes)
            assert sent == digest
            if waiter is None:
                return PostResult(digest)
            try:
                async with asyncio.timeout(confirm_timeout):
                    return PostResult(digest, await waiter)
            except TimeoutError:
                return PostResult(digest)
        finally:
            if waiter is not None:
                waiter.cancel()

    def request_history(
        self,
        pubkey: bytes,
        request: HistoryRequest,
        dialect: Dialect,
        *,
        symmetric_key: bytes | None = None,
        password: str | None = None,
        public_key: bytes | None = None,
        signing_key: bytes | None = None,
        pow_target: float = 0.0,
        timeout: float = 30.0,
    ) -> HistoryPage:
        """Build a 0x7e in ``dialect`` and return the page to iterate (nothing is sent until then).

        Envelope dialects need ``symmetric_key`` / ``password`` (the mailserver's) or the server's
        ``public_key``; dialects whose servers require a signature are signed with our node key unless
        ``signing_key`` is given.
        """
        if password is not None:
            symmetric_key = key_from_password(password)
        if dialect.in_envelope and signing_key is None and dialect.requires_signature:
            signing_key = self.node_key
        encoded = encode_p2p_request(
            request,
            dialect,
            symmetric_key=symmetric_key if dialect.in_envelope else None,
            public_key=public_key if dialect.in_envelope else None,
            signing_key=signing_key,
            pow_target=pow_target,
        )
        return HistoryPage(self, pubkey, encoded, dialect, timeout)

    def follow_cursor(
        self,
        pubkey: bytes,
        request: HistoryRequest,
        dialect: Dialect,
        *,
        max_pages: int = 10_000,
        page_interval: float = 0.0,
        symmetric_key: bytes | None = None,
        password: str | None = None,
        public_key: bytes | None = None,
        signing_key: bytes | None = None,
        pow_target: float = 0.0,
        timeout: float = 30.0,
    ) -> HistoryWalk:
        """Request page after page until no cursor is returned (keys and timeout as for
        :meth:`request_history`; the timeout applies per page). ``page_interval`` waits between pages, for a
        mailserver with a request rate limit.
        """
        if password is not None:
            symmetric_key = key_from_password(password)  # derive once, not per page

        def page(req: HistoryRequest) -> HistoryPage:
            return self.request_history(
                pubkey,
                req,
                dialect,
                symmetric_key=symmetric_key,
                public_key=public_key,
                signing_key=signing_key,
                pow_target=pow_target,
                timeout=timeout,
            )

        return HistoryWalk(page, request, max_pages, page_interval)

    # --- P2PListener -----------------------------------------------------------------------------------

    def on_p2p_envelopes(self, pubkey: bytes, envelopes: list[Envelope]) -> None:
        """0x7f from a trusted peer: belongs to the outstanding request to that peer, if any."""
        pending = self._pending.get(pubkey)
        if pending is None:
            self.node.metrics.ignored_packets["unsolicited_p2p"] += 1
            return
        pending.queue.put_nowait(envelopes)

    def on_p2p_complete(self, pubkey: bytes, completion: Completion) -> None:
        """0x7d from a trusted peer: ends the outstanding request if the ID matches."""
        pending = self._pending.get(pubkey)
        if pending is None or completion.request_id != pending.request_id:
            self.node.metrics.ignored_packets["unsolicited_p2p"] += 1
            return
        pending.queue.put_nowait(completion)
