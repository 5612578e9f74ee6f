"""The KIP-932 share group records of `__consumer_offsets`, in Kafka's coordinator record format
(see consumer/records.py: int16 type + key message; int16 version + flexible value):

    10 ShareGroupMemberMetadata           key GroupId, MemberId   value rack, client, topics
    11 ShareGroupMetadata                 key GroupId             value Epoch; tag 0 MetadataHash
    12 ShareGroupTargetAssignmentMetadata key GroupId             value AssignmentEpoch
    13 ShareGroupTargetAssignmentMember   key GroupId, MemberId   value TopicPartitions[]
    14 ShareGroupCurrentMemberAssignment  key GroupId, MemberId   value epochs, state, partitions
    15 ShareGroupStatePartitionMetadata   key GroupId             value the topics whose
                                                                  share-partition state exists

Type 9 (ShareGroupPartitionMetadata, before Kafka 4.1) is not written; a record of it is
skipped like any unknown type. The value classes and schemas are generated
(`schemas`, by `python -m proto.generate_records`).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dataplane.coordinator.share import schemas as schemas
from dataplane.protocol.message_codec import CorruptRecord

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15

_MEMBER_KEY_TYPES = frozenset(
    {MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT}
)
SHARE_GROUP_RECORD_TYPES = _MEMBER_KEY_TYPES | {
    GROUP_METADATA,
    TARGET_ASSIGNMENT_METADATA,
    STATE_PARTITION_METADATA,
}

MemberMetadataValue = schemas.ShareGroupMemberMetadataValue
GroupMetadataValue = schemas.ShareGroupMetadataValue
TargetAssignmentMetadataValue = schemas.ShareGroupTargetAssignmentMetadataValue
TargetAssignmentMemberValue = schemas.ShareGroupTargetAssignmentMemberValue
CurrentMemberAssignmentValue = schemas.ShareGroupCurrentMemberAssignmentValue
StatePartitionMetadataValue = schemas.ShareGroupStatePartitionMetadataValue
TopicPartitionsInfo = schemas.ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo

Value = (
    MemberMetadataValue
    | GroupMetadataValue
    | TargetAssignmentMetadataValue
    | TargetAssignmentMemberValue
    | CurrentMemberAssignmentValue
    | StatePartitionMetadataValue
)
_VALUE_TYPES: dict[type, int] = {
    MemberMetadataValue: MEMBER_METADATA,
    GroupMetadataValue: GROUP_METADATA,
    TargetAssignmentMetadataValue: TARGET_ASSIGNMENT_METADATA,
    TargetAssignmentMemberValue: TARGET_ASSIGNMENT_MEMBER,
    CurrentMemberAssignmentValue: CURRENT_MEMBER_ASSIGNMENT,
    StatePartitionMetadataValue: STATE_PARTITION_METADATA,
}
VALUE_VERSION = 0
_I16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class Key:
    """A share group record key: `member_id` is "" for the per-group types (11, 12, 15)."""

    type: int
    group_id: str
    member_id: str = ""


Assignment = Mapping[bytes, Iterable[int]]
"""topic id -> partitions"""


def _pairs(assignment: Assignment) -> list[tuple[bytes, tuple[int, ...]]]:
    out = [(t, tuple(sorted(assignment[t]))) for t in sorted(assignment)]
    return [(t, ps) for t, ps in out if ps]


def target_value(assignment: Assignment) -> TargetAssignmentMemberValue:
    return TargetAssignmentMemberValue(
        tuple(TargetAssignmentMemberValue.TopicPartition(t, ps) for t, ps in _pairs(assignment))
    )


def current_value(epoch: int, previous_epoch: int, assignment: Assignment) -> Value:
    return CurrentMemberAssignmentValue(
        epoch,
        previous_epoch,
        0,  # STABLE: a share group member owns its target at once (nothing to revoke)
        tuple(CurrentMemberAssignmentValue.TopicPartitions(t, ps) for t, ps in _pairs(assignment)),
    )


def encode(key: Key, value: Value | None) -> tuple[bytes, bytes | None]:
    """(key bytes, value bytes or None for a tombstone)."""
    if value is not None and _VALUE_TYPES.get(type(value)) != key.type:
        raise ValueError(f"{type(value).__name__} does not go with record type {key.type}")
    schema = schemas.KEYS[key.type]
    fields = (key.group_id, key.member_id) if key.type in _MEMBER_KEY_TYPES else (key.group_id,)
    key_bytes = _I16.pack(key.type) + schema.encode(schema.struct.cls(*fields), 0)
    if value is None:
        return key_bytes, None
    return key_bytes, _I16.pack(VALUE_VERSION) + schemas.VALUES[key.type].encode(
        value, VALUE_VERSION
    )


def decode(key: bytes, value: bytes | None) -> tuple[Key, Value | None] | None:
    """A decoded share group record, None for another record type."""
    if len(key) < 2:
        raise CorruptRecord("key shorter than its type")
    kind = _I16.unpack_from(key)[0]
    if kind not in SHARE_GROUP_RECORD_TYPES:
        return None
    decoded, end = schemas.KEYS[kind].decode(key, 0, 2)
    if end != len(key):
        raise CorruptRecord(f"{len(key) - end} trailing bytes in the key")
    k = Key(kind, decoded.group_id, getattr(decoded, "member_id", ""))
    if value is None:
        return k, None
    if len(value) < 2:
        raise CorruptRecord("value shorter than its version")
    v, end = schemas.VALUES[kind].decode(value, _I16.unpack_from(value)[0], 2)
    if end != len(value):
        raise CorruptRecord(f"{len(value) - end} trailing bytes in the value")
    return k, v
