"""The archive client against a scripted ArchiveService over real gRPC: the request it sends, and how every
kind of answer or failure is translated.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry

from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from meshcore import MeshServer, Registration, build_server
from meshcore.config import RuntimeConfig
from meshcore.errors import Internal, InvalidArgument, Unavailable
from services.ingest.batcher import Outcome, Result
from services.ingest.clients import ArchiveClient
from services.ingest.model import Accepted, ArchiveUnavailable
from tests.integration.ingest.ingest_support import ingest_config, make_envelopes
from wakucodec.pow import calculate_pow

Reply = Callable[[archive_pb2.PutEnvelopesRequest], Any]


@dataclass
class ScriptedArchive(archive_pb2_grpc.ArchiveServiceServicer):
    """PutEnvelopes answers with whatever ``reply`` returns (or raises); requests are recorded."""

    reply: Reply
    requests: list[archive_pb2.PutEnvelopesRequest] = field(default_factory=list)

    async def PutEnvelopes(self, request: archive_pb2.PutEnvelopesRequest, context: Any) -> Any:
        self.requests.append(request)
        result = self.reply(request)
        if asyncio.iscoroutine(result):
            result = await result
        return result


def inserted_all(request: archive_pb2.PutEnvelopesRequest) -> archive_pb2.PutEnvelopesResponse:
    return archive_pb2.PutEnvelopesResponse(
        inserted=len(request.items),
        results=[
            archive_pb2.PutResult(hash=i.hash, outcome=archive_pb2.PUT_OUTCOME_INSERTED)
            for i in request.items
        ],
    )


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[ScriptedArchive, MeshServer]]:
    archive = ScriptedArchive(inserted_all)  # type: ignore[abstract]  # only PutEnvelopes is scripted
    runtime = RuntimeConfig(service_name="fake-archive", grpc_host="127.0.0.1", grpc_port=0, metrics_port=-1)
    mesh = build_server(
        runtime,
        [
            Registration.of(
                "mailmesh.archive.v1.ArchiveService",
                archive_pb2_grpc.add_ArchiveServiceServicer_to_server,
                archive,
            )
        ],
        registry=CollectorRegistry(),
    )
    await mesh.start()
    try:
        yield archive, mesh
    finally:
        await mesh.stop(0)


@pytest.fixture
async def client(scripted: tuple[ScriptedArchive, MeshServer]) -> AsyncIterator[ArchiveClient]:
    cfg = ingest_config(f"127.0.0.1:{scripted[1].port}", INGEST_ARCHIVE_TIMEOUT_SECONDS="20")
    archive_client = ArchiveClient.connect(cfg, registry=CollectorRegistry())
    try:
        yield archive_client
    finally:
        await archive_client.close()


def accepted(count: int) -> list[Accepted]:
    return [Accepted(e, calculate_pow(e), bytes([n]) * 32) for n, e in enumerate(make_envelopes(count))]


async def test_the_request_carries_the_rlp_its_hash_and_the_message_hash_only(
    scripted: tuple[ScriptedArchive, MeshServer], client: ArchiveClient
) -> None:
    items = accepted(3)
    assert await client.put(items) == [Result(Outcome.INSERTED)] * 3
    (request,) = scripted[0].requests
    for item, sent in zip(items, request.items, strict=True):
        env = item.envelope
        # Whole-message equality: nothing else is set (the archive reads the key columns from the rlp).
        assert sent == archive_pb2.PutItem(rlp=env.raw, hash=env.hash, message_hash=item.message_hash)


async def test_per_item_outcomes(scripted: tuple[ScriptedArchive, MeshServer], client: ArchiveClient) -> None:
    scripted[0].reply = lambda request: archive_pb2.PutEnvelopesResponse(
        results=[
            archive_pb2.PutResult(outcome=archive_pb2.PUT_OUTCOME_DUPLICATE),
            archive_pb2.PutResult(outcome=archive_pb2.PUT_OUTCOME_INVALID, detail="expired: past retention"),
        ]
    )
    assert await client.put(accepted(2)) == [
        Result(Outcome.DUPLICATE),
        Result(Outcome.INVALID, "expired: past retention"),
    ]


@pytest.mark.parametrize(
    ("raised", "expected", "text"),
    [
        (Unavailable("store down"), ArchiveUnavailable, "archive unavailable: store down"),
        (InvalidArgument("items: too many"), Internal, "archive refused the write: items: too many"),
    ],
)
async def test_failures_are_translated(
    scripted: tuple[ScriptedArchive, MeshServer],
    client: ArchiveClient,
    raised: Exception,
    expected: type[Exception],
    text: str,
) -> None:
    def fail(request: archive_pb2.PutEnvelopesRequest) -> None:
        raise raised

    scripted[0].reply = fail
    with pytest.raises(expected) as info:
        await client.put(accepted(1))
    assert str(info.value) == text
    assert isinstance(info.value.__cause__, grpc.aio.AioRpcError)


async def test_a_hung_archive_is_unavailable_after_the_deadline(
    scripted: tuple[ScriptedArchive, MeshServer],
) -> None:
    cfg = ingest_config(f"127.0.0.1:{scripted[1].port}", INGEST_ARCHIVE_TIMEOUT_SECONDS="1")
    short = ArchiveClient.connect(cfg, registry=CollectorRegistry())
    try:
        await short.put(accepted(1))  # connected (a cold connection on a loaded machine may take a while)

        async def hang(request: archive_pb2.PutEnvelopesRequest) -> None:
            await asyncio.Event().wait()

        scripted[0].reply = hang
        with pytest.raises(ArchiveUnavailable, match="archive unavailable"):
            await asyncio.wait_for(short.put(accepted(1)), 10)
    finally:
        await short.close()


@pytest.mark.parametrize(
    "reply",
    [
        archive_pb2.PutEnvelopesResponse(results=[]),
        archive_pb2.PutEnvelopesResponse(results=[archive_pb2.PutResult()]),  # outcome UNSPECIFIED
    ],
)
async def test_malformed_answers_are_internal(
    scripted: tuple[ScriptedArchive, MeshServer],
    client: ArchiveClient,
    reply: archive_pb2.PutEnvelopesResponse,
) -> None:
    scripted[0].reply = lambda request: reply
    with pytest.raises(Internal):
        await client.put(accepted(1))
