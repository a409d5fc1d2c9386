"""The requesting side, for the ``mailmesh`` CLI and tests: dial a mailserver, post, fetch history.

::

    async with WakuClient() as client:
        ms = await client.connect("enode://…@127.0.0.1:30303")          # trusted from now on
        await client.post(ms.pubkey, [envelope], confirm_timeout=2.0)
        page = client.request_history(ms.pubkey, request, Dialect.STATUS_PLAIN)
        async for envelope in page:
            ...
        print(page.result.end, page.result.cursor)                       # PageEnd.COMPLETION, b"…"
        walk = client.follow_cursor(ms.pubkey, request, Dialect.STATUS_ENVELOPE, password="…")
        envelopes = [e async for e in walk]                              # every page until no cursor

0x7f packets carry no request ID, so one request per mailserver is outstanding at a time (a per-peer lock):
0x7f envelopes from that (trusted) peer belong to it, and the 0x7d whose request ID matches ends it (a 0x7d
for another ID — e.g. a late answer to a timed-out request — is ignored). As status-go, 0x7f/0x7d from
untrusted peers are dropped by the node. By default the client advertises an empty topic interest, so the
mailserver's relay does not flood it with live traffic.

**Servers that never send 0x7d.** geth's Whisper mailserver (and ``wnode``) answers a request with 0x7f
packets only (protocol-notes §4.12). For them a page can end by *idleness*: with ``complete_after_idle=s``
the page ends successfully, without a cursor (:attr:`PageEnd.IDLE`), once no 0x7f arrived for ``s`` seconds
— counted from the request when nothing arrives, else from the last 0x7f. A 0x7d that arrives first still
ends the page normally. The default (``"auto"``) is :data:`GETH_IDLE_END_S` for :attr:`Dialect.GETH_BINARY`
and off for every other dialect (status-go and our mailserver always send the 0x7d there); ``None`` or 0
waits for the 0x7d (until ``timeout``). An idle end cannot tell "done" from "stalled": a server that pauses
longer than ``s`` mid-answer has its page cut short, and its late 0x7f packets are dropped as unsolicited
(or, if the next request was already sent, counted to that one).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Literal, TypeAlias

from devp2p.config import ServerConfig
from devp2p.enode import parse_enode
from devp2p.server import Server
from wakucodec import secp
from wakucodec.envelope import Envelope, encode_envelopes
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.requests import EncodedRequest, encode_p2p_request
from wakucodec.responses import ZERO_HASH, Completion
from wakucodec.symmetric import key_from_password
from wakunode.config import NodeConfig
from wakunode.confirmations import MessageResponse, batch_hash
from wakunode.constants import P2P_REQUEST_CODE
from wakunode.errors import RequestFailed, RequestTimeout
from wakunode.node import WakuNode
from wakunode.peerstate import PeerInfo
from wakunode.ports import EnvelopeSink

__all__ = [
    "CLIENT_CONFIG",
    "GETH_IDLE_END_S",
    "IDLE_END_DEFAULTS",
    "HistoryPage",
    "HistoryWalk",
    "IdleEnd",
    "PageEnd",
    "PageResult",
    "PostResult",
    "WakuClient",
    "resolve_idle_end",
]

log = logging.getLogger(__name__)

#: A client's node settings: interested in no topic (no live relay traffic), otherwise defaults.
CLIENT_CONFIG = NodeConfig(topic_interest=())

#: Seconds without a 0x7f after which a :attr:`Dialect.GETH_BINARY` page ends by default. geth's mailserver
#: writes its 0x7f packets back to back from its read loop, so a silence this long means it is done; the
#: first 0x7f may take longer on a big archive (its LevelDB scan) — raise it there.
GETH_IDLE_END_S = 3.0
#: The ``complete_after_idle="auto"`` value per dialect: only geth's dialect, whose servers never send 0x7d.
IDLE_END_DEFAULTS: Mapping[Dialect, float] = {Dialect.GETH_BINARY: GETH_IDLE_END_S}

#: ``complete_after_idle``: seconds, ``None``/0 (wait for the 0x7d), or ``"auto"`` (the dialect's default).
IdleEnd: TypeAlias = float | Literal["auto"] | None


def resolve_idle_end(value: IdleEnd, dialect: Dialect) -> float | None:
    """The idle end in seconds for a request in ``dialect`` (None: wait for the 0x7d); ValueError if bad."""
    if value == "auto":
        return IDLE_END_DEFAULTS.get(dialect)
    if value is None or value == 0:
        return None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"complete_after_idle must be None, 'auto' or seconds >= 0, got {value!r}")
    return float(value)


class PageEnd(enum.Enum):
    """How a history page ended."""

    COMPLETION = "completion"  #: the mailserver's 0x7d (success form)
    IDLE = "idle"  #: no 0x7f for ``complete_after_idle`` seconds and no 0x7d: no cursor


@dataclass(frozen=True, slots=True)
class PageResult:
    """The outcome of one successful page (an ``ERROR=`` raises :class:`RequestFailed` instead)."""

    end: PageEnd
    """Whether the 0x7d ended the page, or idleness."""
    request_id: bytes
    """The 32-byte request ID."""
    last_envelope_hash: bytes
    """From the 0x7d; for an idle end the hash of the last envelope received (32 zero bytes if none)."""
    cursor: bytes
    """The next page's cursor from the 0x7d; ``b""`` when the answer is complete — always for an idle end."""
    envelopes: int
    """Envelopes received on this page."""
    completion: Completion | None = None
    """The 0x7d itself (None for an idle end)."""


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
    """One request's answer: iterate for its envelopes; then :attr:`result` says how it ended.

    Raises :class:`RequestFailed` on ``ERROR=`` and :class:`RequestTimeout` when the whole answer takes
    longer than ``timeout`` seconds (or, without an idle end, no 0x7d arrives within it).
    """

    def __init__(
        self,
        client: WakuClient,
        pubkey: bytes,
        encoded: EncodedRequest,
        dialect: Dialect,
        timeout: float,
        complete_after_idle: float | None = None,
    ) -> None:
        self._client = client
        self._pubkey = pubkey
        self._encoded = encoded
        #: The dialect the request was sent in.
        self.dialect = dialect
        self._timeout = timeout
        #: Seconds without a 0x7f that end the page without a 0x7d (None: wait for the 0x7d).
        self.complete_after_idle = complete_after_idle
        #: The request ID the mailserver echoes in 0x7d.
        self.request_id = encoded.request_id
        #: How the page ended, once iteration finished successfully.
        self.result: PageResult | None = None
        #: The final 0x7d (success form), once iteration finished; None after an idle end.
        self.completion: Completion | None = None
        #: Envelopes received so far.
        self.received = 0
        self._last_hash = ZERO_HASH

    @property
    def ended_by_idle(self) -> bool:
        """True when the page ended because no 0x7f came for :attr:`complete_after_idle` seconds."""
        return self.result is not None and self.result.end is PageEnd.IDLE

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
                        item = await self._next(pending.queue)
                        if item is None:
                            self.result = PageResult(
                                PageEnd.IDLE, self.request_id, self._last_hash, b"", self.received
                            )
                            return
                        if isinstance(item, Completion):
                            if item.error is not None:
                                raise RequestFailed(item.request_id, item.error)
                            self.completion = item
                            self.result = PageResult(
                                PageEnd.COMPLETION,
                                item.request_id,
                                item.last_envelope_hash,
                                item.cursor,
                                self.received,
                                item,
                            )
                            return
                        for envelope in item:
                            self.received += 1
                            self._last_hash = envelope.hash
                            yield envelope
            except TimeoutError as err:
                raise RequestTimeout(
                    f"request {self.request_id.hex()[:16]} not answered within {self._timeout} s"
                ) from err
            finally:
                if client._pending.get(self._pubkey) is pending:
                    del client._pending[self._pubkey]

    async def _next(
        self, queue: asyncio.Queue[list[Envelope] | Completion]
    ) -> list[Envelope] | Completion | None:
        """The next 0x7f batch or 0x7d; None when :attr:`complete_after_idle` passed with nothing arriving.

        The idle clock starts when we begin waiting on an empty queue, i.e. after the request was sent or
        after the last 0x7f was consumed, so time the caller spends on the envelopes never counts as idle.
        """
        idle = self.complete_after_idle
        if idle is None or not queue.empty():
            return await queue.get()
        try:
            async with asyncio.timeout(idle):
                return await queue.get()
        except TimeoutError:
            # A 0x7f/0x7d that landed just as the idle timer fired is still in the queue: not idle.
            return None if queue.empty() else queue.get_nowait()


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
        #: The result of each page, in order (the last one has no cursor, or ``max_pages`` was reached).
        self.pages: list[PageResult] = []

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
            assert page.result is not None
            self.pages.append(page.result)
            if not page.result.cursor:
                return
            request = replace(request, cursor=page.result.cursor)


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
        complete_after_idle: IdleEnd = "auto",
    ) -> HistoryPage:
        """Build a 0x7e in ``dialect`` and return the page to iterate (nothing is sent until then).

        Envelope dialects need ``symmetric_key`` / ``password`` (the mailserver's) or the server's
        ``public_key``; dialects whose servers require a signature are signed with our node key unless
        ``signing_key`` is given. ``complete_after_idle`` ends the page without a 0x7d after that many
        seconds without a 0x7f (module docstring); ``"auto"`` = :data:`GETH_IDLE_END_S` for
        :attr:`Dialect.GETH_BINARY`, else wait for the 0x7d.
        """
        idle = resolve_idle_end(complete_after_idle, dialect)
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
        return HistoryPage(self, pubkey, encoded, dialect, timeout, idle)

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
        complete_after_idle: IdleEnd = "auto",
    ) -> HistoryWalk:
        """Request page after page until no cursor is returned (keys, timeout and ``complete_after_idle`` as
        for :meth:`request_history`; the timeout applies per page; an idle end has no cursor, so it is the
        last page). ``page_interval`` waits between pages, for a mailserver with a request rate limit.
        """
        resolve_idle_end(complete_after_idle, dialect)  # refuse a bad value now, not at the first page
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
                complete_after_idle=complete_after_idle,
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
