"""The ingest config: defaults, parsing, cross-field checks, and the README table."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshcore.config import ConfigError, describe_markdown
from services.ingest.config import Config, parse_grpc_target

README = Path(__file__).resolve().parents[3] / "services" / "ingest" / "README.md"


def test_defaults_match_status_go_and_the_design() -> None:
    cfg = Config.from_env({})
    assert cfg.runtime.service_name == "ingest"
    assert (cfg.runtime.grpc_port, cfg.runtime.metrics_port) == (50052, 9152)
    assert cfg.archive_addr == "127.0.0.1:50053"
    assert cfg.max_message_size == 1024 * 1024
    assert cfg.min_pow == 0.000002
    assert cfg.sync_allowance_s == 10
    assert cfg.topic_allowlist == frozenset()
    assert (cfg.batch_max_envelopes, cfg.batch_max_delay_ms) == (500, 20)
    assert cfg.batch_max_delay_s == 0.02
    assert cfg.stream_max_unacked_batches == 16


def test_topic_allow_list_parses_hex_topics() -> None:
    cfg = Config.from_env({"INGEST_TOPIC_ALLOWLIST": "0x01020304, 0A0B0C0D,"})
    assert cfg.topic_allowlist == frozenset({bytes.fromhex("01020304"), bytes.fromhex("0a0b0c0d")})


def test_every_bad_variable_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_env(
            {
                "INGEST_TOPIC_ALLOWLIST": "0x010203",
                "INGEST_MAX_MESSAGE_SIZE": str(10 * 1024 * 1024 + 1),
                "INGEST_BATCH_MAX_ENVELOPES": "1001",
                "INGEST_ARCHIVE_ADDR": "nohostport",
            }
        )
    text = str(info.value)
    for name in (
        "INGEST_TOPIC_ALLOWLIST",
        "INGEST_MAX_MESSAGE_SIZE",
        "INGEST_BATCH_MAX_ENVELOPES",
        "INGEST_ARCHIVE_ADDR",
    ):
        assert name in text


def test_cross_field_checks() -> None:
    with pytest.raises(ConfigError, match="INGEST_MAX_PENDING_ENVELOPES"):
        Config.from_env({"INGEST_BATCH_MAX_ENVELOPES": "500", "INGEST_MAX_PENDING_ENVELOPES": "100"})
    with pytest.raises(ConfigError, match="INGEST_GRPC_MAX_MESSAGE_BYTES"):
        Config.from_env({"INGEST_BATCH_MAX_BYTES": str(32 * 1024 * 1024)})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("archive:50053", "archive:50053"),
        ("[::1]:50053", "[::1]:50053"),
        ("dns:///archive.mailmesh.svc:50053", "dns:///archive.mailmesh.svc:50053"),
        ("unix:/run/archive.sock", "unix:/run/archive.sock"),
    ],
)
def test_grpc_targets(raw: str, expected: str) -> None:
    assert parse_grpc_target(raw) == expected


@pytest.mark.parametrize("raw", ["archive", "dns:///", "archive:0"])
def test_bad_grpc_targets(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_grpc_target(raw)


def test_readme_table_is_generated_from_the_config() -> None:
    assert describe_markdown(Config) in README.read_text()
