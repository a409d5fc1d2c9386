"""The Spark job against the real local Cassandra node (``make cassandra-start``) through the connector.

One keyspace for the module, the SparkSession of the whole Spark tier (conftest.py); each test starts
from empty tables. What is shown: expiry removes exactly the envelopes past the new retention (every read
path, physical rows, key rows), repartition of a hot bucket leaves every history query's answer unchanged
before, between every two stages and after, and a run stopped between stages (raised in-process, or
SIGKILLed as a separate process) and run again ends in the settled state: every envelope once per table,
in the current generation at the shard the adapter's writers compute, nothing anywhere else.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from archivestore.cassandra.schema import TIME_TABLE, TOPIC_TABLE
from archivestore.factory import create_store
from spark.archive_job.config import Command
from spark.archive_job.job import run
from spark.archive_job.store import StoreClient
from tests.integration.archive import cassandra_fixtures as cf
from tests.spark.support import (
    DAY,
    HOUR,
    IGNORE_PYSPARK_SOCKETS,
    DataSet,
    answers,
    assert_settled,
    dataset,
    job_env,
    key_rows,
    options,
    partition_sizes,
    physical,
    put_all,
    query_set,
    settings,
    submit_args,
)
from tools.cassandra import ctl

pytestmark = [pytest.mark.cassandra, pytest.mark.timeout(900), IGNORE_PYSPARK_SOCKETS]

cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin
cassandra_keyspace = cf.cassandra_keyspace

ROOT = Path(__file__).resolve().parents[2]
HOT_BOUND = "60"  # rows per partition above which repartition splits (the hot hour has 300)


def node_env(node: ctl.NodeConfig, keyspace: str, **extra: str) -> dict[str, str]:
    """Job settings for this module's keyspace on the local node."""
    return job_env(
        "cassandra",
        keyspace,
        ARCHIVE_CASSANDRA_HOSTS=node.host,
        ARCHIVE_CASSANDRA_PORT=str(node.native_port),
        ARCHIVE_CASSANDRA_REQUEST_TIMEOUT_SECONDS="30",
        **extra,
    )


@pytest.fixture
def keyspace(cassandra_admin: Any, cassandra_keyspace: str) -> str:
    """The module keyspace, emptied (its schema is created by the first store that opens it)."""
    cf.truncate_keyspace(cassandra_admin, cassandra_keyspace)
    return cassandra_keyspace


class Archive:
    """The archive as the services see it (a store opened like the archive service opens it)."""

    def __init__(self, environ: dict[str, str]) -> None:
        self.environ = environ
        self.store = StoreClient(create_store(settings(environ)[1]))
        self.store.open()

    @property
    def session(self) -> Any:
        return self.store.cassandra.session

    @property
    def keyspace(self) -> str:
        return self.store.cassandra.keyspace

    def rows(self) -> list[Any]:
        return physical(self.session, self.keyspace)

    def settled(self, wanted: set[bytes]) -> None:
        assert_settled(self.rows(), self.store.shard_plans((TIME_TABLE, TOPIC_TABLE)), wanted)

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def archive(cassandra_node: ctl.NodeConfig, keyspace: str) -> Iterator[Archive]:
    """An open archive on the emptied keyspace (30-day retention)."""
    arch = Archive(node_env(cassandra_node, keyspace))
    yield arch
    arch.close()


def seeded(archive: Archive, data: DataSet) -> list[list[tuple[int, bytes, bool]]]:
    """Store ``data``; return every query's answer."""
    put_all(archive.store, data)
    return answers(archive.store, query_set(data), data.now)


def job(environ: dict[str, str], command: Command, now: int, spark: SparkSession, **kw: Any) -> Any:
    """One run of the job in this process, on the module's session."""
    job_cfg, archive_cfg = settings(environ)
    return run(options(command, now, kw.pop("dry_run", False)), job_cfg, archive_cfg, spark=spark, **kw)


def flat(pages: list[list[tuple[int, bytes, bool]]]) -> list[list[tuple[int, bytes]]]:
    return [[(s, h) for s, h, _ in q] for q in pages]


# ---------------------------------------------------------------------------------------------- expire
def test_expire_removes_exactly_the_expired_envelopes(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    data = dataset(days=5, spread=240, hot=60)
    before = seeded(archive, data)
    # Retention shortened after the fact: 3 days, and 1 day for topic B (the rows carry 30-day TTLs).
    b_topic = data.envelopes[1].topic
    keep = {e.hash for e in data.envelopes if e.sent >= data.now - (DAY if e.topic == b_topic else 3 * DAY)}
    gone = {e.hash for e in data.envelopes} - keep
    assert keep and gone
    environ = dict(
        archive.environ,
        ARCHIVE_RETENTION_DAYS="3",
        ARCHIVE_TOPIC_RETENTION=f"0x{b_topic.hex()}=1",
        ARCHIVE_JOB_REPORT_JSON=str(tmp_path / "report.json"),
        ARCHIVE_JOB_REPORT_PROM=str(tmp_path / "archive_job.prom"),
    )
    expected = [[(s, h) for s, h in q if h in keep] for q in flat(before)]

    def between(stage: str) -> None:  # unchanged until the store's erasure, then exactly the kept ones
        now = answers(archive.store, query_set(data), data.now)
        assert now == before if stage in ("extract", "plan") else flat(now) == expected, stage

    report = job(environ, Command.EXPIRE, data.now, spark, hook=between)

    after = answers(archive.store, query_set(data), data.now)
    assert flat(after) == expected
    archive.settled(keep)  # nothing expired left on disk, nothing live lost, no copy left behind
    assert key_rows(archive.session, archive.keyspace) == keep
    hashes = [e.hash for e in data.envelopes]
    assert archive.store.run(archive.store.store.contains(hashes, now=data.now)) == [
        h in keep for h in hashes
    ]
    assert report.ok and report.envelopes_expired == len(gone)

    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["ok"] is True and doc["envelopes_expired"] == len(gone)
    assert doc["rows_scanned"][TIME_TABLE] == len(data.envelopes)
    metrics = {
        s.name: s.value
        for fam in text_string_to_metric_families((tmp_path / "archive_job.prom").read_text())
        for s in fam.samples
        if not s.labels.get("table") and not s.labels.get("stage") and not s.labels.get("when")
    }
    assert metrics["mailmesh_archive_job_success"] == 1
    assert metrics["mailmesh_archive_job_envelopes_expired"] == len(gone)

    again = job(environ, Command.EXPIRE, data.now, spark)  # idempotent: nothing left to do
    assert (again.envelopes_expired, again.buckets_moved, again.partitions_deleted) == (0, 0, 0)
    archive.settled(keep)


# ---------------------------------------------------------------------------------------------- repartition
def test_repartition_of_a_hot_bucket_keeps_every_answer_during_and_after(
    spark: SparkSession, archive: Archive
) -> None:
    data = dataset(days=4, spread=200, hot=300)
    before = seeded(archive, data)
    original = archive.rows()
    written = {(r.table, r.hash): (r.written, r.ttl) for r in original}
    hot, hot_day = data.hot_hour // HOUR, data.hot_hour // DAY
    # Only the hot hour (time table) and the hot day (topic table) are above the bound: all their rows move.
    moving = [r for r in original if r.key[-2] == (hot if r.table == TIME_TABLE else hot_day)]
    environ = dict(archive.environ, ARCHIVE_JOB_MAX_PARTITION_ROWS=HOT_BOUND)
    seen: list[str] = []

    def between(stage: str) -> None:  # every history query, between every two stages
        seen.append(stage)
        assert answers(archive.store, query_set(data), data.now) == before, f"answers changed after {stage}"

    began = time.time()
    report = job(environ, Command.REPARTITION, data.now, spark, hook=between)
    assert seen == ["extract", "plan", "copy", "publish", "grace", "converge", "delete", "summary"]
    assert answers(archive.store, query_set(data), data.now) == before

    rows = archive.rows()
    archive.settled({e.hash for e in data.envelopes})
    for table in (TIME_TABLE, TOPIC_TABLE):
        assert max(partition_sizes(rows, table).values()) <= int(HOT_BOUND)
    for table, bucket, default in ((TIME_TABLE, hot, 4), (TOPIC_TABLE, hot_day, 1)):
        (entry,) = archive.store.run(archive.store.store.get_shard_plan(table))
        assert (entry.bucket, entry.generation) == (bucket, 1) and entry.shards >= 2 * default
    for r in rows:  # copies are the originals: same write time (erasures see them the same), TTL kept
        wt, ttl = written[(r.table, r.hash)]
        assert r.written == wt
        assert ttl is not None and r.ttl is not None and ttl - (time.time() - began) - 5 <= r.ttl <= ttl
    # Every row of the two buckets copied once, then their old partitions deleted whole.
    assert (report.buckets_moved, report.rows_moved, report.rows_deleted) == (2, len(moving), len(moving))
    assert report.partitions_deleted == len({(r.table, r.key) for r in moving})
    assert report.largest_before[0].rows > int(HOT_BOUND) >= report.largest_after[0].rows

    again = job(environ, Command.REPARTITION, data.now, spark)  # settled: nothing to do
    assert (again.buckets_moved, again.rows_moved, again.partitions_deleted) == (0, 0, 0)


def test_dry_run_prints_the_plan_and_changes_nothing(spark: SparkSession, archive: Archive) -> None:
    data = dataset(days=4, spread=80, hot=300)  # the hot hour is 2 days old: it stays, and splits
    before = seeded(archive, data)
    began = time.monotonic()
    rows = {(r.table, r.key, r.hash, r.written): r.ttl for r in archive.rows()}
    environ = dict(archive.environ, ARCHIVE_JOB_MAX_PARTITION_ROWS=HOT_BOUND, ARCHIVE_RETENTION_DAYS="3")
    report = job(environ, Command.MAINTAIN, data.now, spark, dry_run=True)
    for table in (TIME_TABLE, TOPIC_TABLE):
        assert any(f"move {table}" in line and "oversized" in line for line in report.plan)
    assert report.envelopes_expired == sum(1 for e in data.envelopes if e.sent < data.now - 3 * DAY) > 0
    assert report.largest_after is None and report.rows_moved == 0
    # The same rows in the same partitions with the same write times. TTL() is the time left, counted by
    # the node at read time, so it only ticked down meanwhile (by the seconds the run took, at most).
    after = {(r.table, r.key, r.hash, r.written): r.ttl for r in archive.rows()}
    assert after.keys() == rows.keys()
    elapsed = time.monotonic() - began
    for row, ttl in after.items():
        old = rows[row]
        assert ttl is not None and old is not None and old - elapsed - 2 <= ttl <= old, row
    assert archive.store.run(archive.store.store.get_shard_plan(TIME_TABLE)) == []
    assert answers(archive.store, query_set(data), data.now) == before


# ---------------------------------------------------------------------------------------------- killed runs
class Killed(RuntimeError):
    """Stands for the process dying at a stage boundary."""


@pytest.mark.parametrize("stage", ["copy", "publish"])
def test_run_stopped_after_a_stage_then_rerun_settles(
    spark: SparkSession, archive: Archive, stage: str
) -> None:
    """``copy``: the new generation is written but not published (an orphan for the next run);
    ``publish``: the plan is flipped but the old partitions are still there (the next run converges)."""
    data = dataset(days=3, spread=120, hot=300)
    before = seeded(archive, data)
    environ = dict(archive.environ, ARCHIVE_JOB_MAX_PARTITION_ROWS=HOT_BOUND)

    def die(at: str) -> None:
        if at == stage:
            raise Killed(at)

    with pytest.raises(Killed):
        job(environ, Command.REPARTITION, data.now, spark, hook=die)
    assert answers(archive.store, query_set(data), data.now) == before  # a dead run changed no answer

    report = job(environ, Command.REPARTITION, data.now, spark)
    assert report.ok
    assert answers(archive.store, query_set(data), data.now) == before
    archive.settled({e.hash for e in data.envelopes})
    for table in (TIME_TABLE, TOPIC_TABLE):
        assert max(partition_sizes(archive.rows(), table).values()) <= int(HOT_BOUND)


def test_sigkilled_run_then_rerun_settles(spark: SparkSession, archive: Archive, tmp_path: Path) -> None:
    """A separate ``python -m spark.archive_job`` process is SIGKILLed (with its JVM) after converging,
    before deleting anything; the next run deletes what is left."""
    data = dataset(days=2, spread=60, hot=300)
    before = seeded(archive, data)
    environ = dict(archive.environ, ARCHIVE_JOB_MAX_PARTITION_ROWS=HOT_BOUND)
    child_env = {
        **os.environ,
        **environ,
        "ARCHIVE_JOB_FAILPOINT": f"converge:pause:{tmp_path / 'paused'}",
        "SPARK_LOCAL_DIRS": str(tmp_path / "spark"),  # what a killed JVM leaves behind stays in tmp_path
        "PYSPARK_SUBMIT_ARGS": submit_args(),
        "PYTHONUNBUFFERED": "1",
    }
    cmd = [sys.executable, "-m", "spark.archive_job", "maintain", "--now", str(data.now)]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=child_env,
        start_new_session=True,  # its own session: the driver, its JVM and the JVM's Python workers
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    transcript: list[str] = []
    try:
        # The run's own progress lines say when it is paused after converge (read as they come: no
        # polling, and the pipe never fills). The module's timeout bounds a run that never gets there.
        assert proc.stdout is not None
        for line in proc.stdout:
            transcript.append(line)
            if line.startswith("[archive-job] fail point after converge: pause"):
                break
        else:
            pytest.fail(f"the run ended before its fail point:\n{''.join(transcript[-60:])}")
        assert any(" converge: " in line and "bucket(s) verified" in line for line in transcript)
        assert not any(" delete: " in line for line in transcript)
    finally:
        kill_session(proc)
    assert proc.returncode == -signal.SIGKILL
    assert answers(archive.store, query_set(data), data.now) == before

    report = job(environ, Command.MAINTAIN, data.now, spark)
    assert report.ok and report.partitions_deleted > 0 and report.rows_moved == 0  # the copy was done
    assert answers(archive.store, query_set(data), data.now) == before
    archive.settled({e.hash for e in data.envelopes})


def kill_session(proc: subprocess.Popen[str]) -> None:
    """SIGKILL every process of ``proc``'s session (the Python driver, its JVM, the Python workers, which
    PySpark puts in a process group of their own) and reap ``proc``: no clean-up of any kind runs."""
    for pid in session_members(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=60)
    if proc.stdout is not None:
        proc.stdout.close()


def session_members(sid: int) -> list[int]:
    """Processes whose session id is ``sid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[3]) == sid:  # after the command: state, ppid, pgrp, session
                    out.append(int(entry.name))
    return out
