"""Cassandra login: settings → credentials → the driver's PlainTextAuthProvider, the password never shown.

The local test node runs without an authenticator (docs/cassandra.md), so this checks the wiring up to the
driver's ``Cluster`` object; what the driver then sends is cassandra-driver's (SASL PLAIN).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cassandra.auth import PlainTextAuthProvider

from archivestore.config import StoreConfig as ArchiveConfig
from archivestore.factory import create_store
from dbkit.cassandra.cluster import ConnectOptions, build_cluster
from dbkit.cassandra.credentials import Credentials, credentials_from
from meshcore.config import ConfigError
from msgstore.config import StoreConfig as MessagingConfig

PASSWORD = "s3cret-cassandra-pw"


def test_build_cluster_logs_in_only_with_credentials() -> None:
    plain = build_cluster(ConnectOptions(("127.0.0.1",), 9042))
    assert plain.auth_provider is None
    cluster = build_cluster(
        ConnectOptions(("127.0.0.1",), 9042, credentials=Credentials("mailmesh", PASSWORD))
    )
    provider = cluster.auth_provider
    assert isinstance(provider, PlainTextAuthProvider)
    assert (provider.username, provider.password) == ("mailmesh", PASSWORD)
    authenticator = provider.new_authenticator("127.0.0.1")
    assert authenticator.initial_response() == b"\x00mailmesh\x00" + PASSWORD.encode()  # SASL PLAIN


def test_credentials_come_from_the_env_or_a_file(tmp_path: Path) -> None:
    file = tmp_path / "password"
    file.write_text(f"{PASSWORD}\n")
    assert credentials_from("", "", "") is None
    assert credentials_from("u", PASSWORD, "") == Credentials("u", PASSWORD)
    assert credentials_from("u", "", str(file)) == Credentials("u", PASSWORD)
    assert credentials_from("u", "inline-wins", str(file)) == Credentials("u", "inline-wins")
    with pytest.raises(ValueError, match="no password"):
        credentials_from("u", "", "")
    assert PASSWORD not in repr(Credentials("u", PASSWORD))


def test_archive_and_messaging_stores_pass_the_login_to_the_driver(tmp_path: Path) -> None:
    file = tmp_path / "password"
    file.write_text(PASSWORD)
    archive = ArchiveConfig.from_env(
        {
            "ARCHIVE_BACKEND": "cassandra",
            "ARCHIVE_CASSANDRA_USERNAME": "archive",
            "ARCHIVE_CASSANDRA_PASSWORD_FILE": str(file),
        }
    )
    assert archive.cassandra.credentials == Credentials("archive", PASSWORD)
    store = create_store(archive)
    assert store._connect.credentials == Credentials("archive", PASSWORD)  # type: ignore[attr-defined]
    messaging = MessagingConfig.from_env(
        {"MSGSTORE_CASSANDRA_USERNAME": "m", "MSGSTORE_CASSANDRA_PASSWORD": PASSWORD}
    )
    assert messaging.cassandra.credentials == Credentials("m", PASSWORD)
    assert MessagingConfig.from_env({}).cassandra.credentials is None


def test_a_password_without_a_username_is_a_config_error_that_hides_it() -> None:
    with pytest.raises(ConfigError) as raised:
        ArchiveConfig.from_env({"ARCHIVE_CASSANDRA_PASSWORD": PASSWORD})
    assert "ARCHIVE_CASSANDRA_USERNAME" in str(raised.value) and PASSWORD not in str(raised.value)
    with pytest.raises(ConfigError):
        MessagingConfig.from_env({"MSGSTORE_CASSANDRA_PASSWORD": PASSWORD})
