"""The archive job on a Spark standalone cluster answers exactly as on local[2] (``make spark-cluster-test``).

A master and two workers (``SPARK_CLUSTER_WORKERS``) run as local processes (standalone_support.py); the
job is submitted with ``spark-submit --master spark://…`` and its code reaches the executors only as a
``--py-files`` zip, through an interpreter that cannot import the checkout (tests/spark/
test_standalone_support.py checks that part in ``make test``). The same data set is stored twice — two
SQLite files, two keyspaces on the local Cassandra node (the connector path) — and each copy goes through
``expire`` then ``repartition``: one copy in this process on the tier's local[2] session, the other on the
cluster. Reports (every figure, the plan, the largest partitions) and the resulting rows must be identical
after each command, and the master must have launched executors for every submitted run that ran tasks
and Python work (their own logs say so, :func:`executors`): every closure, UDF and ``foreachPartition``
deleter ran there with local[2]'s result. Durations and that evidence (application id, executor ids and
hosts, tasks and Python runs per executor) go to ``SPARK_CLUSTER_RESULTS``
(bench/results/spark-standalone.json under make).
"""

from __future__ import annotations

import json
import os
import re
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
from tests.cluster.results import Results
from tests.integration.archive import cassandra_fixtures as cf
from tests.spark.standalone_support import ROOT, Standalone, standalone, submit
from tests.spark.support import (
    IGNORE_PYSPARK_SOCKETS,
    DataSet,
    dataset,
    job_env,
    options,
    physical,
    put_all,
    settings,
)
from tools.cassandra import ctl

pytestmark = [pytest.mark.timeout(2400), IGNORE_PYSPARK_SOCKETS]

WORKERS = int(os.environ.get("SPARK_CLUSTER_WORKERS", "2"))
#: Report fields that measure the run (time) rather than what it did.
TIMINGS = {"started_at", "duration_seconds", "stages", "scan_rows_per_second", "rewrite_rows_per_second"}
#: What an executor's log (Spark 3.5 ``Executor``, ``PythonRunner``, ``PythonUDFRunner`` at INFO) says it did:
#: who it is, the job's code zip it fetched from the driver (``--py-files``), each task it finished, and each
#: Python worker run (closures, ``foreachPartition``) and Python UDF evaluation it timed — the latter two
#: happen only where a pickled function was unpickled.
EXECUTOR_ID = re.compile(r"Starting executor ID (\S+) on host (\S+)")
EXECUTOR_LINES = {
    "code_zip_fetched": "/files/mailmesh-job.zip with timestamp",
    "tasks": "Executor: Finished task",
    "python_runs": "PythonRunner: Times:",
    "python_udf_runs": "PythonUDFRunner: Times:",
}

cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin


@pytest.fixture(scope="module")
def cluster() -> Iterator[Standalone]:
    """A master and :data:`WORKERS` workers; state and logs under var/spark-standalone/<pid>."""
    with standalone(ROOT / "var" / "spark-standalone" / str(os.getpid()), WORKERS) as c:
        yield c


@pytest.fixture(scope="module")
def figures() -> Iterator[Results]:
    """Durations of the runs, written to ``SPARK_CLUSTER_RESULTS`` when it is set."""
    target = os.environ.get("SPARK_CLUSTER_RESULTS", "").strip()
    out = Results("spark-standalone", Path(target).resolve() if target else None)
    out.context["cluster"] = {"workers": WORKERS, "cores_per_worker": 1, "executor_memory": "512m"}
    yield out
    out.write()


def steps(data: DataSet) -> list[tuple[Command, dict[str, str]]]:
    """expire with retention cut to 3 days (1 for one topic), then repartition with 60-row partitions."""
    topic = data.envelopes[1].topic
    cut = {"ARCHIVE_RETENTION_DAYS": "3", "ARCHIVE_TOPIC_RETENTION": f"0x{topic.hex()}=1"}
    return [(Command.EXPIRE, cut), (Command.REPARTITION, {**cut, "ARCHIVE_JOB_MAX_PARTITION_ROWS": "60"})]


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A report without its timings."""
    return {k: v for k, v in report.items() if k not in TIMINGS}


def local_run(spark: SparkSession, environ: dict[str, str], command: Command, now: int) -> dict[str, Any]:
    """The command on local[2] (this process's session); its report as a dict."""
    job, archive = settings(environ)
    report = run(options(command, now), job, archive, spark=spark)
    assert report.ok
    return report.as_dict()


def cluster_run(
    cluster: Standalone, environ: dict[str, str], command: Command, now: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The command submitted to the standalone cluster; its JSON report and where it ran (:func:`executors`).

    Executors must have run tasks and Python work: a run the driver did alone (``local`` mode picked by
    mistake, or a job collecting everything to the driver) fails here.
    """
    out = cluster.work / f"report-{command.value}-{len(list(cluster.work.glob('report-*')))}.json"
    job, _ = settings(environ)
    # As the CronJob runs it: the connector is on the class path (--jars), not added by the job.
    env = {**environ, "ARCHIVE_JOB_REPORT_JSON": str(out), "ARCHIVE_JOB_CONNECTOR_JARS": ""}
    before = apps(cluster)
    done = submit(cluster, [command.value, "--now", str(now)], env, cores_max=WORKERS, jars=job.jar_paths())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-6000:]
    report: dict[str, Any] = json.loads(out.read_text())
    assert report["ok"]
    new = sorted(set(apps(cluster)) - set(before))
    assert len(new) == 1, "the run never registered with the master: it ran in the driver alone"
    ran = executors(cluster, new[0])
    assert ran, "the workers launched no executor"
    assert sum(e["tasks"] for e in ran) >= 1, f"no executor finished a task: {ran}"
    assert sum(e["python_runs"] + e["python_udf_runs"] for e in ran) >= 1, (
        f"no Python ran on executors: {ran}"
    )
    return report, {"app": new[0], "executors": ran}


def apps(cluster: Standalone) -> list[str]:
    """Every application the master has seen (running or finished), by id."""
    state = cluster.state()
    return [str(app["id"]) for key in ("activeapps", "completedapps") for app in state.get(key, [])]


def executors(cluster: Standalone, app: str) -> list[dict[str, Any]]:
    """Each executor the workers started for ``app`` (a work directory each: worker<n>/<app>/<id>/stderr):
    its worker, id and host as the executor logged them, and the counts of :data:`EXECUTOR_LINES`."""
    found = []
    for w in range(WORKERS):
        for log in sorted((cluster.work / f"worker{w + 1}" / app).glob("*/stderr")):
            text = log.read_text(errors="replace")
            ident = EXECUTOR_ID.search(text)
            entry: dict[str, Any] = {
                "worker": w + 1,
                "executor": ident.group(1) if ident else log.parent.name,
                "host": ident.group(2) if ident else None,
            }
            entry.update({key: text.count(line) for key, line in EXECUTOR_LINES.items()})
            found.append(entry)
    return found


def record(
    figures: Results,
    backend: str,
    command: Command,
    local: dict[str, Any],
    remote: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """Both durations of one command and where the cluster ran it (identical results: the caller asserts)."""
    report, ran = remote
    figures.add(
        f"{backend} {command.value}: standalone cluster ({WORKERS} workers) run",
        report["duration_seconds"],
        "s",
        local2_s=local["duration_seconds"],
        # Per stage: the cluster run's total also holds its session's start (executors launched, jars and
        # code fetched), which local[2], on the tier's warm session, does not pay.
        stages_s=report["stages"],
        local2_stages_s=local["stages"],
        rows_scanned=local["rows_scanned"],
        envelopes_expired=local["envelopes_expired"],
        rows_moved=local["rows_moved"],
        partitions_deleted=local["partitions_deleted"],
        identical=True,
        **ran,
    )


def sqlite_rows(path: Path) -> list[tuple[Any, ...]]:
    """Every stored envelope of a SQLite archive, in key order."""
    with sqlite3.connect(path) as conn:
        return [tuple(r) for r in conn.execute("SELECT hash, sent, topic FROM envelopes ORDER BY sent, hash")]


def test_sqlite_expire_and_repartition_match_local(
    spark: SparkSession, cluster: Standalone, figures: Results, tmp_path: Path
) -> None:
    data = dataset(days=6, spread=300, hot=300)
    paths = [tmp_path / "local.sqlite3", tmp_path / "cluster.sqlite3"]
    for path in paths:
        store = StoreClient(create_store(settings(job_env("sqlite", str(path)))[1]))
        store.open()
        put_all(store, data)
        store.close()
    reports = {}
    for command, extra in steps(data):
        local = local_run(spark, job_env("sqlite", str(paths[0]), **extra), command, data.now)
        remote = cluster_run(cluster, job_env("sqlite", str(paths[1]), **extra), command, data.now)
        assert comparable(remote[0]) == comparable(local), command
        assert sqlite_rows(paths[1]) == sqlite_rows(paths[0]), command
        reports[command] = local
        record(figures, "SQLite", command, local, remote)
    # Both commands did something (no two no-ops compared): envelopes expired, oversized buckets reported.
    assert reports[Command.EXPIRE]["envelopes_expired"] > 0
    assert reports[Command.REPARTITION]["largest_partitions_before"][0]["rows"] > 60


@pytest.mark.cassandra
def test_cassandra_expire_and_repartition_match_local(
    spark: SparkSession,
    cluster: Standalone,
    figures: Results,
    cassandra_node: ctl.NodeConfig,
    cassandra_admin: Any,
) -> None:
    data = dataset(days=6, spread=240, hot=480)
    spaces = [f"standalone_local_{os.getpid()}", f"standalone_cluster_{os.getpid()}"]
    node = {
        "ARCHIVE_CASSANDRA_HOSTS": cassandra_node.host,
        "ARCHIVE_CASSANDRA_PORT": str(cassandra_node.native_port),
    }
    try:
        for ks in spaces:
            store = StoreClient(create_store(settings(job_env("cassandra", ks, **node))[1]))
            store.open()
            put_all(store, data)
            store.close()
        reports = {}
        for command, extra in steps(data):
            local = local_run(spark, job_env("cassandra", spaces[0], **node, **extra), command, data.now)
            remote = cluster_run(cluster, job_env("cassandra", spaces[1], **node, **extra), command, data.now)
            assert comparable(remote[0]) == comparable(local), command
            mine, theirs = (
                sorted((r.table, r.key, r.hash) for r in physical(cassandra_admin, ks)) for ks in spaces
            )
            assert theirs == mine, command
            reports[command] = local
            record(figures, "Cassandra", command, local, remote)
        assert (
            reports[Command.EXPIRE]["envelopes_expired"] > 0
            and reports[Command.EXPIRE]["partitions_deleted"] > 0
        )
        assert reports[Command.REPARTITION]["buckets_moved"] > 0  # the hot bucket was split
    finally:
        for ks in spaces:
            cassandra_admin.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=120)
