"""A TransactionCoordinator on an in-memory `__transaction_state`: the runtime keeps each
partition's records (replicated at once, or when the test says so), a fake marker sender
records the markers, a counter hands out producer ids. Failover = a new coordinator loading the
same records."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from types import SimpleNamespace
from typing import Any

import anyio

from dataplane.coordinator.runtime import partition_for
from dataplane.log.records import Record
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.transaction.config import TransactionConfig
from dataplane.transaction.coordinator import TransactionCoordinator
from dataplane.transaction.shard import TransactionShard

PARTITIONS = 3


class Log:
    """The records of every partition, shared by the coordinators of a test (failover)."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = {}


class FakeRuntime:
    def __init__(self, coordinator: TransactionCoordinator, log: Log, epoch: int) -> None:
        self._coordinator = coordinator
        self._log = log
        self._epoch = epoch
        self.shards: dict[int, TransactionShard] = {}
        self.fail: ErrorCode | None = None  # the error the next appends raise
        self.gate: anyio.Event | None = None  # set: replication completes

    def load(self) -> None:
        for index in range(PARTITIONS):
            shard = TransactionShard(index, self._epoch, self._coordinator)
            for offset, (key, value) in enumerate(self._log.records.get(index, [])):
                shard.replay(Record(offset, 0, key, value, ()))
            self.shards[index] = shard
            shard.on_loaded()

    def unload(self) -> None:
        for shard in self.shards.values():
            shard.on_unloaded()
        self.shards.clear()

    def shard(self, key: str) -> TransactionShard:
        shard = self.shards.get(partition_for(key, PARTITIONS))
        if shard is None:
            raise KafkaError(ErrorCode.not_coordinator)
        return shard

    def loaded_shards(self) -> list[TransactionShard]:
        return list(self.shards.values())

    def is_loading(self) -> bool:
        return False

    def append(
        self, key: str, records: Sequence[tuple[bytes, bytes | None]], *, replay: bool = True
    ) -> Awaitable[None]:
        assert not replay
        if self.fail is not None:
            raise KafkaError(self.fail)
        self._log.records.setdefault(partition_for(key, PARTITIONS), []).extend(records)
        return self._replicated()

    async def _replicated(self) -> None:
        if self.gate is not None:
            await self.gate.wait()

    async def run(self) -> None:
        await anyio.sleep_forever()


class FakeMarkers:
    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, int, tuple[tuple[str, int], ...]]] = []
        self.gate: anyio.Event | None = None  # set: markers complete

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Sequence[tuple[str, int]],
    ) -> None:
        if self.gate is not None:
            await self.gate.wait()
        self.written.append(
            (producer_id, producer_epoch, commit, coordinator_epoch, tuple(partitions))
        )


class Counter:
    def __init__(self, start: int = 1000) -> None:
        self.next = start

    async def next_id(self) -> int:
        self.next += 1
        return self.next - 1


def coordinator(
    log: Log | None = None,
    *,
    epoch: int = 5,
    markers: FakeMarkers | None = None,
    ids: Counter | None = None,
    **config: Any,
) -> tuple[TransactionCoordinator, FakeRuntime, FakeMarkers]:
    markers = markers or FakeMarkers()
    replicas = SimpleNamespace(leadership_listeners=[], partitions={})
    topic = SimpleNamespace(name="__transaction_state", partition_for=lambda k: 0)
    c = TransactionCoordinator(
        TransactionConfig(offsets_topic_partitions=50, **config),
        # no feature level finalized in the meta service: transaction.version from the config
        SimpleNamespace(features_epoch=-1, finalized_features={}),  # type: ignore[arg-type]
        replicas,  # type: ignore[arg-type]
        topic,  # type: ignore[arg-type]
        ids or Counter(),
        markers,
    )
    runtime = FakeRuntime(c, log or Log(), epoch)
    c.state.runtime = runtime  # type: ignore[assignment]
    runtime.load()
    return c, runtime, markers


async def settle() -> None:
    """Let spawned completions run."""
    for _ in range(20):
        await anyio.sleep(0)
