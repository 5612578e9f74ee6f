"""WriteTxnMarkers (27) v1-v2 on the client listener: what `kafka-transactions.sh abort` (the
Admin client's abortTransaction) sends a partition's leader to end a hanging transaction.

Rafka's own transaction coordinators send their markers over the replication gRPC
(dataplane/transaction/markers.py); this serves the same write for operators' tools, each marker
appended to the partitions this broker leads and answered once replicated, as Kafka's
KafkaApis.handleWriteTxnMarkersRequest: ALTER or CLUSTER_ACTION on the cluster, else every
partition is CLUSTER_AUTHORIZATION_FAILED; a partition this broker has no replica of is
UNKNOWN_TOPIC_OR_PARTITION, one it follows NOT_LEADER_OR_FOLLOWER; a producer epoch older than
the partition's is INVALID_PRODUCER_EPOCH, a coordinator epoch older than its last marker's
TRANSACTION_COORDINATOR_FENCED. The transaction coordinator is not told, as in Kafka.
"""

from __future__ import annotations

import logging

import anyio

from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.transaction.markers import TxnMarker, write_local_marker
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 27
VERSIONS = (1, 2)

log = logging.getLogger("rafka.transactions")


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    authorizer = ctx.services.authorizer
    allowed = authorizer.authorize(
        ctx.conn, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=False
    ) or authorizer.authorize(
        ctx.conn, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
    )
    # errors[i][(topic, partition)]: the result of marker i on that partition
    errors: list[dict[tuple[str, int], ErrorCode]] = [{} for _ in req.markers]

    async def write(i: int, topic: str, index: int, marker: TxnMarker) -> None:
        code = await write_local_marker(
            ctx.services.replicas, ctx.services.group_coordinator, topic, index, marker
        )
        errors[i][(topic, index)] = code
        log.info(
            "%s marker for producer %d (epoch %d) on %s-%d written at the request of %s (%s): %s",
            marker.kind,
            marker.producer_id,
            marker.producer_epoch,
            topic,
            index,
            ctx.conn.principal,
            ctx.conn.peer,
            code.name,
        )

    async with anyio.create_task_group() as tg:
        for i, m in enumerate(req.markers):
            marker = TxnMarker(
                m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch
            )
            for topic in m.topics:
                for index in topic.partition_indexes:
                    if allowed:
                        tg.start_soon(write, i, topic.name, index, marker)
                    else:
                        errors[i][(topic.name, index)] = ErrorCode.cluster_authorization_failed
    markers = []
    for m, results in zip(req.markers, errors, strict=True):
        by_topic: dict[str, list[object]] = {}
        for (topic, index), code in results.items():
            by_topic.setdefault(topic, []).append(
                b.WritableTxnMarkerPartitionResult(partition_index=index, error_code=code)
            )
        markers.append(
            b.WritableTxnMarkerResult(
                producer_id=m.producer_id,
                topics=tuple(
                    b.WritableTxnMarkerTopicResult(name=name, partitions=tuple(parts))
                    for name, parts in by_topic.items()
                ),
            )
        )
    return b.WriteTxnMarkersResponse(markers=tuple(markers))
