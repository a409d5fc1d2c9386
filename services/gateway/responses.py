"""Responses: fast JSON answers, and the error responses every operation documents (OpenAPI)."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

from services.gateway.schemas import ErrorBody, GoneBody

__all__ = ["COMMON_ERRORS", "Json", "errors"]


class Json(Response):
    """``application/json`` from a ``json.dumps``-able value (compact separators)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        """The encoded body."""
        return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode()


_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer", "minimum": 1},
    }
}
_TEXT = {
    400: "The request is malformed: bad JSON, a wrong type, bad base64, a bad GUID, a value out of range, or "
    "a message the node refuses; `error` names the field.",
    401: "The mesh requires a bearer token (MAILMESH_AUTH=token) of the client role or above, and none, "
    "or an unknown one, was given.",
    404: "Not found; `error` is the spec's text.",
    409: "The upstream refused the request in its current state (e.g. another send replica owns it); retry.",
    410: "The resume point is older than the retained events (`oldest` is the oldest still retained).",
    413: "The request body is larger than the max message size allows.",
    429: "Too many requests from this client (GATEWAY_RATE_LIMIT_PER_SECOND), or an upstream service is "
    "overloaded.",
    500: "The gateway itself failed (a bug; logged with its traceback).",
    502: "An upstream service failed.",
    503: "An upstream service is unavailable (starting, restarting, or not the writer replica) or the "
    "gateway "
    "is shutting down.",
    504: "An upstream service did not answer in time.",
}
COMMON_ERRORS = (401, 429, 500, 502, 503, 504)
"""Every operation can answer these."""


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entries for ``codes`` plus :data:`COMMON_ERRORS`."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in sorted({*codes, *COMMON_ERRORS}):
        entry: dict[str, Any] = {"model": GoneBody if code == 410 else ErrorBody, "description": _TEXT[code]}
        if code in (429, 503):
            entry["headers"] = _RETRY_AFTER
        if code == 401:
            entry["headers"] = {
                "WWW-Authenticate": {
                    "description": "Bearer challenge (RFC 6750).",
                    "schema": {"type": "string"},
                }
            }
        out[code] = entry
    return out
