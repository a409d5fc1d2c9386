"""Cassandra for asyncio services: one way to build the cluster, bounded requests, driver errors.

Module map:

- :mod:`~dbkit.cassandra.names` — keyspace names and consistency levels a configuration accepts (no driver);
- :mod:`~dbkit.cassandra.settings` — :class:`CassandraSettings`, the ``*_CASSANDRA_*`` variables both stores
  embed (no driver);
- :mod:`~dbkit.cassandra.cluster` — ``ConnectOptions``, ``build_cluster``, driver exceptions → ``DbError``;
- :mod:`~dbkit.cassandra.bridge` — :class:`Bridge`: statements from asyncio, at most N in flight.

Used by ``archivestore.cassandra``, ``msgstore.cassandra`` and the Spark job's executors; this ``__init__``
imports nothing, so a configuration can import :mod:`~dbkit.cassandra.names` and
:mod:`~dbkit.cassandra.settings` without loading the driver.
"""
