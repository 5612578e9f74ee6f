"""InitProducerId (22): a producer id and epoch for an idempotent producer.

Non-transactional producers always get a fresh id at epoch 0, as Kafka does. Transactional
ids need the transaction coordinator, which this broker does not have yet.
"""

from __future__ import annotations

import logging

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder
from dataplane.protocol.errors import ErrorCode, KafkaError

API_KEY = 22
VERSIONS = (0, 5)

log = logging.getLogger("rafka.init_producer_id")


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
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
