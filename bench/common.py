"""What every benchmark shares: units, librdkafka's silenced logger, the work directory and
the local cluster it runs against."""

from __future__ import annotations

import contextlib
import logging
import tempfile
from pathlib import Path
from typing import Protocol

from cluster.local import LocalCluster, free_base_port

MB = 1_000_000  # figures are in 10^6 bytes
RECORD = 1024  # 1 KiB records

QUIET = logging.getLogger("bench.rdkafka")
"""librdkafka's logger for the benches: its connection chatter would bury the figures."""
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


class Killable(Protocol):
    """A cluster whose nodes a bench can kill -9 by name (Rafka's or Apache Kafka's)."""

    def kill(self, name: str) -> None: ...


def work_dir(stack: contextlib.ExitStack, keep: Path | None) -> Path:
    """``keep`` (the bench's --dir: data and logs stay for a look afterwards), else a temporary
    directory removed when ``stack`` closes."""
    if keep is not None:
        work = keep.resolve()
        work.mkdir(parents=True, exist_ok=True)
        return work
    return Path(stack.enter_context(tempfile.TemporaryDirectory(dir=Path.cwd())))


def start_cluster(
    work: Path,
    brokers: int,
    metas: int,
    overrides: dict[str, str],
    stack: contextlib.ExitStack | None = None,
) -> LocalCluster:
    """A started local cluster with quiet logs; stopped when ``stack`` closes, if given."""
    cluster = LocalCluster(
        brokers, metas, work, free_base_port(brokers, metas), overrides, log_level="WARNING"
    )
    cluster.start()
    if stack is not None:
        stack.callback(cluster.stop)
    return cluster
