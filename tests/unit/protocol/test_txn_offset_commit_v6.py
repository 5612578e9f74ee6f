"""TxnOffsetCommit v6 (Kafka 4.4, KIP-1319: topics by id), which kio lacks: decoded and encoded
byte for byte as Kafka 4.4's TxnOffsetCommitRequest/Response.json lay them out (flexible
version: compact strings and arrays, a tagged-field section after every struct; expected bytes
built by hand here)."""

from __future__ import annotations

import uuid

from dataplane.handlers import SUPPORTED_VERSIONS
from dataplane.protocol.codec import (
    ResponseBuilder,
    decode_body,
    encode_with_kio,
    is_flexible,
    parse_header,
    response_header_flexible,
)
from dataplane.protocol.errors import ErrorCode
from tests.unit.coordinator.test_records import i16, i32, i64, s16

TXN_OFFSET_COMMIT = 28
TOPIC_ID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
NO_TAGS = b"\x00"


def compact(value: str | None) -> bytes:
    """A compact (nullable) string: unsigned varint of length + 1 (0: null), then UTF-8."""
    if value is None:
        return b"\x00"
    data = value.encode()
    assert len(data) < 127  # a one-byte varint
    return bytes([len(data) + 1]) + data


def array(*items: bytes) -> bytes:
    """A compact array: unsigned varint of count + 1, then the items."""
    return bytes([len(items) + 1]) + b"".join(items)


# TransactionalId, GroupId, ProducerId, ProducerEpoch, GenerationIdOrMemberEpoch, MemberId,
# GroupInstanceId (nullable), Topics[TopicId, Partitions[PartitionIndex, CommittedOffset,
# CommittedLeaderEpoch, CommittedMetadata (nullable)]]; v6 has no topic Name.
REQUEST_V6 = (
    compact("txn")
    + compact("grp")
    + i64(4242)
    + i16(3)
    + i32(7)
    + compact("member-1")
    + compact(None)
    + array(
        TOPIC_ID.bytes
        + array(
            i32(0) + i64(5) + i32(2) + compact("meta") + NO_TAGS,
            i32(3) + i64(9) + i32(-1) + compact(None) + NO_TAGS,
        )
        + NO_TAGS
    )
    + NO_TAGS
)


def test_v6_is_served_and_flexible() -> None:
    assert SUPPORTED_VERSIONS[TXN_OFFSET_COMMIT] == (0, 6)
    assert is_flexible(TXN_OFFSET_COMMIT, 6)
    assert response_header_flexible(TXN_OFFSET_COMMIT, 6)


def test_v6_request() -> None:
    # header v2: api key, version, correlation id, client id, tagged fields
    frame = i16(TXN_OFFSET_COMMIT) + i16(6) + i32(42) + s16("test") + NO_TAGS + REQUEST_V6
    req = decode_body(parse_header(frame, SUPPORTED_VERSIONS), frame)
    assert (req.transactional_id, req.group_id, req.producer_id, req.producer_epoch) == (
        "txn",
        "grp",
        4242,
        3,
    )
    assert (req.generation_id_or_member_epoch, req.member_id, req.group_instance_id) == (
        7,
        "member-1",
        None,
    )
    (topic,) = req.topics
    assert topic.topic_id == TOPIC_ID
    assert not hasattr(topic, "name")
    assert [
        (p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
        for p in topic.partitions
    ] == [(0, 5, 2, "meta"), (3, 9, -1, None)]
    assert encode_with_kio(req) == REQUEST_V6


def test_v6_response() -> None:
    b = ResponseBuilder(TXN_OFFSET_COMMIT, 6)
    resp = b.TxnOffsetCommitResponse(
        throttle_time=0,
        topics=(
            b.TxnOffsetCommitResponseTopic(
                name="dropped: v6 has no name",
                topic_id=TOPIC_ID,
                partitions=(
                    b.TxnOffsetCommitResponsePartition(partition_index=0, error_code=0),
                    b.TxnOffsetCommitResponsePartition(
                        partition_index=3, error_code=ErrorCode.unknown_topic_id
                    ),
                ),
            ),
        ),
    )
    # ThrottleTimeMs, Topics[TopicId, Partitions[PartitionIndex, ErrorCode]]
    assert encode_with_kio(resp) == (
        i32(0)
        + array(
            TOPIC_ID.bytes + array(i32(0) + i16(0) + NO_TAGS, i32(3) + i16(100) + NO_TAGS) + NO_TAGS
        )
        + NO_TAGS
    )
