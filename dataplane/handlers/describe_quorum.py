"""DescribeQuorum (55) v0-v2: the meta quorum (KIP-595, KIP-836, KIP-853), as Kafka's broker
answers it by forwarding to its controller. Here the broker asks the meta service's Raft
leader (``MetaClient.describe_quorum``).

The metadata log is Kafka's ``__cluster_metadata`` partition 0: any other partition, or more
than one, is answered UNKNOWN_TOPIC_OR_PARTITION per partition (Kafka's RaftUtil). Offsets are
the meta service's Raft log indexes (high watermark: its commit index; leader epoch: its Raft
term). Voters and observers are meta nodes: brokers do not replicate the Raft log here (they
watch the meta service), so they are not observers. v2's nodes list each voter's endpoints
(``RAFT`` and ``META``, meta.quorum).

Authorization as Kafka's controller: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
at the top level.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from kio.static.protocol import Payload

from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta import quorum
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.client import MetaError
from proto import meta_pb2

log = logging.getLogger("rafka.meta_quorum")

if TYPE_CHECKING:
    from kio.schema.describe_quorum import v0, v1, v2

KioDescribeQuorumRequest: TypeAlias = (
    "v0.DescribeQuorumRequest | v1.DescribeQuorumRequest | v2.DescribeQuorumRequest"
)
"""The kio classes of the versions served."""

API_KEY = 55
VERSIONS = (0, 2)

METADATA_TOPIC = "__cluster_metadata"


async def handle(ctx: RequestContext, req: KioDescribeQuorumRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return _top_level_error(
            b, ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
        )
    topics = req.topics
    if not (
        len(topics) == 1
        and topics[0].topic_name == METADATA_TOPIC
        and len(topics[0].partitions) == 1
        and topics[0].partitions[0].partition_index == 0
    ):
        return _partition_errors(b, req)
    try:
        answer = await ctx.services.meta.describe_quorum()
    except MetaError as e:
        log.warning(
            "DescribeQuorum failed: the meta service did not answer (%s); check that a majority "
            "of meta nodes is up, then retry",
            e,
        )
        return _top_level_error(b, ErrorCode.request_timed_out, "The request timed out.")
    partition = b.PartitionData(
        partition_index=0,
        error_code=ErrorCode.none,
        error_message="",
        leader_id=answer.leader_id,
        leader_epoch=answer.leader_epoch,
        high_watermark=answer.high_watermark,
        current_voters=tuple(_replica(b, r) for r in answer.voters),
        observers=tuple(_replica(b, r) for r in answer.observers),
    )
    return b.DescribeQuorumResponse(
        error_code=ErrorCode.none,
        error_message="",
        topics=(b.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),),
        nodes=tuple(
            b.Node(node_id=voter.node_id, listeners=_listeners(b, voter)) for voter in answer.voters
        ),
    )


def _replica(b: EntityBuilder, replica: meta_pb2.QuorumReplica) -> Payload:
    return b.ReplicaState(
        replica_id=replica.node_id,
        replica_directory_id=quorum.parse_kafka_uuid(replica.directory_id),
        log_end_offset=replica.log_end_offset,
        last_fetch_timestamp=replica.last_fetch_timestamp,
        last_caught_up_timestamp=replica.last_caught_up_timestamp,
    )


def _listeners(b: EntityBuilder, voter: meta_pb2.QuorumReplica) -> tuple[Payload, ...]:
    endpoints = (
        (quorum.RAFT_LISTENER, voter.raft_address),
        (quorum.META_LISTENER, voter.grpc_address),
    )
    listeners = []
    for name, address in endpoints:
        host, _, port = address.rpartition(":")
        if host and port.isdigit():
            listeners.append(b.Listener(name=name, host=host, port=int(port)))
    return tuple(listeners)


def _top_level_error(b: EntityBuilder, code: ErrorCode, message: str) -> Response:
    return b.DescribeQuorumResponse(error_code=code, error_message=message, topics=(), nodes=())


def _partition_errors(b: EntityBuilder, req: KioDescribeQuorumRequest) -> Response:
    """Kafka's DescribeQuorumRequest.getPartitionLevelErrorResponse."""
    return b.DescribeQuorumResponse(
        error_code=ErrorCode.none,
        error_message="",
        topics=tuple(
            b.TopicData(
                topic_name=t.topic_name,
                partitions=tuple(
                    b.PartitionData(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.unknown_topic_or_partition,
                        error_message="This server does not host this topic-partition.",
                        leader_id=0,
                        leader_epoch=0,
                        high_watermark=0,
                        current_voters=(),
                        observers=(),
                    )
                    for p in t.partitions
                ),
            )
            for t in req.topics
        ),
        nodes=(),
    )
