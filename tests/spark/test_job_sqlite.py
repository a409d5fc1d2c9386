"""The Spark job on the SQLite archive: the file is read by the executors with sqlite3, changes go through
the store (``delete_buckets`` for emptied buckets, ``expire`` for the rest).

SQLite buckets are virtual, so repartition reports oversized buckets and moves nothing; every history
query keeps its answer. A run stopped between its delete and erase stages and run again ends exactly where
an uninterrupted run does.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from archivestore.factory import create_store
from spark.archive_job.config import Command
from spark.archive_job.job import run
from spark.archive_job.store import StoreClient
from tests.spark.support import (
    DAY,
    IGNORE_PYSPARK_SOCKETS,
    DataSet,
    answers,
    dataset,
    job_env,
    options,
    put_all,
    query_set,
    settings,
)

pytestmark = [pytest.mark.timeout(600), IGNORE_PYSPARK_SOCKETS]


class Archive:
    """A SQLite archive file opened as the archive service opens it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.environ = job_env("sqlite", str(path), ARCHIVE_JOB_SQLITE_SLICES="3")
        self.store = StoreClient(create_store(settings(self.environ)[1]))
        self.store.open()

    def hashes(self) -> set[bytes]:
        with sqlite3.connect(self.path) as conn:
            return {bytes(r[0]) for r in conn.execute("SELECT hash FROM envelopes")}


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[Archive]:
    arch = Archive(tmp_path / "archive.sqlite3")
    yield arch
    arch.store.close()


def job(environ: dict[str, str], command: Command, now: int, spark: SparkSession, **kw: Any) -> Any:
    job_cfg, archive_cfg = settings(environ)
    return run(options(command, now, kw.pop("dry_run", False)), job_cfg, archive_cfg, spark=spark, **kw)


def flat(pages: list[list[tuple[int, bytes, bool]]]) -> list[list[tuple[int, bytes]]]:
    return [[(s, h) for s, h, _ in q] for q in pages]


def shortened(archive: Archive, data: DataSet, tmp_path: Path) -> tuple[dict[str, str], set[bytes]]:
    """Retention cut to 3 days and 1 day for topic B; the envelopes that stay."""
    b_topic = data.envelopes[1].topic
    keep = {e.hash for e in data.envelopes if e.sent >= data.now - (DAY if e.topic == b_topic else 3 * DAY)}
    environ = dict(
        archive.environ,
        ARCHIVE_RETENTION_DAYS="3",
        ARCHIVE_TOPIC_RETENTION=f"0x{b_topic.hex()}=1",
        ARCHIVE_JOB_REPORT_JSON=str(tmp_path / "report.json"),
    )
    return environ, keep


def test_expire_removes_exactly_the_expired_envelopes(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    data = dataset(days=6, spread=300, hot=60)
    put_all(archive.store, data)
    before = answers(archive.store, query_set(data), data.now)
    environ, keep = shortened(archive, data, tmp_path)

    report = job(environ, Command.EXPIRE, data.now, spark)
    assert report.ok and report.envelopes_expired == len(data.envelopes) - len(keep)
    assert report.partitions_deleted > 0  # whole emptied buckets went by delete_buckets
    assert flat(answers(archive.store, query_set(data), data.now)) == [
        [(s, h) for s, h in q if h in keep] for q in flat(before)
    ]
    assert archive.hashes() == keep
    stats = archive.store.run(archive.store.store.stats(now=data.now))
    assert stats.envelopes == len(keep)
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["backend"] == "sqlite" and doc["rows_scanned"]["envelopes"] == len(data.envelopes)

    again = job(environ, Command.EXPIRE, data.now, spark)
    assert (again.envelopes_expired, again.partitions_deleted, again.rows_deleted) == (0, 0, 0)


def test_repartition_reports_oversized_buckets_and_keeps_every_answer(
    spark: SparkSession, archive: Archive
) -> None:
    data = dataset(days=3, spread=120, hot=300)
    put_all(archive.store, data)
    before = answers(archive.store, query_set(data), data.now)
    environ = dict(archive.environ, ARCHIVE_JOB_MAX_PARTITION_ROWS="60")

    def between(stage: str) -> None:
        assert answers(archive.store, query_set(data), data.now) == before, stage

    report = job(environ, Command.REPARTITION, data.now, spark, hook=between)
    hot = data.hot_hour // 3600
    assert any(f"oversized envelopes_by_time bucket {hot}:" in line for line in report.plan)
    assert report.rows_moved == 0 and report.largest_before[0].rows >= 300
    assert answers(archive.store, query_set(data), data.now) == before
    assert archive.hashes() == {e.hash for e in data.envelopes}


def test_run_stopped_between_delete_and_erase_then_rerun_is_exact(
    spark: SparkSession, archive: Archive, tmp_path: Path
) -> None:
    data = dataset(days=6, spread=300, hot=0)
    put_all(archive.store, data)
    environ, keep = shortened(archive, data, tmp_path)

    def die(stage: str) -> None:
        if stage == "delete":
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        job(environ, Command.EXPIRE, data.now, spark, hook=die)
    assert keep < archive.hashes() < {e.hash for e in data.envelopes}  # half done: buckets gone, rows not
    report = job(environ, Command.EXPIRE, data.now, spark)
    assert report.ok and archive.hashes() == keep


def test_dry_run_changes_nothing(spark: SparkSession, archive: Archive, tmp_path: Path) -> None:
    data = dataset(days=6, spread=120, hot=0)
    put_all(archive.store, data)
    environ, keep = shortened(archive, data, tmp_path)
    report = job(environ, Command.EXPIRE, data.now, spark, dry_run=True)
    assert report.envelopes_expired == len(data.envelopes) - len(keep) and report.largest_after is None
    assert archive.hashes() == {e.hash for e in data.envelopes}
