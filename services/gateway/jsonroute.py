"""A FastAPI route whose valid JSON bodies skip FastAPI's per-request machinery.

FastAPI answers a ``POST`` by reading the body, ``json.loads`` of it, solving the endpoint's dependencies and
validating the decoded dict against the body model in Python mode. For an endpoint whose only parameter is
one pydantic body model, that is one ``model_validate_json`` (pydantic-core parses and validates the bytes
in one pass) and a call; measured against a stub send service that saves about a sixth of the gateway's CPU
per ``POST /send`` (docs/benchmarks.md, "Gateway CPU per POST /send").

:class:`JsonBodyRoute` does that in the route's own ASGI app, for a body that is ``application/json`` and
valid, and also skips Starlette's per-request ``Request``, FastAPI's two exit stacks and the route-level
exception wrapper (an exception such as :class:`~.errors.ApiError` reaches the app's ``ExceptionMiddleware``,
which has the same handlers). Everything else goes to FastAPI's own handler with the body messages replayed.
So a malformed request gets exactly the answer it got before (the seed's 400 texts come from FastAPI's
``RequestValidationError``, :mod:`.errors`), and the route keeps its declared body and response models for
the OpenAPI document. Validation is the same either way: the models are strict (:mod:`.schemas`), and for
their field types (strings, integers, booleans) pydantic's strict JSON mode accepts exactly what its strict
Python mode accepts of ``json.loads``'s output; whatever the JSON parser refuses goes to FastAPI's handler.

Only an endpoint whose one parameter is a body model takes the fast path; one with any other parameter
(query, header, ``Request``, a dependency) keeps FastAPI's handler. The app must hold the route itself (as
the gateway's does, :mod:`.app`): a router included with ``include_router`` calls FastAPI's handler.
"""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.responses import Response
from starlette.types import ASGIApp as App
from starlette.types import Message, Receive, Scope, Send

__all__ = ["JsonBodyRoute"]


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bool(value.partition(b";")[0].strip().lower() == b"application/json")
    return False


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` that first gives ``messages`` again (the body this route already read)."""
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


class JsonBodyRoute(APIRoute):
    """An APIRoute; an endpoint ``async def f(body: Model) -> Response`` parses valid JSON bodies itself.

    The fast path is the route's ASGI app (what the app's router calls); FastAPI's handler, behind it, is
    also what a router including this route's router through ``include_router`` uses.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        found = self.body_model()
        if found is not None:
            self.app = self._fast(self.app, *found)

    def _fast(self, stock: App, name: str, model: type[BaseModel]) -> App:
        endpoint = self.endpoint

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["method"] == "POST" and _is_json(scope):
                messages: list[Message] = []
                more = True
                while more:
                    message = await receive()
                    messages.append(message)
                    more = message["type"] == "http.request" and message.get("more_body", False)
                if messages[-1]["type"] == "http.request":
                    raw = b"".join(m.get("body", b"") for m in messages)
                    try:
                        body = model.model_validate_json(raw)
                    except ValidationError:
                        pass  # FastAPI's handler says what is wrong, in the API's words
                    else:
                        response: Response = await endpoint(**{name: body})
                        await response(scope, receive, send)
                        return
                receive = _replay(messages, receive)
            await stock(scope, receive, send)

        return app

    def body_model(self) -> tuple[str, type[BaseModel]] | None:
        """(parameter name, model) when the endpoint takes one body model and nothing else."""
        dep = self.dependant
        others = (
            dep.path_params,
            dep.query_params,
            dep.header_params,
            dep.cookie_params,
            dep.dependencies,
            self.dependencies,
        )
        special = (
            dep.request_param_name,
            dep.websocket_param_name,
            dep.http_connection_param_name,
            dep.response_param_name,
            dep.background_tasks_param_name,
            dep.security_scopes_param_name,
        )
        if len(dep.body_params) != 1 or any(others) or any(special) or self._embed_body_fields:
            return None
        field = dep.body_params[0]
        model = field.field_info.annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        return field.name, model
