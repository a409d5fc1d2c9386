"""Every HTTP error the gateway answers, decided in one place: gRPC statuses, validation failures, HTTP-level
refusals, and the ``{"error": "<what is wrong, which field>"}`` body they all share (MESSAGING-API REST
examples: ``{"error": "Failed to send message. Target pubsubTopic 'string' not supported."}``).

Upstream statuses (:data:`HTTP_STATUS`): NOT_FOUND → 404 with the service's text (the services word their
NOT_FOUND as the spec's REST examples do, or the route passes the spec's text), INVALID_ARGUMENT → 400,
ALREADY_EXISTS / FAILED_PRECONDITION / ABORTED → 409, UNAUTHENTICATED → 401, PERMISSION_DENIED → 403,
RESOURCE_EXHAUSTED → 429 with Retry-After, OUT_OF_RANGE → 410 (a resume point past the retention window),
UNAVAILABLE and CANCELLED → 503 with Retry-After, DEADLINE_EXCEEDED → 504, UNIMPLEMENTED → 501, anything else
→ 502 (the upstream failed). Texts of the first group are the services' own, meant for clients; the texts of
transport failures (which can carry addresses) are replaced by one naming the service, and logged.

Validation (:func:`validation_message`): FastAPI answers 422 with a list; we answer 400 with one sentence
naming the first bad field, worded for each kind of mistake (malformed JSON, wrong type, bad base64, bad
GUID, too long, out of range, missing).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from meshcore.logging import trim

__all__ = [
    "CLIENT_CLOSED",
    "HTTP_STATUS",
    "ApiError",
    "ClientLeft",
    "UpstreamError",
    "error_body",
    "from_upstream",
    "validation_message",
]

_log = logging.getLogger(__name__)

HTTP_STATUS: Mapping[grpc.StatusCode, int] = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.FAILED_PRECONDITION: 409,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 410,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 502,
    grpc.StatusCode.UNKNOWN: 502,
    grpc.StatusCode.DATA_LOSS: 502,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.CANCELLED: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
"""gRPC status of an upstream call → the HTTP status the client gets."""

# Codes whose message the services write for clients (the spec's texts among them); others are replaced.
_CLIENT_TEXT = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
    }
)
_RETRY_AFTER_S = 1  # 503 and a 429 whose status names no delay: the upstream services back off ~1 s


CLIENT_CLOSED = 499
"""The status recorded for a request whose client left first (nginx's "client closed request")."""


class ApiError(Exception):
    """An HTTP error answer: status, the ``error`` text, extra body fields, extra headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers: dict[str, str] = dict(headers or {})
        self.extra: dict[str, Any] = dict(extra or {})

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": ..., **extra}``."""
        return error_body(self.message, **self.extra)


class ClientLeft(ApiError):
    """The client closed the connection while its long poll waited: the wait is cancelled (and with it the
    upstream call). Answered with nginx's 499 "client closed request", which nobody reads but the metrics and
    the access log show."""

    def __init__(self) -> None:
        super().__init__(CLIENT_CLOSED, "the client closed the connection")


class UpstreamError(Exception):
    """A failed call to one of the services behind the gateway, with its status and trailers."""

    def __init__(
        self, service: str, code: grpc.StatusCode, details: str, trailers: Mapping[str, str]
    ) -> None:
        super().__init__(f"{service}: {code.name}: {details}")
        self.service = service
        self.code = code
        self.details = details
        self.trailers = dict(trailers)

    @classmethod
    def of(cls, service: str, err: grpc.aio.AioRpcError) -> UpstreamError:
        """From a failed ``grpc.aio`` call (text trailers only; binary ones end in ``-bin``)."""
        trailers = {k: v for k, v in (err.trailing_metadata() or ()) if isinstance(v, str)}
        return cls(service, err.code(), err.details() or "", trailers)


def error_body(message: str, **extra: Any) -> dict[str, Any]:
    """The shared error shape."""
    return {"error": message, **extra}


def _retry_after(err: UpstreamError) -> str:
    raw = err.trailers.get("retry_after_ms", "")
    if raw.isdigit():
        return str(max(1, -(-int(raw) // 1000)))  # whole seconds, rounded up (RFC 9110 §10.2.3)
    return str(_RETRY_AFTER_S)


def from_upstream(err: UpstreamError, *, not_found: str | None = None) -> ApiError:
    """The HTTP answer for a failed upstream call; ``not_found`` replaces a NOT_FOUND text (the spec's)."""
    status = HTTP_STATUS.get(err.code, 502)
    headers: dict[str, str] = {}
    extra: dict[str, Any] = {}
    if err.code in _CLIENT_TEXT:
        message = err.details or err.code.name.lower().replace("_", " ")
    elif err.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
        message = f"the {err.service} service is unavailable; retry later"
    elif err.code is grpc.StatusCode.DEADLINE_EXCEEDED:
        message = f"the {err.service} service did not answer in time"
    else:
        message = f"the {err.service} service failed"
    if status >= 500:
        # Our operators' business, not the client's: the raw status can name addresses and internals.
        _log.warning(
            "%s call failed: %s",
            err.service,
            err.code.name,
            extra={"details": trim(err.details), "http": status},
        )
    if err.code is grpc.StatusCode.NOT_FOUND and not_found is not None:
        message = not_found
    if status in (429, 503):
        headers["Retry-After"] = _retry_after(err)
    if err.code is grpc.StatusCode.OUT_OF_RANGE and err.trailers.get("oldest", "").isdigit():
        extra["oldest"] = int(err.trailers["oldest"])
    return ApiError(status, message, headers=headers, extra=extra)


# ------------------------------------------------------------------------------------------ validation

_FIELD_PATTERN_TEXT = {
    "payload": "not valid base64 (standard alphabet, padded)",
    "meta": "not valid base64 (standard alphabet, padded)",
    "requestId": "not a GUID (lowercase 8-4-4-4-12 hex digits)",
    "subscriptionId": "not a GUID (lowercase 8-4-4-4-12 hex digits)",
    "contentTopic": "not a content topic (/{application}/{version}/{name}/{encoding}, 23/WAKU2-TOPICS)",
}
_TYPE_TEXT = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "missing": "is required",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "dict_type": "must be a JSON object",
    "list_type": "must be a list",
}


def _field(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc[1:]] if loc and loc[0] in ("body", "query", "header", "path") else list(loc)
    return ".".join(parts) if parts else "body"


def validation_message(errors: Sequence[Mapping[str, Any]]) -> str:
    """One sentence for FastAPI's validation errors: the first problem, with the field it is in."""
    if not errors:
        return "invalid request"
    first = errors[0]
    kind = str(first.get("type", ""))
    if kind == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "")
        return f"malformed JSON{': ' + str(reason) if reason else ''}"
    field = _field(first.get("loc", ()))
    ctx = first.get("ctx") or {}
    if kind == "string_pattern_mismatch":
        return f"{field}: {_FIELD_PATTERN_TEXT.get(field.rsplit('.', 1)[-1], 'has the wrong format')}"
    if kind == "string_too_long":
        limit = ctx.get("max_length")
        if field in ("payload", "meta"):
            return f"{field}: too large (more than {limit} characters of base64)"
        return f"{field}: longer than {limit} characters"
    if kind == "string_too_short":
        return f"{field}: must not be empty"
    if kind in ("greater_than_equal", "greater_than"):
        return f"{field}: must be >= {ctx.get('ge', ctx.get('gt'))}"
    if kind in ("less_than_equal", "less_than"):
        return f"{field}: must be <= {ctx.get('le', ctx.get('lt'))}"
    if kind in _TYPE_TEXT:
        return f"{field}: {_TYPE_TEXT[kind]}"
    return f"{field}: {first.get('msg', 'invalid')}"
