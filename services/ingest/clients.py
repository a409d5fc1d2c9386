"""The archive, as ingest sees it: one idempotent, deadline-bounded batch write (ArchiveService.PutEnvelopes).

Failures come back as our errors: a transient one (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, i.e.
"the write may or may not have happened, retry it") as :class:`~services.ingest.model.ArchiveUnavailable`,
anything else as :class:`~meshcore.errors.Internal` — never as the archive's own INVALID_ARGUMENT, which
would tell ingest's caller that *its* request was wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
import grpc.aio
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from meshcore import make_channel, remaining_timeout, translate_rpc_error
from meshcore.errors import DeadlineExceeded, Internal, ResourceExhausted, Unavailable
from services.ingest.batcher import Outcome, Result
from services.ingest.config import Config
from services.ingest.model import Accepted, ArchiveUnavailable

__all__ = ["ARCHIVE_SERVICE", "ArchiveClient"]

ARCHIVE_SERVICE = "mailmesh.archive.v1.ArchiveService"
#: grpcio applies a service-config timeout about one second early (grpc/grpc#34547, #40633; measured with
#: grpcio 1.85: "1s" fails every call at once, "1.2s" works). The per-call timeout is exact, so it is the one
#: that bounds a write; the channel default is set this much later so that it never fires first.
_SERVICE_CONFIG_SLACK_S = 2.0
_TRANSIENT = (Unavailable, DeadlineExceeded, ResourceExhausted)
_OUTCOMES = {
    archive_pb2.PUT_OUTCOME_INSERTED: Outcome.INSERTED,
    archive_pb2.PUT_OUTCOME_DUPLICATE: Outcome.DUPLICATE,
    archive_pb2.PUT_OUTCOME_INVALID: Outcome.INVALID,
    archive_pb2.PUT_OUTCOME_EXPIRED: Outcome.EXPIRED,
}


def _put_item(item: Accepted) -> archive_pb2.PutItem:
    # The RLP and its hash are all the archive keys a row by (it reads sent, topic and expiry from the RLP
    # and checks the hash; archive.proto PutItem); the PoW ingest computed is its own business.
    return archive_pb2.PutItem(rlp=item.envelope.raw, hash=item.envelope.hash, message_hash=item.message_hash)


class ArchiveClient:
    """Writes batches of validated envelopes to the archive."""

    def __init__(self, channel: grpc.aio.Channel, *, timeout_s: float) -> None:
        self._channel = channel
        self._stub = archive_pb2_grpc.ArchiveServiceStub(channel)
        self._timeout_s = timeout_s

    @classmethod
    def connect(
        cls,
        cfg: Config,
        *,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> ArchiveClient:
        """Open a channel to ``cfg.archive_addr``: retries of the idempotent write, bounded reconnects."""
        reconnect_max_ms = int(cfg.archive_reconnect_max_s * 1000)
        channel = make_channel(
            cfg.archive_addr,
            service_name=ARCHIVE_SERVICE,
            timeout_s=cfg.archive_timeout_s + _SERVICE_CONFIG_SLACK_S,
            retry_attempts=cfg.archive_retry_attempts,
            idempotent_methods=("PutEnvelopes",) if cfg.archive_retry_attempts > 1 else (),
            max_message_bytes=cfg.runtime.max_message_bytes,
            registry=registry,
            tracer_provider=tracer_provider,
            options=(
                ("grpc.initial_reconnect_backoff_ms", min(100, reconnect_max_ms)),
                ("grpc.min_reconnect_backoff_ms", min(100, reconnect_max_ms)),
                ("grpc.max_reconnect_backoff_ms", reconnect_max_ms),
            ),
        )
        return cls(channel, timeout_s=cfg.archive_timeout_s)

    async def put(self, items: Sequence[Accepted]) -> list[Result]:
        """Store ``items`` durably; one result per item, in order (the batcher's sink)."""
        request = archive_pb2.PutEnvelopesRequest(items=[_put_item(item) for item in items])
        try:
            reply = await self._stub.PutEnvelopes(request, timeout=remaining_timeout(self._timeout_s))
        except grpc.aio.AioRpcError as err:
            error = translate_rpc_error(err)
            if isinstance(error, _TRANSIENT):
                raise ArchiveUnavailable(f"archive unavailable: {error.message}", error.details) from err
            raise Internal(f"archive refused the write: {error.message}", error.details) from err
        if len(reply.results) != len(items):
            raise Internal(
                "archive answered a write with the wrong number of results",
                {"items": len(items), "results": len(reply.results)},
            )
        out: list[Result] = []
        for result in reply.results:
            outcome = _OUTCOMES.get(result.outcome)
            if outcome is None:
                raise Internal("archive answered a write without an outcome", {"outcome": result.outcome})
            out.append(Result(outcome, result.detail))
        return out

    async def close(self) -> None:
        """Close the channel (after the last write)."""
        await self._channel.close()
