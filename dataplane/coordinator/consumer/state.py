"""A KIP-848 consumer group's state as its records build it: Kafka's ConsumerGroup, changed
only by replaying records (Kafka's `GroupMetadataManager.replay` methods), so a group rebuilt
from its records equals the original. `group.ConsumerGroup` computes those records."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

from dataplane.coordinator.consumer import records as rec
from dataplane.coordinator.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ConsumerGroupConfig,
    GroupState,
    Member,
    ResolvedRegex,
    TopicPartitionsMap,
    from_records,
)
from dataplane.protocol.message_codec import record_type


class IllegalStateError(RuntimeError):
    """Records that contradict the state (Kafka's IllegalStateException on replay)."""


class ConsumerGroupState:
    """One consumer group's hard state (from records) and the indexes derived from it."""

    def __init__(self, group_id: str, config: ConsumerGroupConfig) -> None:
        self.group_id = group_id
        self.config = config
        # hard state (from records)
        self.exists = False
        """Whether a record has created the group (and no tombstone deleted it since)."""
        self.deleted = False
        # A new group starts at epoch 1 (Kafka 4.4's ModernGroup and TargetAssignmentMetadata.
        # INITIAL): its first member's join bumps it to 2.
        self.group_epoch = 1
        self.metadata_hash = 0
        self.creation_time_ms = -1
        self.assignment_epoch = 1
        self.members: dict[str, Member] = {}
        self.target: dict[str, TopicPartitionsMap] = {}
        self.static_members: dict[str, str] = {}
        self.resolved_regexes: dict[str, ResolvedRegex] = {}
        self.legacy_partition_metadata: rec.PartitionMetadataValue | None = None
        # derived from the hard state
        self._owners: dict[tuple[bytes, int], tuple[str, int]] = {}
        self.name_counts: Counter[str] = Counter()
        self.regex_counts: Counter[str] = Counter()
        self.assignor_counts: Counter[str] = Counter()

    # -- queries --------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        if self.deleted:
            return GroupState.DEAD
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        for m in self.members.values():
            if not m.is_reconciled_to(self.assignment_epoch):
                return GroupState.RECONCILING
        return GroupState.STABLE

    @property
    def state_name(self) -> str:
        """For ListGroups (group type "consumer", protocol type "consumer")."""
        return self.state.value

    @property
    def is_empty(self) -> bool:
        return self.state in (GroupState.EMPTY, GroupState.DEAD)

    def subscribed_topic_names(self) -> frozenset[str]:
        """Every topic some member subscribes to, by name or through a resolved regex."""
        names = set(self.name_counts)
        for regex in self.regex_counts:
            resolved = self.resolved_regexes.get(regex)
            if resolved is not None:
                names |= resolved.topics
        return frozenset(names)

    def owner(self, topic_id: bytes, partition: int) -> tuple[str, int] | None:
        """(member id, member epoch) owning a partition (assigned or being revoked), or None."""
        return self._owners.get((topic_id, partition))

    def snapshot(self) -> dict[str, Any]:
        """The hard state, comparable between a group and one rebuilt from its records."""
        return {
            "exists": self.exists,
            "group_epoch": self.group_epoch,
            "metadata_hash": self.metadata_hash,
            "creation_time_ms": self.creation_time_ms,
            "assignment_epoch": self.assignment_epoch,
            "members": dict(self.members),
            "target": dict(self.target),
            "static_members": dict(self.static_members),
            "resolved_regexes": dict(self.resolved_regexes),
            "legacy_partition_metadata": self.legacy_partition_metadata,
            "owners": dict(self._owners),
            "state": self.state,
        }

    # -- replay -----------------------------------------------------------------------------

    def replay_record(self, key: bytes, value: bytes | None) -> None:
        """Apply one encoded record of this group."""
        decoded = rec.decode(key, value)
        if decoded is None:
            raise ValueError(f"record type {record_type(key)} is not a consumer group record")
        self.replay(*decoded)

    def replay(self, key: rec.Key, value: rec.Value | None) -> None:
        """Apply one decoded record (Kafka's `GroupMetadataManager.replay` methods)."""
        if key.group_id != self.group_id:
            raise ValueError(f"record of group {key.group_id} replayed on {self.group_id}")
        if value is None and not self.exists:
            return  # a tombstone for a group that is not there
        if value is not None:
            self.exists = True
            self.deleted = False
        if isinstance(key, rec.MemberKey):
            self._replay_member(key, value)
        elif isinstance(key, rec.RegexKey):
            if isinstance(value, rec.RegularExpressionValue):
                self.resolved_regexes[key.regex] = ResolvedRegex(
                    frozenset(value.topics), value.version, value.timestamp
                )
            else:
                self.resolved_regexes.pop(key.regex, None)
        elif key.type == rec.GROUP_METADATA:
            if isinstance(value, rec.ConsumerGroupMetadataValue):
                self.group_epoch = value.epoch
                self.metadata_hash = value.metadata_hash
                self.creation_time_ms = value.creation_time_ms
            else:
                self._delete()
        elif key.type == rec.PARTITION_METADATA:
            self.legacy_partition_metadata = (
                value if isinstance(value, rec.PartitionMetadataValue) else None
            )
        elif key.type == rec.TARGET_ASSIGNMENT_METADATA:
            if isinstance(value, rec.TargetAssignmentMetadataValue):
                self.assignment_epoch = value.assignment_epoch
            else:
                if self.target:
                    raise IllegalStateError(
                        f"Received a tombstone record to delete target assignment of "
                        f"{self.group_id} but the assignment still has {len(self.target)} "
                        "members."
                    )
                self.assignment_epoch = -1

    def _replay_member(self, key: rec.MemberKey, value: rec.Value | None) -> None:
        member_id = key.member_id
        old = self.members.get(member_id)
        if key.type == rec.MEMBER_METADATA:
            if isinstance(value, rec.MemberMetadataValue):
                self._set_member(old, (old or Member(member_id)).with_subscription(value))
            elif old is not None:
                if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
                    raise IllegalStateError(
                        f"Received a tombstone record to delete member {member_id} but did not "
                        "receive ConsumerGroupCurrentMemberAssignmentValue tombstone."
                    )
                if member_id in self.target:
                    raise IllegalStateError(
                        f"Received a tombstone record to delete member {member_id} but did not "
                        "receive ConsumerGroupTargetAssignmentMetadataValue tombstone."
                    )
                self._set_member(old, None)
        elif key.type == rec.TARGET_ASSIGNMENT_MEMBER:
            if isinstance(value, rec.TargetAssignmentMemberValue):
                self.target[member_id] = from_records(value.topic_partitions)
            else:
                self.target.pop(member_id, None)
        elif key.type == rec.CURRENT_MEMBER_ASSIGNMENT:
            if isinstance(value, rec.CurrentMemberAssignmentValue):
                self._set_member(old, (old or Member(member_id)).with_assignment(value))
            elif old is not None:
                self._set_member(
                    old,
                    dataclasses.replace(
                        old,
                        member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                        assigned_partitions={},
                        partitions_pending_revocation={},
                    ),
                )

    def _set_member(self, old: Member | None, new: Member | None) -> None:  # noqa: C901 - one step per derived index
        """Replace `old` by `new` (None: remove), keeping the derived indexes in step."""
        if old is not None:
            self.name_counts.subtract(old.subscribed_topic_names)
            if old.regex:
                self.regex_counts[old.regex] -= 1
            if old.server_assignor:
                self.assignor_counts[old.server_assignor] -= 1
            for topic_id, parts in (
                *old.assigned_partitions.items(),
                *old.partitions_pending_revocation.items(),
            ):
                for p in parts:
                    if self._owners.get((topic_id, p)) != (old.member_id, old.member_epoch):
                        raise IllegalStateError(
                            f"{old.member_id} releases {topic_id.hex()}-{p} it does not own at "
                            f"epoch {old.member_epoch}: {self._owners.get((topic_id, p))}"
                        )
                    del self._owners[(topic_id, p)]
            if old.instance_id and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
            del self.members[old.member_id]
        if new is not None:
            self.name_counts.update(new.subscribed_topic_names)
            if new.regex:
                self.regex_counts[new.regex] += 1
            if new.server_assignor:
                self.assignor_counts[new.server_assignor] += 1
            for topic_id, parts in (
                *new.assigned_partitions.items(),
                *new.partitions_pending_revocation.items(),
            ):
                for p in parts:
                    owner = self._owners.get((topic_id, p))
                    if owner is not None:
                        raise IllegalStateError(
                            f"Cannot give {topic_id.hex()}-{p} to {new.member_id} at epoch "
                            f"{new.member_epoch}: still owned by {owner[0]} at epoch {owner[1]}"
                        )
                    self._owners[(topic_id, p)] = (new.member_id, new.member_epoch)
            if new.instance_id is not None:
                self.static_members[new.instance_id] = new.member_id
            self.members[new.member_id] = new
        for counter in (self.name_counts, self.regex_counts, self.assignor_counts):
            for k in [k for k, c in counter.items() if c <= 0]:
                del counter[k]

    def _delete(self) -> None:
        if self.members:
            raise IllegalStateError(
                f"Received a tombstone record to delete group {self.group_id} but the group "
                f"still has {len(self.members)} members."
            )
        if self.target:
            raise IllegalStateError(
                f"Received a tombstone record to delete group {self.group_id} but the target "
                f"assignment still has {len(self.target)} members."
            )
        if self.assignment_epoch != -1:
            raise IllegalStateError(
                f"Received a tombstone record to delete group {self.group_id} but did not "
                "receive ConsumerGroupTargetAssignmentMetadataValue tombstone."
            )
        self.__dict__.update(self._fresh().__dict__)
        self.deleted = True

    def _fresh(self) -> ConsumerGroupState:
        """A group of this id as it is before any record (what a deleted group becomes)."""
        return ConsumerGroupState(self.group_id, self.config)
