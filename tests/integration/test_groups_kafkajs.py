"""The consumer examples of KafkaJS's documentation ("Consuming Messages"), each as a mode of
the KafkaJS driver's ``group-consume`` with a checkable outcome: eachMessage, eachBatch (the
resolveOffset / heartbeat / commitOffsetsIfNecessary loop), autoCommitInterval,
autoCommitThreshold, autoCommit off, commitOffsets, seek, pause/resume (the ``pause()``
callback, the message delivered again after the resume) and partitionsConsumedConcurrently.

One broker is enough here; test_groups_clients.py runs KafkaJS in multi-member groups on a
3-broker cluster.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator

import pytest

from tests.integration.clients.drivers import ensure_setup
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
    wait_until,
)

PARTITIONS = 6
COUNT = 120


@pytest.fixture(scope="module", autouse=True)
def _clients_installed() -> None:
    ensure_setup()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with group_cluster(tmp_path_factory.mktemp("groups-kafkajs"), brokers=1, metas=1) as c:
        yield c


def new_topic(cluster: object, partitions: int = PARTITIONS, count: int = COUNT) -> tuple:
    tag = uuid.uuid4().hex[:6]
    name = f"kjs-{tag}"
    create_topic(cluster.bootstrap, name, partitions, 1)
    keys = set(produce(cluster.bootstrap, name, [f"k{i}" for i in range(count)]))
    return name, f"g-kjs-{tag}", keys


def kafkajs(cluster: object, topic: str, group: str, *opts: str) -> Member:
    return Member("kafkajs", cluster.bootstrap, topic, group, *FAST, *opts, name="kafkajs")


def finish(cluster: object, m: Member, keys: set[str]) -> None:
    try:
        wait_until(lambda: keys <= processed_keys([m]), 60, "every record processed")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{m.describe()}") from None


def by_partition(records: list[dict]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r in records:
        out.setdefault(r["partition"], []).append(r["offset"])
    return out


def in_order_once(m: Member, ends: dict[int, int]) -> None:
    got = by_partition(m.records())
    for p, end in ends.items():
        assert got.get(p, []) == list(range(end)), (p, got.get(p))


def callback_commits(m: Member, partition: int | None = None) -> list[dict]:
    return [
        e
        for e in m.of("commit")
        if e["via"] == "callback" and (partition is None or str(partition) in e["offsets"])
    ]


@pytest.mark.parametrize("each", ["message", "batch"])
def test_each_message_and_each_batch(cluster: object, each: str) -> None:
    """eachMessage, and the docs' eachBatch loop (eachBatchAutoResolve off, resolveOffset and
    heartbeat per message, commitOffsetsIfNecessary): every record once, in order per
    partition, and the commits reach the log end."""
    topic, group, keys = new_topic(cluster)
    m = kafkajs(cluster, topic, group, "--each", each)
    try:
        finish(cluster, m, keys)
        ends = end_offsets(cluster.bootstrap, topic)
        wait_committed(cluster.bootstrap, topic, group, ends, 30, [m])
        in_order_once(m, ends)
        if each == "batch":
            batches = m.of("batch")
            assert batches and sum(b["size"] for b in batches) == COUNT, batches
        assert m.stop() == 0
        assert committed(cluster.bootstrap, topic, group) == ends
    finally:
        m.close()


def test_auto_commit_interval(cluster: object) -> None:
    """autoCommitInterval 300 ms (no threshold), 20 ms per message on one partition: offsets
    are committed while the batch is processed, about every 300 ms, not per message."""
    topic, group, keys = new_topic(cluster, partitions=1, count=100)
    m = kafkajs(cluster, topic, group, "--auto-commit-interval", "0.3", "--process-ms", "20")
    try:
        finish(cluster, m, keys)
        wait_committed(cluster.bootstrap, topic, group, {0: 100}, 30, [m])
        commits = callback_commits(m)
        # 100 messages x 20 ms = 2 s: a handful of commits, each >= ~300 ms after the previous
        # one but the last (KafkaJS also commits when a batch ends).
        assert 3 <= len(commits) <= 20, commits
        gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(commits[:-1])]
        assert all(g >= 250 for g in gaps), gaps
        offsets = [e["offsets"]["0"] for e in commits]
        assert offsets == sorted(offsets) and offsets[-1] == 100, offsets
    finally:
        m.close()


def test_auto_commit_threshold(cluster: object) -> None:
    """autoCommitThreshold 10 (no interval): a commit after every 10 resolved messages."""
    topic, group, keys = new_topic(cluster, partitions=1, count=95)
    m = kafkajs(cluster, topic, group, "--auto-commit-threshold", "10")
    try:
        finish(cluster, m, keys)
        wait_committed(cluster.bootstrap, topic, group, {0: 95}, 30, [m])
        offsets = [e["offsets"]["0"] for e in callback_commits(m)]
        steps = [b - a for a, b in zip([0, *offsets], offsets, strict=False)]
        assert offsets[-1] == 95 and all(0 < s <= 10 for s in steps), offsets
        assert steps.count(10) >= 8, offsets  # batch ends may add a shorter step
    finally:
        m.close()


def test_auto_commit_off(cluster: object) -> None:
    """autoCommit: false and no commitOffsets: nothing is committed, so the next member of the
    group reads everything again."""
    topic, group, keys = new_topic(cluster)
    m = kafkajs(cluster, topic, group, "--commit", "none")
    again = None
    try:
        finish(cluster, m, keys)
        assert m.stop() == 0
        assert not m.of("commit")
        assert set(committed(cluster.bootstrap, topic, group).values()) == {-1}
        again = kafkajs(cluster, topic, group, "--commit", "none")
        finish(cluster, again, keys)
        assert len(again.records()) == COUNT
    finally:
        for x in (m, again):
            if x:
                x.close()


def test_commit_offsets(cluster: object) -> None:
    """autoCommit: false and consumer.commitOffsets([{topic, partition, offset}]) after every
    7th message: the group's offsets are exactly those."""
    topic, group, keys = new_topic(cluster)
    m = kafkajs(cluster, topic, group, "--commit", "offsets", "--commit-every", "7")
    try:
        finish(cluster, m, keys)
        assert m.stop() == 0
        manual = [e for e in m.of("commit") if e["via"] == "offsets"]
        assert len(manual) == COUNT // 7 and all(e["error"] is None for e in manual), manual
        want = {p: -1 for p in range(PARTITIONS)}
        for e in manual:
            for p, o in e["offsets"].items():
                want[int(p)] = max(want[int(p)], o)
        assert committed(cluster.bootstrap, topic, group) == want
    finally:
        m.close()


def test_seek(cluster: object) -> None:
    """consumer.seek({topic, partition: 2, offset: 5}) at partition 2's first message: it is
    read from offset 5 on, the other partitions from the beginning."""
    topic, group, _ = new_topic(cluster)
    ends = end_offsets(cluster.bootstrap, topic)
    m = kafkajs(cluster, topic, group, "--seek", "2:5")
    try:
        want = sum(ends.values()) - 5
        wait_until(lambda: len(m.records()) >= want, 60, f"{want} records")
        seek = m.wait_event("seek", timeout=1)
        assert (seek["partition"], seek["offset"]) == (2, 5), seek
        got = by_partition(m.records())
        assert got[2] == list(range(5, ends[2])), got[2]
        for p in set(range(PARTITIONS)) - {2}:
            assert got.get(p, []) == list(range(ends[p])), (p, got.get(p))
    finally:
        m.close()


def test_pause_resume(cluster: object) -> None:
    """The docs' pattern: on partition 1's first message, pause() (the callback eachMessage
    gets), throw, and resume it with a timer (the docs' ``setTimeout(resume, retryAfter)``),
    here 1 s. Nothing of partition 1 is processed while paused, and its first message comes
    again after the resume."""
    topic, group, keys = new_topic(cluster)
    m = kafkajs(cluster, topic, group, "--pause", "1", "--resume-after-ms", "1000")
    try:
        finish(cluster, m, keys)
        evs = m.events
        kinds = [e["event"] for e in evs]
        paused, resumed = kinds.index("paused"), kinds.index("resumed")
        assert evs[paused]["partitions"] == [1] == evs[resumed]["partitions"]
        assert evs[resumed]["t"] - evs[paused]["t"] >= 1000
        between = [e for e in evs[paused:resumed] if e["event"] == "record"]
        assert all(e["partition"] != 1 for e in between), between
        assert not [e for e in evs[:paused] if e["event"] == "record" and e["partition"] == 1]
        ends = end_offsets(cluster.bootstrap, topic)
        assert by_partition(m.records())[1] == list(range(ends[1]))
    finally:
        m.close()


def test_partitions_consumed_concurrently(cluster: object) -> None:
    """partitionsConsumedConcurrently: 3 with 30 ms per message: three partitions are in
    eachMessage at once, never more, and each partition stays in order."""
    topic, group, keys = new_topic(cluster)
    m = kafkajs(cluster, topic, group, "--concurrency", "3", "--process-ms", "30")
    try:
        finish(cluster, m, keys)
        assert m.stop() == 0
        closed = m.wait_event("closed", timeout=1)
        assert closed["max_in_flight"] == 3, closed
        in_order_once(m, end_offsets(cluster.bootstrap, topic))
    finally:
        m.close()
