"""The two sharded envelope tables as the job sees them: key columns, data columns, the bucket column.

Names come from :mod:`archivestore.cassandra.schema`; where a row goes (bucket, shard) only ever from
:mod:`archivestore.cassandra.layout`. The job handles both tables in one normalised shape, ``bucket`` (the
time bucket or the day), ``shard``, ``ptopic`` (the topic of a topic-table partition key, null for the time
table), then the row's own columns.
"""

from __future__ import annotations

from dataclasses import dataclass

from archivestore.cassandra.layout import GENERATION_STRIDE
from archivestore.cassandra.schema import KEYS_TABLE, TIME_TABLE, TOPIC_TABLE, TOPICS_BY_DAY

__all__ = [
    "KEYS",
    "TABLES",
    "TIME",
    "TOPIC",
    "TOPICS_CATALOGUE",
    "TableSpec",
    "generation_of",
]


@dataclass(frozen=True)
class TableSpec:
    """How one sharded table is laid out (columns in CQL order)."""

    name: str
    bucket_column: str  # "bucket" (time table) or "day" (topic table)
    topic_in_key: bool  # the partition key starts with the topic

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The partition key columns."""
        return ("topic", "day", "shard") if self.topic_in_key else ("bucket", "shard")

    @property
    def columns(self) -> tuple[str, ...]:
        """Every column a copy writes (the ``INS_TIME`` / ``INS_TOPIC`` lists of the adapter)."""
        data = ("sent", "hash", "expiry", "raw", "message_hash", "expires_at", "size")
        if self.topic_in_key:
            return ("topic", "day", "shard", *data)
        return ("bucket", "shard", "sent", "hash", "topic", *data[2:])


TIME = TableSpec(TIME_TABLE, "bucket", topic_in_key=False)
TOPIC = TableSpec(TOPIC_TABLE, "day", topic_in_key=True)
TABLES = {TIME.name: TIME, TOPIC.name: TOPIC}
KEYS = KEYS_TABLE
TOPICS_CATALOGUE = TOPICS_BY_DAY


def generation_of(shard: int) -> int:
    """The generation a shard column value belongs to (inverse of the adapter's ``layout.shard_of``)."""
    return shard // GENERATION_STRIDE
