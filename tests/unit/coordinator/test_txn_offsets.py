"""Transactional offsets (TxnOffsetCommit, Kafka's pendingTransactionalOffsets): pending per
producer until the transaction's marker, visible on COMMIT unless a later commit replaced them,
dropped on ABORT; OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile; deletions,
group deletion and expiry account for them; a load of the partition (transactional batches and
markers included) rebuilds the same state; TxnOffsetCommit's group checks."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import anyio

from dataplane.coordinator.offsets import CommitPartition
from dataplane.coordinator.records import OffsetCommitValue, offset_commit_record
from dataplane.coordinator.runtime import CoordinatorRuntime, TransactionalShard, _Loaded
from dataplane.coordinator.shard import GroupShard
from dataplane.log.batch import ATTR_TRANSACTIONAL, header_at
from dataplane.log.control import build_marker_batch
from dataplane.log.records import Record, build_batch
from dataplane.replica.meta_lease import MetaLease

from .harness import E, Harness
from .support import local_shard

DAY = 24 * 3600 * 1000
PID = 7


def txn_commit(
    h: Harness, offsets: dict[tuple[str, int], int], producer_id: int = PID, group: str = "g"
) -> None:
    """A TxnOffsetCommit as `GroupCoordinator.txn_offset_commit` makes it (appended)."""
    assert h.shard.validate_txn_offset_commit(group, "", None, -1) == E.none
    errors, records = h.shard.offsets.records(
        group, [CommitPartition(t, p, o, -1, "") for (t, p), o in offsets.items()]
    )
    assert set(errors.values()) == {E.none}
    h.services.log += records
    h.shard.offsets.add_transactional(producer_id, records)


def fetched(h: Harness, partitions: list[int], *, stable: bool = True) -> dict:
    """Partition of topic "t" -> offset, or the error."""
    error, topics = h.shard.fetch_offsets("g", [("t", partitions)], require_stable=stable)
    assert error == E.none
    return {
        p.partition: p.error if p.error != E.none else (p.offset.offset if p.offset else None)
        for p in topics[0].partitions
    }


def test_offsets_are_pending_until_the_transaction_commits() -> None:
    h = Harness()
    h.commit("", -1, {("t", 0): 3})
    txn_commit(h, {("t", 0): 5, ("t", 1): 2})
    assert fetched(h, [0, 1, 2], stable=False) == {0: 3, 1: None, 2: None}
    unstable = E.unstable_offset_commit
    assert fetched(h, [0, 1, 2]) == {0: unstable, 1: unstable, 2: None}
    assert h.shard.offsets.end_transaction(PID, commit=True) == 2
    assert fetched(h, [0, 1, 2]) == {0: 5, 1: 2, 2: None}
    assert h.shard.offsets.transactional == {}
    assert h.shard.offsets.open_transactions == {}


def test_an_aborted_transaction_leaves_the_committed_offsets() -> None:
    h = Harness()
    h.commit("", -1, {("t", 0): 3})
    txn_commit(h, {("t", 0): 5, ("t", 1): 2})
    assert h.shard.offsets.end_transaction(PID, commit=False) == 0
    assert fetched(h, [0, 1]) == {0: 3, 1: None}
    assert h.shard.offsets.end_transaction(PID, commit=True) == 0  # a second marker: nothing


def test_transactions_of_producers_end_independently() -> None:
    h = Harness()
    txn_commit(h, {("t", 0): 5}, producer_id=1)
    txn_commit(h, {("t", 1): 6}, producer_id=2)
    h.shard.offsets.end_transaction(1, commit=True)
    assert fetched(h, [0, 1]) == {0: 5, 1: E.unstable_offset_commit}
    h.shard.offsets.end_transaction(2, commit=False)
    assert fetched(h, [0, 1]) == {0: 5, 1: None}


def test_the_most_recent_commit_wins() -> None:
    # a regular commit written after the transactional one (before the marker) stays
    h = Harness()
    txn_commit(h, {("t", 0): 5})
    h.commit("", -1, {("t", 0): 9})
    h.shard.offsets.end_transaction(PID, commit=True)
    assert fetched(h, [0]) == {0: 9}
    # a transactional commit written after the regular one replaces it
    h.commit("", -1, {("t", 1): 9})
    txn_commit(h, {("t", 1): 4})
    h.shard.offsets.end_transaction(PID, commit=True)
    assert fetched(h, [1]) == {1: 4}


def test_a_regular_commit_in_flight_older_than_a_committed_transaction_loses() -> None:
    h = Harness()
    h.services.hold_replication = True
    error, _, stored = h.start_commit("", -1, {("t", 0): 1})
    assert error == E.none
    assert stored is not None
    h.services.hold_replication = False
    txn_commit(h, {("t", 0): 5})
    h.shard.offsets.end_transaction(PID, commit=True)
    h.services.replicate()
    h.services.run_pending()
    assert stored.value == E.none
    assert fetched(h, [0]) == {0: 5}


def test_fetch_of_every_partition_marks_the_unstable_ones() -> None:
    h = Harness()
    h.commit("", -1, {("t", 0): 3, ("t", 1): 4})
    txn_commit(h, {("t", 0): 5})
    _, topics = h.shard.fetch_offsets("g", None, require_stable=True)
    got = {
        p.partition: (p.offset.offset if p.offset else None, p.error) for p in topics[0].partitions
    }
    assert got == {0: (None, E.unstable_offset_commit), 1: (4, E.none)}
    _, topics = h.shard.fetch_offsets("g", None)
    assert {p.partition: p.offset.offset for p in topics[0].partitions if p.offset} == {0: 3, 1: 4}


def test_offset_delete_and_group_deletion_cover_pending_transactional_offsets() -> None:
    h = Harness()
    txn_commit(h, {("t", 0): 5, ("t", 1): 6})
    error, errors, records = h.shard.delete_offsets("g", [("t", [0])])
    assert error == E.none
    assert errors == {("t", 0): E.none}
    assert records == [offset_commit_record("g", "t", 0, None)]
    h.apply(records)  # the tombstone cancels the pending offset
    assert fetched(h, [0, 1]) == {0: None, 1: E.unstable_offset_commit}
    h.shard.offsets.end_transaction(PID, commit=True)
    assert fetched(h, [0, 1]) == {0: None, 1: 6}
    txn_commit(h, {("t", 2): 7})
    _, tombstones = h.shard.delete_groups(["g"])
    assert offset_commit_record("g", "t", 2, None) in tombstones


def test_expiry_keeps_offsets_and_groups_with_a_transaction_pending() -> None:
    h = Harness(offsets_retention_ms=DAY)
    h.commit("", -1, {("t", 0): 5}, group="s")
    txn_commit(h, {("t", 0): 6}, group="s")
    h.services.clock.advance(2 * DAY)
    assert h.shard.expire_offsets() == ({}, [])
    h.shard.offsets.end_transaction(PID, commit=False)
    by_group, deleted = h.shard.expire_offsets()
    assert by_group["s"][0] == offset_commit_record("s", "t", 0, None)
    assert deleted == ["s"]


def test_group_checks_of_a_transactional_commit() -> None:
    h = Harness()
    shard = h.shard
    # no group: created (simple group) for generation -1, else ILLEGAL_GENERATION
    assert shard.validate_txn_offset_commit("new", "", None, 3) == E.illegal_generation
    assert "new" not in shard.groups
    assert shard.validate_txn_offset_commit("new", "", None, -1) == E.none
    assert "new" in shard.groups
    leader, _ = h.stable_group(2)
    generation = h.classic_group().generation
    assert shard.validate_txn_offset_commit("g", leader, None, generation) == E.none
    # v0-v2 (no member id nor generation) while the group has members: accepted
    assert shard.validate_txn_offset_commit("g", "", None, -1) == E.none
    assert shard.validate_txn_offset_commit("g", leader, None, generation + 1) == (
        E.illegal_generation
    )
    assert shard.validate_txn_offset_commit("g", "stranger", None, generation) == (
        E.unknown_member_id
    )


# -- loading: transactional batches and markers ------------------------------------------------


def _at(batch: bytes, offset: int) -> bytes:
    """`batch` with base offset `offset` (as the log assigns it)."""
    out = bytearray(batch)
    struct.pack_into(">q", out, 0, offset)
    return bytes(out)


class _Log:
    """The slice of a PartitionLog the runtime's loading reads."""

    def __init__(self, batches: list[bytes]) -> None:
        self.batches = []
        offset = 0
        for batch in batches:
            placed = _at(batch, offset)
            self.batches.append(placed)
            offset = header_at(placed, 0).last_offset + 1
        self.log_start_offset = 0
        self.log_end_offset = offset

    def read(self, offset: int, max_bytes: int, end: int, min_one: bool) -> bytes:
        return b"".join(b for b in self.batches if header_at(b, 0).last_offset >= offset)


def _commit_batch(offsets: dict[tuple[str, int], int], producer_id: int = -1) -> bytes:
    records = [offset_commit_record("g", t, p, _value(o)) for (t, p), o in offsets.items()]
    if producer_id < 0:
        return build_batch(records, 1)
    return build_batch(
        records,
        1,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        attributes=ATTR_TRANSACTIONAL,
    )


def _value(offset: int) -> OffsetCommitValue:
    return OffsetCommitValue(offset, -1, "", 1, -1)


def _load(batches: list[bytes], shard: GroupShard | _PlainShard) -> None:
    replicas = SimpleNamespace(
        leadership_listeners=[], partitions={}, meta_lease=MetaLease(9000, 2000)
    )
    topic = SimpleNamespace(name="__consumer_offsets")
    runtime = CoordinatorRuntime(replicas, topic, lambda index: shard)  # type: ignore[arg-type]
    loaded = _Loaded(shard, 0)
    runtime._shards[0] = loaded
    partition = SimpleNamespace(log=_Log(batches), index=0, topic=topic.name)

    async def main() -> None:
        await runtime._load(partition, loaded)  # type: ignore[arg-type]

    anyio.run(main)
    assert loaded.ready.is_set()


def test_loading_replays_transactional_batches_and_markers() -> None:
    batches = [
        _commit_batch({("t", 0): 1}),  # 0
        _commit_batch({("t", 0): 5, ("t", 1): 6}, producer_id=7),  # 1-2
        _commit_batch({("t", 2): 7}, producer_id=8),  # 3
        _commit_batch({("t", 1): 9}),  # 4: a later regular commit
        build_marker_batch(7, 0, True, 0, 1),  # 5
        build_marker_batch(8, 0, False, 0, 1),  # 6
        _commit_batch({("t", 3): 9}, producer_id=9),  # 7: still open
    ]
    shard, _ = local_shard()
    _load(batches, shard)
    assert shard.loaded
    _, topics = shard.fetch_offsets("g", [("t", [0, 1, 2, 3])], require_stable=True)
    got = {
        p.partition: p.error if p.error else (p.offset and p.offset.offset)
        for p in topics[0].partitions
    }
    assert got == {0: 5, 1: 9, 2: None, 3: E.unstable_offset_commit}
    assert set(shard.offsets.transactional) == {9}
    # the live path from the same state: the marker of producer 9 arrives
    shard.offsets.end_transaction(9, commit=True)
    _, topics = shard.fetch_offsets("g", [("t", [3])], require_stable=True)
    assert topics[0].partitions[0].offset.offset == 9  # type: ignore[union-attr]


class _PlainShard:
    """A shard that takes no part in transactions (the runtime's other kinds)."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def replay(self, record: Record) -> None:
        self.records.append(record)

    def on_loaded(self) -> None:
        pass

    def on_unloaded(self) -> None:
        pass


def test_other_shards_replay_transactional_records_and_skip_markers() -> None:
    shard = _PlainShard()
    _load(
        [_commit_batch({("t", 0): 5}, producer_id=7), build_marker_batch(7, 0, True, 0, 1)], shard
    )
    assert [r.offset for r in shard.records] == [0]


def test_group_shard_is_a_transactional_shard() -> None:
    shard, _ = local_shard()
    assert isinstance(shard, GroupShard)
    assert isinstance(shard, TransactionalShard)
    assert not isinstance(_PlainShard(), TransactionalShard)
