"""The types the parts of share groups exchange: a group's share settings (resolved from its
GROUP configs over the broker's `group.share.*` defaults) and the durable state of one
share-partition, as the share coordinator stores it (Kafka's ShareSnapshotValue)."""

from __future__ import annotations

import base64
import binascii
import enum
import re
import uuid
from dataclasses import dataclass
from typing import Protocol

from dataplane.protocol.primitives import uuid_string


class DeliveryState(enum.IntEnum):
    """A record's state in a share-partition; the durable ones are AVAILABLE (delivered and
    released, or never delivered), ACKNOWLEDGED and ARCHIVED (Kafka's RecordState ids)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge acknowledge types (0 marks a gap: no record there)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@dataclass(frozen=True)
class ShareGroupSettings:
    """What a share-partition needs of its group's configuration."""

    record_lock_duration_ms: int
    delivery_count_limit: int
    # "earliest", "latest" or "by_duration:<ISO-8601 duration>" (share.auto.offset.reset)
    auto_offset_reset: str
    # 0 read_uncommitted, 1 read_committed (share.isolation.level)
    isolation_level: int
    partition_max_record_locks: int


class GroupSettings(Protocol):
    """Resolves a group's share settings (its GROUP configs over the broker defaults); cheap
    enough to call on every ShareFetch."""

    def share(self, group_id: str) -> ShareGroupSettings: ...


@dataclass(frozen=True)
class StateBatch:
    """A run of offsets [first_offset, last_offset] with one state and delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: DeliveryState
    delivery_count: int


@dataclass(frozen=True)
class ShareState:
    """The durable state of a share-partition: every offset before `start_offset` is done;
    from it on, offsets in `batches` have the batch's state, any other offset is AVAILABLE
    with delivery count 0. `leader_epoch` is the epoch of the user partition's leader that
    wrote it (a write from an older epoch is fenced); `state_epoch` grows when the state is
    re-initialised (AlterShareGroupOffsets, DeleteShareGroupOffsets)."""

    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True)
class SharePartitionKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    def coordinator_key(self) -> str:
        """Kafka's share coordinator key "group:topicId:partition", the topic id as Kafka
        prints it: where the key's state lives in __share_group_state, as in Kafka."""
        return f"{self.group_id}:{uuid_string(self.topic_id.bytes)}:{self.partition}"

    @classmethod
    def parse(cls, key: str) -> SharePartitionKey:
        """A coordinator key read back, as Kafka's SharePartitionKey.getInstance reads it
        (from the right: the group id may hold colons); ValueError says what is wrong."""
        tokens = key.split(":")
        while tokens and not tokens[-1]:
            tokens.pop()  # Java's String.split drops trailing empty strings
        if len(tokens) < 3:
            raise ValueError(
                f"Invalid key format: expected - groupId:topicId:partition, found - {key}"
            )
        group_id, topic_id, partition = ":".join(tokens[:-2]), tokens[-2], tokens[-1]
        if not group_id.strip():
            raise ValueError("GroupId must not be empty")
        try:
            raw = base64.b64decode(topic_id + "=" * (-len(topic_id) % 4), b"-_", validate=True)
        except binascii.Error:
            raw = b""
        if len(topic_id) > 24 or len(raw) != 16:
            raise ValueError(f"Invalid topic ID: {topic_id}")
        if not _INT.fullmatch(partition) or not -(2**31) <= int(partition) < 2**31:
            raise ValueError(f"Invalid partition: {partition}")
        return cls(group_id, uuid.UUID(bytes=raw), int(partition))


_INT = re.compile(r"[+-]?[0-9]+")


class Persister(Protocol):
    """Durable share-partition state through the share coordinator (wherever it runs: this
    broker or another, over the replication gRPC port). Every method retries
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE within its
    deadline, then raises KafkaError; a write resolves only once the state is replicated
    (acks=all on __share_group_state)."""

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        """The state, None when never initialised. Records `leader_epoch` as the partition's
        current leader epoch: later writes from lower epochs are FENCED_LEADER_EPOCH."""
        ...

    async def write(self, key: SharePartitionKey, state: ShareState) -> None:
        """Replace the state (the whole in-flight window: batches not listed are AVAILABLE
        with count 0). KafkaError FENCED_LEADER_EPOCH when state.leader_epoch is older than
        the stored one, FENCED_STATE_EPOCH when state.state_epoch is older."""
        ...

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> ShareState:
        """Set a fresh state at `start_offset` (no batches), state epoch one above the old one
        (AlterShareGroupOffsets; a first ShareFetch of an uninitialised partition)."""
        ...

    async def delete(self, key: SharePartitionKey) -> None:
        """Forget the state (DeleteShareGroupOffsets, DeleteGroups)."""
        ...

    async def summary(self, key: SharePartitionKey) -> ShareState | None:
        """The state without claiming a leader epoch (DescribeShareGroupOffsets, lag)."""
        ...
