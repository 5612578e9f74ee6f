"""Hypothesis strategies for the encoders' inputs.

Values are drawn for the newest version; encoders (and `kio_models.build`) drop the fields an
older version lacks, so one strategy serves every version. The few version-dependent
constraints (nullable topic names) are parameters.
"""

from __future__ import annotations

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from dataplane.protocol.encoders import (
    AbortedTransaction,
    BatchIndexAndErrorMessage,
    EpochEndOffset,
    FetchPartition,
    FetchTopic,
    LeaderIdAndEpoch,
    MetadataPartition,
    MetadataTopic,
    NodeEndpoint,
    ProducePartition,
    ProduceTopic,
    SnapshotId,
)

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
# kio models error codes as an enum, so only the codes it knows can be compared.
error_codes = st.sampled_from([code.value for code in ErrorCode])
# kio's i32Timedelta and TZAware reject negative values (other than -1 = null timestamp).
throttle_times = st.integers(0, 2**31 - 1)
timestamps = st.one_of(st.just(-1), st.integers(0, 253402300799999))  # up to year 9999
names = st.text(max_size=12)  # unicode, including multi-byte characters and ""
nullable_names = st.none() | names
topic_ids = st.just(bytes(16)) | st.binary(min_size=16, max_size=16)


def small_lists(elements: st.SearchStrategy, max_size: int = 3) -> st.SearchStrategy:
    return st.lists(elements, max_size=max_size)


def tagged_or_absent(strategy: st.SearchStrategy, default: tuple) -> st.SearchStrategy:
    """None, the schema default (which must be omitted too), or an arbitrary value."""
    return st.none() | st.just(default) | strategy


leaders = tagged_or_absent(st.builds(LeaderIdAndEpoch, int32, int32), LeaderIdAndEpoch(-1, -1))
node_endpoints = small_lists(st.builds(NodeEndpoint, int32, names, int32, nullable_names))

produce_topics = small_lists(
    st.builds(
        ProduceTopic,
        name=names,
        topic_id=topic_ids,
        partitions=small_lists(
            st.builds(
                ProducePartition,
                partition_index=int32,
                error_code=error_codes,
                base_offset=int64,
                log_append_time_ms=timestamps,
                log_start_offset=int64,
                record_errors=small_lists(
                    st.builds(BatchIndexAndErrorMessage, int32, nullable_names)
                ),
                error_message=nullable_names,
                current_leader=leaders,
            )
        ),
    )
)

# Around the 1- and 2-byte varint boundaries, beyond int16, and a large ~1 MB batch.
records = st.one_of(
    st.none(),
    st.binary(max_size=300),
    st.binary(max_size=300).map(lambda b: memoryview(b)),  # (the class is generic to mypy)
    st.sampled_from([127, 128, 16383, 16384, 40000, 1 << 20]).map(bytes),
)

fetch_topics = small_lists(
    st.builds(
        FetchTopic,
        name=names,
        topic_id=topic_ids,
        partitions=small_lists(
            st.builds(
                FetchPartition,
                partition_index=int32,
                error_code=error_codes,
                high_watermark=int64,
                last_stable_offset=int64,
                log_start_offset=int64,
                aborted_transactions=st.none()
                | small_lists(st.builds(AbortedTransaction, int64, int64)),
                preferred_read_replica=int32,
                records=records,
                diverging_epoch=tagged_or_absent(
                    st.builds(EpochEndOffset, int32, int64), EpochEndOffset(-1, -1)
                ),
                current_leader=leaders,
                snapshot_id=tagged_or_absent(
                    st.builds(SnapshotId, int64, int32), SnapshotId(-1, -1)
                ),
            )
        ),
    )
)

metadata_brokers = node_endpoints


def metadata_topics(nullable_name: bool) -> st.SearchStrategy:
    return small_lists(
        st.builds(
            MetadataTopic,
            error_code=error_codes,
            name=nullable_names if nullable_name else names,
            topic_id=topic_ids,
            is_internal=st.booleans(),
            partitions=small_lists(
                st.builds(
                    MetadataPartition,
                    error_code=error_codes,
                    partition_index=int32,
                    leader=int32,
                    leader_epoch=int32,
                    replicas=small_lists(int32, max_size=5),
                    isr=small_lists(int32, max_size=5),
                    offline_replicas=small_lists(int32, max_size=5),
                )
            ),
            authorized_operations=int32,
        )
    )
