"""The classic records of `__consumer_offsets`, byte for byte as Kafka writes them.

A record's key starts with a big-endian int16, the *record type* (Kafka's "key version" before
4.0, the coordinator-key `apiKey` since), followed by the key's fields at version 0. The value
(None: a tombstone) starts with its own int16 version, then the value's fields at that version.
Types 0 and 1 are OffsetCommit (0 is the pre-0.10 legacy key, same layout), 2 is GroupMetadata;
KIP-848 adds types 3-8 and 16 (`consumer.records`). Kafka 3.x and 4.x write
OffsetCommitValue v3 (v1 when the commit carries an expire timestamp, OffsetCommit v2-v4 with a
retention time) and GroupMetadataValue v3.

The classes and schemas are generated from Kafka's JSON specs (`record_schemas`, by
`python -m proto.generate_records`); this module picks the versions to write and decodes whole
records. `decode_record` returns None for the record types of other groups, which the shard
dispatches elsewhere.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from dataplane.coordinator.consumer.records import CONSUMER_GROUP_RECORD_TYPES
from dataplane.coordinator.record_schemas import (
    GROUP_METADATA_KEY,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT_KEY,
    OFFSET_COMMIT_VALUE,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from dataplane.protocol.message_codec import CorruptRecord, Message, UnknownVersion, record_type

__all__ = [
    "CONSUMER_GROUP_RECORD_TYPES",
    "GROUP_METADATA",
    "GROUP_METADATA_VALUE_VERSION",
    "LEGACY_OFFSET_COMMIT",
    "OFFSET_COMMIT",
    "OFFSET_COMMIT_VALUE_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY",
    "CoordinatorRecord",
    "CorruptRecord",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "UnknownVersion",
    "decode_record",
    "encode_key",
    "encode_value",
    "group_metadata_record",
    "offset_commit_key",
    "offset_commit_record",
    "subscribed_topics",
]

MemberMetadata = GroupMetadataValue.MemberMetadata

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# The versions Kafka 3.x/4.x write.
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3


# ---------------------------------------------------------------- record types and dispatch

LEGACY_OFFSET_COMMIT = 0  # the pre-0.10 key of an OffsetCommit record, same layout
OFFSET_COMMIT = 1  # record type (key version)
GROUP_METADATA = 2


_SCHEMAS: dict[int, tuple[int, Message, Message]] = {
    LEGACY_OFFSET_COMMIT: (OFFSET_COMMIT, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    OFFSET_COMMIT: (OFFSET_COMMIT, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
    GROUP_METADATA: (GROUP_METADATA, GROUP_METADATA_KEY, GROUP_METADATA_VALUE),
}
"""Record type -> (the type it is read as, key schema, value schema)."""


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """A decoded record: `type_id` normalized (the legacy key reads as OffsetCommit)."""

    type_id: int
    key: Any
    value: Any | None  # None: a tombstone
    value_version: int = -1


def decode_record(key: bytes | None, value: bytes | None) -> CoordinatorRecord | None:
    """Decode one classic record of the topic; None for a record type of other groups.

    Raises CorruptRecord when the record does not parse, UnknownVersion (a subclass) when its
    value has a version this codec does not know.
    """
    schemas = _SCHEMAS.get(record_type(key))
    if schemas is None:
        return None
    type_id, key_schema, value_schema = schemas
    assert key is not None  # record_type raised otherwise
    decoded_key, _ = key_schema.decode(key, 0, 2)
    if value is None:
        return CoordinatorRecord(type_id, decoded_key, None)
    if len(value) < 2:
        raise CorruptRecord(f"a {value_schema.name} needs a version")
    version = _I16.unpack_from(value, 0)[0]
    decoded_value, _ = value_schema.decode(value, version, 2)
    return CoordinatorRecord(type_id, decoded_key, decoded_value, version)


def encode_key(type_id: int, key: Any) -> bytes:
    return _I16.pack(type_id) + _SCHEMAS[type_id][1].encode(key, 0)


def encode_value(type_id: int, value: Any, version: int) -> bytes:
    return _I16.pack(version) + _SCHEMAS[type_id][2].encode(value, version)


# ---------------------------------------------------------------- helpers for the classic types


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return encode_key(OFFSET_COMMIT, OffsetCommitKey(group, topic, partition))


def offset_commit_record(
    group: str, topic: str, partition: int, value: OffsetCommitValue | None
) -> tuple[bytes, bytes | None]:
    """(key, value) of an OffsetCommit record, as Kafka writes it; None value: tombstone."""
    key = offset_commit_key(group, topic, partition)
    if value is None:
        return key, None
    version = (
        OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
        if value.expire_timestamp >= 0
        else OFFSET_COMMIT_VALUE_VERSION
    )
    return key, encode_value(OFFSET_COMMIT, value, version)


def group_metadata_record(
    group: str, value: GroupMetadataValue | None
) -> tuple[bytes, bytes | None]:
    """(key, value) of a GroupMetadata record (value v3, as Kafka writes); None: tombstone."""
    key = encode_key(GROUP_METADATA, GroupMetadataKey(group))
    if value is None:
        return key, None
    return key, encode_value(GROUP_METADATA, value, GROUP_METADATA_VALUE_VERSION)


# ---------------------------------------------------------------- the consumer protocol


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (the "consumer" protocol's member
    metadata: int16 version, then the topic names); None if it does not parse."""
    try:
        pos = 2
        (count,) = _I32.unpack_from(subscription, pos)
        pos += 4
        topics = set()
        for _ in range(count):
            (n,) = _I16.unpack_from(subscription, pos)
            pos += 2
            if n < 0 or pos + n > len(subscription):
                return None
            topics.add(subscription[pos : pos + n].decode())
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
