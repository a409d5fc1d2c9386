"""A real Kubernetes control plane as local processes on loopback, with kwok's fake nodes.

``make k8s-live-test``: etcd, kube-apiserver, kube-controller-manager and kube-scheduler are the upstream
programs (built by mk/kube.mk from their Go modules into var/kube/bin). kwok ("Kubernetes WithOut Kubelet")
runs nothing: it watches Node and Pod objects and writes their status the way a kubelet would, by the stages
in its configuration. No container runs: a pod is "Running" because kwok says so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.charts.live.pki import Pki, make_pki, write_kubeconfig

ROOT = Path(__file__).resolve().parents[3]
KUBE = ROOT / "var" / "kube"
BIN = KUBE / "bin"
#: kwok's own stages (copied from the pinned module by mk/kube.mk) and ours for the helm test hook.
STAGES = (*sorted((KUBE / "stages").glob("*.yaml")), Path(__file__).with_name("helm-test-stage.yaml"))
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.1/16"
#: The annotation kwok selects its nodes by (kwok's own convention, ``kwokctl`` uses the same).
KWOK_NODE = ("kwok.x-k8s.io/node", "fake")
START_TIMEOUT_S = 300.0  # a cold API server on a loaded two-core box installs its built-in objects slowly
STOP_GRACE_S = 30.0

Obj = dict[str, Any]


def free_port() -> int:
    """A TCP port on loopback that was free a moment ago (the processes are told their ports up front)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(condition: Callable[[], bool], what: str, timeout: float = START_TIMEOUT_S) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


class Api:
    """The API server over HTTPS as the admin client: just the few calls the test needs."""

    def __init__(self, server: str, pki: Pki) -> None:
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        self._http = httpx.Client(base_url=server, verify=ctx, timeout=30.0)

    def get(self, path: str) -> Obj:
        """GET ``path``; the decoded object (raises on any status but 200)."""
        reply = self._http.get(path)
        reply.raise_for_status()
        obj: Obj = reply.json()
        return obj

    def items(self, path: str) -> list[Obj]:
        """The items of the list at ``path``."""
        items: list[Obj] = self.get(path)["items"]
        return items

    def create(self, path: str, obj: Obj) -> Obj:
        """POST ``obj`` to the collection ``path``."""
        reply = self._http.post(path, json=obj)
        if reply.status_code >= 300:
            raise RuntimeError(f"POST {path}: {reply.status_code} {reply.text}")
        created: Obj = reply.json()
        return created

    def ready(self) -> bool:
        """Whether /readyz answers ok (every post-start hook done, etcd reachable)."""
        with contextlib.suppress(httpx.HTTPError):
            return self._http.get("/readyz").text == "ok"
        return False

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()


@dataclass
class LocalCluster:
    """The running control plane: its API, kubeconfig and processes (stopped by :meth:`stop`)."""

    workdir: Path
    api: Api
    kubeconfig: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, args: list[str]) -> None:
        """Start ``var/kube/bin/<name>`` with ``args``, its output in ``<workdir>/logs/<name>.log``."""
        log = (self.workdir / "logs" / f"{name}.log").open("wb")
        self.processes[name] = subprocess.Popen(
            [str(BIN / name), *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()

    def alive(self) -> bool:
        """True while every component runs; raises with the log tail of one that has exited."""
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
        return True

    def log_tail(self, name: str, lines: int = 40) -> str:
        """The last ``lines`` lines of a component's log."""
        text = (self.workdir / "logs" / f"{name}.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> dict[str, int]:
        """SIGTERM every component, newest first (kwok ... etcd), SIGKILL after the grace; the exit codes."""
        codes: dict[str, int] = {}
        for name, proc in reversed(self.processes.items()):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                codes[name] = proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[name] = proc.wait()
        self.api.close()
        return codes

    def add_nodes(self, count: int) -> list[str]:
        """Register ``count`` fake nodes for kwok to manage; their names once kwok has made them Ready."""
        names = [f"kwok-node-{i}" for i in range(count)]
        for name in names:
            self.api.create("/api/v1/nodes", fake_node(name))
        wait_for(lambda: all(node_ready(self.api.get(f"/api/v1/nodes/{n}")) for n in names), "kwok's nodes")
        return names


def fake_node(name: str) -> Obj:
    """A Node kwok manages (kwok's documented example, without its taint: the chart sets no tolerations)."""
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE[0]: KWOK_NODE[1], "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"},
        },
        "status": {"allocatable": resources, "capacity": resources},
    }


def node_ready(node: Obj) -> bool:
    """Whether the node's Ready condition is True."""
    conditions = node.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@contextlib.contextmanager
def local_cluster(workdir: Path) -> Iterator[LocalCluster]:
    """Start etcd, the API server, the controller manager, the scheduler and kwok; stop them on exit."""
    workdir = workdir.resolve()  # a kubeconfig's relative file names are taken relative to the kubeconfig
    (workdir / "logs").mkdir(parents=True, exist_ok=True)
    pki = make_pki(workdir / "pki")
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    server = f"https://127.0.0.1:{api_port}"
    kubeconfig = write_kubeconfig(workdir / "kubeconfig", server, pki)
    cluster = LocalCluster(workdir, Api(server, pki), kubeconfig)
    try:
        _start_control_plane(cluster, pki, etcd_port, peer_port, api_port)
        yield cluster
    finally:
        codes = cluster.stop()
    # kube-scheduler without leader election returns "finished without leader elect" (exit 1) whenever its
    # context ends, SIGTERM included (k8s.io/kubernetes cmd/kube-scheduler/app/server.go, Run).
    clean = {name: {0, -signal.SIGTERM} for name in codes} | {"kube-scheduler": {0, 1, -signal.SIGTERM}}
    bad = {name: code for name, code in codes.items() if code not in clean[name]}
    assert not bad, f"components exited abnormally on SIGTERM: {bad}"


def _start_control_plane(
    cluster: LocalCluster, pki: Pki, etcd_port: int, peer_port: int, api_port: int
) -> None:
    etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
    # Plain HTTP on loopback: only the API server talks to etcd here. --unsafe-no-fsync: a throw-away store
    # on a shared disk (etcd's own test setting), nothing is meant to survive a crash.
    cluster.start(
        "etcd",
        [
            "--name=live",
            f"--data-dir={cluster.workdir / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=live={peer_url}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ],
    )
    cluster.start(
        "kube-apiserver",
        [
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--tls-cert-file={pki.server_cert}",
            f"--tls-private-key-file={pki.server_key}",
            f"--client-ca-file={pki.ca}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            "--allow-privileged=false",
            f"--cert-dir={cluster.workdir / 'pki'}",
        ],
    )
    wait_for(lambda: cluster.alive() and cluster.api.ready(), "the API server's /readyz")
    kubeconfig = f"--kubeconfig={cluster.kubeconfig}"
    # Leader election off (one replica each); --secure-port=0: their own HTTPS endpoints are not needed.
    cluster.start(
        "kube-controller-manager",
        [
            kubeconfig,
            "--leader-elect=false",
            "--secure-port=0",
            f"--root-ca-file={pki.ca}",
            f"--service-account-private-key-file={pki.sa_key}",
            "--use-service-account-credentials=false",
        ],
    )
    cluster.start("kube-scheduler", [kubeconfig, "--leader-elect=false", "--secure-port=0"])
    cluster.start(
        "kwok",
        [
            kubeconfig,
            *[f"--config={stage}" for stage in STAGES],
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE[0]}={KWOK_NODE[1]}",
            f"--cidr={POD_CIDR}",
            "--node-ip=10.244.0.1",
        ],
    )
    # The controller manager is working once it has given the default namespace its ServiceAccount.
    wait_for(
        lambda: (
            cluster.alive() and _exists(cluster.api, "/api/v1/namespaces/default/serviceaccounts/default")
        ),
        "the controller manager (the default ServiceAccount)",
    )


def _exists(api: Api, path: str) -> bool:
    with contextlib.suppress(httpx.HTTPStatusError):
        api.get(path)
        return True
    return False


def environ(cluster: LocalCluster) -> dict[str, str]:
    """The environment for helm against ``cluster`` (its own config and cache under the work directory)."""
    home = cluster.workdir / "helm"
    return {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
        "KUBECACHEDIR": str(home / "kube-cache"),  # the discovery cache, ~/.kube/cache otherwise
    }
