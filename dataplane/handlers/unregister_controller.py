"""UnregisterController (94) v0 (KIP-1312, Kafka 4.4): remove a controller's registration, as
Kafka's broker does by forwarding to its controller; here the meta service's Raft leader
removes a meta node's (``meta.quorum_service.QuorumAdmin.unregister``), whose registrations are
its voters and the observers that report to it.

Kafka's answers: the active controller (the Raft leader) may not unregister itself
(INVALID_REQUEST), an id no registered controller has is CONTROLLER_ID_NOT_REGISTERED (136,
new in Kafka 4.4). A meta node still running registers again at once, as Kafka's controllers
do: unregistering is for one that was stopped (after RemoveRaftVoter, as Kafka's
`kafka-metadata-quorum remove-controller --unregister` does both). The Raft voters stay as
they are: DescribeQuorum lists a voter whether or not it is registered.

Authorization as Kafka's controller: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from dataplane.handlers.add_raft_voter import forward
from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 94
VERSIONS = (0, 0)


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    if ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        call = ctx.services.meta.unregister_controller(req.controller_id)
        code, message = await forward(ctx, "UnregisterController", call)
    else:
        code, message = ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    return b.UnregisterControllerResponse(throttle_time=0, error_code=code, error_message=message)
