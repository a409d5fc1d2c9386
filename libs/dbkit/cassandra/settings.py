"""The Cassandra connection and keyspace settings every store takes, declared once.

The archive and the messaging store embed :class:`CassandraSettings` in their own configuration with
:func:`meshcore.config.nested`, each under its own prefix and with its own keyspace::

    cassandra: CassandraSettings = nested(
        CassandraSettings, prefix="ARCHIVE_CASSANDRA", defaults={"keyspace": "mailmesh"}
    )

which reads ``ARCHIVE_CASSANDRA_HOSTS``, ``ARCHIVE_CASSANDRA_PORT`` and so on (the messaging store's
``prefix="{prefix}_CASSANDRA"`` gives ``MSGSTORE_CASSANDRA_*``). A setting added here reaches both stores,
so they cannot drift apart again. Driver-free, like :mod:`~dbkit.cassandra.names`: a configuration imports
it without loading cassandra-driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from dbkit.cassandra.credentials import Credentials, credentials_from
from dbkit.cassandra.names import CONSISTENCY_LEVELS, parse_keyspace
from meshcore.config import FromEnv, setting
from meshcore.parsers import (
    parse_choice,
    parse_duration,
    parse_int,
    parse_list,
    parse_optional_file,
    parse_str,
)

__all__ = ["CassandraSettings", "parse_dc_factors"]

# A data centre name as cassandra-rackdc.properties spells it (GossipingPropertyFileSnitch).
_DC = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def parse_dc_factors(raw: str) -> tuple[tuple[str, int], ...]:
    """``dc1=3,dc2=3`` → ((dc, replication factor), …) for NetworkTopologyStrategy; empty = none."""
    out: dict[str, int] = {}
    for index, part in enumerate(p.strip() for p in raw.split(",") if p.strip()):
        key, sep, value = (s.strip() for s in part.partition("="))
        if not sep or not key or not value:
            raise ValueError(f"item {index + 1}: must be key=value")
        if not _DC.match(key):
            raise ValueError(f"{key}: not a data centre name")
        out[key] = parse_int(1, 10)(value)
    return tuple(out.items())


@dataclass(frozen=True, kw_only=True)
class CassandraSettings(FromEnv):
    """Where the cluster is, how each request behaves, how to log in, and how a new keyspace replicates.

    The keyspace has no default here: each store names its own (``nested(..., defaults={"keyspace": …})``),
    so two stores never share one by accident.
    """

    hosts: tuple[str, ...] = setting(
        "{prefix}_HOSTS",
        parse_list(parse_str(allow_empty=False)),
        default="127.0.0.1",
        doc="Cassandra: comma-separated contact points of the local data centre.",
    )
    port: int = setting(
        "{prefix}_PORT", parse_int(1, 65535), default="9042", doc="Cassandra: CQL native port."
    )
    keyspace: str = setting(
        "{prefix}_KEYSPACE",
        parse_keyspace,
        doc="Cassandra: keyspace of this store's tables, created and migrated at start-up.",
    )
    consistency: str = setting(
        "{prefix}_CONSISTENCY",
        parse_choice(*CONSISTENCY_LEVELS, case_sensitive=False),
        default="LOCAL_QUORUM",
        doc="Cassandra: consistency level of every read and write (the messaging store's lease conditions "
        "use LOCAL_SERIAL).",
    )
    local_dc: str = setting(
        "{prefix}_LOCAL_DC",
        parse_str(),
        default="",
        doc="Cassandra: data centre whose replicas coordinate; empty = the contact points' data centre.",
    )
    replication_factor: int = setting(
        "{prefix}_REPLICATION_FACTOR",
        parse_int(1, 10),
        default="1",
        doc="Cassandra: SimpleStrategy replication factor of a keyspace the store creates "
        "(ignored when {prefix}_REPLICATION_DCS is set).",
    )
    replication_dcs: tuple[tuple[str, int], ...] = setting(
        "{prefix}_REPLICATION_DCS",
        parse_dc_factors,
        default="",
        doc="Cassandra: NetworkTopologyStrategy factors of a keyspace the store creates, e.g. dc1=3,dc2=3; "
        "empty = SimpleStrategy. An existing keyspace is never altered.",
    )
    request_timeout_s: float = setting(
        "{prefix}_REQUEST_TIMEOUT_SECONDS",
        parse_duration(0.1, 600),
        default="12",
        doc="Cassandra: client-side timeout of one request (keep above the server's 5 s write timeout).",
    )
    connect_timeout_s: float = setting(
        "{prefix}_CONNECT_TIMEOUT_SECONDS",
        parse_duration(0.1, 600),
        default="5",
        doc="Cassandra: timeout of one connection attempt.",
    )
    username: str = setting(
        "{prefix}_USERNAME",
        parse_str(),
        default="",
        doc="Cassandra: role to log in as (PasswordAuthenticator); empty = the cluster has no authenticator.",
    )
    password: str = setting(
        "{prefix}_PASSWORD",
        parse_str(),
        default="",
        secret=True,
        doc="Cassandra: password of {prefix}_USERNAME; wins over {prefix}_PASSWORD_FILE.",
    )
    password_file: str = setting(
        "{prefix}_PASSWORD_FILE",
        parse_optional_file(),
        default="",
        doc="Cassandra: file whose first line is the password (a mounted Secret).",
    )
    max_in_flight: int = setting(
        "{prefix}_MAX_IN_FLIGHT",
        parse_int(1, 100_000),
        default="128",
        doc="Cassandra: requests outstanding at once (backpressure on the driver).",
    )

    def __post_init__(self) -> None:
        # meshcore.config fills in {prefix} when it reports the error, so it names the operator's variable.
        if (self.password or self.password_file) and not self.username:
            raise ValueError("a Cassandra password is set but no {prefix}_USERNAME")

    @property
    def replication(self) -> dict[str, str | int]:
        """Replication map of a keyspace the store creates (``CREATE KEYSPACE … WITH replication = …``)."""
        if self.replication_dcs:
            return {"class": "NetworkTopologyStrategy", **dict(self.replication_dcs)}
        return {"class": "SimpleStrategy", "replication_factor": self.replication_factor}

    @property
    def credentials(self) -> Credentials | None:
        """The login these settings give (the password file read now); None = no authenticator."""
        return credentials_from(self.username, self.password, self.password_file)
