"""k8s/ is the chart's production scenario.

k8s/mailmesh/mailmesh.yaml equals a fresh render (`make k8s-render`), and the kustomize base built from it
keeps every object valid and every selector matching its pods.
"""

from __future__ import annotations

import kubernetes_validate

from tests.charts.chart_support import K8S_VERSION, ROOT, component, pod_spec, validate_custom_resource
from tests.charts.render_k8s import OUT, render
from tests.charts.test_k8s_manifests import render as kustomize

CRD_KINDS = {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}


def test_the_generated_manifests_have_not_drifted_from_the_chart() -> None:
    committed = (OUT / "mailmesh.yaml").read_text()
    assert committed == render(), "k8s/mailmesh/mailmesh.yaml is stale: run `make k8s-render` and commit it"


def test_the_kustomize_base_keeps_the_charts_objects_valid_and_selecting_their_pods() -> None:
    docs = kustomize(ROOT / "k8s")
    services = [d for d in docs if d["metadata"]["labels"].get("app.kubernetes.io/name") == "mailmesh"]
    kinds = {d["kind"] for d in services}
    assert {"Deployment", "StatefulSet", "Service", "NetworkPolicy", "HorizontalPodAutoscaler"} <= kinds
    assert "CronJob" not in kinds  # the Spark job comes from k8s/spark/, once
    assert all(d["metadata"]["namespace"] == "mailmesh" for d in services)
    for doc in services:
        if doc["kind"] in CRD_KINDS:
            validate_custom_resource(doc, CRD_KINDS[doc["kind"]])
        else:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        if doc["kind"] in ("Deployment", "StatefulSet"):
            labels = doc["spec"]["template"]["metadata"]["labels"]
            assert doc["spec"]["selector"]["matchLabels"].items() <= labels.items()
            assert labels["app.kubernetes.io/component"] == component(doc)
            (container,) = pod_spec(doc)["containers"]
            assert container["image"] == "mailmesh/mailmesh:0.1.0"  # kustomize's images entry
