"""Assertion rewriting for the shared contract suite (its modules are imported, not collected)."""

import pytest

pytest.register_assert_rewrite(
    "tests.integration.msgstore.contract",
    "tests.integration.msgstore.contract_data",
    "tests.integration.msgstore.contract_logs",
    "tests.integration.msgstore.contract_outbox",
    "tests.integration.msgstore.contract_records",
)
