"""The gateway's ASGI middleware: one pure-ASGI layer (so streamed responses stay streamed) doing, in order:

- **trace context** (only when the tracer records nothing, see :mod:`.app`): the caller's W3C
  ``traceparent`` (or a fresh root) becomes the current context, so log lines carry its trace id and the
  upstream gRPC calls pass it on, as the OpenTelemetry ASGI middleware does with a pass-through tracer;
- **observe**: request metrics by route template, method and status; one access-log line per request with
  method, route, status, duration and client address, never the query string, a header or a body (tokens
  travel in headers, payloads in bodies);
- **auth**: with ``MAILMESH_AUTH=token``, a bearer token (RFC 6750) of the mesh's client role or above
  (``meshcore.auth``, constant time); 401 without one. /docs and /openapi.json stay open;
- **rate limit**: per-client token buckets; 429 with Retry-After;
- **body cap**: bodies over the cap (the max message size in base64 plus JSON) get 413, by Content-Length
  before anything is read, or while a chunked body is read.

One layer rather than four, because each layer that wraps ``send`` and ``receive`` costs every request a
closure and a call per message (docs/benchmarks.md, "Gateway CPU per POST /send"); a part that cannot fire
wraps nothing. With CORS on, two instances sit around Starlette's CORS middleware: observing outside it,
the checks inside it (so their refusals carry CORS headers, and preflights are observed).

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

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import Getter
from starlette.exceptions import HTTPException
from starlette.routing import Match

from meshcore.auth import Role, Tokens
from services.gateway.metrics import GatewayMetrics
from services.gateway.ratelimit import TokenBuckets

__all__ = ["OPEN_PATHS", "GatewayMiddleware", "Guards", "Observe"]

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths served without a token: the API's description is public (it is in the repository anyway).
OPEN_PATHS = ("/docs", "/openapi.json")
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


def _is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith("/docs/")  # /docs/...: the docs page's assets


class _HeaderGetter(Getter[dict[bytes, bytes]]):
    """Reads W3C trace headers from an ASGI scope's headers (as a dict; names are lowercase in ASGI)."""

    def get(self, carrier: dict[bytes, bytes], key: str) -> list[str] | None:
        value = carrier.get(key.lower().encode("latin-1"))
        return None if value is None else [value.decode("latin-1")]

    def keys(self, carrier: dict[bytes, bytes]) -> list[str]:
        return [k.decode("latin-1") for k in carrier]


_GETTER = _HeaderGetter()


class Observe:
    """What the observing part needs: metrics, the access log switch, the routes (for refused requests'
    templates), and the pass-through tracer when the layer sets the trace context."""

    def __init__(
        self,
        metrics: GatewayMetrics,
        *,
        access_log: bool,
        routes: Sequence[Any] = (),
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.metrics = metrics
        self.access_log = access_log
        self.routes = routes
        self.tracer = tracer

    def template(self, scope: Scope) -> str:
        """The route template that served the request; for one refused before routing (401, 429, 413), the
        template it would have reached."""
        route = scope.get("route")
        if route is None:
            for candidate in self.routes:
                if candidate.matches(scope)[0] is not Match.NONE:
                    route = candidate
                    break
        return str(getattr(route, "path", None) or "other")

    def record(self, scope: Scope, status: int, elapsed: float) -> None:
        """Count the request and write its access-log line."""
        template = self.template(scope)
        method = scope["method"]
        self.metrics.requests.labels(template, method, str(status)).inc()
        self.metrics.duration.labels(template, method).observe(elapsed)
        if self.access_log:
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


class Guards:
    """The checks: bearer tokens (None = auth off), token buckets (None = no limit), the body cap."""

    def __init__(
        self, metrics: GatewayMetrics, *, max_bytes: int, tokens: Tokens | None, buckets: TokenBuckets | None
    ) -> None:
        self.metrics = metrics
        self.max_bytes = max_bytes
        self.tokens = tokens
        self.buckets = buckets

    async def refusal(self, scope: Scope, headers: dict[bytes, bytes], send: Send) -> bool:
        """Answer a request that must not reach the app (401, 429, 413 by Content-Length); True if so."""
        open_path = _is_open(scope["path"])
        key: str | None = None
        if self.tokens is not None and not open_path and scope["method"] != "OPTIONS":
            header = headers.get(b"authorization", b"")
            scheme, _, credentials = header.partition(b" ")
            token = credentials.strip().decode("latin-1") if scheme.lower() == b"bearer" else ""
            role = self.tokens.role_of(token)
            if role is None or role < Role.CLIENT:
                self.metrics.rejected.labels("unauthenticated").inc()
                challenge = 'Bearer realm="mailmesh"' + (', error="invalid_token"' if header else "")
                text = (
                    "invalid bearer token"
                    if header
                    else "missing bearer token (Authorization: Bearer <token>)"
                )
                await respond(send, 401, text, {"WWW-Authenticate": challenge})
                return True
            # The rate limit's key: a digest, so not even the limiter's memory holds the token itself.
            key = "token:" + hashlib.sha256(token.encode("latin-1")).hexdigest()
        if self.buckets is not None and not open_path:
            wait = self.buckets.take(key or _client(scope))
            if wait > 0:
                self.metrics.rejected.labels("rate_limited").inc()
                retry = str(max(1, math.ceil(wait)))
                await respond(
                    send, 429, f"rate limit exceeded; retry after {retry} s", {"Retry-After": retry}
                )
                return True
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            self.metrics.rejected.labels("too_large").inc()
            await respond(send, 413, f"request body is larger than {self.max_bytes} bytes")
            return True
        return False


class _TooLarge(HTTPException):
    """Raised from ``receive`` when a chunked body passes the cap. An HTTPException, because FastAPI turns any
    other exception raised while it reads a body into a 400 "error parsing the body"."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body is larger than {limit} bytes")


class GatewayMiddleware:
    """The one layer: ``observe`` and/or ``guards`` (either may be None, see the module docstring)."""

    def __init__(self, app: App, observe: Observe | None = None, guards: Guards | None = None) -> None:
        self._app = app
        self._observe = observe
        self._guards = guards

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry."""
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        observe, guards = self._observe, self._guards
        headers = dict(scope["headers"])
        token = None
        if observe is not None and observe.tracer is not None:
            parent = propagate.extract(headers, getter=_GETTER)
            span = observe.tracer.start_span("HTTP", context=parent, kind=trace.SpanKind.SERVER)
            token = otel_context.attach(trace.set_span_in_context(span, parent))
        start = time.perf_counter()
        status = 500  # what the client sees if the app fails before starting a response
        started = False
        chunked = guards is not None and b"content-length" not in headers
        limit = guards.max_bytes if guards is not None else 0
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    assert guards is not None
                    guards.metrics.rejected.labels("too_large").inc()
                    raise _TooLarge(limit)
            return message

        async def observed(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                status = message["status"]
                started = True
            await send(message)

        if observe is not None:
            observe.metrics.in_flight.inc()
        try:
            if guards is not None and await guards.refusal(scope, headers, observed):
                return
            try:
                await self._app(
                    scope,
                    counted if chunked else receive,
                    observed if observe is not None or chunked else send,
                )
            except _TooLarge as err:
                if not started:
                    await respond(observed, 413, str(err.detail))
        finally:
            if observe is not None:
                observe.metrics.in_flight.dec()
                observe.record(scope, status, time.perf_counter() - start)
            if token is not None:
                otel_context.detach(token)
