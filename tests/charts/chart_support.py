"""Rendering charts/mailmesh offline for the chart tests.

docs/platform-notes.md "Validating manifests offline". helm and the prometheus-operator CRDs come from
``make helm-tools`` (mk/helm.mk, pinned versions in var/tools); :func:`tools` runs that target once per
session, so a bare ``pytest tests/charts`` works as ``make test`` does.
Every render passes an explicit ``--kube-version`` and, for the monitoring scenarios, ``--api-versions``:
without a cluster helm would otherwise use the version compiled into it.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "mailmesh"
TOOLS = ROOT / "var" / "tools"
HELM = TOOLS / "bin" / "helm"
K8S_VERSION = "1.32.0"  # kubernetes-validate 1.37.0 bundles 1.25-1.37; the chart needs >= 1.27
MONITORING_APIS = ("monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule")
RELEASE = "mm"
NAMESPACE = "mailmesh"
SCENARIOS = ("minimal", "production", "sqlite")

Doc = dict[str, Any]


@functools.cache
def tools() -> Path:
    """Build or fetch the pinned tools (a no-op when var/tools is up to date); the helm binary."""
    subprocess.run(
        ["make", "--no-print-directory", "-s", "-f", "mk/helm.mk", "helm-tools", f"PY={sys.executable}"],
        cwd=ROOT,
        check=True,
        timeout=900,
    )
    return HELM


def crd_schema(kind: str) -> Doc:
    """The openAPIV3Schema of a prometheus-operator CRD (``servicemonitors``, ``prometheusrules``)."""
    tools()
    (path,) = (TOOLS / "crds").glob(f"prometheus-operator-*/{kind}.yaml")
    crd = yaml.safe_load(path.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema: Doc = version["schema"]["openAPIV3Schema"]
    return schema


def strict(schema: Any) -> Any:
    """``schema`` with unknown fields refused wherever it lists properties (as ``kubectl --validate=strict``).

    Structural CRD schemas let the API server prune unknown fields silently; a typo in a custom resource
    would vanish on apply instead of failing, so the tests refuse them.
    """
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def validate_custom_resource(doc: Doc, kind: str) -> None:
    """Validate ``doc`` against the strict form of its CRD's schema (raises jsonschema.ValidationError).

    OpenAPI v3 schemas are close to JSON Schema draft 7; the CRDs' patterns use Go's regexp syntax, so the
    schema itself is not checked against a metaschema (Python's re refuses some of those patterns).
    """
    jsonschema.Draft7Validator(strict(crd_schema(kind))).validate(doc)


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the pinned helm with ``args``."""
    return subprocess.run(
        [str(tools()), *args], cwd=ROOT, capture_output=True, text=True, check=check, timeout=300
    )


def template(
    values: Iterable[Path] = (),
    sets: Iterable[str] = (),
    *,
    api_versions: Iterable[str] = MONITORING_APIS,
    namespace: str = NAMESPACE,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``helm template`` of the chart with values files and ``--set`` pairs."""
    args = ["template", RELEASE, str(CHART), "--namespace", namespace, "--kube-version", K8S_VERSION]
    for path in values:
        args += ["-f", str(path)]
    for pair in sets:
        args += ["--set", pair]
    for api in api_versions:
        args += ["--api-versions", api]
    return helm(*args, check=check)


def docs_of(text: str) -> list[Doc]:
    """The objects of a multi-document YAML stream."""
    return [d for d in yaml.safe_load_all(text) if d]


@functools.cache
def _scenario_text(name: str) -> str:
    return template([CHART / "ci" / f"{name}-values.yaml"]).stdout


def scenario(name: str) -> list[Doc]:
    """The rendered objects of ``ci/<name>-values.yaml`` (a fresh copy each call)."""
    return docs_of(_scenario_text(name))


def render(sets: Iterable[str] = (), values: Iterable[Path] = ()) -> list[Doc]:
    """The rendered objects for the minimal scenario plus ``sets``."""
    return docs_of(template([CHART / "ci" / "minimal-values.yaml", *values], sets).stdout)


def pod_spec(doc: Doc) -> Doc:
    """The pod spec of a workload, CronJob or Pod."""
    spec: Doc = doc["spec"]
    if doc["kind"] == "Pod":
        return spec
    if doc["kind"] == "CronJob":
        found: Doc = spec["jobTemplate"]["spec"]["template"]["spec"]
        return found
    template_spec: Doc = spec["template"]["spec"]
    return template_spec


def component(doc: Doc) -> str:
    """The app.kubernetes.io/component label of an object."""
    return str(doc["metadata"]["labels"].get("app.kubernetes.io/component", ""))


def headless_services(docs: list[Doc]) -> dict[str, Doc]:
    """The Deployments' ``<component>-headless`` Services by component (the balanced callers' addresses)."""
    return {
        component(d): d
        for d in docs
        if d["kind"] == "Service" and d["metadata"]["name"].endswith("-headless")
    }


def of_kind(docs: list[Doc], kind: str) -> dict[str, Doc]:
    """Objects of ``kind`` by component, one each (the edge peer's per-replica devp2p Services and the
    Deployments' headless gRPC Services aside: :func:`headless_services`)."""
    out: dict[str, Doc] = {}
    for doc in docs:
        if doc["kind"] == kind and not doc["metadata"]["name"].endswith(("-p2p", "-headless")):
            assert component(doc) not in out, f"two {kind}s for {component(doc)}"
            out[component(doc)] = doc
    return out
