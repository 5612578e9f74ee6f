"""FindCoordinator (10): which broker coordinates a group, a transactional id or a
share-partition's state.

Any broker answers: the key hashes to a partition of the internal topic (`__consumer_offsets`
for groups, `__transaction_state` for transactional ids, `__share_group_state` for the
"group:topicId:partition" keys of share-partitions), created on first use, and that partition's
leader is the coordinator. As in Kafka, the topic is created only once its replication factor's
worth of brokers are alive (`runtime.InternalTopic`): COORDINATOR_NOT_AVAILABLE until then.
v4+ batches several keys in one request. As in Kafka, DESCRIBE on the
group (GROUP_AUTHORIZATION_FAILED) or transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
is needed; share keys (v6+, INVALID_REQUEST before) are for brokers and need CLUSTER_ACTION on
the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 10
VERSIONS = (0, 6)

GROUP, TRANSACTION, SHARE = 0, 1, 2
# key type -> (the operation needed, on which resource (None: the key names it), the error
# when it is denied)
_ACCESS = {
    GROUP: (AclOperation.DESCRIBE, ResourceType.GROUP, None, ErrorCode.group_authorization_failed),
    TRANSACTION: (
        AclOperation.DESCRIBE,
        ResourceType.TRANSACTIONAL_ID,
        None,
        ErrorCode.transactional_id_authorization_failed,
    ),
    SHARE: (
        AclOperation.CLUSTER_ACTION,
        ResourceType.CLUSTER,
        CLUSTER_NAME,
        ErrorCode.cluster_authorization_failed,
    ),
}
_SHARE_SINCE = 6  # the version that added share keys (KIP-932)


async def _find(
    ctx: RequestContext, key: str, key_type: int
) -> tuple[int, str, int, int, str | None]:
    """(node id, host, port, error code, error message) for one key."""
    services = ctx.services
    topics = {
        GROUP: services.offsets_topic,
        TRANSACTION: services.transactions_topic,
        SHARE: services.share_state_topic,
    }
    topic = topics.get(key_type)
    authorizer = services.authorizer
    try:
        if key_type == SHARE and ctx.header.api_version < _SHARE_SINCE:
            raise KafkaError(
                ErrorCode.invalid_request, f"share coordinator keys need v{_SHARE_SINCE}+"
            )
        if authorizer.enabled and key_type in _ACCESS:
            operation, resource_type, resource, denied = _ACCESS[key_type]
            if not authorizer.authorize(ctx.conn, operation, resource_type, resource or key):
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
            # Kafka's error.message(): "NONE" when found
            error_message="NONE" if code == ErrorCode.none else message,
            node_id=node,
            host=host,
            port=port,
        )
    coordinators = []
    for key in req.coordinator_keys:
        node, host, port, code, _ = await _find(ctx, key, key_type)
        # Kafka sets no message from v4 on: the field keeps its default, ""
        coordinators.append(
            b.Coordinator(
                key=key, node_id=node, host=host, port=port, error_code=code, error_message=""
            )
        )
    return b.FindCoordinatorResponse(throttle_time=0, coordinators=tuple(coordinators))
