"""Entry point: settings → store → SparkSession → the backend's stages → report (docs/spark.md).

``main`` is what ``python -m spark.archive_job`` and ``spark/run_job.py`` (spark-submit) call; its exit
code is the run's: 0 done, 1 failed (the report still goes out, with ``success 0``), 2 bad settings.
``run`` is the same without the process concerns, for tests: it takes an existing SparkSession and a hook
called after every stage.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Mapping, Sequence

from pyspark.sql import SparkSession

from archivestore.factory import create_store
from meshcore.config import ConfigError
from spark.archive_job import cassandra_flow, sqlite_flow
from spark.archive_job.config import JobConfig, RunOptions, StoreConfig, load, parse_args
from spark.archive_job.context import Context
from spark.archive_job.report import Report
from spark.archive_job.session import start_spark
from spark.archive_job.stages import Hook, Stages
from spark.archive_job.store import StoreClient

__all__ = ["main", "run"]


def run(
    opts: RunOptions,
    job: JobConfig,
    archive: StoreConfig,
    *,
    spark: SparkSession | None = None,
    hook: Hook | None = None,
) -> Report:
    """One run. The report is emitted (as configured) whether it succeeds or raises."""
    now = opts.now if opts.now is not None else int(time.time())
    flow = cassandra_flow if archive.backend == "cassandra" else sqlite_flow
    report = Report(opts.command.value, archive.backend, opts.plan_only, now)
    stages = Stages(len(flow.stages(opts.command.expires, opts.plan_only)), job.failpoint, hook)
    stages.say(
        f"{opts.command.value} on {archive.backend}{' (plan only)' if opts.plan_only else ''} at {now}; "
        f"retention {archive.retention_days:g} d, {len(archive.topic_retention)} topic override(s)"
    )
    store = StoreClient(create_store(archive))
    session = spark
    try:
        store.open()
        session = session or start_spark(job, archive)
        flow.run(Context(session, job, archive, opts, store, stages, report, now))
    except BaseException as err:
        report.stages = dict(stages.durations)
        report.finish(
            ok=False, error=f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:500]}"
        )
        _emit(report, job, stages)
        raise
    finally:
        store.close()
        if spark is None and session is not None:
            session.stop()
    report.stages = dict(stages.durations)
    report.finish(ok=True)
    _emit(report, job, stages)
    return report


def _emit(report: Report, job: JobConfig, stages: Stages) -> None:
    try:
        report.emit(job.report_json, job.report_prom, job.pushgateway)
    except Exception as err:  # a report that cannot be delivered must not hide the run's own outcome
        stages.say(f"could not deliver the report: {type(err).__name__}: {err}")
    stages.say(f"{'ok' if report.ok else 'FAILED'} in {report.duration_s:.1f} s")


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run the job as a process; returns the exit code."""
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        job, archive = load(environ)
    except ConfigError as err:
        print(f"archive_job: {err}", file=sys.stderr)
        return 2
    try:
        run(opts, job, archive)
    except Exception:
        traceback.print_exc()
        return 1
    return 0
