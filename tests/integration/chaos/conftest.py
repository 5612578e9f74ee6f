"""Registers the ``chaos`` marker: ``pytest -m chaos`` runs only the fault-injection runs,
``-m "not chaos"`` skips them."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "chaos: fault-injection runs against a real cluster (tests/integration/chaos)"
    )
