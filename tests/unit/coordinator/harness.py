"""A group shard driven synchronously: in-memory writes, a manual clock, timers fired by hand."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from dataplane.coordinator.base import GroupConfig, Reply
from dataplane.coordinator.group import ClassicGroup, JoinRequest, JoinResult, SyncResult
from dataplane.coordinator.shard import CommitPartition, GroupShard, LocalServices
from dataplane.log.records import Record
from dataplane.protocol.errors import ErrorCode

E = ErrorCode


def subscription(*topics: str) -> bytes:
    """The "consumer" protocol's member metadata (ConsumerProtocolSubscription v0)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


RANGE = (("range", subscription("t")),)


class Harness:
    def __init__(self, **config: int) -> None:
        defaults = {"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 1}
        self.services = LocalServices(GroupConfig(**(defaults | config)))
        self.shard = self.services.attach(GroupShard(0, self.services))
        self.shard.on_loaded()

    # -- time -------------------------------------------------------------------------------

    @property
    def now(self) -> int:
        return self.services.clock.now()

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
        return {(t.topic, p.partition): p.offset.offset for t in fetched for p in t.partitions}

    def group(self, group_id: str = "g") -> ClassicGroup:
        g = self.shard.groups[group_id]
        assert isinstance(g, ClassicGroup)
        return g

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
        assert self.group().state_name == "Stable"
        return ids

    def replayed(self) -> GroupShard:
        """A fresh shard loaded from everything written so far."""
        services = LocalServices(self.services.config, self.services.clock)
        shard = services.attach(GroupShard(0, services))
        for offset, (key, value) in enumerate(self.services.log):
            shard.replay(Record(offset, self.now, key, value, ()))
        shard.on_loaded()
        return shard


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
