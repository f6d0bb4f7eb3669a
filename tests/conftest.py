"""Shared pytest setup: hypothesis profiles (``HYPOTHESIS_PROFILE=ci`` is deterministic) and markers."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, max_examples=150, deadline=None)
settings.register_profile("dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: end-to-end runs through verl's trainer with Ray (slow)")
    config.addinivalue_line("markers", "slow: left out of the fast tier (make test-fast); make test runs everything")


def pytest_collection_modifyitems(config, items):
    """End-to-end tests belong to the slow tier too."""
    import pytest

    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(pytest.mark.slow)
