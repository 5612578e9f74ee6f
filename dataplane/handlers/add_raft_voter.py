"""AddRaftVoter (80) v0-v1: add a meta node to the meta quorum's voters (KIP-853), as Kafka's
broker does by forwarding to its controller; here the meta service's Raft leader does it
(``meta.quorum_service.QuorumAdmin.add``).

The node must already run as an observer (started with an empty meta.data.dir, not among the
voters) with the directory id the request names; its listeners are ``RAFT`` (its Raft endpoint,
required as Kafka requires the controller listener) and ``META`` (its gRPC endpoint). The
answer comes once the new voter set is committed (as v1's AckWhenCommitted=true; false is
answered the same way, later). Errors are Kafka's: INCONSISTENT_CLUSTER_ID, INVALID_REQUEST,
DUPLICATE_VOTER, REQUEST_TIMED_OUT (a change in progress, or the node not caught up in time),
UNSUPPORTED_VERSION (a quorum without internal.secret cannot change).

Authorization as Kafka's controller: ALTER on the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta import quorum
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType
from meta.client import MetaError
from proto import meta_pb2

log = logging.getLogger("rafka.meta_quorum")

if TYPE_CHECKING:
    from kio.schema.add_raft_voter import v0, v1

AddRaftVoterRequest: TypeAlias = "v0.AddRaftVoterRequest | v1.AddRaftVoterRequest"
"""The kio classes of the versions served."""

API_KEY = 80
VERSIONS = (0, 1)


async def handle(ctx: RequestContext, req: AddRaftVoterRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    refused = check(ctx, req)
    if refused is not None:
        return b.AddRaftVoterResponse(
            throttle_time=0, error_code=refused[0], error_message=refused[1]
        )
    endpoints = {listener.name: f"{listener.host}:{listener.port}" for listener in req.listeners}
    if quorum.META_LISTENER not in endpoints and quorum.RAFT_LISTENER in endpoints:
        code, message = (
            ErrorCode.invalid_request,
            f"Add voter request didn't include the endpoint for the listener "
            f"{quorum.META_LISTENER} (the meta node's gRPC endpoint)",
        )
    else:
        request = meta_pb2.AddVoterRequest(
            voter_id=req.voter_id,
            directory_id=quorum.kafka_uuid(req.voter_directory_id),
            raft_address=endpoints.get(quorum.RAFT_LISTENER, ""),
            grpc_address=endpoints.get(quorum.META_LISTENER, ""),
            timeout_ms=int(req.timeout.total_seconds() * 1000),
        )
        code, message = await forward(ctx, "AddRaftVoter", ctx.services.meta.add_voter(request))
    return b.AddRaftVoterResponse(
        throttle_time=0,
        error_code=code,
        error_message=message or None,
    )


class VoterChange(Protocol):
    """What `check` reads of an AddRaftVoter or RemoveRaftVoter request."""

    @property
    def cluster_id(self) -> str | None: ...


def check(ctx: RequestContext, req: VoterChange) -> tuple[ErrorCode, str] | None:
    """Kafka's checks before a voter change: ALTER on the cluster, then the cluster id."""
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    cluster_id = ctx.services.cache.cluster_id
    if req.cluster_id is not None and req.cluster_id != cluster_id:
        return (
            ErrorCode.inconsistent_cluster_id,
            f'The given id "{req.cluster_id}" doesn\'t match the cluster id "{cluster_id}"',
        )
    return None


async def forward(
    ctx: RequestContext, api: str, call: Awaitable[tuple[int, str]]
) -> tuple[ErrorCode, str]:
    """The meta service's answer to a voter change: (Kafka error, message)."""
    try:
        code, message = await call
    except MetaError as e:
        log.warning(
            "%s failed: the meta service did not answer (%s); check with DescribeQuorum "
            "(`rafka meta-quorum describe`) whether the change took effect",
            api,
            e,
        )
        return ErrorCode.request_timed_out, f"The meta service did not answer: {e}"
    if code:
        log.info("%s from %s refused: %s", api, ctx.conn.peer, message)
    return ErrorCode(code), message
