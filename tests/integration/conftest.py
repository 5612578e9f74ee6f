"""Fixtures that run real Rafka processes (meta nodes and brokers) on free local ports."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from cluster.local import LocalCluster, free_base_port

T = TypeVar("T")


def wait_for(
    check: Callable[[], T], timeout: float = 30, what: str = "condition", interval: float = 0.05
) -> T:
    """Poll `check` every `interval` seconds until it returns something truthy, and return
    that; fail after `timeout` seconds naming `what` (tests wait for a state this way, never by
    sleeping)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


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


@contextmanager
def running_cluster(
    tmp: Path, brokers: int = 3, metas: int = 3, **overrides: str
) -> Iterator[LocalCluster]:
    """`start_cluster`, stopped when the block ends however it ends (module fixtures)."""
    cluster = start_cluster(tmp, brokers, metas, **overrides)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A 3-meta, 3-broker cluster shared by a test module."""
    with running_cluster(tmp_path_factory.mktemp("cluster")) as c:
        yield c
