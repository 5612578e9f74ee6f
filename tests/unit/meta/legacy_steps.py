"""The commands behind ``fixtures/pickled-datadir``: a data dir of the format before metadata
records (pickled ``Command`` objects in the Raft log, a pickled ``MetaState`` in the dump).

Each step builds its command body from the state so far (epochs, partition epochs), so the
same steps replayed on a fresh ``MetaState`` reach the state the fixture holds.
"""

from __future__ import annotations

from collections.abc import Callable

from meta.commands import (
    AllocateProducerIds,
    AlterPartition,
    BalanceLeaders,
    Body,
    ControlledShutdown,
    CreateTopics,
    DeleteTopics,
    ElectLeaders,
    FenceBroker,
    InitCluster,
    RegisterBroker,
    RegisterGroups,
    UnfenceBroker,
    UnregisterGroups,
)
from meta.partition_leadership import ElectionType, IsrChange
from meta.state import MetaState
from meta.topic_planning import NewTopic

Step = Callable[[MetaState], Body]


def _topic_id(name: str) -> bytes:
    return name.encode().ljust(16, b"-")


def _shrink_isr(index: int, epoch_delta: int = 0) -> Step:
    """The leader of orders-``index`` drops the last other member of its ISR (quoting a stale
    broker epoch with ``epoch_delta``)."""

    def step(state: MetaState) -> AlterPartition:
        partition = state.topics["orders"].partitions[index]
        leader = partition.leader
        new_isr = (*[b for b in partition.isr if b != leader][:-1], leader)
        change = IsrChange(
            _topic_id("orders"), index, partition.leader_epoch, partition.partition_epoch, new_isr
        )
        return AlterPartition(leader, state.brokers[leader].epoch + epoch_delta, (change,))

    return step


BEFORE_DUMP: list[Step] = [
    lambda s: InitCluster("pickled-cluster-id"),
    lambda s: RegisterBroker(1, "h1", 9092, None, "h1:9392", b"incarnation-1", False),
    lambda s: RegisterBroker(2, "h2", 9092, "rack-b", "h2:9392", b"incarnation-2", False),
    lambda s: RegisterBroker(3, "h3", 9092, "", "h3:9392", b"incarnation-3", False),
    lambda s: CreateTopics(
        (
            NewTopic(
                "orders",
                2,
                3,
                (),
                {"retention.ms": "1000", "cleanup.policy": "compact"},
                topic_id=_topic_id("orders"),
                placement_seed=7,
            ),
            NewTopic("manual", 0, 0, ((0, (2, 3)), (1, (3, 1))), topic_id=_topic_id("manual")),
            NewTopic("bad name!", 1, 1, (), topic_id=_topic_id("bad")),  # refused
            NewTopic("__internal", 1, 2, (), internal=True, topic_id=_topic_id("internal")),
        )
    ),
    lambda s: AllocateProducerIds(1, s.brokers[1].epoch),
    lambda s: RegisterGroups((("g1", 3), ("g2", 7))),
    _shrink_isr(0),
    lambda s: FenceBroker(3, s.brokers[3].epoch, False),
]

AFTER_DUMP: list[Step] = [
    lambda s: UnfenceBroker(3, s.brokers[3].epoch, False),
    lambda s: ElectLeaders(ElectionType.PREFERRED, None),
    lambda s: ElectLeaders(ElectionType.UNCLEAN, (("orders", (0, 5)), ("nope", (0,)))),
    lambda s: BalanceLeaders(),
    lambda s: ControlledShutdown(2, s.brokers[2].epoch, False),
    lambda s: UnregisterGroups(("g2", "unknown")),
    lambda s: DeleteTopics(("manual",), (b"x" * 16,)),
    lambda s: AllocateProducerIds(2, s.brokers[2].epoch - 1),  # refused: stale epoch
    _shrink_isr(1),
    _shrink_isr(1, epoch_delta=-1),  # refused: stale epoch
    lambda s: RegisterBroker(3, "h3", 9093, "rack-c", "h3:9393", b"incarnation-3b", True),
]
