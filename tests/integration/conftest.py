"""Fixtures that run real Rafka processes (meta nodes and brokers) on free local ports."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.local import LocalCluster, free_base_port


def start_cluster(tmp: Path, brokers: int = 3, metas: int = 3, **overrides: str) -> LocalCluster:
    cluster = LocalCluster(
        brokers,
        metas,
        tmp,
        free_base_port(brokers, metas),
        {k.replace("_", "."): str(v) for k, v in overrides.items()},
        log_level="INFO",
    )
    cluster.start()
    return cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A 3-meta, 3-broker cluster shared by a test module."""
    c = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.stop()
