"""The bridge from the node's mailserver to history-query: the edge peer's :class:`wakunode.HistoryBackend`.

wakunode decodes the 0x7e (any dialect), applies the per-peer request rate limit and turns what this bridge
yields into 0x7f packets and one 0x7d in the request's dialect. The bridge runs one
``HistoryQueryService.Query`` per request (through :class:`HistoryQueryPort`) with the batch budget wakunode
gives (the max message size less the list header), and maps failures to the 0x7d ``ERROR=`` texts:

=============================  ===========================================================================
history-query outcome          0x7d
=============================  ===========================================================================
INVALID_ARGUMENT (before any   ``request is invalid: <status-go text>`` (e.g. ``invalid cursor``)
batch)
RESOURCE_EXHAUSTED             ``rate limit exceeded`` (status-go's text)
anything else (UNAVAILABLE,    ``failed to process request`` — batches already sent stay valid
deadline, internal)            (protocol-notes §4.6)
=============================  ===========================================================================

Each request is one trace: a SERVER span ``mailserver request`` (the 0x7e arrives over RLPx, where no
gRPC interceptor sees it) is current while history-query's stream is read, so the Query call, history-query's
archive reads and the archive's spans are its descendants (docs/operations.md "Traces").

Pure: no gRPC, no protos.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator
from typing import Protocol

from opentelemetry.trace import Span, SpanKind, TracerProvider

from meshcore.errors import InvalidArgument, MeshError, ResourceExhausted
from meshcore.tracing import start_span, traced_steps
from wakucodec.responses import VALIDATION_ERROR_PREFIX
from wakunode.mailserver import RATE_LIMIT_EXCEEDED
from wakunode.ports import HistoryBatch, HistoryComplete, HistoryFailure, HistoryItem, MailserverQuery

__all__ = ["PROCESS_FAILURE", "HistoryQueryPort", "MailserverBridge"]

log = logging.getLogger(__name__)

#: status-go's text for a request that failed while being processed.
PROCESS_FAILURE = "failed to process request"


class HistoryQueryPort(Protocol):
    """history-query's Query stream; failures raise :class:`meshcore.errors.MeshError` categories."""

    def query(self, query: MailserverQuery) -> AsyncIterator[HistoryBatch | HistoryComplete]:
        """Run one query: batches of raw envelopes, then exactly one completion."""
        ...


class MailserverBridge:
    """HistoryBackend over a :class:`HistoryQueryPort`; counts outcomes in :attr:`outcomes`."""

    def __init__(self, port: HistoryQueryPort, tracer_provider: TracerProvider | None = None) -> None:
        self._port = port
        self._tracer_provider = tracer_provider  # None: the global one
        #: Queries by outcome, each exactly once: ``complete``, ``invalid``, ``rate_limited``, ``failed``, or
        #: ``abandoned`` — the node stopped reading before history-query's answer was complete (the requester
        #: left, or the request timed out); the query is cancelled.
        self.outcomes: Counter[str] = Counter()

    async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryItem]:
        """Yield the port's batches, then its completion or a :class:`HistoryFailure`."""
        request = query.request
        span = start_span(
            "mailserver request",
            kind=SpanKind.SERVER,
            attributes={
                "mailmesh.dialect": query.dialect.value,
                "mailmesh.request_id": query.request_id.hex(),
                "mailmesh.requester": query.requester_id.hex()[:16],
                "mailmesh.topics": len(request.topics),
                "mailmesh.limit": request.limit,
            },
            tracer_provider=self._tracer_provider,
        )
        # The outcome is decided inside the traced steps: traced_steps ends the span as soon as the steps
        # raise, so an outcome set after a failure had reached this loop would go to an ended span.
        stream = traced_steps(span, self._answer(query, span))
        try:
            async for item in stream:
                yield item
        finally:  # closed before the end: the answer, closed inside the span, counts the query abandoned
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    async def _answer(self, query: MailserverQuery, span: Span) -> AsyncIterator[HistoryItem]:
        """The port's items, its failures mapped to 0x7d texts; the outcome counted and set on ``span``."""
        settled = False

        def settle(outcome: str) -> None:
            nonlocal settled
            settled = True
            self.outcomes[outcome] += 1  # counted before yielding: the node may close us after the item
            span.set_attribute("mailmesh.outcome", outcome)

        stream = self._port.query(query)
        try:
            async for item in stream:
                if isinstance(item, HistoryComplete):
                    settle("complete")
                    yield item
                    return
                yield item
        except InvalidArgument as err:
            settle("invalid")
            yield HistoryFailure(VALIDATION_ERROR_PREFIX + err.message)
            return
        except ResourceExhausted:
            settle("rate_limited")
            yield HistoryFailure(RATE_LIMIT_EXCEEDED)
            return
        except MeshError as err:
            settle("failed")
            log.warning("history query failed: %s: %s", type(err).__name__, err.message)
            yield HistoryFailure(PROCESS_FAILURE)
            return
        except Exception:
            settle("failed")  # the node answers it with "failed to process request"
            raise
        except BaseException:  # GeneratorExit (closed before the end) or CancelledError
            if not settled:
                settle("abandoned")
            raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        settle("failed")
        log.warning("history query ended without a completion")
        yield HistoryFailure(PROCESS_FAILURE)
