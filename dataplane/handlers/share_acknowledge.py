"""ShareAcknowledge (79): acknowledgements outside a ShareFetch (KIP-932).

A group id, READ on the group (else GROUP_AUTHORIZATION_FAILED) and a member id of 1 to 36
characters (else INVALID_REQUEST), READ on each topic. The request belongs
to the member's share session: epoch 0 is refused (INVALID_SHARE_SESSION_EPOCH: only a
ShareFetch opens a session), -1 closes the session once the acknowledgements are applied (the
member's remaining records are released), other epochs must follow the session's. Each
partition's acknowledgements are applied all or none and persisted before the answer.
"""

from __future__ import annotations

import datetime
import importlib
import uuid
from typing import TYPE_CHECKING, Any, TypeAlias

from kio.static.protocol import Payload

from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext, Response
from dataplane.share import handling
from dataplane.share.handling import Topics
from dataplane.share.sessions import FINAL_EPOCH

if TYPE_CHECKING:
    from kio.schema.share_acknowledge import v1, v2

ShareAcknowledgeRequest: TypeAlias = "v1.ShareAcknowledgeRequest | v2.ShareAcknowledgeRequest"
"""The kio classes of the versions served."""

API_KEY = 79
VERSIONS = (1, 2)


async def handle(ctx: RequestContext, req: ShareAcknowledgeRequest) -> Response:
    try:
        group_id, member = handling.identify(ctx, req)
    except KafkaError as e:
        return _response(ctx, req.group_id or "", e.code, e.message, {}, None)
    return _serve(ctx, req, group_id, member)


async def _serve(ctx: RequestContext, req: Any, group_id: str, member: str) -> Payload:
    manager = ctx.services.share_partitions
    epoch = req.share_session_epoch
    try:
        if epoch == FINAL_EPOCH:
            session = manager.sessions.close(group_id, member)
        else:
            manager.sessions.acknowledged(group_id, member, epoch, manager.now())
    except KafkaError as e:
        return _response(ctx, group_id, e.code, e.message, {}, None)
    acks = {
        (t.topic_id.bytes if t.topic_id else bytes(16), p.partition_index): handling.ack_batches(p)
        for t in req.topics
        for p in t.partitions
    }
    topics = Topics(ctx, [tp[0] for tp in acks])
    max_type = 4 if ctx.header.api_version >= 2 else 3
    results = await handling.acknowledge(manager, topics, group_id, member, acks, max_type)
    if epoch == FINAL_EPOCH:
        await manager.release_member(group_id, member, session.partitions)
    return _response(ctx, group_id, ErrorCode.none, None, results, topics)


def _response(
    ctx: RequestContext,
    group_id: str,
    error: ErrorCode,
    message: str | None,
    results: dict[handling.TopicPartition, handling.Result],
    topics: Topics | None,
) -> Payload:
    version = ctx.header.api_version
    m = importlib.import_module(f"kio.schema.share_acknowledge.v{version}.response")
    by_topic: dict[bytes, list[Any]] = {}
    leaders: list[int] = []
    for (topic_id, index), (code, text) in results.items():
        leader = handling.leader_after(ctx, topics, (topic_id, index), code)
        if code in handling.LEADERSHIP_ERRORS:
            leaders.append(leader[0])
        by_topic.setdefault(topic_id, []).append(
            m.PartitionData(
                partition_index=index,
                error_code=code,
                error_message=text,
                current_leader=m.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]),
            )
        )
    extra: dict[str, Any] = {}
    if version >= 2:  # no lock timeout when the request fails as a whole (as Kafka)
        lock_ms = 0
        if error == ErrorCode.none:
            lock_ms = ctx.services.share_partitions.settings(group_id).record_lock_duration_ms
        extra["acquisition_lock_timeout"] = datetime.timedelta(milliseconds=lock_ms)
    response: Payload = m.ShareAcknowledgeResponse(  # m: the version's module, chosen at run time
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=message,
        responses=tuple(
            m.ShareAcknowledgeTopicResponse(
                topic_id=uuid.UUID(bytes=tid) if any(tid) else None, partitions=tuple(ps)
            )
            for tid, ps in by_topic.items()
        ),
        node_endpoints=tuple(
            m.NodeEndpoint(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
            for n in handling.leader_endpoints(ctx, [x for x in leaders if x >= 0])
        ),
        **extra,
    )
    return response
