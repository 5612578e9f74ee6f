"""The dedicated encoders must produce exactly kio's bytes, for every supported version.

Each test builds the kio dataclass from the same inputs (tests/unit/protocol/kio_models.py),
compares our bytes with kio's `entity_writer` output, then decodes our bytes with kio's
`entity_reader` and compares the result with that dataclass.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.protocol.encoders import (
    FETCH_VERSIONS,
    METADATA_VERSIONS,
    NO_TOPIC_ID,
    PRODUCE_VERSIONS,
    AbortedTransaction,
    FetchPartition,
    FetchTopic,
    MetadataBroker,
    MetadataPartition,
    MetadataTopic,
    ProducePartition,
    ProduceTopic,
    encode_fetch_response,
    encode_metadata_response,
    encode_produce_response,
)
from tests.unit.protocol import kio_models
from tests.unit.protocol import strategies as s

# kio's writer is slow on the ~1 MB record batches some examples carry.
versions_settings = settings(deadline=None, max_examples=60)


def assert_matches_kio(ours: bytes, reference: object) -> None:
    assert ours == kio_models.encode(reference)
    assert kio_models.decode(type(reference), ours) == reference


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@versions_settings
@given(topics=s.produce_topics, throttle_time_ms=s.throttle_times, endpoints=s.node_endpoints)
def test_produce_matches_kio(version, topics, throttle_time_ms, endpoints) -> None:
    ours = encode_produce_response(version, topics, throttle_time_ms, endpoints)
    reference = kio_models.produce_response(version, topics, throttle_time_ms, endpoints)
    assert_matches_kio(ours, reference)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@versions_settings
@given(
    topics=s.fetch_topics,
    throttle_time_ms=s.throttle_times,
    error_code=s.error_codes,
    session_id=s.int32,
    endpoints=s.node_endpoints,
)
def test_fetch_matches_kio(version, topics, throttle_time_ms, error_code, session_id, endpoints):
    buffers = encode_fetch_response(
        version, topics, throttle_time_ms, error_code, session_id, endpoints
    )
    reference = kio_models.fetch_response(
        version, topics, throttle_time_ms, error_code, session_id, endpoints
    )
    assert_matches_kio(b"".join(buffers), reference)


@pytest.mark.parametrize("version", METADATA_VERSIONS)
@versions_settings
@given(data=st.data())
def test_metadata_matches_kio(version, data) -> None:
    arguments = {
        "brokers": data.draw(s.metadata_brokers),
        "topics": data.draw(s.metadata_topics(nullable_name=version >= 12)),
        "cluster_id": data.draw(s.nullable_names),
        "controller_id": data.draw(s.int32),
        "throttle_time_ms": data.draw(s.throttle_times),
        "cluster_authorized_operations": data.draw(s.int32),
        "error_code": data.draw(s.error_codes),
    }
    ours = encode_metadata_response(version, **arguments)
    assert_matches_kio(ours, kio_models.metadata_response(version, **arguments))


def test_fetch_passes_records_through_uncopied() -> None:
    batches = [bytes([n]) * (1 << 20) for n in range(3)]
    partitions = [
        FetchPartition(n, 0, 10, 10, 0, None, -1, batch) for n, batch in enumerate(batches)
    ]
    for version in (4, 16):
        buffers = encode_fetch_response(version, [FetchTopic("t", NO_TOPIC_ID, partitions)])
        assert buffers[1::2] == batches
        assert all(ours is batch for ours, batch in zip(buffers[1::2], batches, strict=True))
        assert len(buffers) == 2 * len(batches) + 1


@pytest.mark.parametrize("version", [8, 9, 12])
def test_metadata_long_arrays_match_kio(version: int) -> None:
    """Arrays of 127+ elements need a multi-byte compact length."""
    replicas = list(range(300))
    partition = MetadataPartition(0, 0, 1, 5, replicas, replicas[:130], replicas[:127])
    topics = [MetadataTopic(0, f"topic-{n}", bytes(16), False, [partition]) for n in range(200)]
    brokers = [MetadataBroker(n, "h" * 200, 9092, None) for n in range(130)]
    arguments: dict[str, Any] = {
        "brokers": brokers,
        "topics": topics,
        "cluster_id": "c",
        "controller_id": 1,
    }
    reference = kio_models.metadata_response(
        version, **arguments, throttle_time_ms=0, cluster_authorized_operations=0, error_code=0
    )
    ours = encode_metadata_response(version, **arguments, cluster_authorized_operations=0)
    assert_matches_kio(ours, reference)


def test_produce_many_partitions_match_kio() -> None:
    partitions = [ProducePartition(n, 0, n, -1, 0) for n in range(200)]
    topics = [ProduceTopic("t" * 300, partitions)]
    for version in PRODUCE_VERSIONS:
        reference = kio_models.produce_response(version, topics, 0, ())
        assert_matches_kio(encode_produce_response(version, topics), reference)


def test_produce_v12_matches_kio_and_v11() -> None:
    """v12 only tells the broker the producer uses transaction version 2 (KIP-890): the
    response is v11's, including the errors a transactional produce can get."""
    partitions = [
        ProducePartition(0, 0, 42, -1, 0),
        ProducePartition(1, 48, -1, -1, -1, error_message="Partition was not added"),
        ProducePartition(2, 19, -1, -1, -1, error_message="Unable to verify"),
    ]
    topics = [ProduceTopic("orders", partitions)]
    ours = encode_produce_response(12, topics)
    assert_matches_kio(ours, kio_models.produce_response(12, topics, 0, ()))
    assert ours == encode_produce_response(11, topics)


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_read_committed_partition_matches_kio(version: int) -> None:
    """A read_committed answer: LSO below the high watermark, aborted transactions listed
    (empty is an empty array, not null)."""
    aborted = [AbortedTransaction(1000, 5), AbortedTransaction(1001, 17)]
    partitions = [
        FetchPartition(0, 0, 40, 30, 0, aborted, -1, b"x" * 70),
        FetchPartition(1, 0, 40, 40, 0, [], -1, b""),
    ]
    topics = [FetchTopic("orders", bytes(range(16)), partitions)]
    reference = kio_models.fetch_response(version, topics, 0, 0, 0, ())
    assert_matches_kio(b"".join(encode_fetch_response(version, topics)), reference)


@pytest.mark.parametrize(
    ("encode", "versions"),
    [
        (lambda v: encode_produce_response(v, []), PRODUCE_VERSIONS),
        (lambda v: encode_fetch_response(v, []), FETCH_VERSIONS),
        (lambda v: encode_metadata_response(v, [], [], None, -1), METADATA_VERSIONS),
    ],
)
def test_unsupported_versions_are_refused(encode, versions: range) -> None:
    for version in (versions.start - 1, versions.stop):
        with pytest.raises(ValueError, match="not supported"):
            encode(version)


def test_topic_id_must_be_16_bytes() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        encode_fetch_response(13, [FetchTopic("t", b"\x00" * 15, [])])
