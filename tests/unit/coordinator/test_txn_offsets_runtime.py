"""TxnOffsetCommit through the group coordinator on a real `__consumer_offsets` partition: the
offsets are appended as a transactional batch of the producer (sequences continued across
transactions and epochs, an older epoch fenced), stay pending until the leader writes the
transaction's marker (`write_local_marker` → `complete_transaction`), and a new leader's load
of the partition rebuilds the same state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import anyio
import pytest

from dataplane.coordinator.base import GroupConfig
from dataplane.coordinator.offsets import CommitPartition
from dataplane.coordinator.runtime import InternalTopic, _Loaded
from dataplane.coordinator.service import GroupCoordinator
from dataplane.log import LogConfig, PartitionLog, StateStore
from dataplane.log.batch import header_at
from dataplane.metadata_cache import PartitionInfo
from dataplane.protocol.errors import ErrorCode
from dataplane.replica.meta_lease import MetaLease
from dataplane.replica.partition import Partition
from dataplane.replica.producer_state import ProducerStateManager
from dataplane.transaction.markers import TxnMarker, write_local_marker

E = ErrorCode
ME = 1
OFFSETS = "__consumer_offsets"


class Broker:
    """One broker leading the only partition of `__consumer_offsets`, its group coordinator
    loaded."""

    def __init__(self, directory: Path, store: StateStore) -> None:
        plog = PartitionLog.open(directory, LogConfig(), store, directory.name)
        producers = ProducerStateManager.load(plog)
        self.partition = Partition(OFFSETS, b"\x02" * 16, 0, plog, producers, ME, _no_isr)
        self.partition.update(PartitionInfo(0, (ME,), (ME,), ME, 1, 1))
        self.replicas = SimpleNamespace(
            leadership_listeners=[],
            partitions={(OFFSETS, 0): self.partition},
            meta_lease=MetaLease(9000, 2000),
        )
        cache = SimpleNamespace(topics={}, topic_listeners=[])
        topic = InternalTopic(cache, _no_create, OFFSETS, 1, 1, {})  # type: ignore[arg-type]
        self.coordinator = GroupCoordinator(
            GroupConfig(),
            cache,  # type: ignore[arg-type]
            self.replicas,  # type: ignore[arg-type]
            topic,
            None,  # type: ignore[arg-type]
        )
        self.shard = self.coordinator.new_shard(0)
        self.loaded = _Loaded(self.shard, self.partition.leader_epoch)
        self.coordinator.runtime._shards[0] = self.loaded
        self.verified: list[tuple[str, int]] = []  # KIP-890 checks asked for

    async def load(self) -> None:
        await self.coordinator.runtime._load(self.partition, self.loaded)  # type: ignore[arg-type]

    async def commit(self, offset: int, producer: tuple[int, int] = (7, 0)) -> ErrorCode:
        async def verify(topic: str, partition: int) -> ErrorCode:
            self.verified.append((topic, partition))
            return E.none

        errors = await self.coordinator.txn_offset_commit(
            "g", *producer, "", None, -1, [CommitPartition("t", 0, offset, -1, "")], verify
        )
        return errors["t", 0]

    async def marker(self, commit: bool, producer: tuple[int, int] = (7, 0)) -> ErrorCode:
        marker = TxnMarker(*producer, commit, 0)
        return await write_local_marker(self.replicas, self.coordinator, OFFSETS, 0, marker)  # type: ignore[arg-type]

    def fetched(self) -> int | ErrorCode | None:
        _, topics = self.shard.fetch_offsets("g", [("t", [0])], require_stable=True)
        p = topics[0].partitions[0]
        return p.error if p.error != E.none else (p.offset.offset if p.offset else None)


def _no_isr(partition: Partition, isr: tuple[int, ...]) -> None:
    raise AssertionError("no ISR change expected")


async def _no_create(topics: object) -> list[object]:
    raise AssertionError("no topic creation expected")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "state")
    yield s
    s.close()


def test_txn_offsets_commit_abort_and_reload(tmp_path: Path, store: StateStore) -> None:
    broker = Broker(tmp_path / "offsets-0", store)

    async def main() -> None:
        await broker.load()
        assert await broker.commit(5) == E.none
        assert await broker.commit(6) == E.none  # a second commit in the same transaction
        assert broker.verified == [(OFFSETS, 0)]  # the open transaction needs no second check
        assert broker.fetched() == E.unstable_offset_commit
        assert await broker.marker(commit=True) == E.none
        assert broker.fetched() == 6
        # the next transaction of the same epoch (transaction version 1), aborted
        assert await broker.commit(8) == E.none
        assert await broker.marker(commit=False) == E.none
        assert broker.fetched() == 6
        # transaction version 2: the marker bumped the epoch, the next transaction uses it
        assert await broker.commit(9) == E.none
        assert await broker.marker(commit=True, producer=(7, 1)) == E.none
        assert await broker.commit(10, producer=(7, 1)) == E.none
        assert await broker.commit(11, producer=(7, 0)) == E.invalid_producer_epoch
        assert broker.fetched() == E.unstable_offset_commit

    anyio.run(main)
    log = broker.partition.log
    data = log.read(0, 1 << 20, log.log_end_offset, True)
    kinds, pos = [], 0
    while pos < len(data):
        info = header_at(data, pos)
        kinds.append("marker" if info.is_control else "txn" if info.is_transactional else "-")
        pos += info.size
    assert kinds == ["txn", "txn", "marker", "txn", "marker", "txn", "marker", "txn"]

    # a new leader loads the partition: the same committed and pending offsets
    broker.partition.close()
    reloaded = Broker(tmp_path / "offsets-0", store)

    async def reload() -> None:
        await reloaded.load()
        assert reloaded.fetched() == E.unstable_offset_commit
        assert reloaded.shard.offsets.committed["g"]["t"][0].offset == 9
        assert await reloaded.marker(commit=True, producer=(7, 1)) == E.none
        assert reloaded.fetched() == 10

    anyio.run(reload)
    reloaded.partition.close()
