"""KIP-848 records: byte-exact examples built by hand from Kafka's schemas, and round trips."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.coordinator.consumer import records as rec
from dataplane.protocol.message_codec import record_type

TID = bytes(range(16))
TID2 = bytes(range(16, 32))


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(v: str) -> bytes:
    """Legacy (key) string: int16 length + UTF-8."""
    return i16(len(v.encode())) + v.encode()


def cs(v: str | None) -> bytes:
    """Compact string: uvarint(length + 1), 0 = null (all examples are < 127 bytes)."""
    return b"\x00" if v is None else bytes([len(v.encode()) + 1]) + v.encode()


NO_TAGS = b"\x00"
PartitionMetadata = rec.TopicMetadataEntry.PartitionMetadata

# (key, value, expected key bytes, expected value bytes) per record type.
EXAMPLES = [
    pytest.param(
        rec.GroupKey(rec.GROUP_METADATA, "g1"),
        rec.ConsumerGroupMetadataValue(epoch=5),
        i16(3) + s16("g1"),
        i16(0) + i32(5) + NO_TAGS,
        id="group-metadata",
    ),
    pytest.param(
        rec.GroupKey(rec.GROUP_METADATA, "g1"),
        rec.ConsumerGroupMetadataValue(epoch=5, metadata_hash=-2, creation_time_ms=1000),
        i16(3) + s16("g1"),
        # two tagged fields: tag 0 (8 bytes) MetadataHash, tag 1 (8 bytes) CreationTimeMs
        i16(0) + i32(5) + b"\x02" + b"\x00\x08" + i64(-2) + b"\x01\x08" + i64(1000),
        id="group-metadata-tagged",
    ),
    pytest.param(
        rec.GroupKey(rec.PARTITION_METADATA, "g1"),
        rec.PartitionMetadataValue(
            (rec.TopicMetadataEntry(TID, "t", 2, (PartitionMetadata(0, ("r1", "r2")),)),)
        ),
        i16(4) + s16("g1"),
        i16(0)
        + b"\x02"  # Topics: 1 entry
        + TID
        + cs("t")
        + i32(2)
        + b"\x02"  # PartitionMetadata: 1 entry
        + i32(0)
        + b"\x03"  # Racks: 2 entries
        + cs("r1")
        + cs("r2")
        + NO_TAGS  # PartitionMetadata struct tags
        + NO_TAGS  # TopicMetadata struct tags
        + NO_TAGS,  # message tags
        id="partition-metadata",
    ),
    pytest.param(
        rec.MemberKey(rec.MEMBER_METADATA, "g1", "m1"),
        rec.MemberMetadataValue(
            instance_id=None,
            rack_id="r",
            client_id="c",
            client_host="/h",
            subscribed_topic_names=("a", "b"),
            subscribed_topic_regex="",
            rebalance_timeout_ms=30000,
            server_assignor=None,
        ),
        i16(5) + s16("g1") + s16("m1"),
        i16(0)
        + cs(None)  # InstanceId
        + cs("r")  # RackId
        + cs("c")  # ClientId
        + cs("/h")  # ClientHost
        + b"\x03"
        + cs("a")
        + cs("b")  # SubscribedTopicNames
        + cs("")  # SubscribedTopicRegex
        + i32(30000)  # RebalanceTimeoutMs
        + cs(None)  # ServerAssignor
        + NO_TAGS,
        id="member-metadata",
    ),
    pytest.param(
        rec.GroupKey(rec.TARGET_ASSIGNMENT_METADATA, "g1"),
        rec.TargetAssignmentMetadataValue(assignment_epoch=7, assignment_timestamp_ms=1000),
        i16(6) + s16("g1"),
        i16(0) + i32(7) + b"\x01\x00\x08" + i64(1000),
        id="target-assignment-metadata",
    ),
    pytest.param(
        rec.MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, "g1", "m1"),
        rec.TargetAssignmentMemberValue((rec.TargetTopicPartition(TID, (0, 1)),)),
        i16(7) + s16("g1") + s16("m1"),
        i16(0) + b"\x02" + TID + b"\x03" + i32(0) + i32(1) + NO_TAGS + NO_TAGS,
        id="target-assignment-member",
    ),
    pytest.param(
        rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, "g1", "m1"),
        rec.CurrentMemberAssignmentValue(
            member_epoch=3,
            previous_member_epoch=2,
            state=1,
            assigned_partitions=(rec.TopicPartitions(TID, (1,)),),
            partitions_pending_revocation=(rec.TopicPartitions(TID2, (0,), (2,)),),
        ),
        i16(8) + s16("g1") + s16("m1"),
        i16(0)
        + i32(3)
        + i32(2)
        + b"\x01"  # State: UNREVOKED_PARTITIONS
        + b"\x02"
        + TID
        + b"\x02"
        + i32(1)
        + NO_TAGS
        # pending revocation, with AssignmentEpochs (tag 0: a compact int32 array of 1)
        + b"\x02"
        + TID2
        + b"\x02"
        + i32(0)
        + b"\x01\x00\x05"
        + b"\x02"
        + i32(2)
        + NO_TAGS,
        id="current-member-assignment",
    ),
    pytest.param(
        rec.RegexKey("g1", "^t.*"),
        rec.RegularExpressionValue(topics=("t1",), version=9, timestamp=1234),
        i16(16) + s16("g1") + s16("^t.*"),
        i16(0) + b"\x02" + cs("t1") + i64(9) + i64(1234) + NO_TAGS,
        id="regular-expression",
    ),
]


@pytest.mark.parametrize(("key", "value", "key_bytes", "value_bytes"), EXAMPLES)
def test_byte_exact(key, value, key_bytes, value_bytes) -> None:
    assert rec.encode(key, value) == (key_bytes, value_bytes)
    assert rec.decode(key_bytes, value_bytes) == (key, value)
    assert record_type(key_bytes) == key.type


@pytest.mark.parametrize(("key", "value", "key_bytes", "value_bytes"), EXAMPLES)
def test_tombstones(key, value, key_bytes, value_bytes) -> None:
    assert rec.encode(key, None) == (key_bytes, None)
    assert rec.decode(key_bytes, None) == (key, None)


def test_other_record_types_are_not_ours() -> None:
    offset_commit_key = i16(1) + s16("g") + s16("t") + i32(0)
    classic_group_key = i16(2) + s16("g")
    assert rec.decode_key(offset_commit_key) is None
    assert rec.decode(classic_group_key, b"\x00\x03") is None
    assert rec.decode_key(i16(9) + s16("share")) is None


def test_unknown_tagged_fields_survive() -> None:
    # A future Kafka adds tag 7 to the group metadata value and tag 3 to a TopicPartitions.
    value = i16(0) + i32(1) + b"\x02" + b"\x00\x08" + i64(42) + b"\x07\x02ab"
    decoded = rec.decode_value(rec.GROUP_METADATA, value)
    assert decoded == rec.ConsumerGroupMetadataValue(1, 42, -1, ((7, b"ab"),))
    assert rec.encode_value(decoded) == value

    tps = b"\x02" + TID + b"\x01" + b"\x01\x03\x01z"
    value = i16(0) + tps + NO_TAGS
    decoded = rec.decode_value(rec.TARGET_ASSIGNMENT_MEMBER, value)
    assert isinstance(decoded, rec.TargetAssignmentMemberValue)
    assert decoded.topic_partitions[0].unknown_tags == ((3, b"z"),)
    assert rec.encode_value(decoded) == value


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        (rec.GROUP_METADATA, i16(0) + i32(1)),  # no tag section
        (rec.GROUP_METADATA, i16(1) + i32(1) + NO_TAGS),  # unknown version
        (rec.GROUP_METADATA, i16(0) + i32(1) + NO_TAGS + b"x"),  # trailing bytes
        (rec.MEMBER_METADATA, i16(0) + b"\x00\x00\x00"),  # null ClientId
        (rec.TARGET_ASSIGNMENT_MEMBER, i16(0) + b"\x02" + TID[:5]),  # truncated uuid
    ],
)
def test_malformed_values_are_refused(kind: int, data: bytes) -> None:
    with pytest.raises(rec.RecordFormatError):
        rec.decode_value(kind, data)


def test_value_must_match_key_type() -> None:
    with pytest.raises(ValueError, match="does not go with"):
        rec.encode(rec.GroupKey(rec.GROUP_METADATA, "g"), rec.TargetAssignmentMetadataValue(1))
    with pytest.raises(ValueError, match="has no group key"):
        rec.encode_key(rec.GroupKey(rec.MEMBER_METADATA, "g"))


def test_topic_partitions_helper_sorts_and_drops_empty() -> None:
    assert rec.topic_partitions({TID2: {3, 1}, TID: {2}, b"\xff" * 16: set()}) == (
        rec.TopicPartitions(TID, (2,)),
        rec.TopicPartitions(TID2, (1, 3)),
    )


# -- round trips -----------------------------------------------------------------------------

names = st.text(min_size=0, max_size=300)
opt_names = st.none() | names
i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
uuids = st.binary(min_size=16, max_size=16)
tags = st.lists(
    st.tuples(st.integers(8, 20000), st.binary(max_size=200)),
    max_size=3,
    unique_by=lambda t: t[0],
).map(lambda ts: tuple(sorted(ts)))


nested_tags = st.lists(
    st.tuples(st.integers(1, 100), st.binary(max_size=10)),
    max_size=2,
    unique_by=lambda t: t[0],
).map(lambda ts: tuple(sorted(ts)))


def tps(epochs: bool):
    partitions = st.lists(i32s, max_size=20).map(tuple)
    item: st.SearchStrategy[rec.TopicPartitions | rec.TargetTopicPartition]
    if epochs:
        item = st.builds(
            rec.TopicPartitions,
            uuids,
            partitions,
            st.none() | st.lists(i32s, max_size=5).map(tuple),
            nested_tags,
        )
    else:
        item = st.builds(rec.TargetTopicPartition, uuids, partitions, nested_tags)
    return st.lists(item, max_size=5).map(tuple)


classic_member_metadata = st.builds(
    rec.ClassicMemberMetadata,
    i32s,
    st.lists(
        st.builds(rec.ClassicMemberMetadata.ClassicProtocol, names, st.binary(max_size=20)),
        max_size=3,
    ).map(tuple),
)


KEYS = st.one_of(
    st.builds(
        rec.GroupKey,
        st.sampled_from(
            [rec.GROUP_METADATA, rec.PARTITION_METADATA, rec.TARGET_ASSIGNMENT_METADATA]
        ),
        names,
    ),
    st.builds(
        rec.MemberKey,
        st.sampled_from(
            [rec.MEMBER_METADATA, rec.TARGET_ASSIGNMENT_MEMBER, rec.CURRENT_MEMBER_ASSIGNMENT]
        ),
        names,
        names,
    ),
    st.builds(rec.RegexKey, names, names),
)

VALUES = st.one_of(
    st.builds(rec.ConsumerGroupMetadataValue, i32s, i64s, i64s, tags),
    st.builds(
        rec.PartitionMetadataValue,
        st.lists(
            st.builds(
                rec.TopicMetadataEntry,
                uuids,
                names,
                i32s,
                st.lists(
                    st.builds(PartitionMetadata, i32s, st.lists(names, max_size=3).map(tuple)),
                    max_size=3,
                ).map(tuple),
                nested_tags,
            ),
            max_size=3,
        ).map(tuple),
        tags,
    ),
    st.builds(
        rec.MemberMetadataValue,
        opt_names,
        opt_names,
        names,
        names,
        st.lists(names, max_size=5).map(tuple),
        opt_names,
        i32s,
        opt_names,
        st.none() | classic_member_metadata,
        tags,
    ),
    st.builds(rec.TargetAssignmentMetadataValue, i32s, i64s, tags),
    st.builds(rec.TargetAssignmentMemberValue, tps(False), tags),
    st.builds(
        rec.CurrentMemberAssignmentValue,
        i32s,
        i32s,
        st.integers(-128, 127),
        tps(True),
        tps(True),
        tags,
    ),
    st.builds(rec.RegularExpressionValue, st.lists(names, max_size=5).map(tuple), i64s, i64s, tags),
)


@settings(deadline=None)
@given(KEYS)
def test_key_round_trip(key) -> None:
    assert rec.decode_key(rec.encode_key(key)) == key


@settings(deadline=None)
@given(VALUES)
def test_value_round_trip(value) -> None:
    kind = rec._VALUE_TYPES[type(value)]
    data = rec.encode_value(value)
    assert rec.decode_value(kind, data) == value
    assert rec.encode_value(rec.decode_value(kind, data)) == data
