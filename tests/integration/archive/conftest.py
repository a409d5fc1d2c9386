"""Fixtures of the archive contract tier: none of its own (the contract suite and its model, whose asserts
tests/conftest.py registers for rewriting, are imported by the backend bindings)."""
