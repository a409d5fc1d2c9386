"""The one gRPC → HTTP table and the validation sentences (services/gateway/errors.py)."""

from __future__ import annotations

import grpc
import pytest

from services.gateway.errors import HTTP_STATUS, UpstreamError, from_upstream, validation_message


def test_every_grpc_error_code_has_an_http_status() -> None:
    codes = set(grpc.StatusCode) - {grpc.StatusCode.OK}
    assert set(HTTP_STATUS) == codes
    assert all(400 <= s <= 599 for s in HTTP_STATUS.values())


@pytest.mark.parametrize(
    ("code", "status", "message"),
    [
        (grpc.StatusCode.NOT_FOUND, 404, "Message with requestId 'x' not found"),
        (grpc.StatusCode.INVALID_ARGUMENT, 400, "invalid content topic: empty"),
        (grpc.StatusCode.ALREADY_EXISTS, 409, "requestId 'x' is already used by a different message"),
        (grpc.StatusCode.OUT_OF_RANGE, 410, "sequence 1 is older than the retained events"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, 429, "slow consumer"),
        (grpc.StatusCode.UNAVAILABLE, 503, "the send service is unavailable; retry later"),
        (grpc.StatusCode.CANCELLED, 503, "the send service is unavailable; retry later"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, 504, "the send service did not answer in time"),
        (grpc.StatusCode.INTERNAL, 502, "the send service failed"),
        (grpc.StatusCode.DATA_LOSS, 502, "the send service failed"),
    ],
)
def test_client_texts_pass_and_transport_texts_are_replaced(
    code: grpc.StatusCode, status: int, message: str
) -> None:
    raw = message if status < 500 else "failed to connect to all addresses; last error: ipv4:10.1.2.3:50055"
    err = from_upstream(UpstreamError("send", code, raw, {}))
    assert (err.status, err.message) == (status, message)
    assert ("Retry-After" in err.headers) == (status in (429, 503))


def test_not_found_text_can_be_the_routes_and_trailers_become_fields_and_headers() -> None:
    err = from_upstream(
        UpstreamError("subscription", grpc.StatusCode.NOT_FOUND, "Message with hash '0xab' not found", {}),
        not_found="Message with hash 'AB' not found",
    )
    assert err.body() == {"error": "Message with hash 'AB' not found"}
    gone = from_upstream(UpstreamError("subscription", grpc.StatusCode.OUT_OF_RANGE, "old", {"oldest": "17"}))
    assert gone.body() == {"error": "old", "oldest": 17}
    limited = from_upstream(
        UpstreamError("send", grpc.StatusCode.RESOURCE_EXHAUSTED, "x", {"retry_after_ms": "1001"})
    )
    assert limited.headers == {"Retry-After": "2"}


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (
            {"type": "json_invalid", "loc": ("body", 5), "ctx": {"error": "Expecting value"}},
            "malformed JSON: Expecting value",
        ),
        ({"type": "missing", "loc": ("body", "payload")}, "payload: is required"),
        ({"type": "string_type", "loc": ("body", "contentTopic")}, "contentTopic: must be a string"),
        (
            {"type": "string_pattern_mismatch", "loc": ("body", "payload")},
            "payload: not valid base64 (standard alphabet, padded)",
        ),
        (
            {"type": "string_pattern_mismatch", "loc": ("body", "requestId")},
            "requestId: not a GUID (lowercase 8-4-4-4-12 hex digits)",
        ),
        (
            {"type": "string_too_long", "loc": ("body", "payload"), "ctx": {"max_length": 8}},
            "payload: too large (more than 8 characters of base64)",
        ),
        ({"type": "greater_than_equal", "loc": ("query", "skip"), "ctx": {"ge": 0}}, "skip: must be >= 0"),
        ({"type": "model_attributes_type", "loc": ("body",)}, "body: must be a JSON object"),
        ({"type": "something_new", "loc": ("query", "x"), "msg": "odd"}, "x: odd"),
    ],
)
def test_validation_sentences_name_the_field(error: dict[str, object], text: str) -> None:
    assert validation_message([error, {"type": "missing", "loc": ("body", "other")}]) == text
