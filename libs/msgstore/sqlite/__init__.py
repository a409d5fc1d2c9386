"""The SQLite backend: one file, WAL, one writer connection.

The model and why: docs/messaging-store.md "Design decisions and why".

Module map:

- :mod:`~msgstore.sqlite.store` — :class:`SqliteMsgStore`: connections, open/close, expiry;
- :mod:`~msgstore.sqlite.schema` — tables, migrations, ``dbkit`` → msgstore error translation;
- :mod:`~msgstore.sqlite.leases` — leases in one transaction;
- :mod:`~msgstore.sqlite.outbox` — the send service's outbox and change log;
- :mod:`~msgstore.sqlite.records` — records, subscriptions, events and their writer.

Connections, threads and the migration runner are :mod:`dbkit.sqlite`'s (shared with the archive).
Reached through :func:`msgstore.factory.create_store`; this ``__init__`` imports nothing.
"""
