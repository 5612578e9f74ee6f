"""InitProducerId (22): a producer id and epoch for an idempotent producer.

Non-transactional producers always get a fresh id at epoch 0, as Kafka does. Transactional
ids need the transaction coordinator, which this broker does not have yet. Authorization as in
Kafka: WRITE on the transactional id, or for an idempotent producer IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

API_KEY = 22
VERSIONS = (0, 5)

log = logging.getLogger("rafka.init_producer_id")


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    if (refused := _refusal(ctx, req.transactional_id)) is not None:
        return b.InitProducerIdResponse(
            throttle_time=0, error_code=refused, producer_id=-1, producer_epoch=-1
        )
    if req.transactional_id is not None:
        log.warning(
            "client %r asked for transactional id %r: transactions are not supported yet",
            ctx.header.client_id,
            req.transactional_id,
        )
        return b.InitProducerIdResponse(
            throttle_time=0,
            error_code=ErrorCode.unsupported_version,
            producer_id=-1,
            producer_epoch=-1,
        )
    try:
        pid = await ctx.services.producer_ids.next_id()
    except KafkaError as e:
        return b.InitProducerIdResponse(
            throttle_time=0, error_code=e.code, producer_id=-1, producer_epoch=-1
        )
    return b.InitProducerIdResponse(
        throttle_time=0, error_code=ErrorCode.none, producer_id=pid, producer_epoch=0
    )


def _refusal(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    authorizer = ctx.services.authorizer
    if not authorizer.enabled:
        return None
    if transactional_id is not None:
        if authorizer.authorize(
            ctx.conn, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if authorizer.authorize(
        ctx.conn,
        AclOperation.IDEMPOTENT_WRITE,
        ResourceType.CLUSTER,
        CLUSTER_NAME,
        log_denied=False,
    ) or authorizer.authorize_any(ctx.conn, AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed
