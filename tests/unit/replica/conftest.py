from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dataplane.log import StateStore
from tests.unit.replica.producers import Replica


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "state")
    yield s
    s.close()


@pytest.fixture
def leader(tmp_path: Path, store: StateStore) -> Iterator[Replica]:
    replica = Replica(tmp_path / "leader", store, "t-0")
    yield replica
    replica.close()


@pytest.fixture
def follower(tmp_path: Path, store: StateStore) -> Iterator[Replica]:
    replica = Replica(tmp_path / "follower", store, "t-0-follower")
    yield replica
    replica.close()
