"""Transactions seen from the data plane, driven by hand over the wire: InitProducerId with a
transactional id, AddPartitionsToTxn, transactional Produce, EndTxn (abort, then commit), and
what consumers and operators see meanwhile — read_committed Fetch (last stable offset, aborted
transactions, a long poll woken by the commit), ListOffsets per isolation level,
DescribeProducers, and the KIP-890 check of a batch for a partition outside the transaction."""

from __future__ import annotations

import select
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from dataplane.log.batch import ATTR_TRANSACTIONAL
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.kafka_wire import WireClient, builder
from tests.unit.log.batches import make_batch, values_of

PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR = 0, 1, 2, 3, 10
INIT_PRODUCER_ID, ADD_PARTITIONS, END_TXN, DESCRIBE_PRODUCERS = 22, 24, 26, 61
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
TOPIC = "txn"

# Answers that only mean "not yet": the coordinator is loading or finishing the last transaction.
_RETRY = {
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.concurrent_transactions,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("txn-dataplane"), brokers=2, metas=1) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 2)])[TOPIC].result(30)
        yield c


def _ports(cluster: LocalCluster) -> tuple[dict[int, int], dict[int, int]]:
    """(broker id -> port, partition -> leader id) of the test topic, once every partition
    has a leader."""

    def metadata() -> tuple[dict[int, int], dict[int, int]] | None:
        with WireClient(cluster.nodes["broker-1"].port) as w:
            md = w.call(
                METADATA,
                12,
                topics=(builder(METADATA, 12).MetadataRequestTopic(name=TOPIC, topic_id=None),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        leaders = {p.partition_index: p.leader_id for p in md.topics[0].partitions}
        if not leaders or min(leaders.values()) < 0:
            return None
        return {b.node_id: b.port for b in md.brokers}, leaders

    return wait_for(metadata, what=f"leaders of {TOPIC}")


def leader(cluster: LocalCluster, partition: int) -> WireClient:
    ports, leaders = _ports(cluster)
    return WireClient(ports[leaders[partition]])


def coordinator_port(cluster: LocalCluster, transactional_id: str) -> int:
    def find() -> int | None:
        with WireClient(cluster.nodes["broker-1"].port) as w:
            r = w.call(FIND_COORDINATOR, 4, key_type=1, coordinator_keys=(transactional_id,))
        (c,) = r.coordinators
        return c.port if c.error_code == ErrorCode.none else None

    port: int = wait_for(find, what=f"the coordinator of {transactional_id!r}")
    return port


def coordinator(cluster: LocalCluster, transactional_id: str) -> WireClient:
    return WireClient(coordinator_port(cluster, transactional_id))


def retrying(call: Any, what: str) -> Any:
    """`call()` until its error code is not one that means "not yet"."""

    def attempt() -> Any:
        r = call()
        return None if r.error_code in _RETRY else r

    return wait_for(attempt, what=what)


def init_producer(w: WireClient, transactional_id: str) -> tuple[int, int]:
    r = retrying(
        lambda: w.call(
            INIT_PRODUCER_ID, 4, transactional_id=transactional_id, transaction_timeout=60000
        ),
        f"InitProducerId of {transactional_id!r}",
    )
    assert r.error_code == ErrorCode.none, r
    return r.producer_id, r.producer_epoch


def add_partitions(w: WireClient, tid: str, pid: int, epoch: int, partitions: list[int]) -> None:
    b = builder(ADD_PARTITIONS, 3)
    topic = b.AddPartitionsToTxnTopic(name=TOPIC, partitions=tuple(partitions))

    def call() -> Any:
        r = w.call(
            ADD_PARTITIONS,
            3,
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=(topic,),
        )
        codes = {
            p.partition_error_code
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }
        return None if codes & _RETRY else codes

    assert wait_for(call, what="AddPartitionsToTxn") == {ErrorCode.none}


def end_txn(w: WireClient, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> Any:
    r = retrying(
        lambda: w.call(
            END_TXN,
            version,
            transactional_id=tid,
            producer_id=pid,
            producer_epoch=epoch,
            committed=commit,
        ),
        "EndTxn",
    )
    assert r.error_code == ErrorCode.none, r
    return r


def txn_batch(pid: int, epoch: int, sequence: int, count: int) -> bytes:
    return make_batch(
        values_of(count),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        extra_attributes=ATTR_TRANSACTIONAL,
    )


def produce(
    w: WireClient,
    partition: int,
    records: bytes,
    transactional_id: str | None = None,
    version: int = 11,
) -> Any:
    b = builder(PRODUCE, version)
    data = b.TopicProduceData(
        name=TOPIC, partition_data=(b.PartitionProduceData(index=partition, records=records),)
    )
    r = w.call(
        PRODUCE,
        version,
        transactional_id=transactional_id,
        acks=-1,
        timeout=10000,
        topic_data=(data,),
    )
    return r.responses[0].partition_responses[0]


def send_fetch(w: WireClient, partition: int, offset: int, isolation: int, max_wait: int) -> int:
    """Send a Fetch v12 of one partition; its correlation id (see `fetch_answer`)."""
    b = builder(FETCH, 12)
    parts = (
        b.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20),
    )
    return w.send(
        FETCH,
        12,
        max_wait=max_wait,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=isolation,
        topics=(b.FetchTopic(topic=TOPIC, partitions=parts),),
        forgotten_topics_data=(),
    )


def fetch_answer(w: WireClient, correlation_id: int) -> Any:
    (part,) = w.receive(FETCH, 12, correlation_id).responses[0].partitions
    assert part.error_code == ErrorCode.none, part
    return part


def fetch(w: WireClient, partition: int, offset: int, isolation: int) -> Any:
    return fetch_answer(w, send_fetch(w, partition, offset, isolation, 0))


def latest(w: WireClient, partition: int, isolation: int) -> int:
    b = builder(LIST_OFFSETS, 8)
    topic = b.ListOffsetsTopic(
        name=TOPIC, partitions=(b.ListOffsetsPartition(partition_index=partition, timestamp=-1),)
    )
    r = w.call(LIST_OFFSETS, 8, replica_id=-1, isolation_level=isolation, topics=(topic,))
    (part,) = r.topics[0].partitions
    assert part.error_code == ErrorCode.none, part
    return part.offset


def producers(w: WireClient, partition: int) -> dict[int, Any]:
    b = builder(DESCRIBE_PRODUCERS, 0)
    r = w.call(
        DESCRIBE_PRODUCERS,
        0,
        topics=(b.TopicRequest(name=TOPIC, partition_indexes=(partition,)),),
    )
    (part,) = r.topics[0].partitions
    assert part.error_code == ErrorCode.none, part
    return {p.producer_id: p for p in part.active_producers}


def offsets(w: WireClient, partition: int) -> tuple[int, int]:
    """(high watermark, last stable offset) as a fetch reports them."""
    part = fetch(w, partition, 0, READ_UNCOMMITTED)
    return part.high_watermark, part.last_stable_offset


def test_abort_then_commit(cluster: LocalCluster) -> None:
    tid = "h2-abort-commit"
    with coordinator(cluster, tid) as c, leader(cluster, 0) as w:
        pid, epoch = init_producer(c, tid)
        plain = make_batch(values_of(2))
        start = produce(w, 0, plain).base_offset
        first = txn_batch(pid, epoch, 0, 3)

        # An open transaction holds the LSO at its first offset.
        add_partitions(c, tid, pid, epoch, [0])
        part = produce(w, 0, first, tid)
        assert part.error_code == ErrorCode.none, part
        txn_start = part.base_offset
        assert txn_start == start + 2
        wait_for(lambda: offsets(w, 0)[0] == txn_start + 3, what="the batch replicated")
        committed_view = fetch(w, 0, start, READ_COMMITTED)
        assert (committed_view.high_watermark, committed_view.last_stable_offset) == (
            txn_start + 3,
            txn_start,
        )
        assert len(committed_view.records) == len(plain)  # nothing past the LSO
        assert list(committed_view.aborted_transactions) == []
        everything = fetch(w, 0, start, READ_UNCOMMITTED)
        assert everything.last_stable_offset == txn_start  # the real LSO in both levels
        assert everything.aborted_transactions is None
        assert len(everything.records) == len(plain) + len(first)
        assert latest(w, 0, READ_COMMITTED) == txn_start
        assert latest(w, 0, READ_UNCOMMITTED) == txn_start + 3
        state = producers(w, 0)[pid]
        assert (state.producer_epoch, state.last_sequence) == (epoch, 2)
        assert state.current_txn_start_offset == txn_start

        # Abort: the marker (one offset) ends the transaction; read_committed learns of it.
        end_txn(c, tid, pid, epoch, commit=False)
        marker = txn_start + 3
        wait_for(lambda: offsets(w, 0) == (marker + 1, marker + 1), what="the abort marker")
        after = fetch(w, 0, start, READ_COMMITTED)
        assert [(a.producer_id, a.first_offset) for a in after.aborted_transactions] == [
            (pid, txn_start)
        ]
        assert len(after.records) > len(plain) + len(first)  # the batches and the marker
        assert producers(w, 0)[pid].current_txn_start_offset == -1
        assert latest(w, 0, READ_COMMITTED) == marker + 1

        # Commit, while a read_committed consumer waits at the LSO: the commit wakes it.
        add_partitions(c, tid, pid, epoch, [0])
        second = txn_batch(pid, epoch, 3, 2)
        part = produce(w, 0, second, tid)
        assert part.error_code == ErrorCode.none, part
        assert part.base_offset == marker + 1
        with leader(cluster, 0) as consumer:
            parked = send_fetch(consumer, 0, marker + 1, READ_COMMITTED, max_wait=20000)
            # nothing is stable past the LSO: the fetch stays parked (no answer in 0.5 s)
            assert select.select([consumer.sock], [], [], 0.5)[0] == []
            began = time.monotonic()
            end_txn(c, tid, pid, epoch, commit=True)
            woken = fetch_answer(consumer, parked)
            assert time.monotonic() - began < 15  # woken by the commit, not by max_wait
        assert woken.records
        assert list(woken.aborted_transactions) == []
        end = marker + 1 + 2 + 1
        wait_for(lambda: offsets(w, 0) == (end, end), what="the commit marker")
        assert latest(w, 0, READ_COMMITTED) == latest(w, 0, READ_UNCOMMITTED) == end


def test_partition_outside_the_transaction_is_refused(cluster: LocalCluster) -> None:
    """KIP-890 part 1: the leader asks the coordinator before a transaction's first batch."""
    tid = "h2-not-added"
    with coordinator(cluster, tid) as c, leader(cluster, 1) as w:
        pid, epoch = init_producer(c, tid)
        before = offsets(w, 1)
        part = produce(w, 1, txn_batch(pid, epoch, 0, 1), tid)
        # Kafka's answer to Produce v11 (older versions get INVALID_TXN_STATE)
        assert part.error_code == ErrorCode.transaction_abortable, part
        assert offsets(w, 1) == before
        assert pid not in producers(w, 1)


def test_transactional_batch_needs_a_transactional_id(cluster: LocalCluster) -> None:
    with leader(cluster, 1) as w:
        part = produce(w, 1, txn_batch(123456, 0, 0, 1), None)
        assert part.error_code == ErrorCode.transactional_id_authorization_failed, part


def test_transaction_version_2_adds_the_partition_on_produce(cluster: LocalCluster) -> None:
    """Produce v12 (KIP-890 part 2): no AddPartitionsToTxn, the leader has the coordinator add
    the partition; EndTxn v5 then commits it (and bumps the epoch)."""
    tid = "h2-tv2"
    with coordinator(cluster, tid) as c, leader(cluster, 1) as w:
        pid, epoch = init_producer(c, tid)
        part = produce(w, 1, txn_batch(pid, epoch, 0, 2), tid, version=12)
        assert part.error_code == ErrorCode.none, part
        wait_for(
            lambda: offsets(w, 1)[1] == part.base_offset, what="the LSO held by the transaction"
        )
        r = end_txn(c, tid, pid, epoch, commit=True, version=5)
        assert (r.producer_id, r.producer_epoch) == (pid, epoch + 1)
        wait_for(lambda: len(set(offsets(w, 1))) == 1, what="the commit marker")
        assert fetch(w, 1, part.base_offset, READ_COMMITTED).records


def test_a_verification_past_its_deadline_drops_no_connection(cluster: LocalCluster) -> None:
    """Regression: the leader's KIP-890 check of a transaction's first batch asks the
    coordinator with a 1 s deadline; a coordinator that does not answer in time (here frozen
    with SIGSTOP; in MirrorMaker runs, busy) made grpc.aio raise its own CancelledError in the
    leader, which escaped the deadline and silently cancelled the leader's acceptor: every
    client connection dropped and no new one was answered. Now the produce gets
    NOT_ENOUGH_REPLICAS (the producer retries) and the leader serves on. Last in the module:
    it freezes a broker for a moment."""
    ports, leaders = _ports(cluster)
    tid, partition = next(
        (tid, p)
        for tid in (f"stall-{i}" for i in range(100))
        for p in (0, 1)
        if coordinator_port(cluster, tid) != ports[leaders[p]]
    )
    frozen = next(
        name
        for name, node in cluster.nodes.items()
        if name.startswith("broker-") and node.port == coordinator_port(cluster, tid)
    )
    with (
        coordinator(cluster, tid) as c,
        leader(cluster, partition) as w,
        leader(cluster, partition) as bystander,
    ):
        pid, epoch = init_producer(c, tid)
        cluster.signal_node(frozen, signal.SIGSTOP)
        try:
            part = produce(w, partition, txn_batch(pid, epoch, 0, 1), tid)
        finally:
            cluster.signal_node(frozen, signal.SIGCONT)
        assert part.error_code == ErrorCode.not_enough_replicas, part
        assert offsets(bystander, partition)  # the other connection is served on
    with leader(cluster, partition) as newcomer:
        assert offsets(newcomer, partition)  # and new ones are answered
