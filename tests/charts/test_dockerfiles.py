"""The service image's Dockerfile, read statically (no Docker engine here, no hadolint).

Pinned bases, a numeric non-root user, no compiler in the final stage, the lockfile installed by the very
script ``make venv`` runs; and the health check the chart's ``helm test`` hook runs from that image, against
real gRPC health servers.
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import NamedTuple

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tests.security_support import Pki, TlsPaths

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
SPARK_DOCKERFILE = ROOT / "k8s" / "spark" / "Dockerfile"
HEALTH_CHECK = ROOT / "deploy" / "docker" / "grpc_health_check.py"
COMPILERS = re.compile(
    r"\b(gcc|g\+\+|clang|build-essential|make|cmake|python3?-dev|libc6?-dev|cargo|rustc)\b"
)


class Instruction(NamedTuple):
    """One Dockerfile instruction with its continuation lines joined."""

    op: str
    args: str


def parse(path: Path) -> list[list[Instruction]]:
    """The instructions of each stage (the ``ARG``s before the first ``FROM`` are stage 0's header)."""
    logical: list[str] = []
    pending = ""
    for line in path.read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):
            continue  # a comment inside a continued RUN
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(" ".join((pending + line).split()))
        pending = ""
    assert not pending, "a continuation line ends the file"
    stages: list[list[Instruction]] = [[]]
    for text in logical:
        op, _, args = text.strip().partition(" ")
        if op.upper() == "FROM" and stages[-1] and any(i.op == "FROM" for i in stages[-1]):
            stages.append([])
        stages[-1].append(Instruction(op.upper(), args.strip()))
    return stages


def global_args(stages: list[list[Instruction]]) -> dict[str, str]:
    """The ``ARG name=default`` lines before the first FROM."""
    out: dict[str, str] = {}
    for instruction in stages[0]:
        if instruction.op == "FROM":
            break
        if instruction.op == "ARG" and "=" in instruction.args:
            name, _, value = instruction.args.partition("=")
            out[name] = value
    return out


def base_images(path: Path) -> Iterator[str]:
    """Every stage's base image, ARG defaults substituted."""
    stages = parse(path)
    args = global_args(stages)
    for stage in stages:
        (frm,) = [i for i in stage if i.op == "FROM"]
        image = frm.args.split()[0]
        yield re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)


@pytest.mark.parametrize("path", [DOCKERFILE, SPARK_DOCKERFILE], ids=["services", "spark"])
def test_every_base_image_is_pinned(path: Path) -> None:
    for image in base_images(path):
        name, _, tag = image.partition("@")[0].rpartition(":")
        assert name and tag, f"{image}: no tag (an unpinned base follows whatever is pushed)"
        assert tag != "latest" and "latest" not in image, f"{image}: 'latest' is not a pin"


def test_the_final_stage_runs_as_a_numeric_non_root_user_without_compilers() -> None:
    final = parse(DOCKERFILE)[-1]
    (user,) = [i.args for i in final if i.op == "USER"]
    uid, _, gid = user.partition(":")
    # runAsNonRoot can be verified by the kubelet only for a numeric user.
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0
    assert final[-1].op == "CMD" and [i.op for i in final].index("USER") > max(
        n for n, i in enumerate(final) if i.op == "RUN"
    ), "nothing may run as root after USER"
    for run in (i.args for i in final if i.op == "RUN"):
        assert "apt-get install" not in run and "pip install" not in run, run
        assert not COMPILERS.search(run), run
    copies = [i.args for i in final if i.op == "COPY"]
    assert "--from=deps /opt/venv /opt/venv" in copies  # installed in an earlier stage, copied as files
    assert all("protoc-venv" not in c for c in copies)  # the dev extra stays in its throw-away stage


def test_dependencies_come_from_the_lockfile_through_the_script_make_venv_runs() -> None:
    stages = {s[0].args.split()[-1]: s for s in parse(DOCKERFILE)[:-1]}
    deps = stages["deps"]
    assert any(i.op == "COPY" and "requirements.lock" in i.args.split() for i in deps)
    (run,) = [i.args for i in deps if i.op == "RUN"]
    assert "tools/install_deps.sh /opt/venv/bin/python &&" in run  # no extra: runtime dependencies only
    script = ROOT / "tools" / "install_deps.sh"
    assert script.stat().st_mode & 0o111, "tools/install_deps.sh must be executable"
    text = script.read_text()
    assert '-c "$root/requirements.lock"' in text  # every version from the lock
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("$(STAMP_VENV):") : makefile.index(".PHONY: venv")]
    assert "tools/install_deps.sh $(PY) dev spark" in recipe
    assert "tools/install_deps.sh" in recipe.splitlines()[0]  # a change to the script rebuilds the venv
    assert "uv pip install" not in recipe  # one install path, not two that can drift apart


def test_everything_copied_exists_and_the_dockerignore_lets_it_through() -> None:
    rules = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]

    def included(path: str) -> bool:
        verdict = True
        for rule in rules:
            negate = rule.startswith("!")
            pattern = rule.lstrip("!").rstrip("/")
            if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
                verdict = negate
        return verdict

    for path in (DOCKERFILE, SPARK_DOCKERFILE):
        for stage in parse(path):
            for copy in (i.args.split() for i in stage if i.op == "COPY"):
                if any(a.startswith("--from") for a in copy):
                    continue
                for source in copy[:-1]:
                    assert (ROOT / source).exists(), f"{path.name}: COPY {source}: no such path"
                    assert included(source.rstrip("/")), f".dockerignore excludes {source} ({path.name})"
    assert not included("var/archive.sqlite3") and not included(".venv") and not included("gen/python")


# ---------------------------------------------------------------------------------------------- health check
def _health_grpc_server() -> grpc.Server:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    servicer.set("mailmesh.archive.v1.ArchiveService", health_pb2.HealthCheckResponse.SERVING)
    servicer.set("mailmesh.ingest.v1.IngestService", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    return server


@pytest.fixture
def health_server() -> Iterator[str]:
    server = _health_grpc_server()
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(None)


@pytest.fixture
def tls_health_server(tmp_path: Path) -> Iterator[tuple[str, Pki, TlsPaths]]:
    """A health server that demands a client certificate of its CA (as every service does with mutual TLS)."""
    pki = Pki(tmp_path)
    paths = pki.issue("archive")
    credentials = grpc.ssl_server_credentials(
        [(paths.key.read_bytes(), paths.cert.read_bytes())],
        root_certificates=paths.ca.read_bytes(),
        require_client_auth=True,
    )
    server = _health_grpc_server()
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    yield f"127.0.0.1:{port}", pki, paths
    server.stop(None)


def run_check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MAILMESH_TLS_")}
    return subprocess.run(
        [sys.executable, str(HEALTH_CHECK), "--attempts", "1", "--timeout", "10", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **(env or {})},
    )


def test_health_check_passes_when_every_service_is_serving(health_server: str) -> None:
    out = run_check(f"{health_server}=mailmesh.archive.v1.ArchiveService", f"{health_server}=")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        f"ok   {health_server} mailmesh.archive.v1.ArchiveService: SERVING",
        f"ok   {health_server} (server): SERVING",
    ]


def test_health_check_fails_naming_each_service_that_is_not_serving(health_server: str) -> None:
    out = run_check(
        f"{health_server}=mailmesh.archive.v1.ArchiveService",
        f"{health_server}=mailmesh.ingest.v1.IngestService",
        f"{health_server}=mailmesh.history.v1.HistoryQueryService",
    )
    assert out.returncode == 1
    lines = out.stdout.splitlines()
    assert lines[0].startswith("ok ")
    assert lines[1] == f"FAIL {health_server} mailmesh.ingest.v1.IngestService: NOT_SERVING"
    assert lines[2].startswith(f"FAIL {health_server} mailmesh.history.v1.HistoryQueryService: NOT_FOUND")


def test_health_check_speaks_mutual_tls_with_the_services_variables(
    tls_health_server: tuple[str, Pki, TlsPaths],
) -> None:
    target, pki, _ = tls_health_server
    check = f"{target}=mailmesh.archive.v1.ArchiveService"
    client = pki.issue("test")  # the hook pod's certificate: the same Secret as the services' in the chart
    out = run_check(check, env=client.env())
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == [f"ok   {target} mailmesh.archive.v1.ArchiveService: SERVING"]
    plaintext = run_check(check)  # what the hook did before: refused by a TLS port
    assert plaintext.returncode == 1 and plaintext.stdout.startswith(f"FAIL {target}")
    other = pki.directory / "other"
    other.mkdir()
    stranger = Pki(other, "another CA").issue("test")
    assert run_check(check, env=stranger.env()).returncode == 1  # a certificate of another CA is refused


def test_health_check_names_a_missing_tls_file() -> None:
    out = run_check("127.0.0.1:1=", env={"MAILMESH_TLS_CERT": "/nonexistent/tls.crt"})
    assert out.returncode == 1
    assert "mutual TLS needs MAILMESH_TLS_KEY, MAILMESH_TLS_CA too" in out.stderr


def test_health_check_refuses_a_malformed_argument() -> None:
    out = run_check("no-equals-sign")
    assert out.returncode == 2 and "expected TARGET=SERVICE" in out.stderr
