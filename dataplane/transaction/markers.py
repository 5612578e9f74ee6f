"""Transaction markers: the coordinator's side (`TxnMarkerSender`, Kafka's
TransactionMarkerChannelManager) and the partition leaders' side of the broker-to-broker
transaction RPCs (`TxnRpcHandlers`, Kafka's handleWriteTxnMarkersRequest and the inter-broker
AddPartitionsToTxn).

When a transaction ends, its coordinator has the leader of every partition in it append a
COMMIT or ABORT control batch. Partitions this broker leads are written directly; the others
through the `WriteTxnMarkers` RPC to their leader's replication endpoint, the markers of
concurrent transactions bound for one broker sharing a call. A marker counts once it is
replicated like an acks=all produce; until then it is retried (leader moves, ISR below
min.insync.replicas, unreachable brokers), each round logged with what is missing and why. A
partition whose topic was deleted needs no marker. On a `__consumer_offsets` partition, the
leader then makes the transaction's offsets visible (or drops them) in its group coordinator.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import anyio
import grpc

from common.grpc_cancellation import rpc
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.partition import now_ms
from dataplane.replica.peers import PeerChannels
from proto import replication_pb2, replication_pb2_grpc

if TYPE_CHECKING:
    from common.internal_security import InternalSecurity
    from dataplane.coordinator.service import GroupCoordinator
    from dataplane.metadata_cache import MetadataCache
    from dataplane.replica.manager import ReplicaManager
    from dataplane.transaction.coordinator import TransactionCoordinator

log = logging.getLogger("rafka.transaction.markers")

TopicPartition = tuple[str, int]

WRITE_TIMEOUT_S = 30.0  # how long a leader waits for a marker's replication (request.timeout.ms)
_RPC_TIMEOUT_S = WRITE_TIMEOUT_S + 5.0
_INITIAL_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0

# Answers that end a partition's marker: written, or not needed any more. A stale marker (the
# producer or the coordinator moved on, Kafka's abortSending) is left to whoever moved on.
_FINAL = {
    ErrorCode.none: "written",
    ErrorCode.invalid_producer_epoch: "stale: the producer has a newer epoch there",
    ErrorCode.transaction_coordinator_fenced: "stale: a newer coordinator wrote markers there",
    ErrorCode.unsupported_for_message_format: "the partition cannot hold markers",
    ErrorCode.unsupported_version: "the partition cannot hold markers",
}


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction's end, as written to each of its partitions."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int

    @property
    def kind(self) -> str:
        return "COMMIT" if self.commit else "ABORT"


async def write_local_marker(
    replicas: ReplicaManager,
    group_coordinator: GroupCoordinator,
    topic: str,
    index: int,
    marker: TxnMarker,
    timeout: float = WRITE_TIMEOUT_S,
) -> ErrorCode:
    """Append `marker` to a partition this broker leads and wait for its replication (acks=all,
    min.insync.replicas checked first, as for a produce); then, on `__consumer_offsets`, end the
    producer's transactional offsets in the group coordinator. Returns the Kafka error code."""
    partition = replicas.partitions.get((topic, index))
    if partition is None:
        return ErrorCode.unknown_topic_or_partition
    if (code := partition.replication_error()) != ErrorCode.none:
        return code
    epoch = partition.leader_epoch
    try:
        result = partition.write_marker(
            marker.producer_id,
            marker.producer_epoch,
            marker.commit,
            marker.coordinator_epoch,
            now_ms(),
        )
    except KafkaError as e:
        return e.code
    code = await partition.wait_for_replication(result.last_offset + 1, epoch, timeout)
    if code == ErrorCode.none and topic == group_coordinator.runtime.topic.name:
        group_coordinator.complete_transaction(index, marker.producer_id, marker.commit)
    return code


class MarkerTransport(Protocol):
    """Sends a WriteTxnMarkers call to a broker (gRPC; a fake in tests). Raises KafkaError or
    grpc.aio.AioRpcError when the call itself fails."""

    async def write_txn_markers(
        self, broker_id: int, request: replication_pb2.WriteTxnMarkersRequest
    ) -> replication_pb2.WriteTxnMarkersResponse: ...


class GrpcMarkerTransport:
    """`Transactions.WriteTxnMarkers` over the brokers' replication endpoints."""

    def __init__(self, peers: PeerChannels) -> None:
        self._peers = peers

    async def write_txn_markers(
        self, broker_id: int, request: replication_pb2.WriteTxnMarkersRequest
    ) -> replication_pb2.WriteTxnMarkersResponse:
        stub = self._peers.stub(broker_id, replication_pb2_grpc.TransactionsStub)
        response: replication_pb2.WriteTxnMarkersResponse = await rpc(
            stub.WriteTxnMarkers(request, timeout=_RPC_TIMEOUT_S)
        )
        return response


@dataclass(slots=True)
class _Queued:
    """A marker waiting for its leader's next WriteTxnMarkers call."""

    marker: TxnMarker
    partitions: list[TopicPartition]
    results: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    done: anyio.Event = field(default_factory=anyio.Event)


class TxnMarkerSender:
    """Writes the markers of ended transactions to their partitions' leaders (see module)."""

    def __init__(
        self,
        node_id: int,
        cache: MetadataCache,
        replicas: ReplicaManager,
        security: InternalSecurity,
        group_coordinator: GroupCoordinator,
        *,
        transport: MarkerTransport | None = None,
    ) -> None:
        """`transport` replaces the gRPC calls (tests)."""
        self._node_id = node_id
        self._cache = cache
        self._replicas = replicas
        self._group_coordinator = group_coordinator
        self._peers = PeerChannels(cache, security)
        self._transport = transport or GrpcMarkerTransport(self._peers)
        self._queues: dict[int, list[_Queued]] = {}  # broker id -> markers for its next call
        self._task_group: anyio.abc.TaskGroup | None = None

    async def run(self) -> None:
        """Hosts the calls to other brokers (without it, each caller makes its own)."""
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            try:
                await anyio.sleep_forever()
            finally:
                self._task_group = None

    async def close(self) -> None:
        await self._peers.close()

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> None:
        """Return once every partition has the marker, replicated, or no longer exists."""
        marker = TxnMarker(producer_id, producer_epoch, commit, coordinator_epoch)
        pending = list(dict.fromkeys(partitions))
        backoff = _INITIAL_BACKOFF_S
        attempt = 0
        while pending:
            attempt += 1
            results = await self._round(marker, pending)
            failed = {tp: code for tp, code in results.items() if code not in _FINAL}
            for tp, code in results.items():
                if code != ErrorCode.none and code in _FINAL:
                    log.warning(
                        "%s marker of producer %d (epoch %d) not written to %s-%d: %s",
                        marker.kind,
                        producer_id,
                        producer_epoch,
                        *tp,
                        _FINAL[code],
                    )
            pending = [tp for tp in pending if tp in failed]
            if not pending:
                return
            log.info(
                "%s markers of producer %d (epoch %d), attempt %d: %d partition(s) not written "
                "yet (%s); retrying in %.2fs",
                marker.kind,
                producer_id,
                producer_epoch,
                attempt,
                len(pending),
                _describe(failed),
                backoff,
            )
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    # -- one attempt ---------------------------------------------------------------------------

    async def _round(
        self, marker: TxnMarker, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """One attempt at every partition, grouped by current leader."""
        results: dict[TopicPartition, ErrorCode] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            leader = self._leader(tp)
            if isinstance(leader, ErrorCode):
                results[tp] = leader
            else:
                by_leader.setdefault(leader, []).append(tp)

        async def local(tp: TopicPartition) -> None:
            results[tp] = await write_local_marker(
                self._replicas, self._group_coordinator, tp[0], tp[1], marker
            )

        async def remote(leader: int, tps: list[TopicPartition]) -> None:
            results.update(await self._remote(leader, marker, tps))

        async with anyio.create_task_group() as tg:
            for leader, tps in by_leader.items():
                if leader == self._node_id:
                    for tp in tps:
                        tg.start_soon(local, tp)
                else:
                    tg.start_soon(remote, leader, tps)
        return results

    def _leader(self, tp: TopicPartition) -> int | ErrorCode:
        """The partition's leader, NONE when the partition no longer exists (nothing to
        write: Kafka drops such a partition from the transaction), or the retriable error."""
        topic, index = tp
        info = self._cache.topics.get(topic)
        if info is None or not 0 <= index < len(info.partitions):
            log.info("%s-%d no longer exists: it needs no transaction marker", topic, index)
            return ErrorCode.none
        leader = info.partitions[index].leader
        return ErrorCode.leader_not_available if leader < 0 else leader

    async def _remote(
        self, leader: int, marker: TxnMarker, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """Queue the marker for the leader's next call and wait for its answer."""
        queued = _Queued(marker, partitions)
        queue = self._queues.setdefault(leader, [])
        queue.append(queued)
        if len(queue) == 1:  # the first in line has the call made
            if self._task_group is not None:
                self._task_group.start_soon(self._flush, leader)
            else:
                await self._flush(leader)
        await queued.done.wait()
        return queued.results

    async def _flush(self, leader: int) -> None:
        """One WriteTxnMarkers call with every marker queued for `leader` by now."""
        await anyio.sleep(0)  # markers of transactions ending at the same time join the call
        batch = self._queues.pop(leader, [])
        request = replication_pb2.WriteTxnMarkersRequest(coordinator_id=self._node_id)
        for queued in batch:
            m = queued.marker
            out = request.markers.add(
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                commit=m.commit,
                coordinator_epoch=m.coordinator_epoch,
            )
            by_topic: dict[str, list[int]] = {}
            for topic, index in queued.partitions:
                by_topic.setdefault(topic, []).append(index)
            for topic, indexes in by_topic.items():
                out.topics.add(name=topic, partitions=indexes)
        try:
            response = await self._transport.write_txn_markers(leader, request)
            for queued, result in zip(batch, response.markers, strict=False):
                for p in result.partitions:
                    queued.results[p.topic, p.partition] = ErrorCode(p.error_code)
        except KafkaError as e:
            _fail(batch, e.code)
        except grpc.aio.AioRpcError as e:
            level = logging.WARNING if e.code() == grpc.StatusCode.UNAUTHENTICATED else logging.INFO
            log.log(
                level,
                "WriteTxnMarkers to broker %d failed: %s (%s)",
                leader,
                e.code().name,
                e.details(),
            )
            _fail(batch, ErrorCode.network_exception)
        except Exception:
            log.exception("WriteTxnMarkers to broker %d failed", leader)
            _fail(batch, ErrorCode.unknown_server_error)
        finally:
            for queued in batch:
                for tp in queued.partitions:  # a partition the answer left out: try again
                    queued.results.setdefault(tp, ErrorCode.unknown_server_error)
                queued.done.set()


def _fail(batch: list[_Queued], code: ErrorCode) -> None:
    for queued in batch:
        for tp in queued.partitions:
            queued.results[tp] = code


def _describe(failed: dict[TopicPartition, ErrorCode]) -> str:
    """ "t-0: NOT_LEADER_OR_FOLLOWER, ..." (the first few)."""
    items = [f"{t}-{p}: {code.name}" for (t, p), code in list(failed.items())[:5]]
    more = len(failed) - len(items)
    return ", ".join(items) + (f" and {more} more" if more > 0 else "")


class TxnRpcHandlers(replication_pb2_grpc.TransactionsServicer):
    """The partition leader's and the transaction coordinator's side of the `Transactions`
    RPCs, served on the replication port (`serve_replication(..., txn_handlers=)`)."""

    def __init__(
        self,
        txn_coordinator: TransactionCoordinator,
        replicas: ReplicaManager,
        group_coordinator: GroupCoordinator,
    ) -> None:
        self._txn_coordinator = txn_coordinator
        self._replicas = replicas
        self._group_coordinator = group_coordinator

    async def WriteTxnMarkers(
        self,
        request: replication_pb2.WriteTxnMarkersRequest,
        context: grpc.aio.ServicerContext,
    ) -> replication_pb2.WriteTxnMarkersResponse:
        """Write every marker to its partitions (all at once), each answered once replicated."""
        response = replication_pb2.WriteTxnMarkersResponse()
        writes: list[tuple[replication_pb2.TxnMarkerPartitionResult, TxnMarker, str, int]] = []
        for m in request.markers:
            marker = TxnMarker(m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch)
            result = response.markers.add(producer_id=m.producer_id)
            for topic in m.topics:
                for index in topic.partitions:
                    out = result.partitions.add(topic=topic.name, partition=index)
                    writes.append((out, marker, topic.name, index))

        async def write(
            out: replication_pb2.TxnMarkerPartitionResult, marker: TxnMarker, topic: str, index: int
        ) -> None:
            out.error_code = await write_local_marker(
                self._replicas, self._group_coordinator, topic, index, marker
            )

        async with anyio.create_task_group() as tg:
            for args in writes:
                tg.start_soon(write, *args)
        return response

    async def AddPartitionsToTxn(
        self,
        request: replication_pb2.AddPartitionsToTxnRequest,
        context: grpc.aio.ServicerContext,
    ) -> replication_pb2.AddPartitionsToTxnResponse:
        """KIP-890 verification (add=False) or TV2 implicit add (add=True) from a leader."""
        tp = (request.topic, request.partition)
        errors = await self._txn_coordinator.add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            [tp],
            verify_only=not request.add,
        )
        code = errors.get(tp, ErrorCode.unknown_server_error)
        return replication_pb2.AddPartitionsToTxnResponse(error_code=code)
