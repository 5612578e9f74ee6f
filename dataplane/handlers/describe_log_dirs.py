"""DescribeLogDirs (35) v0-v5: this broker's log directories (log.dirs) and the replicas in
each, with their size and offset lag, including the copies AlterReplicaLogDirs is making
(is_future_key), (v4) the volume's total and usable bytes and (v5) whether the directory is
cordoned: never here (Kafka 4.4's cordoned.log.dirs, KIP-1066, which keeps new replicas off a
directory, is not implemented; Kafka's default cordons none). A failed directory answers
KAFKA_STORAGE_ERROR. DESCRIBE on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED and no
directory (Kafka's KafkaApis.handleDescribeLogDirsRequest and ReplicaManager.describeLogDirs).

Offset lag, as Kafka computes it: for a current log, max(high watermark - log end, 0); for a
future log, the current log's end minus the copy's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kio.static.protocol import Payload

from dataplane.handlers.context import Request
from dataplane.log.log_dirs import LogDir
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from dataplane.replica.manager import ReplicaManager

API_KEY = 35
VERSIONS = (0, 5)

# (partition index, size, offset lag, is future) of one topic's replicas in one directory
Entry = tuple[int, int, int, bool]


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return b.DescribeLogDirsResponse(
            throttle_time=0, error_code=ErrorCode.cluster_authorization_failed, results=()
        )
    wanted = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    replicas = ctx.services.replicas
    results = [_describe(b, d, _entries(replicas, d, wanted)) for d in replicas.log_dirs.dirs]
    return b.DescribeLogDirsResponse(
        throttle_time=0, error_code=ErrorCode.none, results=tuple(results)
    )


def _entries(
    replicas: ReplicaManager, d: LogDir, wanted: set[tuple[str, int]] | None
) -> dict[str, list[Entry]]:
    """The replicas (current and future logs) in ``d``, by topic."""
    found: dict[str, list[Entry]] = {}
    for (topic, index), partition in replicas.partitions.items():
        if wanted is not None and (topic, index) not in wanted:
            continue
        plog = partition.log
        if plog.directory.parent == d.path:
            lag = max(partition.high_watermark - plog.log_end_offset, 0)
            found.setdefault(topic, []).append((index, plog.size, lag, False))
        move = replicas.moves.moves.get((topic, index))
        if move is not None and move.dest is d:
            found.setdefault(topic, []).append((index, move.size, move.offset_lag(), True))
    return found


def _describe(b: EntityBuilder, d: LogDir, entries: dict[str, list[Entry]]) -> Payload:
    if not d.online:
        return b.DescribeLogDirsResult(
            error_code=ErrorCode.kafka_storage_error, log_dir=str(d.path), topics=()
        )
    total, usable = d.usage()
    return b.DescribeLogDirsResult(
        error_code=ErrorCode.none,
        log_dir=str(d.path),
        topics=tuple(_topic(b, name, parts) for name, parts in sorted(entries.items())),
        total_bytes=total,
        usable_bytes=usable,
        is_cordoned=False,
    )


def _topic(b: EntityBuilder, name: str, parts: Iterable[Entry]) -> Payload:
    return b.DescribeLogDirsTopic(
        name=name,
        partitions=tuple(
            b.DescribeLogDirsPartition(
                partition_index=index, partition_size=size, offset_lag=lag, is_future_key=future
            )
            for index, size, lag, future in sorted(parts)
        ),
    )
