"""The SparkSession of a run: master, connector jars and the Cassandra connection settings.

Under spark-submit (the CronJob, a standalone cluster) the master and deploy mode come from the command
line and are left alone (:func:`chosen_master`); a plain ``python -m spark.archive_job`` (make targets, tests)
runs on ``ARCHIVE_JOB_SPARK_MASTER``, ``local[2]`` by default, with the connector jars from
``make spark-fetch`` in ``spark.jars``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from spark.archive_job.config import JobConfig, StoreConfig

__all__ = ["CASSANDRA_EXTENSIONS", "cassandra_settings", "chosen_master", "start_spark"]

CASSANDRA_EXTENSIONS = "com.datastax.spark.connector.CassandraSparkExtensions"


def cassandra_settings(archive: StoreConfig) -> dict[str, str]:
    """Connector settings from the archive's own Cassandra settings.

    Reads and writes use the archive's consistency (LOCAL_QUORUM by default, not the connector's
    LOCAL_ONE for reads): a copy must see every write the archive acknowledged. ``ignoreNulls`` keeps a
    null column unset instead of writing a tombstone (docs/cassandra.md "Sources: Spark connector"). The
    archive's Cassandra login, when it has one, is the job's too.
    """
    out = {
        "spark.sql.extensions": CASSANDRA_EXTENSIONS,
        "spark.cassandra.connection.host": ",".join(archive.cassandra.hosts),
        "spark.cassandra.connection.port": str(archive.cassandra.port),
        "spark.cassandra.input.consistency.level": archive.cassandra.consistency,
        "spark.cassandra.output.consistency.level": archive.cassandra.consistency,
        "spark.cassandra.output.ignoreNulls": "true",
    }
    if archive.cassandra.local_dc:
        out["spark.cassandra.connection.localDC"] = archive.cassandra.local_dc
    credentials = archive.cassandra.credentials
    if credentials is not None:
        # The connector's own login settings; Spark redacts "password" keys in its UI and logs
        # (spark.redaction.regex), docs/security.md.
        out["spark.cassandra.auth.username"] = credentials.username
        out["spark.cassandra.auth.password"] = credentials.password
    return out


def chosen_master(job: JobConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The master to set: ``ARCHIVE_JOB_SPARK_MASTER``, or None under spark-submit (its ``--master`` stands).

    spark-submit starts the driver's Python with the address of its already configured JVM in
    ``PYSPARK_GATEWAY_PORT`` (PySpark ``java_gateway.launch_gateway`` joins that JVM instead of launching
    one). Its settings, ``--master`` among them, are visible only through that JVM once a SparkContext
    exists: a ``SparkConf()`` made before holds none of them, so it cannot tell whether a master was given,
    and a master set on the builder would override ``spark://…`` or the CronJob's ``k8s://…``.
    """
    environ = os.environ if environ is None else environ
    return None if "PYSPARK_GATEWAY_PORT" in environ else job.spark_master


def start_spark(
    job: JobConfig,
    archive: StoreConfig,
    app_name: str = "mailmesh-archive-job",
    extra: Mapping[str, str] | None = None,
) -> SparkSession:
    """Create (or join) the session for a run; ``extra`` Spark settings go last (tests tune the JVM)."""
    builder = SparkSession.builder.appName(app_name)
    master = chosen_master(job)
    if master is not None:
        builder = builder.master(master)
    settings = {
        "spark.sql.shuffle.partitions": str(job.shuffle_partitions),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    if master is not None and master.startswith("local"):
        # Local runs: Python workers must be this interpreter (the venv, whose .pth puts libs/ and the repo
        # on the path). PySpark takes it from PYSPARK_PYTHON only (context.py), never from spark.* conf.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        settings["spark.ui.enabled"] = "false"
    jars = job.jar_paths()
    if archive.backend == "cassandra" and job.connector_jars and not jars:
        raise FileNotFoundError(
            f"no spark-cassandra-connector jars in {job.connector_jars}: run `make spark-fetch` "
            "(or set ARCHIVE_JOB_CONNECTOR_JARS= when they are in $SPARK_HOME/jars)"
        )
    if jars:
        settings["spark.jars"] = ",".join(str(p.resolve()) for p in jars)
    if archive.backend == "cassandra":
        settings.update(cassandra_settings(archive))
    settings.update(extra or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
