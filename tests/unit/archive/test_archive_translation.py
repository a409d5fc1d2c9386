"""Proto ⇄ archivestore translation, error mapping and metrics, calling the servicer directly (no sockets)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from archivestore.errors import SchemaError, StoreCorrupt, StoreError, StoreUnavailable
from archivestore.retention import RetentionPolicy
from archivestore.types import StoredEnvelope
from mailmesh.archive.v1 import archive_pb2 as pb
from mailmesh.common.v1 import common_pb2
from meshcore.codes import status_code_for
from meshcore.errors import FailedPrecondition, Internal, InvalidArgument, MeshError, Unavailable
from services.archive import maintenance as mt
from services.archive.errors import ArchiveCorrupt, EnvelopeNotFound, store_errors
from services.archive.lifecycle import StoreGate
from services.archive.metrics import SIZE_BUCKETS, ArchiveMetrics
from services.archive.servicer import ArchiveServicer, ServicerSettings
from services.archive.translate import envelope_message
from services.archive.writes import EXPIRED_DETAIL
from tests.integration.archive.model import ModelStore
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.pow import calculate_pow

NOW = 1_700_000_000
DAY = 86_400
A = bytes.fromhex("aabbccdd")
CONTEXT: Any = None  # the handlers never touch the context


def envelope(sent: int, n: int = 0, size: int = 40) -> Envelope:
    data = (hashlib.sha256(f"{sent}/{n}".encode()).digest() * 8)[:size]
    return make_envelope(expiry=sent + 60, ttl=60, topic=A, data=data, nonce=n)


def item(e: Envelope, **kw: Any) -> pb.PutItem:
    return pb.PutItem(rlp=e.raw, hash=e.hash, **kw)


def as_stored(e: Envelope) -> StoredEnvelope:
    return StoredEnvelope(e.sent, e.hash, e.topic, e.expiry, e.raw)


async def servicer(retention: RetentionPolicy | None = None) -> tuple[ArchiveServicer, CollectorRegistry]:
    store = ModelStore(retention or RetentionPolicy(default_s=None))
    gate = StoreGate(store)
    assert await gate.try_open()
    registry = CollectorRegistry()
    settings = ServicerSettings(
        layout=mt.Layout(3600),
        default_shards={mt.TIME_TABLE: 1, mt.TOPIC_TABLE: 1},
        retention=RetentionPolicy(default_s=None),
        max_put_items=1000,
        max_envelope_bytes=1024 * 1024,
        query_default_max_bytes=3 * 1024 * 1024,
        max_message_bytes=16 * 1024 * 1024,
    )
    return ArchiveServicer(gate, settings, ArchiveMetrics("model", registry), clock=lambda: NOW), registry


def test_envelope_message_derives_every_field_from_the_rlp() -> None:
    e = envelope(NOW, 3, size=100)
    full = envelope_message(as_stored(e), view="full")
    assert (full.rlp, full.hash, full.expiry, full.ttl, full.topic, full.nonce, full.sent) == (
        e.raw,
        e.hash,
        e.expiry,
        60,
        A,
        3,
        NOW,
    )
    assert full.data == e.data and full.pow == calculate_pow(e)
    assert envelope_message(as_stored(e), view="no_data").data == b""


def test_keys_view_serves_the_stored_key_columns_without_decoding() -> None:
    e = envelope(NOW)
    keys = envelope_message(as_stored(e), view="keys")
    assert (keys.rlp, keys.hash, keys.sent, keys.topic, keys.expiry, keys.ttl) == (
        e.raw,
        e.hash,
        e.sent,
        e.topic,
        e.expiry,
        e.ttl,
    )
    assert keys.data == b"" and keys.pow == 0.0 and keys.nonce == 0


@pytest.mark.parametrize(
    "broken",
    [
        lambda s: StoredEnvelope(s.sent, b"\x00" * 32, s.topic, s.expiry, s.raw),
        lambda s: StoredEnvelope(s.sent + 1, s.hash, s.topic, s.expiry, s.raw),
        lambda s: StoredEnvelope(s.sent, s.hash, b"\x00\x00\x00\x00", s.expiry, s.raw),
        lambda s: StoredEnvelope(s.sent, s.hash, s.topic, s.expiry, s.raw[:-1]),
    ],
)
def test_a_stored_row_that_no_longer_matches_its_key_is_never_served(broken: Any) -> None:
    with pytest.raises(ArchiveCorrupt) as info:
        envelope_message(broken(as_stored(envelope(NOW))), view="full")
    assert status_code_for(info.value).name == "INTERNAL"


@pytest.mark.parametrize(
    ("raised", "category", "message"),
    [
        (StoreUnavailable("node down"), Unavailable, "archive store unavailable: node down"),
        (StoreCorrupt("bad row"), Internal, "archive data failed an integrity check: bad row"),
        (SchemaError("newer schema"), FailedPrecondition, "archive schema problem: newer schema"),
        (StoreError("odd"), Internal, "archive storage error during op"),
        (ValueError("limit must be at least 1"), InvalidArgument, "op: limit must be at least 1"),
    ],
)
def test_store_errors_become_mesh_errors(raised: Exception, category: type[MeshError], message: str) -> None:
    kinds: list[str] = []
    with pytest.raises(category) as info, store_errors("op", kinds.append):
        raise raised
    assert info.value.message == message and info.value.__cause__ is raised
    assert kinds == ([] if isinstance(raised, ValueError) else [kinds[0]])
    if isinstance(raised, StoreUnavailable):
        assert kinds == ["unavailable"] and info.value.details["reason"] == "ARCHIVE_UNAVAILABLE"


async def test_put_reports_an_envelope_past_retention_as_expired() -> None:
    svc, registry = await servicer(RetentionPolicy(default_s=DAY))
    old, fresh = envelope(NOW - 2 * DAY), envelope(NOW - 10, 1)
    bad = pb.PutItem(hash=b"x")
    items = [item(old), item(fresh), item(old), bad]
    reply = await svc.PutEnvelopes(pb.PutEnvelopesRequest(items=items), CONTEXT)
    assert [(r.outcome, r.detail) for r in reply.results[:3]] == [
        (pb.PUT_OUTCOME_EXPIRED, EXPIRED_DETAIL),
        (pb.PUT_OUTCOME_INSERTED, ""),
        (pb.PUT_OUTCOME_EXPIRED, EXPIRED_DETAIL),  # a repeat shares its first occurrence's fate
    ]
    assert reply.results[3].outcome == pb.PUT_OUTCOME_INVALID and reply.results[3].detail != EXPIRED_DETAIL
    assert (reply.inserted, reply.duplicates, reply.invalid, reply.expired) == (1, 0, 1, 2)
    value = registry.get_sample_value
    assert value("mailmesh_archive_put_items_total", {"db": "model", "outcome": "expired"}) == 2
    assert value("mailmesh_archive_put_items_total", {"db": "model", "outcome": "invalid"}) == 1
    assert value("mailmesh_archive_put_items_total", {"db": "model", "outcome": "inserted"}) == 1
    assert value("mailserver_archived_envelopes_total", {"db": "model"}) == 1
    assert value("mailserver_archived_envelope_size_bytes_sum", {"db": "model"}) == 20 + 20 + len(fresh.data)


async def test_a_per_item_retention_override_is_applied() -> None:
    svc, _ = await servicer(RetentionPolicy(default_s=None))
    e = envelope(NOW - 100)
    short = item(e, retention={"seconds": 50})
    reply = await svc.PutEnvelopes(pb.PutEnvelopesRequest(items=[short]), CONTEXT)
    assert (reply.results[0].outcome, reply.results[0].detail) == (pb.PUT_OUTCOME_EXPIRED, EXPIRED_DETAIL)
    rounded = item(
        e, retention={"seconds": 100, "nanos": 1}
    )  # 100.000000001 s rounds up to 101: still visible
    assert (await svc.PutEnvelopes(pb.PutEnvelopesRequest(items=[rounded]), CONTEXT)).inserted == 1


async def test_get_and_query_translate_views_and_positions() -> None:
    svc, registry = await servicer()
    envs = [envelope(NOW + i, i) for i in range(5)]
    await svc.PutEnvelopes(pb.PutEnvelopesRequest(items=[item(e) for e in envs]), CONTEXT)
    with pytest.raises(EnvelopeNotFound, match="no archived envelope with message hash 0x11"):
        await svc.GetEnvelope(pb.GetEnvelopeRequest(message_hash=b"\x11" * 32), CONTEXT)
    got = await svc.GetEnvelope(pb.GetEnvelopeRequest(envelope_hash=envs[1].hash), CONTEXT)
    assert got.envelope.data == envs[1].data and got.message_hash == b""
    order = sorted(envs, key=lambda e: (e.sent, e.hash))
    reply = await svc.QueryEnvelopes(
        pb.QueryEnvelopesRequest(
            range=common_pb2.TimeRange(lower=NOW, upper=NOW + 10),
            limit=2,
            direction=common_pb2.DIRECTION_BACKWARD,
            view=pb.ENVELOPE_VIEW_NO_DATA,
        ),
        CONTEXT,
    )
    assert [m.hash for m in reply.envelopes] == [order[4].hash, order[3].hash] and reply.has_more
    assert (reply.last.sent, reply.last.hash) == (order[3].sent, order[3].hash)
    assert all(m.data == b"" for m in reply.envelopes)
    assert (
        registry.get_sample_value("mailmesh_archive_query_seconds_count", {"db": "model", "filter": "all"})
        == 1
    )


def test_size_histogram_uses_status_go_buckets() -> None:
    assert tuple(1024.0 * 2**k for k in range(11)) == SIZE_BUCKETS
    registry = CollectorRegistry()
    metrics = ArchiveMetrics("sqlite", registry)
    metrics.archived([1000, 5000])
    metrics.recount(7)
    metrics.put_failed(3)
    value = registry.get_sample_value
    assert value("mailserver_archived_envelopes_total", {"db": "sqlite"}) == 7
    assert value("mailserver_archived_envelope_size_bytes_bucket", {"db": "sqlite", "le": "1024.0"}) == 1
    assert value("mailserver_archived_envelope_size_bytes_bucket", {"db": "sqlite", "le": "8192.0"}) == 2
    assert value("mailserver_archived_envelopes_failures_total", {"db": "sqlite"}) == 3
