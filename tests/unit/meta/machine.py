"""A MetaState driven by plain commands, as the Raft layer drives it, for the state tests."""

from __future__ import annotations

import uuid
from typing import Any

from meta.commands import (
    AlterPartition,
    AlterPartitionOutcome,
    Body,
    Change,
    Command,
    ControlledShutdown,
    CreateTopics,
    FenceBroker,
    RegisterBroker,
    ShutdownOutcome,
    UnfenceBroker,
)
from meta.dispatch import apply
from meta.model import Partition, Topic
from meta.partition_leadership import IsrChange
from meta.state import MetaState
from meta.topic_planning import NewTopic

NOW = 1_700_000_000_000


class Machine:
    """A MetaState with helpers that wrap bodies into commands, as the Raft layer does."""

    def __init__(self) -> None:
        self.state = MetaState()
        self.changes: list[Change] = []

    def run(self, body: Body, request_id: str = "", now_ms: int = NOW) -> Any:
        """The command's result (its type depends on the body)."""
        applied = apply(self.state, Command(request_id or uuid.uuid4().hex, now_ms, body))
        self.changes += applied.changes
        return applied.result

    def register(self, broker_id: int, incarnation: bytes = b"one") -> int:
        body = RegisterBroker(broker_id, "h", 9092, None, "h:9392", incarnation, False)
        return self.run(body)

    def create(
        self, name: str, partitions: int = 1, rf: int = 1, assignments: tuple = (), **kw: Any
    ) -> Topic:
        topic_id = uuid.uuid4().bytes
        request = NewTopic(name, partitions, rf, assignments, topic_id=topic_id, **kw)
        [outcome] = self.run(CreateTopics((request,)))
        assert isinstance(outcome, Topic), outcome
        return outcome

    def fence(self, broker_id: int, unclean: bool = False) -> object:
        return self.run(FenceBroker(broker_id, self.state.brokers[broker_id].epoch, unclean))

    def unfence(self, broker_id: int, unclean: bool = False) -> object:
        return self.run(UnfenceBroker(broker_id, self.state.brokers[broker_id].epoch, unclean))

    def epoch(self, broker_id: int) -> int:
        return self.state.brokers[broker_id].epoch

    def partition(self, topic: str, index: int = 0) -> Partition:
        return self.state.topics[topic].partitions[index]

    def isr_change(self, topic: str, index: int, new_isr: tuple[int, ...]) -> IsrChange:
        """A change of the ISR quoting the partition's current epochs."""
        p = self.partition(topic, index)
        topic_id = self.state.topics[topic].topic_id
        return IsrChange(topic_id, index, p.leader_epoch, p.partition_epoch, new_isr)

    def alter(
        self, sender: int, *changes: IsrChange, broker_epoch: int | None = None, request_id=""
    ) -> AlterPartitionOutcome:
        epoch = self.epoch(sender) if broker_epoch is None else broker_epoch
        return self.run(AlterPartition(sender, epoch, changes), request_id)  # type: ignore[return-value]

    def shutdown(self, broker_id: int, unclean: bool = False) -> ShutdownOutcome:
        body = ControlledShutdown(broker_id, self.epoch(broker_id), unclean)
        return self.run(body)
