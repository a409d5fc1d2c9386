"""The archive's Spark job (expire + repartition, ``maintain``) against the 3-node cluster with a node down.

The job runs as the CronJob runs it, a process of its own (``python -m spark.archive_job maintain``, local[2],
the connector and the executors' Python driver at LOCAL_QUORUM with every node a contact point), on a
keyspace of its own (RF 3) holding six days of envelopes and a hot hour. Node 2 is SIGKILLed before the run
(which starts once the other nodes see it down) and started again after it. The run must succeed, leave the
archive settled (every kept envelope once per table, in its bucket's current generation at the adapter's
shard, nothing else), answer every history query as before minus what expired, and a second run with every
node up must find nothing left to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from cassandra import OperationTimedOut, ReadTimeout

from archivestore.cassandra.schema import TIME_TABLE, TOPIC_TABLE
from archivestore.errors import StoreUnavailable
from archivestore.factory import create_store
from spark.archive_job.store import StoreClient
from tests.cluster.campaign.cluster_mesh import archive_env
from tests.cluster.results import Results
from tests.spark.support import (
    DAY,
    DataSet,
    answers,
    assert_settled,
    dataset,
    job_env,
    physical,
    put_all,
    query_set,
    settings,
)
from tools.cassandra import cluster, ctl
from tools.cassandra.cluster import ClusterConfig

pytestmark = [pytest.mark.timeout(3600)]

T = TypeVar("T")

DOWN = 1
"""Node 2 (127.0.0.3) is down during the run."""
MAX_ROWS = "200"
"""ARCHIVE_JOB_MAX_PARTITION_ROWS: the hot hour (2,400 envelopes, 600 per time shard) must be split."""


@pytest.fixture(scope="module")
def job_keyspace(cassandra_cluster: ClusterConfig, campaign_keyspace: str) -> Iterator[str]:
    """A keyspace for the job beside the campaign's (dropped with the session's own at the end)."""
    name = f"{campaign_keyspace}_job"
    yield name
    from cassandra.cluster import Cluster

    driver = Cluster(list(cassandra_cluster.hosts), port=cassandra_cluster.native_port)
    try:
        driver.connect().execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=120)
    finally:
        driver.shutdown()


def environment(cc: ClusterConfig, keyspace: str, data: DataSet, report: Path) -> dict[str, str]:
    """The job's settings: the archive's on the cluster, retention cut to 3 days (1 for one topic)."""
    topic = data.envelopes[1].topic
    return job_env(
        "cassandra",
        keyspace,
        **archive_env(cc, keyspace),
        ARCHIVE_CASSANDRA_REQUEST_TIMEOUT_SECONDS="30",
        ARCHIVE_RETENTION_DAYS="3",
        ARCHIVE_TOPIC_RETENTION=f"0x{topic.hex()}=1",
        ARCHIVE_JOB_MAX_PARTITION_ROWS=MAX_ROWS,
        ARCHIVE_JOB_REPORT_JSON=str(report),
    )


def maintain(environ: dict[str, str], now: int) -> dict[str, object]:
    """One ``maintain`` run as a process of its own; its JSON report."""
    env = {**os.environ, **environ}
    cmd = [sys.executable, "-m", "spark.archive_job", "maintain", "--now", str(now)]
    done = subprocess.run(
        cmd, env=env, cwd=ctl.ROOT, capture_output=True, text=True, timeout=3000, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    report: dict[str, object] = json.loads(Path(environ["ARCHIVE_JOB_REPORT_JSON"]).read_text())
    return report


def retried(read: Callable[[], T], attempts: int = 5) -> T:
    """``read()``, retried when a LOCAL_QUORUM read timed out: just after a node returns, a replica still
    replaying hints can be slow to answer (the archive reports that as retryable, StoreUnavailable)."""
    for attempt in range(1, attempts + 1):
        try:
            return read()
        except (StoreUnavailable, ReadTimeout, OperationTimedOut):
            if attempt == attempts:
                raise
            time.sleep(2.0 * attempt)  # back-off before retrying a read
    raise AssertionError("unreachable")


def test_maintain_with_a_node_down(
    cassandra_cluster: ClusterConfig, job_keyspace: str, results: Results, tmp_path: Path
) -> None:
    cc = cassandra_cluster
    data = dataset(days=6, spread=600, hot=2400)
    environ = environment(cc, job_keyspace, data, tmp_path / "report.json")
    # The archive as the services run it (30-day retention): the job's cut applies to the job only.
    store = StoreClient(
        create_store(settings(job_env("cassandra", job_keyspace, **archive_env(cc, job_keyspace)))[1])
    )
    store.open()
    try:
        put_all(store, data)
        topic = data.envelopes[1].topic
        keep = {e.hash for e in data.envelopes if e.sent >= data.now - (DAY if e.topic == topic else 3 * DAY)}
        before = answers(store, query_set(data), data.now)

        cluster.kill(cc, DOWN)
        try:
            # Started within seconds of the crash, a run failed at once (exit 1): its first LOCAL_QUORUM read
            # went to the dead replica before the failure detector had convicted it (ReadTimeout, 1 of 2
            # responses). The CronJob retries such a run (backoffLimit 1); here the run starts once both other
            # nodes see node 2 down, the state "one node down" means.
            began = time.monotonic()
            for viewer in (i for i in range(len(cc.hosts)) if i != DOWN):
                cluster.wait_ring(cc, viewer, {cc.hosts[DOWN]: "DN"}, cc.start_timeout_s)
            convicted_s = time.monotonic() - began
            report = maintain(environ, data.now)
        finally:
            cluster.start_node(cc, DOWN)
        assert report["envelopes_expired"] == len(data.envelopes) - len(keep)
        assert isinstance(report["buckets_moved"], int) and report["buckets_moved"] > 0
        rows = retried(lambda: physical(store.cassandra.session, job_keyspace))
        assert_settled(rows, retried(lambda: store.shard_plans((TIME_TABLE, TOPIC_TABLE))), keep)
        # Every query returns exactly the kept envelopes it returned before, in the same order (pages break
        # differently once fewer envelopes match, so page flags are not compared).
        after = retried(lambda: answers(store, query_set(data), data.now))
        assert [[(s, h) for s, h, _ in q] for q in after] == [
            [(s, h) for s, h, _ in q if h in keep] for q in before
        ]

        again = maintain(environ, data.now)
        assert (again["envelopes_expired"], again["buckets_moved"], again["rows_moved"]) == (0, 0, 0)
    finally:
        store.close()
    figures = {k: report[k] for k in ("rows_scanned", "rows_moved", "partitions_deleted", "buckets_moved")}
    results.add(
        "Spark maintain on the cluster with node 2 down (expire + hot-bucket split)",
        float(str(report["duration_seconds"])),
        "s",
        envelopes=len(data.envelopes),
        expired=report["envelopes_expired"],
        scan_rows_per_second=report["scan_rows_per_second"],
        rewrite_rows_per_second=report["rewrite_rows_per_second"],
        stages=report["stages"],
        seen_down_after_s=round(convicted_s, 1),
        **figures,
    )
