"""librdkafka's consumer-group flows (confluent-kafka), each run by the Python driver's
``group-consume`` with an observable outcome: the rebalance callback (on_assign / on_revoke with
their partitions, eager and cooperative), the commit callback (on_commit), commitSync
(``commit(asynchronous=False)``), a manual commit of chosen offsets, seek, pause/resume.

One broker is enough here (what a single group does); test_groups_clients.py has the 3-broker
cluster, coordinator failover and the other clients.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.integration.clients.group_member import (
    FAST,
    Member,
    committed,
    create_topic,
    end_offsets,
    group_cluster,
    processed_keys,
    produce,
    wait_committed,
    wait_exclusive,
    wait_until,
)

PARTITIONS = 6
COUNT = 120


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with group_cluster(tmp_path_factory.mktemp("groups-rdkafka"), brokers=1, metas=1) as c:
        yield c


@pytest.fixture
def topic(cluster: object) -> tuple[str, str, set[str]]:
    """A fresh 6-partition topic holding COUNT keyed records, and a fresh group name."""
    tag = uuid.uuid4().hex[:6]
    name = f"rdk-{tag}"
    create_topic(cluster.bootstrap, name, PARTITIONS, 1)
    keys = set(produce(cluster.bootstrap, name, [f"k{i}" for i in range(COUNT)]))
    return name, f"g-rdk-{tag}", keys


def member(cluster: object, topic: str, group: str, *opts: str, name: str = "rdk") -> Member:
    return Member("confluent", cluster.bootstrap, topic, group, *FAST, *opts, name=name)


def run_to_end(cluster: object, topic: str, m: Member, keys: set[str]) -> None:
    try:
        wait_until(lambda: keys <= processed_keys([m]), 60, "every record processed")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{m.describe()}") from None


def by_partition(records: list[dict]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r in records:
        out.setdefault(r["partition"], []).append(r["offset"])
    return out


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_rebalance_callbacks(cluster: object, topic: tuple, assignor: str) -> None:
    """on_assign/on_revoke get the partitions: eager (range) takes everything back and hands out
    the new split; cooperative-sticky revokes only what moves to the newcomer."""
    name, group, _ = topic
    a = member(cluster, name, group, "--assignor", assignor, "--commit", "sync", name="a")
    b = None
    try:
        first = a.wait_event("assigned", timeout=60)
        assert first["partitions"] == list(range(PARTITIONS)) == first["owned"], first
        b = member(cluster, name, group, "--assignor", assignor, "--commit", "sync", name="b")
        owned = wait_exclusive([a, b], PARTITIONS, timeout=60, balanced=True)
        assert sorted(len(p) for p in owned.values()) == [3, 3], owned
        revoked = a.of("revoked")
        assert revoked, [e for e in a.events if e["event"] not in ("record", "commit")]
        gone = {p for e in revoked for p in e["partitions"]}
        if assignor == "range":
            assert gone == set(range(PARTITIONS)), revoked  # eager: all of them
            assert set(a.of("assigned")[-1]["partitions"]) == owned["a"]
        else:
            assert gone == owned["b"], (revoked, owned)  # only what moved
            assert all(set(e["partitions"]) <= owned["b"] for e in revoked)
        assert {p for e in b.of("assigned") for p in e["partitions"]} == owned["b"]
        # When b leaves, a gets b's partitions back (on_assign with them).
        assert b.stop() == 0
        wait_exclusive([a], PARTITIONS, timeout=10)
        assert owned["b"] <= set(a.of("assigned")[-1]["partitions"]), a.of("assigned")
    finally:
        for m in (a, b):
            if m:
                m.close()


@pytest.mark.parametrize("mode", ["async", "auto"])
def test_commit_callback(cluster: object, topic: tuple, mode: str) -> None:
    """on_commit reports each commit, asynchronous ones (commit(asynchronous=True)) and the
    auto-commits, with their offsets; the last ones are the log end."""
    name, group, keys = topic
    opts = ("--commit", mode) + (("--auto-commit-interval", "0.2") if mode == "auto" else ())
    m = member(cluster, name, group, *opts)
    try:
        run_to_end(cluster, name, m, keys)
        ends = end_offsets(cluster.bootstrap, name)

        def reported() -> dict[int, int]:
            best: dict[int, int] = {}
            for e in m.of("commit"):
                if e["via"] == "callback" and e["error"] is None:
                    for p, o in e["offsets"].items():
                        best[int(p)] = max(best.get(int(p), -1), o)
            return best

        wait_until(lambda: reported() == ends, 30, f"on_commit with the end offsets {ends}")
        assert not [e for e in m.of("commit") if e["error"]], m.of("commit")
        assert committed(cluster.bootstrap, name, group) == ends
    finally:
        m.close()


def test_commit_sync(cluster: object, topic: tuple) -> None:
    """commit(asynchronous=False) after each batch: each returns without error, and the
    committed offsets then are what it reported."""
    name, group, keys = topic
    m = member(cluster, name, group, "--commit", "sync")
    try:
        run_to_end(cluster, name, m, keys)
        ends = end_offsets(cluster.bootstrap, name)
        wait_committed(cluster.bootstrap, name, group, ends, 30, [m])
        syncs = [e for e in m.of("commit") if e["via"] == "sync"]
        assert syncs and all(e["error"] is None for e in syncs), syncs
        last: dict[int, int] = {}
        for e in syncs:
            last |= {int(p): o for p, o in e["offsets"].items()}
        assert last == ends
        assert m.stop() == 0
        assert committed(cluster.bootstrap, name, group) == ends
    finally:
        m.close()


def test_manual_commit_of_chosen_offsets(cluster: object, topic: tuple) -> None:
    """commit(offsets=[TopicPartition(t, p, o + 1)]) for every 7th record only: the group's
    committed offsets are exactly those, not the positions."""
    name, group, keys = topic
    m = member(cluster, name, group, "--commit", "offsets", "--commit-every", "7")
    try:
        run_to_end(cluster, name, m, keys)
        assert m.stop() == 0
        want: dict[int, int] = {p: -1 for p in range(PARTITIONS)}
        commits = [e for e in m.of("commit") if e["via"] == "offsets"]
        assert len(commits) == COUNT // 7, len(commits)
        for e in commits:
            assert e["error"] is None, e
            for p, o in e["offsets"].items():
                want[int(p)] = max(want[int(p)], o)
        got = committed(cluster.bootstrap, name, group)
        assert got == want
        assert got != end_offsets(cluster.bootstrap, name)  # chosen offsets, not the ends
    finally:
        m.close()


def test_seek(cluster: object, topic: tuple) -> None:
    """consumer.seek() at partition 2's first record, to offset 5: partition 2 is read from 5
    on, the others from the start."""
    name, group, _ = topic
    ends = end_offsets(cluster.bootstrap, name)
    m = member(cluster, name, group, "--commit", "sync", "--seek", "2:5")
    try:
        want = sum(ends.values()) - 5
        wait_until(lambda: len(m.records()) >= want, 60, f"{want} records")
        seek = m.wait_event("seek", timeout=1)
        assert seek["partition"] == 2 and seek["offset"] == 5, seek
        got = by_partition(m.records())
        assert got[2] == list(range(5, ends[2])), got[2]
        for p in set(range(PARTITIONS)) - {2}:
            assert got.get(p, []) == list(range(ends[p])), (p, got.get(p))
    finally:
        m.close()


def test_pause_resume(cluster: object, topic: tuple) -> None:
    """pause() partition 1 as it is assigned, resume() it after 30 records of the others: no
    record of partition 1 in between, all of it afterwards."""
    name, group, keys = topic
    m = member(cluster, name, group, "--commit", "sync", "--pause", "1", "--resume-after", "30")
    try:
        run_to_end(cluster, name, m, keys)
        evs = m.events
        kinds = [e["event"] for e in evs]
        assert "paused" in kinds and "resumed" in kinds, kinds
        paused, resumed = kinds.index("paused"), kinds.index("resumed")
        assert evs[paused]["partitions"] == [1] == evs[resumed]["partitions"]
        between = [e for e in evs[paused:resumed] if e["event"] == "record"]
        assert len(between) == 30 and all(e["partition"] != 1 for e in between)
        assert not [e for e in evs[:paused] if e["event"] == "record"]
        ends = end_offsets(cluster.bootstrap, name)
        assert by_partition(m.records())[1] == list(range(ends[1]))
    finally:
        m.close()
