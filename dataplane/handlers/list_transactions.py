"""ListTransactions (66): the transactional ids this broker coordinates (the admin client asks
every broker), filtered by state, producer id, v1 the time open (DurationFilter) and v2 a
regular expression the id must match (INVALID_REGULAR_EXPRESSION if it does not compile). Ids
the client may not DESCRIBE are left out, as in Kafka; state names it does not know come back
in UnknownStateFilters. COORDINATOR_LOAD_IN_PROGRESS while a partition loads.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.transaction.state import TransactionState
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.list_transactions import v0, v1, v2

ListTransactionsRequest: TypeAlias = (
    "v0.ListTransactionsRequest | v1.ListTransactionsRequest | v2.ListTransactionsRequest"
)
"""The kio classes of the versions served."""

API_KEY = 66
VERSIONS = (0, 2)


async def handle(ctx: RequestContext, req: ListTransactionsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    coordinator = ctx.services.txn_coordinator
    unknown = tuple(s for s in req.state_filters if TransactionState.from_name(s) is None)

    def answer(code: ErrorCode, states: tuple = ()) -> Response:
        return b.ListTransactionsResponse(
            throttle_time=0,
            error_code=code,
            unknown_state_filters=unknown,
            transaction_states=states,
        )

    if coordinator.is_loading():
        return answer(ErrorCode.coordinator_load_in_progress)
    pattern = getattr(req, "transactional_id_pattern", None)
    try:
        listed = await coordinator.list(
            req.state_filters,
            req.producer_id_filters,
            getattr(req, "duration_filter", -1),
            pattern,
        )
    except re.error:
        return answer(ErrorCode.invalid_regular_expression)
    authorizer = ctx.services.authorizer
    hidden = authorizer.denied(
        ctx.conn,
        AclOperation.DESCRIBE,
        ResourceType.TRANSACTIONAL_ID,
        (t.transactional_id for t in listed),
        log_denied=False,
    )
    return answer(
        ErrorCode.none,
        tuple(
            b.TransactionState(
                transactional_id=t.transactional_id,
                producer_id=t.producer_id,
                transaction_state=t.state,
            )
            for t in listed
            if t.transactional_id not in hidden
        ),
    )
