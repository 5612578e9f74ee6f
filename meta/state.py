"""The replicated metadata state machine: ``MetaState`` and the commands that change it.

Every change of cluster metadata is one Raft command (a ``Command``) and ``apply`` is the only
code that changes a ``MetaState``. Applying the same commands in the same order yields the same
state on every node and on every replay, so a command carries all of its non-deterministic
inputs: the proposer's wall clock, the UUIDs and random seeds it generated, its config defaults.
Nothing here reads a clock, a random generator or a config.

Each change of a topic or a broker bumps ``MetaState.offset`` and is reported as a ``Change``;
Watch streams publish them. Commands are pickled into the Raft journal: renaming these classes
or their fields breaks existing data dirs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from meta import controller
from meta.controller import NewTopic, Rejection
from meta.model import Broker, Partition, Topic
from meta.protocol import ErrorCode
from meta.topic_config import unclean_election_enabled

log = logging.getLogger("rafka.meta.state")

# How long a request id is remembered, so a client retry of an applied write is not re-applied.
REQUEST_MEMORY_MS = 5 * 60 * 1000


@dataclass
class MetaState:
    cluster_id: str = ""  # set once, by the first Raft leader (InitCluster)
    offset: int = 0  # offset of the latest Change
    topics: dict[str, Topic] = field(default_factory=dict)
    brokers: dict[int, Broker] = field(default_factory=dict)
    # request id -> (now_ms of the command, its result), oldest first
    applied_requests: dict[str, tuple[int, Any]] = field(default_factory=dict)


# ---------------------------------------------------------------- commands


@dataclass(frozen=True)
class InitCluster:
    cluster_id: str


@dataclass(frozen=True)
class CreateTopics:
    topics: tuple[NewTopic, ...]


@dataclass(frozen=True)
class DeleteTopics:
    names: tuple[str, ...]
    topic_ids: tuple[bytes, ...]


@dataclass(frozen=True)
class RegisterBroker:
    broker_id: int
    host: str
    port: int
    rack: str | None
    replication_endpoint: str
    incarnation_id: bytes
    unclean_election_default: bool  # the proposer's unclean.leader.election.enable


@dataclass(frozen=True)
class FenceBroker:
    """Proposed by the Raft leader when a broker's lease expires."""

    broker_id: int
    epoch: int  # a fence of an older registration is ignored
    unclean_election_default: bool


@dataclass(frozen=True)
class UnfenceBroker:
    """Proposed when a fenced broker heartbeats again."""

    broker_id: int
    epoch: int
    unclean_election_default: bool


Body = InitCluster | CreateTopics | DeleteTopics | RegisterBroker | FenceBroker | UnfenceBroker


@dataclass(frozen=True)
class Command:
    request_id: str  # retries of one request reuse it; a remembered id is not applied again
    now_ms: int  # the proposer's wall clock
    body: Body


# ---------------------------------------------------------------- results


ChangeKind = Literal["topic", "topic_deleted", "broker"]


@dataclass(frozen=True)
class Change:
    offset: int
    kind: ChangeKind
    key: str | int  # topic name or broker id
    topic_id: bytes = b""  # of a deleted topic


@dataclass(frozen=True)
class DeleteOutcome:
    name: str
    topic_id: bytes
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True)
class Applied:
    result: Any
    changes: list[Change]


def apply(state: MetaState, command: Command) -> Applied:
    """Apply one command to ``state``; return its result and the changes it made."""
    _forget_requests_before(state, command.now_ms - REQUEST_MEMORY_MS)
    remembered = state.applied_requests.get(command.request_id)
    if remembered is not None:
        return Applied(remembered[1], [])
    changes = _Changes(state)
    result = _APPLIERS[type(command.body)](state, command.body, changes)
    state.applied_requests[command.request_id] = (command.now_ms, result)
    return Applied(result, changes.recorded)


def _forget_requests_before(state: MetaState, cutoff_ms: int) -> None:
    requests = state.applied_requests
    while requests:
        oldest = next(iter(requests))
        if requests[oldest][0] >= cutoff_ms:
            return
        del requests[oldest]


class _Changes:
    """Records what a command changed; each topic or broker once, with a new offset."""

    def __init__(self, state: MetaState) -> None:
        self._state = state
        self.recorded: list[Change] = []
        self._offsets: dict[tuple[ChangeKind, str | int], int] = {}

    def topic(self, name: str) -> None:
        self._record("topic", name)

    def topic_deleted(self, topic: Topic) -> None:
        self._record("topic_deleted", topic.name, topic.topic_id)

    def broker(self, broker_id: int) -> int:
        """Record a broker change; return its offset."""
        return self._record("broker", broker_id)

    def _record(self, kind: ChangeKind, key: str | int, topic_id: bytes = b"") -> int:
        if (kind, key) not in self._offsets:
            self._state.offset += 1
            self._offsets[kind, key] = self._state.offset
            self.recorded.append(Change(self._state.offset, kind, key, topic_id))
        return self._offsets[kind, key]


# ---------------------------------------------------------------- appliers


def _init_cluster(state: MetaState, cmd: InitCluster, changes: _Changes) -> str:
    if not state.cluster_id:  # only the first proposal counts
        state.cluster_id = cmd.cluster_id
        log.info("Cluster initialised with cluster id %s", cmd.cluster_id)
    return state.cluster_id


def _create_topics(
    state: MetaState, cmd: CreateTopics, changes: _Changes
) -> list[Topic | Rejection]:
    outcomes = controller.plan_topics(cmd.topics, state.topics, state.brokers)
    for outcome in outcomes:
        if isinstance(outcome, Topic):
            state.topics[outcome.name] = outcome
            changes.topic(outcome.name)
            log.info(
                "Created topic %s (id %s) with %d partition(s)",
                outcome.name,
                outcome.topic_id.hex(),
                len(outcome.partitions),
            )
    return outcomes


def _delete_topics(state: MetaState, cmd: DeleteTopics, changes: _Changes) -> list[DeleteOutcome]:
    by_id = {topic.topic_id: topic for topic in state.topics.values()}
    wanted: list[tuple[str, bytes, Topic | None, ErrorCode]] = [
        (name, b"", state.topics.get(name), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        for name in cmd.names
    ] + [
        ("", topic_id, by_id.get(topic_id), ErrorCode.UNKNOWN_TOPIC_ID)
        for topic_id in cmd.topic_ids
    ]
    outcomes = []
    for name, topic_id, topic, missing in wanted:
        if topic is None:
            what = f"topic {name}" if name else f"topic id {topic_id.hex()}"
            outcomes.append(DeleteOutcome(name, topic_id, missing, f"Unknown {what}."))
        elif topic.name not in state.topics:
            outcomes.append(
                DeleteOutcome(
                    topic.name,
                    topic.topic_id,
                    ErrorCode.INVALID_REQUEST,
                    f"Topic {topic.name} is named more than once in the request.",
                )
            )
        else:
            del state.topics[topic.name]
            changes.topic_deleted(topic)
            log.info("Deleted topic %s (id %s)", topic.name, topic.topic_id.hex())
            outcomes.append(DeleteOutcome(topic.name, topic.topic_id))
    return outcomes


def _register_broker(state: MetaState, cmd: RegisterBroker, changes: _Changes) -> int:
    old = state.brokers.get(cmd.broker_id)
    epoch = changes.broker(cmd.broker_id)  # like KRaft: the offset of the registration
    state.brokers[cmd.broker_id] = Broker(
        cmd.broker_id,
        cmd.host,
        cmd.port,
        cmd.rack,
        cmd.replication_endpoint,
        cmd.incarnation_id,
        epoch,
        fenced=True,
    )
    if old is not None and not old.fenced and old.incarnation_id != cmd.incarnation_id:
        # The old process died without being fenced: its leaderships and ISR memberships go,
        # exactly as if its lease had expired; it wins back offline partitions below.
        log.info(
            "Broker %d restarted (incarnation %s -> %s); moving its leaderships",
            cmd.broker_id,
            old.incarnation_id.hex(),
            cmd.incarnation_id.hex(),
        )
        _after_fencing(state, cmd.broker_id, cmd.unclean_election_default, changes)
    log.info("Registered broker %d at %s:%d, epoch %d", cmd.broker_id, cmd.host, cmd.port, epoch)
    _unfence_and_elect(state, cmd.broker_id, cmd.unclean_election_default, changes)
    return epoch


def _fence_broker(state: MetaState, cmd: FenceBroker, changes: _Changes) -> bool:
    broker = state.brokers.get(cmd.broker_id)
    if broker is None or broker.epoch != cmd.epoch or broker.fenced:
        return False
    state.brokers[broker.id] = replace(broker, fenced=True)
    changes.broker(broker.id)
    log.info("Fenced broker %d (epoch %d)", broker.id, broker.epoch)
    _after_fencing(state, broker.id, cmd.unclean_election_default, changes)
    return True


def _unfence_broker(state: MetaState, cmd: UnfenceBroker, changes: _Changes) -> bool:
    broker = state.brokers.get(cmd.broker_id)
    if broker is None or broker.epoch != cmd.epoch or not broker.fenced:
        return False
    log.info("Unfenced broker %d (epoch %d)", broker.id, broker.epoch)
    _unfence_and_elect(state, broker.id, cmd.unclean_election_default, changes)
    return True


def _after_fencing(
    state: MetaState, broker_id: int, unclean_default: bool, changes: _Changes
) -> None:
    """Move leadership and ISR membership off ``broker_id``, which is now fenced."""
    live = {broker.id for broker in state.brokers.values() if not broker.fenced}
    _update_partitions(
        state,
        changes,
        lambda topic, partition: controller.on_broker_fenced(
            partition,
            broker_id,
            live,
            unclean_election_enabled(topic.configs, unclean_default),
            topic.name,
        ),
    )


def _unfence_and_elect(
    state: MetaState, broker_id: int, unclean_default: bool, changes: _Changes
) -> None:
    """Unfence ``broker_id`` and make it leader of the offline partitions it can lead."""
    state.brokers[broker_id] = replace(state.brokers[broker_id], fenced=False)
    changes.broker(broker_id)
    _update_partitions(
        state,
        changes,
        lambda topic, partition: controller.on_broker_unfenced(
            partition,
            broker_id,
            unclean_election_enabled(topic.configs, unclean_default),
            topic.name,
        ),
    )


def _update_partitions(
    state: MetaState,
    changes: _Changes,
    decide: Callable[[Topic, Partition], Partition | None],
) -> None:
    for topic in list(state.topics.values()):
        decided = [decide(topic, partition) for partition in topic.partitions]
        if any(decided):
            partitions = tuple(
                new or old for new, old in zip(decided, topic.partitions, strict=True)
            )
            state.topics[topic.name] = replace(topic, partitions=partitions)
            changes.topic(topic.name)


_APPLIERS: dict[type, Callable[[MetaState, Any, _Changes], Any]] = {
    InitCluster: _init_cluster,
    CreateTopics: _create_topics,
    DeleteTopics: _delete_topics,
    RegisterBroker: _register_broker,
    FenceBroker: _fence_broker,
    UnfenceBroker: _unfence_broker,
}
