"""The Cassandra names a store configuration accepts, checked without loading the driver.

A keyspace name is interpolated into CQL text (``CREATE KEYSPACE``, every statement's ``{ks}.table``), so it
is restricted to a plain lower-case identifier: CQL's unquoted identifiers are case-insensitive and limited
to 48 characters (Apache Cassandra docs, "Data Definition: keyspace_name"). Consistency levels are the
names of cassandra-driver's ``ConsistencyLevel`` that a single data-centre or multi-data-centre deployment
can use for reads and writes (``SERIAL``/``LOCAL_SERIAL`` only decide lightweight transactions).
"""

from __future__ import annotations

import re

__all__ = ["CONSISTENCY_LEVELS", "KEYSPACE_RULE", "is_identifier", "parse_keyspace"]

#: cassandra-driver ``ConsistencyLevel`` names accepted by ``*_CASSANDRA_CONSISTENCY`` settings.
CONSISTENCY_LEVELS = ("ONE", "TWO", "THREE", "QUORUM", "ALL", "LOCAL_QUORUM", "EACH_QUORUM", "LOCAL_ONE")

#: The rule, as said in error messages.
KEYSPACE_RULE = "[a-z][a-z0-9_]{0,47}"
_IDENTIFIER = re.compile(rf"^{KEYSPACE_RULE}$")


def is_identifier(name: str) -> bool:
    """Whether ``name`` is a plain lower-case CQL identifier, safe to interpolate into CQL text."""
    return _IDENTIFIER.match(name) is not None


def parse_keyspace(raw: str) -> str:
    """A keyspace setting: surrounding blanks dropped, then a plain lower-case CQL identifier."""
    name = raw.strip()
    if not is_identifier(name):
        raise ValueError(f"must match {KEYSPACE_RULE}")
    return name
