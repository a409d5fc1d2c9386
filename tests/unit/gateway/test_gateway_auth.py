"""What REST can reach: every gRPC method behind the gateway is of the client role, so no REST request can
call an admin (or internal service) RPC whatever token it carries (docs/security.md "Tokens and roles")."""

from __future__ import annotations

import ast
from pathlib import Path

from mailmesh.health.v1 import health_pb2
from mailmesh.send.v1 import send_pb2
from mailmesh.subscription.v1 import subscription_pb2
from meshcore.auth import ADMIN_METHODS, Role, required_role
from services.gateway.clients import UPSTREAM_SERVICES, Upstream
from services.gateway.config import Config

GATEWAY = Path(__file__).resolve().parents[3] / "services" / "gateway"


def _methods(service: str) -> list[str]:
    for module in (send_pb2, subscription_pb2, health_pb2):
        found = module.DESCRIPTOR.services_by_name.get(service.rpartition(".")[2])
        if found is not None and found.full_name == service:
            return [f"/{service}/{m.name}" for m in found.methods]
    raise AssertionError(f"{service} is not in the send, subscription or health protos")


def test_every_upstream_method_needs_the_client_role_and_none_is_admin() -> None:
    methods = [m for service in UPSTREAM_SERVICES for m in _methods(service)]
    assert len(methods) > 10  # the three Messaging API services, every method
    assert {m: required_role(m) for m in methods} == {m: Role.CLIENT for m in methods}
    assert not ADMIN_METHODS & set(methods)


def test_the_gateway_imports_no_other_service_stub() -> None:
    """The only gRPC stubs the gateway's code can build are those three services'."""
    stubs: set[str] = set()
    for path in sorted(GATEWAY.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mailmesh."):
                stubs |= {a.name for a in node.names if a.name.endswith("_pb2_grpc")}
    assert stubs == {"send_pb2_grpc", "subscription_pb2_grpc", "health_pb2_grpc"}
    assert {s.split(".")[1] for s in UPSTREAM_SERVICES} == {"send", "subscription", "health"}


async def test_the_upstream_holds_stubs_of_those_services_only() -> None:
    upstream = Upstream(Config.from_env({}))
    try:
        stubs = {type(v).__name__ for v in vars(upstream).values() if type(v).__name__.endswith("Stub")}
        assert stubs == {"SendServiceStub", "SubscriptionServiceStub", "HealthServiceStub"}
    finally:
        await upstream.close()
