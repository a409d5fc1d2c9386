"""A minimal real-gRPC ArchiveService over ``archivestore.sqlite.SqliteStore``, for history's tests.

Only what history-query and the tests call: PutEnvelopes, QueryEnvelopes, ContainsEnvelopes. It is used
when the real archive service (``services.archive.server``) is not importable; both speak archive.proto, so
the tests do not care which one runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from archivestore.errors import StoreError
from archivestore.retention import RetentionPolicy
from archivestore.sqlite.store import SqliteStore
from archivestore.types import Direction, Position, PutItem, PutOutcome, Query, StoredEnvelope
from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from mailmesh.common.v1 import common_pb2
from meshcore import MeshServer, Registration, RuntimeConfig, build_server, load_config
from meshcore.errors import InvalidArgument, Unavailable
from wakucodec.envelope import decode_envelope

_OUTCOME = {
    PutOutcome.INSERTED: archive_pb2.PUT_OUTCOME_INSERTED,
    PutOutcome.DUPLICATE: archive_pb2.PUT_OUTCOME_DUPLICATE,
    PutOutcome.EXPIRED: archive_pb2.PUT_OUTCOME_INVALID,
}


class ArchiveDouble(archive_pb2_grpc.ArchiveServiceServicer):
    """The three RPCs over one SqliteStore; store failures → UNAVAILABLE, caller errors → INVALID_ARGUMENT."""

    def __init__(self, store: SqliteStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self._clock = clock

    async def PutEnvelopes(self, request: archive_pb2.PutEnvelopesRequest, context: Any) -> Any:
        decoded = [(decode_envelope(i.rlp), i.message_hash) for i in request.items]
        items = [
            PutItem(StoredEnvelope(e.sent, e.hash, e.topic, e.expiry, e.raw, message_hash=mh or None))
            for e, mh in decoded
        ]
        try:
            result = await self.store.put(items, now=int(self._clock()))
        except StoreError as err:
            raise Unavailable(str(err)) from err
        return archive_pb2.PutEnvelopesResponse(
            inserted=result.inserted,
            duplicates=result.duplicates,
            results=[
                archive_pb2.PutResult(hash=i.envelope.hash, outcome=_OUTCOME[o])
                for i, o in zip(items, result.outcomes, strict=True)
            ],
        )

    async def QueryEnvelopes(self, request: archive_pb2.QueryEnvelopesRequest, context: Any) -> Any:
        if not 1 <= request.limit <= 1000:
            raise InvalidArgument(f"limit must be 1..1000, got {request.limit}")
        query = Query(
            lower=request.range.lower,
            upper=request.range.upper,
            limit=request.limit,
            topics=frozenset(request.topics),
            bloom=request.bloom or None,
            after=Position(request.after.sent, request.after.hash) if request.HasField("after") else None,
            direction=Direction.BACKWARD
            if request.direction == common_pb2.DIRECTION_BACKWARD
            else Direction.FORWARD,
        )
        try:
            page = await self.store.query(query, now=int(self._clock()))
        except ValueError as err:
            raise InvalidArgument(str(err)) from err
        except StoreError as err:
            raise Unavailable(str(err)) from err
        reply = archive_pb2.QueryEnvelopesResponse(has_more=page.has_more)
        if request.view == archive_pb2.ENVELOPE_VIEW_PACKED:
            reply.packed.rlp = b"".join(e.raw for e in page.envelopes)
            reply.packed.rlp_sizes.extend(len(e.raw) for e in page.envelopes)
            reply.packed.sent.extend(e.sent for e in page.envelopes)
            reply.packed.hashes = b"".join(e.hash for e in page.envelopes)
        for e in page.envelopes if request.view != archive_pb2.ENVELOPE_VIEW_PACKED else ():
            decoded = decode_envelope(e.raw)
            reply.envelopes.add(
                rlp=e.raw,
                hash=e.hash,
                expiry=decoded.expiry,
                ttl=decoded.ttl,
                topic=e.topic,
                sent=e.sent,
                nonce=decoded.nonce,
                data=b"" if request.view == archive_pb2.ENVELOPE_VIEW_NO_DATA else decoded.data,
            )
        if page.envelopes:
            reply.last.CopyFrom(
                common_pb2.Position(sent=page.envelopes[-1].sent, hash=page.envelopes[-1].hash)
            )
        return reply

    async def ContainsEnvelopes(self, request: archive_pb2.ContainsEnvelopesRequest, context: Any) -> Any:
        hashes = [*request.envelope_hashes, *request.message_hashes]
        try:
            present = await self.store.contains(hashes, now=int(self._clock()))
        except StoreError as err:
            raise Unavailable(str(err)) from err
        found = {h for h, p in zip(hashes, present, strict=True) if p}
        return archive_pb2.ContainsEnvelopesResponse(
            present_envelope_hashes=list(dict.fromkeys(h for h in request.envelope_hashes if h in found)),
            present_message_hashes=list(dict.fromkeys(h for h in request.message_hashes if h in found)),
        )


async def start_archive_double(path: Path, *, port: int = 0) -> tuple[MeshServer, SqliteStore]:
    """Open a SqliteStore at ``path`` (kept forever) and serve it on 127.0.0.1:``port``; started."""
    store = SqliteStore(path, RetentionPolicy(default_s=None))
    await store.open()
    runtime = load_config(
        RuntimeConfig,
        {
            "ARCHIVEDOUBLE_SERVICE_NAME": "archive-double",
            "ARCHIVEDOUBLE_GRPC_HOST": "127.0.0.1",
            "ARCHIVEDOUBLE_GRPC_PORT": str(port),
            "ARCHIVEDOUBLE_METRICS_PORT": "-1",
            "ARCHIVEDOUBLE_SHUTDOWN_GRACE_SECONDS": "1",
        },
        prefix="ARCHIVEDOUBLE",
    )
    mesh = build_server(
        runtime,
        [
            Registration.of(
                "mailmesh.archive.v1.ArchiveService",
                archive_pb2_grpc.add_ArchiveServiceServicer_to_server,
                ArchiveDouble(store),  # type: ignore[abstract]  # the stubs mark every RPC abstract
            )
        ],
        registry=CollectorRegistry(),
    )
    mesh.add_shutdown_hook(store.close, after_drain=True)
    await mesh.start()
    return mesh, store
