"""The `__consumer_offsets` record codecs, byte for byte against hand-built Kafka bytes.

Kafka serializes a record key as int16 record type + the key's fields (version 0), a value as
int16 version + the value's fields at that version; strings are int16-length prefixed (compact
varint length + 1 in flexible versions), bytes int32-length prefixed.
"""

from __future__ import annotations

import struct

import pytest

from dataplane.coordinator.records import (
    GROUP_METADATA,
    GROUP_METADATA_VALUE,
    OFFSET_COMMIT,
    OFFSET_COMMIT_VALUE,
    CorruptRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownVersion,
    decode_record,
    encode_value,
    group_metadata_record,
    offset_commit_record,
    subscribed_topics,
)
from tests.expect import present


def s16(text: str | None) -> bytes:
    """Kafka's (nullable) string: int16 length + UTF-8."""
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def compact(text: str) -> bytes:
    raw = text.encode()
    assert len(raw) + 1 < 0x80
    return bytes([len(raw) + 1]) + raw


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


# A commit a Kafka 3.x broker wrote (the values of konsumer_offsets' fixture
# offset_commit/05: key version 1, value schema 3), rebuilt field by field.
REAL_GROUP = "kafkesc-devcluster-group-id"
REAL_KEY = i16(1) + s16(REAL_GROUP) + s16("t01") + i32(0)
REAL_VALUE = i16(3) + i64(15134) + i32(-1) + s16("") + i64(1672870795763)


def test_offset_commit_key_and_value_v3_as_kafka_writes_them() -> None:
    key, value = offset_commit_record(
        REAL_GROUP, "t01", 0, OffsetCommitValue(15134, -1, "", 1672870795763)
    )
    assert key == REAL_KEY
    assert value == REAL_VALUE
    decoded = decode_record(REAL_KEY, REAL_VALUE)
    assert decoded is not None
    assert decoded.type_id == OFFSET_COMMIT
    assert decoded.key == OffsetCommitKey(REAL_GROUP, "t01", 0)
    assert decoded.value == OffsetCommitValue(15134, -1, "", 1672870795763)
    assert decoded.value_version == 3


def test_offset_commit_with_expire_timestamp_is_written_as_v1() -> None:
    _, value = offset_commit_record("g", "t", 7, OffsetCommitValue(42, 5, "meta", 1000, 2000))
    # v1 has no leader epoch; it has the expire timestamp
    assert value == i16(1) + i64(42) + s16("meta") + i64(1000) + i64(2000)
    decoded = decode_record(offset_commit_record("g", "t", 7, None)[0], value)
    assert decoded is not None
    assert decoded.value == OffsetCommitValue(42, -1, "meta", 1000, 2000)


def test_offset_commit_value_every_version_decodes() -> None:
    key = i16(1) + s16("g") + s16("t") + i32(3)
    v0 = i16(0) + i64(10) + s16("m") + i64(100)
    v2 = i16(2) + i64(10) + s16("m") + i64(100)
    v3 = i16(3) + i64(10) + i32(4) + s16("m") + i64(100)
    # v4 is flexible: compact string, and a tagged-field section (one unknown tag, kept)
    v4 = i16(4) + i64(10) + i32(4) + compact("m") + i64(100) + bytes([1, 9, 2, 0xAB, 0xCD])
    want = {
        0: OffsetCommitValue(10, -1, "m", 100),
        2: OffsetCommitValue(10, -1, "m", 100),
        3: OffsetCommitValue(10, 4, "m", 100),
        4: OffsetCommitValue(10, 4, "m", 100, unknown_tags=((9, b"\xab\xcd"),)),
    }
    for raw in (v0, v2, v3, v4):
        decoded = decode_record(key, raw)
        assert decoded is not None
        assert decoded.value == want[decoded.value_version]
    # the flexible version round-trips, tags it does not know included (as Kafka's do)
    assert encode_value(OFFSET_COMMIT, OffsetCommitValue(10, 4, "m", 100), 4) == (
        i16(4) + i64(10) + i32(4) + compact("m") + i64(100) + b"\x00"
    )
    assert OFFSET_COMMIT_VALUE.decode(v4, 4, 2)[0] == want[4]
    assert encode_value(OFFSET_COMMIT, want[4], 4) == v4


def test_legacy_key_version_0_is_an_offset_commit() -> None:
    key = i16(0) + s16("g") + s16("t") + i32(1)
    decoded = decode_record(key, i16(0) + i64(5) + s16("") + i64(9))
    assert decoded is not None
    assert decoded.type_id == OFFSET_COMMIT
    assert decoded.key == OffsetCommitKey("g", "t", 1)


def test_tombstones() -> None:
    key, value = offset_commit_record("g", "t", 1, None)
    assert value is None
    decoded = decode_record(key, None)
    assert decoded is not None
    assert decoded.value is None
    key, value = group_metadata_record("g", None)
    assert key == i16(2) + s16("g")
    assert value is None
    decoded = decode_record(key, None)
    assert decoded is not None
    assert decoded.type_id == GROUP_METADATA
    assert decoded.key == GroupMetadataKey("g")
    assert decoded.value is None


def _member_v3(member: MemberMetadata) -> bytes:
    return (
        s16(member.member_id)
        + s16(member.group_instance_id)
        + s16(member.client_id)
        + s16(member.client_host)
        + i32(member.rebalance_timeout)
        + i32(member.session_timeout)
        + b32(member.subscription)
        + b32(member.assignment)
    )


MEMBERS = (
    MemberMetadata("c1-abc", None, "c1", "/127.0.0.1", 300000, 45000, b"\x00\x03sub", b"asg1"),
    MemberMetadata("i2-def", "i2", "c2", "/10.0.0.2", 60000, 10000, b"sub2", b""),
)


def test_group_metadata_value_v3_as_kafka_writes_it() -> None:
    value = GroupMetadataValue("consumer", 7, "range", "c1-abc", 1700000000123, MEMBERS)
    key, raw = group_metadata_record("my-group", value)
    assert key == i16(2) + s16("my-group")
    assert raw == (
        i16(3)
        + s16("consumer")
        + i32(7)
        + s16("range")
        + s16("c1-abc")
        + i64(1700000000123)
        + i32(2)
        + _member_v3(MEMBERS[0])
        + _member_v3(MEMBERS[1])
    )
    decoded = decode_record(key, raw)
    assert decoded is not None
    assert decoded.value == value


def test_empty_group_metadata_as_kafka_writes_it() -> None:
    # newEmptyGroupMetadataRecord: protocol type "", generation 0, null protocol and leader
    _key, raw = group_metadata_record("g", GroupMetadataValue("", 0, None, None, 99, ()))
    assert raw == i16(3) + s16("") + i32(0) + s16(None) + s16(None) + i64(99) + i32(0)


def test_group_metadata_older_versions_decode() -> None:
    m = MEMBERS[0]
    v0 = (
        i16(0)
        + s16("consumer")
        + i32(1)
        + s16("range")
        + s16("c1-abc")
        + i32(1)
        + s16(m.member_id)
        + s16(m.client_id)
        + s16(m.client_host)
        + i32(m.session_timeout)
        + b32(m.subscription)
        + b32(m.assignment)
    )
    decoded = decode_record(i16(2) + s16("g"), v0)
    assert decoded is not None
    value = present(decoded.value)
    assert value.generation == 1
    assert value.current_state_timestamp == -1
    (member,) = value.members
    assert member.rebalance_timeout == -1  # absent in v0: the session timeout applies
    assert member.group_instance_id is None
    assert member.assignment == b"asg1"
    # v2 adds the state timestamp and v1 the rebalance timeout
    v2 = i16(2) + s16("consumer") + i32(1) + s16(None) + s16(None) + i64(5) + i32(0)
    decoded = decode_record(i16(2) + s16("g"), v2)
    assert decoded is not None
    assert decoded.value == GroupMetadataValue("consumer", 1, None, None, 5, ())


def test_group_metadata_v4_is_flexible() -> None:
    value = GroupMetadataValue("consumer", 3, "range", "c1-abc", 10, MEMBERS[:1])
    raw = encode_value(GROUP_METADATA, value, 4)
    m = MEMBERS[0]
    member = (
        compact(m.member_id)
        + b"\x00"  # null group instance id
        + compact(m.client_id)
        + compact(m.client_host)
        + i32(m.rebalance_timeout)
        + i32(m.session_timeout)
        + bytes([len(m.subscription) + 1])
        + m.subscription
        + bytes([len(m.assignment) + 1])
        + m.assignment
        + b"\x00"  # the member's tagged fields
    )
    assert raw == (
        i16(4)
        + compact("consumer")
        + i32(3)
        + compact("range")
        + compact("c1-abc")
        + i64(10)
        + bytes([2])  # compact array of one
        + member
        + b"\x00"
    )
    assert GROUP_METADATA_VALUE.decode(raw, 4, 2)[0] == value


def test_unknown_record_types_are_not_decoded() -> None:
    # KIP-848 consumer group records (types 3-8, 16) and later ones: the shard dispatches them
    for record_type in (3, 4, 5, 6, 7, 8, 16, 100):
        assert decode_record(i16(record_type) + s16("g"), b"\x00\x00anything") is None


def test_unknown_value_versions_and_garbage_are_errors() -> None:
    key = i16(1) + s16("g") + s16("t") + i32(0)
    with pytest.raises(UnknownVersion):
        decode_record(key, i16(9) + i64(1))
    with pytest.raises(CorruptRecord):
        decode_record(key, i16(3) + b"\x00\x01")
    with pytest.raises(CorruptRecord):
        decode_record(b"\x00", None)


def consumer_subscription_v3(topics: list[str]) -> bytes:
    """What the Java consumer sends as its "consumer" protocol metadata (version 3)."""
    return (
        i16(3)
        + i32(len(topics))
        + b"".join(s16(t) for t in topics)
        + i32(-1)  # user data: null
        + i32(0)  # owned partitions
        + i32(-1)  # generation
        + s16(None)  # rack
    )


def test_subscribed_topics_of_the_consumer_protocol() -> None:
    assert subscribed_topics(consumer_subscription_v3(["a", "b"])) == {"a", "b"}
    assert subscribed_topics(i16(0) + i32(1) + s16("x") + i32(-1)) == {"x"}
    assert subscribed_topics(b"\x00") is None
    assert subscribed_topics(i16(0) + i32(5) + s16("x")) is None
