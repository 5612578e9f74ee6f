"""FindCoordinator (10): which broker coordinates a group (or a transactional id).

Any broker answers: the key hashes to a partition of the internal topic (`__consumer_offsets`
for groups, `__transaction_state` for transactional ids), created on first use, and that
partition's leader is the coordinator. v4+ batches several keys in one request. DESCRIBE on the
group (GROUP_AUTHORIZATION_FAILED) or transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
is needed, as in Kafka.
"""

from __future__ import annotations

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.acl import AclOperation, ResourceType

API_KEY = 10
VERSIONS = (0, 6)

GROUP, TRANSACTION = 0, 1
# key type -> (the resource it names, the error when DESCRIBE on it is denied)
_RESOURCES = {
    GROUP: (ResourceType.GROUP, ErrorCode.group_authorization_failed),
    TRANSACTION: (ResourceType.TRANSACTIONAL_ID, ErrorCode.transactional_id_authorization_failed),
}


async def _find(
    ctx: RequestContext, key: str, key_type: int
) -> tuple[int, str, int, int, str | None]:
    """(node id, host, port, error code, error message) for one key."""
    services = ctx.services
    topics = {GROUP: services.offsets_topic, TRANSACTION: services.transactions_topic}
    topic = topics.get(key_type)
    authorizer = services.authorizer
    try:
        if authorizer.enabled and key_type in _RESOURCES:
            resource_type, denied = _RESOURCES[key_type]
            if not authorizer.authorize(ctx.conn, AclOperation.DESCRIBE, resource_type, key):
                raise KafkaError(denied)
        if topic is None:
            raise KafkaError(ErrorCode.invalid_request, f"unknown coordinator key type {key_type}")
        if not key:
            raise KafkaError(
                ErrorCode.invalid_group_id if key_type == GROUP else ErrorCode.invalid_request
            )
        node = services.cache.brokers[await topic.coordinator(key)]
    except KafkaError as e:
        return -1, "", -1, e.code, e.message
    # the coordinator's address on the listener this client came in through
    host, port = node.endpoints.get(ctx.conn.listener, (node.host, node.port))
    return node.id, host, port, ErrorCode.none, None


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    key_type = getattr(req, "key_type", GROUP)
    if ctx.header.api_version < 4:
        node, host, port, code, message = await _find(ctx, req.key, key_type)
        return b.FindCoordinatorResponse(
            throttle_time=0,
            error_code=code,
            error_message=message,
            node_id=node,
            host=host,
            port=port,
        )
    coordinators = []
    for key in req.coordinator_keys:
        node, host, port, code, message = await _find(ctx, key, key_type)
        coordinators.append(
            b.Coordinator(
                key=key, node_id=node, host=host, port=port, error_code=code, error_message=message
            )
        )
    return b.FindCoordinatorResponse(throttle_time=0, coordinators=tuple(coordinators))
