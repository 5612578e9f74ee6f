"""The replicated state machine: commands applied to plain data, without Raft."""

from __future__ import annotations

import pickle
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from meta.commands import (
    AllocateProducerIds,
    AlterPartition,
    BalanceLeaders,
    Body,
    Command,
    ControlledShutdown,
    CreateTopics,
    DeleteOutcome,
    DeleteTopics,
    ElectLeaders,
    FenceBroker,
    InitCluster,
    RegisterBroker,
    UnfenceBroker,
)
from meta.dispatch import REQUEST_MEMORY_MS, apply
from meta.model import NO_LEADER
from meta.partition_leadership import ElectionType, IsrChange
from meta.protocol import ErrorCode
from meta.records import decode_command, decode_state, encode_command, encode_state
from meta.state import MetaState
from meta.topic_planning import NewTopic, Rejection

from .machine import NOW, Machine


def test_cluster_id_is_set_once() -> None:
    machine = Machine()
    assert machine.run(InitCluster("first")) == "first"
    assert machine.run(InitCluster("second")) == "first"
    assert machine.state.cluster_id == "first"
    assert machine.state.offset == 0


def test_every_change_gets_the_next_offset() -> None:
    machine = Machine()
    assert machine.register(1) == 1  # the broker epoch is the offset of its registration
    topic = machine.create("a", partitions=2)
    machine.run(DeleteTopics(("a",), ()))
    assert [(c.offset, c.kind, c.key) for c in machine.changes] == [
        (1, "broker", 1),
        (2, "topic", "a"),
        (3, "topic_deleted", "a"),
    ]
    assert machine.changes[2].topic_id == topic.topic_id
    assert machine.state.offset == 3


def test_create_topics_reports_each_outcome() -> None:
    machine = Machine()
    machine.register(1)
    machine.create("a")
    requests = (NewTopic("a", 1, 1, ()), NewTopic("b", 1, 1, ()), NewTopic("c", 1, 2, ()))
    outcomes = machine.run(CreateTopics(requests))
    assert [o.error_code if isinstance(o, Rejection) else 0 for o in outcomes] == [  # type: ignore[attr-defined]
        ErrorCode.TOPIC_ALREADY_EXISTS,
        0,
        ErrorCode.INVALID_REPLICATION_FACTOR,
    ]
    assert sorted(machine.state.topics) == ["a", "b"]


def test_delete_by_name_and_id() -> None:
    machine = Machine()
    machine.register(1)
    a, b = machine.create("a"), machine.create("b")
    outcomes = machine.run(DeleteTopics(("a", "nope"), (b.topic_id, b"\x01" * 16, a.topic_id)))
    assert outcomes == [
        DeleteOutcome("a", a.topic_id),
        DeleteOutcome(
            "nope",
            b"",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition.",
        ),
        DeleteOutcome("b", b.topic_id),
        DeleteOutcome(
            "", b"\x01" * 16, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."
        ),
        DeleteOutcome(
            "a",
            a.topic_id,
            ErrorCode.INVALID_REQUEST,
            "Topic a is named more than once in the request.",
        ),
    ]
    assert machine.state.topics == {}


def test_a_retried_request_is_applied_once() -> None:
    machine = Machine()
    first = machine.run(RegisterBroker(1, "h", 1, None, "", b"i", False), request_id="r1")
    again = machine.run(RegisterBroker(1, "h", 1, None, "", b"i", False), request_id="r1")
    assert first == again == 1
    assert machine.state.offset == 1
    later = NOW + REQUEST_MEMORY_MS + 1  # forgotten after a while: applied anew
    assert machine.run(RegisterBroker(1, "h", 1, None, "", b"i", False), "r1", later) == 2


def test_fence_then_register_moves_leadership_and_back() -> None:
    machine = Machine()
    for broker_id in (1, 2, 3):
        machine.register(broker_id)
    topic = machine.create("t", partitions=6, placement_seed=7)
    led_by_2 = [p.index for p in topic.partitions if p.leader == 2]
    assert len(led_by_2) == 2

    assert machine.fence(2) is True
    assert machine.state.brokers[2].fenced
    for index in led_by_2:
        p = machine.state.topics["t"].partitions[index]
        assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (NO_LEADER, (2,), 1, 1)
    assert machine.fence(2) is False  # already fenced: no change, no offset

    offset = machine.state.offset
    epoch = machine.register(2)
    assert epoch == offset + 1
    assert not machine.state.brokers[2].fenced
    for index in led_by_2:
        p = machine.state.topics["t"].partitions[index]
        assert (p.leader, p.leader_epoch, p.partition_epoch) == (2, 2, 2)


def test_fence_and_unfence_ignore_other_epochs() -> None:
    machine = Machine()
    machine.register(1)
    old_epoch = machine.state.brokers[1].epoch
    machine.register(1)
    assert machine.run(FenceBroker(1, old_epoch, False)) is False
    assert not machine.state.brokers[1].fenced
    assert machine.fence(1) is True
    assert machine.run(UnfenceBroker(1, old_epoch, False)) is False
    assert machine.run(UnfenceBroker(1, machine.state.brokers[1].epoch, False)) is True
    assert not machine.state.brokers[1].fenced


def test_a_restarted_broker_loses_leadership_of_replicated_partitions() -> None:
    machine = Machine()
    for broker_id in (1, 2):
        machine.register(broker_id)
    topic = machine.create("t", partitions=2, rf=2)
    led_by_1 = next(p.index for p in topic.partitions if p.leader == 1)
    machine.register(1, incarnation=b"two")  # a new process: treated as fenced, then unfenced
    p = machine.state.topics["t"].partitions[led_by_1]
    assert (p.leader, p.isr, p.leader_epoch) == (2, (2,), 1)


def test_fence_uses_the_topic_unclean_setting_over_the_default() -> None:
    machine = Machine()
    for broker_id in (1, 2):
        machine.register(broker_id)
    machine.run(FenceBroker(2, machine.state.brokers[2].epoch, False))
    unclean = {"unclean.leader.election.enable": "true"}
    topic = machine.create("t", partitions=0, rf=0, assignments=((0, (1, 2)),), configs=unclean)
    assert topic.partitions[0].isr == (1,)
    machine.run(UnfenceBroker(2, machine.state.brokers[2].epoch, False))
    machine.fence(1)
    assert machine.state.topics["t"].partitions[0].leader == 2  # unclean: 2 was not in the ISR


def test_a_dump_from_before_new_fields_loads_with_their_defaults() -> None:
    """Dumps of the pickled format (still read) pickle these classes: a field added with a
    default must not break them (e.g. next_producer_id, Broker.in_controlled_shutdown)."""
    machine = Machine()
    machine.register(1)
    old_broker = machine.state.brokers[1]
    del old_broker.__dict__["in_controlled_shutdown"]
    del machine.state.__dict__["next_producer_id"]
    loaded = pickle.loads(pickle.dumps(machine.state))
    assert loaded.next_producer_id == 0
    assert not loaded.brokers[1].in_controlled_shutdown
    assert loaded.brokers[1].active


# ---------------------------------------------------------------- replay determinism


broker_ids = st.integers(1, 4)
registrations = st.builds(
    lambda b, inc: RegisterBroker(b, "h", 9092, None, "", bytes([inc]), False),
    broker_ids,
    st.integers(0, 2),
)
creations = st.builds(
    lambda name, n, rf, seed, unclean: CreateTopics(
        (
            NewTopic(
                name,
                n,
                rf,
                (),
                configs={"unclean.leader.election.enable": "true"} if unclean else {},
                topic_id=uuid.uuid4().bytes,
                placement_seed=seed,
            ),
        )
    ),
    st.sampled_from("abc"),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(0, 2**31),
    st.booleans(),
)


# An ISR change of topic t partition p: sent by its leader (or another replica), quoting the
# current epochs (or a stale partition epoch), keeping the sender plus the replicas a bit mask
# picks.
def isr_changes() -> st.SearchStrategy:
    return st.builds(
        lambda t, p, by_leader, stale, mask: ("alter", t, p, by_leader, stale, mask),
        st.sampled_from("aabbc"),
        st.integers(0, 3),
        st.booleans(),
        st.booleans(),
        st.integers(0, 15),
    )


elections = st.builds(
    lambda kind, everything, t: ElectLeaders(
        kind, None if everything else ((t, (0, 1)), ("nope", (0,)))
    ),
    st.sampled_from(ElectionType),
    st.booleans(),
    st.sampled_from("abc"),
)
bodies = st.one_of(
    registrations,
    registrations.map(lambda body: body),  # twice as likely (one_of drops duplicates)
    st.builds(lambda b, unclean: ("fence", b, unclean), broker_ids, st.booleans()),
    st.builds(lambda b: ("unfence", b), broker_ids),
    creations,
    st.builds(lambda name: DeleteTopics((name,), ()), st.sampled_from("abc")),
    *(isr_changes() for _ in range(3)),
    # the leader of topic t partition p takes every active replica back into the ISR
    st.builds(lambda t, p: ("rejoin", t, p), st.sampled_from("ab"), st.integers(0, 1)),
    st.builds(lambda t: ("rejoin", t, 0), st.sampled_from("ab")),
    st.builds(lambda b, unclean: ("shutdown", b, unclean), broker_ids, st.booleans()),
    elections,
    st.just(BalanceLeaders()),
    st.builds(lambda b: ("producer_ids", b), broker_ids),
)


def resolve(step: Body | tuple, state: MetaState) -> Body:
    """Steps naming a broker or a partition quote its current epochs, as a proposer would."""
    if not isinstance(step, tuple):
        return step
    if step[0] == "alter":
        return resolve_alter(step, state)
    if step[0] == "rejoin":
        active = {b.id for b in state.brokers.values() if b.active}
        return resolve_alter(("alter", step[1], step[2], True, False, 15), state, active)
    broker = state.brokers.get(step[1])
    epoch = broker.epoch if broker else 0
    if step[0] == "fence":
        return FenceBroker(step[1], epoch, step[2])
    if step[0] == "shutdown":
        return ControlledShutdown(step[1], epoch, step[2])
    if step[0] == "producer_ids":
        return AllocateProducerIds(step[1], epoch)
    return UnfenceBroker(step[1], epoch, False)


def resolve_alter(step: tuple, state: MetaState, only: set[int] | None = None) -> AlterPartition:
    _, name, index, by_leader, stale, mask = step
    topic = state.topics.get(name)
    # the leader (or, with by_leader False, some other replica) sends it
    if topic is None or index >= len(topic.partitions):
        change = IsrChange(b"\x00" * 16, index, 0, 0, (1,))
        return AlterPartition(1, state.brokers[1].epoch if 1 in state.brokers else 0, (change,))
    p = topic.partitions[index]
    sender = p.leader if by_leader else p.replicas[-1]
    isr = tuple(
        b
        for i, b in enumerate(p.replicas)
        if b == sender or (mask >> i & 1 and (only is None or b in only))
    )
    change = IsrChange(topic.topic_id, index, p.leader_epoch, p.partition_epoch - stale, isr)
    broker = state.brokers.get(sender)
    return AlterPartition(sender, broker.epoch if broker else 0, (change,))


def check_invariants(state: MetaState, previous_producer_id: int) -> None:
    assert state.next_producer_id >= previous_producer_id
    active = {b.id for b in state.brokers.values() if b.active}
    for topic in state.topics.values():
        for p in topic.partitions:
            assert p.isr
            assert set(p.isr) <= set(p.replicas)
            assert len(set(p.isr)) == len(p.isr)
            if p.leader != NO_LEADER:
                # a led partition's ISR holds only brokers that may lead
                assert p.leader in p.isr, (p, state.brokers)
                assert set(p.isr) <= active, (p, state.brokers)
            else:
                # an offline partition has no ISR member that could lead it
                assert not set(p.isr) & active, (p, state.brokers)


# Brokers and topics to start from, so that most random steps find something to act on.
PRELUDE: list[Body] = [
    *(RegisterBroker(b, "h", 9092, None, "", b"\x00", False) for b in (1, 2, 3, 4)),
    CreateTopics((NewTopic("a", 4, 3, (), topic_id=b"a" * 16, placement_seed=1),)),
    CreateTopics(
        (
            NewTopic(
                "b",
                2,
                2,
                (),
                configs={"unclean.leader.election.enable": "true"},
                topic_id=b"b" * 16,
                placement_seed=2,
            ),
        )
    ),
]


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(bodies, min_size=10, max_size=50), st.integers(0, 60))
def test_replay_from_any_point_reaches_the_same_state(steps: list, dump_at: int) -> None:
    """Replaying the log, or loading a dump and replaying the rest, gives the same state; both
    go through their stored records (meta.records)."""
    live = Machine()
    commands = []
    for step in [*PRELUDE, *steps]:
        command = Command(uuid.uuid4().hex, NOW, resolve(step, live.state))
        commands.append(command)
        previous_producer_id = live.state.next_producer_id
        apply(live.state, command)
        check_invariants(live.state, previous_producer_id)

    replayed = MetaState()
    for i, command in enumerate(commands):
        if i == dump_at:
            replayed = decode_state(encode_state(replayed))
        apply(replayed, decode_command(encode_command(command)))
    assert replayed == live.state
