"""Fixtures that run real Rafka processes (meta nodes and brokers) on free local ports."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.local import LocalCluster


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_base_port(brokers: int = 3, metas: int = 3) -> int:
    """A base port whose whole layout (see cluster/local.py) is free right now."""
    for _ in range(200):
        base = random.randrange(20000, 50000, 10)
        ports = [
            base + off + i
            for off, n in ((0, brokers), (100, metas), (200, metas), (300, brokers))
            for i in range(n)
        ]
        if all(_free(p) for p in ports):
            return base
    raise RuntimeError("no free port range found")


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
