"""Archive storage: one protocol (``protocol.ArchiveStore``), two adapters (``sqlite``, ``cassandra``).

Only the archive service (and the Spark job) use this package; nothing else touches the tables. The data model
and its reasons are in docs/archive.md.
"""
