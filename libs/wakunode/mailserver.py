"""Answering P2P Requests (0x7e) from a :class:`~wakunode.ports.HistoryBackend` (§3.7, §4.1–§4.7).

Per request, in status-go's order (SG ``waku/mailserver.go`` ``DeliverMail``):

1. decode with :func:`wakucodec.requests.decode_p2p_request` (envelope first, then plain; our symmetric
   keys, then the private key; the request-PoW minimum). Undecodable without an ID → counted
   (``validation``), nothing sent; refused with an ID → 0x7d ``ERROR=`` with status-go's text;
2. the per-peer rate limit → 0x7d ``ERROR=…rate limit exceeded`` (``peer_req_limit``);
3. stream the backend's batches as 0x7f packets in the request's message form — a list for waku, single
   envelopes for geth's binary dialect on shh/6 — each at most the max message size; ``Batch = false`` gets
   one envelope per packet;
4. 0x7d in the request's completion form (status-go's byte string, or RFC8's list for the spec dialects), or
   ``ERROR=`` if the backend failed or the answer timed out.

Requests of one peer are answered one at a time by a worker task, so a slow backend never stalls the peer's
read loop; a small queue (``max_queued_requests``) absorbs pipelined requests, beyond it the peer's handler
waits (back-pressure, like status-go answering inside the read loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from devp2p.errors import PeerDisconnected
from wakucodec.constants import UINT32_MAX
from wakucodec.errors import CodecError, InvalidResponse
from wakucodec.requests import UPPER_SAFE_THRESHOLD, DecodedRequest, RejectedRequest, decode_p2p_request
from wakucodec.responses import (
    CompletionForm,
    MessageForm,
    bundle_envelopes,
    completion_form_for,
    encode_completion,
    encode_completion_error,
    encode_p2p_messages,
    message_form_for,
)
from wakucodec.symmetric import key_from_password
from wakunode.config import NodeConfig
from wakunode.constants import P2P_MESSAGE_CODE, P2P_REQUEST_COMPLETE_CODE
from wakunode.metrics import MailserverMetrics
from wakunode.peerstate import WakuPeer
from wakunode.ports import Clock, HistoryBackend, HistoryBatch, HistoryComplete, HistoryFailure, HistoryQuery
from wakunode.ratelimit import RequestRateLimiter

__all__ = ["RATE_LIMIT_EXCEEDED", "Mailserver"]

log = logging.getLogger(__name__)

#: status-go's refusal text for a rate-limited request (``mailserver.go`` ``DeliverMail``).
RATE_LIMIT_EXCEEDED = "rate limit exceeded"
#: Room kept for the 0x7f list header when telling the backend its batch budget (≤ 1 + 8 bytes).
_LIST_HEADER_ROOM = 9


class Mailserver:
    """The 0x7e side of a node: keys, rate limit, per-session workers."""

    def __init__(
        self, config: NodeConfig, backend: HistoryBackend, metrics: MailserverMetrics, clock: Clock
    ) -> None:
        self.config = config
        self.settings = config.mailserver
        self.backend = backend
        self.metrics = metrics
        self.clock = clock
        self.keys = self.settings.symmetric_keys + tuple(
            key_from_password(p) for p in self.settings.passwords
        )
        self.limiter = RequestRateLimiter(self.settings.request_rate_limit)

    async def enqueue(self, session: WakuPeer, payload: bytes) -> None:
        """Queue a 0x7e payload for ``session``'s worker (waits while the queue is full)."""
        if session.requests is None:
            session.requests = asyncio.Queue(max(1, self.settings.max_queued_requests))
            session.request_worker = asyncio.get_running_loop().create_task(
                self._worker(session), name="waku-mailserver"
            )
        await session.requests.put((payload, time.monotonic()))

    async def _worker(self, session: WakuPeer) -> None:
        queue = session.requests
        assert queue is not None
        while True:
            payload, received = await queue.get()
            try:
                await self.serve(session, payload, received)
            except PeerDisconnected:
                return
            except Exception:  # never let one request kill the worker
                log.exception("serving a request of %s failed", session.peer.client_id)

    async def serve(self, session: WakuPeer, payload: bytes, received: float) -> None:
        """Answer one request completely (steps in the module docstring)."""
        metrics = self.metrics
        metrics.delivery_attempts_total += 1
        now = int(self.clock.time())
        try:
            decoded = decode_p2p_request(
                payload,
                symmetric_keys=self.keys,
                private_key=self.settings.private_key,
                min_pow=self.settings.min_pow,
                now=now,
                max_size=self.config.max_message_size,
            )
        except RejectedRequest as err:
            metrics.delivery_failures_total["validation"] += 1
            form = (
                completion_form_for(err.dialect) if err.dialect is not None else CompletionForm.CONCATENATED
            )
            await self._fail(session, err.request_id, err.message, form)
            return
        except CodecError as err:
            metrics.delivery_failures_total["validation"] += 1
            log.info("undecodable p2p request from %s: %s", session.peer.client_id, err)
            return
        form = completion_form_for(decoded.dialect)
        if not self.limiter.allow(session.pubkey, self.clock.monotonic()):
            metrics.delivery_failures_total["peer_req_limit"] += 1
            await self._fail(session, decoded.request_id, RATE_LIMIT_EXCEEDED, form)
            return
        try:
            async with asyncio.timeout(self.settings.request_timeout):
                outcome = await self._stream(session, decoded, now)
        except TimeoutError:
            metrics.delivery_failures_total["process"] += 1
            outcome = HistoryFailure("failed to process request: timeout")
        await self._complete(session, decoded, outcome, form)
        metrics.delivery_duration_seconds.observe(time.monotonic() - received)

    def _query(
        self, session: WakuPeer, decoded: DecodedRequest, now: int
    ) -> tuple[HistoryQuery, MessageForm]:
        form = message_form_for(decoded.dialect, shh=session.flavor.is_shh)
        single = form is MessageForm.SINGLE or not decoded.request.batch
        defaulted = decoded.request.upper == min(now + UPPER_SAFE_THRESHOLD, UINT32_MAX)
        query = HistoryQuery(
            request=decoded.request,
            dialect=decoded.dialect,
            request_id=decoded.request_id,
            requester_id=session.peer.remote_id_hash,
            max_batch_bytes=self.config.max_message_size - _LIST_HEADER_ROOM,
            max_batch_envelopes=1 if single else 0,
            signer=decoded.signer,
            requested_upper=0 if defaulted else None,
        )
        return query, form

    async def _stream(
        self, session: WakuPeer, decoded: DecodedRequest, now: int
    ) -> HistoryComplete | HistoryFailure:
        """Send every batch as 0x7f packets; return the backend's final item."""
        query, form = self._query(session, decoded, now)
        metrics, max_size = self.metrics, self.config.max_message_size
        started = time.monotonic()
        final: HistoryComplete | HistoryFailure | None = None
        iterator = self.backend.query(query)
        try:
            async for item in iterator:
                if isinstance(item, HistoryBatch):
                    bundles = bundle_envelopes(item.envelopes, max_size, batch=query.max_batch_envelopes != 1)
                    for bundle in bundles:
                        packet = bundle[0] if form is MessageForm.SINGLE else encode_p2p_messages(bundle)
                        sent_at = time.monotonic()
                        await session.peer.send(session.protocol, P2P_MESSAGE_CODE, packet)
                        metrics.send_raw_envelope_duration_seconds.observe(time.monotonic() - sent_at)
                        metrics.sent_envelope_batch_size_bytes.observe(len(packet))
                        metrics.envelopes_total += len(bundle)
                    continue
                final = item
                break
        except (PeerDisconnected, TimeoutError, asyncio.CancelledError):
            raise
        except Exception:
            log.exception("history backend failed for %s", session.peer.client_id)
            metrics.delivery_failures_total["iterator"] += 1
            final = HistoryFailure("failed to process request")
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        if final is None:  # the backend ended without a completion
            metrics.delivery_failures_total["iterator"] += 1
            final = HistoryFailure("failed to process request")
        if query.max_batch_envelopes != 1:
            metrics.requests_batched_total += 1
        metrics.requests_bundle_process_duration_seconds.observe(time.monotonic() - started)
        return final

    async def _complete(
        self,
        session: WakuPeer,
        decoded: DecodedRequest,
        outcome: HistoryComplete | HistoryFailure,
        form: CompletionForm,
    ) -> None:
        if isinstance(outcome, HistoryFailure):
            await self._fail(session, decoded.request_id, outcome.message, form)
            return
        try:
            payload = encode_completion(
                decoded.request_id, outcome.last_envelope_hash, outcome.next_cursor, form=form
            )
        except InvalidResponse as err:  # e.g. a cursor status-go clients cannot take
            self.metrics.delivery_failures_total["iterator"] += 1
            await self._fail(session, decoded.request_id, f"failed to process request: {err.message}", form)
            return
        await self._send_complete(session, payload)

    async def _fail(self, session: WakuPeer, request_id: bytes, text: str, form: CompletionForm) -> None:
        await self._send_complete(session, encode_completion_error(request_id, text, form=form))

    async def _send_complete(self, session: WakuPeer, payload: bytes) -> None:
        try:
            await session.peer.send(session.protocol, P2P_REQUEST_COMPLETE_CODE, payload)
        except PeerDisconnected:
            self.metrics.delivery_failures_total["historic_msg_resp"] += 1
            raise

    def prune(self, now: float) -> None:
        """Forget stale rate-limit entries (called every expiration cycle)."""
        del now  # the limiter runs on the monotonic clock
        self.limiter.prune(self.clock.monotonic())
