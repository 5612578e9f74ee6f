"""ElectLeaders (43) v0-v2: preferred and unclean leader elections, decided by the meta service.

As in Kafka (ControllerApis.handleElectLeaders): ALTER on the cluster is required, else every
requested partition (and, v1+, the response) carries CLUSTER_AUTHORIZATION_FAILED; v0 has no
election type (preferred only) and no top-level error. Per partition: ELECTION_NOT_NEEDED,
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION. With
null topic_partitions every partition is tried and only those that needed an election are
reported. The call returns once this broker's metadata shows the new leaders, so a Metadata
request right after sees them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import EntityBuilder, ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.client import MetaError

if TYPE_CHECKING:
    from kio.schema.elect_leaders import v0, v1, v2

KioElectLeadersRequest: TypeAlias = (
    "v0.ElectLeadersRequest | v1.ElectLeadersRequest | v2.ElectLeadersRequest"
)
"""The kio classes of the versions served."""

API_KEY = 43
VERSIONS = (0, 2)

log = logging.getLogger("rafka.elections")

_PREFERRED, _UNCLEAN = 0, 1
_PROPAGATION_S = 10.0  # how long to wait for our cache to show the leaders the meta elected


async def handle(ctx: RequestContext, req: KioElectLeadersRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    election = getattr(req, "election_type", _PREFERRED)
    wanted = _requested(req)
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return _refused(b, wanted, ErrorCode.cluster_authorization_failed, None)
    if election not in (_PREFERRED, _UNCLEAN):
        return _refused(b, wanted, ErrorCode.invalid_request, f"Unknown election type {election}")
    cache = ctx.services.cache
    epochs_before = _leader_epochs(ctx)
    try:
        results = await ctx.services.meta.elect_leaders(election, wanted)
    except MetaError as e:
        log.warning(
            "ElectLeaders failed: the meta service did not answer (%s); check that the meta "
            "quorum is up, then retry",
            e,
        )
        return _refused(b, wanted, ErrorCode.request_timed_out, f"meta service unavailable: {e}")
    elected = {
        (r.topic, p.partition_id)
        for r in results
        for p in r.partition_results
        if p.error_code == ErrorCode.none
    }
    if elected:
        await cache.wait_until(
            lambda: all(
                _leader_epoch(ctx, topic, index) > epochs_before.get((topic, index), -1)
                for topic, index in elected
            ),
            _PROPAGATION_S,
        )
    return b.ElectLeadersResponse(
        throttle_time=0,
        error_code=ErrorCode.none,
        replica_election_results=tuple(
            b.ReplicaElectionResult(
                topic=r.topic,
                partition_result=tuple(
                    b.PartitionResult(
                        partition_id=p.partition_id,
                        error_code=p.error_code,
                        error_message=p.error_message or None,
                    )
                    for p in r.partition_results
                ),
            )
            for r in results
        ),
    )


def _requested(req: KioElectLeadersRequest) -> dict[str, list[int]] | None:
    """The partitions asked for, per topic in request order (None: every partition)."""
    if req.topic_partitions is None:
        return None
    wanted: dict[str, list[int]] = {}
    for t in req.topic_partitions:
        partitions = wanted.setdefault(t.topic, [])
        partitions.extend(p for p in t.partitions if p not in partitions)
    return wanted


def _refused(
    b: EntityBuilder, wanted: dict[str, list[int]] | None, code: ErrorCode, message: str | None
) -> Response:
    """Kafka's ElectLeadersRequest.getErrorResponse: the error on every requested partition."""
    return b.ElectLeadersResponse(
        throttle_time=0,
        error_code=code,
        replica_election_results=tuple(
            b.ReplicaElectionResult(
                topic=topic,
                partition_result=tuple(
                    b.PartitionResult(partition_id=i, error_code=code, error_message=message)
                    for i in partitions
                ),
            )
            for topic, partitions in (wanted or {}).items()
        ),
    )


def _leader_epochs(ctx: RequestContext) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.index): p.leader_epoch
        for t in ctx.services.cache.topics.values()
        for p in t.partitions
    }


def _leader_epoch(ctx: RequestContext, topic: str, index: int) -> int:
    info = ctx.services.cache.topics.get(topic)
    if info is None or not 0 <= index < len(info.partitions):
        return 1 << 31  # gone meanwhile: nothing to wait for
    return info.partitions[index].leader_epoch
