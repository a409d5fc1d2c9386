"""The :class:`wakunode.HistoryBackend` of the edge peer: 0x7e requests answered by history-query.

wakunode decodes the 0x7e (any dialect), applies the per-peer request rate limit and turns what this adapter
yields into 0x7f packets and one 0x7d in the request's dialect. The adapter runs one
``HistoryQueryService.Query`` per request (through :class:`HistoryPort`) with the batch budget wakunode gives
(the max message size less the list header), and maps failures to the 0x7d ``ERROR=`` texts:

=============================  ===========================================================================
history-query outcome          0x7d
=============================  ===========================================================================
INVALID_ARGUMENT (before any   ``request is invalid: <status-go text>`` (e.g. ``invalid cursor``)
batch)
RESOURCE_EXHAUSTED             ``rate limit exceeded`` (status-go's text)
anything else (UNAVAILABLE,    ``failed to process request`` — batches already sent stay valid (wire §4.6)
deadline, internal)
=============================  ===========================================================================

Pure: no gRPC, no protos.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator
from typing import Protocol

from meshcore.errors import InvalidArgument, MeshError, ResourceExhausted
from wakucodec.responses import VALIDATION_ERROR_PREFIX
from wakunode.mailserver import RATE_LIMIT_EXCEEDED
from wakunode.ports import HistoryBatch, HistoryComplete, HistoryFailure, HistoryItem, HistoryQuery

__all__ = ["PROCESS_FAILURE", "HistoryAdapter", "HistoryPort"]

log = logging.getLogger(__name__)

#: status-go's text for a request that failed while being processed.
PROCESS_FAILURE = "failed to process request"


class HistoryPort(Protocol):
    """history-query's Query stream; failures raise :class:`meshcore.errors.MeshError` categories."""

    def query(self, query: HistoryQuery) -> AsyncIterator[HistoryBatch | HistoryComplete]:
        """Run one query: batches of raw envelopes, then exactly one completion."""
        ...


class HistoryAdapter:
    """HistoryBackend over a :class:`HistoryPort`; counts outcomes in :attr:`outcomes`."""

    def __init__(self, port: HistoryPort) -> None:
        self._port = port
        #: Requests by outcome: ``complete``, ``invalid``, ``rate_limited``, ``failed``.
        self.outcomes: Counter[str] = Counter()

    async def query(self, query: HistoryQuery) -> AsyncIterator[HistoryItem]:
        """Yield the port's batches, then its completion or a :class:`HistoryFailure`."""
        stream = self._port.query(query)
        completed = False
        try:
            async for item in stream:
                if isinstance(item, HistoryComplete):
                    completed = True
                    self.outcomes["complete"] += 1  # counted first: the node closes us after this item
                    yield item
                    return
                yield item
        except InvalidArgument as err:
            self.outcomes["invalid"] += 1
            yield HistoryFailure(VALIDATION_ERROR_PREFIX + err.message)
            return
        except ResourceExhausted:
            self.outcomes["rate_limited"] += 1
            yield HistoryFailure(RATE_LIMIT_EXCEEDED)
            return
        except MeshError as err:
            self.outcomes["failed"] += 1
            log.warning("history query failed: %s: %s", type(err).__name__, err.message)
            yield HistoryFailure(PROCESS_FAILURE)
            return
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        if not completed:
            self.outcomes["failed"] += 1
            log.warning("history query ended without a completion")
            yield HistoryFailure(PROCESS_FAILURE)
