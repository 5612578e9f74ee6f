"""Fixtures of the meta service integration tests (helpers live in harness.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .harness import MetaNodes


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # grpc.aio needs asyncio


@pytest.fixture
def meta_nodes_factory(tmp_path: Path) -> Iterator[Callable[..., MetaNodes]]:
    """Make MetaNodes under tmp_path; every node still running at the end is killed."""
    made: list[MetaNodes] = []

    def make(size: int, secure: bool = True, **settings: object) -> MetaNodes:
        nodes = MetaNodes(tmp_path, size, secure, **settings)
        made.append(nodes)
        return nodes

    yield make
    for nodes in made:
        nodes.kill_all()
