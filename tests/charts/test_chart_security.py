"""The chart's security values (docs/security.md): mutual TLS, token auth, the Cassandra login, bind address.

Rendered on the minimal scenario with the Secrets named; every variable given is a setting the service's
Config declares, every file it names is a key of a mounted Secret, probes move to the plaintext health-only
port with TLS, and nothing changes when the values are left off.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate

from meshcore.config import describe
from meshharness.catalog import CATALOG
from tests.charts.chart_support import CHART, K8S_VERSION, Doc, of_kind, pod_spec, render, template
from tests.charts.test_chart_k8s import CRD_KINDS
from tests.charts.test_chart_properties import chart_name, config_class, service_env, workloads

SECURE = [
    "security.tls.existingSecret=mesh-tls",
    "security.tls.serverName=mailmesh.internal",
    "security.auth.mode=token",
    "security.auth.existingSecret=mesh-tokens",
    "storage.cassandra.credentialsSecret=cassandra-login",
    "sparkJob.enabled=true",
]
TLS_FILES = {"MAILMESH_TLS_CERT": "tls.crt", "MAILMESH_TLS_KEY": "tls.key", "MAILMESH_TLS_CA": "ca.crt"}
TOKEN_FILES = {f"MAILMESH_AUTH_{r}_TOKENS_FILE": f"{r.lower()}Tokens" for r in ("CLIENT", "SERVICE", "ADMIN")}


def mounts(pod: Doc, container: Doc) -> dict[str, str]:
    """Mount path -> the Secret mounted there."""
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    return {m["mountPath"]: secrets[m["name"]] for m in container["volumeMounts"] if m["name"] in secrets}


def secret_file(pod: Doc, container: Doc, path: str) -> tuple[str, str]:
    """(Secret, key) behind the file ``path`` in ``container``."""
    directory, _, key = path.rpartition("/")
    return mounts(pod, container)[directory], key


def login_refs(container: Doc, prefix: str) -> dict[str, Any]:
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container.get("env", [])
        if e["name"].startswith(f"{prefix}_CASSANDRA_") and e["name"] != f"{prefix}_CASSANDRA_HOSTS"
    }


def test_every_service_gets_tls_tokens_and_probes_on_the_health_only_port() -> None:
    docs = render(SECURE)
    for doc in docs:
        if doc["kind"] not in CRD_KINDS:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    for kind in CATALOG.values():
        workload = workloads(docs)[chart_name(kind.name)]
        pod = pod_spec(workload)
        (container,) = pod["containers"]
        env = service_env(docs, workload)
        known = {s.env for s in describe(config_class(kind.module))}
        assert set(env) <= known, sorted(set(env) - known)
        for var, key in TLS_FILES.items():
            assert secret_file(pod, container, env[var]) == ("mesh-tls", key), var
        for var, key in TOKEN_FILES.items():
            assert secret_file(pod, container, env[var]) == ("mesh-tokens", key), var
        assert env["MAILMESH_AUTH"] == "token" and env["MAILMESH_TLS_SERVER_NAME"] == "mailmesh.internal"
        assert env[f"{kind.prefix}_GRPC_HOST"] == "0.0.0.0"  # bindAddress: reachable from other pods
        probe_port = int(env[f"{kind.prefix}_GRPC_PROBE_PORT"])
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["probe"] == probe_port != ports["grpc"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"]["port"] == probe_port  # the kubelet cannot do TLS


def test_the_cassandra_login_goes_to_every_store_and_the_spark_job() -> None:
    docs = render(SECURE)
    expected = {
        "USERNAME": {"name": "cassandra-login", "key": "username"},
        "PASSWORD": {"name": "cassandra-login", "key": "password"},
    }
    for svc, prefix in (("archive", "ARCHIVE"), ("send", "MSGSTORE"), ("subscription", "MSGSTORE")):
        (container,) = pod_spec(workloads(docs)[svc])["containers"]
        assert login_refs(container, prefix) == {f"{prefix}_CASSANDRA_{k}": v for k, v in expected.items()}
    (job,) = of_kind(docs, "CronJob").values()
    (driver,) = pod_spec(job)["containers"]
    assert login_refs(driver, "ARCHIVE") == {f"ARCHIVE_CASSANDRA_{k}": v for k, v in expected.items()}


def test_without_the_values_nothing_changes() -> None:
    docs = render()
    for kind in CATALOG.values():
        workload = workloads(docs)[chart_name(kind.name)]
        (container,) = pod_spec(workload)["containers"]
        env = service_env(docs, workload)
        assert not [v for v in env if v.startswith(("MAILMESH_TLS", "MAILMESH_AUTH")) or "PROBE" in v]
        assert not login_refs(container, "ARCHIVE") and not login_refs(container, "MSGSTORE")
        assert (
            container["readinessProbe"]["grpc"]["port"]
            == {p["name"]: p["containerPort"] for p in container["ports"]}["grpc"]
        )


def test_token_auth_without_its_secret_is_refused() -> None:
    out = template([CHART / "ci" / "minimal-values.yaml"], ["security.auth.mode=token"], check=False)
    assert out.returncode != 0 and "security.auth.mode=token needs security.auth.existingSecret" in out.stderr


def _test_pod(docs: list[Doc]) -> Doc:
    (pod,) = (d for d in docs if d["kind"] == "Pod" and d["metadata"]["name"].endswith("-health"))
    return pod


def test_the_helm_test_pod_presents_the_services_certificate_and_no_token() -> None:
    """With mutual TLS the hook checks the TLS gRPC ports with the services' Secret (grpc_health_check.py
    reads the same MAILMESH_TLS_* variables); health needs no token, so the token Secret stays unmounted."""
    pod = pod_spec(_test_pod(render(SECURE)))
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    for var, key in TLS_FILES.items():
        assert secret_file(pod, container, env[var]) == ("mesh-tls", key), var
    assert env["MAILMESH_TLS_SERVER_NAME"] == "mailmesh.internal"
    assert set(mounts(pod, container).values()) == {"mesh-tls"}
    assert not any(v.startswith("MAILMESH_AUTH") for v in env)

    plain = pod_spec(_test_pod(render()))
    (plain_container,) = plain["containers"]
    assert "env" not in plain_container and not mounts(plain, plain_container)
