"""The share coordinator on a real `__share_group_state` partition: reads that claim a leader
epoch, writes fenced by an older leader or state epoch, re-initialisation, deletion, and a new
leader's load of the partition rebuilding the same states (the claims included)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from dataplane.coordinator.runtime import InternalTopic, _Loaded
from dataplane.log import LogConfig, PartitionLog, StateStore
from dataplane.log.records import Record
from dataplane.metadata_cache import PartitionInfo
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.replica.meta_lease import MetaLease
from dataplane.replica.partition import Partition
from dataplane.replica.producer_state import ProducerStateManager
from dataplane.share.model import DeliveryState, SharePartitionKey, ShareState, StateBatch
from dataplane.share.state_coordinator import ShareCoordinator, ShareStateShard
from dataplane.share.state_records import snapshot_key, snapshot_value

E = ErrorCode
ME = 1
TOPIC = "__share_group_state"
KEY = SharePartitionKey("g", uuid.UUID(int=1), 0)
OTHER = SharePartitionKey("g", uuid.UUID(int=2), 5)
ACK = DeliveryState.ACKNOWLEDGED


class Broker:
    """One broker leading the only partition of `__share_group_state`."""

    def __init__(self, directory: Path, store: StateStore, leader_epoch: int = 1) -> None:
        plog = PartitionLog.open(directory, LogConfig(), store, directory.name)
        producers = ProducerStateManager.load(plog)
        self.partition = Partition(TOPIC, b"\x03" * 16, 0, plog, producers, ME, _no_isr)
        self.partition.update(PartitionInfo(0, (ME,), (ME,), ME, leader_epoch, 1))
        replicas = SimpleNamespace(
            leadership_listeners=[],
            partitions={(TOPIC, 0): self.partition},
            meta_lease=MetaLease(9000, 2000),
        )
        cache = SimpleNamespace(topics={}, topic_listeners=[])
        topic = InternalTopic(cache, _no_create, TOPIC, 1, 1, {})  # type: ignore[arg-type]
        self.coordinator = ShareCoordinator(replicas, topic)  # type: ignore[arg-type]
        self.shard = self.coordinator._new_shard(0)
        self.loaded = _Loaded(self.shard, self.partition.leader_epoch)
        self.coordinator.runtime._shards[0] = self.loaded

    async def load(self) -> None:
        await self.coordinator.runtime._load(self.partition, self.loaded)  # type: ignore[arg-type]


def _no_isr(partition: Partition, isr: tuple[int, ...]) -> None:
    raise AssertionError("no ISR change expected")


async def _no_create(topics: object) -> list[object]:
    raise AssertionError("no topic creation expected")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "state")
    yield s
    s.close()


async def _code(call: object) -> ErrorCode:
    try:
        await call  # type: ignore[misc]
    except KafkaError as e:
        return e.code
    return E.none


def test_fencing_and_reload(tmp_path: Path, store: StateStore) -> None:
    broker = Broker(tmp_path / "state-0", store)
    c = broker.coordinator

    async def main() -> None:
        await broker.load()
        assert await c.read(KEY, 3) is None  # never initialised: nothing claimed
        assert await c.summary(KEY) is None
        fresh = await c.initialize(KEY, 10)
        assert fresh == ShareState(0, 0, 10, ())  # leader epoch 0, as Kafka initialises
        # the share-partition's leader at epoch 3 claims the state, then writes
        assert await c.read(KEY, 3) == ShareState(0, 3, 10, ())
        acked = ShareState(0, 3, 12, (StateBatch(12, 14, ACK, 1),))
        await c.write(KEY, acked)
        assert await c.summary(KEY) == acked
        # a new leader (epoch 4) reads: the old leader is fenced from then on
        assert await c.read(KEY, 4) == ShareState(0, 4, 12, acked.batches)
        assert await _code(c.write(KEY, acked)) == E.fenced_leader_epoch
        assert await _code(c.read(KEY, 3)) == E.fenced_leader_epoch
        assert await c.read(KEY, -1) == ShareState(0, 4, 12, acked.batches)  # no claim
        # AlterShareGroupOffsets re-initialises: a new state epoch; the leader epoch stays
        assert await c.initialize(KEY, 20) == ShareState(1, 4, 20, ())
        assert await _code(c.write(KEY, ShareState(0, 4, 25, ()))) == E.fenced_state_epoch
        await c.write(KEY, ShareState(1, 4, 25, ()))
        # an impossible state is refused
        bad = ShareState(1, 4, 25, (StateBatch(30, 29, ACK, 1),))
        assert await _code(c.write(KEY, bad)) == E.invalid_request
        overlapping = (StateBatch(25, 27, ACK, 1), StateBatch(27, 28, ACK, 1))
        assert await _code(c.write(KEY, ShareState(1, 4, 25, overlapping))) == E.invalid_request
        acquired = (StateBatch(25, 27, DeliveryState.ACQUIRED, 1),)
        assert await _code(c.write(KEY, ShareState(1, 4, 25, acquired))) == E.invalid_request
        # another share-partition: deleted after being written
        await c.initialize(OTHER, 0)
        await c.delete(OTHER)
        assert await c.summary(OTHER) is None
        await c.delete(OTHER)  # deleting nothing is fine

    anyio.run(main)
    assert broker.partition.high_watermark == broker.partition.log.log_end_offset
    broker.partition.close()

    # a new leader loads the partition: the same states, the epoch-4 claim still fencing
    reloaded = Broker(tmp_path / "state-0", store, leader_epoch=2)
    c2 = reloaded.coordinator

    async def after_failover() -> None:
        await reloaded.load()
        assert await c2.summary(KEY) == ShareState(1, 4, 25, ())
        assert await c2.summary(OTHER) is None
        assert await _code(c2.write(KEY, ShareState(1, 3, 26, ()))) == E.fenced_leader_epoch
        entry = reloaded.shard.states[KEY.coordinator_key()]
        # one snapshot per change: init, claim, write, claim, init, write
        assert entry.snapshot_epoch == 5

    anyio.run(after_failover)
    reloaded.partition.close()


def test_not_coordinator_and_loading(tmp_path: Path, store: StateStore) -> None:
    broker = Broker(tmp_path / "state-0", store)
    c = broker.coordinator

    async def main() -> None:
        # loaded shards only: a partition being loaded answers COORDINATOR_LOAD_IN_PROGRESS
        assert await _code(c.read(KEY, 1)) == E.coordinator_load_in_progress
        await broker.load()
        await c.initialize(KEY, 0)
        # leadership moved: the runtime drops the shard, the caller looks again
        broker.partition.update(PartitionInfo(0, (ME, 2), (ME, 2), 2, 2, 2))
        c.runtime._on_leadership(broker.partition)
        assert await _code(c.summary(KEY)) == E.not_coordinator
        assert broker.shard.unloaded

    anyio.run(main)
    broker.partition.close()


def test_replay_skips_what_it_cannot_read() -> None:
    shard = ShareStateShard(0, 1)
    state = ShareState(0, 1, 5, ())
    shard.replay(Record(0, 0, b"\x00\x07junk", b"", ()))  # an unknown record type
    shard.replay(Record(1, 0, snapshot_key(KEY), b"\x00", ()))  # a corrupt value
    shard.replay(Record(2, 0, snapshot_key(KEY), snapshot_value(state, 0, 1, 1), ()))
    assert shard.skipped_records == 2
    assert shard.states[KEY.coordinator_key()].state == state
    assert shard.states[KEY.coordinator_key()].end_offset == 3
    shard.replay(Record(3, 0, snapshot_key(KEY), None, ()))
    assert shard.states == {}
