"""The hooks the KIP-848 family of groups (consumer, share and streams groups) answer alike in a
shard, and their members' session and rebalance deadlines on the shard's timer (Kafka's
ModernGroup): `ModernGroupAdapter` is the base of `consumer.adapter.ConsumerGroupAdapter`,
`share.adapter.ShareGroupAdapter` and `streams.adapter.StreamsGroupAdapter`."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.base import Group, ShardServices
from dataplane.protocol.errors import ErrorCode, KafkaError

# The consumer group's logger, as before share and streams groups shared this code.
log = logging.getLogger("rafka.coordinator.consumer_group")

FENCE_RETRY_MS = 1000
"""A member whose fencing records could not be appended is fenced again this much later."""


class ModernGroup(Protocol):
    """What `ModernGroupAdapter` needs of the pure logic of a KIP-848-style group (consumer,
    share or streams): its state name, deletion records and member deadlines."""

    group_id: str
    deleted: bool

    @property
    def state_name(self) -> str: ...
    @property
    def is_empty(self) -> bool: ...
    @property
    def members(self) -> Mapping[str, Any]: ...
    def validate_delete(self) -> None: ...
    def tombstones(self) -> list[tuple[bytes, bytes | None]]: ...
    def on_loaded(self, now_ms: int) -> None: ...
    def next_deadline_ms(self) -> int | None: ...
    def expired_members(self, now_ms: int) -> list[str]: ...
    def postpone_expiry(self, member_id: str, deadline_ms: int) -> None: ...
    def fence_members(
        self, member_ids: Sequence[str], now_ms: int, topics: Mapping[str, TopicMetadata]
    ) -> list[tuple[bytes, bytes | None]]: ...


class ModernGroupAdapter(Group):
    """A group of the KIP-848 protocol family in a shard: the hooks they answer alike, and
    their members' deadlines on the shard's timer (expired members are fenced one at a time)."""

    EXPIRY_TIMER = "expiry"  # the shard timer key's prefix

    def __init__(self, group: ModernGroup, ctx: ShardServices) -> None:
        super().__init__(group.group_id)
        self.modern = group
        self.ctx = ctx
        self._timer_at: int | None = None  # the wall-clock ms the expiry timer fires at
        self._expiry_key = f"{self.EXPIRY_TIMER}-{group.group_id}"

    @property
    def state_name(self) -> str:
        return self.modern.state_name

    def is_empty(self) -> bool:
        return self.modern.is_empty

    def validate_delete(self) -> ErrorCode:
        try:
            self.modern.validate_delete()
        except KafkaError as e:
            return e.code
        return ErrorCode.none

    def tombstones(self) -> list[tuple[bytes, bytes | None]]:
        return self.modern.tombstones()

    def on_loaded(self) -> None:
        self.modern.on_loaded(self.ctx.now_ms())
        self.schedule_expiry()

    def unload(self) -> None:
        self.ctx.timer.cancel(self._expiry_key)
        self._timer_at = None

    def schedule_expiry(self) -> None:
        """Set the shard timer to the group's earliest member deadline (a later one is left
        alone: the timer fires, finds nobody expired and moves on to the next deadline)."""
        key = self._expiry_key
        deadline = self.modern.next_deadline_ms()
        timer = self.ctx.timer
        if deadline is None:
            if self._timer_at is not None:
                timer.cancel(key)
                self._timer_at = None
            return
        if self._timer_at is not None and self._timer_at <= deadline and timer.is_scheduled(key):
            return
        self._timer_at = deadline
        timer.schedule(key, deadline - self.ctx.now_ms(), self._expire)

    def _expire(self) -> None:
        self._timer_at = None
        group = self.modern
        if group.deleted:
            return
        now = self.ctx.now_ms()
        for member_id in group.expired_members(now):
            if member_id not in group.members:
                continue
            member = group.members[member_id]
            records = group.fence_members([member_id], now, self.ctx.topics())
            log.info(
                "group %s: member %s (epoch %d) fenced: session or rebalance timeout expired",
                self.group_id,
                member_id,
                member.member_epoch,
            )
            error = self.ctx.write(self.group_id, records, replay=True)
            if error is not None:
                log.info("group %s: fencing %s postponed: %s", self.group_id, member_id, error)
                group.postpone_expiry(member_id, now + FENCE_RETRY_MS)
        self.schedule_expiry()
