"""The consumer examples of KafkaJS's documentation ("Consuming Messages"), each as a mode of
the KafkaJS driver's ``group-consume`` with a checkable outcome: eachMessage, eachBatch (the
resolveOffset / heartbeat / commitOffsetsIfNecessary loop), autoCommitInterval,
autoCommitThreshold, autoCommit off, pause/resume on a timer (the ``pause()`` callback, the
message delivered again after the resume) and partitionsConsumedConcurrently.

One broker is enough here. test_groups_clients.py runs KafkaJS in multi-member groups on a
3-broker cluster, and the examples every client shares: commitOffsets, seek, pause/resume on
the test's word while new records arrive, the rebalance (GROUP_JOIN) reports.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.integration.clients.drivers import ensure_setup
from tests.integration.clients.group_member import (
    FAST,
    GroupCluster,
    Member,
    assert_read_once,
    check_paused,
    committed,
    end_offsets,
    group_cluster,
    new_topic,
    wait_committed,
    wait_processed,
)

PARTITIONS = 6
COUNT = 120


@pytest.fixture(scope="module", autouse=True)
def _clients_installed() -> None:
    ensure_setup()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupCluster]:
    with group_cluster(tmp_path_factory.mktemp("groups-kafkajs"), brokers=1, metas=1) as c:
        yield c


def fresh(cluster: GroupCluster, partitions: int = PARTITIONS, count: int = COUNT) -> tuple:
    """A fresh topic with ``count`` records, a fresh group, and the records' keys."""
    topic, group, produced = new_topic(cluster.bootstrap, "kjs", partitions, count, 1)
    return topic, group, set(produced)


def kafkajs(cluster: GroupCluster, topic: str, group: str, *opts: str) -> Member:
    return Member("kafkajs", cluster.bootstrap, topic, group, *FAST, *opts, name="kafkajs")


def callback_commits(m: Member, partition: int | None = None) -> list[dict]:
    return [
        e
        for e in m.of("commit")
        if e["via"] == "callback" and (partition is None or str(partition) in e["offsets"])
    ]


@pytest.mark.parametrize("each", ["message", "batch"])
def test_each_message_and_each_batch(cluster: GroupCluster, each: str) -> None:
    """eachMessage, and the docs' eachBatch loop (eachBatchAutoResolve off, resolveOffset and
    heartbeat per message, commitOffsetsIfNecessary): every record once, in order per
    partition, and the commits reach the log end."""
    topic, group, keys = fresh(cluster)
    m = kafkajs(cluster, topic, group, "--each", each)
    try:
        wait_processed([m], keys, 60)
        ends = end_offsets(cluster.bootstrap, topic)
        wait_committed(cluster.bootstrap, topic, group, ends, 30, [m])
        assert_read_once(m, ends)
        if each == "batch":
            batches = m.of("batch")
            assert batches, batches
            assert sum(b["size"] for b in batches) == COUNT, batches
        assert m.stop() == 0
        assert committed(cluster.bootstrap, topic, group) == ends
    finally:
        m.close()


def test_auto_commit_interval(cluster: GroupCluster) -> None:
    """autoCommitInterval 300 ms (no threshold), 20 ms per message on one partition: offsets
    are committed while the batch is processed, about every 300 ms, not per message."""
    topic, group, keys = fresh(cluster, partitions=1, count=100)
    m = kafkajs(cluster, topic, group, "--auto-commit-interval", "0.3", "--process-ms", "20")
    try:
        wait_processed([m], keys, 60)
        wait_committed(cluster.bootstrap, topic, group, {0: 100}, 30, [m])
        commits = callback_commits(m)
        # 100 messages x 20 ms = 2 s: a handful of commits, each >= ~300 ms after the previous
        # one but the last (KafkaJS also commits when a batch ends).
        assert 3 <= len(commits) <= 20, commits
        gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(commits[:-1])]
        assert all(g >= 250 for g in gaps), gaps
        offsets = [e["offsets"]["0"] for e in commits]
        assert offsets == sorted(offsets), offsets
        assert offsets[-1] == 100, offsets
    finally:
        m.close()


def test_auto_commit_threshold(cluster: GroupCluster) -> None:
    """autoCommitThreshold 10 (no interval): a commit after every 10 resolved messages."""
    topic, group, keys = fresh(cluster, partitions=1, count=95)
    m = kafkajs(cluster, topic, group, "--auto-commit-threshold", "10")
    try:
        wait_processed([m], keys, 60)
        wait_committed(cluster.bootstrap, topic, group, {0: 95}, 30, [m])
        offsets = [e["offsets"]["0"] for e in callback_commits(m)]
        steps = [b - a for a, b in zip([0, *offsets], offsets, strict=False)]
        assert offsets[-1] == 95, offsets
        assert all(0 < s <= 10 for s in steps), offsets
        assert steps.count(10) >= 8, offsets  # batch ends may add a shorter step
    finally:
        m.close()


def test_auto_commit_off(cluster: GroupCluster) -> None:
    """autoCommit: false and no commitOffsets: nothing is committed, so the next member of the
    group reads everything again."""
    topic, group, keys = fresh(cluster)
    m = kafkajs(cluster, topic, group, "--commit", "none")
    again = None
    try:
        wait_processed([m], keys, 60)
        assert m.stop() == 0
        assert not m.of("commit")
        assert set(committed(cluster.bootstrap, topic, group).values()) == {-1}
        again = kafkajs(cluster, topic, group, "--commit", "none")
        wait_processed([again], keys, 60)
        assert len(again.records()) == COUNT
    finally:
        for x in (m, again):
            if x:
                x.close()


def test_pause_resume(cluster: GroupCluster) -> None:
    """The docs' pattern: on partition 1's first message, pause() (the callback eachMessage
    gets), throw, and resume it with a timer (the docs' ``setTimeout(resume, retryAfter)``),
    here 1 s. Nothing of partition 1 is processed while paused, and its first message comes
    again after the resume."""
    topic, group, keys = fresh(cluster)
    m = kafkajs(cluster, topic, group, "--pause", "1", "--resume-after-ms", "1000")
    try:
        wait_processed([m], keys, 60)
        ends = end_offsets(cluster.bootstrap, topic)
        paused, resumed = check_paused(m, 1, ends[1])
        # Node arms a timer from the event loop's cached clock, read before this callback ran,
        # so by Date.now() it can fire a few ms short of its delay (999 ms was seen).
        assert resumed["t"] - paused["t"] >= 1000 - 10, (paused, resumed)
    finally:
        m.close()


def test_partitions_consumed_concurrently(cluster: GroupCluster) -> None:
    """partitionsConsumedConcurrently: 3 with 30 ms per message: three partitions are in
    eachMessage at once, never more, and each partition stays in order."""
    topic, group, keys = fresh(cluster)
    m = kafkajs(cluster, topic, group, "--concurrency", "3", "--process-ms", "30")
    try:
        wait_processed([m], keys, 60)
        assert m.stop() == 0
        closed = m.wait_event("closed", timeout=1)
        assert closed["max_in_flight"] == 3, closed
        assert_read_once(m, end_offsets(cluster.bootstrap, topic))
    finally:
        m.close()
