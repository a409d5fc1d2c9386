"""JsonBodyRoute: a valid JSON body goes straight to the endpoint; anything else is FastAPI's handling."""

from __future__ import annotations

from typing import Annotated, Any

import fastapi.routing
import httpx
import pytest
from fastapi import APIRouter, FastAPI, Query
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from services.gateway.config import Config
from services.gateway.jsonroute import JsonBodyRoute
from services.gateway.responses import Json
from services.gateway.routes import api_router
from services.gateway.server import connect


class Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
    name: Annotated[str, Field(min_length=1)]
    count: int = 0


def _app(seen: list[Body]) -> FastAPI:
    router = APIRouter(route_class=JsonBodyRoute)

    @router.post("/things")
    async def things(body: Body) -> Json:
        seen.append(body)
        return Json({"name": body.name, "count": body.count})

    @router.get("/things")
    async def listing(take: Annotated[int, Query()] = 1) -> Json:
        return Json([take])

    app = FastAPI()
    app.router.routes.extend(router.routes)  # as the gateway does (the fast path is the route's own app)
    return app


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_a_valid_json_body_skips_fastapis_dependency_solving(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Body] = []
    app = _app(seen)

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("FastAPI's handler ran")

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", refuse)
    async with _client(app) as client:
        reply = await client.post("/things", json={"name": "a", "count": 2, "other": True})
    assert reply.status_code == 200 and reply.json() == {"name": "a", "count": 2}
    assert seen == [Body(name="a", count=2)]


@pytest.mark.parametrize(
    ("content", "headers"),
    [
        (b'{"name": "a", "count": "2"}', {"content-type": "application/json"}),  # strict: "2" is no int
        (b'{"name": ""}', {"content-type": "application/json"}),
        (b'{"name": "a"', {"content-type": "application/json"}),  # malformed JSON
        (b'{"name": "a"}', {"content-type": "text/plain"}),
    ],
)
async def test_anything_else_gets_fastapis_own_answer(content: bytes, headers: dict[str, str]) -> None:
    seen: list[Body] = []
    fast, stock = _app(seen), FastAPI()

    @stock.post("/things")
    async def things(body: Body) -> Response:
        raise AssertionError("not valid")

    async with _client(fast) as one, _client(stock) as other:
        mine = await one.post("/things", content=content, headers=headers)
        theirs = await other.post("/things", content=content, headers=headers)
    assert mine.status_code == theirs.status_code == 422
    assert mine.json() == theirs.json()
    assert seen == []


async def test_the_gateways_post_routes_take_the_fast_path_and_its_get_routes_do_not() -> None:
    cfg = Config.from_env({"GATEWAY_SEND_ADDR": "127.0.0.1:1"})
    state = connect(cfg, registry=CollectorRegistry()).state
    router = api_router(state)
    kinds = {
        (route.path, method): route.body_model() is not None
        for route in router.routes
        if isinstance(route, JsonBodyRoute)
        for method in route.methods or ()
    }
    assert kinds == {
        ("/send", "POST"): True,
        ("/send/cancel", "POST"): True,
        ("/send/requests", "GET"): False,
        ("/subscribe", "POST"): True,
        ("/unsubscribe", "POST"): True,
        ("/subscriptions", "GET"): False,
        ("/message", "GET"): False,
        ("/messages", "GET"): False,
        ("/health", "GET"): False,
    }
    await state.upstream.close()
