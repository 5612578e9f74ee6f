"""Fixtures that run real Rafka processes (meta nodes and brokers) on free local ports."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cluster.local import LocalCluster, free_base_port
from cluster.polling import wait_for

__all__ = ["wait_for"]  # tests import it from here


def start_cluster(
    tmp: Path, brokers: int = 3, metas: int = 3, internal_tls: bool = False, **overrides: object
) -> LocalCluster:
    """A started cluster; if it does not come up, the nodes it did start are stopped."""
    cluster = LocalCluster(
        brokers,
        metas,
        tmp,
        free_base_port(brokers, metas),
        {k.replace("_", "."): str(v) for k, v in overrides.items()},
        log_level="INFO",
        internal_tls=internal_tls,
    )
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextmanager
def running_cluster(
    tmp: Path, brokers: int = 3, metas: int = 3, internal_tls: bool = False, **overrides: object
) -> Iterator[LocalCluster]:
    """`start_cluster`, stopped when the block ends however it ends (module fixtures)."""
    cluster = start_cluster(tmp, brokers, metas, internal_tls, **overrides)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A 3-meta, 3-broker cluster shared by a test module."""
    with running_cluster(tmp_path_factory.mktemp("cluster")) as c:
        yield c
