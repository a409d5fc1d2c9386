"""The Cassandra messaging store: connection (:func:`dbkit.cassandra.cluster.build_cluster`, as the
archive's), schema, the three parts."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime

from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster, Session

from dbkit.cassandra.cluster import ConnectOptions, build_cluster
from dbkit.cassandra.credentials import Credentials
from msgstore.cassandra.leases import CassandraLeases
from msgstore.cassandra.outbox import CassandraOutbox
from msgstore.cassandra.payloads import Payloads
from msgstore.cassandra.records import CassandraRecords
from msgstore.cassandra.schema import keyspace_cql, pending
from msgstore.cassandra.session import Cql
from msgstore.errors import MsgStoreError, SchemaError, StoreUnavailable
from msgstore.settings import StoreSettings

__all__ = ["CassandraMsgStore"]


class CassandraMsgStore:
    """Leases, outbox and records in one Cassandra keyspace."""

    backend = "cassandra"

    def __init__(
        self,
        hosts: list[str],
        port: int,
        keyspace: str,
        settings: StoreSettings,
        *,
        consistency: str = "LOCAL_QUORUM",
        local_dc: str | None = None,
        replication: Mapping[str, str | int] | None = None,
        request_timeout: float = 12.0,
        connect_timeout: float = 5.0,
        max_in_flight: int = 128,
        credentials: Credentials | None = None,
    ) -> None:
        self.keyspace = keyspace
        self.settings = settings
        self._replication: dict[str, str | int] = dict(
            replication or {"class": "SimpleStrategy", "replication_factor": 1}
        )
        self._max_in_flight = max_in_flight
        self._connect = ConnectOptions(
            contact_points=tuple(hosts),
            port=port,
            consistency=getattr(ConsistencyLevel, consistency.upper()),
            request_timeout=request_timeout,
            connect_timeout=connect_timeout,
            local_dc=local_dc,
            max_in_flight=max_in_flight,
            credentials=credentials,
        )
        self._cluster: Cluster | None = None
        self._cql: Cql | None = None
        self._parts: tuple[CassandraLeases, CassandraOutbox, CassandraRecords] | None = None

    def _part(self) -> tuple[CassandraLeases, CassandraOutbox, CassandraRecords]:
        if self._parts is None:
            raise StoreUnavailable("messaging store is not open")
        return self._parts

    @property
    def leases(self) -> CassandraLeases:
        """The leases."""
        return self._part()[0]

    @property
    def outbox(self) -> CassandraOutbox:
        """The outbox."""
        return self._part()[1]

    @property
    def records(self) -> CassandraRecords:
        """Records, subscriptions and events."""
        return self._part()[2]

    async def open(self) -> None:
        """Connect, create the keyspace, apply pending migrations. Idempotent."""
        if self._parts is not None:
            return
        cluster = build_cluster(self._connect)
        try:
            session = await asyncio.to_thread(self._open_sync, cluster)
        except BaseException:
            await asyncio.to_thread(cluster.shutdown)
            raise
        self._cluster = cluster
        self._cql = cql = Cql(session, self.keyspace, self._max_in_flight)
        payloads = Payloads(cql, self.settings)
        self._parts = (
            CassandraLeases(cql),
            CassandraOutbox(cql, payloads, self.settings),
            CassandraRecords(cql, payloads, self.settings),
        )

    def _open_sync(self, cluster: Cluster) -> Session:
        try:
            session = cluster.connect()
        except Exception as err:
            raise StoreUnavailable(f"cannot connect to Cassandra: {err}") from err
        ks = self.keyspace
        try:
            session.execute(keyspace_cql(ks, self._replication))
            session.execute(
                f"CREATE TABLE IF NOT EXISTS {ks}.schema_migrations "
                "(version int PRIMARY KEY, description text, applied_at timestamp)"
            )
            applied = {row[0] for row in session.execute(f"SELECT version FROM {ks}.schema_migrations")}
            for version, description, statements in pending(applied):
                for cql in statements:
                    session.execute(cql.replace("{ks}", ks))
                session.execute(
                    f"INSERT INTO {ks}.schema_migrations (version, description, applied_at) "
                    "VALUES (%s, %s, %s)",
                    (version, description, datetime.now(UTC)),
                )
        except MsgStoreError:
            raise
        except Exception as err:
            raise SchemaError(f"cannot migrate keyspace {ks}: {err}") from err
        return session

    async def close(self) -> None:
        """Wait for requests in flight, then shut the driver down."""
        parts, cluster = self._parts, self._cluster
        self._parts, self._cluster = None, None
        if parts is not None:
            await parts[1]._cql.bridge.drain()
        if cluster is not None:
            await asyncio.to_thread(cluster.shutdown)

    async def maintain(self, *, now: float) -> int:
        """Nothing to do: every aged row carries a TTL."""
        return 0
