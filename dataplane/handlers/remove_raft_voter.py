"""RemoveRaftVoter (81) v0: remove a voter (id and directory id) from the meta quorum (KIP-853),
as Kafka's broker does by forwarding to its controller; here the meta service's Raft leader
does it (``meta.quorum_service.QuorumAdmin.remove``; the leader itself hands its leadership
over first). VOTER_NOT_FOUND when no voter has that id and directory id; the other errors and
the authorization (ALTER on the cluster) are AddRaftVoter's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from dataplane.handlers.add_raft_voter import check, forward
from dataplane.protocol.codec import ResponseBuilder
from dataplane.request_context import RequestContext, Response
from meta import quorum

if TYPE_CHECKING:
    from kio.schema.remove_raft_voter import v0

RemoveRaftVoterRequest: TypeAlias = "v0.RemoveRaftVoterRequest"
"""The kio classes of the versions served."""

API_KEY = 81
VERSIONS = (0, 0)


async def handle(ctx: RequestContext, req: RemoveRaftVoterRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    refused = check(ctx, req)
    if refused is None:
        directory = quorum.kafka_uuid(req.voter_directory_id)
        call = ctx.services.meta.remove_voter(req.voter_id, directory)
        refused = await forward(ctx, "RemoveRaftVoter", call)
    return b.RemoveRaftVoterResponse(
        throttle_time=0, error_code=refused[0], error_message=refused[1] or None
    )
