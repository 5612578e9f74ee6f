"""DescribeTransactions (65): the state, producer, timeout, start time and partitions of
transactional ids this broker coordinates (others get NOT_COORDINATOR, as in Kafka; the admin
client asks each id's coordinator). DESCRIBE on each id is needed
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); partitions of topics the client may not DESCRIBE are
left out.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, TypeAlias

from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode
from dataplane.request_context import RequestContext, Response
from dataplane.transaction.state import TransactionDescription
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.describe_transactions import v0

DescribeTransactionsRequest: TypeAlias = "v0.DescribeTransactionsRequest"
"""The kio classes of the versions served."""

API_KEY = 65
VERSIONS = (0, 0)


async def handle(ctx: RequestContext, req: DescribeTransactionsRequest) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    authorizer = ctx.services.authorizer
    ids = list(req.transactional_ids)
    denied = authorizer.denied(ctx.conn, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, ids)
    described = {
        d.transactional_id: d
        for d in await ctx.services.txn_coordinator.describe([i for i in ids if i not in denied])
    }
    hidden = authorizer.denied(
        ctx.conn,
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        {topic for d in described.values() for topic, _ in d.partitions},
        log_denied=False,
    )
    states = []
    for transactional_id in ids:
        d = described.get(transactional_id) or TransactionDescription(
            transactional_id, ErrorCode.transactional_id_authorization_failed
        )
        if d.error_code:  # Kafka leaves an error's other fields at their defaults: 0 and ""
            d = TransactionDescription(
                transactional_id, d.error_code, start_time_ms=0, producer_id=0, producer_epoch=0
            )
        states.append(
            b.TransactionState(
                error_code=d.error_code,
                transactional_id=transactional_id,
                transaction_state=d.state,
                transaction_timeout=d.timeout_ms,
                transaction_start_time=datetime.datetime.fromtimestamp(
                    d.start_time_ms / 1000, tz=datetime.UTC
                ),
                producer_id=d.producer_id,
                producer_epoch=d.producer_epoch,
                topics=tuple(
                    b.TopicData(topic=topic, partitions=partitions)
                    for topic, partitions in d.partitions
                    if topic not in hidden
                ),
            )
        )
    return b.DescribeTransactionsResponse(throttle_time=0, transaction_states=tuple(states))
