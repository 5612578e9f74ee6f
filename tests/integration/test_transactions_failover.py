"""Exactly-once through broker failures (3 brokers, RF 3, min.insync.replicas=2), with
confluent-kafka in-process.

A consume-transform-produce pipeline (read_committed consumer without auto-commit, one
transaction per batch of up to 50 records carrying its input offsets through
send_offsets_to_transaction) runs over input arriving at a steady rate while the broker
coordinating its transactional id, or the leader of one of its output partitions, is killed
with SIGKILL and later restarted. The pipeline
recovers as Kafka's documentation prescribes: a retriable error is retried, an abortable one
aborts the transaction and rewinds the consumer to its committed offsets, a fatal one (fenced)
makes a new producer whose InitProducerId aborts what the old one left open. Afterwards a
read_committed consumer of the output holds every input record exactly once.

The killed broker is never the coordinator of the pipeline's consumer group: librdkafka (2.16
and earlier) hangs in send_offsets_to_transaction, past its timeout, when the group
coordinator it cached is killed and drops out of the metadata (confluentinc/librdkafka#5511,
#5456; Apache Kafka answers the same way, so the client never recovers there either). Group
coordinator failover is tested in test_groups_clients.py.

A third test stops a transaction in PrepareCommit (its only output partition offline, so no
marker can be written), kills the coordinator's broker, and checks that the new leader of the
`__transaction_state` partition loads the transaction and completes the commit.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, TypeVar

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from cluster import admin as rafka_admin
from cluster import admin_transactions
from cluster.local import LocalCluster
from tests.expect import present
from tests.integration.conftest import running_cluster, wait_for

FAST: dict[str, Any] = {  # broker settings, for running_cluster(**FAST)
    "broker_session_timeout_ms": 2000,
    "broker_heartbeat_interval_ms": 300,
    "replica_lag_time_max_ms": 2000,
    "leader_imbalance_check_interval_seconds": 1,
}
T = TypeVar("T")

RECORDS = 3000  # input records of a pipeline run
RATE = 300  # input records/s: the run lasts about 10 s, the failure and restart within it
BATCH = 50  # records per transaction (at most)
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("txn-failover"), min_insync_replicas=2, **FAST
    ) as c:
        yield c


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: LocalCluster) -> Iterator[None]:
    """Each test starts and ends with every node running."""
    yield
    cluster.start()  # starts again whatever a test killed
    wait_for(lambda: len(admin(cluster).list_topics(timeout=5).brokers) == 3, what="3 live brokers")


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def create(cluster: LocalCluster, topic: str, partitions: int, rf: int = 3, **configs: str) -> None:
    a = admin(cluster)
    a.create_topics([NewTopic(topic, partitions, rf, config=configs)])[topic].result(30)

    def led() -> bool:
        md = a.list_topics(topic, timeout=5).topics.get(topic)
        return (
            md is not None
            and md.error is None
            and all(p.leader >= 0 for p in md.partitions.values())
        )

    wait_for(led, what=f"leaders of {topic}")


def leader_of(cluster: LocalCluster, topic: str, partition: int) -> int:
    return admin(cluster).list_topics(topic, timeout=10).topics[topic].partitions[partition].leader


def rafka_brokers(cluster: LocalCluster) -> rafka_admin.Brokers:
    return rafka_admin.Brokers(cluster.bootstrap)


def transaction_coordinator(cluster: LocalCluster, transactional_id: str) -> int:
    """FindCoordinator key type 1: the broker leading the id's `__transaction_state` partition
    (the partition is created on first use, hence the retries)."""

    def find() -> int | None:
        found = rafka_admin.find_coordinators(
            rafka_brokers(cluster), [transactional_id], rafka_admin.TRANSACTION_KEY
        )[transactional_id]
        return None if isinstance(found, rafka_admin.AdminError) else found[0]

    return wait_for(find, 60, f"the coordinator of {transactional_id}")


def group_coordinator(cluster: LocalCluster, group: str) -> int:
    """FindCoordinator key type 0 (creates `__consumer_offsets` on first use)."""

    def find() -> int | None:
        found = rafka_admin.find_coordinators(rafka_brokers(cluster), [group])[group]
        return None if isinstance(found, rafka_admin.AdminError) else found[0]

    return wait_for(find, 60, f"the coordinator of {group}")


def spared_group(cluster: LocalCluster, transactional_id: str) -> tuple[str, int]:
    """A consumer group for the pipeline of `transactional_id` whose coordinator is not the
    transaction coordinator (which one test kills), and that coordinator: no test kills it
    (see the module's docstring)."""
    txn = transaction_coordinator(cluster, transactional_id)
    for n in range(100):
        group = f"{transactional_id}-group-{n}"
        coordinator = group_coordinator(cluster, group)
        if coordinator != txn:
            return group, coordinator
    raise AssertionError(f"every group's coordinator is broker {txn}")


def describe(
    cluster: LocalCluster, transactional_id: str
) -> admin_transactions.TransactionDescription | None:
    """DescribeTransactions at the id's current coordinator (None while there is none)."""
    try:
        d = admin_transactions.describe_transactions(rafka_brokers(cluster), [transactional_id], 1)
    except OSError:
        return None
    found = d[transactional_id]
    return found if isinstance(found, admin_transactions.TransactionDescription) else None


def value(i: int) -> bytes:
    return b"%06d" % i


class Feeder:
    """The input, `n` records at `rate` records/s by an idempotent producer in a thread: the
    pipeline keeps working through the failure and the restart instead of racing ahead."""

    def __init__(self, cluster: LocalCluster, topic: str, n: int, rate: float) -> None:
        self.unsent: int | None = None
        self._args = (cluster.bootstrap, topic, n, rate)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        bootstrap, topic, n, rate = self._args
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        start = time.monotonic()
        for i in range(n):
            while (ahead := start + i / rate - time.monotonic()) > 0:
                p.poll(ahead)  # pacing: serves delivery reports meanwhile
            p.produce(topic, value(i), key=value(i), partition=i % PARTITIONS)
        self.unsent = p.flush(120)

    def join(self) -> int | None:
        """Records never acknowledged (None: the feeder did not finish)."""
        self._thread.join(180)
        return self.unsent


def read_committed(cluster: LocalCluster, topic: str, partitions: int, expect: int) -> list[bytes]:
    """Every record a read_committed consumer sees, up to the end (LSO) of every partition."""
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"verify-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and not (
            len(out) >= expect and len(at_end) == partitions
        ):
            for m in c.consume(500, 0.5):
                error = m.error()
                if error is None:
                    out.append(present(m.value()))
                    at_end.discard(present(m.partition()))
                elif error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(present(m.partition()))
    finally:
        c.close()
    return out


class Pipeline:
    """Consume-transform-produce in a thread: each batch of input becomes one transaction with
    its output and its input offsets; errors are handled as Kafka's documentation says."""

    def __init__(
        self,
        cluster: LocalCluster,
        source: str,
        sink: str,
        transactional_id: str,
        group: str,
        total: int,
    ) -> None:
        self.cluster, self.source, self.sink = cluster, source, sink
        self.transactional_id, self.group, self.total = transactional_id, group, total
        self.committed: dict[tuple[str, int], int] = {}  # input offsets committed so far
        # the errors the pipeline recovered from: "phase: ERROR" -> (count, first message)
        self.recovered: dict[str, tuple[int, str]] = {}
        self.failure: BaseException | None = None
        self.phase = "start"  # the call the pipeline is in, for a timeout's message
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=transactional_id, daemon=True)

    @property
    def progress(self) -> int:
        """Input records whose transformation is committed (input offsets count records)."""
        return sum(self.committed.values())

    @property
    def done(self) -> bool:
        return self.progress >= self.total or self.failure is not None

    def start(self) -> None:
        self._thread.start()

    def wait(self, check: Callable[[], bool], timeout: float, what: str) -> None:
        """Until `check()` or the pipeline is done; on timeout, where the pipeline is stuck."""
        try:
            wait_for(lambda: check() or self.done, timeout, what)
        except AssertionError as e:
            raise AssertionError(
                f"{e}: pipeline at {self.progress}/{self.total} records, in {self.phase}, "
                f"recovered from {self.recovered}"
            ) from None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def _producer(self) -> Producer:
        p = Producer(
            {
                "bootstrap.servers": self.cluster.bootstrap,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": 30_000,
                "message.timeout.ms": 30_000,
                # librdkafka's transaction log, shown with a failure
                "debug": "eos",
            }
        )
        self._retry(lambda: p.init_transactions(30))
        return p

    def _replace(self, old: Producer) -> Producer:
        """A new incarnation: its InitProducerId fences the old one and aborts what it left."""
        old.purge()  # nothing of a failed producer is to be delivered, nor waited for
        self.phase = "init_transactions"
        return self._producer()

    def _run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.cluster.bootstrap,
                "group.id": self.group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe([self.source])
            producer = self._producer()
            while self.progress < self.total and not self._stop.is_set():
                batch = [m for m in consumer.consume(BATCH, 0.5) if m.error() is None]
                if not batch:
                    continue
                try:
                    self._transact(producer, consumer, batch)
                except KafkaException as e:
                    error: KafkaError = e.args[0]
                    self._note(error)
                    if error.txn_requires_abort():
                        self.phase = "abort_transaction"
                        try:
                            self._retry(partial(producer.abort_transaction, 60))
                        except KafkaException as abort_error:
                            if not abort_error.args[0].fatal():
                                raise
                            producer = self._replace(producer)
                    else:  # fatal (fenced, epoch exhausted): a new incarnation
                        producer = self._replace(producer)
                    self._rewind(consumer)
        except BaseException as e:
            self.failure = e
        finally:
            consumer.close()

    def _transact(self, producer: Producer, consumer: Consumer, batch: list[Message]) -> None:
        self.phase = "begin_transaction"
        producer.begin_transaction()
        for m in batch:
            value, partition = present(m.value()), present(m.partition())
            producer.produce(self.sink, b"T" + value, key=m.key(), partition=partition)
        positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
        metadata = consumer.consumer_group_metadata()
        self.phase = "send_offsets_to_transaction"
        self._retry(lambda: producer.send_offsets_to_transaction(positions, metadata, 60))
        self.phase = "commit_transaction"
        self._retry(lambda: producer.commit_transaction(60))
        self.phase = "consume"
        self.committed.update({(tp.topic, tp.partition): tp.offset for tp in positions})

    def _rewind(self, consumer: Consumer) -> None:
        """Back to the committed input offsets: the aborted batch is read again."""
        self.phase = "rewind"
        committed = self._retry(lambda: consumer.committed(consumer.assignment(), 30))
        for tp in committed:
            consumer.seek(
                TopicPartition(
                    tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                )
            )

    def _retry(self, call: Callable[[], T], timeout: float = 180) -> T:
        """`call()` again while it fails with a retriable error (for `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return call()
            except KafkaException as e:
                error: KafkaError = e.args[0]
                if not error.retriable() or time.monotonic() > deadline:
                    raise
                self._note(error)

    def _note(self, error: KafkaError) -> None:
        key = f"{self.phase}: {error.name()}"
        count, first = self.recovered.get(key, (0, error.str()))
        self.recovered[key] = (count + 1, first)


def run_through_failure(
    cluster: LocalCluster, name: str, victim: Callable[[str, str, int], int]
) -> dict[str, tuple[int, str]]:
    """Run a pipeline over RECORDS records arriving at RATE; a third of the way in, kill -9
    the broker `victim(transactional_id, sink, group_coordinator)` (never the group
    coordinator); restart it once the pipeline has moved on without it (leadership then moves
    back to it: another failover, while input still arrives); check the output. The errors
    the pipeline recovered from are returned."""
    source, sink, tid = f"{name}-in", f"{name}-out", f"{name}-etl"
    create(cluster, source, PARTITIONS)
    create(cluster, sink, PARTITIONS)
    group, coordinator = spared_group(cluster, tid)
    feeder = Feeder(cluster, source, RECORDS, RATE)
    pipeline = Pipeline(cluster, source, sink, tid, group, RECORDS)
    pipeline.start()
    try:
        pipeline.wait(lambda: pipeline.progress >= RECORDS // 3, 120, "a third of the input")
        assert pipeline.failure is None, pipeline.recovered
        killed = victim(tid, sink, coordinator)
        assert killed != group_coordinator(cluster, group), "the group coordinator is spared"
        before = pipeline.progress
        cluster.kill(f"broker-{killed}")
        pipeline.wait(
            lambda: pipeline.progress >= min(before + 2 * BATCH, RECORDS),
            120,
            f"progress without broker {killed}",
        )
        cluster.start_node(f"broker-{killed}")
        cluster.wait_ready()
        pipeline.wait(lambda: False, 240, "the end")
    finally:
        pipeline.stop()
    assert feeder.join() == 0, "the input was not all written"
    if pipeline.failure is not None:
        raise AssertionError(f"pipeline failed after {pipeline.recovered}") from pipeline.failure

    out = read_committed(cluster, sink, PARTITIONS, RECORDS)
    expected = {b"T" + value(i) for i in range(RECORDS)}
    duplicates = len(out) - len(set(out))
    why = (
        f"{len(out)} records, {duplicates} duplicates, {len(expected - set(out))} missing; "
        f"pipeline recovered from {pipeline.recovered}"
    )
    assert len(out) == RECORDS, why
    assert set(out) == expected, why
    return pipeline.recovered


def test_coordinator_broker_killed_mid_pipeline(cluster: LocalCluster) -> None:
    recovered = run_through_failure(
        cluster,
        "coord",
        lambda tid, _sink, _group_coordinator: transaction_coordinator(cluster, tid),
    )
    print(f"coordinator failover: the pipeline recovered from {recovered}")


def test_output_leader_killed_mid_pipeline(cluster: LocalCluster) -> None:
    def output_leader(tid: str, sink: str, group_coordinator: int) -> int:
        """The leader of an output partition, one that is not the transaction coordinator when
        there is such (that case is the test above), never the group coordinator."""
        coordinator = transaction_coordinator(cluster, tid)
        leaders = [leader_of(cluster, sink, p) for p in range(PARTITIONS)]
        candidates = [b for b in leaders if b != group_coordinator]
        assert candidates, f"every output partition is led by the group coordinator {leaders}"
        return next((b for b in candidates if b != coordinator), candidates[0])

    recovered = run_through_failure(cluster, "leader", output_leader)
    print(f"output leader failover: the pipeline recovered from {recovered}")


def test_prepare_commit_completes_on_new_coordinator(cluster: LocalCluster) -> None:
    """PrepareCommit is persisted but no marker can be written (the only output partition has
    its only replica on a killed broker); the coordinator's broker is killed; the new leader of
    the `__transaction_state` partition loads the transaction in PrepareCommit and, once the
    output partition is back, writes the markers and completes the commit."""
    topic = "prepared-out"
    create(cluster, topic, 1, rf=1, **{"min.insync.replicas": "1"})
    output = leader_of(cluster, topic, 0)
    tid = next(
        t
        for t in (f"prepared-{i}" for i in range(200))
        if transaction_coordinator(cluster, t) != output
    )
    coordinator = transaction_coordinator(cluster, tid)

    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "linger.ms": 0}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    records = [b"prepared-%d" % i for i in range(10)]
    for r in records:
        producer.produce(topic, r, partition=0)
    assert producer.flush(30) == 0

    cluster.kill(f"broker-{output}")
    wait_for(lambda: leader_of(cluster, topic, 0) < 0, what=f"{topic}-0 offline")
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            producer.commit_transaction(180)
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    committer = threading.Thread(target=commit, daemon=True)
    committer.start()

    def prepared_at(broker: int) -> admin_transactions.TransactionDescription | None:
        d = describe(cluster, tid)
        return d if d and d.state == "PrepareCommit" and d.coordinator == broker else None

    before = wait_for(
        lambda: prepared_at(coordinator), 60, f"PrepareCommit at broker {coordinator}"
    )
    assert before.partitions == [(topic, 0)]

    cluster.kill(f"broker-{coordinator}")
    (successor,) = set(range(1, 4)) - {output, coordinator}
    after = wait_for(
        lambda: prepared_at(successor),
        60,
        f"broker {successor} to load the transaction in PrepareCommit",
    )
    assert (after.producer_id, after.producer_epoch) == (before.producer_id, before.producer_epoch)
    assert after.partitions == [(topic, 0)]

    cluster.start_node(f"broker-{output}")  # the markers can be written now

    def completed() -> admin_transactions.TransactionDescription | None:
        d = describe(cluster, tid)
        return d if d and d.state == "CompleteCommit" else None

    done = wait_for(completed, 120, "the new coordinator to complete the commit")
    assert done.coordinator != coordinator
    assert done.partitions == []
    committer.join(180)
    assert outcome == [None], outcome  # the client's commit succeeds, retried at the new one
    assert sorted(read_committed(cluster, topic, 1, len(records))) == sorted(records)
