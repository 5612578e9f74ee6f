"""ShareFetch response (API 78, v1-v2) encoder: the records go out as the log stored them,
each piece its own buffer (never copied), as `encode_fetch_response` does for Fetch. v1 and
v2 responses have the same layout (v2 changed the request only)."""

from __future__ import annotations

from collections.abc import Sequence
from struct import Struct
from typing import NamedTuple

from dataplane.protocol.encoders import Bytes, NodeEndpoint
from dataplane.protocol.primitives import (
    EMPTY_TAGGED_FIELDS,
    compact_length,
    compact_nullable_string,
    compact_string,
    uuid,
)
from dataplane.share.partition_state import Acquired

_TOP = Struct(">ih")  # throttle_time_ms, error_code
_INT32 = Struct(">i")
_INT16 = Struct(">h")
_LEADER = Struct(">iix")  # leader_id, leader_epoch, empty tagged fields
_ACQUIRED = Struct(">qqhx")  # first_offset, last_offset, delivery_count, empty tagged fields


UNSET_LEADER = (0, 0)
"""current_leader (id, epoch) when the answer says nothing about leadership: Kafka leaves the
struct at its defaults, and fills it only after a leadership error (KIP-951)."""


class SharePartitionData(NamedTuple):
    partition_index: int
    error_code: int = 0
    error_message: str | None = None
    acknowledge_error_code: int = 0
    acknowledge_error_message: str | None = None
    leader: tuple[int, int] = UNSET_LEADER  # current_leader (id, epoch)
    records: Sequence[Bytes] | None = ()  # pieces sent back to back; None: null
    acquired: Sequence[Acquired] = ()


class ShareFetchTopic(NamedTuple):
    topic_id: bytes
    partitions: Sequence[SharePartitionData]


def encode_share_fetch_response(
    topics: Sequence[ShareFetchTopic],
    acquisition_lock_timeout_ms: int,
    node_endpoints: Sequence[NodeEndpoint] = (),
    error_code: int = 0,
    error_message: str | None = None,
    throttle_time_ms: int = 0,
) -> list[Bytes]:
    """A ShareFetchResponse body as buffers to write back to back."""
    buffers: list[Bytes] = []
    out: list[bytes] = [
        _TOP.pack(throttle_time_ms, error_code),
        compact_nullable_string(error_message),
        _INT32.pack(acquisition_lock_timeout_ms),
        compact_length(len(topics)),
    ]
    append = out.append
    for topic in topics:
        append(uuid(topic.topic_id))
        append(compact_length(len(topic.partitions)))
        for p in topic.partitions:
            append(_TOP.pack(p.partition_index, p.error_code))
            append(compact_nullable_string(p.error_message))
            append(_INT16.pack(p.acknowledge_error_code))
            append(compact_nullable_string(p.acknowledge_error_message))
            append(_LEADER.pack(*p.leader))
            if p.records is None:
                append(b"\x00")
            else:
                size = sum(len(piece) for piece in p.records)
                append(compact_length(size))
                if size:
                    buffers.append(b"".join(out))
                    out.clear()
                    buffers.extend(piece for piece in p.records if len(piece))
            append(compact_length(len(p.acquired)))
            for a in p.acquired:
                append(_ACQUIRED.pack(*a))
            append(EMPTY_TAGGED_FIELDS)
        append(EMPTY_TAGGED_FIELDS)
    append(compact_length(len(node_endpoints)))
    for node in node_endpoints:
        append(_INT32.pack(node.node_id))
        append(compact_string(node.host))
        append(_INT32.pack(node.port))
        append(compact_nullable_string(node.rack))
        append(EMPTY_TAGGED_FIELDS)
    append(EMPTY_TAGGED_FIELDS)
    buffers.append(b"".join(out))
    return buffers
