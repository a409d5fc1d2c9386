"""The FastAPI application: routes, middlewares, error handlers, the OpenAPI 3.1 document, the docs page.

Middlewares, outermost first: OpenTelemetry (a server span per request, parent of the gRPC client spans the
upstream calls make), metrics and access log, CORS (GATEWAY_CORS_ORIGINS), bearer auth, rate limit, body cap
(all but OpenTelemetry and CORS in one layer, :mod:`.middleware`). When the tracer records nothing (no OTLP
endpoint: meshcore's pass-through provider), the OpenTelemetry ASGI middleware would only make the caller's
``traceparent`` (or a fresh root) current; that layer does it instead, at a fraction of the cost. FastAPI's
own (native) telemetry is off: the instrumentation above is the one that traces.
The OpenAPI document lists every answer each operation can give (FastAPI's default 422 is replaced by our 400
everywhere, since that is what the gateway answers) and the bearer scheme when MAILMESH_AUTH=token.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from opentelemetry import trace
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware

from meshcore.auth import Tokens
from services.gateway.docs import docs_router
from services.gateway.errors import ApiError, error_body, validation_message
from services.gateway.events import events_router
from services.gateway.middleware import GatewayMiddleware, Guards, Observe
from services.gateway.ratelimit import TokenBuckets
from services.gateway.responses import Json
from services.gateway.routes import api_router
from services.gateway.state import GatewayState

__all__ = ["TITLE", "build_app"]

TITLE = "Mailmesh Messaging API"
_log = logging.getLogger(__name__)
_DESCRIPTION = """\
The Waku Messaging API over REST, as MESSAGING-API's REST sections write it (Send, Subscribe, Message Storage,
Health Indicator), plus its event source as long polling (`GET /events`) and Server-Sent Events
(`GET /events/stream`). Payloads are standard padded base64; message hashes 0x-prefixed lowercase hex. Every
error is `{"error": "<what is wrong, which field>"}`.
"""


def build_app(
    state: GatewayState, tokens: Tokens | None, *, tracer_provider: trace.TracerProvider | None = None
) -> FastAPI:
    """The application over ``state``; ``tokens`` (the mesh's: ``MAILMESH_AUTH=token``) turns auth on."""
    cfg = state.cfg
    app = FastAPI(
        title=TITLE,
        version="1",
        description=_DESCRIPTION,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.gateway = state
    routers = [api_router(state), events_router(state), docs_router(TITLE)]
    # The routes themselves, not include_router: FastAPI matches an included router through a wrapper per
    # router and request (its inclusion contexts: prefixes, dependencies), which these routers do not use.
    for router in routers:
        app.router.routes.extend(router.routes)

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> Json:
        return Json(exc.body(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Json:
        problems = exc.errors()
        kind = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        whole_body = bool(problems) and problems[0]["loc"] == ("body",)
        if request.method == "POST" and kind != "application/json" and whole_body:
            # FastAPI reads a body as JSON only when it says it is JSON (the spec's requests do).
            return Json(error_body("Content-Type: must be application/json"), status_code=400)
        return Json(error_body(validation_message(problems)), status_code=400)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> Json:
        return Json(error_body(str(exc.detail)), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def crashed(_: Request, exc: Exception) -> Json:
        _log.error("unhandled %s", type(exc).__name__, exc_info=exc)
        return Json(error_body("internal error"), status_code=500)

    # add_middleware wraps what is there: the last added is the outermost.
    provider = tracer_provider or trace.get_tracer_provider()
    tracer = provider.get_tracer(__name__)
    recording = not isinstance(tracer, trace.NoOpTracer)  # meshcore's pass-through tracer is a NoOpTracer
    observe = Observe(
        state.metrics,
        access_log=cfg.access_log,
        routes=[r for router in routers for r in router.routes],
        tracer=None if recording else tracer,
    )
    buckets = TokenBuckets(cfg.rate_limit_per_s, cfg.rate_limit_burst) if cfg.rate_limit_per_s > 0 else None
    guards = Guards(state.metrics, max_bytes=cfg.max_body_bytes, tokens=tokens, buckets=buckets)
    if cfg.cors_origins:
        app.add_middleware(GatewayMiddleware, guards=guards)
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cfg.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
            expose_headers=["Retry-After"],
            max_age=600,
        )
        app.add_middleware(GatewayMiddleware, observe=observe)
    else:
        app.add_middleware(GatewayMiddleware, observe=observe, guards=guards)
    if recording:
        FastAPIInstrumentor.instrument_app(
            app,
            tracer_provider=tracer_provider,
            excluded_urls="/docs,/openapi.json",
            exclude_spans=["receive", "send"],
        )
    app.openapi = lambda: _openapi(app, tokens is not None)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI, auth: bool) -> dict[str, Any]:
    """FastAPI's document without its 422 answers (we answer 400), with the bearer scheme when on."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi

    doc = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    for path in doc.get("paths", {}).values():
        for operation in path.values():
            operation.get("responses", {}).pop("422", None)
            if auth:
                operation["security"] = [{"bearerAuth": []}]
    _add_links(doc)
    schemas = doc.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    if auth:
        doc.setdefault("components", {})["securitySchemes"] = {
            "bearerAuth": {
                "type": "http",
                "scheme": "bearer",
                "description": "A token of the mesh's client role or above (MAILMESH_AUTH_CLIENT_TOKENS).",
            }
        }
    app.openapi_schema = doc
    return doc


def _add_links(doc: dict[str, Any]) -> None:
    """OpenAPI links (3.1 §4.8.20): what a send's requestId and a subscription's id can be used for next, so
    clients and stateful tests can follow send → message → cancel and subscribe → messages → unsubscribe."""
    paths = doc.get("paths", {})
    sent = paths.get("/send", {}).get("post", {}).get("responses", {}).get("200")
    if sent is not None:
        rid = "$response.body#/requestId"
        sent["links"] = {
            "GetMessageByRequestId": {"operationId": "getMessage", "parameters": {"requestId": rid}},
            "CancelRequest": {"operationId": "cancelRequest", "requestBody": {"requestId": rid}},
            "PollEventsOfRequest": {"operationId": "pollEvents", "parameters": {"requestId": rid}},
        }
    subscribed = paths.get("/subscribe", {}).get("post", {}).get("responses", {}).get("200")
    if subscribed is not None:
        sid = "$response.body#/subscriptionId"
        subscribed["links"] = {
            "GetMessagesOfSubscription": {
                "operationId": "getMessages",
                "parameters": {"subscriptionId": sid},
            },
            "Unsubscribe": {"operationId": "unsubscribe", "requestBody": {"subscriptionId": sid}},
        }
