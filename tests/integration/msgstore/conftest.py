"""Assertion rewriting for the shared contract suite (it is imported, not collected)."""

import pytest

pytest.register_assert_rewrite("tests.integration.msgstore.contract")
