"""OffsetCommit v0-v1, OffsetFetch v0 and DescribeConfigs v0, the versions Kafka 4 removed
(KIP-896) and kio lacks: decoded and encoded byte for byte as Kafka's JSON messages lay them out
(expected bytes built by hand here)."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer import OffsetCommitRequest as KafkaPythonCommit
from kafka.protocol.consumer import OffsetFetchRequest as KafkaPythonFetch
from kio.static.constants import EntityType

from dataplane.handlers import SUPPORTED_VERSIONS
from dataplane.protocol.codec import (
    EntityBuilder,
    MalformedRequest,
    ResponseBuilder,
    decode_body,
    encode_with_kio,
    is_flexible,
    parse_header,
    response_header_flexible,
)
from dataplane.protocol.errors import ErrorCode
from tests.unit.coordinator.test_records import i16, i32, i64, s16

COMMIT, FETCH, DESCRIBE_CONFIGS = 8, 9, 32


def i8(v: int) -> bytes:
    return v.to_bytes(1, "big", signed=True)


def frame(api_key: int, version: int, body: bytes) -> bytes:
    """A request frame with header v1 (these versions are not flexible)."""
    return i16(api_key) + i16(version) + i32(42) + s16("test") + body


def decode(api_key: int, version: int, body: bytes):
    header = parse_header(frame(api_key, version, body), SUPPORTED_VERSIONS)
    return decode_body(header, frame(api_key, version, body))


def request_builder(api_key: int, version: int) -> EntityBuilder:
    return EntityBuilder(api_key, version, EntityType.request)


# OffsetCommitRequest v0: GroupId, Topics[Name, Partitions[PartitionIndex, CommittedOffset,
# CommittedMetadata (nullable)]]
COMMIT_V0 = (
    s16("grp")
    + i32(1)
    + s16("tp")
    + i32(2)
    + (i32(0) + i64(5) + s16("meta"))
    + (i32(3) + i64(7) + s16(None))
)

# v1 adds GenerationId and MemberId, and CommitTimestamp after CommittedOffset
COMMIT_V1 = (
    s16("grp")
    + i32(4)
    + s16("member-1")
    + i32(1)
    + s16("tp")
    + i32(2)
    + (i32(0) + i64(5) + i64(1_700_000_000_000) + s16("meta"))
    + (i32(3) + i64(7) + i64(-1) + s16(None))
)

# OffsetFetchRequest v0 (as v1): GroupId, Topics[Name, PartitionIndexes[]]
FETCH_V0 = s16("grp") + i32(1) + s16("tp") + i32(2) + i32(0) + i32(3)


def test_the_old_versions_are_advertised_and_not_flexible() -> None:
    assert SUPPORTED_VERSIONS[COMMIT][0] == 0
    assert SUPPORTED_VERSIONS[FETCH][0] == 0
    for api_key, version in ((COMMIT, 0), (COMMIT, 1), (FETCH, 0)):
        assert not is_flexible(api_key, version)
        assert not response_header_flexible(api_key, version)


def test_offset_commit_v0_request() -> None:
    req = decode(COMMIT, 0, COMMIT_V0)
    assert req.group_id == "grp"
    assert not hasattr(req, "member_id")
    assert not hasattr(req, "generation_id_or_member_epoch")
    (topic,) = req.topics
    assert topic.name == "tp"
    assert [
        (p.partition_index, p.committed_offset, p.committed_metadata) for p in topic.partitions
    ] == [(0, 5, "meta"), (3, 7, None)]
    assert encode_with_kio(req) == COMMIT_V0


def test_offset_commit_v1_request() -> None:
    req = decode(COMMIT, 1, COMMIT_V1)
    assert (req.group_id, req.generation_id_or_member_epoch, req.member_id) == (
        "grp",
        4,
        "member-1",
    )
    assert [
        (p.partition_index, p.committed_offset, p.commit_timestamp, p.committed_metadata)
        for p in req.topics[0].partitions
    ] == [(0, 5, 1_700_000_000_000, "meta"), (3, 7, -1, None)]
    assert encode_with_kio(req) == COMMIT_V1


def test_old_requests_built_by_name_encode_as_kafka_python_does() -> None:
    """What the tests' wire client sends (fields by name, ones a version lacks dropped) is what
    another implementation of Kafka's JSON, kafka-python's, sends."""
    for version, expected in ((0, COMMIT_V0), (1, COMMIT_V1)):
        b = request_builder(COMMIT, version)
        partitions = (
            b.OffsetCommitRequestPartition(
                partition_index=0,
                committed_offset=5,
                committed_leader_epoch=-1,
                commit_timestamp=1_700_000_000_000,
                committed_metadata="meta",
            ),
            b.OffsetCommitRequestPartition(
                partition_index=3, committed_offset=7, committed_metadata=None
            ),
        )
        req = b.OffsetCommitRequest(
            group_id="grp",
            generation_id_or_member_epoch=4,
            member_id="member-1",
            retention_time=-1,
            topics=(b.OffsetCommitRequestTopic(name="tp", partitions=partitions),),
        )
        assert encode_with_kio(req) == expected, version
        topic = KafkaPythonCommit[version].OffsetCommitRequestTopic
        partition = topic.OffsetCommitRequestPartition
        theirs = KafkaPythonCommit[version](
            group_id="grp",
            generation_id_or_member_epoch=4,
            member_id="member-1",
            topics=[
                topic(
                    name="tp",
                    partitions=[
                        partition(
                            partition_index=0,
                            committed_offset=5,
                            commit_timestamp=1_700_000_000_000,
                            committed_metadata="meta",
                        ),
                        partition(partition_index=3, committed_offset=7, committed_metadata=None),
                    ],
                )
            ],
        )
        assert theirs.encode() == expected, version
    theirs = KafkaPythonFetch[0](
        group_id="grp",
        topics=[KafkaPythonFetch[0].OffsetFetchRequestTopic(name="tp", partition_indexes=[0, 3])],
    )
    assert theirs.encode() == FETCH_V0


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_v0_v1_response(version: int) -> None:
    b = ResponseBuilder(COMMIT, version)
    resp = b.OffsetCommitResponse(
        throttle_time=0,  # v3+: dropped
        topics=(
            b.OffsetCommitResponseTopic(
                name="tp",
                partitions=(
                    b.OffsetCommitResponsePartition(partition_index=0, error_code=0),
                    b.OffsetCommitResponsePartition(
                        partition_index=3, error_code=ErrorCode.illegal_generation
                    ),
                ),
            ),
        ),
    )
    # Topics[Name, Partitions[PartitionIndex, ErrorCode]], no throttle time
    assert encode_with_kio(resp) == (
        i32(1) + s16("tp") + i32(2) + i32(0) + i16(0) + i32(3) + i16(22)
    )


def test_offset_fetch_v0_request() -> None:
    req = decode(FETCH, 0, FETCH_V0)
    assert req.group_id == "grp"
    assert [(t.name, tuple(t.partition_indexes)) for t in req.topics] == [("tp", (0, 3))]
    assert encode_with_kio(req) == FETCH_V0


def test_offset_fetch_v0_response() -> None:
    b = ResponseBuilder(FETCH, 0)
    resp = b.OffsetFetchResponse(
        throttle_time=0,  # v3+: dropped
        error_code=0,  # v2+: dropped
        topics=(
            b.OffsetFetchResponseTopic(
                name="tp",
                partitions=(
                    b.OffsetFetchResponsePartition(
                        partition_index=0,
                        committed_offset=5,
                        committed_leader_epoch=-1,  # v5+: dropped
                        metadata="meta",
                        error_code=0,
                    ),
                    b.OffsetFetchResponsePartition(
                        partition_index=3,
                        committed_offset=-1,
                        metadata=None,
                        error_code=ErrorCode.not_coordinator,
                    ),
                ),
            ),
        ),
    )
    # Topics[Name, Partitions[PartitionIndex, CommittedOffset, Metadata, ErrorCode]]
    assert encode_with_kio(resp) == (
        i32(1)
        + s16("tp")
        + i32(2)
        + (i32(0) + i64(5) + s16("meta") + i16(0))
        + (i32(3) + i64(-1) + s16(None) + i16(16))
    )


# DescribeConfigsRequest v0: Resources[ResourceType, ResourceName, ConfigurationKeys (nullable)]
DESCRIBE_CONFIGS_V0 = i8(2) + s16("tp") + i32(1) + s16("retention.ms")
DESCRIBE_CONFIGS_V0 = i32(2) + DESCRIBE_CONFIGS_V0 + (i8(4) + s16("1") + i32(-1))


def test_describe_configs_v0_request() -> None:
    assert SUPPORTED_VERSIONS[DESCRIBE_CONFIGS][0] == 0
    assert not is_flexible(DESCRIBE_CONFIGS, 0)
    req = decode(DESCRIBE_CONFIGS, 0, DESCRIBE_CONFIGS_V0)
    assert [(r.resource_type, r.resource_name, r.configuration_keys) for r in req.resources] == [
        (2, "tp", ("retention.ms",)),
        (4, "1", None),
    ]
    assert not hasattr(req, "include_synonyms")
    assert encode_with_kio(req) == DESCRIBE_CONFIGS_V0


def test_describe_configs_v0_response() -> None:
    """v0 has IsDefault where v1+ have ConfigSource, and no synonyms: one handler body builds
    both (the fields a version lacks are dropped)."""
    b = ResponseBuilder(DESCRIBE_CONFIGS, 0)
    resp = b.DescribeConfigsResponse(
        throttle_time=0,
        results=(
            b.DescribeConfigsResult(
                error_code=0,
                error_message=None,
                resource_type=2,
                resource_name="tp",
                configs=(
                    b.DescribeConfigsResourceResult(
                        name="retention.ms",
                        value="1000",
                        read_only=False,
                        config_source=1,  # v1+: dropped
                        is_default=False,
                        is_sensitive=False,
                        synonyms=(),  # v1+: dropped
                        config_type=5,  # v3+: dropped
                    ),
                ),
            ),
        ),
    )
    # ThrottleTimeMs, Results[ErrorCode, ErrorMessage, ResourceType, ResourceName,
    # Configs[Name, Value, ReadOnly, IsDefault, IsSensitive]]
    assert encode_with_kio(resp) == (
        i32(0)
        + i32(1)
        + (i16(0) + s16(None) + i8(2) + s16("tp"))
        + i32(1)
        + (s16("retention.ms") + s16("1000") + b"\x00" + b"\x00" + b"\x00")
    )


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (COMMIT, 0, COMMIT_V0[:-3]),
        (COMMIT, 1, COMMIT_V1[:20]),
        (FETCH, 0, FETCH_V0[:-2]),
        (DESCRIBE_CONFIGS, 0, DESCRIBE_CONFIGS_V0[:-2]),
    ],
)
def test_truncated_old_requests_are_malformed(api_key: int, version: int, body: bytes) -> None:
    with pytest.raises(MalformedRequest):
        decode(api_key, version, body)
