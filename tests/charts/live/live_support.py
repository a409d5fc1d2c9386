"""What the live cluster tests share: helm against the cluster, a namespace's state, the release's objects."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.charts.chart_support import NAMESPACE, RELEASE
from tests.charts.live.cluster import LocalCluster, Obj, environ

HELM_TIMEOUT = "10m"  # helm's own deadline for --wait and for the test hook; the box is small and shared
#: Kubernetes "Pod Security Standards": the chart's pods must pass the strictest profile.
RESTRICTED = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
SELECTOR = f"app.kubernetes.io/instance={RELEASE}"


def run_helm(helm: Path, cluster: LocalCluster, *args: str, namespace: str = NAMESPACE) -> str:
    """Run helm against ``cluster``; its output (fails with helm's output and the namespace's state)."""
    done = subprocess.run(
        [str(helm), *args, "--namespace", namespace],
        env=environ(cluster),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, (
        f"helm {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}\n{namespace_state(cluster, namespace)}"
    )
    return done.stdout


def namespace_state(cluster: LocalCluster, namespace: str = NAMESPACE) -> str:
    """The namespace's pods and Warning events: why --wait did not end (a refused pod is a FailedCreate)."""
    base = f"/api/v1/namespaces/{namespace}"
    pods = [
        f"  {p['metadata']['name']}: {p['status'].get('phase')} on {p['spec'].get('nodeName')}"
        for p in cluster.api.items(f"{base}/pods")
    ]
    events = [
        f"  {o['kind']}/{o['name']}: {e['reason']}: {e.get('message', '')}"
        for e in cluster.api.items(f"{base}/events?fieldSelector=type=Warning")
        for o in [e["involvedObject"]]
    ]
    return "pods:\n" + "\n".join(pods) + "\nwarning events:\n" + "\n".join(events[-20:])


def namespaced(cluster: LocalCluster, group: str, kind: str, namespace: str = NAMESPACE) -> list[Obj]:
    """The release's objects of ``kind`` (plural) under ``group`` (``api/v1``, ``apis/apps/v1``, ...)."""
    return cluster.api.items(f"/{group}/namespaces/{namespace}/{kind}?labelSelector={SELECTOR}")


def suite_phases(out: str) -> dict[str, str]:
    """``helm test``'s report: each test hook (every kind, not only pods) -> its phase."""
    names = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("TEST SUITE:")]
    phases = [line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Phase:")]
    assert len(names) == len(phases), out
    return dict(zip(names, phases, strict=True))
