"""Partition: the high watermark over the maximal ISR, ISR expansion and shrinking, every outcome
of an acks=all wait, and a follower's truncation, on real logs with the ISR changes recorded
instead of sent to the meta service."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import cast

import anyio
import pytest

from dataplane.log import LogConfig, PartitionLog, StateStore
from dataplane.metadata_cache import PartitionInfo
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.isr import IsrManager
from dataplane.replica.partition import Partition, now_ms
from dataplane.replica.producer_state import ProducerStateManager
from meta.client import MetaClient
from proto import meta_pb2
from tests.unit.replica.producers import NEVER, idem, plain

ME, B, C = 1, 2, 3  # this broker and two others
LAG_MS = 10_000  # replica.lag.time.max.ms


class Replica:
    """A Partition on this broker whose AlterPartition requests are recorded, and applied to
    `pending_isr` as the IsrManager does."""

    def __init__(self, directory: Path, store: StateStore, node_id: int = ME) -> None:
        plog = PartitionLog.open(directory, LogConfig(), store, directory.name)
        producers = ProducerStateManager.load(plog, NEVER)
        self.asked: list[tuple[int, ...]] = []
        self.partition = Partition("t", b"\x01" * 16, 0, plog, producers, node_id, self._submit)
        self._epochs = (0, 0)  # (leader epoch, partition epoch) of the last update

    def _submit(self, partition: Partition, isr: tuple[int, ...]) -> None:
        self.asked.append(isr)
        partition.pending_isr = isr

    def update(
        self,
        *,
        leader: int = ME,
        isr: tuple[int, ...] = (ME, B, C),
        replicas: tuple[int, ...] = (ME, B, C),
        new_leader_epoch: bool = False,
    ) -> None:
        """Metadata from the meta service: a new partition epoch, and leader epoch if asked."""
        leader_epoch, partition_epoch = self._epochs
        self._epochs = (leader_epoch + new_leader_epoch, partition_epoch + 1)
        self.partition.update(PartitionInfo(0, replicas, isr, leader, *self._epochs))

    def append(self, count: int = 1) -> int:
        """Append as the leader; the offset after the batch (what acks=all waits for)."""
        return self.partition.append(bytearray(plain(count)), now_ms()).last_offset + 1


@pytest.fixture
def replica_at(tmp_path: Path) -> Iterator[Callable[..., Replica]]:
    """Replicas in their own directories over one state store, closed at the end."""
    store = StateStore(tmp_path / "state")
    made: list[Replica] = []

    def make(name: str = "leader", node_id: int = ME) -> Replica:
        made.append(Replica(tmp_path / f"{name}-0", store, node_id))
        return made[-1]

    yield make
    for r in made:
        r.partition.close()
    store.close()


@pytest.fixture
def leader(replica_at: Callable[..., Replica]) -> Replica:
    r = replica_at()
    r.update(new_leader_epoch=True)
    return r


# -- high watermark ------------------------------------------------------------------------------


def test_high_watermark_is_the_smallest_end_among_the_isr(leader: Replica) -> None:
    p = leader.partition
    end = leader.append(3)
    assert (p.log.log_end_offset, p.high_watermark) == (3, 0)
    p.record_follower_fetch(B, end, now_ms())
    assert p.high_watermark == 0  # C has nothing yet
    p.record_follower_fetch(C, 2, now_ms())
    assert p.high_watermark == 2
    p.record_follower_fetch(C, end, now_ms())
    assert p.high_watermark == end


def test_high_watermark_is_the_log_end_with_no_follower_in_the_isr(leader: Replica) -> None:
    leader.update(isr=(ME,))
    end = leader.append(2)
    assert leader.partition.high_watermark == end


def test_high_watermark_waits_for_a_member_being_added(leader: Replica) -> None:
    """KIP-497: while an expansion is in flight, the new member already counts, so the high
    watermark never passes what it has should the expansion commit."""
    leader.update(isr=(ME, B))
    p = leader.partition
    p.record_follower_fetch(B, leader.append(1), now_ms())
    p.record_follower_fetch(C, 1, now_ms())  # caught up: asks to join
    assert leader.asked == [(ME, B, C)]
    assert p.maximal_isr == (ME, B, C)
    end = leader.append(2)
    p.record_follower_fetch(B, end, now_ms())
    assert p.high_watermark == 1  # C, joining, has only up to 1
    p.record_follower_fetch(C, end, now_ms())
    assert p.high_watermark == end


def test_high_watermark_waits_for_a_member_being_removed(leader: Replica) -> None:
    """A shrink is not effective until committed: the leaving member still counts."""
    p = leader.partition
    leader.append(1)
    p.record_follower_fetch(B, 1, now_ms())
    p.maybe_shrink_isr(now_ms() + LAG_MS + 1, LAG_MS)  # nobody caught up lately
    assert leader.asked == [(ME,)]
    assert p.maximal_isr == (ME, B, C)
    assert p.high_watermark == 0  # C has nothing


def test_committed_isr_change_ends_the_pending_one(leader: Replica) -> None:
    p = leader.partition
    leader.append(1)
    p.maybe_shrink_isr(now_ms() + LAG_MS + 1, LAG_MS)
    assert p.pending_isr == (ME,)
    leader.update(isr=(ME,))  # the meta service committed it
    assert p.pending_isr is None
    assert p.high_watermark == 1  # only this broker counts now


def test_a_follower_takes_the_leaders_high_watermark_up_to_its_own_end(
    replica_at: Callable[..., Replica],
) -> None:
    follower = replica_at("follower")
    follower.update(leader=B, new_leader_epoch=True)
    p = follower.partition
    p.append_as_follower(plain(3))
    p.follow_high_watermark(2)
    assert p.high_watermark == 2
    p.follow_high_watermark(10)  # the leader has more than we do
    assert p.high_watermark == 3


# -- ISR expansion -------------------------------------------------------------------------------


def test_a_follower_rejoins_the_isr_once_it_reaches_the_high_watermark(leader: Replica) -> None:
    leader.update(isr=(ME, B))
    p = leader.partition
    end = leader.append(3)
    p.record_follower_fetch(B, end, now_ms())
    assert p.high_watermark == end
    p.record_follower_fetch(C, end - 1, now_ms())
    assert leader.asked == []  # behind the high watermark
    p.record_follower_fetch(C, end, now_ms())
    assert leader.asked == [(ME, B, C)]


def test_only_one_isr_change_is_in_flight(leader: Replica) -> None:
    leader.update(isr=(ME,), replicas=(ME, B, C))
    p = leader.partition
    p.record_follower_fetch(B, 0, now_ms())
    p.record_follower_fetch(C, 0, now_ms())  # also caught up, but B's expansion is pending
    assert leader.asked == [(ME, B)]
    leader.update(isr=(ME, B), replicas=(ME, B, C))
    p.record_follower_fetch(C, 0, now_ms())
    assert leader.asked == [(ME, B), (ME, B, C)]


def test_a_follower_rejoins_only_with_what_this_leader_epoch_began_with(
    replica_at: Callable[..., Replica],
) -> None:
    """It must also have the log end at which this leader's epoch started: the high watermark
    can lag behind it right after a leader change."""
    r = replica_at()
    r.update(leader=B, new_leader_epoch=True)
    r.partition.append_as_follower(plain(4))  # HW stays 0: the old leader told us nothing
    r.update(isr=(ME, B), new_leader_epoch=True)  # we lead from offset 4
    p = r.partition
    assert p.high_watermark == 0
    p.record_follower_fetch(C, 2, now_ms())
    assert r.asked == []
    p.record_follower_fetch(C, 4, now_ms())
    assert r.asked == [(ME, B, C)]


# -- a diverged follower (KIP-320) ---------------------------------------------------------------


def two_epochs(leader: Replica) -> int:
    """Epoch 1 writes offsets 0-2, epoch 2 (this leader's, now) 3-4; returns the log end."""
    leader.append(3)
    leader.update(isr=leader.partition.isr, new_leader_epoch=True)
    return leader.append(2)


def test_a_diverged_follower_moves_neither_the_high_watermark_nor_the_isr(
    leader: Replica,
) -> None:
    """Kafka's fetchRecords updates a follower's state only for a fetch that did not diverge:
    a follower whose epoch-1 tail runs past where epoch 1 ended here (it led epoch 1 for a
    while, say) does not hold offsets 3-4 whatever its fetch offset says."""
    leader.update(isr=(ME, B))
    end = two_epochs(leader)
    p = leader.partition
    p.record_follower_fetch(B, end, now_ms(), last_fetched_epoch=2)
    assert p.high_watermark == end
    leader.update(isr=(ME, B, C))  # C in the ISR: the high watermark waits for it
    hw = p.high_watermark
    leader.append(1)
    p.record_follower_fetch(B, end + 1, now_ms(), last_fetched_epoch=2)
    diverged = p.record_follower_fetch(C, end + 1, now_ms(), last_fetched_epoch=1)
    assert diverged == (1, 3) == p.divergence(end + 1, 1)  # truncate to 3, where epoch 1 ended
    assert p.high_watermark == hw  # not end + 1
    assert p.followers[C].log_end_offset == -1
    assert p.record_follower_fetch(C, 3, now_ms(), last_fetched_epoch=1) is None  # truncated
    p.record_follower_fetch(C, end + 1, now_ms(), last_fetched_epoch=2)
    assert p.high_watermark == end + 1


def test_a_diverged_follower_does_not_join_the_isr(leader: Replica) -> None:
    leader.update(isr=(ME, B))
    end = two_epochs(leader)
    p = leader.partition
    p.record_follower_fetch(B, end, now_ms(), last_fetched_epoch=2)
    assert p.record_follower_fetch(C, end, now_ms(), last_fetched_epoch=1) == (1, 3)
    assert p.record_follower_fetch(C, end, now_ms(), last_fetched_epoch=0) == (0, 0)
    assert leader.asked == []
    assert p.record_follower_fetch(C, end, now_ms(), last_fetched_epoch=2) is None
    assert leader.asked == [(ME, B, C)]


# -- broker epochs of an ISR change (KIP-903) ----------------------------------------------------


def test_an_isr_change_carries_the_broker_epochs_of_the_members_fetches(leader: Replica) -> None:
    leader.update(isr=(ME, B))
    p = leader.partition
    end = leader.append(1)
    assert p.isr_broker_epochs((ME, B, C)) == (-1, -1, -1)  # nobody fetched yet
    p.record_follower_fetch(B, end, now_ms(), broker_epoch=7)
    p.record_follower_fetch(C, end, now_ms(), broker_epoch=9)
    assert leader.asked == [(ME, B, C)]
    assert p.isr_broker_epochs((ME, B, C)) == (-1, 7, 9)  # this leader's is the request's
    leader.update(isr=(ME, B, C), new_leader_epoch=True)  # a new epoch forgets the followers
    assert p.isr_broker_epochs((ME, B, C)) == (-1, -1, -1)


class RecordingMeta:
    """The AlterPartition calls an IsrManager makes, answered with nothing (a failed call)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, list[meta_pb2.AlterPartitionItem]]] = []

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, items: Iterable[meta_pb2.AlterPartitionItem]
    ) -> list[meta_pb2.IsrOutcome]:
        self.calls.append((broker_id, broker_epoch, list(items)))
        return []


@pytest.mark.anyio
async def test_the_isr_manager_sends_the_epochs_the_leader_decided_with(
    replica_at: Callable[..., Replica],
) -> None:
    """The epochs are those of the fetches the expansion was decided on: a later fetch of a
    new process of the member (registered again) must not vouch for it."""
    meta = RecordingMeta()
    manager = IsrManager(cast(MetaClient, meta), ME, lambda: 42)
    r = replica_at()
    r.partition._submit_isr = manager.submit
    r.update(isr=(ME, B), new_leader_epoch=True)
    p = r.partition
    end = r.append(1)
    p.record_follower_fetch(B, end, now_ms(), broker_epoch=7)
    p.record_follower_fetch(C, end, now_ms(), broker_epoch=9)  # decides the expansion
    p.record_follower_fetch(C, 0, now_ms(), broker_epoch=10)  # C restarted, empty
    async with anyio.create_task_group() as tg:
        tg.start_soon(manager.run)
        with anyio.fail_after(5):
            while not meta.calls:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    [(broker_id, broker_epoch, [item])] = meta.calls
    assert (broker_id, broker_epoch) == (ME, 42)
    assert (list(item.new_isr), list(item.new_isr_broker_epochs)) == ([ME, B, C], [-1, 7, 9])


# -- ISR shrinking -------------------------------------------------------------------------------


def test_followers_that_stop_catching_up_leave_the_isr(leader: Replica) -> None:
    p = leader.partition
    start = now_ms()
    end = leader.append(2)
    p.record_follower_fetch(B, end, start + LAG_MS)  # B caught up lately; C never since
    assert p.lagging_followers(start + LAG_MS + 1, LAG_MS) == [C]
    p.maybe_shrink_isr(start + LAG_MS + 1, LAG_MS)
    assert leader.asked == [(ME, B)]


def test_a_follower_that_keeps_fetching_but_gets_nowhere_leaves(leader: Replica) -> None:
    p = leader.partition
    start = now_ms()
    for i in range(1, 4):
        end = leader.append(1)
        p.record_follower_fetch(B, 0, start + i * LAG_MS)  # stuck (a disk too slow, say)
        p.record_follower_fetch(C, end, start + i * LAG_MS)
    assert p.lagging_followers(start + 3 * LAG_MS, LAG_MS) == [B]


def test_a_follower_that_had_the_previous_end_counts_as_caught_up_then(leader: Replica) -> None:
    """Kafka's rule: fetching from at least the end the leader had at the previous fetch means
    the follower was caught up at that previous fetch."""
    p = leader.partition
    start = now_ms()
    p.record_follower_fetch(B, leader.append(1) - 1, start + LAG_MS)  # behind by one
    leader.append(1)
    p.record_follower_fetch(B, 1, start + 2 * LAG_MS)  # behind, but has what we had then
    assert p.followers[B].last_caught_up_ms == start + LAG_MS


def test_no_shrink_while_a_change_is_pending_or_as_follower(
    leader: Replica, replica_at: Callable[..., Replica]
) -> None:
    later = now_ms() + LAG_MS + 1
    leader.partition.pending_isr = (ME, B, C)
    leader.partition.maybe_shrink_isr(later, LAG_MS)
    follower = replica_at("follower")
    follower.update(leader=B, new_leader_epoch=True)
    follower.partition.maybe_shrink_isr(later, LAG_MS)
    assert leader.asked == follower.asked == []


def test_a_new_leader_counts_its_isr_as_caught_up(leader: Replica) -> None:
    """Kafka's makeLeader: no follower of the ISR is judged lagging for the time before."""
    assert leader.partition.lagging_followers(now_ms() + LAG_MS - 1_000, LAG_MS) == []


# -- waiting for replication (acks=all) ----------------------------------------------------------


def acks_all_outcome(
    leader: Replica, offset: int, then: Callable[[], None], timeout: float = 5
) -> ErrorCode:
    """wait_for_replication of `offset` in this leader epoch, with `then` run while it waits."""
    p = leader.partition
    result: list[ErrorCode] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def waiter() -> None:
                result.append(await p.wait_for_replication(offset, p.leader_epoch, timeout))

            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            then()

    anyio.run(main)
    return result[0]


def test_replication_completes_when_the_high_watermark_passes_the_batch(leader: Replica) -> None:
    end = leader.append(2)
    p = leader.partition

    def followers_fetch() -> None:
        p.record_follower_fetch(B, end, now_ms())
        p.record_follower_fetch(C, end, now_ms())

    assert acks_all_outcome(leader, end, followers_fetch) == ErrorCode.none


def test_replication_already_complete_answers_at_once(leader: Replica) -> None:
    leader.update(isr=(ME,))
    assert acks_all_outcome(leader, leader.append(), lambda: None) == ErrorCode.none


def test_replication_after_the_isr_shrank_below_min_insync(leader: Replica) -> None:
    leader.partition.min_insync_replicas = 2
    end = leader.append()
    # The ISR shrinks to this broker alone, so the high watermark passes the batch, but it
    # was acknowledged by fewer replicas than min.insync.replicas.
    assert acks_all_outcome(leader, end, lambda: leader.update(isr=(ME,))) == (
        ErrorCode.not_enough_replicas_after_append
    )


def test_replication_when_leadership_moves_away(leader: Replica) -> None:
    end = leader.append()
    moved = acks_all_outcome(leader, end, lambda: leader.update(leader=B, new_leader_epoch=True))
    assert moved == ErrorCode.not_leader_or_follower


def test_replication_when_this_broker_leads_again_in_a_new_epoch(leader: Replica) -> None:
    """The batch may have been truncated away meanwhile: the old epoch's wait fails."""
    end = leader.append()
    again = acks_all_outcome(leader, end, lambda: leader.update(isr=(ME,), new_leader_epoch=True))
    assert again == ErrorCode.not_leader_or_follower


def test_replication_times_out(leader: Replica) -> None:
    assert acks_all_outcome(leader, leader.append(), lambda: None, timeout=0.05) == (
        ErrorCode.request_timed_out
    )


def test_why_an_acks_all_append_is_refused_up_front(
    leader: Replica, replica_at: Callable[..., Replica]
) -> None:
    p = leader.partition
    assert p.replication_error() == ErrorCode.none
    p.min_insync_replicas = 2
    leader.update(isr=(ME,))
    assert p.replication_error() == ErrorCode.not_enough_replicas
    follower = replica_at("follower")
    follower.update(leader=B, new_leader_epoch=True)
    assert follower.partition.replication_error() == ErrorCode.not_leader_or_follower


# -- leadership checks -----------------------------------------------------------------------------


def test_requests_naming_another_leader_epoch_are_fenced(
    leader: Replica, replica_at: Callable[..., Replica]
) -> None:
    p = leader.partition
    p.check_leader(p.leader_epoch)
    p.check_leader(-1)  # no epoch named: not checked
    for epoch, code in (
        (p.leader_epoch - 1, ErrorCode.fenced_leader_epoch),
        (p.leader_epoch + 1, ErrorCode.unknown_leader_epoch),
    ):
        with pytest.raises(KafkaError) as e:
            p.check_leader(epoch)
        assert e.value.code == code
    follower = replica_at("follower")
    follower.update(leader=B, new_leader_epoch=True)
    with pytest.raises(KafkaError) as e:
        follower.partition.check_leader()
    assert e.value.code == ErrorCode.not_leader_or_follower


# -- truncation ----------------------------------------------------------------------------------


@pytest.fixture
def follower(replica_at: Callable[..., Replica]) -> Replica:
    r = replica_at("follower")
    r.update(leader=B, new_leader_epoch=True)
    return r


def test_truncation_drops_the_tail_and_caps_the_high_watermark(follower: Replica) -> None:
    p = follower.partition
    p.append_as_follower(plain(2))
    p.append_as_follower(_at(2, plain(3)))
    p.follow_high_watermark(5)
    assert (p.log.log_end_offset, p.high_watermark) == (5, 5)
    p.truncate_to(2)
    assert (p.log.log_end_offset, p.high_watermark) == (2, 2)
    p.truncate_to(4)  # past the end: nothing to drop
    assert p.log.log_end_offset == 2


def test_truncation_below_the_high_watermark_keeps_it_where_it_is_if_lower(
    follower: Replica,
) -> None:
    p = follower.partition
    p.append_as_follower(plain(2))
    p.append_as_follower(_at(2, plain(2)))
    p.follow_high_watermark(1)
    p.truncate_to(2)
    assert (p.log.log_end_offset, p.high_watermark) == (2, 1)


def test_truncation_forgets_the_producer_batches_it_drops(follower: Replica) -> None:
    """So the partition, should it lead, does not take a retry of a dropped batch for a
    duplicate."""
    p = follower.partition
    p.append_as_follower(idem(7, 0, 0, 2))
    p.append_as_follower(_at(2, idem(7, 0, 2, 2)))
    assert p.producers.producers[7].batches[-1].last_seq == 3
    p.truncate_to(2)
    assert p.producers.producers[7].batches[-1].last_seq == 1


def test_restart_at_empties_the_log_and_continues_at_the_offset(follower: Replica) -> None:
    p = follower.partition
    p.append_as_follower(idem(7, 0, 0, 2))
    p.restart_at(100)
    assert (p.log.log_start_offset, p.log.log_end_offset, p.high_watermark) == (100, 100, 100)
    assert p.producers.producers == {}
    p.append_as_follower(_at(100, plain(1)))
    assert p.log.log_end_offset == 101


def _at(offset: int, batch: bytes) -> bytes:
    """`batch` as the leader stored it at `offset` (what a follower is sent)."""
    out = bytearray(batch)
    out[0:8] = offset.to_bytes(8, "big")
    return bytes(out)


# -- DeleteRecords -------------------------------------------------------------------------------


def _all_alive(_broker_id: int) -> bool:
    return True


def _caught_up(leader: Replica, count: int) -> int:
    """`count` records appended and fetched by both followers: the high watermark."""
    end = leader.append(count)
    for f in (B, C):
        leader.partition.record_follower_fetch(f, end, now_ms(), 0)
    assert leader.partition.high_watermark == end
    return end


def test_delete_records_moves_the_leaders_log_start(leader: Replica) -> None:
    _caught_up(leader, 10)
    p = leader.partition
    assert p.delete_records_on_leader(4) == 4
    assert p.log.log_start_offset == 4
    assert p.delete_records_on_leader(2) == 2  # already done: complete once replicas have 2
    assert p.log.log_start_offset == 4


class Watcher:
    """What Partition.watch is given: a fetch long poll's event or a fetch session's entry."""

    def __init__(self) -> None:
        self.woken = 0

    def set(self) -> None:
        self.woken += 1


def test_a_log_start_move_wakes_the_fetches_watching_the_partition(leader: Replica) -> None:
    """Fetch sessions answer a moved log start (Kafka's FetchSession sends it) without a sweep."""
    _caught_up(leader, 10)
    p, deleted, retained, unmoved = leader.partition, Watcher(), Watcher(), Watcher()
    p.watch(deleted)  # type: ignore[arg-type]
    p.delete_records_on_leader(4)
    p.watch(retained)  # type: ignore[arg-type]
    p.log_start_moved()  # retention deleted segments
    p.watch(unmoved)  # type: ignore[arg-type]
    p.delete_records_on_leader(2)  # already below the log start: nothing moves
    assert (deleted.woken, retained.woken, unmoved.woken) == (1, 1, 0)


def test_delete_records_to_minus_one_is_the_high_watermark(leader: Replica) -> None:
    hw = _caught_up(leader, 5)
    leader.append(3)  # not replicated: beyond the high watermark
    assert leader.partition.delete_records_on_leader(-1) == hw
    assert leader.partition.log.log_start_offset == hw


@pytest.mark.parametrize("offset", [6, -2])
def test_delete_records_outside_the_high_watermark_is_out_of_range(
    leader: Replica, offset: int
) -> None:
    _caught_up(leader, 5)
    with pytest.raises(KafkaError) as e:
        leader.partition.delete_records_on_leader(offset)
    assert e.value.code == ErrorCode.offset_out_of_range
    assert leader.partition.log.log_start_offset == 0


def test_delete_records_needs_the_delete_policy(leader: Replica) -> None:
    _caught_up(leader, 2)
    leader.partition.log.config = LogConfig(cleanup_policy="compact")
    with pytest.raises(KafkaError) as e:
        leader.partition.delete_records_on_leader(1)
    assert e.value.code == ErrorCode.policy_violation


def test_delete_records_only_on_the_leader(follower: Replica) -> None:
    with pytest.raises(KafkaError) as e:
        follower.partition.delete_records_on_leader(0)
    assert e.value.code == ErrorCode.not_leader_or_follower


def test_low_watermark_is_the_lowest_log_start_of_live_replicas(leader: Replica) -> None:
    end = _caught_up(leader, 10)
    p = leader.partition
    p.delete_records_on_leader(6)
    assert p.low_watermark(_all_alive) == 0  # the followers still start at 0
    p.record_follower_fetch(B, end, now_ms(), 6)
    assert p.low_watermark(_all_alive) == 0
    assert p.low_watermark(lambda broker: broker != C) == 6  # C's broker is down: not counted
    p.record_follower_fetch(C, end, now_ms(), 6)
    assert p.low_watermark(_all_alive) == 6


def test_low_watermark_counts_a_replica_that_never_fetched_as_unknown(leader: Replica) -> None:
    leader.update(replicas=(ME, B, C, 4))  # 4 is being added and has not fetched yet
    _caught_up(leader, 3)
    leader.partition.delete_records_on_leader(3)
    assert leader.partition.low_watermark(_all_alive) == -1


def low_watermark_outcome(
    leader: Replica, offset: int, then: Callable[[], None], timeout: float = 5
) -> tuple[ErrorCode, int]:
    """wait_for_low_watermark of `offset` in this leader epoch, with `then` run while it waits."""
    p = leader.partition
    result: list[tuple[ErrorCode, int]] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def waiter() -> None:
                result.append(
                    await p.wait_for_low_watermark(offset, p.leader_epoch, timeout, _all_alive)
                )

            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            then()

    anyio.run(main)
    return result[0]


def test_delete_records_completes_when_every_follower_reports_the_new_start(
    leader: Replica,
) -> None:
    end = _caught_up(leader, 8)
    required = leader.partition.delete_records_on_leader(5)

    def followers_fetch() -> None:
        leader.partition.record_follower_fetch(B, end, now_ms(), 5)
        leader.partition.record_follower_fetch(C, end, now_ms(), 5)

    assert low_watermark_outcome(leader, required, followers_fetch) == (ErrorCode.none, 5)


def test_delete_records_times_out_with_the_low_watermark_so_far(leader: Replica) -> None:
    end = _caught_up(leader, 8)
    required = leader.partition.delete_records_on_leader(5)

    def one_follower() -> None:
        leader.partition.record_follower_fetch(B, end, now_ms(), 5)

    assert low_watermark_outcome(leader, required, one_follower, timeout=0.05) == (
        ErrorCode.request_timed_out,
        0,
    )


def test_delete_records_when_leadership_moves_away(leader: Replica) -> None:
    _caught_up(leader, 4)
    required = leader.partition.delete_records_on_leader(2)
    moved = low_watermark_outcome(
        leader, required, lambda: leader.update(leader=B, new_leader_epoch=True)
    )
    assert moved == (ErrorCode.not_leader_or_follower, -1)


def test_a_follower_takes_the_leaders_log_start_up_to_its_high_watermark(
    follower: Replica,
) -> None:
    p = follower.partition
    p.append_as_follower(plain(6))
    p.follow_high_watermark(4)
    p.follow_log_start(3)
    assert p.log.log_start_offset == 3
    p.follow_log_start(5)  # the leader's high watermark is past ours: not beyond ours yet
    assert p.log.log_start_offset == 4
    p.follow_log_start(2)  # never back
    assert p.log.log_start_offset == 4
