"""Transactions in the data-plane handlers, against stand-in partitions and services:
transactional produce (authorization, KIP-890 verification and its error mapping),
read_committed Fetch, ListOffsets isolation levels and DescribeProducers."""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from kio.schema.describe_producers.v0.response import DescribeProducersResponse
from kio.serial import entity_reader

from dataplane.connection import Connection
from dataplane.handlers import describe_producers, fetch, produce
from dataplane.log import AppendResult, LogConfig, PartitionLog, StateStore
from dataplane.log.batch import ATTR_TRANSACTIONAL, encode_batch
from dataplane.metadata_cache import PartitionInfo
from dataplane.protocol.encoders import AbortedTransaction
from dataplane.protocol.errors import ConnectionClosed, ErrorCode, KafkaError
from dataplane.quota import QuotaManagers, WindowConfig
from dataplane.replica import offset_lookup
from dataplane.replica.partition import Partition, now_ms
from dataplane.replica.producer_state import BatchMetadata, ProducerStateEntry, ProducerStateManager
from dataplane.request_context import RequestContext
from tests.unit.replica.producers import NEVER, idem

PID, EPOCH = 4000, 3


def batch(transactional: bool, producer_id: int = PID, epoch: int = EPOCH) -> bytes:
    return encode_batch(
        b"\x00" * 8,
        base_offset=0,
        partition_leader_epoch=0,
        attributes=ATTR_TRANSACTIONAL if transactional else 0,
        last_offset_delta=0,
        base_timestamp=1,
        max_timestamp=1,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=0,
        record_count=1,
    )


@dataclass
class FakePartition:
    index: int
    open_txn: bool = False
    appended: list[bytes] = field(default_factory=list)
    guards: list[object] = field(default_factory=list)  # what each append was given
    high_watermark: int = 100
    last_stable_offset: int = 60
    leader_epoch: int = 1
    is_leader: bool = True
    log: Any = field(default_factory=lambda: SimpleNamespace(log_start_offset=0))

    def replication_error(self) -> ErrorCode:
        return ErrorCode.none

    def has_open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        return self.open_txn

    def maybe_start_transaction_verification(self, pid: int, seq: int, epoch: int) -> Any:
        return None if self.open_txn else ("guard", self.index, pid, seq, epoch)

    async def verify_transaction(
        self,
        pid: int,
        seq: int,
        epoch: int,
        ask: Callable[[], Awaitable[ErrorCode]],
        supports_epoch_bump: bool = False,
    ) -> tuple[ErrorCode, Any]:
        guard = self.maybe_start_transaction_verification(pid, seq, epoch)
        return (ErrorCode.none, None) if guard is None else (await ask(), guard)

    def append(self, records: bytes, now: int, guard: object = None) -> AppendResult:
        self.appended.append(records)
        self.guards.append(guard)
        return AppendResult(10, 10, -1, [])


class FakeReplicas:
    def __init__(self, partitions: dict[tuple[str, int], FakePartition]) -> None:
        self.partitions = partitions
        self.cache = SimpleNamespace(topics={"t": SimpleNamespace(partitions=[0, 1, 2])})

    def leader_partition(self, topic: str, index: int, epoch: int = -1) -> FakePartition:
        if (topic, index) not in self.partitions:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        return self.partitions[(topic, index)]

    def readable_partition(self, topic: str, index: int, epoch: int, follower: bool) -> Any:
        return self.leader_partition(topic, index, epoch)


class FakeAuthorizer:
    enabled = True

    def __init__(self, allow_txn: bool = True, denied_topics: Iterable[str] = ()) -> None:
        self.allow_txn = allow_txn
        self.denied_topics = frozenset(denied_topics)

    def denied(self, conn: Any, op: Any, rtype: Any, names: Iterable[str], **_: Any) -> Any:
        return frozenset(set(names) & self.denied_topics)

    def authorize(self, conn: Any, op: Any, rtype: Any, name: str, **_: Any) -> bool:
        return self.allow_txn


class FakeVerifier:
    def __init__(self, answer: ErrorCode = ErrorCode.none) -> None:
        self.answer = answer
        self.calls: list[tuple] = []

    async def verify(self, tid: str, pid: int, epoch: int, topic: str, part: int, add: bool):
        self.calls.append((tid, pid, epoch, topic, part, add))
        return self.answer


def context(version: int, replicas: Any, authorizer: Any = None, verifier: Any = None) -> Any:
    services = SimpleNamespace(
        replicas=replicas,
        authorizer=authorizer or FakeAuthorizer(),
        txn_verifier=verifier or FakeVerifier(),
        cache=replicas.cache,
        config=SimpleNamespace(replica_selector_class=""),
        quotas=QuotaManagers(WindowConfig(), WindowConfig()),  # none set: every flag off
    )
    header = SimpleNamespace(api_version=version, client_id="test")
    return RequestContext(services, header, Connection(peer="1.2.3.4:5"), {})  # type: ignore[arg-type]


def produce_request(records: dict[int, bytes], transactional_id: str | None, acks: int = 1):
    partitions = [SimpleNamespace(index=i, records=r) for i, r in records.items()]
    return SimpleNamespace(
        acks=acks,
        transactional_id=transactional_id,
        timeout=datetime.timedelta(seconds=1),
        topic_data=[SimpleNamespace(name="t", partition_data=partitions)],
    )


def decode_produce(version: int, body: bytes) -> dict[int, Any]:
    from kio.schema.produce import v11, v12

    cls = {11: v11.response.ProduceResponse, 12: v12.response.ProduceResponse}[version]
    response: Any = entity_reader(cls)(body, 0)[0]
    (topic,) = response.responses
    return {p.index: p for p in topic.partition_responses}


def run_produce(version: int, req: Any, **kwargs: Any) -> tuple[dict[int, Any], Any]:
    replicas = kwargs.pop("replicas")
    ctx = context(version, replicas, **kwargs)

    async def main() -> Any:
        return await produce.handle(ctx, req)

    return decode_produce(version, anyio.run(main)), ctx


# -- Produce -------------------------------------------------------------------------------


def test_non_transactional_produce_never_verifies() -> None:
    verifier = FakeVerifier(ErrorCode.invalid_txn_state)
    replicas = FakeReplicas({("t", 0): FakePartition(0)})
    answers, _ = run_produce(
        12, produce_request({0: batch(False)}, "tid"), replicas=replicas, verifier=verifier
    )
    assert answers[0].error_code == ErrorCode.none
    assert answers[0].base_offset == 10
    assert verifier.calls == []


def test_transactional_batch_without_transactional_id_is_refused() -> None:
    replicas = FakeReplicas({("t", 0): FakePartition(0), ("t", 1): FakePartition(1)})
    req = produce_request({0: batch(False), 1: batch(True)}, None)
    answers, _ = run_produce(11, req, replicas=replicas)
    assert {a.error_code for a in answers.values()} == {
        ErrorCode.transactional_id_authorization_failed
    }
    assert not replicas.partitions[("t", 0)].appended


def test_transactional_id_needs_write() -> None:
    replicas = FakeReplicas({("t", 0): FakePartition(0)})
    answers, _ = run_produce(
        11,
        produce_request({0: batch(True)}, "tid"),
        replicas=replicas,
        authorizer=FakeAuthorizer(allow_txn=False),
    )
    assert answers[0].error_code == ErrorCode.transactional_id_authorization_failed


@pytest.mark.parametrize("version", [11, 12])
def test_first_batch_of_a_transaction_is_verified(version: int) -> None:
    verifier = FakeVerifier()
    open_partition = FakePartition(1, open_txn=True)
    replicas = FakeReplicas({("t", 0): FakePartition(0), ("t", 1): open_partition})
    req = produce_request({0: batch(True), 1: batch(True)}, "tid")
    answers, _ = run_produce(version, req, replicas=replicas, verifier=verifier)
    assert [a.error_code for a in answers.values()] == [ErrorCode.none, ErrorCode.none]
    # only the partition without an open transaction is checked; v12 adds it (TV2)
    assert verifier.calls == [("tid", PID, EPOCH, "t", 0, version >= 12)]
    # and its append carries the guard taken before the check (KIP-890's VerificationGuard)
    assert replicas.partitions[("t", 0)].guards == [("guard", 0, PID, 0, EPOCH)]
    assert open_partition.guards == [None]


def test_refused_verification_fails_only_that_partition() -> None:
    verifier = FakeVerifier(ErrorCode.invalid_txn_state)
    refused, appended = FakePartition(0), FakePartition(1, open_txn=True)
    replicas = FakeReplicas({("t", 0): refused, ("t", 1): appended})
    req = produce_request({0: batch(True), 1: batch(True)}, "tid")
    answers, _ = run_produce(11, req, replicas=replicas, verifier=verifier)
    assert answers[0].error_code == ErrorCode.invalid_txn_state
    assert answers[0].error_message == "Partition was not added to the transaction"
    assert answers[1].error_code == ErrorCode.none
    assert not refused.appended
    assert appended.appended


def test_two_batches_for_one_partition_are_refused_before_verification() -> None:
    """Kafka's ProduceRequest.validateRecords comes first: the coordinator is not asked (TV2
    would add the partition to the transaction), nothing is appended, the rest goes on."""
    verifier = FakeVerifier()
    refused, appended = FakePartition(0), FakePartition(1)
    replicas = FakeReplicas({("t", 0): refused, ("t", 1): appended})
    req = produce_request({0: batch(True) + batch(True), 1: batch(True)}, "tid")
    answers, _ = run_produce(12, req, replicas=replicas, verifier=verifier)
    assert answers[0].error_code == ErrorCode.invalid_record
    assert answers[0].error_message == (
        "Produce requests with version 12 are only allowed to contain exactly one record batch "
        "per partition"
    )
    assert answers[1].error_code == ErrorCode.none
    assert verifier.calls == [("tid", PID, EPOCH, "t", 1, True)]
    assert not refused.appended
    assert appended.appended


class MarkerDuringVerify(FakeVerifier):
    """The coordinator confirms the partition, but the transaction ends (an abort marker lands
    in the partition) before the produce handler gets the answer; asked again, the coordinator
    says the partition is in no ongoing transaction."""

    def __init__(self, partition: Partition) -> None:
        super().__init__()
        self.partition = partition

    async def verify(self, tid: str, pid: int, epoch: int, topic: str, part: int, add: bool):
        if not self.calls:
            self.partition.write_marker(pid, epoch, False, 0, now_ms())
        else:
            self.answer = ErrorCode.invalid_txn_state
        return await super().verify(tid, pid, epoch, topic, part, add)


@pytest.fixture
def real_partition(tmp_path: Any) -> Any:
    store = StateStore(tmp_path / "state")
    plog = PartitionLog.open(tmp_path / "t-0", LogConfig(), store, "t-0")
    partition = Partition(
        "t", b"\x01" * 16, 0, plog, ProducerStateManager.load(plog, NEVER), 1, lambda *_: None
    )
    partition.update(PartitionInfo(0, (1,), (1,), 1, 1, 1))
    yield partition
    partition.close()
    store.close()


def test_a_marker_during_verification_refuses_the_late_batch(real_partition: Partition) -> None:
    """KIP-890 part 1's race, through the handler: the batch must not open a transaction that
    already ended (a hanging transaction would hold the LSO forever)."""
    p = real_partition
    replicas = FakeReplicas({("t", 0): p})  # type: ignore[dict-item]
    txn = {0: idem(PID, EPOCH, 0, transactional=True)}
    verifier: FakeVerifier = MarkerDuringVerify(p)
    answers, _ = run_produce(11, produce_request(txn, "tid"), replicas=replicas, verifier=verifier)
    assert answers[0].error_code == ErrorCode.invalid_txn_state
    # the voided guard made the handler ask again; nothing but the marker was written
    assert len(verifier.calls) == 2
    assert p.log.log_end_offset == 1
    assert p.producers.first_unstable_offset is None
    assert p.last_stable_offset == 1
    # the producer's retry (a new transaction) is verified afresh and written
    verifier = FakeVerifier()
    answers, _ = run_produce(11, produce_request(txn, "tid"), replicas=replicas, verifier=verifier)
    assert answers[0].error_code == ErrorCode.none
    assert answers[0].base_offset == 1
    assert p.has_open_transaction(PID, EPOCH)
    assert len(verifier.calls) == 1
    # its next batch needs no check
    txn = {0: idem(PID, EPOCH, 1, transactional=True)}
    answers, _ = run_produce(11, produce_request(txn, "tid"), replicas=replicas, verifier=verifier)
    assert answers[0].error_code == ErrorCode.none
    assert len(verifier.calls) == 1


def test_several_producers_in_one_request_are_refused() -> None:
    replicas = FakeReplicas({("t", 0): FakePartition(0), ("t", 1): FakePartition(1)})
    req = produce_request({0: batch(True), 1: batch(True, producer_id=PID + 1)}, "tid")
    answers, _ = run_produce(11, req, replicas=replicas)
    assert {a.error_code for a in answers.values()} == {ErrorCode.invalid_producer_id_mapping}


def test_acks_0_refusal_closes_the_connection() -> None:
    replicas = FakeReplicas({("t", 0): FakePartition(0)})
    ctx = context(11, replicas, authorizer=FakeAuthorizer(allow_txn=False))

    async def main() -> Any:
        return await produce.handle(ctx, produce_request({0: batch(True)}, "tid", acks=0))

    with pytest.raises(ConnectionClosed):
        anyio.run(main)


@pytest.mark.parametrize(
    ("code", "version", "expected"),
    [
        (ErrorCode.producer_fenced, 11, ErrorCode.invalid_producer_epoch),
        (ErrorCode.transaction_abortable, 10, ErrorCode.invalid_txn_state),
        (ErrorCode.transaction_abortable, 11, ErrorCode.transaction_abortable),
        (ErrorCode.concurrent_transactions, 12, ErrorCode.not_enough_replicas),
        (ErrorCode.not_coordinator, 9, ErrorCode.not_enough_replicas),
        (ErrorCode.coordinator_load_in_progress, 9, ErrorCode.not_enough_replicas),
        (ErrorCode.invalid_producer_epoch, 9, ErrorCode.invalid_producer_epoch),
    ],
)
def test_verification_errors_map_as_kafka(code: int, version: int, expected: int) -> None:
    """Kafka's AddPartitionsToTxnManager and ReplicaManager.handleProduceAppend mappings."""
    assert produce.verification_error(3, code, version).error_code == expected


# -- Fetch ---------------------------------------------------------------------------------


class FakeLog:
    log_start_offset = 0

    def __init__(self) -> None:
        self.reads: list[tuple[int, int]] = []
        self.aborted_queries: list[tuple[int, int]] = []

    def read(self, offset: int, max_bytes: int, upper_bound: int, first: bool) -> bytes:
        self.reads.append((offset, upper_bound))
        return b"" if offset >= upper_bound else b"x" * 10

    def aborted_transactions(self, fetch_offset: int, upper: int) -> list[tuple[int, int]]:
        self.aborted_queries.append((fetch_offset, upper))
        return [(7, 12), (8, 30)]


@pytest.mark.parametrize("isolation", [0, 1])
def test_fetch_bounds_and_lso(isolation: int) -> None:
    partition = FakePartition(0, log=FakeLog())
    ctx = context(12, FakeReplicas({("t", 0): partition}))
    req = SimpleNamespace(isolation_level=isolation, rack_id="")
    p = SimpleNamespace(partition=0, fetch_offset=5, partition_max_bytes=1000)
    data = fetch._partition_data(ctx, req, partition, p, 1000, True)  # type: ignore[arg-type]
    assert (data.high_watermark, data.last_stable_offset) == (100, 60)
    assert partition.log.reads == [(5, 60 if isolation else 100)]
    if isolation:
        assert data.aborted_transactions == [AbortedTransaction(7, 12), AbortedTransaction(8, 30)]
        assert partition.log.aborted_queries == [(5, 60)]
    else:
        assert data.aborted_transactions is None
        assert partition.log.aborted_queries == []


def test_read_committed_at_the_lso_reads_nothing_and_lists_no_abort() -> None:
    partition = FakePartition(0, log=FakeLog())
    ctx = context(12, FakeReplicas({("t", 0): partition}))
    req = SimpleNamespace(isolation_level=1, rack_id="")
    p = SimpleNamespace(partition=0, fetch_offset=60, partition_max_bytes=1000)
    data = fetch._partition_data(ctx, req, partition, p, 1000, True)  # type: ignore[arg-type]
    assert data.records == b""
    assert data.aborted_transactions == []
    assert partition.log.aborted_queries == []


# -- ListOffsets ---------------------------------------------------------------------------


class FakeTimeLog:
    log_start_offset = 3

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int]:
        return (timestamp, timestamp)

    def max_timestamp(self) -> tuple[int, int]:
        return (80, 999)


@pytest.mark.parametrize(
    ("timestamp", "isolation", "expected"),
    [
        (offset_lookup.LATEST, 0, (100, -1)),
        (offset_lookup.LATEST, 1, (60, -1)),
        (offset_lookup.EARLIEST, 1, (3, -1)),
        (50, 1, (50, 50)),
        (70, 1, (-1, -1)),  # past the LSO: not visible to read_committed
        (70, 0, (70, 70)),
        (offset_lookup.MAX_TIMESTAMP, 1, (-1, -1)),
        (offset_lookup.MAX_TIMESTAMP, 0, (80, 999)),
    ],
)
def test_list_offsets_isolation(timestamp: int, isolation: int, expected: tuple) -> None:
    partition = FakePartition(0, log=FakeTimeLog())
    assert offset_lookup.lookup(partition, timestamp, isolation) == expected  # type: ignore[arg-type]


# -- DescribeProducers ---------------------------------------------------------------------


def test_describe_producers() -> None:
    entry = ProducerStateEntry(PID, EPOCH, last_timestamp=1234, coordinator_epoch=2)
    entry.batches.append(BatchMetadata(0, 9, 40, 49, 1234))
    entry.current_txn_first_offset = 40
    partition = FakePartition(0)
    partition.producers = SimpleNamespace(producers={PID: entry})  # type: ignore[attr-defined]
    replicas = FakeReplicas({("t", 0): partition})
    ctx = context(0, replicas, authorizer=FakeAuthorizer(denied_topics=["secret"]))
    req: Any = SimpleNamespace(  # the fields DescribeProducersRequest has
        topics=[
            SimpleNamespace(name="t", partition_indexes=[0, 1, 7]),
            SimpleNamespace(name="secret", partition_indexes=[0]),
            SimpleNamespace(name="gone", partition_indexes=[0]),
            SimpleNamespace(name="bad/name", partition_indexes=[0]),
        ]
    )

    async def main() -> Any:
        return await describe_producers.handle(ctx, req)

    response = anyio.run(main)
    assert isinstance(response, DescribeProducersResponse)
    t, secret, gone, bad = response.topics
    ok, follower_elsewhere, unknown = t.partitions
    assert ok.error_code == ErrorCode.none
    (state,) = ok.active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (PID, EPOCH, 9)
    assert (state.last_timestamp, state.coordinator_epoch) == (1234, 2)
    assert state.current_txn_start_offset == 40
    assert follower_elsewhere.error_code == ErrorCode.not_leader_or_follower
    assert unknown.error_code == ErrorCode.unknown_topic_or_partition
    assert secret.partitions[0].error_code == ErrorCode.topic_authorization_failed
    assert gone.partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    assert bad.partitions[0].error_code == ErrorCode.invalid_topic_exception
