"""The Cassandra backend (docs/messaging-store.md "Design decisions and why").

Module map:

- :mod:`~msgstore.cassandra.store` — :class:`CassandraMsgStore`: connection, schema, the parts;
- :mod:`~msgstore.cassandra.schema` — keyspace, tables, migrations;
- :mod:`~msgstore.cassandra.session` — prepared statements over :mod:`dbkit.cassandra`'s bridge, errors;
- :mod:`~msgstore.cassandra.leases` — leases as lightweight transactions;
- :mod:`~msgstore.cassandra.outbox` — outbox, open-request index, per-shard change logs;
- :mod:`~msgstore.cassandra.listings` — record listings: bucket counts and skip/take;
- :mod:`~msgstore.cassandra.records` — records, subscriptions, events and their writer.

Reached through :func:`msgstore.factory.create_store`; this ``__init__`` imports nothing.
"""
