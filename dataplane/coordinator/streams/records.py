"""The KIP-1071 streams group records of `__consumer_offsets`, in Kafka's coordinator record
format (see consumer/records.py: int16 type + key message; int16 version + flexible value):

    17 StreamsGroupMetadata                 key GroupId            value Epoch, MetadataHash; tags
                                                                   0 ValidatedTopologyEpoch,
                                                                   1 LastAssignmentConfigs
    19 StreamsGroupMemberMetadata           key GroupId, MemberId  value client, process, endpoint
    20 StreamsGroupTargetAssignmentMetadata key GroupId            value AssignmentEpoch;
                                                                   tag 0 AssignmentTimestamp
    21 StreamsGroupTargetAssignmentMember   key GroupId, MemberId  value active/standby/warm-up
                                                                   tasks
    22 StreamsGroupCurrentMemberAssignment  key GroupId, MemberId  value epochs, state, tasks and
                                                                   tasks pending revocation
    23 StreamsGroupTopology                 key GroupId            value the topology's epoch and
                                                                   subtopologies

Type 18 (StreamsGroupPartitionMetadata, before Kafka 4.1) is not written; a record of it is
skipped like any unknown type. The value classes and schemas are generated
(`schemas`, by `python -m proto.generate_records`). Tasks are written sorted
(subtopologies by id, partitions ascending); Kafka writes them in hash order.
"""

from __future__ import annotations

from collections.abc import Mapping

from dataplane.coordinator.group_record_codec import Key, Record, RecordCodec
from dataplane.coordinator.streams import schemas

__all__ = ["Key", "Record"]

GROUP_METADATA = 17
MEMBER_METADATA = 19
TARGET_ASSIGNMENT_METADATA = 20
TARGET_ASSIGNMENT_MEMBER = 21
CURRENT_MEMBER_ASSIGNMENT = 22
TOPOLOGY = 23

_MEMBER_KEY_TYPES = frozenset(
    {MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT}
)
STREAMS_GROUP_RECORD_TYPES = _MEMBER_KEY_TYPES | {
    GROUP_METADATA,
    TARGET_ASSIGNMENT_METADATA,
    TOPOLOGY,
}

GroupMetadataValue = schemas.StreamsGroupMetadataValue
TopologyValue = schemas.StreamsGroupTopologyValue
MemberMetadataValue = schemas.StreamsGroupMemberMetadataValue
TargetAssignmentMetadataValue = schemas.StreamsGroupTargetAssignmentMetadataValue
TargetAssignmentMemberValue = schemas.StreamsGroupTargetAssignmentMemberValue
CurrentMemberAssignmentValue = schemas.StreamsGroupCurrentMemberAssignmentValue

Value = (
    GroupMetadataValue
    | TopologyValue
    | MemberMetadataValue
    | TargetAssignmentMetadataValue
    | TargetAssignmentMemberValue
    | CurrentMemberAssignmentValue
)
_VALUE_TYPES: dict[type, int] = {
    GroupMetadataValue: GROUP_METADATA,
    TopologyValue: TOPOLOGY,
    MemberMetadataValue: MEMBER_METADATA,
    TargetAssignmentMetadataValue: TARGET_ASSIGNMENT_METADATA,
    TargetAssignmentMemberValue: TARGET_ASSIGNMENT_MEMBER,
    CurrentMemberAssignmentValue: CURRENT_MEMBER_ASSIGNMENT,
}
CODEC = RecordCodec(schemas.KEYS, schemas.VALUES, _VALUE_TYPES, _MEMBER_KEY_TYPES)
encode = CODEC.encode
decode = CODEC.decode

Tasks = Mapping[str, frozenset[int]]
"""subtopology id -> partitions (task ids); never an empty set."""


def sorted_tasks(tasks: Tasks) -> list[tuple[str, tuple[int, ...]]]:
    """(subtopology, partitions) pairs in the order they are written and sent."""
    return [(s, tuple(sorted(tasks[s]))) for s in sorted(tasks) if tasks[s]]
