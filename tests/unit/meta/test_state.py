"""The replicated state machine: commands applied to plain data, without Raft."""

from __future__ import annotations

import pickle
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from meta.controller import NewTopic, Rejection
from meta.model import NO_LEADER, Topic
from meta.protocol import ErrorCode
from meta.state import (
    REQUEST_MEMORY_MS,
    Body,
    Change,
    Command,
    CreateTopics,
    DeleteOutcome,
    DeleteTopics,
    FenceBroker,
    InitCluster,
    MetaState,
    RegisterBroker,
    UnfenceBroker,
    apply,
)

NOW = 1_700_000_000_000


class Machine:
    """A MetaState with a helper that wraps bodies into commands, as the Raft layer does."""

    def __init__(self) -> None:
        self.state = MetaState()
        self.changes: list[Change] = []

    def run(self, body: Body, request_id: str = "", now_ms: int = NOW) -> object:
        applied = apply(self.state, Command(request_id or uuid.uuid4().hex, now_ms, body))
        self.changes += applied.changes
        return applied.result

    def register(self, broker_id: int, incarnation: bytes = b"one") -> int:
        body = RegisterBroker(broker_id, "h", 9092, None, "h:9392", incarnation, False)
        return self.run(body)  # type: ignore[return-value]

    def create(
        self, name: str, partitions: int = 1, rf: int = 1, assignments: tuple = (), **kw: object
    ) -> Topic:
        topic_id = uuid.uuid4().bytes
        request = NewTopic(name, partitions, rf, assignments, topic_id=topic_id, **kw)  # type: ignore[arg-type]
        [outcome] = self.run(CreateTopics((request,)))  # type: ignore[misc]
        assert isinstance(outcome, Topic), outcome
        return outcome

    def fence(self, broker_id: int, unclean: bool = False) -> object:
        return self.run(FenceBroker(broker_id, self.state.brokers[broker_id].epoch, unclean))


def test_cluster_id_is_set_once() -> None:
    machine = Machine()
    assert machine.run(InitCluster("first")) == "first"
    assert machine.run(InitCluster("second")) == "first"
    assert machine.state.cluster_id == "first" and machine.state.offset == 0


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
        DeleteOutcome("nope", b"", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unknown topic nope."),
        DeleteOutcome("b", b.topic_id),
        DeleteOutcome(
            "", b"\x01" * 16, ErrorCode.UNKNOWN_TOPIC_ID, f"Unknown topic id {'01' * 16}."
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
    assert first == again == 1 and machine.state.offset == 1
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
    assert epoch == offset + 1 and not machine.state.brokers[2].fenced
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


# ---------------------------------------------------------------- replay determinism


broker_ids = st.integers(1, 4)
bodies = st.one_of(
    st.builds(
        lambda b, inc: RegisterBroker(b, "h", 9092, None, "", bytes([inc]), False),
        broker_ids,
        st.integers(0, 2),
    ),
    st.builds(lambda b, unclean: ("fence", b, unclean), broker_ids, st.booleans()),
    st.builds(lambda b: ("unfence", b), broker_ids),
    st.builds(
        lambda name, n, rf, seed: CreateTopics(
            (NewTopic(name, n, rf, (), topic_id=uuid.uuid4().bytes, placement_seed=seed),)
        ),
        st.sampled_from("abc"),
        st.integers(1, 4),
        st.integers(1, 3),
        st.integers(0, 2**31),
    ),
    st.builds(lambda name: DeleteTopics((name,), ()), st.sampled_from("abc")),
)


def resolve(step: Body | tuple, state: MetaState) -> Body:
    """Fence/unfence steps quote the broker's current epoch, as the leader would."""
    if not isinstance(step, tuple):
        return step
    broker = state.brokers.get(step[1])
    epoch = broker.epoch if broker else 0
    if step[0] == "fence":
        return FenceBroker(step[1], epoch, step[2])
    return UnfenceBroker(step[1], epoch, False)


def check_invariants(state: MetaState) -> None:
    for topic in state.topics.values():
        for p in topic.partitions:
            assert p.isr and set(p.isr) <= set(p.replicas)
            if p.leader != NO_LEADER:
                assert p.leader in p.isr and not state.brokers[p.leader].fenced


@settings(max_examples=150, deadline=None, database=None)
@given(st.lists(bodies, max_size=30), st.integers(0, 30))
def test_replay_from_any_point_reaches_the_same_state(steps: list, dump_at: int) -> None:
    """Replaying the log, or loading a dump and replaying the rest, gives the same state."""
    live = Machine()
    commands = []
    for step in steps:
        command = Command(uuid.uuid4().hex, NOW, resolve(step, live.state))
        commands.append(command)
        apply(live.state, command)
        check_invariants(live.state)

    replayed = MetaState()
    for i, command in enumerate(commands):
        if i == dump_at:
            replayed = pickle.loads(pickle.dumps(replayed))
        apply(replayed, command)
    assert replayed == live.state
