"""A group coordinator shard (in memory, manual clock) serving KIP-848 consumer groups:
heartbeats go through `GroupShard.consumer_group_heartbeat`, whose records are logged and
replayed as the broker does; the groups can be rebuilt from the log alone."""

from __future__ import annotations

from collections.abc import Sequence

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.base import GroupConfig
from dataplane.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    HeartbeatResponse,
)
from dataplane.coordinator.consumer_group_adapter import ConsumerGroupAdapter
from dataplane.coordinator.shard import GroupShard, LocalServices
from dataplane.coordinator.timer import ManualClock
from dataplane.log.records import Record
from dataplane.protocol.errors import KafkaError

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


def consumer_group(shard: GroupShard, group_id: str = GROUP) -> ConsumerGroup | None:
    """The shard's consumer group of that id, if there is one."""
    group = shard.groups.get(group_id)
    return group.group if isinstance(group, ConsumerGroupAdapter) else None


def new_shard(config: ConsumerGroupConfig, now: int) -> tuple[GroupShard, LocalServices]:
    services = LocalServices(GroupConfig(consumer=config), ManualClock(now))
    return services.attach(GroupShard(0, services)), services


class Harness:
    def __init__(self, topics: Sequence[TopicMetadata], config: ConsumerGroupConfig | None = None):
        self.config = config or ConsumerGroupConfig()
        self.shard, self.services = new_shard(self.config, 1_000)
        self.shard.on_loaded()
        self.set_topics(topics)

    # -- time and metadata ------------------------------------------------------------------

    @property
    def now(self) -> int:
        return self.services.clock.ms

    @now.setter
    def now(self, ms: int) -> None:
        self.services.clock.ms = ms

    @property
    def topics(self) -> dict[str, TopicMetadata]:
        return self.services.topic_metadata

    def set_topics(self, topics: Sequence[TopicMetadata]) -> None:
        self.services.topic_metadata = {t.name: t for t in topics}

    # -- the groups ---------------------------------------------------------------------------

    @property
    def log(self) -> list[tuple[bytes, bytes | None]]:
        """Every record appended to the partition, in order."""
        return self.services.log

    def consumer_group(self, group_id: str = GROUP) -> ConsumerGroup | None:
        return consumer_group(self.shard, group_id)

    @property
    def group(self) -> ConsumerGroup:
        group = self.consumer_group()
        assert group is not None
        return group

    def apply(self, records) -> None:
        """Write records as the coordinator does (append, replay); none may be refused."""
        skipped = self.shard.skipped_records
        self.shard.write(GROUP, records, replay=True)
        self.services.run_pending()
        assert self.shard.skipped_records == skipped, "a record did not replay"

    def heartbeat(self, api_version: int = 1, **fields) -> HeartbeatResponse:
        """A ConsumerGroupHeartbeat through the shard; an error response raises KafkaError."""
        req = HeartbeatRequest(group_id=fields.pop("group_id", GROUP), **fields)
        skipped = self.shard.skipped_records
        reply = self.shard.consumer_group_heartbeat(req, api_version, "cli", "/h")
        self.services.run_pending()
        assert self.shard.skipped_records == skipped, "a record did not replay"
        response = reply.value
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
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

    def rebuilt(self, now: int | None = None) -> GroupShard:
        """A new shard that loaded the log (on_loaded not called yet)."""
        shard, services = new_shard(self.config, self.now if now is None else now)
        services.topic_metadata = self.topics
        for key, value in self.log:
            services.log.append((key, value))
            shard.replay(Record(len(services.log) - 1, 0, key, value, ()))
        assert shard.skipped_records == 0
        return shard

    def rebuilt_group(self) -> ConsumerGroup | None:
        return consumer_group(self.rebuilt())


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
