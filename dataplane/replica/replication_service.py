"""Leader side of replication: answers followers' fetch streams (proto/replication.proto).

Each fetch tells the leader how far the follower has got (which moves the high watermark and
the follower's ISR standing); the answer carries the batches that follow, exactly as stored,
or the point where the follower's log diverged from ours after a leader change.

The same server, behind the same internal credentials, serves the brokers' transaction RPCs
(`Transactions`: WriteTxnMarkers, AddPartitionsToTxn; see dataplane/transaction/markers.py)
and their share coordinator calls (`ShareState`; see dataplane/share/state_rpc.py).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import anyio
import grpc

from cluster.internal_security import InternalSecurity
from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica import wire
from dataplane.replica.manager import ReplicaManager
from dataplane.replica.partition import Partition, now_ms
from dataplane.replica.throttle import ReplicationThrottle
from proto import replication_pb2, replication_pb2_grpc

log = logging.getLogger("rafka.replication")

Response = tuple[replication_pb2.FetchResponse, list[bytes]]  # see wire.py


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
        async for request in request_iterator:
            yield await self._fetch(request)

    async def _fetch(self, req: replication_pb2.FetchRequest) -> Response:
        stale = self._stale_broker_epoch(req)
        response, partitions, size, held = self._read(req, stale, record=True)
        if size or not (partitions or held) or req.max_wait_ms <= 0:
            return response
        wait_s = req.max_wait_ms / 1000
        if held:  # throttled partitions may go again once the leader throttle allows
            wait_s = min(wait_s, self._throttle.delay_s())
        event = anyio.Event()  # long poll: park until one of the partitions gets an append
        for partition in partitions:
            partition.watch_appends(event)
        with anyio.move_on_after(wait_s):
            await event.wait()
        for partition in partitions:
            partition.unwatch_appends(event)
        return self._read(req, stale, record=False)[0]

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

    def _read(
        self, req: replication_pb2.FetchRequest, stale: bool, record: bool
    ) -> tuple[Response, list[Partition], int, bool]:
        """One pass over the requested partitions; `record` the follower's progress once.
        Also returns whether the leader throttle held back a partition (sent without records)."""
        response = replication_pb2.FetchResponse()
        held = False
        batches: list[bytes] = []
        watched: list[Partition] = []
        budget, size, now = req.max_bytes, 0, now_ms()
        for p in req.partitions:
            out = response.partitions.add(topic_id=p.topic_id, partition=p.partition)
            try:
                if stale:
                    raise KafkaError(ErrorCode.stale_broker_epoch)
                partition = self._leader(p, req.replica_id)
                if record:
                    partition.record_follower_fetch(
                        req.replica_id, p.fetch_offset, now, p.log_start_offset
                    )
                out.high_watermark = partition.high_watermark
                out.log_start_offset = partition.log.log_start_offset
                out.log_end_offset = partition.log.log_end_offset
                if self._diverged(partition, p, out):
                    continue
                in_sync = req.replica_id in partition.isr
                if self._throttle.holds_back(p.topic_id, p.partition, in_sync):
                    held = True
                    continue
                records = partition.log.read(
                    p.fetch_offset, min(p.max_bytes, budget), out.log_end_offset, size == 0
                )
            except KafkaError as e:  # includes the log's OFFSET_OUT_OF_RANGE
                out.error_code = e.code
                continue
            self._throttle.record(p.topic_id, p.partition, len(records))
            out.records_size = len(records)
            batches.append(records)
            size += len(records)
            budget = max(0, budget - len(records))
            watched.append(partition)
        return (response, batches), watched, size, held

    def _leader(self, p: replication_pb2.FetchPartition, replica_id: int) -> Partition:
        info = self._cache.topics_by_id.get(p.topic_id)
        partition = info and self._replicas.partitions.get((info.name, p.partition))
        if not partition:
            raise KafkaError(ErrorCode.unknown_topic_id)
        partition.check_leader(-1)
        if replica_id not in partition.replicas:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        if p.current_leader_epoch != partition.leader_epoch:
            log.warning(
                "%r: replica %d fetches for leader epoch %d, current is %d; refused",
                partition,
                replica_id,
                p.current_leader_epoch,
                partition.leader_epoch,
            )
        partition.check_epoch(p.current_leader_epoch)
        return partition

    @staticmethod
    def _diverged(
        partition: Partition, p: replication_pb2.FetchPartition, out: replication_pb2.PartitionData
    ) -> bool:
        """KIP-320 through fetch: does the follower's last epoch end where ours does?"""
        if p.last_fetched_epoch < 0:
            return False
        epoch, end = partition.log.end_offset_for_epoch(p.last_fetched_epoch)
        if epoch == p.last_fetched_epoch and end >= p.fetch_offset:
            return False
        out.diverged = True
        out.diverging_epoch = epoch
        out.diverging_end_offset = end if epoch >= 0 else partition.log.log_start_offset
        return True


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
