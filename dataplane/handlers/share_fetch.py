"""ShareFetch (78): share sessions, piggybacked acknowledgements, acquisition (KIP-932).

A group id, READ on the group (else GROUP_AUTHORIZATION_FAILED for the whole request) and a
member id of 1 to 36 characters (else INVALID_REQUEST), READ on each topic
(TOPIC_AUTHORIZATION_FAILED for its partitions). The share session decides what is fetched:
epoch 0 opens one with the request's partitions (acknowledgements are then an INVALID_REQUEST),
-1 closes it (acknowledgements applied, then the member's records released, nothing fetched),
other epochs fetch every partition of the session after applying the request's additions and
forgotten topics, and answer only for those with news (see sessions.py). Acknowledgements
are applied and persisted before the fetch, so the fetch sees records the member released.
With nothing to acquire the request waits up to max_wait_ms for the high watermark to move or
records to be released. max_records bounds the records acquired (record_limit acquire mode,
v2: exactly; else rounded up to whole log batches), max_bytes the records sent (at least one
batch), capped as a Fetch is (Kafka's handleShareFetchRequest): at most the broker's
fetch.max.bytes and, under consumer_byte_rate, one quota window. Records go out as raw batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

import anyio

from dataplane.log import LogError
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.quota import throttle as quota
from dataplane.request_context import RequestContext, Response
from dataplane.share import handling
from dataplane.share.acquire import FetchedPart
from dataplane.share.handling import TopicPartition, Topics
from dataplane.share.sessions import FINAL_EPOCH, INITIAL_EPOCH
from dataplane.share.wire import ShareFetchTopic, SharePartitionData, encode_share_fetch_response

if TYPE_CHECKING:
    from kio.schema.share_fetch import v1, v2

    from dataplane.share.manager import SharePartition, SharePartitionManager
    from dataplane.share.model import ShareGroupSettings

ShareFetchRequest: TypeAlias = "v1.ShareFetchRequest | v2.ShareFetchRequest"
"""The kio classes of the versions served."""

API_KEY = 78
VERSIONS = (1, 2)

RECORD_LIMIT = 1  # share_acquire_mode (v2)


async def handle(ctx: RequestContext, req: ShareFetchRequest) -> Response:
    try:
        group_id, member = handling.identify(ctx, req)
    except KafkaError as e:
        return _failed(e)
    manager = ctx.services.share_partitions
    lock_ms = manager.settings(group_id).record_lock_duration_ms
    return _serve(ctx, req, manager, group_id, member, lock_ms)


def _failed(e: KafkaError) -> list:
    """The answer to a request that fails as a whole (no acquisition lock timeout, as Kafka)."""
    return encode_share_fetch_response((), 0, error_code=e.code, error_message=e.message)


async def _serve(
    ctx: RequestContext,
    req: Any,
    manager: SharePartitionManager,
    group_id: str,
    member: str,
    lock_ms: int,
) -> list:
    epoch = req.share_session_epoch
    acks = {
        (t.topic_id.bytes if t.topic_id else bytes(16), p.partition_index): handling.ack_batches(p)
        for t in req.topics
        for p in t.partitions
        if p.acknowledgement_batches
    }
    requested = [
        (t.topic_id.bytes if t.topic_id else bytes(16), p.partition_index)
        for t in req.topics
        for p in t.partitions
    ]
    forgotten = [
        (t.topic_id.bytes if t.topic_id else bytes(16), index)
        for t in req.forgotten_topics_data
        for index in t.partitions
    ]
    now = manager.now()
    try:
        if epoch == FINAL_EPOCH:
            session = manager.sessions.close(group_id, member)
            wanted: list[TopicPartition] = []
        elif epoch == INITIAL_EPOCH:
            if acks:
                raise KafkaError(ErrorCode.invalid_request, "acknowledgements in a new session")
            session, _ = manager.sessions.open(group_id, member, requested, now, ctx.conn)
            ctx.conn.share_sessions.add((group_id, member))
            wanted = list(session.partitions)
        else:
            session = manager.sessions.update(group_id, member, epoch, requested, forgotten, now)
            wanted = list(session.partitions)
    except KafkaError as e:
        return _failed(e)

    topics = Topics(ctx, [tp[0] for tp in (*wanted, *acks)])
    max_type = 4 if ctx.header.api_version >= 2 else 3
    ack_results = await handling.acknowledge(manager, topics, group_id, member, acks, max_type)
    if epoch == FINAL_EPOCH:
        await manager.release_member(group_id, member, session.partitions)
        parts: dict[TopicPartition, SharePartitionData] = {}
    else:
        parts = await _fetch(ctx, req, manager, topics, group_id, member, wanted)
        if epoch != INITIAL_EPOCH:
            parts = {
                tp: part
                for tp, part in parts.items()
                if session.answers(tp, bool(part.acquired), part.error_code != ErrorCode.none)
            }
    return _encode(ctx, topics, parts, ack_results, lock_ms)


async def _fetch(
    ctx: RequestContext,
    req: Any,
    manager: SharePartitionManager,
    topics: Topics,
    group_id: str,
    member: str,
    wanted: list[TopicPartition],
) -> dict[TopicPartition, SharePartitionData]:
    """Acquire from the session's partitions, waiting up to max_wait_ms for something. As
    Kafka's DelayedShareFetch, the answer has the partitions that failed and those that could
    acquire records (with records or not), not those whose in-flight window is full."""
    parts: dict[TopicPartition, SharePartitionData] = {}
    loaded: list[tuple[TopicPartition, SharePartition]] = []
    for tp in wanted:
        topic_id, index = tp
        if topic_id in topics.errors:
            parts[tp] = SharePartitionData(index, topics.errors[topic_id])
            continue
        try:
            sp = await manager.share_partition(group_id, topics.names[topic_id], topic_id, index)
        except KafkaError as e:
            parts[tp] = _error(ctx, topics, tp, e)
            continue
        loaded.append((tp, sp))
    settings = manager.settings(group_id)
    deadline = anyio.current_time() + req.max_wait.total_seconds()
    while True:
        got = _acquire_all(ctx, req, manager, topics, settings, member, loaded, parts)
        if got or not loaded or anyio.current_time() >= deadline:
            break
        event = anyio.Event()
        for _, sp in loaded:
            sp.partition.watch(event)
            sp.watch(event)
        with anyio.move_on_after(deadline - anyio.current_time()):
            await event.wait()
        for _, sp in loaded:
            sp.partition.unwatch(event)
            sp.unwatch(event)
        still = []
        for tp, sp in loaded:
            if sp.dropped:  # unloaded while waiting: the client looks for the new leader
                parts[tp] = _error(ctx, topics, tp, KafkaError(ErrorCode.not_leader_or_follower))
            else:
                still.append((tp, sp))
        loaded = still
    for tp, sp in loaded:
        if sp.state.can_acquire():
            parts.setdefault(tp, SharePartitionData(tp[1]))
    return {tp: parts[tp] for tp in wanted if tp in parts}


def _acquire_all(
    ctx: RequestContext,
    req: Any,
    manager: SharePartitionManager,
    topics: Topics,
    settings: ShareGroupSettings,
    member: str,
    loaded: list[tuple[TopicPartition, SharePartition]],
    parts: dict[TopicPartition, SharePartitionData],
) -> int:
    """One pass over the partitions; the number of records acquired."""
    budget = quota.fetch_budget(ctx, req.max_bytes)
    records = req.max_records
    strict = getattr(req, "share_acquire_mode", 0) == RECORD_LIMIT
    total = 0
    size = 0
    for tp, sp in loaded:
        if records - total <= 0:
            break
        try:
            part: FetchedPart = manager.acquire(
                sp, member, settings, max(0, budget - size), size == 0, records - total, strict
            )
        except (LogError, KafkaError) as e:
            parts[tp] = _error(ctx, topics, tp, e)
            continue
        if part.acquired:
            parts[tp] = SharePartitionData(tp[1], records=part.records, acquired=part.acquired)
            total += sum(a.last_offset - a.first_offset + 1 for a in part.acquired)
            size += part.size
    return total


def _error(
    ctx: RequestContext, topics: Topics, tp: TopicPartition, e: KafkaError
) -> SharePartitionData:
    return SharePartitionData(
        tp[1], e.code, e.message, leader=handling.leader_after(ctx, topics, tp, e.code)
    )


def _encode(
    ctx: RequestContext,
    topics: Topics,
    parts: dict[TopicPartition, SharePartitionData],
    acks: dict[TopicPartition, handling.Result],
    lock_ms: int,
) -> list:
    by_topic: dict[bytes, list[SharePartitionData]] = {}
    for tp, part in parts.items():
        code, message = acks.pop(tp, (ErrorCode.none, None))
        by_topic.setdefault(tp[0], []).append(
            part._replace(acknowledge_error_code=code, acknowledge_error_message=message)
        )
    for tp, (code, message) in acks.items():  # acknowledged, not fetched
        by_topic.setdefault(tp[0], []).append(
            SharePartitionData(
                tp[1],
                acknowledge_error_code=code,
                acknowledge_error_message=message,
                leader=handling.leader_after(ctx, topics, tp, code),
            )
        )
    leaders = [
        p.leader[0]
        for ps in by_topic.values()
        for p in ps
        if {p.error_code, p.acknowledge_error_code} & set(handling.LEADERSHIP_ERRORS)
    ]
    return encode_share_fetch_response(
        [ShareFetchTopic(topic_id, ps) for topic_id, ps in by_topic.items()],
        lock_ms,
        handling.leader_endpoints(ctx, leaders),
    )
