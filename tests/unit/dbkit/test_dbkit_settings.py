"""CassandraSettings: one declaration, the same variables under each store's prefix, wired into both."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from archivestore.config import StoreConfig as ArchiveConfig
from archivestore.factory import create_store as create_archive
from dbkit.cassandra.credentials import Credentials
from dbkit.cassandra.settings import CassandraSettings, parse_dc_factors
from meshcore.config import ConfigError, FromEnv, describe, load_config, nested
from msgstore.cassandra.schema import keyspace_cql
from msgstore.config import PREFIX
from msgstore.config import StoreConfig as MessagingConfig
from msgstore.factory import create_store as create_messaging

DOC = Path(__file__).resolve().parents[3] / "docs" / "cassandra.md"
NTS: dict[str, str | int] = {"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 2}


@dataclass(frozen=True, kw_only=True)
class ServiceConfig(FromEnv):
    """The messaging store as the send and subscription services embed it: a prefix inside a prefix."""

    store: MessagingConfig = nested(MessagingConfig, prefix=PREFIX)


def _suffixes(cls: type[object], prefix: str) -> list[str]:
    return [row.env.removeprefix(prefix) for row in describe(cls) if row.env.startswith(prefix)]


def test_both_stores_read_the_same_cassandra_variables_under_their_own_prefix() -> None:
    archive = _suffixes(ArchiveConfig, "ARCHIVE_CASSANDRA_")
    messaging = _suffixes(ServiceConfig, "MSGSTORE_CASSANDRA_")
    assert archive == [*messaging, "WRITE_BATCH_BYTES"]  # the batch size is the archive's own
    assert "REPLICATION_DCS" in messaging and "CONNECT_TIMEOUT_SECONDS" in messaging
    docs = {row.env: row.doc for row in describe(ServiceConfig)}
    assert "MSGSTORE_CASSANDRA_USERNAME" in docs["MSGSTORE_CASSANDRA_PASSWORD"]  # {prefix} filled in docs
    assert "{prefix}" not in "".join(docs.values())


def test_each_store_keeps_its_own_keyspace_and_the_class_alone_needs_a_prefix() -> None:
    assert ArchiveConfig.from_env({}).cassandra.keyspace == "mailmesh"
    assert MessagingConfig.from_env({}).cassandra.keyspace == "mailmesh_messaging"
    assert load_config(ServiceConfig, {"MSGSTORE_CASSANDRA_KEYSPACE": "m2"}).store.cassandra.keyspace == "m2"
    with pytest.raises(TypeError, match="needs a prefix"):
        CassandraSettings.from_env({})
    with pytest.raises(ConfigError, match="P_KEYSPACE: required"):
        load_config(CassandraSettings, {}, prefix="P")


def test_replication_dcs_and_factor() -> None:
    assert parse_dc_factors("dc1=3, dc2=2") == (("dc1", 3), ("dc2", 2))
    with pytest.raises(ValueError, match="must be key=value"):
        parse_dc_factors("dc1")
    settings = load_config(CassandraSettings, {"P_KEYSPACE": "k", "P_REPLICATION_FACTOR": "3"}, prefix="P")
    assert settings.replication == {"class": "SimpleStrategy", "replication_factor": 3}
    both = {"P_KEYSPACE": "k", "P_REPLICATION_FACTOR": "3", "P_REPLICATION_DCS": "dc1=3,dc2=2"}
    assert load_config(CassandraSettings, both, prefix="P").replication == NTS  # the DCs win


def test_the_messaging_store_creates_its_keyspace_with_the_replication_dcs() -> None:
    env = {"MSGSTORE_BACKEND": "cassandra", "MSGSTORE_CASSANDRA_REPLICATION_DCS": "dc1=3,dc2=2"}
    config = load_config(ServiceConfig, env).store
    assert config == MessagingConfig.from_env(env) and config.cassandra.replication == NTS
    store = create_messaging(config)
    assert store._replication == NTS  # type: ignore[attr-defined]
    assert keyspace_cql("ks", NTS) == (
        "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = "
        "{'class': 'NetworkTopologyStrategy', 'dc1': '3', 'dc2': '2'}"
    )
    default = create_messaging(MessagingConfig.from_env({"MSGSTORE_BACKEND": "cassandra"}))
    assert keyspace_cql("ks", default._replication) == (  # type: ignore[attr-defined]
        "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': '1'}"
    )


def test_the_messaging_store_connects_with_the_connect_timeout() -> None:
    default = create_messaging(MessagingConfig.from_env({"MSGSTORE_BACKEND": "cassandra"}))
    assert default._connect.connect_timeout == 5.0  # type: ignore[attr-defined]
    env = {"MSGSTORE_BACKEND": "cassandra", "MSGSTORE_CASSANDRA_CONNECT_TIMEOUT_SECONDS": "2.5"}
    store = create_messaging(load_config(ServiceConfig, env).store)
    assert store._connect.connect_timeout == 2.5  # type: ignore[attr-defined]


def _connection_env(prefix: str) -> dict[str, str]:
    return {
        f"{prefix}_BACKEND": "cassandra",
        f"{prefix}_CASSANDRA_HOSTS": "10.0.0.1,10.0.0.2",
        f"{prefix}_CASSANDRA_PORT": "9142",
        f"{prefix}_CASSANDRA_LOCAL_DC": "dc1",
        f"{prefix}_CASSANDRA_REQUEST_TIMEOUT_SECONDS": "7",
        f"{prefix}_CASSANDRA_CONNECT_TIMEOUT_SECONDS": "3",
        f"{prefix}_CASSANDRA_MAX_IN_FLIGHT": "64",
        f"{prefix}_CASSANDRA_USERNAME": "u",
        f"{prefix}_CASSANDRA_PASSWORD": "pw",
    }


def test_both_stores_pass_every_connection_setting_to_the_driver_options() -> None:
    archive = create_archive(ArchiveConfig.from_env(_connection_env("ARCHIVE")))
    messaging = create_messaging(MessagingConfig.from_env(_connection_env("MSGSTORE")))
    for opts in (archive._connect, messaging._connect):  # type: ignore[attr-defined]
        got = (opts.contact_points, opts.port, opts.local_dc, opts.request_timeout, opts.connect_timeout)
        assert got == (("10.0.0.1", "10.0.0.2"), 9142, "dc1", 7.0, 3.0)
        assert (opts.max_in_flight, opts.credentials) == (64, Credentials("u", "pw"))


def test_a_password_without_a_username_names_the_operators_variable() -> None:
    with pytest.raises(ConfigError, match="no MSGSTORE_CASSANDRA_USERNAME") as raised:
        load_config(ServiceConfig, {"MSGSTORE_CASSANDRA_PASSWORD": "s3cret-pw"})
    assert "{prefix}" not in str(raised.value) and "s3cret-pw" not in str(raised.value)
    with pytest.raises(ConfigError, match="no ARCHIVE_CASSANDRA_USERNAME"):
        ArchiveConfig.from_env({"ARCHIVE_CASSANDRA_PASSWORD": "pw"})


def test_the_docs_table_lists_every_setting_once() -> None:
    rows = [line for line in DOC.read_text().splitlines() if line.startswith("| `_")]
    listed = [line.split("`")[1] for line in rows]
    assert listed == _suffixes(ServiceConfig, "MSGSTORE_CASSANDRA")
