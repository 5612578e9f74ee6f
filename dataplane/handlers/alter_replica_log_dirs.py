"""AlterReplicaLogDirs (34) v0-v2: move replicas of this broker to another of its log
directories while they keep serving (dataplane/replica/log_mover.py). ALTER on the CLUSTER,
else CLUSTER_AUTHORIZATION_FAILED for every partition (Kafka's
KafkaApis.handleAlterReplicaLogDirsRequest). Per partition: NONE once the move is under way
(or the replica is already there), LOG_DIR_NOT_FOUND, KAFKA_STORAGE_ERROR (the directory or
the replica is offline), REPLICA_NOT_AVAILABLE (the replica is not here yet: it is created in
that directory when it comes).
"""

from __future__ import annotations

from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 34
VERSIONS = (0, 2)


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    allowed = ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME
    )
    moves = ctx.services.replicas.moves
    results: dict[str, dict[int, ErrorCode]] = {}
    for d in req.dirs:
        for topic in d.topics:
            out = results.setdefault(topic.name, {})
            for index in topic.partitions:
                if not allowed:
                    out[index] = ErrorCode.cluster_authorization_failed
                else:
                    out[index] = moves.request(topic.name, index, d.path)
    return b.AlterReplicaLogDirsResponse(
        throttle_time=0,
        results=tuple(
            b.AlterReplicaLogDirTopicResult(
                topic_name=name,
                partitions=tuple(
                    b.AlterReplicaLogDirPartitionResult(partition_index=i, error_code=code)
                    for i, code in sorted(parts.items())
                ),
            )
            for name, parts in results.items()
        ),
    )
