"""DeleteTopics (20): by name (v0-v5) or by name or topic id (v6, KIP-516)."""

from __future__ import annotations

from dataplane.handlers.context import Request, RequestContext, Response
from dataplane.protocol.codec import ResponseBuilder

API_KEY = 20
VERSIONS = (1, 6)


async def handle(ctx: RequestContext, req: Request) -> Response:
    b = ResponseBuilder(API_KEY, ctx.header.api_version)
    if ctx.header.api_version >= 6:
        names = [t.name for t in req.topics if t.name is not None]
        ids = [t.topic_id.bytes for t in req.topics if t.name is None and t.topic_id is not None]
    else:
        names, ids = list(req.topic_names), []
    results = await ctx.services.topic_admin.delete_topics(names, ids)
    return b.DeleteTopicsResponse(
        throttle_time=0,
        responses=tuple(
            b.DeletableTopicResult(
                name=r.name or None,
                topic_id=bytes(r.topic_id) if r.topic_id else None,
                error_code=r.error_code,
                error_message=r.error_message or None,
            )
            for r in results
        ),
    )
