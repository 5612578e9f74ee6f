"""acks=all waits of one request over several partitions (dataplane/replica/acks.py)."""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from dataplane.protocol.errors import ErrorCode
from dataplane.replica.acks import PendingAcks, ReplicationWait


@dataclass
class Leader:
    is_leader: bool = True
    leader_epoch: int = 3
    high_watermark: int = 0
    isr: tuple[int, ...] = (1, 2, 3)
    min_insync_replicas: int = 2


def codes(wait: ReplicationWait, timeout: float = 5.0) -> list[ErrorCode]:
    async def main() -> list[ErrorCode]:
        return await wait.codes(timeout)

    return anyio.run(main)


def test_a_request_is_done_once_its_last_partition_is() -> None:
    a, b = Leader(), Leader()
    acks_a, acks_b = PendingAcks(), PendingAcks()
    wait = ReplicationWait(2)
    acks_a.add(a, 10, 3, wait, 0)
    acks_b.add(b, 5, 3, wait, 1)
    a.high_watermark = 10
    acks_a.settle(a)
    assert not wait.done
    b.high_watermark = 7
    acks_b.settle(b)
    assert wait.done
    assert codes(wait) == [ErrorCode.none, ErrorCode.none]


def test_waits_settle_in_offset_order_as_the_high_watermark_passes_them() -> None:
    leader, acks = Leader(), PendingAcks()
    first, second = ReplicationWait(1), ReplicationWait(1)
    acks.add(leader, 5, 3, first, 0)
    acks.add(leader, 9, 3, second, 0)
    leader.high_watermark = 6
    acks.settle(leader)
    assert first.done
    assert not second.done


def test_an_already_replicated_batch_is_done_without_waiting() -> None:
    leader, acks = Leader(high_watermark=20), PendingAcks()
    wait = ReplicationWait(1)
    acks.add(leader, 20, 3, wait, 0)
    assert wait.done


def test_an_isr_below_min_insync_when_the_high_watermark_passes() -> None:
    leader, acks = Leader(), PendingAcks()
    wait = ReplicationWait(1)
    acks.add(leader, 4, 3, wait, 0)
    leader.isr, leader.high_watermark = (1,), 4
    acks.settle(leader)
    assert codes(wait) == [ErrorCode.not_enough_replicas_after_append]


def test_leadership_moving_fails_every_wait_of_the_old_epoch() -> None:
    leader, acks = Leader(), PendingAcks()
    waits = [ReplicationWait(1) for _ in range(3)]
    for offset, wait in enumerate(waits, 1):
        acks.add(leader, offset, 3, wait, 0)
    leader.leader_epoch = 4  # leads again in a new epoch: the old appends may be gone
    acks.settle(leader)
    assert [codes(w)[0] for w in waits] == [ErrorCode.not_leader_or_follower] * 3


def test_a_closing_replica_fails_its_waits() -> None:
    leader, acks = Leader(), PendingAcks()
    wait = ReplicationWait(1)
    acks.add(leader, 4, 3, wait, 0)
    acks.fail_all()
    assert codes(wait) == [ErrorCode.not_leader_or_follower]


def test_unsettled_slots_time_out_and_late_settlements_change_nothing() -> None:
    leader, acks = Leader(), PendingAcks()
    wait = ReplicationWait(2)
    acks.add(Leader(high_watermark=9), 1, 3, wait, 0)
    acks.add(leader, 4, 3, wait, 1)
    assert codes(wait, timeout=0.01) == [ErrorCode.none, ErrorCode.request_timed_out]
    leader.high_watermark = 4
    acks.settle(leader)
    assert codes(wait) == [ErrorCode.none, ErrorCode.request_timed_out]
