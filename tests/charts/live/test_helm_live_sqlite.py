"""The embedded single-node scenario (``ci/sqlite-values.yaml``) on the live cluster.

The offline tests read the rendered rules; here the real controllers act on them: the PV controller binds the
chart's ReadWriteOnce claim to a local volume pinned to one node, and the scheduler's volume binding puts
every pod that mounts it (archive, send, subscription) on that node, where their required pod affinity to the
archive must also hold (a rule that contradicted it would leave them Pending and fail --wait). The scenario
also turns NetworkPolicies on, so ``helm test`` creates its hook NetworkPolicy first (hook weight -1) and
removes it after. As everywhere on kwok: no container runs and no policy is enforced.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.charts.chart_support import CHART, RELEASE
from tests.charts.live.cluster import LocalCluster, Obj, wait_for
from tests.charts.live.live_support import HELM_TIMEOUT, RESTRICTED, namespaced, run_helm, suite_phases

VALUES = CHART / "ci" / "sqlite-values.yaml"
NAMESPACE = "mailmesh-sqlite"
VOLUME = "live-sqlite"
VOLUME_NODE = "kwok-node-2"
COMPONENT = "app.kubernetes.io/component"
pytestmark = pytest.mark.timeout(1800)


def local_volume(node: str) -> Obj:
    """A 10 GiB ReadWriteOnce local PersistentVolume on ``node`` (no StorageClass: static provisioning)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": VOLUME},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "local": {"path": "/var/lib/mailmesh"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                }
            },
        },
    }


@pytest.fixture(scope="module")
def sqlite_release(helm: Path, cluster: LocalCluster) -> Iterator[None]:
    """The sqlite scenario installed with --wait next to its volume; uninstalled after (the claim is kept)."""
    cluster.api.create("/api/v1/persistentvolumes", local_volume(VOLUME_NODE))
    cluster.api.create(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": RESTRICTED}},
    )
    install = ("install", RELEASE, str(CHART), "-f", str(VALUES), "--wait", "--timeout", HELM_TIMEOUT)
    run_helm(helm, cluster, *install, namespace=NAMESPACE)
    yield
    run_helm(helm, cluster, "uninstall", RELEASE, "--wait", "--timeout", HELM_TIMEOUT, namespace=NAMESPACE)
    wait_for(
        lambda: not namespaced(cluster, "api/v1", "pods", NAMESPACE), "the release's pods to go", timeout=300
    )


def claims_volume(pod: Obj) -> bool:
    """Whether the pod mounts a PersistentVolumeClaim."""
    return any("persistentVolumeClaim" in v for v in pod["spec"].get("volumes", []))


def test_the_store_users_run_on_the_volumes_node(cluster: LocalCluster, sqlite_release: None) -> None:
    (claim,) = namespaced(cluster, "api/v1", "persistentvolumeclaims", NAMESPACE)
    assert claim["status"]["phase"] == "Bound" and claim["spec"]["volumeName"] == VOLUME, claim
    pods = namespaced(cluster, "api/v1", "pods", NAMESPACE)
    users = [p for p in pods if claims_volume(p)]
    assert sorted(p["metadata"]["labels"][COMPONENT] for p in users) == ["archive", "send", "subscription"]
    assert {p["spec"]["nodeName"] for p in users} == {VOLUME_NODE}, [p["spec"]["nodeName"] for p in users]
    # The single-node mode forces one archive replica and drops its HPA, whatever the values ask.
    (archive,) = [
        d
        for d in namespaced(cluster, "apis/apps/v1", "deployments", NAMESPACE)
        if "archive" in d["metadata"]["name"]
    ]
    assert archive["spec"]["replicas"] == 1
    assert not namespaced(cluster, "apis/autoscaling/v2", "horizontalpodautoscalers", NAMESPACE)


def test_helm_test_hook_succeeds_with_network_policies(
    helm: Path, cluster: LocalCluster, sqlite_release: None
) -> None:
    assert namespaced(cluster, "apis/networking.k8s.io/v1", "networkpolicies", NAMESPACE)
    out = run_helm(helm, cluster, "test", RELEASE, "--timeout", HELM_TIMEOUT, namespace=NAMESPACE)
    # The hook NetworkPolicy is reported as a test too (helm lists every hook of the suite).
    assert suite_phases(out) == {
        f"{RELEASE}-mailmesh-test": "Succeeded",
        f"{RELEASE}-mailmesh-test-health": "Succeeded",
    }, out
    # Both hooks (the pod and its NetworkPolicy) carry hook-delete-policy hook-succeeded.
    hooks = namespaced(cluster, "api/v1", "pods", NAMESPACE) + namespaced(
        cluster, "apis/networking.k8s.io/v1", "networkpolicies", NAMESPACE
    )
    assert not [h for h in hooks if "helm.sh/hook" in h["metadata"].get("annotations", {})]
