"""A stand-in for the coordinator runtime: heartbeats compute records, the harness logs and
replays them, and can rebuild the groups from the log alone."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerGroups,
    HeartbeatRequest,
    HeartbeatResponse,
)

GROUP = "g"


def topic(name: str, n: int) -> TopicMetadata:
    return TopicMetadata(name.encode().ljust(16, b"\x00")[:16], name, n)


def tid(name: str) -> bytes:
    return name.encode().ljust(16, b"\x00")[:16]


def parts(assignment) -> set[tuple[bytes, int]]:
    """(topic id, partition) pairs of a response assignment or a member's partitions map."""
    if assignment is None:
        return set()
    items = assignment.items() if isinstance(assignment, dict) else assignment
    return {(t, p) for t, ps in items for p in ps}


def owned_list(owned: set[tuple[bytes, int]]) -> tuple[tuple[bytes, tuple[int, ...]], ...]:
    by_topic: dict[bytes, list[int]] = {}
    for t, p in owned:
        by_topic.setdefault(t, []).append(p)
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))


class Harness:
    def __init__(self, topics: Sequence[TopicMetadata], config: ConsumerGroupConfig | None = None):
        ids = itertools.count()
        self.config = config or ConsumerGroupConfig()
        self.groups = ConsumerGroups(self.config, member_id_factory=lambda: f"gen-{next(ids)}")
        self.topics = {t.name: t for t in topics}
        self.log: list[tuple[bytes, bytes | None]] = []
        self.now = 1_000

    def set_topics(self, topics: Sequence[TopicMetadata]) -> None:
        self.topics = {t.name: t for t in topics}

    @property
    def group(self) -> ConsumerGroup:
        group = self.groups.get(GROUP)
        assert group is not None
        return group

    def apply(self, records) -> None:
        for key, value in records:
            self.log.append((key, value))
            assert self.groups.replay(key, value)

    def heartbeat(self, api_version: int = 1, **fields) -> HeartbeatResponse:
        req = HeartbeatRequest(group_id=fields.pop("group_id", GROUP), **fields)
        group = self.groups.get_or_new(req.group_id)
        response, records = group.heartbeat(
            req, self.now, self.topics, api_version=api_version, client_id="cli", client_host="/h"
        )
        self.apply(records)
        return response

    def join(self, member_id: str, topics=("t",), **fields) -> HeartbeatResponse:
        fields.setdefault("rebalance_timeout_ms", 30_000)
        return self.heartbeat(
            member_id=member_id,
            member_epoch=0,
            subscribed_topic_names=tuple(topics),
            topic_partitions=(),
            **fields,
        )

    def fence(self, member_id: str) -> None:
        self.apply(self.group.fence_member(member_id, self.now, self.topics))

    def rebuilt(self) -> ConsumerGroups:
        groups = ConsumerGroups(self.config)
        for key, value in self.log:
            groups.replay(key, value)
        return groups


class Client:
    """A consumer's side of the protocol: it owns what it was given, reports it, and revokes
    when the assignment shrinks (immediately, or when told to)."""

    def __init__(self, h: Harness, member_id: str, topics=("t",), instance_id=None, eager=True):
        self.h = h
        self.member_id = member_id
        self.topics = tuple(topics)
        self.instance_id = instance_id
        self.epoch = 0
        self.owned: set[tuple[bytes, int]] = set()
        self.assignment: set[tuple[bytes, int]] | None = None
        self.eager = eager
        self.last: HeartbeatResponse | None = None
        self.full_next = False
        """After a failed heartbeat the consumer sends a full one (all fields), as Kafka's
        clients do, and acts on no assignment until it is answered."""

    def heartbeat(self, **overrides) -> HeartbeatResponse:
        if self.epoch == 0:
            fields = dict(
                member_id=self.member_id,
                member_epoch=0,
                instance_id=self.instance_id,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=self.topics,
                topic_partitions=(),
            )
        else:
            fields = dict(
                member_id=self.member_id,
                member_epoch=self.epoch,
                topic_partitions=owned_list(self.owned),
            )
            if self.full_next:
                fields.update(
                    rebalance_timeout_ms=30_000,
                    subscribed_topic_names=self.topics,
                    instance_id=self.instance_id,
                )
        fields.update(overrides)
        response = self.h.heartbeat(**fields)
        self.full_next = False
        self.last = response
        self.epoch = response.member_epoch
        if response.assignment is not None:
            self.assignment = parts(response.assignment)
            if self.eager:
                self.reconcile()
        return response

    def reconcile(self) -> None:
        """Drop what is no longer assigned, take what is (the consumer's rebalance)."""
        if self.assignment is not None and not self.full_next:
            self.owned = set(self.assignment)

    def lose_response(self) -> None:
        """Send a heartbeat whose response never arrives."""
        self.h.heartbeat(
            member_id=self.member_id,
            member_epoch=self.epoch,
            topic_partitions=None if self.epoch == 0 else owned_list(self.owned),
            **(
                dict(
                    rebalance_timeout_ms=30_000,
                    subscribed_topic_names=self.topics,
                    instance_id=self.instance_id,
                )
                if self.epoch == 0 or self.full_next
                else {}
            ),
        )
        self.full_next = True

    def leave(self) -> HeartbeatResponse:
        response = self.h.heartbeat(
            member_id=self.member_id, member_epoch=-1, instance_id=self.instance_id
        )
        self.owned = set()
        self.epoch = 0
        return response
