"""Gateway configuration: defaults (ports of docs/design.md "Services"), limits, the README table."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshcore import ConfigError, describe_markdown
from meshcore.auth import Role, load_tokens
from services.gateway.config import Config

README = Path(__file__).resolve().parents[3] / "services" / "gateway" / "README.md"


def test_defaults() -> None:
    cfg = Config.from_env({})
    assert (cfg.http_port, cfg.runtime.grpc_port, cfg.runtime.metrics_port) == (8645, 50058, 9158)
    assert (cfg.send_addr, cfg.subscription_addr, cfg.health_addr) == (
        "127.0.0.1:50055",
        "127.0.0.1:50056",
        "127.0.0.1:50057",
    )
    assert load_tokens(cfg.runtime.security) is None  # MAILMESH_AUTH=off: the REST API is open
    assert cfg.cors_origins == () and cfg.rate_limit_per_s == 0
    assert cfg.max_payload_bytes == (1 << 20) - 20
    # The body cap fits the largest payload in base64 plus the other fields.
    assert cfg.max_body_bytes == 4 * ((cfg.max_payload_bytes + 2) // 3) + 16 * 1024


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"GATEWAY_CORS_ORIGINS": "app.example.org"}, "GATEWAY_CORS_ORIGINS"),
        ({"GATEWAY_CORS_ORIGINS": "https://app.example.org/path"}, "GATEWAY_CORS_ORIGINS"),
        ({"GATEWAY_HTTP_PORT": "50058"}, "must differ"),
        ({"GATEWAY_MAX_WAIT_SECONDS": "61"}, "GATEWAY_MAX_WAIT_SECONDS"),
        ({"GATEWAY_SEND_ADDR": " "}, "GATEWAY_SEND_ADDR"),
    ],
)
def test_bad_values_are_refused(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        Config.from_env(env)


def test_cors_origins_and_the_mesh_tokens_from_the_variables_and_a_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# applications\nfile-client-token-0001\n\nshared-client-token-02\n")
    cfg = Config.from_env(
        {
            "GATEWAY_CORS_ORIGINS": "https://app.example.org, http://localhost:3000/,*",
            "MAILMESH_AUTH": "token",
            "MAILMESH_AUTH_CLIENT_TOKENS": "env-client-token-0001,shared-client-token-02",
            "MAILMESH_AUTH_CLIENT_TOKENS_FILE": str(tokens),
            "MAILMESH_AUTH_SERVICE_TOKENS": "service-token-000001",
            "MAILMESH_AUTH_ADMIN_TOKENS": "admin-token-00000001",
        }
    )
    assert cfg.cors_origins == ("https://app.example.org", "http://localhost:3000", "*")
    loaded = load_tokens(cfg.runtime.security)
    assert loaded is not None and loaded.sent == "service-token-000001"
    roles = [loaded.role_of(t) for t in ("env-client-token-0001", "shared-client-token-02")]
    assert [*roles, loaded.role_of("file-client-token-0001")] == [Role.CLIENT] * 3
    assert loaded.role_of("admin-token-00000001") is Role.ADMIN
    assert loaded.role_of("unknown-token-0000001") is None


def test_tokens_never_appear_in_errors_or_the_docs() -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_env({"MAILMESH_AUTH_CLIENT_TOKENS": "s3cret-client-token-1,", "GATEWAY_HTTP_PORT": "x"})
    assert "s3cret" not in str(info.value)
    assert "GATEWAY_AUTH_TOKENS" not in describe_markdown(Config)  # one configuration: MAILMESH_AUTH_*


def test_the_readme_table_is_generated_from_the_config() -> None:
    assert describe_markdown(Config) in README.read_text()
