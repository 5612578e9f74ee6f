"""TxnMarkerSender with a fake transport and fake partitions: grouping by leader (local writes,
one WriteTxnMarkers call per remote leader, concurrent transactions sharing a call), retries
until written (leader moves, unreachable brokers, NOT_ENOUGH_REPLICAS), deleted partitions, the
group coordinator told of `__consumer_offsets` markers; and the RPC handlers' side."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import anyio
import grpc
import pytest

from common.internal_security import InternalSecurity
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.transaction import markers
from dataplane.transaction.markers import TxnMarkerSender, TxnRpcHandlers
from proto import replication_pb2

E = ErrorCode
OFFSETS = "__consumer_offsets"
ME = 1


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(markers, "_INITIAL_BACKOFF_S", 0.001)
    monkeypatch.setattr(markers, "_MAX_BACKOFF_S", 0.001)


async def until(check: Callable[[], bool], timeout: float = 5) -> None:
    """Poll `check` (the sender's tasks run meanwhile) until true, failing after `timeout`."""
    with anyio.fail_after(timeout):
        while not check():
            await anyio.sleep(0.001)


class FakePartition:
    def __init__(self, topic: str, index: int, *, error: ErrorCode = E.none) -> None:
        self.topic, self.index = topic, index
        self.leader_epoch = 3
        self.error = error  # replication_error()
        self.write_errors: list[ErrorCode] = []  # raised by the next write_marker calls
        self.replication: list[ErrorCode] = []  # answered by the next waits
        self.markers: list[tuple[int, int, bool, int]] = []
        self.checks = 0  # replication_error() calls: one per attempt at the partition

    def replication_error(self) -> ErrorCode:
        self.checks += 1
        return self.error

    def write_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, now: int
    ) -> Any:
        if self.write_errors:
            raise KafkaError(self.write_errors.pop(0))
        self.markers.append((producer_id, producer_epoch, commit, coordinator_epoch))
        return SimpleNamespace(last_offset=len(self.markers) - 1)

    async def wait_for_replication(self, offset: int, epoch: int, timeout: float) -> ErrorCode:
        assert epoch == self.leader_epoch
        return self.replication.pop(0) if self.replication else E.none


class FakeTransport:
    """Answers WriteTxnMarkers per broker: scripted errors, else NONE; records the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, replication_pb2.WriteTxnMarkersRequest]] = []
        self.errors: dict[tuple[str, int], list[ErrorCode]] = {}  # next answers per partition
        self.failures: list[Exception] = []  # raised by the next calls

    async def write_txn_markers(
        self, broker_id: int, request: replication_pb2.WriteTxnMarkersRequest
    ) -> replication_pb2.WriteTxnMarkersResponse:
        self.calls.append((broker_id, request))
        if self.failures:
            raise self.failures.pop(0)
        response = replication_pb2.WriteTxnMarkersResponse()
        for m in request.markers:
            out = response.markers.add(producer_id=m.producer_id)
            for t in m.topics:
                for p in t.partitions:
                    queue = self.errors.get((t.name, p), [])
                    code = queue.pop(0) if queue else E.none
                    out.partitions.add(topic=t.name, partition=p, error_code=code)
        return response


class World:
    """A metadata cache, this broker's partitions, a group coordinator and the sender."""

    def __init__(self, leaders: dict[tuple[str, int], int]) -> None:
        self.cache = SimpleNamespace(topics={}, brokers={})
        for (topic, index), leader in leaders.items():
            self.set_leader(topic, index, leader)
        self.partitions: dict[tuple[str, int], FakePartition] = {
            tp: FakePartition(*tp) for tp, leader in leaders.items() if leader == ME
        }
        self.completed: list[tuple[int, int, bool]] = []
        self.group_coordinator = SimpleNamespace(
            runtime=SimpleNamespace(topic=SimpleNamespace(name=OFFSETS)),
            complete_transaction=lambda *args: self.completed.append(args),
        )
        self.transport = FakeTransport()
        self.sender = TxnMarkerSender(
            ME,
            self.cache,  # type: ignore[arg-type]
            SimpleNamespace(partitions=self.partitions),  # type: ignore[arg-type]
            InternalSecurity(),
            self.group_coordinator,  # type: ignore[arg-type]
            transport=self.transport,
        )

    def set_leader(self, topic: str, index: int, leader: int) -> None:
        info = self.cache.topics.setdefault(topic, SimpleNamespace(partitions=[]))
        while len(info.partitions) <= index:
            info.partitions.append(SimpleNamespace(leader=-1))
        info.partitions[index] = SimpleNamespace(leader=leader)

    def called(self) -> list[tuple[int, set[tuple[int, str, int]]]]:
        """(broker, {(producer id, topic, partition)}) of each call, in order."""
        return [
            (
                broker,
                {
                    (m.producer_id, t.name, p)
                    for m in req.markers
                    for t in m.topics
                    for p in t.partitions
                },
            )
            for broker, req in self.transport.calls
        ]


def write(
    world: World, partitions: list[tuple[str, int]], *, commit: bool = True, pid: int = 5
) -> None:
    async def main() -> None:
        with anyio.fail_after(5):
            await world.sender.write_markers(pid, 2, commit, 9, partitions)

    anyio.run(main)


def test_partitions_are_grouped_by_leader() -> None:
    w = World({("a", 0): ME, ("a", 1): 2, ("b", 0): 2, ("b", 1): 3})
    write(w, [("a", 0), ("a", 1), ("b", 0), ("b", 1)])
    assert w.partitions["a", 0].markers == [(5, 2, True, 9)]
    assert sorted(w.called(), key=lambda c: c[0]) == [
        (2, {(5, "a", 1), (5, "b", 0)}),
        (3, {(5, "b", 1)}),
    ]
    marker = w.transport.calls[0][1].markers[0]
    assert (marker.producer_epoch, marker.commit, marker.coordinator_epoch) == (2, True, 9)


def test_a_moved_leader_is_retried_at_its_new_broker() -> None:
    w = World({("a", 0): 2})
    w.transport.errors["a", 0] = [E.not_leader_or_follower]
    original = w.transport.write_txn_markers

    async def moving(broker_id: int, request: Any) -> Any:
        response = await original(broker_id, request)
        w.set_leader("a", 0, 3)  # metadata catches up after the first answer
        return response

    w.transport.write_txn_markers = moving  # type: ignore[method-assign]
    write(w, [("a", 0)])
    assert [broker for broker, _ in w.called()] == [2, 3]


def test_retriable_errors_and_unreachable_brokers_are_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = World({("a", 0): 2, ("a", 1): ME})
    w.transport.failures = [KafkaError(E.broker_not_available)]
    w.transport.errors["a", 0] = [E.not_enough_replicas, E.request_timed_out]
    w.partitions["a", 1].write_errors = [E.not_leader_or_follower]
    w.partitions["a", 1].replication = [E.not_enough_replicas_after_append]
    with caplog.at_level("INFO", logger="rafka.transaction.markers"):
        write(w, [("a", 0), ("a", 1)])
    assert len(w.transport.calls) == 4  # failed call, 2 errors, then written
    # the local partition: refused, then written but not replicated, then written again
    assert len(w.partitions["a", 1].markers) == 2
    retries = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert len(retries) == 3
    assert "a-0: broker_not_available" in retries[0]
    assert "a-1: not_leader_or_follower" in retries[0]
    assert "a-0: request_timed_out" in retries[2]


def test_grpc_failures_are_retried() -> None:
    w = World({("a", 0): 2})
    w.transport.failures = [
        grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata())
    ]
    write(w, [("a", 0)])
    assert len(w.transport.calls) == 2


def test_a_local_partition_below_min_insync_is_not_written_until_it_recovers() -> None:
    w = World({("a", 0): ME})
    partition = w.partitions["a", 0]
    partition.error = E.not_enough_replicas

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.sender.write_markers, 5, 2, True, 9, [("a", 0)])
            await until(lambda: partition.checks >= 3)  # tried, and retried
            assert partition.markers == []
            partition.error = E.none

    anyio.run(main)
    assert partition.markers == [(5, 2, True, 9)]


def test_deleted_partitions_need_no_marker() -> None:
    w = World({("a", 0): 2, ("gone", 0): 2})
    del w.cache.topics["gone"]
    w.transport.errors["a", 0] = [E.unknown_topic_or_partition]
    original = w.transport.write_txn_markers

    async def deleting(broker_id: int, request: Any) -> Any:
        response = await original(broker_id, request)
        del w.cache.topics["a"]  # the leader knew first: the topic was deleted
        return response

    w.transport.write_txn_markers = deleting  # type: ignore[method-assign]
    write(w, [("a", 0), ("gone", 0), ("a", 5)])
    assert w.called() == [(2, {(5, "a", 0)})]


def test_stale_markers_end_without_retry() -> None:
    w = World({("a", 0): 2, ("a", 1): ME})
    w.transport.errors["a", 0] = [E.transaction_coordinator_fenced]
    w.partitions["a", 1].write_errors = [E.invalid_producer_epoch]
    write(w, [("a", 0), ("a", 1)])
    assert len(w.transport.calls) == 1
    assert w.partitions["a", 1].markers == []


def test_the_group_coordinator_learns_of_offsets_markers_once_replicated() -> None:
    w = World({(OFFSETS, 4): ME, ("a", 0): ME})
    w.partitions[OFFSETS, 4].replication = [E.request_timed_out]
    write(w, [(OFFSETS, 4), ("a", 0)], commit=False, pid=8)
    assert w.completed == [(4, 8, False)]  # once, after the second (replicated) marker
    assert len(w.partitions[OFFSETS, 4].markers) == 2


def test_concurrent_transactions_share_a_call() -> None:
    w = World({("a", 0): 2, ("a", 1): 2})

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.sender.run)
            await until(lambda: w.sender._task_group is not None)
            async with anyio.create_task_group() as writers:
                writers.start_soon(w.sender.write_markers, 5, 0, True, 1, [("a", 0)])
                writers.start_soon(w.sender.write_markers, 6, 0, False, 1, [("a", 0), ("a", 1)])
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert w.called() == [(2, {(5, "a", 0), (6, "a", 0), (6, "a", 1)})]
    commits = [m.commit for m in w.transport.calls[0][1].markers]
    assert commits == [True, False]


# -- the leader's side -------------------------------------------------------------------------


def test_write_txn_markers_handler() -> None:
    w = World({("a", 0): ME, (OFFSETS, 1): ME})
    follower = FakePartition("a", 1, error=E.not_leader_or_follower)
    w.partitions["a", 1] = follower
    coordinator = SimpleNamespace()
    replicas = SimpleNamespace(partitions=w.partitions)
    handlers = TxnRpcHandlers(coordinator, replicas, w.group_coordinator)  # type: ignore[arg-type]
    request = replication_pb2.WriteTxnMarkersRequest(coordinator_id=2)
    m = request.markers.add(producer_id=5, producer_epoch=1, commit=True, coordinator_epoch=4)
    m.topics.add(name="a", partitions=[0, 1, 2])
    m.topics.add(name=OFFSETS, partitions=[1])

    async def main() -> replication_pb2.WriteTxnMarkersResponse:
        return await handlers.WriteTxnMarkers(request, None)  # type: ignore[arg-type]

    response = anyio.run(main)
    got = {(p.topic, p.partition): E(p.error_code) for p in response.markers[0].partitions}
    assert got == {
        ("a", 0): E.none,
        ("a", 1): E.not_leader_or_follower,
        ("a", 2): E.unknown_topic_or_partition,
        (OFFSETS, 1): E.none,
    }
    assert w.partitions["a", 0].markers == [(5, 1, True, 4)]
    assert follower.markers == []
    assert w.completed == [(1, 5, True)]


def test_add_partitions_to_txn_handler() -> None:
    asked: list[tuple[Any, ...]] = []

    async def add_partitions(*args: Any, verify_only: bool) -> dict[tuple[str, int], ErrorCode]:
        asked.append((*args, verify_only))
        return {("t", 3): E.invalid_txn_state}

    handlers = TxnRpcHandlers(SimpleNamespace(add_partitions=add_partitions), None, None)  # type: ignore[arg-type]
    request = replication_pb2.AddPartitionsToTxnRequest(
        transactional_id="tx", producer_id=5, producer_epoch=1, topic="t", partition=3, add=False
    )

    async def main() -> replication_pb2.AddPartitionsToTxnResponse:
        return await handlers.AddPartitionsToTxn(request, None)  # type: ignore[arg-type]

    assert anyio.run(main).error_code == E.invalid_txn_state
    assert asked == [("tx", 5, 1, [("t", 3)], True)]
