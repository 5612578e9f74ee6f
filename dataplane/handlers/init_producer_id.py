"""InitProducerId (22): a producer id and epoch, for an idempotent or a transactional producer.

Non-transactional producers always get a fresh id at epoch 0, as Kafka does. A transactional
id goes to its transaction coordinator (this broker must lead the id's `__transaction_state`
partition: NOT_COORDINATOR otherwise), which bumps the epoch, fences the previous incarnation
and aborts its open transaction first (CONCURRENT_TRANSACTIONS until then). Authorization as in
Kafka: WRITE on the transactional id, or for an idempotent producer IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from dataplane.transaction.refusals import for_client_version
from meta.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.init_producer_id import v0, v1, v2, v3, v4, v5

InitProducerIdRequest: TypeAlias = (
    "v0.InitProducerIdRequest | v1.InitProducerIdRequest | v2.InitProducerIdRequest"
    " | v3.InitProducerIdRequest | v4.InitProducerIdRequest | v5.InitProducerIdRequest"
)
"""The kio classes of the versions served."""

API_KEY = 22
VERSIONS = (0, 5)
PRODUCER_FENCED_SINCE = 4  # older clients get INVALID_PRODUCER_EPOCH


async def handle(ctx: RequestContext, req: InitProducerIdRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)

    def answer(code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Response:
        code = for_client_version(code, ctx.header.api_version, PRODUCER_FENCED_SINCE)
        return b.InitProducerIdResponse(
            throttle_time=0, error_code=code, producer_id=producer_id, producer_epoch=epoch
        )

    if (refused := _refusal(ctx, req.transactional_id)) is not None:
        return answer(refused)
    if req.transactional_id is not None:
        timeout_ms = round(req.transaction_timeout.total_seconds() * 1000)
        code, producer_id, epoch = await ctx.services.txn_coordinator.init_producer_id(
            req.transactional_id,
            timeout_ms,
            getattr(req, "producer_id", -1),
            getattr(req, "producer_epoch", -1),
        )
        return answer(code, producer_id, epoch)
    try:
        pid = await ctx.services.producer_ids.next_id()
    except KafkaError as e:
        return answer(e.code)
    return answer(ErrorCode.none, pid, 0)


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
