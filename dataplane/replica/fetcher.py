"""Follower side of replication: one fetch stream per leader broker (Kafka's replica fetcher).

The stream carries, for every partition this broker follows from that leader, its log end and
the epoch of its last batch; the leader answers with what follows, and the follower appends
it as stored. When the leader reports divergence (this log has batches of an epoch the leader
never had), the follower truncates to where the logs agree and fetches again.

The follower's log start follows the leader's (records deleted there by DeleteRecords or
retention go here too), and each fetch reports it: the leader's DeleteRecords waits for it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio
import grpc

from cluster.internal_security import InternalSecurity
from dataplane.log import LogError, UnexpectedAppendOffsetError
from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.errors import ErrorCode
from dataplane.replica import wire
from dataplane.replica.partition import Partition
from dataplane.replica.throttle import ReplicationThrottle
from proto import replication_pb2

log = logging.getLogger("rafka.fetcher")

_MAX_WAIT_MS = 500  # Kafka's replica.fetch.wait.max.ms
_PARTITION_MAX_BYTES = 1 << 20  # replica.fetch.max.bytes
_RESPONSE_MAX_BYTES = 10 << 20  # replica.fetch.response.max.bytes
_RETRY_S = 0.2


class ReplicaFetchers:
    """Assigns each followed partition to the fetcher of its current leader."""

    def __init__(
        self,
        cache: MetadataCache,
        node_id: int,
        broker_epoch: Callable[[], int],
        security: InternalSecurity,
        throttle: ReplicationThrottle,
    ) -> None:
        """`cache` gives the leaders' replication endpoints; `broker_epoch` the current one
        (it changes when the broker registers again), which every fetch quotes; `security`
        the credentials leaders require; `throttle` follower.replication.throttled.rate."""
        self._cache = cache
        self._node_id = node_id
        self._broker_epoch = broker_epoch
        self._security = security
        self._throttle = throttle
        self._fetchers: dict[int, LeaderFetcher] = {}
        self._task_group: anyio.abc.TaskGroup | None = None

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            for fetcher in self._fetchers.values():
                tg.start_soon(fetcher.run)
            await anyio.sleep_forever()

    def follow(self, partition: Partition) -> None:
        """Fetch `partition` from its current leader (and from no other)."""
        for leader, other in self._fetchers.items():
            if leader != partition.leader:
                other.remove(partition)
        fetcher = self._fetchers.get(partition.leader)
        if fetcher is None:
            fetcher = self._fetchers[partition.leader] = LeaderFetcher(
                self._cache,
                self._node_id,
                self._broker_epoch,
                partition.leader,
                self._security,
                self._throttle,
            )
            if self._task_group is not None:
                self._task_group.start_soon(fetcher.run)
        fetcher.add(partition)

    def unfollow(self, partition: Partition) -> None:
        for fetcher in self._fetchers.values():
            fetcher.remove(partition)


class LeaderFetcher:
    """Keeps one Replication.Fetch stream to a leader busy while it has partitions to fetch."""

    def __init__(
        self,
        cache: MetadataCache,
        node_id: int,
        broker_epoch: Callable[[], int],
        leader: int,
        security: InternalSecurity,
        throttle: ReplicationThrottle,
    ) -> None:
        self._cache = cache
        self._node_id = node_id
        self._broker_epoch = broker_epoch
        self.leader = leader
        self._security = security
        self._throttle = throttle
        self.partitions: dict[tuple[bytes, int], Partition] = {}
        self._changed = anyio.Event()

    def add(self, partition: Partition) -> None:
        self.partitions[(partition.topic_id, partition.index)] = partition
        self._changed.set()

    def remove(self, partition: Partition) -> None:
        self.partitions.pop((partition.topic_id, partition.index), None)

    async def run(self) -> None:
        while True:
            if not self.partitions:
                self._changed = anyio.Event()
                await self._changed.wait()
                continue
            info = self._cache.brokers.get(self.leader)
            if info is None or not info.replication_endpoint or info.fenced:
                await anyio.sleep(_RETRY_S)
                continue
            try:
                await self._stream(info.replication_endpoint)
            except grpc.aio.AioRpcError as e:
                refused = e.code() == grpc.StatusCode.UNAUTHENTICATED  # internal credentials
                log.log(
                    logging.WARNING if refused else logging.INFO,
                    "replication stream to broker %d (%s) failed: %s (%s); retrying",
                    self.leader,
                    info.replication_endpoint,
                    e.code().name,
                    e.details(),
                )
                await anyio.sleep(_RETRY_S)

    async def _stream(self, endpoint: str) -> None:
        async with self._security.channel(endpoint, wire.OPTIONS) as channel:
            call = wire.fetch_stream(channel)()
            try:
                while self.partitions:
                    request, sent = self._request()
                    if not request.partitions:  # all held back by the follower throttle
                        await anyio.sleep(min(self._throttle.delay_s(), _MAX_WAIT_MS / 1000))
                        continue
                    await call.write(request)
                    response = await call.read()
                    if response is grpc.aio.EOF:
                        return
                    message, batches = response
                    try:
                        applied = self._apply(message, batches, sent)
                    except LogError as e:
                        if e.code != ErrorCode.kafka_storage_error:
                            raise
                        # A log directory failed: the replica manager took its replicas off
                        # this fetcher; the others are fetched again.
                        log.warning("replica fetch from broker %d: %s", self.leader, e)
                        continue
                    if not applied:
                        await anyio.sleep(_RETRY_S)  # nothing usable: wait for new metadata
            finally:
                call.cancel()

    def _request(self) -> tuple[replication_pb2.FetchRequest, dict[tuple[bytes, int], int]]:
        """The next fetch, and the leader epoch each partition was fetched under."""
        request = replication_pb2.FetchRequest(
            replica_id=self._node_id,
            broker_epoch=self._broker_epoch(),
            max_wait_ms=_MAX_WAIT_MS,
            max_bytes=_RESPONSE_MAX_BYTES,
        )
        sent = {}
        for key, partition in self.partitions.items():
            in_sync = self._node_id in partition.isr
            if self._throttle.holds_back(partition.topic_id, partition.index, in_sync):
                continue
            request.partitions.add(
                topic_id=partition.topic_id,
                partition=partition.index,
                current_leader_epoch=partition.leader_epoch,
                fetch_offset=partition.log.log_end_offset,
                last_fetched_epoch=partition.log.latest_epoch,
                max_bytes=_PARTITION_MAX_BYTES,
                log_start_offset=partition.log.log_start_offset,
            )
            sent[key] = partition.leader_epoch
        return request, sent

    def _apply(
        self, response: replication_pb2.FetchResponse, batches: list[memoryview], sent: dict
    ) -> bool:
        """Apply a response; False if no partition made progress (all errors)."""
        progress = False
        for data, records in zip(response.partitions, batches, strict=True):
            key = (data.topic_id, data.partition)
            partition = self.partitions.get(key)
            if partition is None or partition.leader_epoch != sent.get(key):
                continue  # moved to another leader meanwhile: this answer is stale
            if data.error_code != ErrorCode.none:
                self._on_error(partition, data)
                continue
            progress = True
            if data.diverged:
                self._truncate_diverged(partition, data)
                continue
            if records:
                try:
                    partition.append_as_follower(records)
                    self._throttle.record(partition.topic_id, partition.index, len(records))
                except UnexpectedAppendOffsetError as e:
                    log.warning(
                        "%r: leader sent batches that do not continue our log: %s", partition, e
                    )
                    continue
            partition.follow_high_watermark(data.high_watermark)
            partition.follow_log_start(data.log_start_offset)
        return progress

    def _truncate_diverged(self, partition: Partition, data: replication_pb2.PartitionData) -> None:
        """Truncate to where both logs agree: the smaller of the two ends of the epoch."""
        ours = partition.log.end_offset_for_epoch(data.diverging_epoch)
        target = data.diverging_end_offset
        if data.diverging_epoch >= 0 and ours[0] >= 0:
            target = min(target, ours[1])
        target = min(target, partition.log.log_end_offset)
        log.info(
            "%r: log diverged from leader %d at epoch %d; truncating from %d to %d",
            partition,
            self.leader,
            data.diverging_epoch,
            partition.log.log_end_offset,
            target,
        )
        partition.truncate_to(target)

    def _on_error(self, partition: Partition, data: replication_pb2.PartitionData) -> None:
        code = ErrorCode(data.error_code)
        if code == ErrorCode.offset_out_of_range:
            if partition.log.log_end_offset < data.log_start_offset:
                log.info(
                    "%r: behind the leader's log start; restarting at %d",
                    partition,
                    data.log_start_offset,
                )
                partition.restart_at(data.log_start_offset)
            else:
                log.info(
                    "%r: ahead of the leader's log end; truncating to %d",
                    partition,
                    data.log_end_offset,
                )
                partition.truncate_to(data.log_end_offset)
        elif code == ErrorCode.stale_broker_epoch:
            log.warning(
                "%r: leader %d says our broker epoch is stale; waiting to re-register",
                partition,
                self.leader,
            )
        else:  # NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH: metadata will catch up
            log.debug("%r: fetch from %d: %s", partition, self.leader, code.name)
