"""The archive service's configuration: defaults, parsers, cross-field checks, and the README table."""

from __future__ import annotations

from pathlib import Path

import pytest

from archivestore.config import (
    DefaultShards,
    StoreConfig,
    parse_default_shards,
    parse_topic_retention,
)
from dbkit.cassandra.settings import parse_dc_factors
from meshcore.config import ConfigError, describe, describe_markdown
from services.archive.config import Config

README = Path(__file__).resolve().parents[3] / "services" / "archive" / "README.md"


def test_defaults_match_the_design() -> None:
    cfg = Config.from_env({})
    assert (cfg.runtime.service_name, cfg.runtime.grpc_port, cfg.runtime.metrics_port) == (
        "archive",
        50053,
        9153,
    )
    assert cfg.store.backend == "sqlite" and cfg.store.sqlite_path == Path("var/archive.sqlite3")
    assert (cfg.store.cassandra.hosts, cfg.store.cassandra.port, cfg.store.cassandra.keyspace) == (
        ("127.0.0.1",),
        9042,
        "mailmesh",
    )
    assert cfg.store.cassandra.consistency == "LOCAL_QUORUM" and cfg.store.cassandra.local_dc == ""
    assert cfg.store.cassandra.replication == {"class": "SimpleStrategy", "replication_factor": 1}
    assert (cfg.store.retention_days, cfg.store.topic_retention, cfg.store.bucket_seconds) == (30, (), 3600)
    assert cfg.store.default_shards == DefaultShards(time=4, topic=1)
    assert (cfg.purge_interval_s, cfg.stats_interval_s) == (3600, 60)
    assert cfg.store.retention.default_s == 30 * 86_400 and not cfg.store.retention.per_topic_s


def test_every_variable_is_prefixed_and_documented() -> None:
    rows = describe(Config)
    own = [r for r in rows if r.env.startswith("ARCHIVE_")]
    assert len(own) == len({r.env for r in own})
    assert {r.env for r in rows} - {r.env for r in own} == {
        "MAILMESH_LOG_LEVEL",
        "MAILMESH_LOG_FORMAT",
        "MAILMESH_GRPC_KEEPALIVE_SECONDS",
        "MAILMESH_GRPC_KEEPALIVE_TIMEOUT_SECONDS",
        "MAILMESH_GRPC_MAX_CONNECTION_AGE_SECONDS",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        *(f"MAILMESH_TLS_{part}" for part in ("CERT", "KEY", "CA", "SERVER_NAME")),
        "MAILMESH_AUTH",
        *(
            f"MAILMESH_AUTH_{role}_TOKENS{suffix}"
            for role in ("CLIENT", "SERVICE", "ADMIN")
            for suffix in ("", "_FILE")
        ),
    }
    assert all(r.doc.strip() for r in rows)
    assert "ARCHIVE_PORT" not in {r.env for r in rows}  # Kubernetes injects <SERVICE>_PORT


def test_readme_table_is_generated_from_the_config() -> None:
    assert describe_markdown(Config) in README.read_text()


def test_retention_days_and_topic_overrides() -> None:
    cfg = Config.from_env(
        {"ARCHIVE_RETENTION_DAYS": "0", "ARCHIVE_TOPIC_RETENTION": "0xaabbccdd=7, 01020304=0.5"}
    )
    assert cfg.store.retention.default_s is None  # 0 = forever
    assert cfg.store.retention.per_topic_s == {
        bytes.fromhex("aabbccdd"): 7 * 86_400,
        bytes.fromhex("01020304"): 43_200,
    }


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("0xaabbcc=7", "a topic is 4 bytes of hex"),
        ("0xzzbbccdd=7", "a topic is 4 bytes of hex"),
        ("0xaabbccdd", "must be key=value"),
        ("0xaabbccdd=0", "retention must be > 0 days"),
        ("0xaabbccdd=x", "must be a number"),
        ("0xaabbccdd=1,0xAABBCCDD=2", "topic given twice"),
    ],
)
def test_bad_topic_retention_is_refused(raw: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_topic_retention(raw)


def test_default_shards_and_replication_parsers() -> None:
    assert parse_default_shards("time=8") == DefaultShards(8, 1)
    assert parse_default_shards("topic=2,time=3") == DefaultShards(3, 2)
    with pytest.raises(ValueError, match="unknown table"):
        parse_default_shards("hour=2")
    with pytest.raises(ValueError, match="must be <= 1024"):
        parse_default_shards("time=5000")
    assert parse_dc_factors("dc1=3, dc-2=2") == (("dc1", 3), ("dc-2", 2))
    with pytest.raises(ValueError, match="not a data centre"):
        parse_dc_factors("d c=3")
    cfg = Config.from_env({"ARCHIVE_CASSANDRA_REPLICATION_DCS": "dc1=3,dc2=3"})
    assert cfg.store.cassandra.replication == {"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 3}
    assert (
        Config.from_env({"ARCHIVE_CASSANDRA_KEYSPACE": " mailmesh_2 "}).store.cassandra.keyspace
        == "mailmesh_2"
    )
    with pytest.raises(ConfigError, match=r"ARCHIVE_CASSANDRA_KEYSPACE.*\[a-z\]"):
        Config.from_env({"ARCHIVE_CASSANDRA_KEYSPACE": "Mail-Mesh"})


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        Config.from_env(
            {
                "ARCHIVE_BACKEND": "leveldb",
                "ARCHIVE_CASSANDRA_CONSISTENCY": "MOST",
                "ARCHIVE_MAX_PUT_ITEMS": "5000",
                "ARCHIVE_TOPIC_RETENTION": "0x01=1",
            }
        )
    joined = "\n".join(info.value.problems)
    assert len(info.value.problems) == 4
    for name in (
        "ARCHIVE_BACKEND",
        "ARCHIVE_CASSANDRA_CONSISTENCY",
        "ARCHIVE_MAX_PUT_ITEMS",
        "ARCHIVE_TOPIC_RETENTION",
    ):
        assert name in joined


def test_cross_field_checks() -> None:
    with pytest.raises(ConfigError, match="must divide a day"):
        Config.from_env({"ARCHIVE_BUCKET_SECONDS": "7000"})
    with pytest.raises(ConfigError, match="does not fit in a gRPC message"):
        Config.from_env({"ARCHIVE_GRPC_MAX_MESSAGE_BYTES": "1048576"})
    small = Config.from_env(
        {"ARCHIVE_GRPC_MAX_MESSAGE_BYTES": "1048576", "ARCHIVE_MAX_ENVELOPE_BYTES": "1000000"}
    )
    assert small.max_envelope_bytes == 1_000_000
    assert (
        Config.from_env({"ARCHIVE_CASSANDRA_CONSISTENCY": "local_one"}).store.cassandra.consistency
        == "LOCAL_ONE"
    )


def test_the_cassandra_batch_default_is_the_adapters() -> None:
    from archivestore.cassandra.writes import DEFAULT_WRITE_BATCH_BYTES

    assert Config.from_env({}).store.cassandra_write_batch_bytes == DEFAULT_WRITE_BATCH_BYTES


def test_the_store_settings_load_alone_with_the_services_names() -> None:
    """The Spark job and the benches read ``StoreConfig`` by itself: same variables, same values."""
    environ = {
        "ARCHIVE_BACKEND": "cassandra",
        "ARCHIVE_CASSANDRA_KEYSPACE": "archive_b",
        "ARCHIVE_BUCKET_SECONDS": "1800",
        "ARCHIVE_TOPIC_RETENTION": "0xaabbccdd=7",
        "ARCHIVE_MAX_PUT_ITEMS": "10",  # the service's own: ignored by the store
    }
    alone = StoreConfig.from_env(environ)
    assert alone == Config.from_env(environ).store
    assert (alone.backend, alone.cassandra.keyspace, alone.bucket_seconds) == ("cassandra", "archive_b", 1800)
    store_vars = {row.env for row in describe(StoreConfig)}
    assert store_vars < {row.env for row in describe(Config)}
    assert "ARCHIVE_MAX_PUT_ITEMS" not in store_vars and "ARCHIVE_BACKEND" in store_vars
