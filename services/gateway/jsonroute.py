"""A FastAPI route whose valid JSON bodies skip FastAPI's per-request machinery.

FastAPI answers a ``POST`` by reading the body, ``json.loads`` of it, solving the endpoint's dependencies and
validating the decoded dict against the body model in Python mode. For an endpoint whose only parameter is
one pydantic body model, that is one ``model_validate_json`` (pydantic-core parses and validates the bytes
in one pass) and a call; measured against a stub send service it is a tenth of the gateway's CPU per
``POST /send`` (docs/benchmarks.md, "Gateway CPU per POST /send").

:class:`JsonBodyRoute` does that for a body that is ``application/json`` and valid, and hands everything
else to FastAPI's own handler with the body it already read (Starlette's ``Request`` keeps it). So a
malformed request gets exactly the answer it got before (the seed's 400 texts come from FastAPI's
``RequestValidationError``, :mod:`.errors`), and the route keeps its declared body and response models for
the OpenAPI document. Validation is the same either way: the models are strict (:mod:`.schemas`), and for
their field types (strings, integers, booleans) pydantic's strict JSON mode accepts exactly what its strict
Python mode accepts of ``json.loads``'s output; whatever the JSON parser refuses goes to FastAPI's handler.

Only routes registered without dependencies (here: none of the gateway's) take the fast path; a route with
any other parameter (query, header, ``Request``) keeps FastAPI's handler.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["JsonBodyRoute"]

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def _is_json(request: Request) -> bool:
    kind = request.headers.get("content-type")
    return kind is not None and kind.partition(";")[0].strip().lower() == "application/json"


class JsonBodyRoute(APIRoute):
    """An APIRoute; an endpoint ``async def f(body: Model) -> Response`` parses valid JSON bodies itself."""

    def get_route_handler(self) -> Handler:
        """FastAPI's handler, behind the fast path when the endpoint qualifies."""
        stock = super().get_route_handler()
        found = self.body_model()
        if found is None:
            return stock
        name, model = found
        endpoint = self.endpoint

        async def handler(request: Request) -> Response:
            if _is_json(request):
                try:
                    body = model.model_validate_json(await request.body())
                except ValidationError:
                    pass  # FastAPI's handler says what is wrong, in the API's words
                else:
                    response: Response = await endpoint(**{name: body})
                    return response
            return await stock(request)

        return handler

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
