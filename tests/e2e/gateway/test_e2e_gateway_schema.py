"""Schemathesis against the document the running gateway serves (`/openapi.json`), over the real mesh:
every operation with bounded generated examples, and stateful scenarios that follow the document's links
(send → message → cancel, subscribe → messages → unsubscribe). No answer may be a 5xx, and every answer must
conform to the document: a documented status code, content type, headers and body schema.

`/events/stream` never ends, so it is left to the SSE tests; a generated `wait` is cut to 0.1 s so a long
poll cannot hold an example for a minute (the wait's semantics are tested elsewhere)."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.e2e.gateway.conftest import GatewayMesh

CHECKS: list[Any] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
EXAMPLES = 25  # per operation: enough to hit every parameter's edges, small enough for `make test`


@pytest.fixture(scope="session")
def api_schema(gateway_mesh: GatewayMesh) -> Any:
    return schemathesis.openapi.from_url(f"{gateway_mesh.url}/openapi.json").exclude(path="/events/stream")


def short_waits(case: Any) -> None:
    """A long poll's `wait`, whatever was generated, at most 0.1 s."""
    query = case.query if isinstance(case.query, dict) else None
    if query and isinstance(query.get("wait"), int | float) and not isinstance(query["wait"], bool):
        query["wait"] = min(query["wait"], 0.1)


def test_every_operation_answers_as_documented(api_schema: Any) -> None:
    # Operation by operation with Hypothesis directly: schemathesis' pytest plugin (schema.parametrize) does
    # not run under pytest 9 (it reads a private attribute pytest removed).
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert {(op.method.upper(), op.path) for op in operations} >= {("POST", "/send"), ("GET", "/events")}
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def answers_as_documented(case: Any) -> None:
            short_waits(case)
            response = case.call(timeout=30)
            case.validate_response(response, checks=CHECKS)

        answers_as_documented()


def test_stateful_scenarios_follow_the_links(api_schema: Any) -> None:
    links = api_schema.raw_schema["paths"]["/send"]["post"]["responses"]["200"]["links"]
    assert {link["operationId"] for link in links.values()} >= {"getMessage", "cancelRequest"}

    class Gateway(api_schema.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: Any) -> None:
            short_waits(case)

        def validate_response(
            self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any
        ) -> None:
            case.validate_response(response, checks=CHECKS)

    Gateway.run(
        settings=settings(
            max_examples=15, stateful_step_count=6, deadline=None, suppress_health_check=list(HealthCheck)
        )
    )
