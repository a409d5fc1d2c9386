"""history-query over real gRPC in front of a real archive on SQLite: paging, cursors, replicas, failures."""

from __future__ import annotations

import time
from typing import Any

import grpc
import grpc.aio
import pytest

from archivestore.types import Direction
from mailmesh.common.v1 import common_pb2
from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from tests.integration.history.conftest import HistoryFactory
from tests.integration.history.history_support import (
    BASE,
    DIRECTION,
    HistoryHandle,
    expected_order,
    make_envelopes,
    page_through,
    put,
    query,
)
from wakucodec.bloom import topics_to_bloom
from wakucodec.envelope import Envelope
from wakucodec.keccak import keccak256
from wakucodec.rlp import split_list

A, B, C = bytes.fromhex("01020304"), bytes.fromhex("0a0b0c0d"), bytes.fromhex("deadbeef")


@pytest.fixture
async def corpus(archive_stub: Any) -> dict[bytes, list[Envelope]]:
    """150 envelopes over three topics, several per second, sizes varying; put straight into the archive."""
    by_topic = {
        A: make_envelopes([BASE + i // 4 for i in range(70)], A, data_size=200, tag=1),
        B: make_envelopes([BASE + i // 2 for i in range(50)], B, data_size=900, tag=2),
        C: make_envelopes([BASE + 5 + i for i in range(30)], C, data_size=50, tag=3),
    }
    await put(archive_stub, [e for envs in by_topic.values() for e in envs])
    return by_topic


@pytest.mark.parametrize("direction", list(Direction))
@pytest.mark.parametrize("filter_kind", ["topics", "bloom"])
async def test_paging_many_pages_no_duplicates_no_gaps(
    history_stub: Any, corpus: dict[bytes, list[Envelope]], direction: Direction, filter_kind: str
) -> None:
    wanted = [A, B] if filter_kind == "topics" else [A, C]
    filters: dict[str, Any] = (
        {"topics": wanted} if filter_kind == "topics" else {"bloom": topics_to_bloom(wanted)}
    )
    lower, upper = BASE + 2, BASE + 30  # trims both ends: bounds are inclusive
    expected = expected_order([e for t in wanted for e in corpus[t] if lower <= e.sent <= upper], direction)
    pages = await page_through(
        history_stub,
        lower=lower,
        upper=upper,
        limit=9,
        direction=DIRECTION[direction],
        max_batch_bytes=2048,
        **filters,
    )
    got = [raw for page in pages for raw in page.envelopes]
    assert len(pages) >= 5
    assert len(got) == len(set(got)), "duplicates"
    assert got == expected, "gaps or wrong order"
    for page in pages:
        for batch in page.batches:
            body = sum(map(len, batch))
            assert body < 2048 or len(batch) == 1
            assert len(split_list(_list(batch))) == len(batch)


def _list(batch: list[bytes]) -> bytes:
    from wakucodec.responses import encode_p2p_messages

    return encode_p2p_messages(batch)


async def test_status_go_pagination_vector(history_stub: Any, archive_stub: Any) -> None:
    now = int(time.time())
    envs = make_envelopes(range(now - 10, now), A)
    await put(archive_stub, envs)
    first = await query(history_stub, lower=now - 10, upper=0, topics=[A], limit=6)
    assert first.envelopes == expected_order(envs, Direction.FORWARD)[:6]
    assert first.complete.delivered == 6
    assert first.complete.next_cursor[:4] == (now - 5).to_bytes(4, "big")
    assert first.complete.last_envelope_hash == keccak256(first.envelopes[-1])
    second = await query(
        history_stub, lower=now - 10, upper=0, topics=[A], limit=6, cursor=first.complete.next_cursor
    )
    assert second.envelopes == expected_order(envs, Direction.FORWARD)[6:]
    assert second.complete.next_cursor == b"" and second.complete.delivered == 4


async def test_nothing_matched(history_stub: Any, corpus: dict[bytes, list[Envelope]]) -> None:
    result = await query(history_stub, lower=BASE - 100, upper=BASE - 1, topics=[A])
    assert result.batches == []
    assert result.complete.last_envelope_hash == bytes(32)
    assert result.complete.next_cursor == b"" and result.complete.delivered == 0


async def test_one_envelope_per_batch(history_stub: Any, corpus: dict[bytes, list[Envelope]]) -> None:
    result = await query(history_stub, lower=BASE, upper=BASE + 100, topics=[C], max_batch_envelopes=1)
    assert [len(b) for b in result.batches] == [1] * 30


async def test_cursor_valid_on_every_replica_sharing_the_secret(
    make_history: HistoryFactory, corpus: dict[bytes, list[Envelope]]
) -> None:
    secret, other = b"\x01" * 32, b"\x02" * 32
    one = await make_history([secret])
    two = await make_history([secret])
    rotated = await make_history([other, secret])  # new secret first, the old one still verifies
    foreign = await make_history([other])
    fields: dict[str, Any] = {"lower": BASE, "upper": BASE + 100, "topics": [A], "limit": 10}
    async with _stub(one) as s1, _stub(two) as s2, _stub(rotated) as s3, _stub(foreign) as s4:
        first = await query(s1, **fields)
        cursor = first.complete.next_cursor
        on_two = await query(s2, **fields, cursor=cursor)
        assert on_two.envelopes == expected_order(corpus[A], Direction.FORWARD)[10:20]
        assert (await query(s3, **fields, cursor=cursor)).envelopes == on_two.envelopes
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await query(s4, **fields, cursor=cursor)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "invalid cursor: authentication failed" in (err.value.details() or "")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c[:-1] + bytes([c[-1] ^ 1]), "invalid cursor: authentication failed"),
        (lambda c: c[:10] + bytes([c[10] ^ 0x40]) + c[11:], "invalid cursor: authentication failed"),
        (lambda c: c[:35], "invalid cursor: must be 36 bytes, got 35"),
        (lambda c: c + b"\x00", "invalid cursor: must be 36 bytes, got 37"),
        (
            lambda c: (BASE - 500).to_bytes(4, "big") + c[4:],
            "invalid cursor: it belongs to a different query",
        ),
    ],
)
async def test_tampered_cursor_is_invalid_argument(
    history_stub: Any, corpus: dict[bytes, list[Envelope]], mutate: Any, message: str
) -> None:
    fields: dict[str, Any] = {"lower": BASE, "upper": BASE + 100, "topics": [A], "limit": 10}
    cursor = (await query(history_stub, **fields)).complete.next_cursor
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await query(history_stub, **fields, cursor=mutate(cursor))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in (err.value.details() or "")


async def test_cursor_of_another_query_or_direction(
    history_stub: Any, corpus: dict[bytes, list[Envelope]]
) -> None:
    fields: dict[str, Any] = {"lower": BASE, "upper": BASE + 100, "topics": [A], "limit": 10}
    cursor = (await query(history_stub, **fields)).complete.next_cursor
    for other in ({**fields, "topics": [B]}, {**fields, "upper": BASE + 99}, {**fields, "direction": 2}):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await query(history_stub, **other, cursor=cursor)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith("invalid cursor: ")
    assert "issued for a forward query" in (err.value.details() or "")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"lower": 10, "upper": 9, "topics": [A]}, "query range is invalid: lower > upper"),
        ({"lower": 1, "upper": 9}, "bloom filter and topics is empty"),
        ({"lower": 1, "upper": 9, "topics": [b"\x01"]}, "topic must be 4 bytes"),
        ({"lower": 1, "upper": 9, "topics": [A], "direction": 9}, "unknown direction"),
    ],
)
async def test_validation_errors(
    history: HistoryHandle, history_stub: Any, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await query(history_stub, **fields)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == message or message in (err.value.details() or "")
    assert history.metric("mailserver_delivery_failures_total", {"type": "validation"}) == 1


async def test_limit_above_1000_is_capped(history_stub: Any, archive_stub: Any) -> None:
    envs = make_envelopes([BASE + i // 10 for i in range(1200)], A, data_size=8)
    await put(archive_stub, envs)
    result = await query(history_stub, lower=BASE, upper=BASE + 1000, topics=[A], limit=5000)
    assert result.complete.delivered == 1000
    assert result.envelopes == expected_order(envs, Direction.FORWARD)[:1000]
    assert result.complete.next_cursor


async def test_archive_down_is_unavailable_within_the_deadline(make_history: HistoryFactory) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    down = await make_history(archive_address=dead)
    async with _stub(down) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await query(stub, timeout=5, lower=1, upper=9, topics=[A])
        # UNAVAILABLE is history's own answer: had it waited out the caller's deadline, the client would
        # have seen DEADLINE_EXCEEDED instead.
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Lookup(history_pb2.LookupRequest(envelope_hashes=[b"\x00" * 32]), timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert down.metric("mailserver_delivery_failures_total", {"type": "iterator"}) == 1


async def test_archive_stopping_is_unavailable(make_history: HistoryFactory, tmp_path: Any) -> None:
    from tests.integration.history.history_support import start_archive

    archive = await start_archive(tmp_path / "other.db")
    replica = await make_history(archive_address=archive.address, HISTORY_ARCHIVE_RETRY_ATTEMPTS="1")
    async with _stub(replica) as stub:
        assert (await query(stub, lower=1, upper=9, topics=[A])).complete.delivered == 0
        await archive.stop()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await query(stub, timeout=5, lower=1, upper=9, topics=[A])
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_lookup(history_stub: Any, corpus: dict[bytes, list[Envelope]]) -> None:
    a0, b0 = corpus[A][0].hash, corpus[B][0].hash
    missing = b"\x07" * 32
    reply = await history_stub.Lookup(
        history_pb2.LookupRequest(envelope_hashes=[b0, missing, a0, b0], message_hashes=[missing]), timeout=5
    )
    assert list(reply.stored_envelope_hashes) == [b0, a0]
    assert list(reply.stored_message_hashes) == []
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await history_stub.Lookup(history_pb2.LookupRequest(envelope_hashes=[b"\x01"]), timeout=5)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_metrics(
    history: HistoryHandle, history_stub: Any, corpus: dict[bytes, list[Envelope]]
) -> None:
    first = await query(history_stub, lower=BASE, upper=BASE + 100, topics=[A], limit=10)
    await query(
        history_stub, lower=BASE, upper=BASE + 100, topics=[A], limit=10, cursor=first.complete.next_cursor
    )
    await query(history_stub, lower=BASE, upper=BASE + 100, bloom=topics_to_bloom([C]))
    assert history.metric("mailserver_delivery_attempts_total") == 3
    assert history.metric("mailserver_envelope_queries_total", {"filter": "partial", "history": "full"}) == 1
    assert (
        history.metric("mailserver_envelope_queries_total", {"filter": "partial", "history": "partial"}) == 1
    )
    assert history.metric("mailserver_envelope_queries_total", {"filter": "full", "history": "full"}) == 1
    assert history.metric("mailserver_envelopes_total") == 50
    assert history.metric("mailserver_sent_envelope_batch_size_bytes_count") >= 3
    assert history.metric("mailserver_sent_envelope_batch_size_bytes_bucket", {"le": "1024.0"}) == 0
    assert history.metric("mailserver_delivery_duration_seconds_count") == 3
    assert history.metric("mailserver_requests_bundle_process_duration_seconds_count") == 3
    assert history.metric("grpc_server_handled_total", _handled("Query", "OK")) == 3
    assert history.metric("grpc_client_handled_total", _client("QueryEnvelopes", "OK")) >= 3


def _handled(method: str, code: str) -> dict[str, str]:
    return {
        "grpc_type": "server_stream",
        "grpc_service": "mailmesh.history.v1.HistoryQueryService",
        "grpc_method": method,
        "grpc_code": code,
    }


def _client(method: str, code: str) -> dict[str, str]:
    return {
        "grpc_type": "unary",
        "grpc_service": "mailmesh.archive.v1.ArchiveService",
        "grpc_method": method,
        "grpc_code": code,
    }


class _stub:  # noqa: N801 - used like a function
    def __init__(self, handle: HistoryHandle) -> None:
        self._channel = grpc.aio.insecure_channel(handle.address)

    async def __aenter__(self) -> history_pb2_grpc.HistoryQueryServiceAsyncStub:
        return history_pb2_grpc.HistoryQueryServiceStub(self._channel)

    async def __aexit__(self, *exc: object) -> None:
        await self._channel.close()


def test_direction_numbers_match_the_cursor_bytes() -> None:
    assert common_pb2.DIRECTION_FORWARD == 1 and common_pb2.DIRECTION_BACKWARD == 2
