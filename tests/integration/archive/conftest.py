"""Assertion rewriting for the shared contract suite and its model (they are imported, not collected)."""

import pytest

pytest.register_assert_rewrite("tests.integration.archive.contract", "tests.integration.archive.model")
