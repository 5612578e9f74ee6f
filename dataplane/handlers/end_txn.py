"""EndTxn (26): commit or abort a producer's transaction, on its coordinator.

The answer comes once PrepareCommit/PrepareAbort is replicated in `__transaction_state`; the
markers and the Complete state follow in the background (a retry meanwhile gets
CONCURRENT_TRANSACTIONS). v5+ is transaction version 2 (KIP-890 part 2): every commit or abort
bumps the producer epoch, and the answer carries the producer id and epoch to use next. WRITE
on the transactional id is needed (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.transaction.refusals import for_client_version
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.end_txn import v0, v1, v2, v3, v4, v5

EndTxnRequest: TypeAlias = (
    "v0.EndTxnRequest | v1.EndTxnRequest | v2.EndTxnRequest | v3.EndTxnRequest"
    " | v4.EndTxnRequest | v5.EndTxnRequest"
)
"""The kio classes of the versions served."""

API_KEY = 26
VERSIONS = (0, 5)
PRODUCER_FENCED_SINCE = 2
TV2_SINCE = 5


async def handle(ctx: RequestContext, req: EndTxnRequest) -> Response:
    version = ctx.header.api_version
    b = ResponseBuilder(API_KEY, version)
    if not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
    ):
        code, producer_id, epoch = ErrorCode.transactional_id_authorization_failed, -1, -1
    else:
        code, producer_id, epoch = await ctx.services.txn_coordinator.end_txn(
            req.transactional_id,
            req.producer_id,
            req.producer_epoch,
            commit=req.committed,
            tv2=version >= TV2_SINCE,
        )
    return b.EndTxnResponse(
        throttle_time=0,
        error_code=for_client_version(code, version, PRODUCER_FENCED_SINCE),
        producer_id=producer_id,
        producer_epoch=epoch,
    )
