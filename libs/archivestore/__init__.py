"""Archive storage: one protocol, two backends, one factory (docs/archive.md).

- :mod:`~archivestore.protocol` — ``ArchiveStore``, the protocol every backend implements;
- :mod:`~archivestore.types`, :mod:`~archivestore.errors`, :mod:`~archivestore.retention`,
  :mod:`~archivestore.ordering`, :mod:`~archivestore.visibility` — backend-neutral values and rules;
- :mod:`~archivestore.config` — ``StoreConfig``, the ``ARCHIVE_*`` store settings;
- :mod:`~archivestore.factory` — ``create_store(config)`` / ``open_store(config)``;
- :mod:`archivestore.sqlite`, :mod:`archivestore.cassandra` — the backends, reached through the factory.

Only the archive service (and the Spark job, which maintains the tables) use this package; nothing else
touches the tables. This ``__init__`` imports nothing, so importing a pure module never loads a driver.
"""
