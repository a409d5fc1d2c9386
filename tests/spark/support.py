"""Shared pieces of the Spark job tests: data sets, the fixed history-query set, physical-state checks.

Data is sent relative to the wall clock (the Cassandra adapter turns retention into real TTLs), a few days
back, in three topics; a *hot* hour gets many times the rows of any other hour so repartition has a bucket
to split. Envelopes are real (wakucodec RLP, keccak hash) via the archive contract's ``env`` helper.
"""

from __future__ import annotations

import gc
import shlex
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from archivestore.cassandra.layout import GENERATION_STRIDE, ShardPlan, shard_of
from archivestore.cassandra.schema import KEYS_TABLE, TIME_TABLE, TOPIC_TABLE
from archivestore.types import Direction, PutItem, Query, StoredEnvelope
from spark.archive_job.config import Command, JobConfig, RunOptions, StoreConfig, load
from spark.archive_job.session import start_spark
from spark.archive_job.store import StoreClient
from tests.integration.archive.contract import A, B, C, env, paginate
from wakucodec.bloom import FULL_BLOOM, topics_to_bloom

DAY = 86_400
HOUR = 3_600
TOPICS3 = (A, B, C)
ROOT = Path(__file__).resolve().parents[2]

#: Spark settings of the tests only (sessions in this process and the job processes they start). They
#: change how much CPU Spark burns on a few hundred rows, never what a query computes: Janino code
#: generation is off (interpreted expressions give the same results and each distinct plan no longer
#: costs a compile), and the driver JVM keeps to the C1 compiler and the serial collector (no C2 or
#: parallel GC threads competing for two cores in runs of seconds). Measured in docs/spark.md "Tests".
TEST_SPARK_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


@dataclass(frozen=True)
class DataSet:
    """Envelopes of a test and the clock they were written at."""

    now: int
    envelopes: tuple[StoredEnvelope, ...]
    hot_hour: int  # first second of the hot hour

    @property
    def lower(self) -> int:
        """Earliest sent (for query windows)."""
        return min(e.sent for e in self.envelopes)


def dataset(*, days: int = 5, spread: int = 240, hot: int = 240, now: int | None = None) -> DataSet:
    """``spread`` envelopes evenly over ``days`` days plus ``hot`` in one hour two days back."""
    clock = int(time.time()) if now is None else now
    start = clock - days * DAY
    step = days * DAY // spread
    envs = [env(start + i * step + 7, TOPICS3[i % 3], i, size=40 + i % 50) for i in range(spread)]
    hot_hour = (clock - 2 * DAY) // HOUR * HOUR
    envs += [env(hot_hour + (i * 13) % HOUR, TOPICS3[i % 3], 100_000 + i, size=60) for i in range(hot)]
    return DataSet(clock, tuple(envs), hot_hour)


def put_all(store: StoreClient, data: DataSet, batch: int = 200) -> None:
    """Store every envelope of ``data`` (at ``data.now``)."""
    for start in range(0, len(data.envelopes), batch):
        chunk = data.envelopes[start : start + batch]
        result = store.run(store.store.put([PutItem(e) for e in chunk], now=data.now))
        assert result.inserted == len(chunk)


def query_set(data: DataSet) -> list[Query]:
    """The fixed history queries compared before, during and after a run (every read path)."""
    lo, hi = data.lower - 10, data.now + 60
    hot_lo, hot_hi = data.hot_hour - 600, data.hot_hour + HOUR + 600
    qs: list[Query] = []
    for direction in (Direction.FORWARD, Direction.BACKWARD):
        qs += [
            Query(lo, hi, 1000, frozenset(TOPICS3), direction=direction),  # topic table, every topic
            Query(lo, hi, 1000, frozenset({A}), direction=direction),
            Query(hot_lo, hot_hi, 1000, frozenset({B, C}), direction=direction),
            Query(
                lo, hi, 1000, bloom=topics_to_bloom([A, C]), direction=direction
            ),  # catalogue → topic table
            Query(lo, hi, 1000, bloom=FULL_BLOOM, direction=direction),  # time-bucket scan
            Query(hot_lo, hot_hi, 1000, bloom=FULL_BLOOM, direction=direction),
        ]
    qs.append(Query(lo, hi, 37, frozenset(TOPICS3)))  # paginated with 16-byte cursors
    qs.append(Query(hot_lo, hot_hi, 29, bloom=FULL_BLOOM, direction=Direction.BACKWARD))
    return qs


def answers(store: StoreClient, queries: Sequence[Query], now: int) -> list[list[tuple[int, bytes, bool]]]:
    """Every page of every query (sent, hash, has_more), following cursors to the end."""
    out = []
    for q in queries:
        pages = store.run(paginate(store.store, q, now=now))
        out.append([(e.sent, e.hash, p.has_more) for p in pages for e in p.envelopes])
    return out


def job_env(backend: str, location: str, **extra: str) -> dict[str, str]:
    """Environment for a run: the archive on ``location`` (keyspace or SQLite file), quiet report."""
    out = {
        "ARCHIVE_BACKEND": backend,
        "ARCHIVE_RETENTION_DAYS": "30",
        "ARCHIVE_JOB_REPORT_JSON": "",
        "ARCHIVE_JOB_PLAN_GRACE_SECONDS": "0",
        "ARCHIVE_JOB_SHUFFLE_PARTITIONS": "2",  # one per local[2] core: the data sets are tiny
        "ARCHIVE_JOB_CONNECTOR_JARS": str(ROOT / ".cache" / "spark" / "jars"),  # whatever the cwd
    }
    out["ARCHIVE_CASSANDRA_KEYSPACE" if backend == "cassandra" else "ARCHIVE_SQLITE_PATH"] = location
    out.update(extra)
    return out


def settings(environ: dict[str, str]) -> tuple[JobConfig, StoreConfig]:
    """Both configs from a test environment."""
    return load(environ)


def options(command: Command, now: int, dry_run: bool = False) -> RunOptions:
    """The command line of a test run."""
    return RunOptions(command, dry_run, now)


# ---------------------------------------------------------------------------------------------- Cassandra
@dataclass(frozen=True)
class Row:
    """One physical row of a sharded table."""

    table: str
    key: tuple[Any, ...]  # partition key
    hash: bytes
    written: int
    ttl: int | None


def physical(session: Any, keyspace: str) -> list[Row]:
    """Every row of both sharded tables, with write time and TTL of ``raw``."""
    out = []
    for r in session.execute(
        f"SELECT bucket, shard, hash, WRITETIME(raw), TTL(raw) FROM {keyspace}.{TIME_TABLE}"
    ):
        out.append(Row(TIME_TABLE, (r[0], r[1]), bytes(r[2]), r[3], r[4]))
    q = f"SELECT topic, day, shard, hash, WRITETIME(raw), TTL(raw) FROM {keyspace}.{TOPIC_TABLE}"
    for r in session.execute(q):
        out.append(Row(TOPIC_TABLE, (bytes(r[0]), r[1], r[2]), bytes(r[3]), r[4], r[5]))
    return out


def key_rows(session: Any, keyspace: str) -> set[bytes]:
    """Envelope hashes that still have an ``envelope_keys`` row."""
    return {bytes(r[0]) for r in session.execute(f"SELECT envelope_hash FROM {keyspace}.{KEYS_TABLE}")}


def assert_settled(rows: Sequence[Row], plans: dict[str, ShardPlan], wanted: set[bytes]) -> None:
    """The state a finished run leaves: each wanted envelope exactly once per table, in its bucket's
    current generation at the shard the adapter's writers compute, and nothing else anywhere."""
    for table in (TIME_TABLE, TOPIC_TABLE):
        mine = [r for r in rows if r.table == table]
        hashes = [r.hash for r in mine]
        assert len(hashes) == len(set(hashes)), f"{table}: an envelope is stored twice"
        assert set(hashes) == wanted, f"{table}: {len(set(hashes) ^ wanted)} envelope(s) differ"
        plan = plans[table]
        for r in mine:
            bucket, shard = r.key[-2], r.key[-1]
            current = plan.current(bucket)
            assert shard // GENERATION_STRIDE == current.generation, (
                f"{table} {r.key}: not the current generation"
            )
            assert shard == shard_of(current.generation, current.shards, r.hash), (
                f"{table} {r.key}: wrong shard"
            )


def partition_sizes(rows: Sequence[Row], table: str) -> dict[tuple[Any, ...], int]:
    """Rows per partition of ``table``."""
    out: dict[tuple[Any, ...], int] = {}
    for r in rows:
        if r.table == table:
            out[r.key] = out.get(r.key, 0) + 1
    return out


#: PySpark leaves the sockets of collect() and of its Python workers to the garbage collector (an unclosed
#: socket ResourceWarning, which the suite turns into errors): ignored in the Spark test modules only, and
#: collected before each of them ends (:func:`collect_pyspark_garbage`) so none surfaces in another module.
IGNORE_PYSPARK_SOCKETS = pytest.mark.filterwarnings("ignore::ResourceWarning")


def collect_pyspark_garbage() -> None:
    """Collect what PySpark left to the garbage collector, its ResourceWarnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def spark_session(environ: dict[str, str]) -> Iterator[SparkSession]:
    """A local[2] session with ``environ``'s settings and :data:`TEST_SPARK_CONF`; stopped after."""
    job, archive = settings(environ)
    session = start_spark(job, archive, app_name="mailmesh-archive-job-tests", extra=TEST_SPARK_CONF)
    try:
        yield session
    finally:
        session.stop()
        collect_pyspark_garbage()


def submit_args() -> str:
    """``PYSPARK_SUBMIT_ARGS`` giving a job process started by a test :data:`TEST_SPARK_CONF` too."""
    confs = [f"--conf {shlex.quote(f'{key}={value}')}" for key, value in TEST_SPARK_CONF.items()]
    return " ".join([*confs, "pyspark-shell"])
