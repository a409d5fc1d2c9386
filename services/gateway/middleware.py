"""The gateway's ASGI middlewares (pure ASGI, so streamed responses stay streamed), outermost first:

- :class:`ObserveMiddleware`: request metrics by route template, method and status; one access-log line per
  request with method, route, status, duration and client address, never the query string, a header or a
  body (tokens travel in headers, payloads in bodies).
- :class:`AuthMiddleware`: with ``MAILMESH_AUTH=token``, a bearer token (RFC 6750) of the mesh's client role
  or above (``meshcore.auth``, constant time); 401 without one. /docs and /openapi.json stay open.
- :class:`RateLimitMiddleware`: per-client token buckets; 429 with Retry-After.
- :class:`BodyLimitMiddleware`: bodies over the cap (the max message size in base64 plus JSON) get 413, by
  Content-Length before anything is read, or while a chunked body is read.

Every refusal is the API's error shape, ``{"error": ...}``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from starlette.exceptions import HTTPException
from starlette.routing import Match

from meshcore.auth import Role, Tokens
from services.gateway.metrics import GatewayMetrics
from services.gateway.ratelimit import TokenBuckets

__all__ = [
    "OPEN_PATHS",
    "AuthMiddleware",
    "BodyLimitMiddleware",
    "ObserveMiddleware",
    "RateLimitMiddleware",
]

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths served without a token: the API's description is public (it is in the repository anyway).
OPEN_PATHS = ("/docs", "/openapi.json")
CLIENT_KEY = "mailmesh.client"  # scope key: who the rate limit counts (token digest, or address)
_access = logging.getLogger("services.gateway.access")


async def respond(send: Send, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
    """Send a complete ``{"error": message}`` response."""
    body = json.dumps({"error": message}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "-"


class ObserveMiddleware:
    """Metrics and the access log for every HTTP request."""

    def __init__(
        self, app: App, metrics: GatewayMetrics, *, access_log: bool, routes: Sequence[Any] = ()
    ) -> None:
        self._app = app
        self._metrics = metrics
        self._access_log = access_log
        self._routes = routes

    def _template(self, scope: Scope) -> str:
        """The route template that served the request; for one refused before routing (401, 429, 413), the
        template it would have reached."""
        route = scope.get("route")
        if route is None:
            for candidate in self._routes:
                if candidate.matches(scope)[0] is not Match.NONE:
                    route = candidate
                    break
        return str(getattr(route, "path", None) or "other")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # what the client sees if the app fails before starting a response

        async def observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        self._metrics.in_flight.inc()
        try:
            await self._app(scope, receive, observed)
        finally:
            self._metrics.in_flight.dec()
            elapsed = time.perf_counter() - start
            template = self._template(scope)
            method = scope["method"]
            self._metrics.requests.labels(template, method, str(status)).inc()
            self._metrics.duration.labels(template, method).observe(elapsed)
            if self._access_log:
                _access.info(
                    "%s %s %d",
                    method,
                    template,
                    status,
                    extra={
                        "method": method,
                        "route": template,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 2),
                        "client": _client(scope),
                    },
                )


def _is_open(path: str) -> bool:
    return path == "/openapi.json" or path == "/docs" or path.startswith("/docs/")


class AuthMiddleware:
    """Bearer-token check against the mesh's tokens (``MAILMESH_AUTH=token``): a token of the client role or
    above (:meth:`meshcore.auth.Tokens.role_of`, constant time); 401 with RFC 6750 ``WWW-Authenticate``
    otherwise. Every REST operation maps to a client-role RPC, so no higher role is ever required here."""

    def __init__(self, app: App, tokens: Tokens, metrics: GatewayMetrics) -> None:
        self._app = app
        self._tokens = tokens
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry."""
        if scope["type"] != "http" or scope["method"] == "OPTIONS" or _is_open(scope["path"]):
            await self._app(scope, receive, send)
            return
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, credentials = header.partition(b" ")
        token = credentials.strip().decode("latin-1") if scheme.lower() == b"bearer" else ""
        role = self._tokens.role_of(token)
        if role is None or role < Role.CLIENT:
            self._metrics.rejected.labels("unauthenticated").inc()
            challenge = 'Bearer realm="mailmesh"' + (', error="invalid_token"' if header else "")
            text = (
                "invalid bearer token" if header else "missing bearer token (Authorization: Bearer <token>)"
            )
            await respond(send, 401, text, {"WWW-Authenticate": challenge})
            return
        # The rate limit's key: a digest, so not even the limiter's memory holds the token itself.
        scope[CLIENT_KEY] = "token:" + hashlib.sha256(token.encode("latin-1")).hexdigest()
        await self._app(scope, receive, send)


class RateLimitMiddleware:
    """Per-client token buckets; the client is its token (with auth) or its address."""

    def __init__(self, app: App, buckets: TokenBuckets, metrics: GatewayMetrics) -> None:
        self._app = app
        self._buckets = buckets
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry."""
        if scope["type"] != "http" or _is_open(scope["path"]):
            await self._app(scope, receive, send)
            return
        wait = self._buckets.take(scope.get(CLIENT_KEY) or _client(scope))
        if wait > 0:
            self._metrics.rejected.labels("rate_limited").inc()
            retry = str(max(1, math.ceil(wait)))
            await respond(send, 429, f"rate limit exceeded; retry after {retry} s", {"Retry-After": retry})
            return
        await self._app(scope, receive, send)


class _TooLarge(HTTPException):
    """Raised from ``receive`` when a chunked body passes the cap. An HTTPException, because FastAPI turns any
    other exception raised while it reads a body into a 400 "error parsing the body"."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body is larger than {limit} bytes")


class BodyLimitMiddleware:
    """413 for a body larger than ``max_bytes``."""

    def __init__(self, app: App, max_bytes: int, metrics: GatewayMetrics) -> None:
        self._app = app
        self._max = max_bytes
        self._metrics = metrics

    async def _refuse(self, send: Send) -> None:
        self._metrics.rejected.labels("too_large").inc()
        await respond(send, 413, f"request body is larger than {self._max} bytes")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self._max):
            await self._refuse(send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self._max:
                    self._metrics.rejected.labels("too_large").inc()
                    raise _TooLarge(self._max)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self._app(scope, counted, tracked)
        except _TooLarge as err:
            if not started:
                await respond(send, 413, str(err.detail))
