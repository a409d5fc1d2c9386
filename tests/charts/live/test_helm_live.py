"""``helm install --wait`` of the chart's minimal scenario on a real API server, then ``helm test``.

What this proves beyond the offline chart tests (tests/charts): a real kube-apiserver v1.36 accepts every
object (its own validation, defaulting and the PodSecurity "restricted" admission of the namespace); the
scheduler places every pod on a node; the controllers turn Deployments and the StatefulSet into pods and ready
replicas, and each Service's selector into EndpointSlices that list those pods under the Service's port names;
helm's --wait, hook ordering and hook-delete policies run against it; the ServiceMonitor and PrometheusRule
follow the API server's real discovery (.Capabilities) and keep every field through the CRDs' structural
schemas; uninstall removes everything.

What it does not prove: kwok fakes the kubelet, so no container runs - images, commands, probes, volumes and
the health checks of the ``helm test`` pod are not exercised (kwok reports the hook pod Succeeded by the stage
in helm-test-stage.yaml), and nothing enforces NetworkPolicies. tests/e2e runs the real services for those.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.charts.chart_support import CHART, NAMESPACE, RELEASE, TOOLS
from tests.charts.live.cluster import LocalCluster, Obj, wait_for
from tests.charts.live.live_support import HELM_TIMEOUT, RESTRICTED, namespaced, run_helm, suite_phases

VALUES = CHART / "ci" / "minimal-values.yaml"
#: The prometheus-operator kinds the chart renders behind flags and .Capabilities, with their plurals.
MONITORING = {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}
MONITORING_ON = (
    "--set",
    "metrics.serviceMonitor.enabled=true",
    "--set",
    "metrics.prometheusRule.enabled=true",
)
# Cluster start (a cold API server) and a helm --wait on a loaded two-core box: far over the default 120 s.
pytestmark = pytest.mark.timeout(1800)


@pytest.fixture(scope="module")
def release(helm: Path, cluster: LocalCluster) -> Iterator[str]:
    """The minimal scenario installed with --wait in a namespace enforcing "restricted"; uninstalled after."""
    cluster.api.create(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": RESTRICTED}},
    )
    out = run_helm(
        helm, cluster, "install", RELEASE, str(CHART), "-f", str(VALUES), "--wait", "--timeout", HELM_TIMEOUT
    )
    yield out
    run_helm(helm, cluster, "uninstall", RELEASE, "--wait", "--timeout", HELM_TIMEOUT)
    # helm waits for the objects it deleted; their pods go after, by the garbage collector (background
    # propagation) and kwok's pod-delete stage, as a kubelet would confirm a pod's termination.
    wait_for(
        lambda: not namespaced(cluster, "api/v1", "pods"), "the release's pods to be deleted", timeout=300
    )


def test_restricted_admission_is_enforced(cluster: LocalCluster, release: str) -> None:
    # The control for the install below: the namespace's PodSecurity admission does refuse a pod that may run
    # as root, so the chart's pods being admitted means they pass "restricted".
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "may-run-as-root"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    with pytest.raises(RuntimeError, match=r"403.*violates PodSecurity \\?\"restricted"):
        cluster.api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod)


def test_every_workload_is_ready_on_a_kwok_node(cluster: LocalCluster, release: str) -> None:
    workloads = namespaced(cluster, "apis/apps/v1", "deployments") + namespaced(
        cluster, "apis/apps/v1", "statefulsets"
    )
    assert len(workloads) >= 2, "the minimal scenario renders Deployments and the edge peer's StatefulSet"
    for obj in workloads:
        name, want = obj["metadata"]["name"], obj["spec"]["replicas"]
        assert obj["status"].get("readyReplicas") == want, f"{name}: {obj['status']}"
    pods = namespaced(cluster, "api/v1", "pods")
    assert len(pods) == sum(w["spec"]["replicas"] for w in workloads)
    for pod in pods:
        name = pod["metadata"]["name"]
        assert pod["spec"]["nodeName"].startswith("kwok-node-"), f"{name} not scheduled by kube-scheduler"
        assert pod["status"]["phase"] == "Running", f"{name}: {pod['status']}"


def test_every_service_selects_its_pods(cluster: LocalCluster, release: str) -> None:
    services = namespaced(cluster, "api/v1", "services")
    assert services
    for svc in services:
        name = svc["metadata"]["name"]
        selector = ",".join(f"{k}={v}" for k, v in sorted(svc["spec"]["selector"].items()))
        pods = cluster.api.items(f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector={selector}")
        assert pods, f"Service {name} selects no pod"
        slices = f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices"
        path = f"{slices}?labelSelector=kubernetes.io/service-name={name}"

        def listed(path: str = path, want: int = len(pods)) -> bool:
            # The EndpointSlice controller catches up asynchronously with pods turning Ready.
            slices = cluster.api.items(path)
            ready = [e for s in slices for e in s.get("endpoints") or [] if e["conditions"].get("ready")]
            return len(ready) == want

        wait_for(listed, f"Service {name}'s EndpointSlices to list its {len(pods)} ready pods", timeout=120)
        (eps,) = cluster.api.items(path)
        assert {p["name"] for p in eps["ports"]} == {p["name"] for p in svc["spec"]["ports"]}, name


def test_helm_test_hook_succeeds(helm: Path, cluster: LocalCluster, release: str) -> None:
    out = run_helm(helm, cluster, "test", RELEASE, "--timeout", HELM_TIMEOUT)
    assert suite_phases(out) == {f"{RELEASE}-mailmesh-test-health": "Succeeded"}, out
    # hook-delete-policy hook-succeeded: helm deleted the pod (and its NetworkPolicy) once it passed.
    hooks = namespaced(cluster, "api/v1", "pods")
    assert not [p for p in hooks if "helm.sh/hook" in p["metadata"].get("annotations", {})], hooks


def install_crd(cluster: LocalCluster, plural: str) -> None:
    """Create the pinned prometheus-operator CRD (``make helm-tools``) and wait until it is Established."""
    (path,) = (TOOLS / "crds").glob(f"prometheus-operator-*/{plural}.yaml")
    crd = yaml.safe_load(path.read_text())
    cluster.api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    name = crd["metadata"]["name"]

    def established() -> bool:
        status = cluster.api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")["status"]
        return any(
            c["type"] == "Established" and c["status"] == "True" for c in status.get("conditions") or []
        )

    wait_for(established, f"the CRD {name} to be Established", timeout=120)


def kept(sent: object, stored: object) -> bool:
    """Whether everything in ``sent`` is in ``stored`` (which may hold more: defaults, metadata)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(k in stored and kept(v, stored[k]) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and len(sent) == len(stored) and all(map(kept, sent, stored))
    return sent == stored


def test_monitoring_objects_follow_the_clusters_apis(helm: Path, cluster: LocalCluster, release: str) -> None:
    upgrade = (
        "upgrade",
        RELEASE,
        str(CHART),
        "-f",
        str(VALUES),
        *MONITORING_ON,
        "--wait",
        "--timeout",
        HELM_TIMEOUT,
    )

    def rendered() -> list[Obj]:
        manifest = run_helm(helm, cluster, "get", "manifest", RELEASE)
        return [d for d in yaml.safe_load_all(manifest) if d and d["kind"] in MONITORING]

    # Flags on, CRDs absent: helm's .Capabilities come from the API server's discovery, so the guard leaves
    # the objects out and the upgrade succeeds (it would fail with "no matches for kind" otherwise).
    run_helm(helm, cluster, *upgrade)
    assert rendered() == []
    for plural in MONITORING.values():
        install_crd(cluster, plural)
    run_helm(helm, cluster, *upgrade)
    docs = rendered()
    assert sorted(d["kind"] for d in docs) == sorted(MONITORING)
    for doc in docs:
        plural, name = MONITORING[doc["kind"]], doc["metadata"]["name"]
        stored = cluster.api.get(f"/apis/monitoring.coreos.com/v1/namespaces/{NAMESPACE}/{plural}/{name}")
        # A structural CRD schema prunes unknown fields silently: every field helm sent must have been kept.
        assert kept(doc["spec"], stored["spec"]), f"{doc['kind']} {name}: fields pruned by the CRD schema"
