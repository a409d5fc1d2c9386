"""``python -m mailmeshcli``."""

from mailmeshcli.cli import main

raise SystemExit(main())
