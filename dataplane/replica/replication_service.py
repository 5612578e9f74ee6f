"""Leader side of replication: answers followers' fetch streams (proto/replication.proto).

Each fetch tells the leader how far the follower has got (which moves the high watermark and
the follower's ISR standing); the answer carries the batches that follow, exactly as stored,
or the point where the follower's log diverged from ours after a leader change. Each stream is a
fetch session (replication_session.py): only changed partitions come in, only partitions with
something new go out, and the long poll waits on the session's one event.

The same server, behind the same internal credentials, serves the brokers' transaction RPCs
(`Transactions`: WriteTxnMarkers, AddPartitionsToTxn; see dataplane/transaction/markers.py)
and their share coordinator calls (`ShareState`; see dataplane/share/state_rpc.py).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio
import grpc

from common.internal_security import InternalSecurity
from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica import wire
from dataplane.replica.manager import ReplicaManager
from dataplane.replica.partition import Partition, now_ms
from dataplane.replica.replication_session import FetchState, Key, LeaderSession, SessionPartition
from dataplane.replica.throttle import ReplicationThrottle
from proto import replication_pb2, replication_pb2_grpc

log = logging.getLogger("rafka.replication")

Response = tuple[replication_pb2.FetchResponse, list[bytes]]  # see wire.py


def _state(p: replication_pb2.FetchPartition) -> FetchState:
    return FetchState(
        p.current_leader_epoch,
        p.fetch_offset,
        p.last_fetched_epoch,
        p.log_start_offset,
        p.max_bytes,
    )


@dataclass
class _Answer:
    """A response being built, and what it means for the session once sent (`commit`)."""

    message: replication_pb2.FetchResponse
    batches: list[bytes] = field(default_factory=list)
    size: int = 0
    urgent: bool = False  # send it now rather than at the end of the long poll
    held: bool = False  # the leader throttle held back records
    sent: list[tuple[Key, replication_pb2.PartitionData, bool]] = field(default_factory=list)
    settled: list[Key] = field(default_factory=list)  # nothing new

    def add(
        self,
        key: Key,
        out: replication_pb2.PartitionData,
        records: bytes,
        urgent: bool,
        keep: bool = False,
    ) -> None:
        self.message.partitions.append(out)
        self.batches.append(records)
        self.size += len(records)
        self.urgent = self.urgent or urgent
        self.sent.append((key, out, keep))

    def commit(self, session: LeaderSession) -> Response:
        for key, out, keep in self.sent:
            if key in session.entries:
                session.answered(
                    key, out.high_watermark, out.log_start_offset, out.log_end_offset, keep
                )
        for key in self.settled:
            session.settled(key)
        return self.message, self.batches


class ReplicationService:
    def __init__(self, cache: MetadataCache, replicas: ReplicaManager) -> None:
        """`cache` gives the followers' broker epochs and topic ids, `replicas` the logs."""
        self._cache = cache
        self._replicas = replicas
        self._throttle = ReplicationThrottle("leader", lambda: replicas.config, cache)

    async def fetch(
        self,
        request_iterator: AsyncIterator[replication_pb2.FetchRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[Response]:
        """One follower's stream, and its fetch session (replication_session.py)."""
        session: LeaderSession | None = None
        try:
            async for request in request_iterator:
                if session is None or session.replica_id != request.replica_id:
                    if session is not None:
                        session.close()
                    session = LeaderSession(request.replica_id)
                yield await self._fetch(request, session)
        finally:
            if session is not None:
                session.close()

    async def _fetch(self, req: replication_pb2.FetchRequest, session: LeaderSession) -> Response:
        if self._stale_broker_epoch(req):
            session.close()
            return self._refused(req)
        full = not req.incremental
        session.receive(
            (
                ((p.topic_id, p.partition), _state(p))
                for p in req.partitions  # the follower's new states
            ),
            ((k.topic_id, k.partition) for k in req.removed),
            full,
            now_ms(),
            req.broker_epoch,
        )
        answer = self._answer(session, full, req.max_bytes)
        if answer.urgent or req.max_wait_ms <= 0:
            return answer.commit(session)
        wait_s = req.max_wait_ms / 1000
        if answer.held:  # throttled partitions may go again once the leader throttle allows
            wait_s = min(wait_s, self._throttle.delay_s())
        with anyio.move_on_after(wait_s):  # long poll: until an urgent change of the session
            await session.event.wait()
        return self._answer(session, full, req.max_bytes).commit(session)

    def _refused(self, req: replication_pb2.FetchRequest) -> Response:
        response = replication_pb2.FetchResponse(error_code=ErrorCode.stale_broker_epoch)
        for p in req.partitions:  # older followers read it per partition
            response.partitions.add(
                topic_id=p.topic_id, partition=p.partition, error_code=ErrorCode.stale_broker_epoch
            )
        return response, []

    def _stale_broker_epoch(self, req: replication_pb2.FetchRequest) -> bool:
        known = self._cache.brokers.get(req.replica_id)
        if known is not None and known.epoch == req.broker_epoch:
            return False
        log.warning(
            "refusing a replica fetch from broker %d with broker epoch %d (current: %s): "
            "a stale process; it must register again",
            req.replica_id,
            req.broker_epoch,
            known.epoch if known else "not registered",
        )
        return True

    def _answer(self, session: LeaderSession, full: bool, max_bytes: int) -> _Answer:
        """One pass over the partitions to answer (the dirty ones; all of them when `full`).
        Records, divergences, log start moves and (in a session) errors are urgent: they end
        the long poll; a moved high watermark waits for it."""
        answer = _Answer(replication_pb2.FetchResponse(incremental_supported=True))
        budget, replica_id = max_bytes, session.replica_id
        for key in session.to_evaluate(full):
            entry = session.entries[key]
            out = replication_pb2.PartitionData(topic_id=key[0], partition=key[1])
            state = entry.state
            try:
                partition = self._leader(key, entry, session)
                if entry.fresh or not partition.has_standing_fetch(replica_id, session):
                    divergence = partition.record_follower_fetch(
                        replica_id,
                        state.fetch_offset,
                        session.last_request_ms,
                        state.log_start_offset,
                        session,
                        last_fetched_epoch=state.last_fetched_epoch,
                        broker_epoch=session.broker_epoch,
                    )
                    entry.fresh = False
                else:
                    divergence = partition.divergence(state.fetch_offset, state.last_fetched_epoch)
                session.set_in_sync(key, replica_id in partition.isr)
                out.high_watermark = partition.high_watermark
                out.log_start_offset = partition.log.log_start_offset
                out.log_end_offset = partition.log.log_end_offset
                if divergence is not None:  # KIP-320: the follower truncates, then fetches
                    out.diverged = True
                    out.diverging_epoch, out.diverging_end_offset = divergence
                    answer.add(key, out, b"", urgent=True)
                    continue
                behind = state.fetch_offset < out.log_end_offset
                if behind and self._throttle.holds_back(
                    key[0], key[1], replica_id in partition.isr
                ):
                    answer.held = True
                    records = b""
                elif behind or state.fetch_offset > out.log_end_offset:
                    records = partition.log.read(
                        state.fetch_offset,
                        min(state.max_bytes, budget),
                        out.log_end_offset,
                        answer.size == 0,
                    )
                else:
                    records = b""
            except KafkaError as e:  # includes the log's OFFSET_OUT_OF_RANGE
                out.error_code = e.code
                answer.add(key, out, b"", urgent=not full)
                continue
            if records:
                self._throttle.record(key[0], key[1], len(records))
                out.records_size = len(records)
                budget = max(0, budget - len(records))
            moved = out.log_start_offset != entry.log_start_offset
            if records or moved or full or entry.answer:
                urgent = bool(records) or moved
                answer.add(key, out, records, urgent, keep=behind and not records)
            elif out.high_watermark != entry.high_watermark:
                answer.add(key, out, b"", urgent=False, keep=behind)
            elif not behind:  # (behind: held back or out of room; stays dirty)
                answer.settled.append(key)
        return answer

    def _leader(self, key: Key, entry: SessionPartition, session: LeaderSession) -> Partition:
        """The leader's replica of a session partition, subscribed to, that the follower's
        state may fetch from (else the `KafkaError` to answer)."""
        info = self._cache.topics_by_id.get(key[0])
        partition = info and self._replicas.partitions.get((info.name, key[1]))
        session.bind(entry, partition or None)
        if not partition:
            raise KafkaError(ErrorCode.unknown_topic_id)
        partition.check_leader(-1)
        replica_id, epoch = session.replica_id, entry.state.leader_epoch
        if replica_id not in partition.replicas:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        if epoch != partition.leader_epoch:
            log.warning(
                "%r: replica %d fetches for leader epoch %d, current is %d; refused",
                partition,
                replica_id,
                epoch,
                partition.leader_epoch,
            )
        partition.check_epoch(epoch)
        return partition


async def serve_replication(
    cache: MetadataCache,
    replicas: ReplicaManager,
    address: str,
    security: InternalSecurity,
    txn_handlers: replication_pb2_grpc.TransactionsServicer | None = None,
    share_state_handlers: replication_pb2_grpc.ShareStateServicer | None = None,
) -> grpc.aio.Server:
    """Serve the followers of the cluster, and no one else (``security``); with
    ``txn_handlers``, the other brokers' transaction RPCs too; with ``share_state_handlers``,
    their share coordinator calls (`ShareState`)."""
    server = grpc.aio.server(
        options=wire.OPTIONS, interceptors=security.server_interceptors(asynchronous=True)
    )
    service = ReplicationService(cache, replicas)
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "rafka.replication.Replication", {"Fetch": wire.method_handler(service.fetch)}
            ),
        )
    )
    if txn_handlers is not None:
        replication_pb2_grpc.add_TransactionsServicer_to_server(txn_handlers, server)
    if share_state_handlers is not None:
        replication_pb2_grpc.add_ShareStateServicer_to_server(share_state_handlers, server)
    if security.add_port(server, address) == 0:
        raise OSError(f"cannot bind the replication listener {address}: is the port in use?")
    await server.start()
    log.info("serving replication on %s, secured by %s", address, security.describe())
    return server
