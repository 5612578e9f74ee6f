"""Produce (0): validate and append each partition's batch on its leader.

The hot path: no record is decoded. The batch header and CRC are checked, offsets and the
leader epoch are written into the header, and the bytes are appended as received. acks=-1
returns an awaitable that completes when the high watermark passes the batch (the server keeps
reading this connection's next requests meanwhile). WRITE on each topic is authorized once
per request (TOPIC_AUTHORIZATION_FAILED for its partitions). Each partition's records must be
one batch, as Kafka's ProduceRequest.validateRecords wants before anything else is checked:
records holding a second whole batch are refused with INVALID_RECORD (two length fields
read). The internal topics are written by their coordinators only, never through Produce: a
client's append to one is refused with INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager
refuses it.

Transactional batches (one attributes bit of each partition's first batch, as Kafka's
RequestUtils.hasTransactionalRecords looks) need the request's transactional id and WRITE on it,
else the whole request fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Before the first batch
of a transaction lands in a partition, the transaction coordinator confirms the partition is in
the producer's ongoing transaction (KIP-890 part 1; from v12 it adds it, part 2), so a late or
zombie batch cannot open a transaction nobody will ever end. The partition hands out a
verification guard before the check and the append must present it: a marker written while the
check was awaited (the transaction ended) voids it, and the batch is refused with
INVALID_TXN_STATE instead of opening a hanging transaction. That check is awaited inline: the
server reads this connection's next request only afterwards, so appends stay in request order
(idempotent sequences). Requests without transactional batches never reach that code.

v13 names topics by id (KIP-516), each resolved once per request: an id no topic has answers
UNKNOWN_TOPIC_ID for its partitions (before authorization, as Kafka's KafkaApis checks), and the
answer names topics by the ids they were asked by.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import anyio
from kio.schema.produce import v13

from dataplane.log.batch import (
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    RecordError,
    header_at,
    holds_several_batches,
)
from dataplane.metrics.topics import PRODUCE_PURGATORY
from dataplane.metrics.topics import topic as topic_stats
from dataplane.protocol.encoders import (
    NO_TOPIC_ID,
    BatchIndexAndErrorMessage,
    ProducePartition,
    ProduceTopic,
    encode_produce_response,
)
from dataplane.protocol.errors import ConnectionClosed, ErrorCode, KafkaError
from dataplane.quota import throttle as quota
from dataplane.replica.acks import ReplicationWait
from dataplane.replica.producer_state import VerificationGuard
from dataplane.request_context import RequestContext, Response
from dataplane.topic_admin import INTERNAL_TOPICS
from meta.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kio.schema.produce import v3, v4, v5, v6, v7, v8, v9, v10, v11, v12

    from dataplane.replica.partition import Partition

API_KEY = 0
VERSIONS = (3, 13)

log = logging.getLogger("rafka.produce")

_ATTRIBUTES_LOW_BYTE = 22  # attributes (int16) start at byte 21; the flags are in its low byte
_TV2_VERSION = 12  # Produce v12+: the producer uses transaction version 2 (KIP-890 part 2)
_GENERIC_ERROR_VERSION = 11  # v11+ clients know TRANSACTION_ABORTABLE (KIP-890)

# Kafka's ReplicaManager turns these verification failures into NOT_ENOUGH_REPLICAS: retriable,
# understood by every client, and without the metadata refresh other errors cause.
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.network_exception,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)

Verified = dict[tuple[str, int], ProducePartition]
"""Partitions refused by the transaction check, with their response."""

Guards = dict[tuple[str, int], VerificationGuard]
"""The verification guard of each partition the transaction coordinator confirmed."""

RecordErrors = tuple[tuple[int, str], ...]
"""The records a refused batch was refused for: (index in the batch, why)."""

ProduceRequest: TypeAlias = (
    "v3.ProduceRequest | v4.ProduceRequest | v5.ProduceRequest | v6.ProduceRequest"
    " | v7.ProduceRequest | v8.ProduceRequest | v9.ProduceRequest | v10.ProduceRequest"
    " | v11.ProduceRequest | v12.ProduceRequest | v13.ProduceRequest"
)
"""The kio classes of the versions served (VERSIONS)."""


class PartitionData(Protocol):
    """What the handler reads of a partition's entry, the same in every version."""

    @property
    def index(self) -> int: ...
    @property
    def records(self) -> bytes | None: ...


@dataclass(slots=True)
class Topic:
    """A topic of the request, named once per request (none per record)."""

    name: str | None  # None: a v13 id no topic has
    topic_id: bytes  # the id it was asked by (v13; else unused)
    partitions: tuple[PartitionData, ...]


@dataclass(slots=True)
class Wait:
    """An acks=all partition's append: done once the high watermark reaches `offset` within
    `epoch`; else its answer, `answers[slot]`, is replaced by the error."""

    partition: Partition
    offset: int
    epoch: int
    answers: list[ProducePartition]
    slot: int


def _error(
    index: int, code: int, message: str | None = None, record_errors: RecordErrors = ()
) -> ProducePartition:
    errors = [BatchIndexAndErrorMessage(i, m) for i, m in record_errors]
    return ProducePartition(index, code, -1, -1, -1, errors, message)


def _topics(ctx: RequestContext, req: ProduceRequest) -> list[Topic]:
    """The request's topics, named: one lookup per topic, none per record."""
    if not isinstance(req, v13.ProduceRequest):  # up to v12: topics by name
        return [Topic(t.name, NO_TOPIC_ID, t.partition_data) for t in req.topic_data]
    name_of = ctx.services.cache.topic_name  # v13: topics by id (KIP-516)
    return [
        Topic(
            name_of(t.topic_id),
            t.topic_id.bytes if t.topic_id else NO_TOPIC_ID,
            t.partition_data,
        )
        for t in req.topic_data
    ]


async def handle(ctx: RequestContext, req: ProduceRequest) -> Response:  # noqa: C901 - Kafka's checks of a Produce, in its order
    replicas = ctx.services.replicas
    acks = req.acks
    topics = _topics(ctx, req)
    if acks not in (-1, 0, 1):
        return _all_failed(ctx, topics, ErrorCode.invalid_required_acks)
    denied = ctx.services.authorizer.denied(
        ctx.conn, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in topics if t.name)
    )
    refused: Verified | None = None
    guards: Guards | None = None
    if _has_transactional_batches(topics):
        code, refused, guards = await _check_transaction(ctx, req, topics, denied)
        if code != ErrorCode.none:
            if acks == 0:  # no answer to carry the error: make the client reconnect
                raise ConnectionClosed(f"acks=0 transactional produce refused: {code.name}")
            return _all_failed(ctx, topics, code)
    now_ms = time.time_ns() // 1_000_000
    results: list[ProduceTopic] = []
    waits: list[Wait] = []
    failed = False
    for topic in topics:
        name, topic_id = topic.name, topic.topic_id
        out: list[ProducePartition] = []
        if name is None or name in denied:
            failed = True
            code = (
                ErrorCode.unknown_topic_id if name is None else ErrorCode.topic_authorization_failed
            )
            out = [_error(p.index, code) for p in topic.partitions]
            results.append(ProduceTopic(name or "", out, topic_id))
            continue
        if name in INTERNAL_TOPICS:
            failed = True
            out = _internal_topic_refused(ctx, name, topic.partitions)
            results.append(ProduceTopic(name, out, topic_id))
            continue
        stats = topic_stats(name)
        for data in topic.partitions:
            if refused and (answer := refused.get((name, data.index))) is not None:
                failed = True
                out.append(answer)
                continue
            if holds_several_batches(data.records or b"") and 0 <= data.index < _partition_count(
                ctx, name
            ):
                failed = True
                out.append(_several_batches_refused(ctx, name, data.index))
                continue
            try:
                partition = replicas.leader_partition(name, data.index)
                if acks == -1 and (code := partition.replication_error()) != ErrorCode.none:
                    raise KafkaError(code)
                if guards:
                    guard = guards.get((name, data.index))
                    res = partition.append(data.records or b"", now_ms, guard)
                else:
                    res = partition.append(data.records or b"", now_ms)
            except KafkaError as e:  # includes the log's validation errors
                failed = True
                errors = e.record_errors if isinstance(e, RecordError) else ()
                out.append(_error(data.index, e.code, e.message, errors))  # KIP-467
                continue
            stats.bytes_in += len(data.records or b"")
            stats.messages_in += res.last_offset - res.base_offset + 1
            if acks == -1:
                waits.append(
                    Wait(partition, res.last_offset + 1, partition.leader_epoch, out, len(out))
                )
            out.append(
                ProducePartition(
                    data.index,
                    ErrorCode.none,
                    res.base_offset,
                    res.log_append_time,
                    partition.log.log_start_offset,
                )
            )
        results.append(ProduceTopic(name, out, topic_id))
    # producer_byte_rate (KIP-13): one flag when the cluster has no such quota
    throttle_ms = quota.produce(ctx) if ctx.services.quotas.produce.enabled else 0
    if acks == 0:
        if failed:  # Kafka closes the connection so the client refreshes its metadata
            raise ConnectionClosed(
                "acks=0 produce failed; closing so the client refreshes metadata"
            )
        return None
    version = ctx.header.api_version
    if not waits:
        return encode_produce_response(version, results, throttle_ms)
    return _Replicated(version, results, waits, req.timeout.total_seconds(), ctx)


def _internal_topic_refused(
    ctx: RequestContext, name: str, partitions: tuple[PartitionData, ...]
) -> list[ProducePartition]:
    """Kafka's answer to a client's append to an internal topic (only its coordinators write
    it: a record they cannot read would cost the groups or transactions it holds), after its
    check that the partition exists (UNKNOWN_TOPIC_OR_PARTITION first, as Kafka 4.4 answers)."""
    count = _partition_count(ctx, name)
    message = f"Cannot append to internal topic {name}"
    out = [
        _error(p.index, ErrorCode.invalid_topic_exception, message)
        if 0 <= p.index < count
        else _error(p.index, ErrorCode.unknown_topic_or_partition)
        for p in partitions
    ]
    if count:
        log.warning(
            "refused produce from %s (client %r) to the internal topic %s: only its "
            "coordinators write to it; produce to a topic of your own",
            ctx.conn.peer,
            ctx.header.client_id,
            name,
        )
    return out


def _partition_count(ctx: RequestContext, topic: str) -> int:
    """The topic's partitions in the metadata (0: no such topic)."""
    info = ctx.services.cache.topics.get(topic)
    return 0 if info is None else len(info.partitions)


def _several_batches_refused(ctx: RequestContext, topic: str, index: int) -> ProducePartition:
    """Kafka's answer to a partition's records of more than one batch (ProduceRequest's
    validateRecords, before any other check of the records: INVALID_RECORD)."""
    version = ctx.header.api_version
    log.warning(
        "refused produce from %s (client %r) to %s-%d: its records hold more than one batch, "
        "as no Kafka producer sends them; fix the client to send one batch per partition",
        ctx.conn.peer,
        ctx.header.client_id,
        topic,
        index,
    )
    message = (
        f"Produce requests with version {version} are only allowed to contain exactly one "
        "record batch per partition"
    )
    return _error(index, ErrorCode.invalid_record, message)


def _is_transactional(records: bytes | None) -> bool:
    """Whether the first batch of a partition's records has the transactional attribute."""
    return (
        records is not None
        and len(records) > _ATTRIBUTES_LOW_BYTE
        and bool(records[_ATTRIBUTES_LOW_BYTE] & ATTR_TRANSACTIONAL)
    )


def _has_transactional_batches(topics: list[Topic]) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: one byte of each partition's data."""
    return any(_is_transactional(data.records) for topic in topics for data in topic.partitions)


async def _check_transaction(
    ctx: RequestContext, req: ProduceRequest, topics: list[Topic], denied: frozenset[str]
) -> tuple[ErrorCode, Verified, Guards]:
    """The transactional checks of Kafka's KafkaApis.handleProduceRequest and
    ReplicaManager.handleProduceAppend: an error for the whole request, or the partitions
    the transaction coordinator refused (the others are appended) and the guards of those it
    confirmed."""
    transactional_id = req.transactional_id
    if transactional_id is None or not ctx.services.authorizer.authorize(
        ctx.conn, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        log.warning(
            "refused transactional produce from %s (client %r, transactional id %r): %s",
            ctx.conn.peer,
            ctx.header.client_id,
            transactional_id,
            "transactional batches need a transactional id"
            if transactional_id is None
            else f"{ctx.conn.principal} needs WRITE on TransactionalId {transactional_id!r}",
        )
        return ErrorCode.transactional_id_authorization_failed, {}, {}
    producers: set[tuple[int, int]] = set()
    candidates: list[tuple[str, int, Partition, int]] = []  # ..., first batch's sequence
    replicas = ctx.services.replicas
    for topic in topics:
        name = topic.name
        if name is None or name in denied or name in INTERNAL_TOPICS:  # refused by the append loop
            continue
        for data in topic.partitions:
            records = data.records or b""
            if not _is_transactional(records) or holds_several_batches(records):
                continue  # refused by the append loop, unverified (as Kafka refuses it first)
            if len(records) < HEADER_SIZE:
                continue  # too short to be a batch: the log refuses it with its own error
            header = header_at(records, 0)
            producers.add((header.producer_id, header.producer_epoch))
            try:
                partition = replicas.leader_partition(name, data.index)
            except KafkaError:
                continue  # answered by the append loop with the same error
            candidates.append((name, data.index, partition, header.base_sequence))
    if len(producers) > 1:  # Kafka's InvalidPidMappingException
        log.warning(
            "refused produce from %s (transactional id %r): batches of several producers %s",
            ctx.conn.peer,
            transactional_id,
            sorted(producers),
        )
        return ErrorCode.invalid_producer_id_mapping, {}, {}
    if not candidates:
        return ErrorCode.none, {}, {}
    ((producer_id, epoch),) = producers
    codes, guards = await _verify_all(ctx, transactional_id, producer_id, epoch, candidates)
    version = ctx.header.api_version
    refused: Verified = {
        key: verification_error(key[1], code, version)
        for key, code in codes.items()
        if code != ErrorCode.none
    }  # the verifier logs why
    return ErrorCode.none, refused, guards


async def _verify_all(
    ctx: RequestContext,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    candidates: list[tuple[str, int, Partition, int]],
) -> tuple[dict[tuple[str, int], ErrorCode], Guards]:
    """Ask the transaction coordinator about every partition at once (none for those where
    the transaction is open already): the answers, and the guards of the appends."""
    verifier = ctx.services.txn_verifier
    add = ctx.header.api_version >= _TV2_VERSION
    codes: dict[tuple[str, int], ErrorCode] = {}
    guards: Guards = {}

    async def verify(topic: str, index: int, partition: Partition, sequence: int) -> None:
        def ask() -> Awaitable[ErrorCode]:
            return verifier.verify(transactional_id, producer_id, epoch, topic, index, add=add)

        code, guard = await partition.verify_transaction(
            producer_id, sequence, epoch, ask, supports_epoch_bump=add
        )
        codes[(topic, index)] = code
        if guard is not None:
            guards[(topic, index)] = guard

    if len(candidates) == 1:
        await verify(*candidates[0])
    else:
        async with anyio.create_task_group() as tg:
            for candidate in candidates:
                tg.start_soon(verify, *candidate)
    return codes, guards


def verification_error(index: int, code: int, version: int) -> ProducePartition:
    """A partition's answer when the coordinator did not confirm it, mapped as Kafka's
    AddPartitionsToTxnManager and ReplicaManager map it for the producer's version."""
    if code == ErrorCode.producer_fenced:
        code = ErrorCode.invalid_producer_epoch  # what producers expect from a produce
    elif code == ErrorCode.transaction_abortable and version < _GENERIC_ERROR_VERSION:
        code = ErrorCode.invalid_txn_state  # older clients do not know TRANSACTION_ABORTABLE
    if code == ErrorCode.invalid_txn_state:
        return _error(index, code, "Partition was not added to the transaction")
    if code in _RETRY_AS_NOT_ENOUGH_REPLICAS or code == ErrorCode.not_enough_replicas:
        message = "Unable to verify the partition has been added to the transaction."
        if code != ErrorCode.not_enough_replicas:
            message += f" Underlying error: {ErrorCode(code).name.upper()}"
        return _error(index, ErrorCode.not_enough_replicas, message)
    return _error(index, code)


class _Replicated:
    """An acks=all answer (Kafka's DelayedProduce): ready once every partition's high
    watermark covers its batch, or at the request's timeout. `ready` tells the server it
    would not wait, so the answer goes out in one write with those beside it. Its
    throttle_time_ms is the request's when it is encoded (``ctx.throttle_ms``: the byte-rate
    throttle, and the request_percentage one the server adds after the handler)."""

    __slots__ = ("_ctx", "_deadline", "_results", "_version", "_wait", "_waits")

    def __init__(
        self,
        version: int,
        results: list[ProduceTopic],
        waits: list[Wait],
        timeout: float,
        ctx: RequestContext,
    ) -> None:
        self._version, self._results, self._waits = version, results, waits
        self._ctx = ctx
        self._deadline = anyio.current_time() + timeout
        self._wait = ReplicationWait(len(waits))
        for slot, wait in enumerate(waits):
            wait.partition.await_replication(wait.offset, wait.epoch, self._wait, slot)

    @property
    def ready(self) -> bool:
        return self._wait.done

    def __await__(self) -> Generator[Any, None, bytes]:
        return self._answer().__await__()

    async def _answer(self) -> bytes:
        waiting = not self._wait.done
        if waiting:
            PRODUCE_PURGATORY.inc()  # counted while it waits
        try:
            codes = await self._wait.codes(max(0.0, self._deadline - anyio.current_time()))
        finally:
            if waiting:
                PRODUCE_PURGATORY.dec()
        for wait, code in zip(self._waits, codes, strict=True):
            if code != ErrorCode.none:
                wait.answers[wait.slot] = _error(wait.partition.index, code)
        return encode_produce_response(self._version, self._results, int(self._ctx.throttle_ms))


def _all_failed(ctx: RequestContext, topics: list[Topic], code: ErrorCode) -> bytes:
    results = [
        ProduceTopic(t.name or "", [_error(p.index, code) for p in t.partitions], t.topic_id)
        for t in topics
    ]
    return encode_produce_response(ctx.header.api_version, results)
