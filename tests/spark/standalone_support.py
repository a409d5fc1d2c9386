"""A Spark standalone cluster as local processes, and the archive job submitted to it (docs/spark.md
"Standalone cluster").

The master and the workers are the ``pyspark`` package's own JVM classes started through its
``bin/spark-class`` (``org.apache.spark.deploy.master.Master``, ``…worker.Worker``) on 127.0.0.1 with small
memory, each with a scrubbed environment: no virtualenv on PATH, no PYTHONPATH, no ARCHIVE_* settings,
working directories of their own. The job goes in with ``bin/spark-submit --master spark://…`` (client mode,
as the CronJob runs it) and reaches the executors only the way it would on other machines:

- the job's code (``libs/``, ``gen/python/``, ``spark/``) as a ``--py-files`` zip built here;
- the executors' Python is :func:`executor_python`: the virtualenv's interpreter started with ``-S`` and only
  the third-party ``site-packages`` on its path, so nothing of the repository is importable on an executor
  except what the driver shipped (a worker host has the dependencies installed, not our checkout);
- closures and UDFs pickled by PySpark, the connector jars through ``spark.jars``, every setting in the
  pickled configuration — not in the executors' environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from meshharness import free_ports
from tools.cassandra import ctl

__all__ = ["Standalone", "code_zip", "executor_python", "standalone", "submit"]

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
#: Where the job's code comes from (the same roots the virtualenv's mailmesh.pth adds).
CODE_ROOTS = (ROOT / "libs", ROOT / "gen" / "python", ROOT)
CODE_PACKAGES = ("spark",)
START_S = 180.0
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def java_home() -> str:
    """JAVA_HOME of the Java 17 ctl.py runs Cassandra with (Spark 3.5 supports 8, 11 and 17)."""
    return str(Path(ctl.find_java(ctl.NodeConfig())).resolve().parents[1])


def daemon_env(log_dir: Path) -> dict[str, str]:
    """The scrubbed environment of the master, the workers and (through the workers) the executors."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(log_dir),
        "JAVA_HOME": java_home(),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOG_DIR": str(log_dir),
        "SPARK_NO_DAEMONIZE": "1",
    }


@dataclass
class Standalone:
    """A running master and its workers."""

    url: str
    """``spark://127.0.0.1:<port>``."""
    ui: str
    """The master's web UI (its ``/json/`` says which workers are alive)."""
    work: Path
    """State: logs, the workers' work directories (one per executor), the code zip."""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"{self.ui}/json/", timeout=10) as reply:
            return dict(json.loads(reply.read()))

    def stop(self) -> None:
        """SIGTERM every process (workers first), SIGKILL what is left after 30 s."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _spawn(argv: Sequence[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=log.parent,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@contextlib.contextmanager
def standalone(work: Path, workers: int, *, cores: int = 1, memory: str = "1g") -> Iterator[Standalone]:
    """Start a master and ``workers`` workers; yield once every worker is ALIVE; stop them after."""
    work.mkdir(parents=True, exist_ok=True)
    env = daemon_env(work)
    port, ui_port, *worker_uis = free_ports(2 + workers)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    cluster = Standalone(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui_port}", work)
    try:
        master = [
            spark_class,
            MASTER,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui_port),
        ]
        cluster.procs.append(_spawn(master, env, work / "master.log"))
        for i, ui in enumerate(worker_uis):
            wdir = work / f"worker{i + 1}"
            wdir.mkdir(exist_ok=True)
            argv = [spark_class, WORKER, "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory]
            argv += ["--work-dir", str(wdir), "--webui-port", str(ui), cluster.url]
            cluster.procs.append(_spawn(argv, env, wdir / "worker.log"))
        deadline = time.monotonic() + START_S
        while True:
            dead = [p.args for p in cluster.procs if p.poll() is not None]
            assert not dead, f"exited during start-up: {dead} (logs in {work})"
            with contextlib.suppress(OSError, ValueError):
                if cluster.state().get("aliveworkers") == workers:
                    break
            assert time.monotonic() < deadline, (
                f"{workers} workers not ALIVE within {START_S} s (logs in {work})"
            )
            time.sleep(0.5)  # polling the master's status page, bounded above
        yield cluster
    finally:
        cluster.stop()


def code_zip(dest: Path) -> Path:
    """Every Python file of the job's import roots (libs/*, gen/python/*, spark/) in a ``--py-files`` zip.

    Every directory gets an entry of its own: ``spark`` (and ``mailmesh`` under gen/python) are namespace
    packages, without ``__init__.py``, and zipimport finds a namespace package only through its directory
    entry — without them the executors failed with "No module named 'spark'".
    """
    files = [(path, path.relative_to(base)) for base in CODE_ROOTS[:2] for path in base.rglob("*.py")]
    files += [(path, path.relative_to(ROOT)) for pkg in CODE_PACKAGES for path in (ROOT / pkg).rglob("*.py")]
    dirs = {parent.as_posix() + "/" for _, name in files for parent in name.parents if parent.parts}
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for directory in sorted(dirs):
            zf.writestr(directory, b"")
        for path, name in sorted(files, key=lambda item: item[1]):
            zf.write(path, name.as_posix())
    return dest


def executor_python(dest: Path) -> Path:
    """A wrapper running the virtualenv's interpreter without ``site`` (so without mailmesh.pth) and with only
    the third-party packages appended to what Spark puts on PYTHONPATH (pyspark, py4j, the --py-files)."""
    site = sysconfig.get_paths()["purelib"]
    dest.write_text(
        f'#!/bin/sh\nexport PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}"\nexec {sys.executable} -S "$@"\n'
    )
    dest.chmod(0o755)
    return dest


def submit(
    cluster: Standalone,
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    cores_max: int,
    jars: Sequence[Path] = (),
    timeout_s: float = 900,
) -> subprocess.CompletedProcess[str]:
    """``spark-submit --master spark://… [--jars …] spark/run_job.py <argv>``, the job's settings in ``env``.

    The connector's jars go in with ``--jars``, as on any cluster: spark-submit has started the driver's JVM
    before the job's code runs, and ``spark.jars`` set on the session then reach the executors but not the
    driver's own class path (the driver failed with ClassNotFoundException:
    org.apache.spark.sql.cassandra.DefaultSource). The CronJob's image bakes them into $SPARK_HOME/jars.
    """
    code = cluster.work / "mailmesh-job.zip"
    if not code.exists():
        code_zip(code)
    python = executor_python(cluster.work / "executor-python")
    conf = {
        "spark.pyspark.python": str(python),
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": str(cores_max),
        "spark.ui.enabled": "false",
    }
    cmd = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.url, "--deploy-mode", "client"]
    cmd += [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
    if jars:
        cmd += ["--jars", ",".join(str(j) for j in jars)]
    cmd += ["--py-files", str(code), str(ROOT / "spark" / "run_job.py"), *argv]
    full_env = {**daemon_env(cluster.work), "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run(
        cmd, env=full_env, cwd=cluster.work, capture_output=True, text=True, timeout=timeout_s, check=False
    )
