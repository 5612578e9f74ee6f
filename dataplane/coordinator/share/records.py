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
(`schemas`, by `python -m proto.generate_records`); `group_record_codec.RecordCodec` encodes and
decodes them, as it does the streams group records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dataplane.coordinator.group_record_codec import Key, Record, RecordCodec
from dataplane.coordinator.share import schemas

__all__ = ["Key", "Record"]

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
CODEC = RecordCodec(schemas.KEYS, schemas.VALUES, _VALUE_TYPES, _MEMBER_KEY_TYPES)
encode = CODEC.encode
decode = CODEC.decode

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
