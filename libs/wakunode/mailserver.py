"""Answering P2P Requests (0x7e) from a :class:`~wakunode.ports.HistoryBackend`
(protocol-notes §3.7, §4.1–§4.7).

Per request, in status-go's order (SG ``waku/mailserver.go`` ``DeliverMail``):

1. decode with :func:`wakucodec.requests.decode_p2p_request` (envelope first, then plain; our symmetric
   keys, then the private key; the request-PoW minimum; status-go's ``Validate``). Undecodable without an
   ID → counted (``validation``), nothing sent; refused with an ID → 0x7d ``ERROR=`` with status-go's text.
   The request goes to the backend *as the peer sent it*: the backend applies the defaults (``upper 0``,
   ``limit 0``), nothing here computes or guesses them;
2. the per-peer rate limit, checked against the time the request was *received* (as status-go does), not the
   time the worker gets to it → 0x7d ``ERROR=…rate limit exceeded`` (``peer_req_limit``);
3. stream the backend's batches as 0x7f packets in the request's message form — a list for waku, single
   envelopes for geth's binary dialect on shh/6 — each at most the max message size; ``Batch = false`` gets
   one envelope per packet;
4. 0x7d in the request's completion form (status-go's byte string, or RFC8's list for the spec dialects), or
   ``ERROR=`` if the backend failed or the answer timed out.

Requests of one peer are answered one at a time by a worker task, so a slow backend never stalls the peer's
read loop; a small queue (``max_queued_requests``) absorbs pipelined requests, beyond it the peer's handler
waits (back-pressure, like status-go answering inside the read loop).

**Accounting.** Every request the worker takes up counts in ``delivery_attempts_total`` and ends in *at most
one* ``delivery_failures_total`` type — none when its 0x7d was written after a complete answer (or after the
backend's own refusal, which the backend counts):

================================  ===================================================================
``validation``                    undecodable, or refused by the decoder (``ERROR=`` sent when it had an ID)
``peer_req_limit``                rate limited (``ERROR=rate limit exceeded`` sent)
``iterator``                      the backend raised, ended without a completion, or gave a cursor status-go
                                  clients cannot take
``process``                       the answer timed out (``request_timeout``), or was cut short by a shutdown
``peer_gone``                     *Mailmesh*: the requester's session ended while its answer was being
                                  prepared or its 0x7f packets were being written
``historic_msg_resp``             everything was sent but the final 0x7d could not be written
================================  ===================================================================

Which failure comes first wins; sending the ``ERROR=`` 0x7d of a refused request to a peer that has left
adds nothing. Requests still queued when the session ends were never taken up and count nowhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter

from devp2p.errors import PeerDisconnected
from wakucodec.errors import CodecError, InvalidResponse
from wakucodec.requests import DecodedRequest, RejectedRequest, decode_p2p_request
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
from wakunode.ports import (
    Clock,
    HistoryBackend,
    HistoryBatch,
    HistoryComplete,
    HistoryFailure,
    MailserverQuery,
)
from wakunode.ratelimit import RequestRateLimiter

__all__ = ["PEER_GONE", "RATE_LIMIT_EXCEEDED", "Mailserver"]

log = logging.getLogger(__name__)

#: status-go's refusal text for a rate-limited request (``mailserver.go`` ``DeliverMail``).
RATE_LIMIT_EXCEEDED = "rate limit exceeded"
#: ``delivery_failures_total`` type of a request whose requester left before its answer was complete.
PEER_GONE = "peer_gone"
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
        #: Requests received but not yet checked against the rate limit, per peer (queued or being queued).
        self._unchecked: Counter[bytes] = Counter()

    async def enqueue(self, session: WakuPeer, payload: bytes) -> None:
        """Queue a 0x7e payload for ``session``'s worker (waits while the queue is full).

        The receipt time goes with it: the rate limit is checked against it when the worker takes the
        request up, however long the request waited behind the previous one.
        """
        received = self.clock.monotonic()
        if session.requests is None or session.request_worker is None:
            session.requests = asyncio.Queue(max(1, self.settings.max_queued_requests))
            session.request_worker = asyncio.get_running_loop().create_task(
                self._worker(session, session.requests), name="waku-mailserver"
            )
        pubkey = session.pubkey
        self._unchecked[pubkey] += 1
        try:
            await session.requests.put((payload, received))
        except BaseException:  # the handler was cancelled while waiting: the request never got in
            self._checked(pubkey)
            raise

    def _checked(self, pubkey: bytes) -> None:
        """One request of ``pubkey`` left the queue (taken up, or dropped with its session)."""
        left = self._unchecked[pubkey] - 1
        if left > 0:
            self._unchecked[pubkey] = left
        else:
            del self._unchecked[pubkey]

    async def _worker(self, session: WakuPeer, queue: asyncio.Queue[tuple[bytes, float]]) -> None:
        pubkey = session.pubkey
        try:
            while True:
                payload, received = await queue.get()
                self._checked(pubkey)  # serve() checks the limit before its first await
                try:
                    await self.serve(session, payload, received)
                except PeerDisconnected:
                    return
                except Exception:  # never let one request kill the worker
                    log.exception("serving a request of %s failed", session.peer.client_id)
        finally:
            for _ in range(queue.qsize()):  # never taken up: the session ended first
                self._checked(pubkey)
            if session.request_worker is asyncio.current_task():
                # Let go of this task: when it ends with an exception (cancelled by the session's end), the
                # exception's frames reference the session, and session → task → exception → frames →
                # session would be a reference cycle keeping the session and its devp2p peer (buffers,
                # connection, the packet being handled) alive until a full garbage collection.
                session.request_worker = None
                session.requests = None

    async def serve(self, session: WakuPeer, payload: bytes, received: float) -> None:
        """Answer one request completely (steps and accounting in the module docstring).

        ``received`` is the request's receipt time on the node's monotonic clock.
        """
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
            refusal = encode_completion_error(err.request_id, err.message, form=form)
            await self._send_complete(session, refusal)
            return
        except CodecError as err:
            metrics.delivery_failures_total["validation"] += 1
            log.info("undecodable p2p request from %s: %s", session.peer.client_id, err)
            return
        form = completion_form_for(decoded.dialect)
        if not self.limiter.allow(session.pubkey, received):
            metrics.delivery_failures_total["peer_req_limit"] += 1
            await self._send_complete(
                session, encode_completion_error(decoded.request_id, RATE_LIMIT_EXCEEDED, form=form)
            )
            return
        failure: str | None = None  # the one type this request is counted under, if any
        final_sent = False
        try:
            try:
                async with asyncio.timeout(self.settings.request_timeout):
                    outcome, failure = await self._stream(session, decoded)
            except TimeoutError:
                failure, outcome = "process", HistoryFailure("failed to process request: timeout")
            completion, failure = self._completion(decoded, outcome, form, failure)
            final_sent = True
            await self._send_complete(session, completion)
        except PeerDisconnected:  # a write found the session over
            if failure is None:
                failure = "historic_msg_resp" if final_sent else PEER_GONE
            raise
        except asyncio.CancelledError:  # the session ended (the node cancels its worker), or the node stops
            if failure is None:
                if final_sent:
                    failure = "historic_msg_resp"
                else:
                    failure = PEER_GONE if session.peer.is_closed else "process"
            raise
        finally:
            if failure is not None:
                metrics.delivery_failures_total[failure] += 1
        metrics.delivery_duration_seconds.observe(max(0.0, self.clock.monotonic() - received))

    def _query(self, session: WakuPeer, decoded: DecodedRequest) -> tuple[MailserverQuery, MessageForm]:
        form = message_form_for(decoded.dialect, shh=session.flavor.is_shh)
        single = form is MessageForm.SINGLE or not decoded.request.batch
        query = MailserverQuery(
            request=decoded.request,
            dialect=decoded.dialect,
            request_id=decoded.request_id,
            requester_id=session.peer.remote_id_hash,
            max_batch_bytes=self.config.max_message_size - _LIST_HEADER_ROOM,
            max_batch_envelopes=1 if single else 0,
            signer=decoded.signer,
        )
        return query, form

    async def _stream(
        self, session: WakuPeer, decoded: DecodedRequest
    ) -> tuple[HistoryComplete | HistoryFailure, str | None]:
        """Send every batch as 0x7f packets; return the backend's final item and the failure type, if any."""
        query, form = self._query(session, decoded)
        metrics, max_size = self.metrics, self.config.max_message_size
        started = time.monotonic()
        final: HistoryComplete | HistoryFailure | None = None
        failure: str | None = None
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
            failure, final = "iterator", HistoryFailure("failed to process request")
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        if final is None:  # the backend ended without a completion
            failure, final = "iterator", HistoryFailure("failed to process request")
        if query.max_batch_envelopes != 1:
            metrics.requests_batched_total += 1
        metrics.requests_bundle_process_duration_seconds.observe(time.monotonic() - started)
        return final, failure

    def _completion(
        self,
        decoded: DecodedRequest,
        outcome: HistoryComplete | HistoryFailure,
        form: CompletionForm,
        failure: str | None,
    ) -> tuple[bytes, str | None]:
        """The 0x7d payload for ``outcome`` and the (possibly new) failure type."""
        if isinstance(outcome, HistoryFailure):
            return encode_completion_error(decoded.request_id, outcome.message, form=form), failure
        try:
            payload = encode_completion(
                decoded.request_id, outcome.last_envelope_hash, outcome.next_cursor, form=form
            )
        except InvalidResponse as err:  # e.g. a cursor status-go clients cannot take
            text = f"failed to process request: {err.message}"
            return encode_completion_error(decoded.request_id, text, form=form), failure or "iterator"
        return payload, failure

    async def _send_complete(self, session: WakuPeer, payload: bytes) -> None:
        await session.peer.send(session.protocol, P2P_REQUEST_COMPLETE_CODE, payload)

    def prune(self, now: float) -> None:
        """Forget stale rate-limit entries (called every expiration cycle).

        Peers with requests still waiting to be checked keep theirs: those requests are checked against
        their receipt time, which may be older than the period by the time the worker gets to them.
        """
        del now  # the limiter runs on the monotonic clock
        self.limiter.prune(self.clock.monotonic(), keep=self._unchecked.keys())
