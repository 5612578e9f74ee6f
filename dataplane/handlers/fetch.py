"""Fetch (1): serve raw batches up to the high watermark, with long polling and fetch sessions.

The hot path: batches are read from the segment files and sent as stored. When less than
min_bytes is available the handler returns an awaitable that parks on the partitions' high
watermark until data arrives or max_wait_ms passes. READ is authorized per topic
(TOPIC_AUTHORIZATION_FAILED); followers replicate over their own RPC, not through here.

isolation_level=1 (read_committed) reads up to the last stable offset instead, below every
open transaction, and lists the aborted transactions the records may hold so the client drops
their batches (it filters; the broker sends batches as stored). Every answer carries the real
LSO, as Kafka's does. A waiting read_committed fetch re-reads whenever the high watermark
moves: a transaction's marker is appended (and replicated) like any batch, so its commit or
abort moves the high watermark past it and wakes the wait.

Fetch sessions (KIP-227, v7+; dataplane/fetch_session.py), as Kafka's FetchManager: epoch 0 is
a full fetch that creates a session (the response names it), epoch -1 a full fetch without one
(a session id given with either is closed first), a positive epoch an incremental fetch of that
session: FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, or FETCH_SESSION_TOPIC_ID_ERROR
(a session of topic ids used by a request of names, or the reverse). An incremental fetch reads
only the session's partitions that changed, so its cost follows the partitions with news, not
the session's size; its long poll waits on the session, which its partitions wake.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from dataplane.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    PartitionParams,
    next_epoch,
    now_ms,
)
from dataplane.handlers.context import Request
from dataplane.metrics.topics import FETCH_PURGATORY, fetched
from dataplane.protocol.encoders import (
    AbortedTransaction,
    EpochEndOffset,
    FetchPartition,
    FetchTopic,
    encode_fetch_response,
)
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.quota import throttle as quota
from dataplane.request_context import RequestContext, Response
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from dataplane.metadata_cache import TopicInfo
    from dataplane.replica.partition import Partition

log = logging.getLogger("rafka.fetch")

API_KEY = 1
VERSIONS = (4, 18)  # v17-v18 add fields only KRaft followers use (KIP-853, KIP-1166)

READ_COMMITTED = 1


RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

_Topic = tuple["TopicInfo | None", "str | None", ErrorCode]
"""A requested topic resolved: its info (None: unknown or not authorized), name, and the error
its partitions get when there is no info."""


class _Read:
    """One pass over the partitions to read: what was read and which partitions to watch."""

    def __init__(self) -> None:
        self.topics: list[FetchTopic] = []
        self.bytes = 0
        self.respond_now = False  # an error or a redirect to another replica
        self.partitions: list[Partition] = []
        self.sources: list[Partition | None] = []  # each answer's replica, in answer order

    def add(self, data: FetchPartition, partition: Partition | None) -> int:
        """Count one partition's answer; the bytes it took from the budget."""
        self.sources.append(partition)
        if partition is None or data.error_code or data.preferred_read_replica >= 0:
            self.respond_now = True
            return 0
        size = len(data.records or b"")
        self.bytes += size
        self.partitions.append(partition)
        return size


class _SessionRead(_Read):
    """A pass over an incremental session's dirty partitions: every partition read, with its
    answer, and the answers the response carries (those with news, grouped by topic)."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[tuple[CachedPartition, FetchPartition, Partition | None]] = []


class _Limits(Protocol):
    """The size limits of a FetchRequest, the same in every version served."""

    @property
    def max_bytes(self) -> int: ...
    @property
    def min_bytes(self) -> int: ...


def _budget(ctx: RequestContext, req: _Limits) -> int:
    """The bytes a fetch may answer (Kafka's fetchMaxBytes: quota.fetch_budget)."""
    return quota.fetch_budget(ctx, req.max_bytes)


def _min_bytes(ctx: RequestContext, req: _Limits) -> int:
    """The bytes a long poll waits for: min_bytes, never more than the budget (Kafka's
    fetchMinBytes), or it would wait out max_wait_ms for what it may not answer."""
    return min(req.min_bytes, _budget(ctx, req))


def _from_follower(ctx: RequestContext, req: Any) -> bool:
    """KIP-392: consumers that name their rack (v11+) may read from a follower."""
    return ctx.header.api_version >= 11 and bool(req.rack_id)


def _resolve(ctx: RequestContext, by_id: bool, topic_id: bytes, name: str | None) -> _Topic:
    cache, authorizer = ctx.services.cache, ctx.services.authorizer
    info = cache.topics_by_id.get(topic_id) if by_id else cache.topics.get(name or "")
    unknown = ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
    name = info.name if info else (None if by_id else name)
    if (
        authorizer.enabled
        and name is not None
        and not authorizer.authorize(ctx.conn, AclOperation.READ, ResourceType.TOPIC, name)
    ):  # even an unknown one: Kafka checks READ before existence
        info, unknown = None, ErrorCode.topic_authorization_failed
    return info, name, unknown


def _read_partition(
    ctx: RequestContext, req: Any, topic: _Topic, p: PartitionParams, budget: int, first: bool
) -> tuple[FetchPartition, Partition | None]:
    """One partition's answer (`p`: a request partition or a session's cached one)."""
    info, _, unknown = topic
    try:
        if info is None:
            raise KafkaError(unknown)
        epoch = getattr(p, "current_leader_epoch", -1)
        partition = ctx.services.replicas.readable_partition(
            info.name, p.partition, epoch, _from_follower(ctx, req)
        )
    except KafkaError as e:
        return _failed(p.partition, e.code), None
    return _partition_data(ctx, req, partition, p, budget, first), partition


# Errors Kafka's KafkaApis answers before reading (FetchResponse.partitionResponse): their
# aborted_transactions is the empty list; errors of the read itself (ReplicaManager's
# createLogReadResult) have none (null).
_REQUEST_ERRORS = frozenset(
    (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.unknown_topic_id,
        ErrorCode.topic_authorization_failed,
    )
)


def _failed(index: int, code: ErrorCode) -> FetchPartition:
    """A partition answered with an error: Kafka's offsets are all unknown (-1)."""
    aborted: list[AbortedTransaction] | None = [] if code in _REQUEST_ERRORS else None
    return FetchPartition(index, code, -1, -1, -1, aborted, -1, b"")


def _read(ctx: RequestContext, req: Any) -> _Read:
    """Read every partition the request lists (a sessionless or full fetch)."""
    by_id = ctx.header.api_version >= 13  # topic ids replace names from v13 (KIP-516)
    budget = _budget(ctx, req)
    result = _Read()
    for topic in req.topics:
        topic_id = topic.topic_id.bytes if by_id and topic.topic_id else bytes(16)
        resolved = _resolve(ctx, by_id, topic_id, None if by_id else topic.topic)
        info, name, _ = resolved
        out: list[FetchPartition] = []
        for p in topic.partitions:
            data, partition = _read_partition(ctx, req, resolved, p, budget, result.bytes == 0)
            out.append(data)
            budget = max(0, budget - result.add(data, partition))
        result.topics.append(FetchTopic(name, info.topic_id if info else topic_id, out))
    return result


def _partition_data(
    ctx: RequestContext,
    req: Any,
    partition: Partition,
    p: PartitionParams,
    budget: int,
    first: bool,
) -> FetchPartition:
    hw, lso, start = (
        partition.high_watermark,
        partition.last_stable_offset,
        partition.log.log_start_offset,
    )
    committed = req.isolation_level == READ_COMMITTED
    replica = _preferred_read_replica(ctx, req, partition)
    if replica >= 0:
        no_aborts: list[AbortedTransaction] | None = [] if committed else None
        return FetchPartition(p.partition, ErrorCode.none, hw, lso, start, no_aborts, replica, b"")
    try:
        if diverging := _diverging_epoch(partition, p, start):
            return FetchPartition(
                p.partition, ErrorCode.none, hw, lso, start, None, -1, b"", diverging
            )
        records = partition.log.read(
            p.fetch_offset, min(p.partition_max_bytes, budget), lso if committed else hw, first
        )
    except KafkaError as e:  # a LogError, or the epoch check's
        return _failed(p.partition, e.code)
    aborted = aborted_transactions(partition, p.fetch_offset, lso, records) if committed else None
    return FetchPartition(p.partition, ErrorCode.none, hw, lso, start, aborted, -1, records)


def _diverging_epoch(
    partition: Partition, p: PartitionParams, log_start: int
) -> EpochEndOffset | None:
    """Kafka's Partition.readRecords for a fetch that names its last fetched epoch (v12+, any
    fetcher): the end of that epoch here when the fetcher's log diverged from ours (its epoch
    ended earlier here, or is unknown before ours), else None. OFFSET_OUT_OF_RANGE when that
    end cannot be found (an epoch newer than any here) or the offset is before the log."""
    last = getattr(p, "last_fetched_epoch", -1)
    if last < 0:
        return None
    epoch, end = partition.log.end_offset_for_epoch(last)
    if epoch < 0 or end < 0:
        raise KafkaError(
            ErrorCode.offset_out_of_range,
            f"Could not determine the end offset of the last fetched epoch {last} from the request",
        )
    if p.fetch_offset < log_start:
        raise KafkaError(ErrorCode.offset_out_of_range)
    if epoch < last or end < p.fetch_offset:
        return EpochEndOffset(epoch, end)
    return None


def aborted_transactions(
    partition: Partition, fetch_offset: int, lso: int, records: Any
) -> list[AbortedTransaction]:
    """What a read_committed consumer needs to drop the aborted batches among ``records``
    (Kafka's LocalLog.addAbortedTransactions); nothing read, nothing to drop. The bound is the
    LSO rather than the end of the read: a transaction listed that the records do not reach
    is ignored by the client, and finding that end would mean walking every batch header."""
    if not records:
        return []
    return [
        AbortedTransaction(producer_id, first_offset)
        for producer_id, first_offset in partition.log.aborted_transactions(fetch_offset, lso)
    ]


def _preferred_read_replica(ctx: RequestContext, req: Any, partition: Partition) -> int:
    """With replica.selector.class=RackAwareReplicaSelector, the leader sends a consumer from
    another rack to an in-sync replica on the consumer's rack (KIP-392); -1: read here."""
    services = ctx.services
    rack = getattr(req, "rack_id", "")
    if not (rack and partition.is_leader and services.config.replica_selector_class == RACK_AWARE):
        return -1
    if services.config.broker_rack == rack:
        return -1
    for replica in partition.isr:
        info = services.cache.brokers.get(replica)
        if info is not None and info.rack == rack and not info.fenced:
            return replica
    return -1


async def handle(ctx: RequestContext, req: Request) -> Response:
    version = ctx.header.api_version
    session_id = req.session_id if version >= 7 else INVALID_SESSION_ID
    epoch = req.session_epoch if version >= 7 else FINAL_EPOCH
    if epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        return _incremental(ctx, req, session_id, epoch)
    sessions = ctx.services.fetch_sessions
    if session_id != INVALID_SESSION_ID:  # a full fetch closes the session it names
        closed = sessions.get(session_id)
        if closed is not None:
            sessions.remove(closed)
            log.debug("full fetch closed %r", closed)
    create = epoch == INITIAL_EPOCH and version >= 7
    read = _read(ctx, req)
    wait_s = req.max_wait.total_seconds()
    if read.bytes >= _min_bytes(ctx, req) or read.respond_now or wait_s <= 0 or not read.partitions:
        return _encode(ctx, req, read, create)
    return _long_poll(ctx, req, read, anyio.current_time() + wait_s, create)


async def _long_poll(
    ctx: RequestContext, req: Any, read: _Read, deadline: float, create: bool
) -> list:
    """Wait until min_bytes are available, an error shows up, or max_wait_ms has passed
    (counted in the fetch purgatory while it waits)."""
    FETCH_PURGATORY.inc()
    try:
        while True:
            event = anyio.Event()
            for partition in read.partitions:
                partition.watch(event)
            with anyio.move_on_after(deadline - anyio.current_time()):
                await event.wait()
            for partition in read.partitions:
                partition.unwatch(event)
            read = _read(ctx, req)
            if (
                read.bytes >= _min_bytes(ctx, req)
                or read.respond_now
                or anyio.current_time() >= deadline
            ):
                return _encode(ctx, req, read, create)
    finally:
        FETCH_PURGATORY.dec()


def _encode(ctx: RequestContext, req: Any, read: _Read, create: bool) -> list:
    """A full or sessionless answer; with `create`, the new session it starts (none if the
    cache has no room: the client keeps sending full fetches)."""
    # consumer_byte_rate (KIP-13): a throttled fetch answers no data, only its throttle time
    if ctx.services.quotas.fetch.enabled and (throttle_ms := quota.fetch(ctx, read.bytes)):
        return encode_fetch_response(ctx.header.api_version, [], throttle_ms)
    _count_bytes_out(read)
    session_id = _create_session(ctx, req, read) if create else INVALID_SESSION_ID
    return encode_fetch_response(ctx.header.api_version, read.topics, session_id=session_id)


def _count_bytes_out(read: _Read) -> None:
    if read.bytes:  # BytesOutPerSec: bytes of records sent, by topic
        fetched((t.name, sum(len(p.records or b"") for p in t.partitions)) for t in read.topics)


# -- incremental fetch sessions (KIP-227) ------------------------------------------------------


def _topic_key(by_id: bool, topic: Any) -> Any:
    """A request or forgotten topic's key in a session: its id from v13, else its name."""
    if by_id:
        return topic.topic_id.bytes if topic.topic_id else bytes(16)
    return topic.topic


def _create_session(ctx: RequestContext, req: Any, read: _Read) -> int:
    """Kafka's FullFetchContext: cache what this full answer told the client."""
    by_id = ctx.header.api_version >= 13
    size = sum(len(t.partitions) for t in req.topics)
    session = ctx.services.fetch_sessions.maybe_create(False, size, by_id)
    if session is None:
        return INVALID_SESSION_ID
    sources = iter(read.sources)
    committed = req.isolation_level == READ_COMMITTED
    for topic, answered in zip(req.topics, read.topics, strict=True):
        topic_key = _topic_key(by_id, topic)
        for p, data in zip(topic.partitions, answered.partitions, strict=True):
            cached = session.add((topic_key, p.partition), p)
            cached.remember(data)
            _settle(session, cached, data, next(sources), committed)
    ctx.services.fetch_sessions.touch(session, now_ms())
    return session.id


def _settle(
    session: FetchSession,
    cached: CachedPartition,
    data: FetchPartition,
    partition: Partition | None,
    committed: bool,
) -> None:
    """After an answer: a partition with nothing more to tell waits for its high watermark
    to move; one with records not yet sent, an error or a redirect is read again next time."""
    if partition is None or data.error_code or data.preferred_read_replica >= 0:
        return
    end = data.last_stable_offset if committed else data.high_watermark
    if cached.fetch_offset < end:
        if data.records:
            session.to_back(cached.key)
        return
    session.clean(cached.key, partition)


def _session_error(ctx: RequestContext, code: ErrorCode, why: str) -> list:
    """Kafka's SessionErrorContext: the error alone, no session (the client starts over
    with a full fetch)."""
    log.debug("fetch session error %s: %s", code.name, why)
    return encode_fetch_response(ctx.header.api_version, [], error_code=code)


def _incremental(ctx: RequestContext, req: Any, session_id: int, epoch: int) -> Response:
    """Kafka's FetchManager.newContext for an incremental fetch, then the read."""
    version = ctx.header.api_version
    sessions = ctx.services.fetch_sessions
    session = sessions.get(session_id)
    if session is None:
        why = f"no session {session_id}"
        return _session_error(ctx, ErrorCode.fetch_session_id_not_found, why)
    if session.epoch != epoch:
        why = f"session {session_id} expected epoch {session.epoch}, got {epoch}"
        return _session_error(ctx, ErrorCode.invalid_fetch_session_epoch, why)
    by_id = version >= 13
    if session.uses_topic_ids != by_id:
        uses = "uses" if session.uses_topic_ids else "does not use"
        why = f"session {session_id} {uses} topic ids, request version {version} cannot"
        return _session_error(ctx, ErrorCode.fetch_session_topic_id_error, why)
    for topic in req.topics:
        topic_key = _topic_key(by_id, topic)
        for p in topic.partitions:
            session.add((topic_key, p.partition), p)
    for forgotten in req.forgotten_topics_data:
        topic_key = _topic_key(by_id, forgotten)
        for index in forgotten.partitions:
            session.forget((topic_key, index))
    if not session.partitions:  # nothing left: the session ends, the answer is sessionless
        sessions.remove(session)
        log.debug("fetch session %d closed: every partition forgotten", session_id)
        return encode_fetch_response(version, [])
    now = now_ms()
    sessions.touch(session, now)
    session.epoch = expected = next_epoch(session.epoch)
    read = _read_session(ctx, req, session)
    wait_s = req.max_wait.total_seconds()
    if read.bytes >= _min_bytes(ctx, req) or read.respond_now or wait_s <= 0:
        return _encode_session(ctx, req, session, read, expected)
    return _long_poll_session(ctx, req, session, read, anyio.current_time() + wait_s, expected)


def _read_session(ctx: RequestContext, req: Any, session: FetchSession) -> _SessionRead:
    """Read the session's dirty partitions, in session order; the response keeps those with
    news (CachedPartition.must_respond), grouped by topic."""
    by_id = session.uses_topic_ids
    budget = _budget(ctx, req)
    result = _SessionRead()
    resolved: dict[Any, _Topic] = {}
    answers: dict[Any, list[FetchPartition]] = {}
    for key in list(session.dirty):
        cached = session.partitions[key]
        topic_key = key[0]
        topic = resolved.get(topic_key)
        if topic is None:
            name = None if by_id else topic_key
            topic = resolved[topic_key] = _resolve(ctx, by_id, topic_key if by_id else b"", name)
        data, partition = _read_partition(ctx, req, topic, cached, budget, result.bytes == 0)
        result.entries.append((cached, data, partition))
        if cached.must_respond(data):
            answers.setdefault(topic_key, []).append(data)
            budget = max(0, budget - result.add(data, partition))
    result.topics = [_session_topic(by_id, k, resolved[k], out) for k, out in answers.items()]
    return result


def _session_topic(
    by_id: bool, topic_key: Any, topic: _Topic, partitions: list[FetchPartition]
) -> FetchTopic:
    info, name, _ = topic
    if by_id:
        return FetchTopic(name, topic_key, partitions)
    return FetchTopic(topic_key, info.topic_id if info else bytes(16), partitions)


async def _long_poll_session(
    ctx: RequestContext,
    req: Any,
    session: FetchSession,
    read: _SessionRead,
    deadline: float,
    expected: int,
) -> list:
    """Wait on the session (any of its partitions' high watermarks moving wakes it) until
    min_bytes are available, an error shows up, or max_wait_ms has passed."""
    FETCH_PURGATORY.inc()
    try:
        while True:
            event = session.waiter = anyio.Event()
            _watch_read(read.entries)
            with anyio.move_on_after(deadline - anyio.current_time()):
                await event.wait()
            session.waiter = None
            read = _read_session(ctx, req, session)
            if (
                read.bytes >= _min_bytes(ctx, req)
                or read.respond_now
                or anyio.current_time() >= deadline
            ):
                return _encode_session(ctx, req, session, read, expected)
    finally:
        session.waiter = None
        FETCH_PURGATORY.dec()


def _watch_read(
    entries: Iterable[tuple[CachedPartition, FetchPartition, Partition | None]],
) -> None:
    """While a session waits, the dirty partitions it read wake it too (the others already
    watch their replicas)."""
    for cached, _, partition in entries:
        if partition is not None and cached.watched is None:
            cached.watch(partition)


def _encode_session(
    ctx: RequestContext, req: Any, session: FetchSession, read: _SessionRead, expected: int
) -> list:
    """Kafka's IncrementalFetchContext.updateAndGenerateResponseData: the partitions with news,
    remembered as sent; INVALID_FETCH_SESSION_EPOCH if another fetch of the session came
    between (a duplicate request)."""
    version = ctx.header.api_version
    if session.epoch != expected:
        log.info(
            "incremental fetch session %d expected epoch %d, but got %d: possible duplicate "
            "request",
            session.id,
            expected,
            session.epoch,
        )
        return encode_fetch_response(
            version, [], error_code=ErrorCode.invalid_fetch_session_epoch, session_id=session.id
        )
    if ctx.services.quotas.fetch.enabled and (throttle_ms := quota.fetch(ctx, read.bytes)):
        return encode_fetch_response(version, [], throttle_ms, session_id=session.id)
    committed = req.isolation_level == READ_COMMITTED
    for cached, data, partition in read.entries:
        if cached.must_respond(data):
            cached.remember(data)
        if not session.closed:
            _settle(session, cached, data, partition, committed)
    _count_bytes_out(read)
    return encode_fetch_response(version, read.topics, session_id=session.id)
