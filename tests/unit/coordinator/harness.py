"""A group shard driven synchronously (in-memory writes replayed as the broker does, a manual
clock, timers fired by hand), with requests of both group protocols: the classic JoinGroup,
SyncGroup, Heartbeat and OffsetCommit, and KIP-848's ConsumerGroupHeartbeat with a model of
its consumer (`Client`)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import pytest

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.base import GroupConfig, JoinRequest, JoinResult, Reply, SyncResult
from dataplane.coordinator.classic.group import ClassicGroup
from dataplane.coordinator.consumer.adapter import ConsumerGroupAdapter
from dataplane.coordinator.consumer.group import (
    ConsumerGroup,
    ConsumerGroupConfig,
    HeartbeatRequest,
    HeartbeatResponse,
)
from dataplane.coordinator.offsets import CommitPartition
from dataplane.coordinator.shard import GroupShard
from dataplane.log.records import Record
from dataplane.protocol.errors import ErrorCode, KafkaError

from .support import LocalServices, ManualClock

E = ErrorCode
GROUP = "g"


def subscription(*topics: str) -> bytes:
    """The "consumer" protocol's member metadata (ConsumerProtocolSubscription v0)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


RANGE = (("range", subscription("t")),)


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


class Harness:
    """A loaded shard with `topics` in the cluster, the group settings Kafka's defaults but for
    `config` (and the classic group's initial rebalance delay 0, sessions from 1 ms)."""

    def __init__(
        self,
        topics: Sequence[TopicMetadata] = (),
        consumer: ConsumerGroupConfig | None = None,
        **config: int,
    ) -> None:
        # int settings only (**config), but mypy would match them against consumer/share/streams
        defaults: dict[str, Any] = {"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 1}
        group_config = GroupConfig(
            **(defaults | config), consumer=consumer or ConsumerGroupConfig()
        )
        self.services = LocalServices(group_config)
        self.shard = self.services.attach(GroupShard(0, self.services))
        self.shard.on_loaded()
        self.set_topics(topics)

    # -- time and metadata --------------------------------------------------------------------

    @property
    def now(self) -> int:
        return self.services.clock.now()

    @now.setter
    def now(self, ms: int) -> None:
        """Move the clock without firing timers (`advance` fires them)."""
        self.services.clock.ms = ms

    @property
    def topics(self) -> dict[str, TopicMetadata]:
        return self.services.topic_metadata

    def set_topics(self, topics: Sequence[TopicMetadata]) -> None:
        self.services.topic_metadata = {t.name: t for t in topics}

    def settle(self) -> None:
        """Fire due timers and complete pending writes until nothing is left to do."""
        while self.shard.timer.fire_due() + self.services.run_pending():
            pass

    def advance(self, ms: int) -> None:
        """Move time in steps, so every deadline in between fires at its own time."""
        target = self.now + ms
        while True:
            self.settle()
            deadline = self.shard.timer.next_deadline()
            if deadline is None or deadline > target:
                break
            self.services.clock.ms = max(self.now, deadline)
        self.services.clock.ms = target
        self.settle()

    # -- requests ---------------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        protocols: Sequence[tuple[str, bytes]] = RANGE,
        version: int = 9,
        session: int = 10_000,
        rebalance: int = 30_000,
        client: str = "client",
        protocol_type: str = "consumer",
    ) -> Reply[JoinResult]:
        reply = self.shard.join_group(
            JoinRequest(
                group,
                member_id,
                instance,
                client,
                "/127.0.0.1",
                session,
                rebalance,
                protocol_type,
                tuple(protocols),
                version,
            )
        )
        return reply

    def new_member(self, **kw: object) -> Reply[JoinResult]:
        """A v4+ dynamic member's two joins (MEMBER_ID_REQUIRED, then with the given id)."""
        first = self.join(**kw)  # type: ignore[arg-type]
        assert first.value.error == E.member_id_required, first.value
        return self.join(first.value.member_id, **kw)  # type: ignore[arg-type]

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
        protocol_type: str | None = "consumer",
        protocol_name: str | None = "range",
    ) -> Reply[SyncResult]:
        reply = self.shard.sync_group(
            group,
            member_id,
            instance,
            generation,
            protocol_type,
            protocol_name,
            assignments or {},
        )
        return reply

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None
    ) -> ErrorCode:
        return self.shard.heartbeat(group, member_id, instance, generation)

    def start_commit(
        self,
        member_id: str,
        generation: int,
        offsets: dict[tuple[str, int], int],
        *,
        group: str = "g",
        instance: str | None = None,
        version: int = 9,
        metadata: str = "",
        commit_timestamp: int = -1,
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode], Reply[ErrorCode] | None]:
        """An OffsetCommit as the handler makes it: validated, then written; the reply
        completes once the write is replicated (None: nothing to write)."""
        error, errors, records = self.shard.commit_offsets(
            group,
            member_id,
            instance,
            generation,
            version,
            [
                CommitPartition(t, p, o, -1, metadata, commit_timestamp)
                for (t, p), o in offsets.items()
            ],
        )
        return error, errors, self.shard.store_offsets(group, records) if records else None

    def commit(
        self, member_id: str, generation: int, offsets: dict[tuple[str, int], int], **kw: Any
    ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """`start_commit` and the completion of its write: (error, partition errors), the
        write's error as the group-level one if it failed."""
        error, errors, stored = self.start_commit(member_id, generation, offsets, **kw)
        self.services.run_pending()
        if stored is not None and stored.done and stored.value != E.none:
            return stored.value, errors
        return error, errors

    def committed(self, group: str = "g") -> dict[tuple[str, int], int]:
        _, fetched = self.shard.fetch_offsets(group, None)
        return {
            (t.topic, p.partition): p.offset.offset
            for t in fetched
            for p in t.partitions
            if p.offset is not None
        }

    def classic_group(self, group_id: str = GROUP) -> ClassicGroup:
        g = self.shard.groups[group_id]
        assert isinstance(g, ClassicGroup)
        return g

    # -- KIP-848 consumer groups ---------------------------------------------------------------

    @property
    def log(self) -> list[tuple[bytes, bytes | None]]:
        """Every record appended to the partition, in order."""
        return self.services.log

    def consumer_group(self, group_id: str = GROUP) -> ConsumerGroup:
        group = consumer_group(self.shard, group_id)
        assert group is not None
        return group

    def apply(self, records) -> None:
        """Write records as the coordinator does (append, replay); none may be refused."""
        skipped = self.shard.skipped_records
        self.services.write(GROUP, records, replay=True)
        self.services.run_pending()
        assert self.shard.skipped_records == skipped, "a record did not replay"

    def consumer_group_heartbeat(self, api_version: int = 1, **fields) -> HeartbeatResponse:
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

    def consumer_join(self, member_id: str, topics=("t",), **fields) -> HeartbeatResponse:
        fields.setdefault("rebalance_timeout_ms", 30_000)
        return self.consumer_group_heartbeat(
            member_id=member_id,
            member_epoch=0,
            subscribed_topic_names=tuple(topics),
            topic_partitions=(),
            **fields,
        )

    def fence(self, member_id: str) -> None:
        self.apply(self.consumer_group().fence_members([member_id], self.now, self.topics))

    # -- a whole rebalance ------------------------------------------------------------------

    def stable_group(self, members: int, **kw: object) -> list[str]:
        """`members` dynamic members in a Stable group (member i assigned b"a<i>"); their ids,
        the leader first."""
        replies = [self.new_member(**kw) for _ in range(members)]  # type: ignore[arg-type]
        self.settle()
        results = [r.value for r in replies]
        assert all(r.error == E.none for r in results), results
        leader = results[0].leader
        ids = sorted((r.member_id for r in results), key=lambda m: m != leader)
        generation = results[0].generation_id
        assignments = {m: f"a{i}".encode() for i, m in enumerate(ids)}
        syncs = [self.sync(m, generation, assignments if m == leader else None) for m in ids]
        self.settle()
        assert all(s.value.error == E.none for s in syncs), [s.value for s in syncs]
        assert self.classic_group().state_name == "Stable"
        return ids

    def replayed(self, *, now: int | None = None, loaded: bool = True) -> GroupShard:
        """A fresh shard that replayed everything written so far, at `now` (default: the
        harness's time); `loaded=False`: before its `on_loaded`."""
        clock = self.services.clock if now is None else ManualClock(now)
        services = LocalServices(self.services.config, clock)
        services.topic_metadata = self.topics
        shard = services.attach(GroupShard(0, services))
        for offset, (key, value) in enumerate(self.services.log):
            shard.replay(Record(offset, self.now, key, value, ()))
        assert shard.skipped_records == 0
        if loaded:
            shard.on_loaded()
        return shard

    def replayed_consumer_group(self) -> ConsumerGroup | None:
        return consumer_group(self.replayed(loaded=False))


def snapshot(group: ClassicGroup) -> dict:
    """What a GroupMetadata record keeps of a group (what a replay must give back)."""
    return {
        "state": group.state_name,
        "generation": group.generation,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol_name,
        "leader": group.leader_id,
        "members": {
            m.member_id: (
                m.group_instance_id,
                m.client_id,
                m.session_timeout_ms,
                m.rebalance_timeout_ms,
                m.metadata(group.protocol_name),
                m.assignment,
            )
            for m in group.members.values()
        },
    }


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

    def heartbeat(self, report: bool = True, **overrides) -> HeartbeatResponse:
        """`report=False`: an incremental heartbeat leaves out the owned partitions (unchanged
        since the last one). A full heartbeat (joining, or the first after a failed one) always
        lists them: Kafka's consumer resets its sent fields on a failure and resends them all,
        and only a heartbeat with all of them is answered with the whole assignment."""
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
            elif not report:
                fields["topic_partitions"] = None
        fields.update(overrides)
        response = self.h.consumer_group_heartbeat(**fields)
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
        self.h.consumer_group_heartbeat(
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
        response = self.h.consumer_group_heartbeat(
            member_id=self.member_id, member_epoch=-1, instance_id=self.instance_id
        )
        self.owned = set()
        self.epoch = 0
        return response


# -- consumer group (KIP-848) tests' helpers ----------------------------------------------------

T = tid("t")


def all_parts(n: int, name: str = "t") -> set[tuple[bytes, int]]:
    return {(tid(name), p) for p in range(n)}


def settle(clients, rounds: int = 10) -> None:
    for _ in range(rounds):
        for c in clients:
            c.heartbeat()


def assert_disjoint(clients) -> None:
    seen: set[tuple[bytes, int]] = set()
    for c in clients:
        assert not (c.owned & seen), "a partition is owned twice"
        seen |= c.owned


def assert_replay_equal(h: Harness) -> None:
    rebuilt = h.replayed_consumer_group()
    assert rebuilt is not None
    assert rebuilt.snapshot() == h.consumer_group().snapshot()


def raises(code: ErrorCode, message: str | None = None):
    class Ctx:
        def __enter__(self):
            self.cm = pytest.raises(KafkaError)
            self.info = self.cm.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.cm.__exit__(*exc)
            assert self.info.value.code == code, self.info.value
            if message is not None:
                assert self.info.value.message == message
            return handled

    return Ctx()
