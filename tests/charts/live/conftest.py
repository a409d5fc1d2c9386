"""Fixtures of the live cluster test (``make k8s-live-test``, not in ``make test``): the control plane of
tests/charts/live/cluster.py for the whole module, and helm from ``make helm-tools``.

The binaries come from ``make kube-tools`` (mk/kube.mk); the tests fail, never skip, when they are missing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.charts.chart_support import tools
from tests.charts.live.cluster import BIN, STAGES, LocalCluster, local_cluster

PROGRAMS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
NODES = 3


@pytest.fixture(scope="session")
def helm() -> Path:
    """The pinned helm (built by ``make helm-tools`` if needed)."""
    return tools()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A running control plane with :data:`NODES` Ready kwok nodes; stopped (and checked) at the end."""
    missing = [p for p in PROGRAMS if not (BIN / p).exists()]
    if missing or len(STAGES) < 2:
        pytest.fail(f"var/kube is incomplete ({missing or 'no kwok stages'}): run make kube-tools")
    with local_cluster(tmp_path_factory.mktemp("kube")) as running:
        running.add_nodes(NODES)
        yield running
