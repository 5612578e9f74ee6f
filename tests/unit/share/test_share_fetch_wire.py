"""The ShareFetch response encoder produces exactly kio's bytes (v1 and v2)."""

from __future__ import annotations

import datetime
import importlib
import uuid

import pytest

from dataplane.log.records import build_batch
from dataplane.protocol.encoders import NodeEndpoint
from dataplane.protocol.errors import ErrorCode
from dataplane.share.partition_state import Acquired
from dataplane.share.wire import ShareFetchTopic, SharePartitionData, encode_share_fetch_response
from tests.unit.protocol import kio_models

TOPIC = uuid.uuid4()


def reference(version: int, records: bytes, with_error: bool) -> object:
    m = importlib.import_module(f"kio.schema.share_fetch.v{version}.response")
    partitions = [
        m.PartitionData(
            partition_index=0,
            error_code=ErrorCode.none,
            error_message=None,
            acknowledge_error_code=ErrorCode.invalid_record_state,
            acknowledge_error_message="Member is not the owner",
            current_leader=m.LeaderIdAndEpoch(leader_id=0, leader_epoch=0),  # Kafka: unset
            records=records,
            acquired_records=(
                m.AcquiredRecords(first_offset=0, last_offset=1, delivery_count=1),
                m.AcquiredRecords(first_offset=3, last_offset=3, delivery_count=2),
            ),
        )
    ]
    if with_error:
        partitions.append(
            m.PartitionData(
                partition_index=1,
                error_code=ErrorCode.not_leader_or_follower,
                error_message=None,
                acknowledge_error_code=0,
                current_leader=m.LeaderIdAndEpoch(leader_id=2, leader_epoch=7),
                records=b"",
                acquired_records=(),
            )
        )
    return m.ShareFetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=30000),
        responses=(m.ShareFetchableTopicResponse(topic_id=TOPIC, partitions=tuple(partitions)),),
        node_endpoints=(m.NodeEndpoint(node_id=2, host="h2", port=9092, rack=None),)
        if with_error
        else (),
    )


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("with_error", [False, True])
def test_share_fetch_response_matches_kio(version: int, with_error: bool) -> None:
    batch = build_batch([(b"k", b"v"), (b"k2", b"v2")], 1000)
    batch2 = build_batch([(None, b"x")], 1000)
    parts = [
        SharePartitionData(
            0,
            acknowledge_error_code=ErrorCode.invalid_record_state,
            acknowledge_error_message="Member is not the owner",
            records=[memoryview(batch), memoryview(batch2)],
            acquired=[Acquired(0, 1, 1), Acquired(3, 3, 2)],
        )
    ]
    endpoints = []
    if with_error:
        parts.append(SharePartitionData(1, ErrorCode.not_leader_or_follower, leader=(2, 7)))
        endpoints.append(NodeEndpoint(2, "h2", 9092))
    ours = encode_share_fetch_response([ShareFetchTopic(TOPIC.bytes, parts)], 30000, endpoints)
    expected = reference(version, batch + batch2, with_error)
    assert b"".join(ours) == kio_models.encode(expected)


def test_records_are_not_copied() -> None:
    piece = memoryview(build_batch([(b"k", b"v")], 1))
    out = encode_share_fetch_response(
        [ShareFetchTopic(TOPIC.bytes, [SharePartitionData(0, records=[piece])])], 1
    )
    assert any(buffer is piece for buffer in out)


def test_top_level_error() -> None:
    m = importlib.import_module("kio.schema.share_fetch.v1.response")
    ours = encode_share_fetch_response((), 15000, error_code=ErrorCode.share_session_not_found)
    expected = m.ShareFetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.share_session_not_found,
        error_message=None,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=15000),
        responses=(),
        node_endpoints=(),
    )
    assert b"".join(ours) == kio_models.encode(expected)
