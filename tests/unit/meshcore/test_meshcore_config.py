"""Config: declared once, loaded from a mapping, every problem reported at once, documented."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from pathlib import Path

import pytest

from meshcore.config import (
    ConfigError,
    FromEnv,
    RuntimeConfig,
    describe,
    describe_markdown,
    load_config,
    runtime_settings,
    setting,
)
from meshcore.parsers import (
    HostPort,
    parse_bool,
    parse_duration,
    parse_hex_bytes,
    parse_host_port,
    parse_int,
    parse_list,
    parse_path,
    parse_str,
)


@dataclass(frozen=True, kw_only=True)
class ArchiveConfig(FromEnv):
    """A service config as a service would write it."""

    runtime: RuntimeConfig = runtime_settings(
        "ARCHIVE", service_name="archive", grpc_port=50053, metrics_port=9153
    )
    cassandra: tuple[HostPort, ...] = setting(
        "ARCHIVE_CASSANDRA_HOSTS",
        parse_list(parse_host_port(default_port=9042)),
        default="127.0.0.1",
        doc="Cassandra contact points, comma separated host[:port].",
    )
    cursor_key: bytes = setting(
        "ARCHIVE_CURSOR_KEY", parse_hex_bytes(32), doc="HMAC key for cursors, 32 bytes hex.", secret=True
    )
    batch: int = setting("ARCHIVE_BATCH", parse_int(1, 1000), default="100", doc="Rows per write batch.")
    compact: bool = setting("ARCHIVE_COMPACT", parse_bool(), default="false", doc="Compact on start.")
    retention_s: float = setting(
        "ARCHIVE_RETENTION", parse_duration(min_value=60), default="30d", doc="Retention in seconds."
    )
    data_dir: Path = setting("ARCHIVE_DATA_DIR", parse_path(), default="/var/lib/archive", doc="SQLite dir.")
    table: str = setting(
        "ARCHIVE_TABLE", parse_str(allow_empty=False), default="envelopes", doc="Table name."
    )

    def __post_init__(self) -> None:
        if self.compact and self.batch > 500:
            raise ValueError("ARCHIVE_COMPACT needs ARCHIVE_BATCH <= 500")


KEY = "11" * 32


def test_happy_path_uses_env_values_and_defaults() -> None:
    cfg = ArchiveConfig.from_env(
        {
            "ARCHIVE_CURSOR_KEY": "0x" + KEY,
            "ARCHIVE_GRPC_PORT": "0",
            "ARCHIVE_CASSANDRA_HOSTS": "10.0.0.1:9043, [::1] ,",
            "ARCHIVE_RETENTION": "2h",
            "ARCHIVE_COMPACT": "YES",
            "MAILMESH_LOG_LEVEL": "debug",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
        }
    )
    assert cfg.cursor_key == bytes.fromhex(KEY)
    assert cfg.cassandra == (HostPort("10.0.0.1", 9043), HostPort("::1", 9042))
    assert [str(h) for h in cfg.cassandra] == ["10.0.0.1:9043", "[::1]:9042"]
    assert cfg.retention_s == 7200.0
    assert cfg.compact is True
    assert cfg.batch == 100
    assert cfg.data_dir == Path("/var/lib/archive")
    rt = cfg.runtime
    assert (rt.service_name, rt.grpc_port, rt.metrics_port) == ("archive", 0, 9153)
    assert (rt.log_level, rt.log_format, rt.otlp_endpoint) == ("DEBUG", "json", "http://collector:4317")
    with pytest.raises(FrozenInstanceError):
        cfg.batch = 5  # type: ignore[misc]


def test_every_bad_or_missing_variable_is_reported_at_once() -> None:
    env = {
        "ARCHIVE_GRPC_PORT": "fifty",
        "ARCHIVE_METRICS_PORT": "-2",
        "ARCHIVE_BATCH": "0",
        "ARCHIVE_COMPACT": "on",
        "ARCHIVE_RETENTION": "10",
        "ARCHIVE_CASSANDRA_HOSTS": "a:1,b:x",
        "MAILMESH_LOG_FORMAT": "xml",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317",
    }
    with pytest.raises(ConfigError) as raised:
        load_config(ArchiveConfig, env)
    problems = raised.value.problems
    assert [p.split(":")[0].split("=")[0] for p in problems] == [
        "ARCHIVE_GRPC_PORT",
        "ARCHIVE_METRICS_PORT",
        "MAILMESH_LOG_FORMAT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "ARCHIVE_CASSANDRA_HOSTS",
        "ARCHIVE_CURSOR_KEY",
        "ARCHIVE_BATCH",
        "ARCHIVE_COMPACT",
        "ARCHIVE_RETENTION",
    ]
    assert "ARCHIVE_GRPC_PORT='fifty': must be an integer" in problems
    assert "ARCHIVE_CASSANDRA_HOSTS='a:1,b:x': item 2: port must be an integer in 1..65535" in problems
    assert any(p.startswith("ARCHIVE_CURSOR_KEY: required but not set") for p in problems)
    assert str(raised.value).startswith("9 configuration problem(s):\n  - ARCHIVE_GRPC_PORT")


def test_secret_values_never_appear_in_errors() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(ArchiveConfig, {"ARCHIVE_CURSOR_KEY": "deadbeef"})
    assert raised.value.problems == (
        "ARCHIVE_CURSOR_KEY=<secret>: must be 32 bytes (64 hex digits), got 4 bytes",
    )
    assert "deadbeef" not in str(raised.value)


def test_cross_field_checks_in_post_init_become_config_errors() -> None:
    with pytest.raises(ConfigError, match="ARCHIVE_COMPACT needs ARCHIVE_BATCH <= 500"):
        load_config(
            ArchiveConfig, {"ARCHIVE_CURSOR_KEY": KEY, "ARCHIVE_COMPACT": "1", "ARCHIVE_BATCH": "900"}
        )


def test_describe_lists_every_variable_with_default_and_doc() -> None:
    rows = describe(ArchiveConfig)
    by_env = {row.env: row for row in rows}
    assert by_env["ARCHIVE_GRPC_PORT"].default == "50053"
    assert by_env["ARCHIVE_METRICS_PORT"].default == "9153"
    assert by_env["MAILMESH_LOG_LEVEL"].default == "INFO"
    assert by_env["OTEL_EXPORTER_OTLP_ENDPOINT"].default == ""
    assert by_env["ARCHIVE_CURSOR_KEY"].default is None  # required
    assert by_env["ARCHIVE_RETENTION"] == ("ARCHIVE_RETENTION", "30d", "Retention in seconds.")
    assert by_env["MAILMESH_GRPC_KEEPALIVE_SECONDS"].default == "10"
    assert by_env["MAILMESH_GRPC_MAX_CONNECTION_AGE_SECONDS"].default == "300"
    assert len(rows) == len(by_env) == 14 + 11 + 7  # RuntimeConfig, its SecurityConfig, own
    table = describe_markdown(ArchiveConfig)
    assert "| `ARCHIVE_CURSOR_KEY` | *(required)* | HMAC key for cursors, 32 bytes hex. |" in table


def test_runtime_config_standalone_needs_a_prefix() -> None:
    with pytest.raises(TypeError, match="needs a prefix"):
        load_config(RuntimeConfig, {})
    rt = load_config(RuntimeConfig, {"INGEST_GRPC_PORT": "50052"}, prefix="INGEST")
    assert rt.grpc_port == 50052
    assert rt.metrics_port == 9090
    assert rt.shutdown_grace_s == 10.0


def test_bad_defaults_fail_at_class_definition() -> None:
    with pytest.raises(ValueError, match="must be an integer"):
        setting("X", parse_int(), default="ten", doc="x")
