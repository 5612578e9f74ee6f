"""AlterPartitionReassignments (45) v0-v1: start or cancel (null replicas) moving partitions to
other brokers; the meta service's controller runs them (Kafka's KRaft reassignment: the new
replicas join, catch up through replication and enter the ISR before the removed ones leave).
v1's allow_replication_factor_change=false (KIP-860, `kafka-reassign-partitions.sh
--disallow-replication-factor-change`) refuses a target of another size than the partition's
replica set with INVALID_REPLICATION_FACTOR (checked by the controller, after the assignment's
own checks, as Kafka's ReplicationControlManager does); the controller's answer echoes the
flag.

As in Kafka's ControllerApis: ALTER on the cluster, else every partition and the response carry
CLUSTER_AUTHORIZATION_FAILED. Per partition: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS (a cancel of nothing). The call returns
once this broker's metadata shows the accepted changes, so a Metadata request right after sees
the new replica sets.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.client import MetaError

if TYPE_CHECKING:
    from kio.schema.alter_partition_reassignments import v0, v1

AlterPartitionReassignmentsRequest: TypeAlias = (
    "v0.AlterPartitionReassignmentsRequest | v1.AlterPartitionReassignmentsRequest"
)
"""The kio classes of the versions served."""

API_KEY = 45
VERSIONS = (0, 1)

log = logging.getLogger("rafka.reassignment")

_PROPAGATION_S = 10.0  # how long to wait for our cache to show a change the meta accepted

Change = tuple[str, int, Sequence[int] | None]  # topic, partition, target replicas (None: cancel)


async def handle(ctx: RequestContext, req: AlterPartitionReassignmentsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    allow_change = getattr(req, "allow_replication_factor_change", True)  # v1+
    changes: list[Change] = [
        (t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
        for t in req.topics
        for p in t.partitions
    ]
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        code = ErrorCode.cluster_authorization_failed
        return _response(b, changes, [(code, "")] * len(changes), code, None)
    try:
        results = await ctx.services.meta.alter_partition_reassignments(
            changes, keep_replication_factor=not allow_change
        )
    except MetaError as e:
        log.warning(
            "AlterPartitionReassignments failed: the meta service did not answer (%s); check "
            "that the meta quorum is up, then retry",
            e,
        )
        message = f"meta service unavailable: {e}"
        code = ErrorCode.request_timed_out
        return _response(b, changes, [(code, message)] * len(changes), code, message)
    accepted = [c for c, (code, _) in zip(changes, results, strict=True) if code == 0]
    for topic, index, target in accepted:
        log.info(
            "reassignment of %s-%d %s",
            topic,
            index,
            "cancelled" if target is None else f"to replicas {list(target)} started",
        )
    cache = ctx.services.cache
    await cache.wait_until(lambda: all(_shows(cache, c) for c in accepted), _PROPAGATION_S)
    return _response(b, changes, results, ErrorCode.none, None, allow_change)


def _shows(cache: MetadataCache, change: Change) -> bool:
    """Whether the cache reflects an accepted change: every target replica is a replica (while
    adding the replica set is the union of old and new), or no reassignment after a cancel."""
    topic, index, target = change
    info = cache.topics.get(topic)
    if info is None or not 0 <= index < len(info.partitions):
        return True  # deleted meanwhile: nothing to wait for
    partition = info.partitions[index]
    if target is None:
        return not partition.adding_replicas and not partition.removing_replicas
    return set(target) <= set(partition.replicas)


def _response(
    b: EntityBuilder,
    changes: list[Change],
    results: Sequence[tuple[int, str]],
    code: ErrorCode,
    message: str | None,
    allow_change: bool = True,
) -> Response:
    """Results per topic in request order (Kafka answers each topic entry as it came); the
    flag echoed only by the controller's answer (Kafka's error answers keep its default)."""
    by_topic: dict[str, list[object]] = {}
    for (topic, index, _), (error, text) in zip(changes, results, strict=True):
        by_topic.setdefault(topic, []).append(
            b.ReassignablePartitionResponse(
                partition_index=index, error_code=error, error_message=text or None
            )
        )
    return b.AlterPartitionReassignmentsResponse(
        throttle_time=0,
        error_code=code,
        error_message=message,
        allow_replication_factor_change=allow_change,
        responses=tuple(
            b.ReassignableTopicResponse(name=topic, partitions=tuple(partitions))
            for topic, partitions in by_topic.items()
        ),
    )
