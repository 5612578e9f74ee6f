from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dataplane.log import LogConfig, PartitionLog, StateStore

OpenLog = Callable[..., PartitionLog]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "state")
    yield s
    s.close()


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


@pytest.fixture
def open_log(log_dir: Path, store: StateStore) -> Iterator[OpenLog]:
    """Open the partition log under test (again), with LogConfig fields as keywords; logs still
    open at the end of the test are closed."""
    opened: list[PartitionLog] = []

    def _open(**config: Any) -> PartitionLog:
        log = PartitionLog.open(log_dir, LogConfig(**config), store, "topic-0")
        opened.append(log)
        return log

    yield _open
    for log in opened:
        log.close()
