"""What schema validation cannot see in charts/mailmesh, checked on every ci/ scenario.

Selectors match their pods; probes are gRPC probes on the port that serves grpc.health.v1 with the service's
own health name; the NetworkPolicies open exactly the call graph of libs/meshharness/catalog.py (``needs`` and
``observes``) and nothing else, on the Services' ports; every variable a service is given is one its Config
declares, the ones a cluster must set are set, and the settings parse with the service's own Config; every
container runs hardened.
"""

from __future__ import annotations

import base64
import importlib
import re
from typing import Any

import pytest

from meshcore.config import describe
from meshharness.catalog import CATALOG
from tests.charts.chart_support import (
    SCENARIOS,
    Doc,
    component,
    headless_services,
    of_kind,
    pod_spec,
    scenario,
)

WORKLOADS = ("Deployment", "StatefulSet")
TEST = "test"  # the helm test pod's component: it may reach every service's gRPC port


def chart_name(catalog_name: str) -> str:
    return catalog_name.replace("_", "-")


def call_graph() -> set[tuple[str, str]]:
    """(caller, callee) for every edge the harness wires (needs and observes), and send's replicas calling
    each other (Cancel/Resend forwarded to a shard's owner, services/send/README.md)."""
    edges = {(chart_name(k.name), chart_name(d)) for k in CATALOG.values() for d in (*k.needs, *k.observes)}
    return edges | {("send", "send")}


def workloads(docs: list[Doc]) -> dict[str, Doc]:
    return {**of_kind(docs, "Deployment"), **of_kind(docs, "StatefulSet")}


def selector_names(peers: list[Doc]) -> set[str]:
    return {
        p["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
        for p in peers
        if "podSelector" in p and "namespaceSelector" not in p
    }


def service_env(docs: list[Doc], workload: Doc) -> dict[str, str]:
    """A service container's environment as the kubelet gives it (ConfigMap, then env; Secrets resolved)."""
    (container,) = pod_spec(workload)["containers"]
    configmaps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    secrets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Secret"}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(configmaps[source["configMapRef"]["name"]]["data"])
    for item in container.get("env", []):
        ref = item.get("valueFrom", {})
        if "fieldRef" in ref:
            env[item["name"]] = f"{workload['metadata']['name']}-0"
        elif "secretKeyRef" in ref:
            secret = secrets.get(ref["secretKeyRef"]["name"])  # an existingSecret is not rendered
            raw = (
                secret["data"][ref["secretKeyRef"]["key"]]
                if secret
                else base64.b64encode(b"ab" * 32).decode()
            )
            env[item["name"]] = base64.b64decode(raw).decode()
        else:
            env[item["name"]] = item["value"]
    return env


def config_class(module: str) -> Any:
    return importlib.import_module(f"{module}.config").Config


# ---------------------------------------------------------------------------------------------- structure
@pytest.mark.parametrize("name", SCENARIOS)
def test_the_chart_runs_every_catalog_service_from_its_module(name: str) -> None:
    found = workloads(scenario(name))
    assert set(found) == {chart_name(k) for k in CATALOG}
    for kind in CATALOG.values():
        (container,) = pod_spec(found[chart_name(kind.name)])["containers"]
        assert container["command"] == ["python", "-m", kind.module]
    assert found["edge-peer"]["kind"] == "StatefulSet"


@pytest.mark.parametrize("name", SCENARIOS)
def test_selectors_match_their_pods_and_carry_no_version(name: str) -> None:
    docs = scenario(name)
    pods = {c: d["spec"]["template"]["metadata"]["labels"] for c, d in workloads(docs).items()}
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert (
            labels["app.kubernetes.io/part-of"] == "mailmesh" and labels["app.kubernetes.io/instance"] == "mm"
        )
        if doc["kind"] in WORKLOADS or doc["kind"] == "PodDisruptionBudget":
            selector = doc["spec"]["selector"]["matchLabels"]
        elif doc["kind"] == "Service":
            # The StatefulSet controller adds the pod-name label; a per-replica Service selects by it.
            selector = {
                k: v for k, v in doc["spec"]["selector"].items() if k != "statefulset.kubernetes.io/pod-name"
            }
        elif doc["kind"] == "NetworkPolicy" and component(doc) != TEST:
            selector = doc["spec"]["podSelector"]["matchLabels"]
        else:
            continue
        assert not {"app.kubernetes.io/version", "helm.sh/chart"} & set(selector)  # selectors are immutable
        matched = [c for c, labels in pods.items() if selector.items() <= labels.items()]
        assert matched == [component(doc)], f"{doc['kind']} {doc['metadata']['name']} selects {matched}"
    for hpa in (d for d in docs if d["kind"] == "HorizontalPodAutoscaler"):
        target = workloads(docs)[component(hpa)]
        assert hpa["spec"]["scaleTargetRef"]["name"] == target["metadata"]["name"]
        assert "replicas" not in target["spec"]  # the autoscaler owns it


@pytest.mark.parametrize("name", SCENARIOS)
def test_probes_ask_the_grpc_port_for_the_services_health_name(name: str) -> None:
    docs = scenario(name)
    services = of_kind(docs, "Service")
    for kind in CATALOG.values():
        workload = workloads(docs)[chart_name(kind.name)]
        (container,) = pod_spec(workload)["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        env = service_env(docs, workload)
        assert int(env[f"{kind.prefix}_GRPC_PORT"]) == ports["grpc"]  # the port the server binds
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            grpc = container[probe]["grpc"]
            assert grpc["port"] == ports["grpc"] and isinstance(grpc["port"], int)
        assert container["startupProbe"]["grpc"]["service"] == kind.health
        assert container["readinessProbe"]["grpc"]["service"] == kind.health
        assert container["livenessProbe"]["grpc"]["service"] == ""  # the server as a whole
        svc_ports = {p["name"]: p for p in services[chart_name(kind.name)]["spec"]["ports"]}
        assert svc_ports["grpc"]["port"] == ports["grpc"] and svc_ports["grpc"]["targetPort"] == "grpc"
        assert svc_ports["metrics"]["port"] == ports["metrics"] == int(env[f"{kind.prefix}_METRICS_PORT"])


# ---------------------------------------------------------------------------------------------- policies
@pytest.mark.parametrize("name", ["production", "sqlite"])
def test_network_policies_allow_exactly_the_call_graph_on_the_service_ports(name: str) -> None:
    docs = scenario(name)
    policies = of_kind(docs, "NetworkPolicy")
    services = of_kind(docs, "Service")
    grpc_port = {c: {p["name"]: p["port"] for p in s["spec"]["ports"]}["grpc"] for c, s in services.items()}
    ingress_edges: set[tuple[str, str]] = set()
    egress_edges: set[tuple[str, str]] = set()
    for callee, policy in policies.items():
        if callee == TEST:
            continue
        svc_ports = {p["port"] for p in services[callee]["spec"]["ports"]}
        public = {p["port"] for d in docs if d["kind"] == "Service" and component(d) == callee
                  and d["metadata"]["name"].endswith("-p2p") for p in d["spec"]["ports"]}  # fmt: skip
        rule_ports = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
        assert rule_ports == svc_ports | public, f"{callee}: ingress ports {rule_ports} != Service ports"
        for rule in policy["spec"]["ingress"]:
            if [p["port"] for p in rule["ports"]] == [grpc_port[callee]]:
                ingress_edges |= {(caller, callee) for caller in selector_names(rule["from"])}
            elif any(p["port"] in public for p in rule["ports"]):
                assert "from" not in rule  # devp2p: any Waku peer
            elif "from" not in rule:  # a public port on the component's Service (the gateway's REST API)
                assert grpc_port[callee] not in {p["port"] for p in rule["ports"]}
            else:
                assert all("podSelector" not in peer for peer in rule["from"]), rule  # metrics: Prometheus
        for rule in policy["spec"]["egress"]:
            peers = selector_names(rule.get("to", []))
            for peer in peers:
                assert [p["port"] for p in rule["ports"]] == [grpc_port[peer]], f"{callee} -> {peer}"
                egress_edges.add((callee, peer))
    graph = call_graph()
    assert ingress_edges - {e for e in ingress_edges if e[0] == TEST} == graph
    assert {e for e in ingress_edges if e[0] == TEST} == {(TEST, c) for c in grpc_port}
    assert egress_edges == graph


def test_only_the_edge_peer_reaches_the_internet_and_stores_reach_cassandra() -> None:
    policies = of_kind(scenario("production"), "NetworkPolicy")
    for name, policy in policies.items():
        egress = policy["spec"]["egress"]
        internet = [r for r in egress if any("ipBlock" in p for p in r.get("to", []))]
        assert bool(internet) == (name == "edge-peer"), name
        for rule in internet:
            assert "10.0.0.0/8" in rule["to"][0]["ipBlock"]["except"]  # never the cluster's own pods
        cassandra = [r for r in egress if [p["port"] for p in r.get("ports", [])] == [9042]]
        assert bool(cassandra) == (name in {"archive", "send", "subscription"}), name
        dns = [
            r
            for r in egress
            if {(p["port"], p["protocol"]) for p in r.get("ports", [])} == {(53, "UDP"), (53, "TCP")}
        ]
        assert len(dns) == 1, name


# ---------------------------------------------------------------------------------------------- settings
REQUIRED_RUNTIME = ("SERVICE_NAME", "GRPC_HOST", "GRPC_PORT", "METRICS_PORT", "SHUTDOWN_GRACE_SECONDS")
LOOPBACK = re.compile(r"(^|[,/])(127\.|localhost)")


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_variable_is_a_real_setting_and_what_a_cluster_needs_is_set(name: str) -> None:
    docs = scenario(name)
    for kind in CATALOG.values():
        workload = workloads(docs)[chart_name(kind.name)]
        env = service_env(docs, workload)
        cls = config_class(kind.module)
        known = {s.env for s in describe(cls)}
        assert set(env) <= known, f"{kind.name}: not settings of {kind.module}: {sorted(set(env) - known)}"
        for suffix in REQUIRED_RUNTIME:
            assert f"{kind.prefix}_{suffix}" in env
        for dependency in (*kind.needs, *kind.observes):
            var = kind.addr_var(CATALOG[dependency])
            assert env.get(var), f"{kind.name}: {var} unset"
        if kind.instance_var:
            assert env[kind.instance_var] == f"{workload['metadata']['name']}-0"  # the pod's name
        for setting in describe(cls):  # what a cluster must never inherit from the local defaults
            value = env.get(setting.env, setting.default or "")
            if (
                setting.env.endswith(("_ADDR", "_CASSANDRA_HOSTS"))
                and env.get(setting.env.replace("CASSANDRA_HOSTS", "BACKEND")) != "sqlite"
            ):
                assert not LOOPBACK.search(value), f"{kind.name}: {setting.env}={value!r} is loopback"
        config = cls.from_env(env)  # every value parses, cross-field checks included
        assert config.runtime.grpc_port == int(env[f"{kind.prefix}_GRPC_PORT"])


@pytest.mark.parametrize("name", SCENARIOS)
def test_callers_of_a_deployment_balance_over_its_headless_service(name: str) -> None:
    docs = scenario(name)
    headless, services = headless_services(docs), of_kind(docs, "Service")
    deployments = of_kind(docs, "Deployment")
    assert set(headless) == set(deployments)  # the edge peer's StatefulSet keeps its per-pod names
    for comp, deployment in deployments.items():
        spec = headless[comp]["spec"]
        grpc_port = {p["name"]: p["port"] for p in services[comp]["spec"]["ports"]}["grpc"]
        assert (
            spec["clusterIP"] == "None" and spec["selector"] == deployment["spec"]["selector"]["matchLabels"]
        )
        assert [(p["name"], p["port"], p["targetPort"]) for p in spec["ports"]] == [
            ("grpc", grpc_port, "grpc")
        ]
        assert not spec.get("publishNotReadyAddresses")  # calls go to ready pods only
        # The ClusterIP Service stays: metrics scraping (its label), the gateway's Ingress, outside clients.
        assert services[comp]["spec"]["type"] == "ClusterIP"
        assert {"grpc", "metrics"} <= {p["name"] for p in services[comp]["spec"]["ports"]}
        assert services[comp]["metadata"]["labels"]["mailmesh.io/metrics"] == "true"
        assert "mailmesh.io/metrics" not in headless[comp]["metadata"]["labels"]
    for kind in CATALOG.values():
        env = service_env(docs, workloads(docs)[chart_name(kind.name)])
        for dependency in (*kind.needs, *kind.observes):
            callee = chart_name(dependency)
            if callee not in headless:
                continue
            svc = headless[callee]
            port = svc["spec"]["ports"][0]["port"]
            expected = f"dns:///{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc:{port}"
            assert env[kind.addr_var(CATALOG[dependency])] == expected, (kind.name, callee)


def test_health_and_subscription_take_the_headless_names_as_every_instance() -> None:
    docs = scenario("production")
    headless = headless_services(docs)

    def name_of(comp: str) -> str:
        svc = headless[comp]
        return f"dns:///{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc:{svc['spec']['ports'][0]['port']}"

    health = config_class("services.health").from_env(service_env(docs, workloads(docs)["health"]))
    assert health.archive_addrs == (name_of("archive"),) and health.history_addrs == (name_of("history"),)
    assert health.gateway_addrs == (name_of("gateway"),)
    assert not any(a.startswith("dns:") for a in health.edge_peer_addrs)  # each pod by name, as before
    subscription = config_class("services.subscription").from_env(
        service_env(docs, workloads(docs)["subscription"])
    )
    # Each history-query pod serves its own queries: the name stands for every one of them (WatchServed).
    assert subscription.served_targets == (name_of("history"),)
    assert health.discovery_interval_s == subscription.discovery_interval_s == 30.0


def test_stores_and_secrets_are_wired_per_backend() -> None:
    prod = scenario("production")
    for svc, var in (
        ("archive", "ARCHIVE_CASSANDRA_HOSTS"),
        ("send", "MSGSTORE_CASSANDRA_HOSTS"),
        ("subscription", "MSGSTORE_CASSANDRA_HOSTS"),
    ):
        (container,) = pod_spec(workloads(prod)[svc])["containers"]
        (ref,) = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if e["name"] == var]
        assert ref == {"name": "mailmesh-cassandra", "key": "contactPoints"}  # the operator's Secret
    (history,) = pod_spec(workloads(prod)["history"])["containers"]
    (cursor,) = [e for e in history["env"] if e["name"] == "HISTORY_CURSOR_SECRETS"]
    assert cursor["valueFrom"]["secretKeyRef"]["name"] == "mailmesh-history-cursor"  # one for every replica
    assert service_env(prod, workloads(prod)["history"])["HISTORY_CURSOR_SECRET_AUTOCREATE"] == "false"
    lite = scenario("sqlite")
    (claim,) = [d for d in lite if d["kind"] == "PersistentVolumeClaim"]
    for svc in ("archive", "send", "subscription"):
        workload = workloads(lite)[svc]
        assert workload["spec"]["replicas"] == 1 and workload["spec"]["strategy"]["type"] == "Recreate"
        (volume,) = [v for v in pod_spec(workload)["volumes"] if "persistentVolumeClaim" in v]
        assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert not [d for d in lite if d["kind"] == "HorizontalPodAutoscaler"]  # ci/sqlite asks for one: refused
    env = service_env(lite, workloads(lite)["send"])
    assert (
        env["MSGSTORE_SQLITE_PATH"]
        == service_env(lite, workloads(lite)["subscription"])["MSGSTORE_SQLITE_PATH"]
    )
    assert env["MSGSTORE_SQLITE_PATH"].startswith("/var/lib/mailmesh/")


def test_each_edge_peer_replica_is_addressed_and_keyed_on_its_own() -> None:
    docs = scenario("production")
    edge = workloads(docs)["edge-peer"]
    assert edge["spec"]["replicas"] == 3
    pods = [f"{edge['metadata']['name']}-{i}" for i in range(3)]
    expected = ",".join(f"{p}.{edge['spec']['serviceName']}:50051" for p in pods)
    for caller in ("health", "send", "subscription"):
        assert service_env(docs, workloads(docs)[caller])[f"{CATALOG[caller].prefix}_EDGE_ADDR"] == expected
    p2p = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"].endswith("-p2p")]
    assert [s["spec"]["selector"]["statefulset.kubernetes.io/pod-name"] for s in p2p] == pods
    assert {s["spec"]["type"] for s in p2p} == {"LoadBalancer"} and {
        s["spec"]["externalTrafficPolicy"] for s in p2p
    } == {"Local"}
    minimal = scenario("minimal")
    (keys,) = [d for d in minimal if d["kind"] == "Secret" and d["metadata"]["name"].endswith("node-keys")]
    (key,) = keys["data"].values()
    assert re.fullmatch(r"[0-9a-f]{64}", base64.b64decode(key).decode())  # one hex node key per replica


# ---------------------------------------------------------------------------------------------- hardening
@pytest.mark.parametrize("name", SCENARIOS)
def test_every_container_runs_hardened(name: str) -> None:
    docs = scenario(name)
    for doc in (d for d in docs if d["kind"] in (*WORKLOADS, "Pod", "CronJob")):
        pod = pod_spec(doc)
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        assert pod["enableServiceLinks"] is False  # no <SERVICE>_PORT variables that look like settings
        assert pod["automountServiceAccountToken"] is (doc["kind"] == "CronJob")  # only the Spark driver
        for container in pod["containers"] + pod.get("initContainers", []):
            sc = container["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"] and sc["runAsNonRoot"] is True
            assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
        if doc["kind"] in WORKLOADS:
            grace = int(service_env(docs, doc)[f"{_prefix(doc)}_SHUTDOWN_GRACE_SECONDS"])
            assert pod["terminationGracePeriodSeconds"] > grace  # platform-notes "gRPC in Python"
            annotations = doc["spec"]["template"]["metadata"]["annotations"]
            assert re.fullmatch(r"[0-9a-f]{64}", annotations["checksum/config"])
            assert re.fullmatch(r"[0-9a-f]{64}", annotations["checksum/secrets"])


def _prefix(workload: Doc) -> str:
    return CATALOG[component(workload).replace("-", "_")].prefix
