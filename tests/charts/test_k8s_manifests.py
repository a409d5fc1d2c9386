"""The kustomize base in k8s/ renders and validates offline; the Spark CronJob is wired as intended.

No cluster and no kustomize binary: :func:`render` implements the five kustomize features the base uses
(namespace, labels, resources, images, replacements; kustomization.yaml must use nothing else) and every
rendered object is validated with kubernetes-validate against the pinned Kubernetes version's strict
schemas (docs/platform-notes.md "Validating manifests offline"). Then the objects are checked for what
validation cannot see: client-mode driver wiring, RBAC verbs, hardening, and that the settings parse with the
job's and the archive's own config classes.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from meshcore.config import describe
from services.archive.config import Config as ArchiveConfig
from spark.archive_job.config import JobConfig

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
K8S_VERSION = (
    "1.32.0"  # validated against this release's strict schemas (kubernetes-validate 1.37.0 bundles 1.25-1.37)
)
SUPPORTED = {"apiVersion", "kind", "namespace", "labels", "resources", "images", "replacements"}
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
}
SPARK_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
SPARK_RESOURCES = {"pods", "services", "configmaps", "persistentvolumeclaims"}

Doc = dict[str, Any]


# ---------------------------------------------------------------------------------------------- rendering
def _segments(path: str) -> list[str]:
    return re.findall(r"\[[^\]]*\]|[^.\[\]]+", path)


def _walk(node: Any, segments: list[str], create: bool = False) -> Iterator[tuple[Any, str | int]]:
    """(parent, key) pairs a kustomize fieldPath (``a.b.[name=x].c``) addresses."""
    head, rest = segments[0], segments[1:]
    if head.startswith("["):
        key, _, value = head[1:-1].partition("=")
        matches = [i for i, item in enumerate(node) if isinstance(item, dict) and item.get(key) == value]
        for i in matches:
            yield from ([(node, i)] if not rest else _walk(node[i], rest, create))
        return
    if not rest:
        yield node, head
    elif head in node or create:
        yield from _walk(node.setdefault(head, {}), rest, create)


def _pod_specs(doc: Doc) -> list[Doc]:
    spec = doc.get("spec", {})
    if doc["kind"] == "Pod":
        return [spec]
    if doc["kind"] == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"]["spec"]]
    return [spec["template"]["spec"]] if "template" in spec else []


def _template_metadata(doc: Doc) -> list[Doc]:
    spec = doc.get("spec", {})
    if doc["kind"] == "CronJob":
        job = spec["jobTemplate"]
        return [job.setdefault("metadata", {}), job["spec"]["template"].setdefault("metadata", {})]
    return [spec["template"].setdefault("metadata", {})] if "template" in spec else []


def render(base: Path = K8S) -> list[Doc]:
    """``kustomize build base`` for the features SUPPORTED lists."""
    kust = yaml.safe_load((base / "kustomization.yaml").read_text())
    assert set(kust) <= SUPPORTED, f"unsupported kustomize fields: {set(kust) - SUPPORTED}"
    docs: list[Doc] = []
    for resource in kust["resources"]:
        docs += [d for d in yaml.safe_load_all((base / resource).read_text()) if d]
    namespace = kust.get("namespace")
    for doc in docs:
        if namespace and doc["kind"] not in CLUSTER_SCOPED:
            doc["metadata"]["namespace"] = namespace
        if namespace and doc["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            for subject in doc.get("subjects", []):
                if subject["kind"] == "ServiceAccount":
                    subject["namespace"] = namespace
        for label in kust.get("labels", []):
            doc["metadata"].setdefault("labels", {}).update(label["pairs"])
            assert not label.get("includeSelectors"), "selector labels are immutable: keep them out"
            if label.get("includeTemplates"):
                for meta in _template_metadata(doc):
                    meta.setdefault("labels", {}).update(label["pairs"])
        for pod in _pod_specs(doc):
            for container in pod.get("containers", []) + pod.get("initContainers", []):
                for image in kust.get("images", []):
                    name = re.split(r"[:@]", container["image"], maxsplit=1)[0]
                    if name == image["name"]:
                        container["image"] = f"{image.get('newName', name)}:{image['newTag']}"
    for rule in kust.get("replacements", []):
        src = rule["source"]
        (source,) = [d for d in docs if d["kind"] == src["kind"] and d["metadata"]["name"] == src["name"]]
        ((parent, key),) = list(_walk(source, _segments(src["fieldPath"])))
        value = parent[key]
        for target in rule["targets"]:
            sel = target["select"]
            for doc in (d for d in docs if d["kind"] == sel["kind"] and d["metadata"]["name"] == sel["name"]):
                for path in target["fieldPaths"]:
                    hits = list(_walk(doc, _segments(path)))
                    assert hits, f"replacement target {path} not found"
                    for tparent, tkey in hits:
                        tparent[tkey] = copy.deepcopy(value)
    return docs


@pytest.fixture(scope="module")
def docs() -> list[Doc]:
    return render()


def spark(docs: list[Doc]) -> list[Doc]:
    """The Spark job's objects (k8s/spark/); the services' (k8s/mailmesh/) have tests of their own."""
    return [d for d in docs if d["metadata"]["labels"].get("app.kubernetes.io/name") == "archive-spark"]


def one(docs: list[Doc], kind: str) -> Doc:
    (doc,) = [d for d in spark(docs) if d["kind"] == kind]
    found: Doc = doc
    return found


def driver_pod(docs: list[Doc]) -> Doc:
    pod: Doc = one(docs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return pod


def driver(docs: list[Doc]) -> Doc:
    (container,) = [c for c in driver_pod(docs)["containers"] if c["name"] == "driver"]
    found: Doc = container
    return found


def confs(container: Doc) -> dict[str, str]:
    args = container["args"]
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--conf")


def executor_template(docs: list[Doc]) -> Doc:
    maps = [d for d in spark(docs) if d["kind"] == "ConfigMap" and "executor.yaml" in d.get("data", {})]
    (cm,) = maps
    parsed: Doc = yaml.safe_load(cm["data"]["executor.yaml"])
    return parsed


# ---------------------------------------------------------------------------------------------- schemas
def test_every_object_validates_against_the_pinned_kubernetes_schemas(docs: list[Doc]) -> None:
    kinds = sorted(d["kind"] for d in spark(docs))
    assert kinds == ["ConfigMap", "ConfigMap", "CronJob", "Role", "RoleBinding", "ServiceAccount"]
    custom = {"ServiceMonitor", "PrometheusRule"}  # checked against their CRDs in test_chart_k8s.py
    for doc in [*(d for d in docs if d["kind"] not in custom), executor_template(docs)]:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_validation_would_catch_a_broken_object(docs: list[Doc]) -> None:
    broken = copy.deepcopy(one(docs, "CronJob"))
    broken["spec"]["successfulJobsHistoryLimit"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)
    typo = copy.deepcopy(one(docs, "CronJob"))
    typo["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinish"] = 60
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, K8S_VERSION, strict=True)


# ---------------------------------------------------------------------------------------------- the CronJob
def test_cronjob_runs_one_run_at_a_time_and_cleans_up(docs: list[Doc]) -> None:
    spec = one(docs, "CronJob")["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["startingDeadlineSeconds"] > 0 and spec["timeZone"] == "Etc/UTC"
    assert spec["successfulJobsHistoryLimit"] >= 1 and spec["failedJobsHistoryLimit"] >= 1
    job = spec["jobTemplate"]["spec"]
    assert (
        job["backoffLimit"] <= 1 and job["ttlSecondsAfterFinished"] > 0 and job["activeDeadlineSeconds"] > 0
    )
    assert driver_pod(docs)["restartPolicy"] == "Never"


def test_driver_runs_in_client_mode_inside_the_job_pod(docs: list[Doc]) -> None:
    c = driver(docs)
    args = c["args"]
    assert args[0] == "/opt/spark/bin/spark-submit"
    assert args[args.index("--deploy-mode") + 1] == "client"  # the pod's exit code is the run's
    assert args[args.index("--master") + 1] == "k8s://https://kubernetes.default.svc"
    assert args[-2:] == ["/opt/mailmesh/spark/run_job.py", "maintain"]
    assert (ROOT / "spark" / "run_job.py").is_file()
    conf = confs(c)
    assert conf["spark.driver.host"] == "$(POD_IP)" and conf["spark.driver.bindAddress"] == "0.0.0.0"
    assert conf["spark.kubernetes.driver.pod.name"] == "$(POD_NAME)"  # executors owned by (and GC'd with) it
    assert conf["spark.kubernetes.namespace"] == "$(POD_NAMESPACE)"
    ports = {p["containerPort"] for p in c["ports"]}
    assert {int(conf["spark.driver.port"]), int(conf["spark.driver.blockManager.port"])} <= ports
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    # Kubernetes leaves a $(VAR) whose VAR is not in the container's env as literal text: catch it here.
    for ref in re.findall(r"\$\(([A-Z0-9_]+)\)", " ".join(args)):
        assert ref in env, f"$({ref}) is not defined in the driver's env"


def test_executors_run_the_drivers_image_with_the_hardened_template(docs: list[Doc]) -> None:
    c = driver(docs)
    env = {e["name"]: e for e in c["env"]}
    assert c["image"] == "mailmesh/archive-spark:0.1.0"
    assert env["SPARK_EXECUTOR_IMAGE"]["value"] == c["image"]  # the replacement copied it
    conf = confs(c)
    assert conf["spark.kubernetes.container.image"] == "$(SPARK_EXECUTOR_IMAGE)"
    template = Path(conf["spark.kubernetes.executor.podTemplateFile"])
    pod = driver_pod(docs)
    (mount,) = [m for m in c["volumeMounts"] if template.parent == Path(m["mountPath"])]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    (cm,) = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == volume["configMap"]["name"]
    ]
    assert template.name in cm["data"]
    exe = executor_template(docs)["spec"]
    assert exe["securityContext"]["runAsNonRoot"] is True and exe["automountServiceAccountToken"] is False
    (container,) = exe["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_pods_are_hardened_and_sized(docs: list[Doc]) -> None:
    pod = driver_pod(docs)
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    c = driver(docs)
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    (tmp,) = [v for v in pod["volumes"] if v["name"] == mounts["/tmp"]]
    assert "emptyDir" in tmp  # the only writable place: Spark's local dir, Ivy, Python's temp files
    assert confs(c)["spark.local.dir"].startswith("/tmp/") and confs(c)["spark.jars.ivy"].startswith("/tmp/")
    assert c["resources"]["requests"]["memory"] and c["resources"]["limits"]["memory"]
    assert c["resources"]["requests"]["cpu"] and c["resources"]["limits"]["cpu"]


# ---------------------------------------------------------------------------------------------- RBAC
def test_the_driver_may_run_executor_pods_and_nothing_more(docs: list[Doc]) -> None:
    sa, role, binding = one(docs, "ServiceAccount"), one(docs, "Role"), one(docs, "RoleBinding")
    assert driver_pod(docs)["serviceAccountName"] == sa["metadata"]["name"]
    assert driver_pod(docs)["automountServiceAccountToken"] is True
    (rule,) = role["rules"]
    assert rule["apiGroups"] == [""] and set(rule["resources"]) == SPARK_RESOURCES
    assert set(rule["verbs"]) == SPARK_VERBS
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    (subject,) = binding["subjects"]
    assert subject == {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "mailmesh"}
    assert all(d["metadata"]["namespace"] == "mailmesh" for d in docs)


def test_labels_reach_objects_and_pod_templates(docs: list[Doc]) -> None:
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "mailmesh"
    job = one(docs, "CronJob")["spec"]["jobTemplate"]
    assert job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/part-of"] == "mailmesh"
    assert "selector" not in job["spec"]  # the Job controller owns selectors: none set by hand


# ---------------------------------------------------------------------------------------------- settings
def test_configmap_settings_are_real_settings_that_parse(docs: list[Doc]) -> None:
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "archive-spark-env"]
    data: dict[str, str] = cm["data"]
    known = {s.env for s in describe(ArchiveConfig)} | {s.env for s in describe(JobConfig)}
    assert set(data) <= known, f"not a setting: {set(data) - known}"
    archive = ArchiveConfig.from_env(data)
    job = JobConfig.from_env(data)
    assert archive.store.backend == "cassandra" and job.jar_paths() == []  # the image bakes the jars in
    (ref,) = driver(docs)["envFrom"]
    assert ref["configMapRef"]["name"] == "archive-spark-env"


# ---------------------------------------------------------------------------------------------- image
def test_dockerfile_bakes_the_connector_and_runs_as_non_root() -> None:
    text = (K8S / "spark" / "Dockerfile").read_text()
    assert "-f /build/pom.xml dependency:copy-dependencies" in text
    assert "COPY spark/connector/pom.xml /build/pom.xml" in text
    assert "COPY --from=connector /build/jars/ /opt/spark/jars/" in text
    assert re.search(r"^USER 185:185$", text, re.M)
    assert 'ENTRYPOINT ["/usr/bin/tini", "--", "/opt/entrypoint.sh"]' in text
    # The same installer as `make venv` (tools/install_deps.sh), with the spark extra only.
    assert "tools/install_deps.sh /opt/venv/bin/python spark" in text
    assert "tools/install_deps.sh $(PY) dev spark" in (ROOT / "Makefile").read_text()
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11\.", text, re.M)  # pyproject: requires-python 3.11
    pom = (ROOT / "spark" / "connector" / "pom.xml").read_text()
    assert "<artifactId>spark-cassandra-connector_2.12</artifactId>" in pom
    assert "<connector.version>3.5.1</connector.version>" in pom


def test_entrypoint_starts_the_executor_backend_spark_asks_for(tmp_path: Path) -> None:
    java = tmp_path / "java" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    java.chmod(0o755)
    env = {
        "PATH": os.environ["PATH"],
        "JAVA_HOME": str(tmp_path / "java"),
        "SPARK_HOME": "/opt/spark",
        "SPARK_JAVA_OPT_1": "-Dsecond",
        "SPARK_JAVA_OPT_0": "-Dfirst",
        "SPARK_EXECUTOR_MEMORY": "1g",
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.0.0.5:7078",
        "SPARK_EXECUTOR_ID": "3",
        "SPARK_EXECUTOR_CORES": "1",
        "SPARK_APPLICATION_ID": "spark-app",
        "SPARK_EXECUTOR_POD_IP": "10.0.0.9",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "archive-maintain-exec-3",
    }
    script = str(K8S / "spark" / "entrypoint.sh")
    out = subprocess.run(["bash", script, "executor"], env=env, capture_output=True, text=True, check=True)
    args = out.stdout.splitlines()
    assert args[:4] == ["-Dfirst", "-Dsecond", "-Xms1g", "-Xmx1g"]
    assert "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend" in args
    pairs = dict(zip(args[::2], args[1::2], strict=False)) | dict(zip(args[1::2], args[2::2], strict=False))
    assert (
        pairs["--driver-url"] == env["SPARK_DRIVER_URL"]
        and pairs["--podName"] == env["SPARK_EXECUTOR_POD_NAME"]
    )
    passthrough = subprocess.run(["bash", script, "echo", "driver"], env=env, capture_output=True, text=True)
    assert passthrough.stdout == "driver\n"


def test_installed_spark_has_the_executor_backend_the_entrypoint_starts() -> None:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    (kube,) = jars.glob("spark-kubernetes_2.12-*.jar")
    with zipfile.ZipFile(kube) as z:
        assert "org/apache/spark/scheduler/cluster/k8s/KubernetesExecutorBackend.class" in z.namelist()
