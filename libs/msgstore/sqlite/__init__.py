"""The SQLite backend: one file, WAL, one writer connection.

The model and why: docs/messaging-store.md "Design decisions and why".

Module map:

- :mod:`~msgstore.sqlite.store` — :class:`SqliteMsgStore`: connections, open/close, expiry;
- :mod:`~msgstore.sqlite.schema` — tables, migrations, error translation;
- :mod:`~msgstore.sqlite.leases` — leases in one transaction;
- :mod:`~msgstore.sqlite.outbox` — the send service's outbox and change log;
- :mod:`~msgstore.sqlite.records` — records, subscriptions, events and their writer.

Reached through :func:`msgstore.factory.create_store`; this ``__init__`` imports nothing.
"""
