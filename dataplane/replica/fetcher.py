"""Follower side of replication: one fetch stream per leader broker (Kafka's replica fetcher).

The stream carries, for every partition this broker follows from that leader, its log end and
the epoch of its last batch; the leader answers with what follows, and the follower appends
it as stored. When the leader reports divergence (this log has batches of an epoch the leader
never had), the follower truncates to where the logs agree and fetches again.

The follower's log start follows the leader's (records deleted there by DeleteRecords or
retention go here too), and each fetch reports it: the leader's DeleteRecords waits for it.

The stream is a fetch session (replication_session.py): once the leader keeps one, a request
carries only the partitions whose state changed (or that retry an unusable answer) and those
dropped, and the leader answers only the partitions with something new.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio
import grpc

from common.grpc_cancellation import rpc
from common.internal_security import InternalSecurity
from dataplane.log import LogError, UnexpectedAppendOffsetError
from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.errors import ErrorCode
from dataplane.replica import wire
from dataplane.replica.partition import Partition
from dataplane.replica.replication_session import FetchState, FollowerSession, Key
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
        self.partitions: dict[Key, Partition] = {}
        self._changed = anyio.Event()
        self._session: FollowerSession | None = None  # of the open stream
        self._refused = False  # the leader's last answer: our broker epoch is stale

    def add(self, partition: Partition) -> None:
        """Fetch `partition` here (again: its epoch may have changed)."""
        key = (partition.topic_id, partition.index)
        self.partitions[key] = partition
        if self._session is not None:
            self._session.changed(key)
        self._changed.set()

    def remove(self, partition: Partition) -> None:
        key = (partition.topic_id, partition.index)
        if self.partitions.pop(key, None) is not None and self._session is not None:
            self._session.changed(key)

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
            session = self._session = FollowerSession()  # a new stream: a new session
            try:
                while self.partitions:
                    request = self._request(session)
                    if not request.incremental and not request.partitions:
                        # all held back by the follower throttle (and no session to wait in)
                        await anyio.sleep(min(self._throttle.delay_s(), _MAX_WAIT_MS / 1000))
                        continue
                    await rpc(call.write(request))
                    response = await rpc(call.read())
                    if response is grpc.aio.EOF:
                        return
                    message, batches = response
                    if message.error_code == ErrorCode.stale_broker_epoch:
                        self._on_refused(session)
                        await anyio.sleep(_RETRY_S)
                        continue
                    self._refused = False
                    session.confirm(message.incremental_supported)
                    if not self._apply(message, batches, session) and not session.incremental:
                        await anyio.sleep(_RETRY_S)  # nothing usable: wait for new metadata
            finally:
                self._session = None
                call.cancel()

    def _on_refused(self, session: FollowerSession) -> None:
        """The leader refused our broker epoch and dropped the session."""
        session.reset()
        if not self._refused:
            self._refused = True
            log.warning(
                "leader %d says our broker epoch is stale; waiting to re-register", self.leader
            )

    def _state(self, key: Key) -> FetchState | None:
        """What a fetch says of the partition (None: not fetched from this leader)."""
        partition = self.partitions.get(key)
        if partition is None:
            return None
        plog = partition.log
        return FetchState(
            partition.leader_epoch,
            plog.log_end_offset,
            plog.latest_epoch,
            plog.log_start_offset,
            _PARTITION_MAX_BYTES,
        )

    def _held_back(self, key: Key) -> bool:
        partition = self.partitions[key]
        in_sync = self._node_id in partition.isr
        return self._throttle.holds_back(partition.topic_id, partition.index, in_sync)

    def _request(self, session: FollowerSession) -> replication_pb2.FetchRequest:
        """The next fetch: every partition (a full request) or the session's changes."""
        send, removed, full = session.next_request(
            self.partitions, self._state, self._held_back, time.monotonic()
        )
        max_wait_ms = _MAX_WAIT_MS
        if session.holds_back:  # come back when the follower throttle may let them go
            max_wait_ms = max(1, min(max_wait_ms, int(self._throttle.delay_s() * 1000)))
        request = replication_pb2.FetchRequest(
            replica_id=self._node_id,
            broker_epoch=self._broker_epoch(),
            max_wait_ms=max_wait_ms,
            max_bytes=_RESPONSE_MAX_BYTES,
            incremental=not full,
        )
        for (topic_id, index), state in send:
            request.partitions.add(
                topic_id=topic_id,
                partition=index,
                current_leader_epoch=state.leader_epoch,
                fetch_offset=state.fetch_offset,
                last_fetched_epoch=state.last_fetched_epoch,
                max_bytes=state.max_bytes,
                log_start_offset=state.log_start_offset,
            )
        for topic_id, index in removed:
            request.removed.add(topic_id=topic_id, partition=index)
        return request

    def _apply(
        self,
        response: replication_pb2.FetchResponse,
        batches: list[memoryview],
        session: FollowerSession,
    ) -> bool:
        """Apply a response; False if no partition made progress (all errors). A partition
        whose answer left its state as it was (an error, records that do not continue the
        log) is sent again after a pause: the leader answers it only when asked or when it
        changes there."""
        progress = False
        for data, records in zip(response.partitions, batches, strict=True):
            key = (data.topic_id, data.partition)
            partition = self.partitions.get(key)
            if partition is None or partition.leader_epoch != session.expected_epoch(key):
                session.changed(key)  # moved meanwhile: this answer is stale
                continue
            before = self._state(key)
            try:
                progress = self._apply_partition(partition, data, records) or progress
            except LogError as e:
                if e.code != ErrorCode.kafka_storage_error:
                    raise
                # A log directory failed: the replica manager takes its replicas off this
                # fetcher; the others go on.
                log.warning("replica fetch of %r from broker %d: %s", partition, self.leader, e)
            if (data.error_code or data.diverged or records) and self._state(key) == before:
                session.retry(key, time.monotonic() + _RETRY_S)
            else:
                session.changed(key)
        return progress

    def _apply_partition(
        self, partition: Partition, data: replication_pb2.PartitionData, records: memoryview
    ) -> bool:
        """Apply one partition's answer; False for an error."""
        if data.error_code != ErrorCode.none:
            self._on_error(partition, data)
            return False
        if data.diverged:
            self._truncate_diverged(partition, data)
            return True
        if records:
            try:
                partition.append_as_follower(records)
                self._throttle.record(partition.topic_id, partition.index, len(records))
            except UnexpectedAppendOffsetError as e:
                log.warning(
                    "%r: leader sent batches that do not continue our log: %s", partition, e
                )
                return True
        partition.follow_high_watermark(data.high_watermark)
        partition.follow_log_start(data.log_start_offset)
        return True

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
