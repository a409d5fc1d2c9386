"""StoreConfig: the MSGSTORE_* variables, their defaults and their checks (msgstore.config)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from meshcore.config import ConfigError, FromEnv, describe, load_config, nested
from msgstore.config import PREFIX, StoreConfig
from msgstore.factory import settings_of


@dataclass(frozen=True, kw_only=True)
class ServiceConfig(FromEnv):
    """How the send and subscription services embed the store settings."""

    store: StoreConfig = nested(StoreConfig, prefix=PREFIX)


def test_defaults() -> None:
    config = StoreConfig.from_env({})
    assert config.backend == "sqlite" and config.sqlite_path == Path("var/messaging.sqlite3")
    assert config.cassandra.keyspace == "mailmesh_messaging" and config.outbox_shards == 16
    settings = settings_of(config)
    assert (settings.shards, settings.event_retention, settings.change_retention) == (16, 3600.0, 86400.0)
    assert settings.record_expiry(100.0) == 100.0 + 604800.0


def test_embedded_and_standalone_read_the_same_variables() -> None:
    env = {
        "MSGSTORE_BACKEND": "cassandra",
        "MSGSTORE_OUTBOX_SHARDS": "32",
        "MSGSTORE_RECORD_RETENTION_SECONDS": "0",
    }
    embedded = load_config(ServiceConfig, env).store
    assert embedded == StoreConfig.from_env(env)
    assert (embedded.backend, embedded.outbox_shards) == ("cassandra", 32)
    assert settings_of(embedded).record_expiry(5.0) is None  # 0 = forever
    names = {doc.env for doc in describe(ServiceConfig)}
    assert {
        "MSGSTORE_BACKEND",
        "MSGSTORE_EVENT_RETENTION_SECONDS",
        "MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS",
    } <= names


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MSGSTORE_EVENT_RETENTION_SECONDS", "599"),  # StreamEvents promises at least 10 minutes
        ("MSGSTORE_OUTBOX_SHARDS", "0"),
        ("MSGSTORE_BACKEND", "leveldb"),
        ("MSGSTORE_CASSANDRA_KEYSPACE", "Bad-Name"),
    ],
)
def test_bad_values_are_refused(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        StoreConfig.from_env({name: value})
    assert name in str(info.value)
