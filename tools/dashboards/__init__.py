"""Generate the Grafana dashboard ``charts/mailmesh/files/dashboards/mailmesh.json`` (``--check``).

One overview row (what an on-call engineer looks at first) and one row per service (the gateway's, the REST
API as its clients see it, in ``gateway.py``), every query against the ``${datasource}`` variable with
``$__rate_interval`` windows. A service is selected by its Prometheus ``job``
label, which ends with the service's name (docs/operations.md "Metrics": the chart's ServiceMonitor takes it
from the ``app.kubernetes.io/component`` label, ``edge-peer``; a static scrape config may prefix it), and by
``$namespace``. Written in Python so that every panel uses the same selectors; the committed JSON is what the
chart embeds; ``tests/charts/test_monitoring_dashboard.py`` fails when it differs from what this writes.

    .venv/bin/python -m tools.dashboards            # rewrite the JSON
    .venv/bin/python -m tools.dashboards --check    # exit 1 if the committed JSON is stale
"""

from tools.dashboards.query import JOBS
from tools.dashboards.render import DASHBOARD, build, expressions, main, render

__all__ = ["DASHBOARD", "JOBS", "build", "expressions", "main", "render"]
