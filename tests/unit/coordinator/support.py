"""Running a group shard outside a broker: a manual clock and in-memory services."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.base import GroupConfig, Records, ShardServices
from dataplane.coordinator.shard import GroupShard
from dataplane.log.records import Record
from dataplane.protocol.errors import ErrorCode, KafkaError


class ManualClock:
    """A clock tests move by hand; `now()` serves as both the monotonic and the wall clock."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.ms = start_ms

    def now(self) -> int:
        return self.ms

    def advance(self, ms: int) -> None:
        self.ms += ms


class LocalServices(ShardServices):
    """Services for a shard outside a broker: a manual clock, writes kept in memory (replayed
    like the broker does), background work queued until `run_pending()`. Writes are replicated
    at once, or with `hold_replication` when `replicate()` says (or fails them)."""

    def __init__(self, config: GroupConfig | None = None, clock: ManualClock | None = None):
        self.clock = clock or ManualClock()
        super().__init__(config or GroupConfig())
        self.shard: GroupShard | None = None  # set by attach()
        self.log: list[tuple[bytes, bytes | None]] = []  # everything appended, in order
        self.pending: list[Callable[[], Awaitable[None]]] = []
        self.fail_with: ErrorCode | None = None  # make the next appends fail
        self.hold_replication = False  # appends wait for replicate()
        self.held: list[_Replication] = []
        self._parked: list[Coroutine[object, None, None]] = []  # work awaiting a held write
        self.created: list[str] = []
        self.topic_metadata: dict[str, TopicMetadata] = {}  # what topics() answers
        self._ids = 0

    def attach(self, shard: GroupShard) -> GroupShard:
        self.shard = shard
        return shard

    def clock_ms(self) -> int:
        return self.clock.now()

    def now_ms(self) -> int:
        return self.clock.now()

    def new_member_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{uuid.UUID(int=self._ids)}"

    def topics(self) -> Mapping[str, TopicMetadata]:
        return self.topic_metadata

    def append(self, group_id: str, records: Records, replay: bool) -> Awaitable[None]:
        if self.fail_with is not None:
            raise KafkaError(self.fail_with)
        base = len(self.log)
        self.log += records
        if replay and self.shard is not None:
            for i, (key, value) in enumerate(records):
                self.shard.replay(Record(base + i, self.clock.now(), key, value, ()))
        replication = _Replication()
        if self.hold_replication:
            self.held.append(replication)
        else:
            replication.done = True
        return replication

    def replicate(self, error: ErrorCode | None = None, count: int | None = None) -> None:
        """End the replication of the oldest `count` held writes (all by default), as a high
        watermark moves: done, or failed with `error`. Their waiters resume at the next
        `run_pending()`."""
        ended = self.held[:count]
        del self.held[:count]
        for replication in ended:
            replication.done, replication.error = True, error

    def spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        self.pending.append(fn)

    def run_pending(self) -> int:
        """Run the queued background work (and whatever it queues) until all of it is done or
        waits for a held write; returns how many finished."""
        finished = 0
        progress = True
        while progress:
            progress = False
            while self.pending:
                self._parked.append(self.pending.pop(0)())  # type: ignore[arg-type]
            for coro in list(self._parked):
                try:
                    waits_for = coro.send(None)
                except StopIteration:
                    self._parked.remove(coro)
                    finished += 1
                    progress = True
                    continue
                if not isinstance(waits_for, _Replication):
                    raise RuntimeError("LocalServices cannot run work that really waits")
        return finished

    def group_created(self, group_id: str) -> None:
        self.created.append(group_id)


def local_shard(
    config: GroupConfig | None = None, clock: ManualClock | None = None, index: int = 0
) -> tuple[GroupShard, LocalServices]:
    """A shard on `LocalServices` (not loaded yet: replay into it, then `on_loaded()`)."""
    services = LocalServices(config, clock)
    return services.attach(GroupShard(index, services)), services


class _Replication:
    """The replication of a LocalServices write: awaiting it yields it while not done, then
    raises the error it failed with."""

    def __init__(self) -> None:
        self.done = False
        self.error: ErrorCode | None = None

    def __await__(self) -> Generator[_Replication, None, None]:
        while not self.done:
            yield self
        if self.error is not None:
            raise KafkaError(self.error)
