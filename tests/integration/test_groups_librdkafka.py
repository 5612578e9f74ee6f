"""librdkafka's commit flows (confluent-kafka), each run by the Python driver's
``group-consume`` with an observable outcome: the commit callback (on_commit) for asynchronous
commits and auto-commits, and commitSync (``commit(asynchronous=False)``).

One broker is enough here (what a single group does). The other librdkafka flows of the seeds
(rebalance callback with eager and cooperative assignors, manual commit of chosen offsets, seek,
pause/resume) run for every client in test_groups_clients.py, with the 3-broker cluster,
coordinator failover and the other clients.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.clients.group_member import (
    FAST,
    GroupCluster,
    Member,
    committed,
    end_offsets,
    group_cluster,
    new_topic,
    wait_committed,
    wait_processed,
)
from tests.integration.conftest import wait_for

PARTITIONS = 6
COUNT = 120


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupCluster]:
    with group_cluster(tmp_path_factory.mktemp("groups-rdkafka"), brokers=1, metas=1) as c:
        yield c


@pytest.fixture
def topic(cluster: GroupCluster) -> tuple[str, str, set[str]]:
    """A fresh 6-partition topic holding COUNT keyed records, and a fresh group name."""
    name, group, produced = new_topic(cluster.bootstrap, "rdk", PARTITIONS, COUNT, 1)
    return name, group, set(produced)


def member(cluster: GroupCluster, topic: str, group: str, *opts: str) -> Member:
    return Member("confluent", cluster.bootstrap, topic, group, *FAST, *opts, name="rdk")


@pytest.mark.parametrize("mode", ["async", "auto"])
def test_commit_callback(cluster: GroupCluster, topic: tuple, mode: str) -> None:
    """on_commit reports each commit, asynchronous ones (commit(asynchronous=True)) and the
    auto-commits, with their offsets; the last ones are the log end."""
    name, group, keys = topic
    opts = ("--commit", mode) + (("--auto-commit-interval", "0.2") if mode == "auto" else ())
    m = member(cluster, name, group, *opts)
    try:
        wait_processed([m], keys, 60)
        ends = end_offsets(cluster.bootstrap, name)

        def reported() -> dict[int, int]:
            best: dict[int, int] = {}
            for e in m.of("commit"):
                if e["via"] == "callback" and e["error"] is None:
                    for p, o in e["offsets"].items():
                        best[int(p)] = max(best.get(int(p), -1), o)
            return best

        wait_for(lambda: reported() == ends, 30, f"on_commit with the end offsets {ends}")
        assert not [e for e in m.of("commit") if e["error"]], m.of("commit")
        assert committed(cluster.bootstrap, name, group) == ends
    finally:
        m.close()


def test_commit_sync(cluster: GroupCluster, topic: tuple) -> None:
    """commit(asynchronous=False) after each batch: each returns without error, and the
    committed offsets then are what it reported."""
    name, group, keys = topic
    m = member(cluster, name, group, "--commit", "sync")
    try:
        wait_processed([m], keys, 60)
        ends = end_offsets(cluster.bootstrap, name)
        wait_committed(cluster.bootstrap, name, group, ends, 30, [m])
        syncs = [e for e in m.of("commit") if e["via"] == "sync"]
        assert syncs, syncs
        assert all(e["error"] is None for e in syncs), syncs
        last: dict[int, int] = {}
        for e in syncs:
            last |= {int(p): o for p, o in e["offsets"].items()}
        assert last == ends
        assert m.stop() == 0
        assert committed(cluster.bootstrap, name, group) == ends
    finally:
        m.close()
