"""FindCoordinator (10): which broker coordinates a group, a transactional id or a
share-partition's state.

Any broker answers: the key hashes to a partition of the internal topic (`__consumer_offsets`
for groups, `__transaction_state` for transactional ids, `__share_group_state` for the
"group:topicId:partition" keys of share-partitions), created on first use, and that partition's
leader is the coordinator. As in Kafka, the topic is created only once its replication factor's
worth of brokers are alive (`runtime.InternalTopic`): COORDINATOR_NOT_AVAILABLE until then.
v4+ batches several keys in one request. As in Kafka, DESCRIBE on the
group (GROUP_AUTHORIZATION_FAILED) or transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
is needed; share keys (v6+, INVALID_REQUEST before, and for a key that is not
"group:topicId:partition") are for brokers and need CLUSTER_ACTION on the cluster
(CLUSTER_AUTHORIZATION_FAILED for the whole request, as an unknown key type fails it with
INVALID_REQUEST). Like Kafka, an empty key is hashed as any other.
"""

from __future__ import annotations

import logging

from dataplane.handlers.context import Request
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from dataplane.share.model import SharePartitionKey
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
# Kafka's default texts of the errors FindCoordinator answers (Errors.message()): v0-v3 carry
# them, "NONE" included; v4+ carries them only when the whole request failed, a key's own
# error has an empty message.
_DEFAULT_MESSAGES = {
    ErrorCode.none: "NONE",
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
    ErrorCode.invalid_request: (
        "This most likely occurs because of a request being malformed by the client library "
        "or the message was sent to an incompatible broker. See the broker logs for more "
        "details."
    ),
}

log = logging.getLogger("rafka.find_coordinator")


class _RequestFailed(Exception):
    """Kafka fails the whole request (every key gets the error): an unknown key type, or a
    share key without CLUSTER_ACTION."""

    def __init__(self, code: ErrorCode) -> None:
        self.code = code


async def _find(ctx: RequestContext, key: str, key_type: int) -> tuple[int, str, int, ErrorCode]:
    """(node id, host, port, error code) for one key, checked in Kafka's order
    (KafkaApis.getCoordinator); raises `_RequestFailed`."""
    services = ctx.services
    authorizer = services.authorizer
    if key_type == SHARE and ctx.header.api_version < _SHARE_SINCE:
        log.info("FindCoordinator v%d: share keys need v%d+", ctx.header.api_version, _SHARE_SINCE)
        return -1, "", -1, ErrorCode.invalid_request
    if key_type in _ACCESS:
        operation, resource_type, resource, denied = _ACCESS[key_type]
        if authorizer.enabled and not authorizer.authorize(
            ctx.conn, operation, resource_type, resource or key
        ):
            if key_type == SHARE:
                raise _RequestFailed(denied)
            return -1, "", -1, denied
    if key_type == SHARE:
        try:
            SharePartitionKey.parse(key)
        except ValueError as e:
            log.info("FindCoordinator: share coordinator key %r is invalid: %s", key, e)
            return -1, "", -1, ErrorCode.invalid_request
    topics = {
        GROUP: services.offsets_topic,
        TRANSACTION: services.transactions_topic,
        SHARE: services.share_state_topic,
    }
    topic = topics.get(key_type)
    if topic is None:
        log.info("FindCoordinator: unknown coordinator key type %d", key_type)
        raise _RequestFailed(ErrorCode.invalid_request)
    try:
        node = services.cache.brokers[await topic.coordinator(key)]
    except KafkaError as e:
        return -1, "", -1, e.code
    # the coordinator's address on the listener this client came in through
    host, port = node.endpoints.get(ctx.conn.listener, (node.host, node.port))
    return node.id, host, port, ErrorCode.none


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    key_type = getattr(req, "key_type", GROUP)
    if ctx.header.api_version < 4:
        try:
            node, host, port, code = await _find(ctx, req.key, key_type)
        except _RequestFailed as e:
            node, host, port, code = -1, "", -1, e.code
        return b.FindCoordinatorResponse(
            throttle_time=0,
            error_code=code,
            error_message=_DEFAULT_MESSAGES.get(code),
            node_id=node,
            host=host,
            port=port,
        )
    coordinators = []
    try:
        for key in req.coordinator_keys:
            node, host, port, code = await _find(ctx, key, key_type)
            coordinators.append(
                b.Coordinator(
                    key=key, node_id=node, host=host, port=port, error_code=code, error_message=""
                )
            )
    except _RequestFailed as e:
        coordinators = [
            b.Coordinator(
                key=key,
                node_id=-1,
                host="",
                port=-1,
                error_code=e.code,
                error_message=_DEFAULT_MESSAGES.get(e.code),
            )
            for key in req.coordinator_keys
        ]
    return b.FindCoordinatorResponse(throttle_time=0, coordinators=tuple(coordinators))
