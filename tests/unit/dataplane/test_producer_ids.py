"""ProducerIdManager: ids from the meta service's blocks, the next block fetched ahead at 90%."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest

from dataplane.producer_ids import ProducerIdManager
from dataplane.protocol.errors import ErrorCode, KafkaError
from meta.client import MetaError, ProducerIdBlock

BLOCK = 10


class FakeMeta:
    """Hands out consecutive blocks of BLOCK ids, each after a scheduling point (a call
    takes time); `failing` makes the calls fail as an unreachable meta service does."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []  # (node id, broker epoch) of each
        self.failing = False

    async def allocate_producer_ids(self, node_id: int, broker_epoch: int) -> ProducerIdBlock:
        self.calls.append((node_id, broker_epoch))
        await anyio.sleep(0)
        if self.failing:
            raise MetaError("no meta node answered")
        return ProducerIdBlock(BLOCK * (len(self.calls) - 1), BLOCK)


def run(test: Callable[[ProducerIdManager, FakeMeta], Awaitable[None]], prefetch: bool) -> None:
    """`test` against a manager of broker 7 at epoch 3, with its prefetching task if asked."""
    meta = FakeMeta()
    manager = ProducerIdManager(meta, 7, lambda: 3)  # type: ignore[arg-type]

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            if prefetch:
                tg.start_soon(manager.run)
            await test(manager, meta)
            tg.cancel_scope.cancel()

    anyio.run(main)


async def take(manager: ProducerIdManager, n: int) -> list[int]:
    return [await manager.next_id() for _ in range(n)]


def test_the_next_block_is_fetched_once_90_percent_are_handed_out() -> None:
    async def test(manager: ProducerIdManager, meta: FakeMeta) -> None:
        assert await take(manager, 8) == list(range(8))
        await anyio.wait_all_tasks_blocked()
        assert meta.calls == [(7, 3)]
        await take(manager, 1)  # 9 of 10 handed out
        await anyio.wait_all_tasks_blocked()
        assert len(meta.calls) == 2
        # The rest of this block, then the next one without another call.
        assert await take(manager, 9) == list(range(9, 18))
        assert len(meta.calls) == 2

    run(test, prefetch=True)


def test_without_the_prefetch_a_block_is_fetched_when_the_last_ran_out() -> None:
    async def test(manager: ProducerIdManager, meta: FakeMeta) -> None:
        assert await take(manager, 2 * BLOCK + 1) == list(range(2 * BLOCK + 1))
        assert len(meta.calls) == 3

    run(test, prefetch=False)


def test_requests_at_the_end_of_a_block_share_one_call() -> None:
    async def test(manager: ProducerIdManager, meta: FakeMeta) -> None:
        ids: list[int] = []

        async def one() -> None:
            ids.append(await manager.next_id())

        async with anyio.create_task_group() as tg:
            for _ in range(BLOCK + 5):
                tg.start_soon(one)
        assert sorted(ids) == list(range(BLOCK + 5))
        assert len(meta.calls) == 2

    run(test, prefetch=True)


def test_a_failed_prefetch_is_retried_when_the_block_runs_out() -> None:
    async def test(manager: ProducerIdManager, meta: FakeMeta) -> None:
        await take(manager, 1)
        meta.failing = True
        await take(manager, BLOCK - 1)  # the prefetches fail quietly
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(KafkaError) as e:
            await manager.next_id()
        assert e.value.code == ErrorCode.coordinator_not_available  # clients retry on it
        meta.failing = False
        failed = len(meta.calls)
        assert await manager.next_id() == BLOCK * failed
        assert len(meta.calls) == failed + 1

    run(test, prefetch=True)
