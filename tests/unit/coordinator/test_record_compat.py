"""A `__consumer_offsets` partition written before the codecs were generated still loads.

`fixtures/consumer_offsets_records.json` holds the bytes the hand-written codecs (records.py and
consumer/records.py before `proto/generate_records.py`) wrote for the records below; the
generated codecs must decode each to the same value and encode that value to the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dataplane.coordinator.consumer import records as rec
from dataplane.coordinator.records import (
    GROUP_METADATA,
    OFFSET_COMMIT,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_record,
    encode_key,
    encode_value,
)

FIXTURES = Path(__file__).parent / "fixtures" / "consumer_offsets_records.json"
TID, TID2 = bytes(range(16)), bytes(range(16, 32))

OC_KEY = OffsetCommitKey("group-1", "topic-a", 7)
MEMBERS = (
    MemberMetadata(
        "m-1", None, "client-1", "/10.0.0.1", 300000, 45000, b"\x00\x01sub", b"\x00\x01assign"
    ),
    MemberMetadata("m-2", "instance-2", "client-2", "/10.0.0.2", 60000, 10000, b"", b""),
)
GROUP = GroupMetadataValue("consumer", 5, "range", "m-1", 1700000000000, MEMBERS)

# name -> (key, value, value version) of a classic record
CLASSIC: dict[str, tuple[Any, Any, int]] = {
    "offset_commit_v3": (OC_KEY, OffsetCommitValue(15134, 4, "meta", 1672870795763), 3),
    "offset_commit_v1_expiry": (OC_KEY, OffsetCommitValue(42, -1, "", 1000, 2000), 1),
    "offset_commit_tombstone": (OC_KEY, None, -1),
    "offset_commit_unicode": (
        OffsetCommitKey("grüppe", "tópico", 2**31 - 1),
        OffsetCommitValue(2**63 - 1, 2**31 - 1, "é" * 300, -1),
        3,
    ),
    "offset_commit_v0": (OC_KEY, OffsetCommitValue(10, -1, "m", 100), 0),
    "offset_commit_v2": (OC_KEY, OffsetCommitValue(10, -1, "m", 100), 2),
    "offset_commit_v4": (OC_KEY, OffsetCommitValue(10, 4, "m", 100), 4),
    "offset_commit_legacy_key_v0": (OC_KEY, OffsetCommitValue(5, -1, "", 9), 0),
    "group_metadata_v3": (GroupMetadataKey("group-1"), GROUP, 3),
    "group_metadata_empty_v3": (
        GroupMetadataKey("group-2"),
        GroupMetadataValue("", 0, None, None, -1, ()),
        3,
    ),
    "group_metadata_tombstone": (GroupMetadataKey("group-1"), None, -1),
    # GroupMetadataValue v0 has neither the state timestamp (v2) nor, per member, the instance
    # id (v3) and the rebalance timeout (v1): they read as their defaults.
    "group_metadata_v0": (
        GroupMetadataKey("group-1"),
        GroupMetadataValue(
            "consumer",
            5,
            "range",
            "m-1",
            -1,
            tuple(
                MemberMetadata(
                    m.member_id,
                    None,
                    m.client_id,
                    m.client_host,
                    -1,
                    m.session_timeout,
                    m.subscription,
                    m.assignment,
                )
                for m in MEMBERS
            ),
        ),
        0,
    ),
    "group_metadata_v1": (
        GroupMetadataKey("group-1"),
        GroupMetadataValue(
            "consumer",
            5,
            "range",
            "m-1",
            -1,
            tuple(
                MemberMetadata(
                    m.member_id,
                    None,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout,
                    m.session_timeout,
                    m.subscription,
                    m.assignment,
                )
                for m in MEMBERS
            ),
        ),
        1,
    ),
    "group_metadata_v2": (
        GroupMetadataKey("group-1"),
        GroupMetadataValue(
            "consumer",
            5,
            "range",
            "m-1",
            1700000000000,
            tuple(
                MemberMetadata(
                    m.member_id,
                    None,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout,
                    m.session_timeout,
                    m.subscription,
                    m.assignment,
                )
                for m in MEMBERS
            ),
        ),
        2,
    ),
    "group_metadata_v4": (GroupMetadataKey("group-1"), GROUP, 4),
}

CLASSIC_MEMBER = rec.ClassicMemberMetadata(
    45000, (rec.ClassicMemberMetadata.ClassicProtocol("range", b"\x00\x01"),)
)
PARTITIONS = rec.TopicMetadataEntry.PartitionMetadata

# name -> (key, value) of a KIP-848 record
CONSUMER_GROUP: dict[str, tuple[rec.Key, rec.Value | None]] = {
    "cg_metadata": (rec.GroupKey(rec.GROUP_METADATA, "g1"), rec.ConsumerGroupMetadataValue(5)),
    "cg_metadata_tagged": (
        rec.GroupKey(rec.GROUP_METADATA, "g1"),
        rec.ConsumerGroupMetadataValue(5, -2, 1000),
    ),
    "cg_metadata_unknown_tag": (
        rec.GroupKey(rec.GROUP_METADATA, "g1"),
        rec.ConsumerGroupMetadataValue(5, 42, -1, ((7, b"ab"),)),
    ),
    "cg_partition_metadata": (
        rec.GroupKey(rec.PARTITION_METADATA, "g1"),
        rec.PartitionMetadataValue(
            (
                rec.TopicMetadataEntry(
                    TID, "t", 2, (PARTITIONS(0, ("r1", "r2")), PARTITIONS(1, ()))
                ),
                rec.TopicMetadataEntry(TID2, "u", 0),
            )
        ),
    ),
    "cg_member_metadata": (
        rec.MemberKey(rec.MEMBER_METADATA, "g1", "m1"),
        rec.MemberMetadataValue(None, "r", "c", "/h", ("a", "b"), "", 30000, None),
    ),
    "cg_member_metadata_full": (
        rec.MemberKey(rec.MEMBER_METADATA, "g1", "m1"),
        rec.MemberMetadataValue("inst", None, "c", "/h", (), "t.*", -1, "uniform", CLASSIC_MEMBER),
    ),
    "cg_target_assignment_metadata": (
        rec.GroupKey(rec.TARGET_ASSIGNMENT_METADATA, "g1"),
        rec.TargetAssignmentMetadataValue(7),
    ),
    "cg_target_assignment_metadata_ts": (
        rec.GroupKey(rec.TARGET_ASSIGNMENT_METADATA, "g1"),
        rec.TargetAssignmentMetadataValue(7, 1000),
    ),
    "cg_target_assignment_member": (
        rec.MemberKey(rec.TARGET_ASSIGNMENT_MEMBER, "g1", "m1"),
        rec.TargetAssignmentMemberValue(
            (rec.TargetTopicPartition(TID, (0, 1)), rec.TargetTopicPartition(TID2, ()))
        ),
    ),
    "cg_current_assignment": (
        rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, "g1", "m1"),
        rec.CurrentMemberAssignmentValue(
            3,
            2,
            1,
            (rec.TopicPartitions(TID, (1,)),),
            (rec.TopicPartitions(TID2, (0,), (2,)), rec.TopicPartitions(TID, (5, 6), ())),
        ),
    ),
    "cg_current_assignment_unknown_tag": (
        rec.MemberKey(rec.CURRENT_MEMBER_ASSIGNMENT, "g1", "m1"),
        rec.CurrentMemberAssignmentValue(
            0, -1, 0, (rec.TopicPartitions(TID, (1,), None, ((3, b"z"),)),), ()
        ),
    ),
    "cg_regular_expression": (
        rec.RegexKey("g1", "^t.*"),
        rec.RegularExpressionValue(("t1", "t2"), 9, 1234),
    ),
}
for _name in (
    "cg_metadata",
    "cg_member_metadata",
    "cg_regular_expression",
    "cg_current_assignment",
    "cg_target_assignment_member",
    "cg_target_assignment_metadata",
    "cg_partition_metadata",
):
    CONSUMER_GROUP[f"{_name}_tombstone"] = (CONSUMER_GROUP[_name][0], None)


def _fixtures() -> dict[str, tuple[bytes, bytes | None]]:
    return {
        f["name"]: (
            bytes.fromhex(f["key"]),
            None if f["value"] is None else bytes.fromhex(f["value"]),
        )
        for f in json.loads(FIXTURES.read_text())
    }


def test_every_fixture_is_covered() -> None:
    assert set(_fixtures()) == set(CLASSIC) | set(CONSUMER_GROUP)


@pytest.mark.parametrize("name", sorted(CLASSIC))
def test_classic_records(name: str) -> None:
    key_bytes, value_bytes = _fixtures()[name]
    key, value, version = CLASSIC[name]
    decoded = decode_record(key_bytes, value_bytes)
    assert decoded is not None
    assert decoded.type_id == (
        OFFSET_COMMIT if isinstance(key, OffsetCommitKey) else GROUP_METADATA
    )
    assert (decoded.key, decoded.value, decoded.value_version) == (key, value, version)
    type_id = int.from_bytes(key_bytes[:2], "big")  # the legacy key (0) is written as it was
    assert encode_key(type_id, key) == key_bytes
    if value is not None:
        assert encode_value(decoded.type_id, value, version) == value_bytes


@pytest.mark.parametrize("name", sorted(CONSUMER_GROUP))
def test_consumer_group_records(name: str) -> None:
    key_bytes, value_bytes = _fixtures()[name]
    key, value = CONSUMER_GROUP[name]
    assert rec.decode(key_bytes, value_bytes) == (key, value)
    assert rec.encode(key, value) == (key_bytes, value_bytes)
