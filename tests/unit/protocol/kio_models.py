"""Build the kio dataclasses equivalent to the encoders' inputs: the reference in the tests.

kio quirks handled here (the encoders take plain Kafka values instead):

* each version has its own module and classes, and a field absent from a version does not
  exist on its dataclass, so `build` drops the keyword arguments a class does not declare;
* error codes are `ErrorCode` members, so only codes kio knows can be expressed;
* throttle_time_ms is `throttle_time`, an `i32Timedelta` (a `datetime.timedelta`);
* Produce `log_append_time` is a tz-aware datetime and -1 is None; kio's `TZAware` type
  rejects sub-second values (its predicate demands microsecond == 0), so datetimes are made
  with `tz_aware_from_i64`, as kio's reader does (the writer does not validate);
* UUIDs are `uuid.UUID`; the all-zero id is None (the reader also returns None for it);
* an absent tagged struct is the struct's default instance (all fields -1), never None,
  and kio's writer omits a tagged field whenever it equals that default.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import io
import uuid
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NamedTuple

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i64

from dataplane.protocol.encoders import (
    FetchTopic,
    MetadataBroker,
    MetadataTopic,
    NodeEndpoint,
    ProduceTopic,
)


def response_module(api: str, version: int) -> ModuleType:
    return importlib.import_module(f"kio.schema.{api}.v{version}.response")


def build(cls: type, **values: Any) -> Any:
    """Instantiate `cls` with those of `values` that it declares."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in values.items() if name in names})


def nested(module: ModuleType, class_name: str, value: NamedTuple) -> Any:
    """The kio twin of a NamedTuple whose fields have the same names as the dataclass's.

    Returns None when this version has no such class: `build` drops the field anyway.
    """
    cls = getattr(module, class_name, None)
    return None if cls is None else build(cls, **value._asdict())


def tagged(module: ModuleType, class_name: str, value: NamedTuple | None) -> Any:
    cls = getattr(module, class_name, None)
    if cls is None:
        return None
    return cls() if value is None else nested(module, class_name, value)


def throttle(milliseconds: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=milliseconds)


def topic_uuid(topic_id: bytes) -> uuid.UUID | None:
    return None if topic_id == bytes(16) else uuid.UUID(bytes=topic_id)


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def decode(cls: type[Any], data: bytes) -> Any:
    """Decode a whole body with kio; fails if bytes are left over."""
    entity, size = entity_reader(cls)(data, 0)
    assert size == len(data)
    return entity


def produce_response(
    version: int,
    topics: Sequence[ProduceTopic],
    throttle_time_ms: int,
    node_endpoints: Sequence[NodeEndpoint],
) -> Any:
    m = response_module("produce", version)
    return build(
        m.ProduceResponse,
        responses=tuple(
            build(
                m.TopicProduceResponse,
                name=topic.name,
                topic_id=topic_uuid(topic.topic_id),
                partition_responses=tuple(
                    build(
                        m.PartitionProduceResponse,
                        index=p.partition_index,
                        error_code=ErrorCode(p.error_code),
                        base_offset=p.base_offset,
                        log_append_time=(
                            None
                            if p.log_append_time_ms == -1
                            else tz_aware_from_i64(i64(p.log_append_time_ms))
                        ),
                        log_start_offset=p.log_start_offset,
                        record_errors=tuple(
                            nested(m, "BatchIndexAndErrorMessage", error)
                            for error in p.record_errors
                        ),
                        error_message=p.error_message,
                        current_leader=tagged(m, "LeaderIdAndEpoch", p.current_leader),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in topics
        ),
        throttle_time=throttle(throttle_time_ms),
        node_endpoints=tuple(nested(m, "NodeEndpoint", node) for node in node_endpoints),
    )


def fetch_response(
    version: int,
    topics: Sequence[FetchTopic],
    throttle_time_ms: int,
    error_code: int,
    session_id: int,
    node_endpoints: Sequence[NodeEndpoint],
) -> Any:
    m = response_module("fetch", version)
    return build(
        m.FetchResponse,
        throttle_time=throttle(throttle_time_ms),
        error_code=ErrorCode(error_code),
        session_id=session_id,
        responses=tuple(
            build(
                m.FetchableTopicResponse,
                topic=topic.name,
                topic_id=topic_uuid(topic.topic_id),
                partitions=tuple(
                    build(
                        m.PartitionData,
                        partition_index=p.partition_index,
                        error_code=ErrorCode(p.error_code),
                        high_watermark=p.high_watermark,
                        last_stable_offset=p.last_stable_offset,
                        log_start_offset=p.log_start_offset,
                        diverging_epoch=tagged(m, "EpochEndOffset", p.diverging_epoch),
                        current_leader=tagged(m, "LeaderIdAndEpoch", p.current_leader),
                        snapshot_id=tagged(m, "SnapshotId", p.snapshot_id),
                        aborted_transactions=(
                            None
                            if p.aborted_transactions is None
                            else tuple(
                                nested(m, "AbortedTransaction", transaction)
                                for transaction in p.aborted_transactions
                            )
                        ),
                        preferred_read_replica=p.preferred_read_replica,
                        records=None if p.records is None else bytes(p.records),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in topics
        ),
        node_endpoints=tuple(nested(m, "NodeEndpoint", node) for node in node_endpoints),
    )


def metadata_response(
    version: int,
    brokers: Sequence[MetadataBroker],
    topics: Sequence[MetadataTopic],
    cluster_id: str | None,
    controller_id: int,
    throttle_time_ms: int,
    cluster_authorized_operations: int,
    error_code: int,
) -> Any:
    m = response_module("metadata", version)
    return build(
        m.MetadataResponse,
        throttle_time=throttle(throttle_time_ms),
        brokers=tuple(nested(m, "MetadataResponseBroker", broker) for broker in brokers),
        cluster_id=cluster_id,
        controller_id=controller_id,
        topics=tuple(
            build(
                m.MetadataResponseTopic,
                error_code=ErrorCode(topic.error_code),
                name=topic.name,
                topic_id=topic_uuid(topic.topic_id),
                is_internal=topic.is_internal,
                partitions=tuple(
                    build(
                        m.MetadataResponsePartition,
                        error_code=ErrorCode(p.error_code),
                        partition_index=p.partition_index,
                        leader_id=p.leader,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=tuple(p.replicas),
                        isr_nodes=tuple(p.isr),
                        offline_replicas=tuple(p.offline_replicas),
                    )
                    for p in topic.partitions
                ),
                topic_authorized_operations=topic.authorized_operations,
            )
            for topic in topics
        ),
        cluster_authorized_operations=cluster_authorized_operations,
        error_code=ErrorCode(error_code),
    )
