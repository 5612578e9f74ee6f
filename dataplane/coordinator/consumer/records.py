"""The KIP-848 consumer group records of `__consumer_offsets`, byte for byte as Kafka writes them.

Kafka's coordinator record format (`CoordinatorRecordSerde`)::

    record key   = int16 record type  + key message   (keys: version 0, not flexible)
    record value = int16 value version + value message (values: version 0, flexible)
    tombstone    = the key with a null value

The record type is the key schema's `apiKey`. The consumer group ("modern" / KIP-848) types:

    3  ConsumerGroupMetadata           key GroupId                     value Epoch; tags:
                                                                             0 MetadataHash,
                                                                             1 CreationTimeMs
    4  ConsumerGroupPartitionMetadata  key GroupId                     value Topics[] (Kafka
                                                                             4.1+ only deletes it)
    5  ConsumerGroupMemberMetadata     key GroupId, MemberId           value a subscription
    6  ConsumerGroupTargetAssignmentMetadata  key GroupId              value AssignmentEpoch;
                                                                             tag 0 Timestamp
    7  ConsumerGroupTargetAssignmentMember    key GroupId, MemberId    value TopicPartitions[]
    8  ConsumerGroupCurrentMemberAssignment   key GroupId, MemberId    value epochs, state,
                                                                             partitions
    16 ConsumerGroupRegularExpression  key GroupId, RegularExpression  value Topics, Version,
                                                                             Timestamp

Types 0-2 (offset commits, classic group metadata) belong to the classic coordinator; 9-15 and
17+ (share and streams groups, share state) are not handled here: `decode_key` returns None for
them.

The value classes and every schema are generated from Kafka's JSON specs (`record_schemas`, by
`python -m proto.generate_records`); this module names them as the coordinator uses them and
gives the three key shapes (`GroupKey`, `MemberKey`, `RegexKey`) one type per shape rather than
one per record type. Tagged fields no schema knows are kept in `unknown_tags` and written back,
so a decode/encode round trip is lossless.

Topic ids are 16 raw bytes (as in `dataplane.metadata_cache`). Collections are written in a
deterministic order (topics by id, partitions ascending, names sorted) — Kafka writes them in
hash-set order, which carries no meaning.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from dataplane.coordinator import record_schemas as schemas
from dataplane.protocol.message_codec import CorruptRecord, record_type

__all__ = [
    "CONSUMER_GROUP_RECORD_TYPES",
    "CURRENT_MEMBER_ASSIGNMENT",
    "GROUP_METADATA",
    "MEMBER_METADATA",
    "PARTITION_METADATA",
    "REGULAR_EXPRESSION",
    "TARGET_ASSIGNMENT_MEMBER",
    "TARGET_ASSIGNMENT_METADATA",
    "ClassicMemberMetadata",
    "ConsumerGroupMetadataValue",
    "CurrentMemberAssignmentValue",
    "GroupKey",
    "Key",
    "MemberKey",
    "MemberMetadataValue",
    "PartitionMetadataValue",
    "RecordFormatError",
    "RegexKey",
    "RegularExpressionValue",
    "TargetAssignmentMemberValue",
    "TargetAssignmentMetadataValue",
    "TargetTopicPartition",
    "TopicMetadataEntry",
    "TopicPartitions",
    "Value",
    "decode",
    "decode_key",
    "decode_value",
    "encode",
    "encode_key",
    "encode_value",
    "target_assignment",
    "topic_partitions",
]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16

_GROUP_KEY_TYPES = frozenset({GROUP_METADATA, PARTITION_METADATA, TARGET_ASSIGNMENT_METADATA})
_MEMBER_KEY_TYPES = frozenset(
    {MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT}
)
CONSUMER_GROUP_RECORD_TYPES = _GROUP_KEY_TYPES | _MEMBER_KEY_TYPES | {REGULAR_EXPRESSION}

VALUE_VERSION = 0
"""Every KIP-848 value schema has the single version 0."""

RecordFormatError = CorruptRecord
"""A record that does not parse as the schema of its type says."""

_I16 = struct.Struct(">h")


# -- keys ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupKey:
    """Key of the per-group records: ConsumerGroupMetadata (3), ConsumerGroupPartitionMetadata
    (4), ConsumerGroupTargetAssignmentMetadata (6)."""

    type: int
    group_id: str


@dataclass(frozen=True, slots=True)
class MemberKey:
    """Key of the per-member records: MemberMetadata (5), TargetAssignmentMember (7),
    CurrentMemberAssignment (8)."""

    type: int
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class RegexKey:
    """Key of ConsumerGroupRegularExpression (16)."""

    group_id: str
    regex: str
    type: int = REGULAR_EXPRESSION


Key = GroupKey | MemberKey | RegexKey


# -- values (generated) --------------------------------------------------------------------

ConsumerGroupMetadataValue = schemas.ConsumerGroupMetadataValue
"""Type 3: the group epoch. MetadataHash (KIP-1101) is the hash of the subscribed topics'
metadata whose change triggers a rebalance; CreationTimeMs (KIP-1282) when the group was
created."""
PartitionMetadataValue = schemas.ConsumerGroupPartitionMetadataValue
"""Type 4: the subscription metadata of Kafka 3.7-4.0. Kafka 4.1+ only tombstones it."""
TopicMetadataEntry = schemas.ConsumerGroupPartitionMetadataValue.TopicMetadata
MemberMetadataValue = schemas.ConsumerGroupMemberMetadataValue
"""Type 5: a member's subscription (`classic_member_metadata`: a member using the classic
protocol in a consumer group; not produced here)."""
ClassicMemberMetadata = schemas.ConsumerGroupMemberMetadataValue.ClassicMemberMetadata
TargetAssignmentMetadataValue = schemas.ConsumerGroupTargetAssignmentMetadataValue
"""Type 6: the epoch of the target assignment (and, KIP-1263, when it was computed)."""
TargetAssignmentMemberValue = schemas.ConsumerGroupTargetAssignmentMemberValue
"""Type 7: a member's partitions in the target assignment."""
TargetTopicPartition = schemas.ConsumerGroupTargetAssignmentMemberValue.TopicPartition
CurrentMemberAssignmentValue = schemas.ConsumerGroupCurrentMemberAssignmentValue
"""Type 8: a member's epochs, reconciliation state (0 STABLE, 1 UNREVOKED_PARTITIONS,
2 UNRELEASED_PARTITIONS, 127 UNKNOWN) and current assignment."""
TopicPartitions = schemas.ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions
"""A topic id and partitions of a current assignment; `assignment_epochs` (KIP-1251, tag 0)."""
RegularExpressionValue = schemas.ConsumerGroupRegularExpressionValue
"""Type 16: the topics a subscribed regular expression resolved to, the metadata version it
was resolved against and when."""

Value = (
    ConsumerGroupMetadataValue
    | PartitionMetadataValue
    | MemberMetadataValue
    | TargetAssignmentMetadataValue
    | TargetAssignmentMemberValue
    | CurrentMemberAssignmentValue
    | RegularExpressionValue
)

_VALUE_TYPES: dict[type, int] = {
    ConsumerGroupMetadataValue: GROUP_METADATA,
    PartitionMetadataValue: PARTITION_METADATA,
    MemberMetadataValue: MEMBER_METADATA,
    TargetAssignmentMetadataValue: TARGET_ASSIGNMENT_METADATA,
    TargetAssignmentMemberValue: TARGET_ASSIGNMENT_MEMBER,
    CurrentMemberAssignmentValue: CURRENT_MEMBER_ASSIGNMENT,
    RegularExpressionValue: REGULAR_EXPRESSION,
}

_TP = TypeVar("_TP")


def _sorted(
    assignment: Mapping[bytes, Iterable[int]], struct: Callable[[bytes, tuple[int, ...]], _TP]
) -> tuple[_TP, ...]:
    out = []
    for topic_id in sorted(assignment):
        parts = tuple(sorted(assignment[topic_id]))
        if parts:
            out.append(struct(topic_id, parts))
    return tuple(out)


def topic_partitions(assignment: Mapping[bytes, Iterable[int]]) -> tuple[TopicPartitions, ...]:
    """{topic id: partitions} as sorted TopicPartitions, topics without partitions left out."""
    return _sorted(assignment, TopicPartitions)


def target_assignment(assignment: Mapping[bytes, Iterable[int]]) -> TargetAssignmentMemberValue:
    """A member's target assignment {topic id: partitions} as its record value (sorted)."""
    return TargetAssignmentMemberValue(_sorted(assignment, TargetTopicPartition))


# -- keys: encode/decode -------------------------------------------------------------------


def encode_key(key: Key) -> bytes:
    if isinstance(key, MemberKey):
        if key.type not in _MEMBER_KEY_TYPES:
            raise ValueError(f"record type {key.type} has no member key")
        fields: tuple[str, ...] = (key.group_id, key.member_id)
    elif isinstance(key, RegexKey):
        fields = (key.group_id, key.regex)
    elif key.type not in _GROUP_KEY_TYPES:
        raise ValueError(f"record type {key.type} has no group key")
    else:
        fields = (key.group_id,)
    schema = schemas.KEYS[key.type]
    return _I16.pack(key.type) + schema.encode(schema.struct.cls(*fields), 0)


def decode_key(data: bytes) -> Key | None:
    """The key of a KIP-848 consumer group record, or None for another record type."""
    kind = record_type(data)
    if kind not in CONSUMER_GROUP_RECORD_TYPES:
        return None
    decoded, end = schemas.KEYS[kind].decode(data, 0, 2)
    _expect_end(data, end)
    if kind in _MEMBER_KEY_TYPES:
        return MemberKey(kind, decoded.group_id, decoded.member_id)
    if kind == REGULAR_EXPRESSION:
        return RegexKey(decoded.group_id, decoded.regular_expression)
    return GroupKey(kind, decoded.group_id)


def _expect_end(data: bytes, end: int) -> None:
    if end != len(data):
        raise RecordFormatError(f"{len(data) - end} trailing bytes")


# -- values --------------------------------------------------------------------------------


def encode_value(value: Value) -> bytes:
    """int16 version (0) + the flexible value message."""
    kind = _VALUE_TYPES.get(type(value))
    if kind is None:
        raise TypeError(f"not a consumer group record value: {value!r}")
    return _I16.pack(VALUE_VERSION) + schemas.VALUES[kind].encode(value, VALUE_VERSION)


def decode_value(kind: int, data: bytes) -> Value:
    if kind not in CONSUMER_GROUP_RECORD_TYPES:
        raise RecordFormatError(f"record type {kind} is not a consumer group record")
    if len(data) < 2:
        raise RecordFormatError("value shorter than its version")
    value: Value
    value, end = schemas.VALUES[kind].decode(data, _I16.unpack_from(data)[0], 2)
    _expect_end(data, end)
    return value


# -- whole records -------------------------------------------------------------------------


def encode(key: Key, value: Value | None) -> tuple[bytes, bytes | None]:
    """(key bytes, value bytes or None for a tombstone), ready for `CoordinatorRuntime.write`."""
    if value is not None and _VALUE_TYPES.get(type(value)) != key.type:
        raise ValueError(f"{type(value).__name__} does not go with record type {key.type}")
    return encode_key(key), None if value is None else encode_value(value)


def decode(key: bytes, value: bytes | None) -> tuple[Key, Value | None] | None:
    """A decoded KIP-848 record, or None when the key is of another record type."""
    k = decode_key(key)
    if k is None:
        return None
    return k, None if value is None else decode_value(k.type, value)
