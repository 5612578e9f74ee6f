"""The share coordinator (KIP-932): the durable state of share-partitions in the internal topic
`__share_group_state`, on the leaders of its partitions (a `Shard` kind of the
CoordinatorRuntime, as groups are on `__consumer_offsets`).

A share-partition ("group:topicId:partition") hashes to one partition of the topic; that
partition's leader keeps every state hashed to it in memory, rebuilt from the partition when
it becomes leader. Every change is a ShareSnapshot record appended there and replicated
(min.insync.replicas, acks=all) before the caller hears of it, so a failover loses nothing a
caller was told is done. Compaction keeps the last record of each share-partition.

Fencing: the state remembers the leader epoch of the share-partition's leader that last read
or wrote it. A read with a newer epoch claims it (written like any change, so the claim
survives a failover of the coordinator); a write from an older epoch is FENCED_LEADER_EPOCH (a
deposed leader must not overwrite its successor's acknowledgements), a write of an older state
epoch FENCED_STATE_EPOCH (the state was re-initialised by AlterShareGroupOffsets or
DeleteShareGroupOffsets meanwhile).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dataplane.coordinator.base import map_append_error
from dataplane.coordinator.runtime import CoordinatorRuntime
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.share.model import DeliveryState, SharePartitionKey, ShareState
from dataplane.share.state_record_schemas import ShareSnapshotValue, ShareUpdateValue
from dataplane.share.state_records import (
    CorruptRecord,
    apply_update,
    decode_record,
    snapshot_key,
    snapshot_value,
    state_batches,
    update_key,
)

if TYPE_CHECKING:
    from dataplane.coordinator.runtime import InternalTopic
    from dataplane.log.records import Record
    from dataplane.replica.manager import ReplicaManager

log = logging.getLogger("rafka.share.coordinator")

_READ_TIMEOUT_S = 30.0  # how long a read waits for the state it returns to be replicated
NO_LEADER_EPOCH = -1  # a read that claims no leader epoch
UNKNOWN_START_OFFSET = -1  # initialised without a start offset: the leader resolves it


@dataclass(slots=True)
class StateEntry:
    """The state of one share-partition and what its next snapshot record carries."""

    key: SharePartitionKey
    state: ShareState
    snapshot_epoch: int
    create_timestamp: int
    write_timestamp: int
    end_offset: int  # past the share-partition's last record: replicated before it is served


class ShareStateShard:
    """The states of one `__share_group_state` partition while this broker leads it at
    `leader_epoch` (its replay keeps them current, at load time and after each write)."""

    def __init__(self, partition_index: int, leader_epoch: int) -> None:
        self.partition_index = partition_index
        self.leader_epoch = leader_epoch
        self.states: dict[str, StateEntry] = {}
        self.loaded = False
        self.unloaded = False
        self.skipped_records = 0

    def replay(self, record: Record) -> None:
        try:
            decoded = decode_record(record.key, record.value)
            if decoded is None:
                self._skip(record, "an unknown record type (written by a newer broker?)")
                return
            ck = decoded.key.coordinator_key()
            value = decoded.value
            if value is None:
                self.states.pop(ck, None)
            elif isinstance(value, ShareSnapshotValue):
                state = ShareState(
                    value.state_epoch,
                    value.leader_epoch,
                    value.start_offset,
                    state_batches(value.state_batches),
                )
                self.states[ck] = StateEntry(
                    decoded.key,
                    state,
                    value.snapshot_epoch,
                    value.create_timestamp,
                    value.write_timestamp,
                    record.offset + 1,
                )
            else:
                self._replay_update(decoded.key, value, record)
        except CorruptRecord as e:  # UnknownVersion included
            self._skip(record, f"corrupt: {e}")

    def _replay_update(
        self, key: SharePartitionKey, value: ShareUpdateValue, record: Record
    ) -> None:
        ck = key.coordinator_key()
        entry = self.states.get(ck)
        if entry is None:
            base = ShareState(0, value.leader_epoch, max(value.start_offset, 0), ())
            entry = StateEntry(key, base, value.snapshot_epoch, record.timestamp, 0, 0)
            self.states[ck] = entry
        entry.state = apply_update(entry.state, value)
        entry.write_timestamp = record.timestamp
        entry.end_offset = record.offset + 1

    def _skip(self, record: Record, why: str) -> None:
        self.skipped_records += 1
        log.error(
            "__share_group_state-%d: skipped the record at offset %d: %s",
            self.partition_index,
            record.offset,
            why,
        )

    def on_loaded(self) -> None:
        self.loaded = True
        log.debug(
            "__share_group_state-%d: coordinating %d share-partition states",
            self.partition_index,
            len(self.states),
        )

    def on_unloaded(self) -> None:
        self.unloaded = True


class ShareCoordinator:
    """The share coordinator of this broker: the operations of the `Persister` on the keys
    whose `__share_group_state` partition this broker leads. Raises KafkaError
    NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE (a write that
    could not be replicated) for the caller to find the coordinator again and retry."""

    def __init__(self, replicas: ReplicaManager, topic: InternalTopic) -> None:
        self._replicas = replicas
        self.topic = topic
        self.runtime: CoordinatorRuntime[ShareStateShard] = CoordinatorRuntime(
            replicas, topic, self._new_shard
        )

    def _new_shard(self, index: int) -> ShareStateShard:
        partition = self._replicas.partitions.get((self.topic.name, index))
        return ShareStateShard(index, partition.leader_epoch if partition is not None else 0)

    async def run(self) -> None:
        await self.runtime.run()

    # -- the operations -----------------------------------------------------------------------

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> ShareState | None:
        """The state (None: never initialised); a newer `leader_epoch` is claimed first."""
        shard, entry = self._entry(key)
        if entry is None:
            return None
        stored = entry.state.leader_epoch
        if leader_epoch != NO_LEADER_EPOCH and leader_epoch < stored:
            raise self._fenced_leader(key, "read", leader_epoch, stored)
        if leader_epoch > stored:
            state = entry.state
            claimed = ShareState(state.state_epoch, leader_epoch, state.start_offset, state.batches)
            return await self._put(shard, key, claimed, entry)
        await self._replicated(shard, key, entry)
        return entry.state

    async def write(self, key: SharePartitionKey, state: ShareState) -> None:
        """Replace the state, unless the writer is fenced (see the module)."""
        _validate(key, state)
        shard, entry = self._entry(key)
        if entry is not None:
            stored = entry.state
            if state.leader_epoch < stored.leader_epoch:
                raise self._fenced_leader(key, "write", state.leader_epoch, stored.leader_epoch)
            if state.state_epoch < stored.state_epoch:
                log.info(
                    "share state %s: a write of state epoch %d fenced, the state is at epoch %d "
                    "(its offsets were altered or deleted); the share-partition re-reads it",
                    key.coordinator_key(),
                    state.state_epoch,
                    stored.state_epoch,
                )
                raise KafkaError(
                    ErrorCode.fenced_state_epoch,
                    f"state epoch {state.state_epoch} is older than {stored.state_epoch}",
                )
        await self._put(shard, key, state, entry)

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> ShareState:
        """A fresh state at `start_offset` (UNKNOWN_START_OFFSET: the leader resolves it by
        share.auto.offset.reset), one state epoch above the old one; the leader epoch stays,
        so a deposed leader remains fenced (a first state is at leader epoch 0, as Kafka's
        ShareGroupOffset.fromRequest)."""
        if start_offset < UNKNOWN_START_OFFSET:
            raise KafkaError(ErrorCode.invalid_request, f"start offset {start_offset}")
        shard, entry = self._entry(key)
        if entry is None:
            state = ShareState(0, 0, start_offset, ())
        else:
            old = entry.state
            state = ShareState(old.state_epoch + 1, old.leader_epoch, start_offset, ())
        return await self._put(shard, key, state, entry, fresh=True)

    async def delete(self, key: SharePartitionKey) -> None:
        """Forget the state: tombstones of both of its keys (Kafka's deleteState)."""
        _, entry = self._entry(key)
        if entry is None:
            return
        ck = key.coordinator_key()
        records: list[tuple[bytes, bytes | None]] = [(snapshot_key(key), None)]
        records.append((update_key(key), None))
        try:
            await self.runtime.append(ck, records)
        except KafkaError as e:
            raise KafkaError(map_append_error(e.code), e.message) from None
        log.info("share state %s deleted", ck)

    async def summary(self, key: SharePartitionKey) -> ShareState | None:
        """The state, claiming nothing."""
        shard, entry = self._entry(key)
        if entry is None:
            return None
        await self._replicated(shard, key, entry)
        return entry.state

    # -- helpers ------------------------------------------------------------------------------

    def _entry(self, key: SharePartitionKey) -> tuple[ShareStateShard, StateEntry | None]:
        shard = self.runtime.shard(key.coordinator_key())
        return shard, shard.states.get(key.coordinator_key())

    async def _put(
        self,
        shard: ShareStateShard,
        key: SharePartitionKey,
        state: ShareState,
        old: StateEntry | None,
        fresh: bool = False,
    ) -> ShareState:
        """Append the state's snapshot (the shard applies it now) and wait for replication;
        `fresh`: a new state (its create timestamp is now)."""
        now = time.time_ns() // 1_000_000
        snapshot_epoch = 0 if old is None else old.snapshot_epoch + 1
        created = now if old is None or fresh else old.create_timestamp
        record = (snapshot_key(key), snapshot_value(state, snapshot_epoch, created, now))
        try:
            await self.runtime.append(key.coordinator_key(), [record])
        except KafkaError as e:
            raise KafkaError(map_append_error(e.code), e.message) from None
        return state

    async def _replicated(
        self, shard: ShareStateShard, key: SharePartitionKey, entry: StateEntry
    ) -> None:
        """Wait until the entry's last record is replicated: a state a failover could still
        lose is never served."""
        partition = self.runtime.partition(key.coordinator_key())
        if partition is None or shard.unloaded:
            raise KafkaError(ErrorCode.not_coordinator)
        if partition.high_watermark >= entry.end_offset:
            return
        code = await partition.wait_for_replication(
            entry.end_offset, shard.leader_epoch, _READ_TIMEOUT_S
        )
        if code != ErrorCode.none:
            raise KafkaError(map_append_error(code))

    @staticmethod
    def _fenced_leader(
        key: SharePartitionKey, operation: str, epoch: int, stored: int
    ) -> KafkaError:
        log.info(
            "share state %s: a %s from leader epoch %d fenced, a newer leader (epoch %d) owns "
            "the share-partition",
            key.coordinator_key(),
            operation,
            epoch,
            stored,
        )
        return KafkaError(
            ErrorCode.fenced_leader_epoch, f"leader epoch {epoch} is older than {stored}"
        )


def _validate(key: SharePartitionKey, state: ShareState) -> None:
    """INVALID_REQUEST for a state no share-partition could have written."""
    problem = None
    if state.start_offset < UNKNOWN_START_OFFSET:
        problem = f"start offset {state.start_offset}"
    last = -1
    for b in sorted(state.batches, key=lambda b: b.first_offset):
        if b.first_offset > b.last_offset or b.first_offset <= last or b.delivery_count < 0:
            problem = f"state batch {b} is empty, overlaps another or has a negative count"
            break
        if b.delivery_state == DeliveryState.ACQUIRED:
            problem = f"state batch {b}: an acquisition is not durable (write it AVAILABLE)"
            break
        last = b.last_offset
    if problem is not None:
        log.warning("share state %s: refused a write: %s", key.coordinator_key(), problem)
        raise KafkaError(ErrorCode.invalid_request, problem)
