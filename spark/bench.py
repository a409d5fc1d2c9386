"""Throughput of the archive job on this machine (docs/spark.md "Throughput"): fill an archive, run once.

    python -m spark.bench cassandra --rows 200000 --keyspace mmb_spark    # a keyspace of its own
    python -m spark.bench sqlite --rows 200000 --path /tmp/bench.sqlite3

Envelopes (about 200 bytes each, eight topics) are spread over ten days with every hour ``--hot`` times
busier between days 2 and 4, then one ``maintain`` run splits every bucket above
``ARCHIVE_JOB_MAX_PARTITION_ROWS`` and expires what a 7-day retention (3 days for one topic) removes. The
report's ``scan_rows_per_second`` (rows read by the full scan over the extract stage) and
``rewrite_rows_per_second`` (rows copied over the copy and converge stages) are the figures recorded.
The data set is built with the archive's own ``put``; the keyspace or file is emptied first.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

from archivestore.cassandra.schema import DATA_TABLES
from archivestore.factory import create_store
from archivestore.types import PutItem, StoredEnvelope
from spark.archive_job.config import Command, RunOptions, load
from spark.archive_job.job import run
from spark.archive_job.store import StoreClient
from wakucodec.envelope import make_envelope

DAY = 86_400
TOPICS = [bytes([0xA0 + i, 0, 0, i]) for i in range(8)]


def envelopes(count: int, now: int, hot: int) -> list[StoredEnvelope]:
    """``count`` real envelopes over ten days; hours between days 2 and 4 get ``hot`` times the rate."""
    weights = [hot if 2 * 24 <= h < 4 * 24 else 1 for h in range(10 * 24)]
    per_weight = count / sum(weights)
    out: list[StoredEnvelope] = []
    n = 0
    for hour, w in enumerate(weights):
        start = now - 10 * DAY + hour * 3600
        k = round(w * per_weight)
        for i in range(k):
            data = hashlib.sha256(f"{hour}/{i}".encode()).digest() * 5
            e = make_envelope(
                expiry=start + i * 3600 // max(k, 1) + 60, ttl=60, topic=TOPICS[n % 8], data=data, nonce=n
            )
            out.append(StoredEnvelope(e.sent, e.hash, e.topic, e.expiry, e.raw, None))
            n += 1
    return out


def main() -> int:
    """Fill, run once, print the report's throughput."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("backend", choices=["cassandra", "sqlite"])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--hot", type=int, default=8)
    parser.add_argument("--keyspace", default="mmb_spark")
    parser.add_argument("--path", default="/tmp/mailmesh-spark-bench.sqlite3")
    parser.add_argument("--max-partition-rows", default="2000")
    args = parser.parse_args()
    environ = dict(os.environ)
    environ.update(
        ARCHIVE_BACKEND=args.backend,
        ARCHIVE_CASSANDRA_KEYSPACE=args.keyspace,
        ARCHIVE_SQLITE_PATH=args.path,
        ARCHIVE_RETENTION_DAYS="30",
        ARCHIVE_JOB_PLAN_GRACE_SECONDS="0",
        ARCHIVE_JOB_MAX_PARTITION_ROWS=args.max_partition_rows,
        ARCHIVE_JOB_REPORT_JSON="-",
    )
    job, archive = load(environ)
    now = int(time.time())
    if args.backend == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(args.path + suffix).unlink(missing_ok=True)
    store = StoreClient(create_store(archive))
    store.open()
    if args.backend == "cassandra":
        for table in DATA_TABLES:
            store.cassandra.session.execute(f"TRUNCATE {archive.cassandra.keyspace}.{table}")
    envs = envelopes(args.rows, now, args.hot)
    began = time.monotonic()
    for i in range(0, len(envs), 500):
        store.run(store.store.put([PutItem(e) for e in envs[i : i + 500]], now=now))
    print(f"bench: stored {len(envs)} envelopes in {time.monotonic() - began:.1f} s", file=sys.stderr)
    store.close()
    # Retention shortened to 7 days (3 for one topic): days 7-10 expire, days 3-7 lose that topic.
    job_env = dict(environ, ARCHIVE_RETENTION_DAYS="7", ARCHIVE_TOPIC_RETENTION=f"0x{TOPICS[0].hex()}=3")
    job, archive = load(job_env)
    report = run(RunOptions(Command.MAINTAIN, now=now), job, archive)
    doc = report.as_dict()
    print(
        f"bench: {args.backend} load {os.getloadavg()[0]:.1f}: scan {doc['scan_rows_per_second']} rows/s, "
        f"rewrite {doc['rewrite_rows_per_second']} rows/s, total {report.duration_s:.0f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
