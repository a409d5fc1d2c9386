"""One local[2] SparkSession for every Spark test module (starting a JVM and warming it up is most of what a
small run costs), and the clean-up PySpark needs after each module.

The session carries the connector (``make spark-fetch``; ``make test`` depends on it) and the local node's
address from the same ``CASSANDRA_*`` variables the Cassandra fixtures read; the keyspace is an option of
each read and write, so the SQLite and Cassandra modules share it. It connects to nothing until a
Cassandra test reads. Without the jars the session is a plain one and only the SQLite tests can use it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark.archive_job.config import JobConfig
from tests.spark.support import collect_pyspark_garbage, job_env, spark_session
from tools.cassandra import ctl


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The test session's SparkSession (stopped when the pytest session ends)."""
    node = ctl.NodeConfig.from_env()
    environ = job_env(
        "cassandra",
        "unused",  # every read and write names its keyspace
        ARCHIVE_CASSANDRA_HOSTS=node.host,
        ARCHIVE_CASSANDRA_PORT=str(node.native_port),
    )
    if not JobConfig.from_env(environ).jar_paths():
        environ = job_env("sqlite", "unused.sqlite3")
    yield from spark_session(environ)


@pytest.fixture(autouse=True, scope="module")
def _pyspark_garbage() -> Iterator[None]:
    """Collect PySpark's leftover sockets while this module's ResourceWarning filter still applies."""
    yield
    collect_pyspark_garbage()
