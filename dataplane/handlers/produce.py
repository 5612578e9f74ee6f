"""Produce (0): validate and append each partition's batch on its leader.

The hot path: no record is decoded. The batch header and CRC are checked, offsets and the
leader epoch are written into the header, and the bytes are appended as received. acks=-1
returns an awaitable that completes when the high watermark passes the batch (the server keeps
reading this connection's next requests meanwhile). WRITE on each topic is authorized once
per request (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.encoders import ProducePartition, ProduceTopic, encode_produce_response
from dataplane.protocol.errors import ConnectionClosed, ErrorCode, KafkaError
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from dataplane.replica.partition import Partition

API_KEY = 0
VERSIONS = (3, 11)


def _error(index: int, code: int, message: str | None = None) -> ProducePartition:
    return ProducePartition(index, code, -1, -1, -1, error_message=message)


async def handle(ctx: RequestContext, req: Request) -> Response:
    replicas = ctx.services.replicas
    now_ms = time.time_ns() // 1_000_000
    acks = req.acks
    if acks not in (-1, 0, 1):
        return _all_failed(ctx, req, ErrorCode.invalid_required_acks)
    if req.transactional_id is not None:
        return _all_failed(ctx, req, ErrorCode.transactional_id_authorization_failed)
    results: list[tuple[str, list[ProducePartition]]] = []
    # (partition, HW to reach, leader epoch of the append, result list, slot in it)
    waits: list[tuple[Partition, int, int, list[ProducePartition], int]] = []
    denied = ctx.services.authorizer.denied(
        ctx.conn, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in req.topic_data)
    )
    failed = False
    for topic in req.topic_data:
        out: list[ProducePartition] = []
        if topic.name in denied:
            failed = True
            code = ErrorCode.topic_authorization_failed
            results.append((topic.name, [_error(p.index, code) for p in topic.partition_data]))
            continue
        for data in topic.partition_data:
            try:
                partition = replicas.leader_partition(topic.name, data.index)
                if acks == -1 and (code := partition.replication_error()) != ErrorCode.none:
                    raise KafkaError(code)
                res = partition.append(data.records or b"", now_ms)
            except KafkaError as e:  # includes the log's validation errors
                failed = True
                out.append(_error(data.index, e.code, e.message))
                continue
            if acks == -1:
                waits.append(
                    (partition, res.last_offset + 1, partition.leader_epoch, out, len(out))
                )
            out.append(
                ProducePartition(
                    data.index,
                    ErrorCode.none,
                    res.base_offset,
                    res.log_append_time,
                    partition.log.log_start_offset,
                )
            )
        results.append((topic.name, out))
    if acks == 0:
        if failed:  # Kafka closes the connection so the client refreshes its metadata
            raise ConnectionClosed(
                "acks=0 produce failed; closing so the client refreshes metadata"
            )
        return None
    version = ctx.header.api_version
    if not waits:
        return _encode(version, results)
    return _await_replication(version, results, waits, req.timeout.total_seconds())


async def _await_replication(version: int, results: list, waits: list, timeout: float) -> bytes:
    """acks=all: complete once each partition's high watermark covers its batch."""
    deadline = anyio.current_time() + timeout
    for partition, offset, epoch, out, slot in waits:
        remaining = max(0.0, deadline - anyio.current_time())
        code = await partition.wait_for_replication(offset, epoch, remaining)
        if code != ErrorCode.none:
            out[slot] = _error(partition.index, code)
    return _encode(version, results)


def _encode(version: int, results: list[tuple[str, list[ProducePartition]]]) -> bytes:
    return encode_produce_response(version, [ProduceTopic(name, parts) for name, parts in results])


def _all_failed(ctx: RequestContext, req: Any, code: ErrorCode) -> bytes:
    results = [(t.name, [_error(p.index, code) for p in t.partition_data]) for t in req.topic_data]
    return _encode(ctx.header.api_version, results)
