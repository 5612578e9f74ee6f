"""TxnVerifier (KIP-890): the local coordinator when this broker leads the transactional id's
partition of `__transaction_state`, else the AddPartitionsToTxn RPC to its leader; retriable
answers retried briefly then NOT_ENOUGH_REPLICAS; PRODUCER_FENCED answered as
INVALID_PRODUCER_EPOCH."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import anyio
import grpc
import pytest

from common.internal_security import InternalSecurity
from dataplane.coordinator.runtime import partition_for
from dataplane.protocol.errors import ErrorCode
from dataplane.transaction import verification
from dataplane.transaction.verification import TxnVerifier
from proto import replication_pb2, replication_pb2_grpc

E = ErrorCode
ME = 1
TXN_TOPIC = "__transaction_state"


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verification, "_INITIAL_BACKOFF_S", 0.001)
    monkeypatch.setattr(verification, "_MAX_BACKOFF_S", 0.001)
    monkeypatch.setattr(verification, "_RETRY_FOR_S", 0.05)


class FakeCoordinator:
    def __init__(self, answers: list[ErrorCode]) -> None:
        self.answers = answers
        self.asked: list[tuple[Any, ...]] = []

    async def add_partitions(
        self, tid: str, pid: int, epoch: int, partitions: list[tuple[str, int]], verify_only: bool
    ) -> dict[tuple[str, int], ErrorCode]:
        self.asked.append((tid, pid, epoch, partitions, verify_only))
        code = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return dict.fromkeys(partitions, code)


class FakeTransport:
    def __init__(self, answers: list[ErrorCode | Exception]) -> None:
        self.answers = answers
        self.calls: list[tuple[int, replication_pb2.AddPartitionsToTxnRequest]] = []

    async def add_partitions_to_txn(
        self, broker_id: int, request: replication_pb2.AddPartitionsToTxnRequest
    ) -> replication_pb2.AddPartitionsToTxnResponse:
        self.calls.append((broker_id, request))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return replication_pb2.AddPartitionsToTxnResponse(error_code=answer)


def verifier(leader: int, transport: FakeTransport | None = None) -> TxnVerifier:
    cache = SimpleNamespace(
        topics={TXN_TOPIC: SimpleNamespace(partitions=[SimpleNamespace(leader=leader)] * 50)},
        brokers={},
    )
    topic = SimpleNamespace(name=TXN_TOPIC, partition_for=lambda key: partition_for(key, 50))
    return TxnVerifier(
        ME,
        cache,  # type: ignore[arg-type]
        InternalSecurity(),
        topic,  # type: ignore[arg-type]
        transport=transport or FakeTransport([E.none]),
    )


def verify(v: TxnVerifier, *, add: bool = False) -> ErrorCode:
    async def main() -> ErrorCode:
        return await v.verify("tx", 5, 2, "t", 0, add)

    return anyio.run(main)


def test_the_local_coordinator_answers() -> None:
    v = verifier(ME)
    coordinator = FakeCoordinator([E.none])
    v.set_coordinator(coordinator)  # type: ignore[arg-type]
    assert verify(v) == E.none
    assert verify(v, add=True) == E.none
    assert coordinator.asked == [
        ("tx", 5, 2, [("t", 0)], True),
        ("tx", 5, 2, [("t", 0)], False),
    ]


def test_a_remote_coordinator_is_asked_over_rpc() -> None:
    transport = FakeTransport([E.invalid_txn_state])
    v = verifier(3, transport)
    assert verify(v, add=True) == E.invalid_txn_state
    ((broker, request),) = transport.calls
    assert broker == 3
    assert (request.transactional_id, request.producer_id, request.producer_epoch) == ("tx", 5, 2)
    assert (request.topic, request.partition, request.add, request.leader_id) == ("t", 0, True, ME)


def test_retriable_answers_are_retried_then_not_enough_replicas() -> None:
    transport = FakeTransport([E.coordinator_load_in_progress, E.not_coordinator, E.none])
    assert verify(verifier(3, transport)) == E.none
    assert len(transport.calls) == 3
    unreachable = grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata()
    )
    assert verify(verifier(3, FakeTransport([unreachable]))) == E.not_enough_replicas
    assert verify(verifier(-1)) == E.not_enough_replicas  # no leader: no coordinator
    assert verify(verifier(ME)) == E.not_enough_replicas  # coordinator not set yet


def test_a_fenced_producer_gets_invalid_producer_epoch() -> None:
    assert verify(verifier(3, FakeTransport([E.producer_fenced]))) == E.invalid_producer_epoch


class _SlowCoordinator(replication_pb2_grpc.TransactionsServicer):
    """A remote coordinator that answers only after the verification's deadline."""

    async def AddPartitionsToTxn(
        self, request: Any, context: Any
    ) -> replication_pb2.AddPartitionsToTxnResponse:
        await asyncio.sleep(30)
        return replication_pb2.AddPartitionsToTxnResponse(error_code=E.none)


def test_a_verification_that_times_out_in_flight_cancels_nothing_else() -> None:
    """Regression: the deadline hit an AddPartitionsToTxn call in flight; grpc.aio's own
    CancelledError escaped the deadline's scope and silently cancelled the task group around
    it (on a broker: the acceptor and every client connection)."""

    async def main() -> tuple[ErrorCode | None, bool]:
        server = grpc.aio.server()
        replication_pb2_grpc.add_TransactionsServicer_to_server(_SlowCoordinator(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        cache = SimpleNamespace(
            topics={TXN_TOPIC: SimpleNamespace(partitions=[SimpleNamespace(leader=3)] * 50)},
            brokers={3: SimpleNamespace(fenced=False, replication_endpoint=f"127.0.0.1:{port}")},
        )
        topic = SimpleNamespace(name=TXN_TOPIC, partition_for=lambda key: partition_for(key, 50))
        v = TxnVerifier(ME, cache, InternalSecurity(), topic)  # type: ignore[arg-type]
        answer: ErrorCode | None = None
        neighbour_done = False

        async def neighbour() -> None:  # another connection of the broker, say
            nonlocal neighbour_done
            await anyio.sleep(1.0)
            neighbour_done = True

        async def produce() -> None:
            nonlocal answer
            answer = await v.verify("tx", 5, 2, "t", 0, False)

        try:
            with anyio.fail_after(20):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(neighbour)
                    tg.start_soon(produce)
        finally:
            await v.close()
            await server.stop(0)
        return answer, neighbour_done

    answer, neighbour_done = anyio.run(main)
    assert answer == E.not_enough_replicas  # the producer retries
    assert neighbour_done
