"""Dedicated encoders for the three hottest response bodies: Produce, Fetch and Metadata.

kio's generic writer walks dataclass fields and writes each value into a BytesIO: fine for
rare APIs, too slow for the responses every client asks for all the time, and it copies
each fetched record batch several times. These encoders take plain NamedTuples, pack each
run of fixed-width fields with one precompiled Struct, and join the pieces once. Fetch
returns a list of buffers so that record bytes are never copied.

Only the response *body* is encoded; the server prepends the frame length and the response
header. The output is byte-for-byte what kio's ``entity_writer`` produces for every version
supported here (tests/unit/protocol), and kio is generated from Kafka's JSON message schemas
(clients/src/main/resources/common/message/*Response.json).

Conventions shared by all three APIs:

* error codes are ints (kio's ``ErrorCode`` is an IntEnum, so its members do too);
* topic ids are 16-byte ``bytes`` (all zero = no id), not ``uuid.UUID``;
* a field that does not exist in the requested version is silently left out, as Kafka does;
* a tagged field is sent only when it is not None and differs from its schema default
  (Kafka and kio both skip default-valued tagged fields: a reader cannot tell them apart).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from struct import Struct
from typing import NamedTuple

from dataplane.protocol.primitives import (
    AUTHORIZED_OPERATIONS_OMITTED,
    BOOLEAN,
    COMPACT,
    EMPTY_TAGGED_FIELDS,
    INT16,
    INT32,
    LEGACY,
    Wire,
    tagged_fields,
    uuid,
)

Bytes = bytes | bytearray | memoryview
"""Record data: any buffer of single bytes (a memoryview must have format "B")."""

NO_TOPIC_ID = bytes(16)


# --- Shared nested structs ------------------------------------------------------------------


class LeaderIdAndEpoch(NamedTuple):
    """Leader hint sent with NOT_LEADER_OR_FOLLOWER and similar errors (KIP-951)."""

    leader_id: int
    leader_epoch: int


class NodeEndpoint(NamedTuple):
    """A broker address: a Metadata broker, or a KIP-951 leader endpoint in Produce/Fetch."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


MetadataBroker = NodeEndpoint
"""Metadata brokers carry exactly the fields of a node endpoint."""

# Nested flexible structs end with their own tagged-field section; the trailing "x" pad
# byte of these Structs is that section's zero count.
_LEADER_ID_AND_EPOCH = Struct(">iix")
_NO_LEADER = LeaderIdAndEpoch(-1, -1)


def _leader_tag(leader: LeaderIdAndEpoch | None) -> bytes | None:
    """Payload of a current-leader tagged field, or None when it must be left out."""
    if leader is None or leader == _NO_LEADER:
        return None
    return _LEADER_ID_AND_EPOCH.pack(*leader)


def _append_nodes(out: list[bytes], wire: Wire, nodes: Sequence[NodeEndpoint], rack: bool) -> None:
    out.append(wire.array_length(len(nodes)))
    for node in nodes:
        out += (INT32.pack(node.node_id), wire.string(node.host), INT32.pack(node.port))
        if rack:
            out.append(wire.nullable_string(node.rack))
        if wire.flexible:
            out.append(EMPTY_TAGGED_FIELDS)


def _node_endpoints_tags(nodes: Sequence[NodeEndpoint]) -> bytes:
    """Top-level tagged-field section of Produce v10+ and Fetch v16+: node_endpoints is tag 0."""
    if not nodes:
        return EMPTY_TAGGED_FIELDS
    payload: list[bytes] = []
    _append_nodes(payload, COMPACT, nodes, rack=True)
    return tagged_fields([(0, b"".join(payload))])


def _topic_name(wire: Wire, name: str | None, *, nullable: bool) -> bytes:
    """A topic name; None only where the version makes the field nullable (then sent as null)."""
    if nullable:
        return wire.nullable_string(name)
    if name is None:
        raise ValueError("this response version needs a topic name")
    return wire.string(name)


def _check_version(api: str, version: int, lowest: int, highest: int) -> None:
    if not lowest <= version <= highest:
        raise ValueError(f"{api} response v{version} is not supported (v{lowest}-v{highest})")


# --- Produce (API key 0) --------------------------------------------------------------------
# v2+ log_append_time_ms; v5+ log_start_offset; v8+ record_errors, error_message;
# v9+ flexible; v10+ tagged current_leader (partition) and node_endpoints (top level);
# v11 and v12 change only what the client may expect (KIP-890 errors, transaction version 2);
# v13+ topic_id replaces the topic name (KIP-516).

PRODUCE_VERSIONS = range(3, 14)


class BatchIndexAndErrorMessage(NamedTuple):
    """Which record of the batch made the broker reject it (KIP-467)."""

    batch_index: int
    batch_index_error_message: str | None = None


class ProducePartition(NamedTuple):
    partition_index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    """-1 unless the topic uses LogAppendTime."""
    log_start_offset: int
    record_errors: Sequence[BatchIndexAndErrorMessage] = ()
    error_message: str | None = None
    current_leader: LeaderIdAndEpoch | None = None


class ProduceTopic(NamedTuple):
    name: str
    """Sent up to v12; unused from v13."""
    partitions: Sequence[ProducePartition]
    topic_id: bytes = NO_TOPIC_ID
    """Sent from v13."""


_PRODUCE_PARTITION_V3 = Struct(">ihqq")
_PRODUCE_PARTITION_V5 = Struct(">ihqqq")


def encode_produce_response(
    version: int,
    topics: Sequence[ProduceTopic],
    throttle_time_ms: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> bytes:
    """Encode a ProduceResponse body (v3-v13)."""
    _check_version("Produce", version, PRODUCE_VERSIONS.start, PRODUCE_VERSIONS.stop - 1)
    wire = COMPACT if version >= 9 else LEGACY
    flexible = wire.flexible
    with_log_start = version >= 5
    with_record_errors = version >= 8
    with_leader = version >= 10
    by_topic_id = version >= 13
    head = _PRODUCE_PARTITION_V5 if with_log_start else _PRODUCE_PARTITION_V3

    out = [wire.array_length(len(topics))]
    append = out.append
    for topic in topics:
        append(uuid(topic.topic_id) if by_topic_id else wire.string(topic.name))
        append(wire.array_length(len(topic.partitions)))
        for p in topic.partitions:
            if with_log_start:
                append(
                    head.pack(
                        p.partition_index,
                        p.error_code,
                        p.base_offset,
                        p.log_append_time_ms,
                        p.log_start_offset,
                    )
                )
            else:
                append(
                    head.pack(p.partition_index, p.error_code, p.base_offset, p.log_append_time_ms)
                )
            if with_record_errors:
                append(wire.array_length(len(p.record_errors)))
                for error in p.record_errors:
                    append(INT32.pack(error.batch_index))
                    append(wire.nullable_string(error.batch_index_error_message))
                    if flexible:
                        append(EMPTY_TAGGED_FIELDS)
                append(wire.nullable_string(p.error_message))
            if flexible:
                leader = _leader_tag(p.current_leader) if with_leader else None
                append(EMPTY_TAGGED_FIELDS if leader is None else tagged_fields([(0, leader)]))
        if flexible:
            append(EMPTY_TAGGED_FIELDS)
    append(INT32.pack(throttle_time_ms))
    if flexible:
        append(_node_endpoints_tags(node_endpoints) if with_leader else EMPTY_TAGGED_FIELDS)
    return b"".join(out)


def produce_throttle_position(version: int, body: bytes) -> int:
    """Where `encode_produce_response` wrote throttle_time_ms in ``body``, a ProduceResponse it
    encoded without node endpoints: the last int32, before the flexible versions' empty tagged
    fields (a request_percentage throttle is known only once the body is encoded)."""
    return len(body) - INT32.size - (1 if version >= 9 else 0)


# --- Fetch (API key 1) ----------------------------------------------------------------------
# v4+ last_stable_offset, aborted_transactions; v5+ log_start_offset; v7+ error_code,
# session_id; v11+ preferred_read_replica; v12+ flexible, tagged diverging_epoch (0),
# current_leader (1), snapshot_id (2); v13+ topic_id replaces the topic name;
# v16+ tagged node_endpoints (top level); v17 and v18 change only the request (a follower's
# directory id, KIP-853, and its high watermark, KIP-1166).

FETCH_VERSIONS = range(4, 19)


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int


class EpochEndOffset(NamedTuple):
    """Where the follower's log diverges from the leader's (KIP-320)."""

    epoch: int
    end_offset: int


class SnapshotId(NamedTuple):
    """The snapshot to fetch when the offset is below the log start (KRaft, KIP-630)."""

    end_offset: int
    epoch: int


class FetchPartition(NamedTuple):
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: Sequence[AbortedTransaction] | None
    """None (null) tells the client there is no transaction data to filter against."""
    preferred_read_replica: int
    """-1 unless the client should fetch from a follower (KIP-392)."""
    records: Bytes | None
    diverging_epoch: EpochEndOffset | None = None
    current_leader: LeaderIdAndEpoch | None = None
    snapshot_id: SnapshotId | None = None


class FetchTopic(NamedTuple):
    name: str | None
    """Sent up to v12; unused (may be None) from v13."""
    topic_id: bytes
    """Sent from v13."""
    partitions: Sequence[FetchPartition]


_FETCH_TOP_V7 = Struct(">ihi")  # throttle_time_ms, error_code, session_id
_FETCH_PARTITION_V4 = Struct(">ihqq")
_FETCH_PARTITION_V5 = Struct(">ihqqq")
_ABORTED_TRANSACTION = Struct(">qq")
_ABORTED_TRANSACTION_FLEXIBLE = Struct(">qqx")
_EPOCH_END_OFFSET = Struct(">iqx")
_SNAPSHOT_ID = Struct(">qix")
_NO_EPOCH_END_OFFSET = EpochEndOffset(-1, -1)
_NO_SNAPSHOT_ID = SnapshotId(-1, -1)


def _fetch_partition_tags(p: FetchPartition) -> bytes:
    fields: list[tuple[int, bytes]] = []
    if p.diverging_epoch is not None and p.diverging_epoch != _NO_EPOCH_END_OFFSET:
        fields.append((0, _EPOCH_END_OFFSET.pack(*p.diverging_epoch)))
    leader = _leader_tag(p.current_leader)
    if leader is not None:
        fields.append((1, leader))
    if p.snapshot_id is not None and p.snapshot_id != _NO_SNAPSHOT_ID:
        fields.append((2, _SNAPSHOT_ID.pack(*p.snapshot_id)))
    return tagged_fields(fields) if fields else EMPTY_TAGGED_FIELDS


def encode_fetch_response(
    version: int,
    topics: Sequence[FetchTopic],
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> list[Bytes]:
    """Encode a FetchResponse body (v4-v18) as buffers to send back to back.

    Each non-empty ``records`` is passed through as its own buffer, never copied; the small
    fields between two of them are joined into one ``bytes``. Write the list with a single
    ``socket.sendmsg``/``writelines`` (or ``b"".join`` it when a copy does not matter).
    """
    _check_version("Fetch", version, FETCH_VERSIONS.start, FETCH_VERSIONS.stop - 1)
    wire = COMPACT if version >= 12 else LEGACY
    flexible = wire.flexible
    by_topic_id = version >= 13
    with_log_start = version >= 5
    with_read_replica = version >= 11
    head = _FETCH_PARTITION_V5 if with_log_start else _FETCH_PARTITION_V4
    aborted_struct = _ABORTED_TRANSACTION_FLEXIBLE if flexible else _ABORTED_TRANSACTION

    buffers: list[Bytes] = []
    out: list[bytes] = []  # small pieces since the last records buffer
    append = out.append
    if version >= 7:
        append(_FETCH_TOP_V7.pack(throttle_time_ms, error_code, session_id))
    else:
        append(INT32.pack(throttle_time_ms))
    append(wire.array_length(len(topics)))
    for topic in topics:
        append(
            uuid(topic.topic_id) if by_topic_id else _topic_name(wire, topic.name, nullable=False)
        )
        append(wire.array_length(len(topic.partitions)))
        for p in topic.partitions:
            if with_log_start:
                append(
                    head.pack(
                        p.partition_index,
                        p.error_code,
                        p.high_watermark,
                        p.last_stable_offset,
                        p.log_start_offset,
                    )
                )
            else:
                append(
                    head.pack(
                        p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset
                    )
                )
            aborted = p.aborted_transactions
            if aborted is None:
                append(wire.null_array)
            else:
                append(wire.array_length(len(aborted)))
                for transaction in aborted:
                    append(aborted_struct.pack(*transaction))
            if with_read_replica:
                append(INT32.pack(p.preferred_read_replica))
            records = p.records
            if records is None:
                append(wire.null_bytes)
            else:
                append(wire.bytes_length(len(records)))
                if records:
                    buffers.append(b"".join(out))
                    buffers.append(records)
                    out.clear()
            if flexible:
                append(_fetch_partition_tags(p))
        if flexible:
            append(EMPTY_TAGGED_FIELDS)
    if flexible:
        append(_node_endpoints_tags(node_endpoints) if version >= 16 else EMPTY_TAGGED_FIELDS)
    buffers.append(b"".join(out))
    return buffers


# --- Metadata (API key 3) -------------------------------------------------------------------
# v1+ broker rack, controller_id, is_internal; v2+ cluster_id; v3+ throttle_time_ms;
# v5+ offline_replicas; v7+ leader_epoch; v8+ topic_authorized_operations;
# v8-v10 cluster_authorized_operations; v9+ flexible; v10+ topic_id;
# v12+ nullable topic name; v13+ top-level error_code.

METADATA_VERSIONS = range(0, 14)


class MetadataPartition(NamedTuple):
    error_code: int
    partition_index: int
    leader: int
    leader_epoch: int
    replicas: Sequence[int]
    isr: Sequence[int]
    offline_replicas: Sequence[int] = ()


class MetadataTopic(NamedTuple):
    error_code: int
    name: str | None
    """None only in v12+, for a topic asked for by id that the broker does not know."""
    topic_id: bytes
    is_internal: bool
    partitions: Sequence[MetadataPartition]
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


_METADATA_PARTITION_V0 = Struct(">hii")  # error_code, index, leader
_METADATA_PARTITION_V7 = Struct(">hiii")  # ..., leader_epoch


@lru_cache(maxsize=1024)
def _whole_partition_v7(flexible: bool, replicas: int, isr: int, offline: int) -> Struct | None:
    """One Struct for a whole v7+ partition whose replica lists have these lengths.

    A cluster has few such shapes (replication factor, ISR size), and packing a partition
    in one call is twice as fast as a call per field. None when a compact array length
    would not fit in one byte; the caller then writes field by field.
    """
    if flexible and max(replicas, isr, offline) >= 127:
        return None
    length = "B" if flexible else "i"
    arrays = f"{length}{replicas}i{length}{isr}i{length}{offline}i"
    return Struct(f">hiii{arrays}{'x' if flexible else ''}")


def encode_metadata_response(
    version: int,
    brokers: Sequence[MetadataBroker],
    topics: Sequence[MetadataTopic | bytes],
    cluster_id: str | None,
    controller_id: int,
    throttle_time_ms: int = 0,
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED,
    error_code: int = 0,
) -> bytes:
    """Encode a MetadataResponse body (v0-v13). A topic given as bytes is already encoded
    (`encode_metadata_topic` of the same version): a broker caches its topics' encodings
    between metadata changes, since thousands of partitions take long to encode."""
    _check_version("Metadata", version, METADATA_VERSIONS.start, METADATA_VERSIONS.stop - 1)
    wire = COMPACT if version >= 9 else LEGACY
    out: list[bytes] = []
    append = out.append
    if version >= 3:
        append(INT32.pack(throttle_time_ms))
    _append_nodes(out, wire, brokers, rack=version >= 1)
    if version >= 2:
        append(wire.nullable_string(cluster_id))
    if version >= 1:
        append(INT32.pack(controller_id))
    append(wire.array_length(len(topics)))
    for topic in topics:
        append(topic if isinstance(topic, bytes) else encode_metadata_topic(version, topic))
    if 8 <= version <= 10:
        append(INT32.pack(cluster_authorized_operations))
    if version >= 13:
        append(INT16.pack(error_code))
    if wire.flexible:
        append(EMPTY_TAGGED_FIELDS)
    return b"".join(out)


def encode_metadata_topic(version: int, topic: MetadataTopic) -> bytes:
    """One topic of a MetadataResponse body (v0-v13), its partitions included."""
    wire = COMPACT if version >= 9 else LEGACY
    flexible = wire.flexible
    with_offline = version >= 5
    with_epoch = version >= 7
    head = _METADATA_PARTITION_V7 if with_epoch else _METADATA_PARTITION_V0
    int32_array = wire.int32_array
    length_bias = 1 if flexible else 0  # compact lengths are count + 1

    out: list[bytes] = []
    append = out.append
    append(INT16.pack(topic.error_code))
    append(_topic_name(wire, topic.name, nullable=version >= 12))
    if version >= 10:
        append(uuid(topic.topic_id))
    if version >= 1:
        append(BOOLEAN[topic.is_internal])
    append(wire.array_length(len(topic.partitions)))
    for p in topic.partitions:
        replicas, isr, offline = p.replicas, p.isr, p.offline_replicas
        if with_epoch:
            whole = _whole_partition_v7(flexible, len(replicas), len(isr), len(offline))
            if whole is not None:
                append(
                    whole.pack(
                        p.error_code,
                        p.partition_index,
                        p.leader,
                        p.leader_epoch,
                        len(replicas) + length_bias,
                        *replicas,
                        len(isr) + length_bias,
                        *isr,
                        len(offline) + length_bias,
                        *offline,
                    )
                )
                continue
            append(head.pack(p.error_code, p.partition_index, p.leader, p.leader_epoch))
        else:
            append(head.pack(p.error_code, p.partition_index, p.leader))
        append(int32_array(replicas))
        append(int32_array(isr))
        if with_offline:
            append(int32_array(offline))
        if flexible:
            append(EMPTY_TAGGED_FIELDS)
    if version >= 8:
        append(INT32.pack(topic.authorized_operations))
    if flexible:
        append(EMPTY_TAGGED_FIELDS)
    return b"".join(out)
