"""``python -m tools.dashboards``: write the dashboard JSON; ``--check`` fails when it is stale."""

from tools.dashboards.render import main

raise SystemExit(main())
