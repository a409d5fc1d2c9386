"""The pieces that make a Spark standalone run honest, checked without a cluster (``make test``; the cluster
itself is ``make spark-cluster-test``): the executors' interpreter cannot import the checkout, and the
``--py-files`` zip gives it every module the job's executor code imports — namespace packages included."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

from tests.spark.standalone_support import code_zip, executor_python

#: What executor code imports: the job's UDF and deleter modules, the adapter's layout, the generated protos
#: (namespace package ``mailmesh``), and the installed third-party packages.
PROBE = (
    "import spark.archive_job.executor, spark.archive_job.rows, archivestore.cassandra.layout, "
    "mailmesh.archive.v1.archive_pb2, cassandra.cluster, pyspark"
)


def run(
    python: Path, code: str, cwd: Path, pythonpath: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        [str(python), "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_executor_python_sees_only_what_the_driver_ships(tmp_path: Path) -> None:
    # Run from an empty directory, as an executor runs in its own work directory: from the repository root
    # `-c` would put the checkout itself on sys.path (an earlier version of this check passed that way).
    python, cwd = executor_python(tmp_path / "python"), tmp_path / "work"
    cwd.mkdir()
    for module in ("archivestore", "spark.archive_job", "mailmesh.archive.v1"):
        bare = run(python, f"import {module}", cwd)
        assert bare.returncode != 0 and "ModuleNotFoundError" in bare.stderr, module
    shipped = run(python, PROBE, cwd, pythonpath=str(code_zip(tmp_path / "code.zip")))
    assert shipped.returncode == 0, shipped.stderr


def test_the_code_zip_has_an_entry_for_every_directory(tmp_path: Path) -> None:
    # zipimport finds a namespace package (spark/, gen/python/mailmesh/: no __init__.py) only through its
    # directory entry; without them every executor task failed with "No module named 'spark'".
    names = set(zipfile.ZipFile(code_zip(tmp_path / "code.zip")).namelist())
    assert {"spark/", "spark/archive_job/", "mailmesh/", "archivestore/cassandra/"} <= names
    assert "spark/archive_job/executor.py" in names and "archivestore/cassandra/layout.py" in names
    assert not any(n.startswith(("tests/", "services/", "tools/")) for n in names)
