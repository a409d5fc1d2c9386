"""Gateway configuration: defaults (ports of docs/design.md "Services"), limits, the README table."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshcore import ConfigError, describe_markdown
from services.gateway.config import Config
from services.gateway.server import load_tokens

README = Path(__file__).resolve().parents[3] / "services" / "gateway" / "README.md"


def test_defaults() -> None:
    cfg = Config.from_env({})
    assert (cfg.http_port, cfg.runtime.grpc_port, cfg.runtime.metrics_port) == (8645, 50058, 9158)
    assert (cfg.send_addr, cfg.subscription_addr, cfg.health_addr) == (
        "127.0.0.1:50055",
        "127.0.0.1:50056",
        "127.0.0.1:50057",
    )
    assert cfg.auth_tokens == () and cfg.cors_origins == () and cfg.rate_limit_per_s == 0
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


def test_cors_origins_and_tokens_from_the_variable_and_a_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# operators\nfile-token\n\nshared\n")
    cfg = Config.from_env(
        {
            "GATEWAY_CORS_ORIGINS": "https://app.example.org, http://localhost:3000/,*",
            "GATEWAY_AUTH_TOKENS": "env-token,shared",
            "GATEWAY_AUTH_TOKENS_FILE": str(tokens),
        }
    )
    assert cfg.cors_origins == ("https://app.example.org", "http://localhost:3000", "*")
    assert load_tokens(cfg) == ("env-token", "shared", "file-token")


def test_tokens_never_appear_in_errors_or_the_docs() -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_env({"GATEWAY_AUTH_TOKENS": "s3cret,", "GATEWAY_HTTP_PORT": "x"})
    assert "s3cret" not in str(info.value)


def test_the_readme_table_is_generated_from_the_config() -> None:
    assert describe_markdown(Config) in README.read_text()
