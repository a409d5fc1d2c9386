"""charts/mailmesh lints, renders every ci/ scenario, and every object passes the schemas it must.

Kubernetes objects are validated with kubernetes-validate against the pinned release's strict schemas;
the prometheus-operator custom resources against their CRDs' openAPIV3Schema (mk/helm.mk pins the module);
the dashboard ConfigMap carries the JSON file as it is. Negative tests show the values schema refusing
wrong values with a message that names the key.
"""

from __future__ import annotations

import copy
import json

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.charts.chart_support import (
    CHART,
    K8S_VERSION,
    SCENARIOS,
    Doc,
    helm,
    pod_spec,
    scenario,
    template,
    validate_custom_resource,
)

CRD_KINDS = {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}


@pytest.mark.parametrize("name", SCENARIOS)
def test_helm_lint_strict_passes(name: str) -> None:
    out = helm(
        "lint", "--strict", str(CHART), "-f", str(CHART / "ci" / f"{name}-values.yaml"),
        "--kube-version", K8S_VERSION, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 chart(s) failed" in out.stdout and "[WARNING]" not in out.stdout


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_object_validates_against_the_pinned_kubernetes_schemas(name: str) -> None:
    docs = scenario(name)
    assert docs
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        for cm in [doc] if doc["kind"] == "ConfigMap" else []:
            if "executor.yaml" in cm.get("data", {}):  # Spark's executor pod template is a Pod too
                kubernetes_validate.validate(
                    yaml.safe_load(cm["data"]["executor.yaml"]), K8S_VERSION, strict=True
                )


def test_custom_resources_validate_against_their_crds() -> None:
    docs = scenario("production")
    found = {d["kind"] for d in docs if d["kind"] in CRD_KINDS}
    assert found == set(CRD_KINDS)
    for doc in (d for d in docs if d["kind"] in CRD_KINDS):
        validate_custom_resource(doc, CRD_KINDS[doc["kind"]])


def test_the_crd_check_would_catch_a_broken_resource() -> None:
    (monitor,) = [d for d in scenario("production") if d["kind"] == "ServiceMonitor"]
    broken = copy.deepcopy(monitor)
    broken["spec"]["endpoints"][0]["interval"] = "every minute"  # not a Prometheus duration
    with pytest.raises(jsonschema.ValidationError):
        validate_custom_resource(broken, "servicemonitors")
    typo = copy.deepcopy(monitor)
    typo["spec"]["endpoints"][0]["scrape_interval"] = "30s"  # the API server would prune it silently
    with pytest.raises(jsonschema.ValidationError):
        validate_custom_resource(typo, "servicemonitors")
    (rule,) = [d for d in scenario("production") if d["kind"] == "PrometheusRule"]
    broken = copy.deepcopy(rule)
    del broken["spec"]["groups"][0]["rules"][0]["expr"]
    with pytest.raises(jsonschema.ValidationError):
        validate_custom_resource(broken, "prometheusrules")


def test_kubernetes_validation_would_catch_a_named_grpc_probe_port() -> None:
    (archive,) = [
        d for d in scenario("minimal") if d["kind"] == "Deployment" and "archive" in d["metadata"]["name"]
    ]
    broken = copy.deepcopy(archive)
    pod_spec(broken)["containers"][0]["readinessProbe"]["grpc"]["port"] = "grpc"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_monitoring_objects_need_their_flag_and_the_api() -> None:
    def kinds(*args: str, apis: tuple[str, ...]) -> set[str]:
        out = template([CHART / "ci" / "production-values.yaml"], args, api_versions=apis)
        return {d["kind"] for d in yaml.safe_load_all(out.stdout) if d}

    assert set(CRD_KINDS) <= kinds(
        apis=("monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule")
    )
    assert not set(CRD_KINDS) & kinds(apis=())  # no CRDs in the cluster: nothing that would fail to apply
    off = ("metrics.serviceMonitor.enabled=false", "metrics.prometheusRule.enabled=false")
    assert not set(CRD_KINDS) & kinds(*off, apis=tuple(f"monitoring.coreos.com/v1/{k}" for k in CRD_KINDS))


def test_alert_rules_and_dashboard_are_embedded_as_the_files_are() -> None:
    docs = scenario("production")
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    assert (
        rule["spec"]["groups"]
        == yaml.safe_load((CHART / "files" / "prometheus" / "alerts.yaml").read_text())["groups"]
    )
    (dash,) = [d for d in docs if d["kind"] == "ConfigMap" and "mailmesh.json" in d.get("data", {})]
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"  # the sidecar's default label
    assert json.loads(dash["data"]["mailmesh.json"]) == json.loads(
        (CHART / "files" / "dashboards" / "mailmesh.json").read_text()
    )
    assert not [
        d for d in scenario("minimal") if d["kind"] == "ConfigMap" and "mailmesh.json" in d.get("data", {})
    ]


# ---------------------------------------------------------------------------------------------- values schema
@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["services.archive.replicas=0"], "at '/services/archive/replicas': minimum: got 0, want 1"),
        (
            ["services.archive.replica=2"],
            "at '/services/archive': additional properties 'replica' not allowed",
        ),
        (["storage.backend=postgres"], "at '/storage/backend'"),
        (["services.ingest.grpcPort=grpc"], "at '/services/ingest/grpcPort'"),
        (["services.history.env.history_limit=5"], "invalid propertyName 'history_limit'"),
        (["image.tag=latest"], "at '/image/tag'"),
        (["services.edge-peer.p2p.serviceType=External"], "at '/services/edge-peer/p2p/serviceType'"),
        (["messaging.storeNodes={enode://abc@1.2.3.4:30303}"], "at '/messaging/storeNodes/0'"),
        (["unknownTopLevel=1"], "additional properties 'unknownTopLevel' not allowed"),
    ],
)
def test_values_schema_refuses_wrong_values_naming_the_key(sets: list[str], message: str) -> None:
    out = template([CHART / "ci" / "minimal-values.yaml"], sets, check=False)
    assert out.returncode != 0
    assert "values don't meet the specifications of the schema" in out.stderr
    assert message in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["storage.cassandra.contactPoints=null"],
            "storage.cassandra.contactPoints: list the Cassandra contact points",
        ),
        (
            ["storage.backend=sqlite", "sparkJob.enabled=true"],
            "sparkJob.enabled needs storage.backend=cassandra",
        ),
        (
            ["services.ingest.calls={archive,mailbox}"],
            'services.ingest calls "mailbox", which is not a service',
        ),
        (  # instances are dialled by pod IP (meshcore.discovery): no per-host name to check
            ["security.tls.existingSecret=mesh-tls"],
            "security.tls.existingSecret needs security.tls.serverName",
        ),
    ],
)
def test_templates_refuse_inconsistent_values_with_a_clear_message(sets: list[str], message: str) -> None:
    out = template([CHART / "ci" / "minimal-values.yaml"], sets, check=False)
    assert out.returncode != 0 and message in out.stderr, out.stderr


def test_every_key_of_values_yaml_is_in_the_schema() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.validate(values, schema)  # the defaults themselves are valid

    def closed(node: Doc, path: str) -> None:
        if node.get("type") == "object" and "properties" in node:
            assert node.get("additionalProperties") is False, f"{path} accepts unknown keys"
            for key, sub in node["properties"].items():
                closed(sub, f"{path}.{key}")

    closed(schema, "values")
    closed(schema["definitions"]["service"], "services.<name>")
