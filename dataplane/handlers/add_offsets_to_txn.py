"""AddOffsetsToTxn (25): a consumer group's offsets join a producer's transaction.

The coordinator adds the group's `__consumer_offsets` partition to the transaction, so the
commit or abort marker reaches the group coordinator, which then makes the offsets committed
with TxnOffsetCommit visible or drops them. WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group (GROUP_AUTHORIZATION_FAILED) are
needed, as in Kafka.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from dataplane.transaction.refusals import for_client_version
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.add_offsets_to_txn import v0, v1, v2, v3, v4

AddOffsetsToTxnRequest: TypeAlias = (
    "v0.AddOffsetsToTxnRequest | v1.AddOffsetsToTxnRequest | v2.AddOffsetsToTxnRequest"
    " | v3.AddOffsetsToTxnRequest | v4.AddOffsetsToTxnRequest"
)
"""The kio classes of the versions served."""

API_KEY = 25
VERSIONS = (0, 4)
PRODUCER_FENCED_SINCE = 2

log = logging.getLogger("rafka.add_offsets_to_txn")


async def handle(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    code = await _add(ctx, req)
    return b.AddOffsetsToTxnResponse(
        throttle_time=0, error_code=for_client_version(code, version, PRODUCER_FENCED_SINCE)
    )


async def _add(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> ErrorCode:
    services = ctx.services
    authorizer = services.authorizer
    if not authorizer.authorize(
        ctx.conn, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
    ):
        return ErrorCode.transactional_id_authorization_failed
    if not authorizer.authorize(ctx.conn, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ErrorCode.group_authorization_failed
    offsets_topic = services.offsets_topic
    if offsets_topic.name not in services.cache.topics:
        # created on first use, as FindCoordinator does; the client retries meanwhile
        try:
            await offsets_topic.coordinator(req.group_id)
        except KafkaError as e:
            log.info(
                "AddOffsetsToTxn of %r: %s not ready (%s)",
                req.transactional_id,
                offsets_topic.name,
                e,
            )
        if offsets_topic.name not in services.cache.topics:
            return ErrorCode.coordinator_not_available
    return await services.txn_coordinator.add_offsets(
        req.transactional_id, req.producer_id, req.producer_epoch, req.group_id
    )
