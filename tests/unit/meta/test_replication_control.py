"""ISR changes, controlled shutdown, leader elections and producer ids, on the state machine."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

from meta.commands import (
    AllocateProducerIds,
    AlterPartitionOutcome,
    BalanceLeaders,
    ControlledShutdown,
    ElectionOutcome,
    ElectLeaders,
    Outcome,
    ProducerIdBlock,
    ShutdownOutcome,
    UnregisterBroker,
)
from meta.model import NO_LEADER, Partition
from meta.partition_leadership import ElectionType, IsrChange
from meta.protocol import ErrorCode
from meta.records import decode_state, encode_state
from meta.replication_control import PRODUCER_ID_BLOCK_SIZE
from tests.expect import present

from .machine import Machine


def cluster(
    brokers: int = 3, partitions: int = 3, rf: int = 3, replicas: tuple = (), **topic: Any
) -> Machine:
    """Brokers 1..n and topic "t", on ``replicas`` (of partition 0) if given. For 3 brokers
    the placement seed puts partitions 0-5 on (1, 2, 3), (2, 3, 1), (3, 1, 2), (1, 3, 2), ..."""
    machine = Machine()
    for broker_id in range(1, brokers + 1):
        machine.register(broker_id)
    if replicas:
        machine.create("t", 0, 0, ((0, replicas),), **topic)
    else:
        machine.create("t", partitions=partitions, rf=rf, placement_seed=1, **topic)
    return machine


def only(outcome: AlterPartitionOutcome) -> tuple[ErrorCode, Partition | None]:
    [result] = outcome.partitions
    return result.error_code, result.partition


# ---------------------------------------------------------------- AlterPartition


def test_a_shrink_bumps_the_partition_epoch_only(caplog) -> None:
    machine = cluster(replicas=(1, 2, 3))
    before = machine.partition("t")
    assert (before.replicas, before.leader) == ((1, 2, 3), 1)
    offset = machine.state.offset
    with caplog.at_level(logging.INFO, logger="rafka.meta.state"):
        code, after = only(machine.alter(1, machine.isr_change("t", 0, (1, 2))))
    assert code == ErrorCode.NONE
    assert after == Partition(0, (1, 2, 3), (1, 2), 1, leader_epoch=0, partition_epoch=1)
    assert machine.partition("t") == after
    assert [(c.offset, c.kind, c.key) for c in machine.changes[-1:]] == [(offset + 1, "topic", "t")]
    assert "ISR of t-0 changed from [1, 2, 3] to [1, 2] by leader 1" in caplog.text
    assert "partition epoch 0 -> 1" in caplog.text

    code, after = only(machine.alter(1, machine.isr_change("t", 0, (1, 2, 3))))  # expand again
    after = present(after)
    assert (code, after.isr, after.partition_epoch, after.leader_epoch) == (0, (1, 2, 3), 2, 0)


def test_the_same_isr_changes_nothing() -> None:
    machine = cluster()
    offset = machine.state.offset
    code, after = only(machine.alter(1, machine.isr_change("t", 0, (1, 2, 3))))
    assert (code, after) == (ErrorCode.NONE, machine.partition("t"))
    assert present(after).partition_epoch == 0
    assert machine.state.offset == offset


@pytest.mark.parametrize(
    ("sender", "change", "code"),
    [
        (1, {"leader_epoch": 1}, ErrorCode.FENCED_LEADER_EPOCH),  # from the future
        (1, {"leader_epoch": -1}, ErrorCode.FENCED_LEADER_EPOCH),  # stale
        (2, {}, ErrorCode.NOT_LEADER_OR_FOLLOWER),  # a follower, current epochs
        (1, {"partition_epoch": 1}, ErrorCode.INVALID_UPDATE_VERSION),
        (1, {"new_isr": (2, 3)}, ErrorCode.INVALID_REQUEST),  # without the leader
        (1, {"new_isr": ()}, ErrorCode.INVALID_REQUEST),
        (1, {"new_isr": (1, 4)}, ErrorCode.INVALID_REQUEST),  # 4 is not a replica
        (1, {"new_isr": (1, 2, 2)}, ErrorCode.INVALID_REQUEST),  # duplicate
        (1, {"new_isr_broker_epochs": (1,)}, ErrorCode.INVALID_REQUEST),  # 1 epoch, 3 members
        (1, {"new_isr_broker_epochs": (1, 2, 99)}, ErrorCode.INELIGIBLE_REPLICA),
    ],
)
def test_alter_partition_validation(sender: int, change: dict, code: ErrorCode, caplog) -> None:
    machine = cluster(brokers=4, replicas=(1, 2, 3))  # broker 4 replicates nothing of t-0
    before = machine.partition("t")
    request = replace(machine.isr_change("t", 0, (1, 2, 3)), **change)
    with caplog.at_level(logging.WARNING, logger="rafka.meta.state"):
        outcome = machine.alter(sender, request)
    assert only(outcome) == (code, None)
    assert outcome.partitions[0].error_message
    assert machine.partition("t") == before
    assert f"Rejected AlterPartition from broker {sender}" in caplog.text
    assert code.name in caplog.text


def test_the_current_broker_epochs_pass() -> None:
    machine = cluster()
    epochs = tuple(machine.epoch(b) for b in (1, 2, 3))
    shrunk = replace(machine.isr_change("t", 0, (1, 3)), new_isr_broker_epochs=epochs[::2])
    assert only(machine.alter(1, shrunk))[0] == ErrorCode.NONE
    grown = replace(
        machine.isr_change("t", 0, (1, 2, 3)), new_isr_broker_epochs=(-1, epochs[1], -1)
    )
    assert only(machine.alter(1, grown))[0] == ErrorCode.NONE
    machine.register(2)  # 2 registered again (a restart) after the leader built the request
    stale = replace(machine.isr_change("t", 0, (1, 2)), new_isr_broker_epochs=(-1, epochs[1]))
    assert only(machine.alter(1, stale))[0] == ErrorCode.INELIGIBLE_REPLICA


def test_unknown_topic_id_and_partition() -> None:
    machine = cluster()
    unknown_id = IsrChange(b"\x07" * 16, 0, 0, 0, (1,))
    no_partition = replace(machine.isr_change("t", 0, (1,)), partition_index=3)
    outcome = machine.alter(1, unknown_id, no_partition)
    assert [p.error_code for p in outcome.partitions] == [
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]


def test_a_stale_broker_epoch_refuses_the_whole_request() -> None:
    machine = cluster()
    old_epoch = machine.epoch(1)
    machine.register(1)  # same incarnation: a new epoch, leadership kept
    change = machine.isr_change("t", 0, (1, 2))
    outcome = machine.alter(1, change, change, broker_epoch=old_epoch)
    assert outcome.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert [p.error_code for p in outcome.partitions] == [ErrorCode.STALE_BROKER_EPOCH] * 2
    current = machine.alter(1, change, broker_epoch=machine.epoch(1))
    assert only(current)[0] == ErrorCode.NONE
    assert machine.run(AllocateProducerIds(9, 1)).error_code == ErrorCode.STALE_BROKER_EPOCH  # type: ignore[attr-defined]


@pytest.mark.parametrize("why", ["fenced", "shutting down", "unregistered"])
def test_only_active_brokers_join_the_isr(why: str) -> None:
    machine = cluster(brokers=4, replicas=(1, 2, 3))
    machine.alter(1, machine.isr_change("t", 0, (1, 2)))  # 3 leaves the ISR
    if why == "fenced":
        machine.fence(3)
    elif why == "shutting down":
        machine.shutdown(3)
    change = machine.isr_change("t", 0, (1, 2, 3))
    if why == "unregistered":
        machine.state.brokers.pop(3)
    [result] = machine.alter(1, change).partitions
    assert result.error_code == ErrorCode.INELIGIBLE_REPLICA
    assert f"3 ({why.replace('unregistered', 'not registered')})" in result.error_message


def test_stale_requests_never_overwrite_newer_state() -> None:
    machine = cluster()
    first = machine.isr_change("t", 0, (1, 2))
    second = machine.isr_change("t", 0, (1, 3))  # built from the same, now outdated, state
    assert only(machine.alter(1, first))[0] == ErrorCode.NONE
    assert only(machine.alter(1, second))[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert machine.partition("t").isr == (1, 2)

    # Leadership moves away (1 fenced) and comes back (1 registers, rejoins, is preferred):
    # a request 1 built as the earlier leader is fenced by the leader epoch.
    delayed = machine.isr_change("t", 0, (1,))
    machine.fence(1)
    assert machine.partition("t").leader == 2
    machine.register(1)
    machine.alter(2, machine.isr_change("t", 0, (2, 1)))
    machine.run(BalanceLeaders())
    back = machine.partition("t")
    assert (back.leader, back.leader_epoch) == (1, 2)
    assert only(machine.alter(1, delayed))[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert machine.partition("t") == back


def test_a_retried_alter_partition_is_applied_once() -> None:
    machine = cluster()
    change = machine.isr_change("t", 0, (1, 2))
    first = machine.alter(1, change, request_id="retry-me")
    again = machine.alter(1, change, request_id="retry-me")
    assert again == first
    assert only(first) == (ErrorCode.NONE, machine.partition("t"))
    assert machine.partition("t").partition_epoch == 1
    assert only(machine.alter(1, change))[0] == ErrorCode.INVALID_UPDATE_VERSION  # a new request


def test_one_request_changes_several_partitions() -> None:
    machine = cluster()
    led_by_2 = machine.isr_change("t", 1, (2, 3))
    outcome = machine.alter(2, led_by_2, machine.isr_change("t", 0, (1, 2)))
    assert [p.error_code for p in outcome.partitions] == [
        ErrorCode.NONE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ]
    assert machine.partition("t", 1).isr == (2, 3)


# ---------------------------------------------------------------- controlled shutdown


def test_controlled_shutdown_moves_leaders_and_shrinks_isrs(caplog) -> None:
    machine = cluster(partitions=6)
    before = machine.state.topics["t"].partitions
    offset = machine.state.offset
    with caplog.at_level(logging.INFO, logger="rafka.meta.state"):
        outcome = machine.shutdown(2)
    assert outcome == ShutdownOutcome(may_exit=True, leaderships_left=0)
    for old, new in zip(before, machine.state.topics["t"].partitions, strict=True):
        assert 2 not in new.isr
        assert new.leader in (1, 3)
        assert new.leader_epoch == old.leader_epoch + (old.leader == 2)
        assert new.partition_epoch == old.partition_epoch + 1
        assert new.leader == next(b for b in old.replicas if b != 2)  # next ISR replica
    broker = machine.state.brokers[2]
    # let go: may exit
    assert broker.in_controlled_shutdown
    assert broker.fenced
    assert [(c.kind, c.key) for c in machine.changes if c.offset > offset] == [
        ("broker", 2),
        ("topic", "t"),
    ]
    assert "Broker 2 (epoch 2) is shutting down" in caplog.text
    assert "Broker 2 leads no partition any more: it may shut down" in caplog.text

    offset = machine.state.offset
    assert machine.shutdown(2) == outcome
    assert machine.state.offset == offset  # polling again


def test_controlled_shutdown_of_the_last_isr_member_takes_its_partition_offline() -> None:
    machine = cluster(brokers=2, replicas=(1, 2))
    machine.alter(1, machine.isr_change("t", 0, (1,)))
    assert machine.shutdown(1).may_exit
    p = machine.partition("t")
    assert (p.leader, p.isr) == (NO_LEADER, (1,))  # kept: it alone has every record

    assert machine.unfence(1) is False  # heartbeats do not bring a let-go broker back
    assert machine.run(ElectLeaders(ElectionType.PREFERRED, None)) == [
        ElectionOutcome(
            "t",
            0,
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            "Preferred replica 1 of t-0 is not an unfenced in-sync replica.",
        )
    ]
    machine.register(1, incarnation=b"restarted")  # the restart: normal again, leads again
    assert not machine.state.brokers[1].in_controlled_shutdown
    p = machine.partition("t")
    assert (p.leader, p.isr) == (1, (1,))


def test_a_shutting_down_broker_is_not_elected() -> None:
    machine = cluster(replicas=(1, 2, 3))
    machine.alter(1, machine.isr_change("t", 0, (1, 3)))  # 2 out of the ISR
    assert machine.shutdown(3).may_exit
    machine.fence(1, unclean=True)  # unclean: any active replica, but never 3
    p = machine.partition("t")
    assert (p.leader, p.isr) == (2, (2,))


# ---------------------------------------------------------------- UnregisterBroker


def test_unregister_broker_moves_it_off_isrs_and_leaderships_then_forgets_it(caplog) -> None:
    """Kafka's unregisterBroker: the broker leaves every ISR and leadership, its registration
    goes, its assignments stay; a live broker (it is still unfenced) registers again and leads
    the partitions that went offline without it."""
    machine = cluster(brokers=3, partitions=3)
    machine.create("solo", 0, 0, ((0, (2,)),))
    before = machine.state.topics["t"].partitions
    offset = machine.state.offset
    with caplog.at_level(logging.INFO, logger="rafka.meta.state"):
        assert machine.run(UnregisterBroker(2, False)) == Outcome()
    assert 2 not in machine.state.brokers
    assert "Unregistered broker 2 (epoch 2, still unfenced" in caplog.text
    for old, new in zip(before, machine.state.topics["t"].partitions, strict=True):
        assert new.replicas == old.replicas
        assert 2 not in new.isr
        assert new.leader != 2
    assert machine.partition("solo").leader == NO_LEADER
    assert [(c.kind, c.key) for c in machine.changes if c.offset > offset] == [
        ("topic", "t"),
        ("topic", "solo"),
        ("broker_unregistered", 2),
    ]
    assert machine.run(UnregisterBroker(2, False)) == Outcome(
        ErrorCode.BROKER_ID_NOT_REGISTERED, "Broker ID 2 is not currently registered"
    )
    machine.register(2)  # its next heartbeat said BROKER_ID_NOT_REGISTERED
    assert not machine.state.brokers[2].fenced
    assert machine.partition("solo").leader == 2


def test_controlled_shutdown_with_a_stale_epoch() -> None:
    machine = cluster()
    old_epoch = machine.epoch(1)
    machine.register(1)
    outcome = machine.run(ControlledShutdown(1, old_epoch, False))
    assert outcome.error_code == ErrorCode.STALE_BROKER_EPOCH  # type: ignore[attr-defined]
    assert not outcome.may_exit  # type: ignore[attr-defined]
    assert not machine.state.brokers[1].in_controlled_shutdown


# ---------------------------------------------------------------- preferred leader election


def fence_and_rejoin(machine: Machine, broker_id: int) -> None:
    """The broker is fenced, registers again, and every leader takes it back into the ISR."""
    machine.fence(broker_id)
    machine.register(broker_id)
    for p in machine.state.topics["t"].partitions:
        if broker_id not in p.isr:
            isr = (*p.isr, broker_id)
            assert only(machine.alter(p.leader, machine.isr_change("t", p.index, isr)))[0] == 0


def test_balance_leaders_moves_leadership_back_to_preferred_replicas(caplog) -> None:
    machine = cluster(partitions=6)
    machine.fence(1)
    machine.register(1)
    assert machine.run(BalanceLeaders()) == 0  # 1 is not in any ISR yet
    fence_and_rejoin(machine, 1)
    moved = [p for p in machine.state.topics["t"].partitions if p.replicas[0] == 1]
    assert len(moved) == 2
    assert all(p.leader != 1 for p in moved)
    with caplog.at_level(logging.INFO, logger="rafka.meta.state"):
        assert machine.run(BalanceLeaders()) == 2
    for old in moved:
        new = machine.partition("t", old.index)
        assert (new.leader, new.isr) == (1, old.isr)
        assert (new.leader_epoch, new.partition_epoch) == (
            old.leader_epoch + 1,
            old.partition_epoch + 1,
        )
    assert all(p.leader == p.replicas[0] for p in machine.state.topics["t"].partitions)
    assert "Preferred leader election for t-0: leader 2 -> 1" in caplog.text
    assert machine.run(BalanceLeaders()) == 0


def test_elect_leaders_preferred() -> None:
    machine = cluster(partitions=6)
    machine.fence(1)
    machine.register(1)
    assert [machine.partition("t", i).leader for i in (0, 1, 3)] == [2, 2, 3]
    machine.alter(2, machine.isr_change("t", 0, (2, 3, 1)))  # 1 back in t-0's ISR only
    request = ElectLeaders(ElectionType.PREFERRED, (("t", (0, 1, 3, 7)), ("nope", (0,))))
    codes = [(o.topic, o.partition_index, o.error_code) for o in machine.run(request)]  # type: ignore[attr-defined]
    assert codes == [
        ("t", 0, ErrorCode.NONE),
        ("t", 1, ErrorCode.ELECTION_NOT_NEEDED),  # its preferred replica 2 leads
        ("t", 3, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE),  # 1 is not in its ISR
        ("t", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    p = machine.partition("t")
    assert (p.leader, p.leader_epoch, p.isr) == (1, 2, (2, 3, 1))


def test_elect_leaders_for_all_partitions_reports_only_those_needing_one() -> None:
    machine = cluster(partitions=3)
    fence_and_rejoin(machine, 1)
    outcomes = machine.run(ElectLeaders(ElectionType.PREFERRED, None))
    assert [(o.topic, o.partition_index, o.error_code) for o in outcomes] == [  # type: ignore[attr-defined]
        ("t", 0, ErrorCode.NONE)
    ]
    assert machine.partition("t").leader == 1


# ---------------------------------------------------------------- unclean leader election


def offline_partition(unclean: str | None) -> Machine:
    """t-0 on brokers 1, 2 with ISR [1]; then 2 and 1 are fenced: offline, ISR [1]."""
    configs = {"unclean.leader.election.enable": unclean} if unclean else {}
    machine = cluster(brokers=2, replicas=(1, 2), configs=configs)
    machine.alter(1, machine.isr_change("t", 0, (1,)))
    machine.fence(2)
    machine.fence(1)
    p = machine.partition("t")
    assert (p.leader, p.isr) == (NO_LEADER, (1,))
    return machine


def test_without_unclean_election_only_the_last_isr_member_leads_again(caplog) -> None:
    machine = offline_partition(unclean=None)
    machine.register(2)  # an out-of-sync replica returns: stays offline
    p = machine.partition("t")
    assert (p.leader, p.isr) == (NO_LEADER, (1,))
    machine.register(1)
    p = machine.partition("t")
    assert (p.leader, p.isr) == (1, (1,))
    assert "Unclean" not in caplog.text


def test_with_unclean_election_any_live_replica_leads(caplog) -> None:
    machine = offline_partition(unclean="true")
    with caplog.at_level(logging.WARNING, logger="rafka.meta.controller"):
        machine.register(2)
    p = machine.partition("t")
    assert (p.leader, p.isr) == (2, (2,))
    assert "Unclean leader election for t-0: broker 2 becomes leader" in caplog.text
    assert "may be lost" in caplog.text
    machine.register(1)  # the old ISR member is just a follower now
    assert machine.partition("t").leader == 2


def test_unclean_election_at_fence_time_uses_a_live_replica() -> None:
    machine = cluster(brokers=2, replicas=(1, 2))
    machine.alter(1, machine.isr_change("t", 0, (1,)))
    machine.fence(1, unclean=True)  # the cluster default, passed by the proposer
    p = machine.partition("t")
    assert (p.leader, p.isr, p.leader_epoch) == (2, (2,), 1)


def test_elect_leaders_unclean(caplog) -> None:
    machine = offline_partition(unclean=None)
    request = ElectLeaders(ElectionType.UNCLEAN, (("t", (0,)),))
    [refused] = machine.run(request)
    assert refused.error_code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    machine.register(2)
    with caplog.at_level(logging.WARNING, logger="rafka.meta.controller"):
        [elected] = machine.run(request)
    assert elected.error_code == ErrorCode.NONE
    p = machine.partition("t")
    assert (p.leader, p.isr) == (2, (2,))
    assert "an unclean ElectLeaders request" in caplog.text
    [again] = machine.run(request)
    assert again.error_code == ErrorCode.ELECTION_NOT_NEEDED


# ---------------------------------------------------------------- producer ids


def test_producer_id_blocks_are_monotonic_and_unique() -> None:
    machine = cluster(replicas=(1,))
    blocks = [machine.run(AllocateProducerIds(b, machine.epoch(b))) for b in (1, 2, 3, 1)]
    assert blocks == [ProducerIdBlock(i * PRODUCER_ID_BLOCK_SIZE, 1000) for i in range(4)]

    retried = AllocateProducerIds(2, machine.epoch(2))
    first = machine.run(retried, request_id="r")
    assert machine.run(retried, request_id="r") == first == ProducerIdBlock(4000, 1000)

    restored = Machine()
    restored.state = decode_state(encode_state(machine.state))  # as a Raft dump restores it
    after = restored.run(AllocateProducerIds(3, restored.epoch(3)))
    assert after == ProducerIdBlock(5000, 1000)

    stale = machine.run(AllocateProducerIds(3, machine.epoch(3) - 1))
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH  # type: ignore[attr-defined]
    assert stale.first == -1  # type: ignore[attr-defined]
    assert machine.state.next_producer_id == 5000


def test_producer_ids_run_out_at_the_int64_limit() -> None:
    machine = cluster(replicas=(1,))
    machine.state.next_producer_id = 2**63 - 1 - 1000  # as Kafka: the next first id fits too
    assert machine.run(AllocateProducerIds(1, machine.epoch(1))).count == 1000  # type: ignore[attr-defined]
    exhausted = machine.run(AllocateProducerIds(1, machine.epoch(1)))
    assert exhausted.error_code == ErrorCode.UNKNOWN_SERVER_ERROR  # type: ignore[attr-defined]
