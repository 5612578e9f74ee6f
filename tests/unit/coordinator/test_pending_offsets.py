"""Offset commits are pending until their records are replicated (Kafka's pendingOffsetCommits):
OffsetFetch answers the last replicated offsets meanwhile, UNSTABLE_OFFSET_COMMIT with
require_stable; a failed write drops them; deletions cancel them. Also OffsetCommit v1's commit
timestamp."""

from __future__ import annotations

from dataplane.coordinator.base import Reply
from dataplane.coordinator.records import decode_record, offset_commit_record
from dataplane.protocol.errors import ErrorCode

from .harness import E, Harness

DAY = 24 * 3600 * 1000


def fetched(h: Harness, partitions: list[int], *, require_stable: bool = False) -> dict:
    """Partition of topic "t" -> (offset or None, error)."""
    error, topics = h.shard.fetch_offsets("g", [("t", partitions)], require_stable=require_stable)
    assert error == E.none
    return {
        p.partition: (p.offset.offset if p.offset else None, p.error) for p in topics[0].partitions
    }


def in_flight(h: Harness, offsets: dict[tuple[str, int], int]) -> Reply[ErrorCode]:
    """A commit whose records are appended but not replicated yet: its reply."""
    h.services.hold_replication = True
    error, errors, stored = h.start_commit("", -1, offsets)
    assert error == E.none
    assert set(errors.values()) == {E.none}
    assert stored is not None
    h.services.run_pending()
    assert not stored.done
    return stored


def test_a_commit_is_visible_only_once_replicated() -> None:
    h = Harness()
    h.commit("", -1, {("t", 0): 3})
    log_size = len(h.services.log)
    stored = in_flight(h, {("t", 0): 5, ("t", 1): 1})
    assert len(h.services.log) == log_size + 2  # appended...
    assert fetched(h, [0, 1]) == {0: (3, E.none), 1: (None, E.none)}  # ...but not visible
    assert h.committed() == {("t", 0): 3}
    h.services.replicate()
    h.services.run_pending()
    assert stored.value == E.none
    assert fetched(h, [0, 1]) == {0: (5, E.none), 1: (1, E.none)}
    assert h.shard.offsets.pending == {}
    assert h.replayed().offsets.committed == h.shard.offsets.committed


def test_failed_replication_leaves_the_previous_offset() -> None:
    h = Harness()
    h.commit("", -1, {("t", 0): 3})
    stored = in_flight(h, {("t", 0): 5, ("t", 1): 1})
    h.services.replicate(E.request_timed_out)
    h.services.run_pending()
    assert stored.value == E.request_timed_out
    assert fetched(h, [0, 1]) == {0: (3, E.none), 1: (None, E.none)}
    assert h.shard.offsets.pending == {}
    # a write refused before it reached the log leaves nothing either
    h.services.hold_replication = False
    h.services.fail_with = E.not_enough_replicas
    log_size = len(h.services.log)
    assert h.commit("", -1, {("t", 0): 9}) == (E.not_enough_replicas, {("t", 0): E.none})
    assert len(h.services.log) == log_size
    assert h.shard.offsets.pending == {}
    assert h.committed() == {("t", 0): 3}


def test_require_stable_answers_unstable_offset_commit_while_a_commit_is_in_flight() -> None:
    h = Harness()
    h.commit("", -1, {("t", 0): 3, ("t", 1): 4})
    stored = in_flight(h, {("t", 0): 5})
    assert fetched(h, [0, 1], require_stable=True) == {
        0: (None, E.unstable_offset_commit),
        1: (4, E.none),
    }
    assert fetched(h, [0, 1]) == {0: (3, E.none), 1: (4, E.none)}
    # every committed partition (null topics): Kafka checks no pending commits there
    _, every = h.shard.fetch_offsets("g", None, require_stable=True)
    assert [p.error for t in every for p in t.partitions] == [E.none, E.none]
    h.services.replicate()
    h.services.run_pending()
    assert stored.value == E.none
    assert fetched(h, [0, 1], require_stable=True) == {0: (5, E.none), 1: (4, E.none)}


def test_commits_in_flight_on_one_partition_become_visible_in_log_order() -> None:
    h = Harness()
    first = in_flight(h, {("t", 0): 5})
    second = in_flight(h, {("t", 0): 6})
    h.services.replicate(count=1)  # the high watermark passes the first only
    h.services.run_pending()
    assert first.value == E.none
    assert not second.done
    assert fetched(h, [0]) == {0: (5, E.none)}
    assert fetched(h, [0], require_stable=True) == {0: (None, E.unstable_offset_commit)}
    h.services.replicate()
    h.services.run_pending()
    assert fetched(h, [0], require_stable=True) == {0: (6, E.none)}


def test_deleting_offsets_cancels_the_commits_in_flight() -> None:
    h = Harness()
    h.commit("", -1, {("t", 0): 3})
    stored = in_flight(h, {("t", 0): 5, ("t", 1): 1})
    # OffsetDelete of a partition with no replicated offset yet still deletes the commit
    error, errors, records = h.shard.delete_offsets("g", [("t", [1])])
    assert (error, errors) == (E.none, {("t", 1): E.none})
    assert records == [offset_commit_record("g", "t", 1, None)]
    h.services.append("g", records, True)
    # DeleteGroups: the tombstones cover committed and in-flight offsets, each once
    errors_by_group, tombstones = h.shard.delete_groups(["g"])
    assert errors_by_group == {"g": E.none}
    decoded = [decode_record(k, v) for k, v in tombstones]
    assert [(r.type_id, r.key.partition if r.type_id == 1 else None) for r in decoded if r] == [
        (1, 0),
        (2, None),
    ]
    h.services.replicate()
    h.services.run_pending()
    assert stored.value == E.none
    assert fetched(h, [0, 1]) == {0: (5, E.none), 1: (None, E.none)}  # t-1 stays deleted
    assert h.replayed().offsets.committed == h.shard.offsets.committed


def test_a_group_with_a_commit_in_flight_is_not_expired() -> None:
    h = Harness(offsets_retention_ms=DAY)
    h.commit("", -1, {("t", 0): 3})
    h.services.clock.advance(2 * DAY)
    in_flight(h, {("t", 1): 1})
    by_group, deleted = h.shard.expire_offsets()
    assert by_group == {"g": [offset_commit_record("g", "t", 0, None)]}
    assert deleted == []


def test_offset_commit_v1_timestamp_is_the_commit_time() -> None:
    h = Harness(offsets_retention_ms=DAY)
    h.services.clock.ms = 10 * DAY
    h.commit("", -1, {("t", 0): 3}, version=1, commit_timestamp=8 * DAY)
    h.commit("", -1, {("t", 1): 4}, version=1)  # -1: the broker's time
    _, topics = h.shard.fetch_offsets("g", [("t", [0, 1])])
    assert [p.offset.commit_timestamp for p in topics[0].partitions if p.offset] == [
        8 * DAY,
        10 * DAY,
    ]
    # a simple group's retention counts from the commit time
    by_group, _ = h.shard.expire_offsets()
    assert by_group == {"g": [offset_commit_record("g", "t", 0, None)]}
    assert h.replayed().offsets.committed == h.shard.offsets.committed
