"""The archive's view of :class:`dbkit.cassandra.bridge.Bridge`: the same requests, the archive's errors.

Every statement the backend runs goes through one :class:`ArchiveBridge` per open store, so the bound on
requests in flight (``ARCHIVE_CASSANDRA_MAX_IN_FLIGHT``) covers puts, reads and maintenance together. The
shared bridge raises :mod:`dbkit.errors`; this is where they become :mod:`archivestore.errors`
(:func:`~archivestore.errors.from_db`, same message, ``raise … from err``), so no module of the backend
and no caller of the store sees a ``DbError``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cassandra.cluster import Session
from cassandra.query import PreparedStatement, Statement

from archivestore.errors import from_db
from dbkit.cassandra.bridge import Bridge, Page
from dbkit.errors import DbError

__all__ = ["ArchiveBridge"]


class ArchiveBridge:
    """Statements on a connected session from asyncio, at most ``max_in_flight`` outstanding."""

    def __init__(self, session: Session, max_in_flight: int) -> None:
        self._bridge = Bridge(session, max_in_flight)

    @property
    def session(self) -> Session:
        """The driver session the statements run on."""
        return self._bridge.session

    async def fetch(
        self,
        prepared: PreparedStatement,
        params: Sequence[Any],
        *,
        what: str,
        fetch_size: int | None = None,
        paging_state: bytes | None = None,
    ) -> Page:
        """One page of a prepared read (``fetch_size`` rows at most)."""
        try:
            return await self._bridge.fetch(
                prepared, params, what=what, fetch_size=fetch_size, paging_state=paging_state
            )
        except DbError as err:
            raise from_db(err) from err

    async def fetch_all(self, prepared: PreparedStatement, params: Sequence[Any], *, what: str) -> list[Any]:
        """Every row of a prepared read, page by page."""
        try:
            return await self._bridge.fetch_all(prepared, params, what=what)
        except DbError as err:
            raise from_db(err) from err

    async def execute_all(self, statements: Iterable[Statement], *, what: str) -> None:
        """Run writes concurrently (within the in-flight bound); return once all are acknowledged.

        On the first failure no further statement is started, the ones in flight are awaited, and the first
        error is raised as the archive's.
        """
        try:
            await self._bridge.execute_all(statements, what=what)
        except DbError as err:
            raise from_db(err) from err

    async def drain(self) -> None:
        """Wait until no request is in flight."""
        await self._bridge.drain()
