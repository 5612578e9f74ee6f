"""Kafka Connect 4.3.1 in distributed mode on Rafka: two workers (tests/peers/connect.py) with
exactly-once source support (KIP-618) on a 3-broker cluster.

Connect keeps its configs, source offsets and statuses in compacted topics of replication
factor 3, coordinates its workers as a classic group of protocol type "connect", writes the
config topic and every source task's records with its offsets in transactions (transactional
ids `connect-cluster-<group.id>` and `<group.id>-<connector>-<task>`), fences a task's previous
producer when the task moves, and reads its topics with read_committed.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, IsolationLevel, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from cluster.local import LocalCluster
from tests.expect import present
from tests.integration.conftest import wait_for
from tests.peers.connect import ConnectError, ConnectWorker

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
WORKER_SETTINGS = {
    "exactly.once.source.support": "enabled",
    # Sink tasks see only committed transactions (Connect's consumers read uncommitted ones
    # by default).
    "consumer.isolation.level": "read_committed",
    # A dead worker is noticed after 6 s (the brokers' group.min.session.timeout.ms) and its
    # tasks reassigned 2 s later (Kafka's default waits 5 minutes for the worker to return).
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "scheduled.rebalance.max.delay.ms": "2000",
}


@pytest.fixture(scope="module")
def workers(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[ConnectWorker]]:
    """Two workers of one Connect cluster (group "connect") on the module's Rafka."""
    data = tmp_path_factory.mktemp("connect")
    pair = [
        ConnectWorker(data, f"worker-{i}", cluster.bootstrap, settings=WORKER_SETTINGS)
        for i in (1, 2)
    ]
    try:
        for worker in pair:
            worker.start()
        for worker in pair:
            worker.wait_ready()
        yield pair
    finally:
        for worker in pair:
            worker.stop()


def _create_topic(cluster: LocalCluster, topic: str) -> None:
    """One partition (the sink file keeps the source's order), three replicas."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)


def _append(path: Path, lines: range) -> None:
    with path.open("a") as f:
        f.write("".join(f"line-{i}\n" for i in lines))


def _wait_states(
    worker: ConnectWorker, name: str, state: str, on: set[str], timeout: float = 60
) -> list[str]:
    """Until the connector and its tasks are all in `state` on workers among `on`; their
    worker ids, the connector's first."""

    def check() -> list[str] | None:
        try:
            status = worker.status(name)
        except ConnectError:  # 404 until the connector's first status is written
            return None
        units = [status["connector"], *status["tasks"]]
        if status["tasks"] and all(u["state"] == state and u["worker_id"] in on for u in units):
            return [u["worker_id"] for u in units]
        return None

    return wait_for(check, timeout, f"{name} {state} on {sorted(on)}")


def test_rest_api_creates_pauses_resumes_restarts_and_deletes(
    cluster: LocalCluster, workers: list[ConnectWorker], tmp_path: Path
) -> None:
    w1, w2 = workers
    ids = {w1.worker_id, w2.worker_id}
    _create_topic(cluster, "rest-lines")
    source = tmp_path / "rest.txt"
    _append(source, range(3))
    config = {"connector.class": FILE_SOURCE, "file": str(source), "topic": "rest-lines"}

    # Any worker takes the request; one that is not the leader forwards it.
    created = w2.create("rest-source", config | {"tasks.max": "1"})
    assert created["name"] == "rest-source"
    assert created["type"] == "source"
    # The leader answers once it has read its write back; the other worker lists the
    # connector when it has read the config topic that far.
    wait_for(
        lambda: w1.connectors() == w2.connectors() == ["rest-source"], 30, "the connector listed"
    )
    with pytest.raises(ConnectError) as exists:
        w1.create("rest-source", config)
    assert exists.value.status == 409
    placed = _wait_states(w1, "rest-source", "RUNNING", ids)
    assert len(placed) == 2  # the connector and its one task
    assert _read(cluster, "rest-lines", 3) == [f"line-{i}" for i in range(3)]

    w1.pause("rest-source")
    _wait_states(w2, "rest-source", "PAUSED", ids)
    w2.resume("rest-source")
    _wait_states(w1, "rest-source", "RUNNING", ids)

    restarting = w1.restart("rest-source")
    assert restarting["connector"]["state"] == "RESTARTING", restarting
    assert [t["state"] for t in restarting["tasks"]] == ["RESTARTING"], restarting
    _wait_states(w2, "rest-source", "RUNNING", ids)

    w2.delete("rest-source")
    wait_for(lambda: w1.connectors() == w2.connectors() == [], 30, "the connector deleted")
    # Its statuses go with it: each worker drops them as it reads the tombstones back.
    wait_for(lambda: _status_code(w1, "rest-source") == 404, 30, "the status gone")


def test_exactly_once_file_pipeline_survives_kill_of_a_worker(
    cluster: LocalCluster, workers: list[ConnectWorker], tmp_path: Path
) -> None:
    """FileStreamSource -> topic -> FileStreamSink, the source in transactions of 2 s
    (`transaction.boundary=interval`). The worker running the source task is killed -9 while
    one of its transactions is open and lines keep being appended: the task moves to the
    other worker, its new producer fences the old one (aborting that transaction), and the
    task resumes from the offsets committed with the last transaction. The sink file ends
    equal to the source file, and the topic holds every line exactly once."""
    ids = {w.worker_id for w in workers}
    _create_topic(cluster, "eos-lines")
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    _append(source, range(500))
    workers[0].create(
        "eos-source",
        {
            "connector.class": FILE_SOURCE,
            "file": str(source),
            "topic": "eos-lines",
            "tasks.max": "1",
            "exactly.once.support": "required",
            "transaction.boundary": "interval",
            "transaction.boundary.interval.ms": "2000",
        },
    )
    workers[1].create(
        "eos-sink",
        {"connector.class": FILE_SINK, "file": str(sink), "topics": "eos-lines", "tasks.max": "1"},
    )
    source_at = _wait_states(workers[0], "eos-source", "RUNNING", ids)[1]
    sink_at = _wait_states(workers[0], "eos-sink", "RUNNING", ids)[1]
    # The assignor spreads the two tasks over the two workers: the kill below stops the
    # source task only (FileStreamSink is at-least-once: a killed sink task writes again what
    # it wrote after its last offset commit).
    assert source_at != sink_at, (source_at, sink_at)
    wait_for(lambda: _text(sink) == source.read_text(), 60, "the first 500 lines in the sink")

    victim = next(w for w in workers if w.worker_id == source_at)
    survivor = next(w for w in workers if w is not victim)
    writer = threading.Thread(target=_append_slowly, args=(source, range(500, 2500)))
    writer.start()
    try:
        _kill_inside_transaction(cluster, victim, "eos-lines")
    finally:
        writer.join()
    _wait_states(survivor, "eos-source", "RUNNING", {survivor.worker_id}, timeout=90)
    expected = source.read_text()
    wait_for(lambda: _text(sink) == expected, 90, "the sink file equal to the source file")

    committed = _read(cluster, "eos-lines", 2500)
    assert committed == [f"line-{i}" for i in range(2500)]
    # The transaction open at the kill was aborted: its records are in the log, unread.
    assert len(_read(cluster, "eos-lines", 2500, isolation="read_uncommitted")) > 2500

    victim.start()  # the killed worker comes back and rejoins the Connect cluster
    victim.wait_ready()
    assert victim.connectors() == ["eos-sink", "eos-source"]


def _append_slowly(path: Path, lines: range) -> None:
    """Lines appended 20 at a time, about 200 a second, as a live log file grows."""
    for start in range(lines.start, lines.stop, 20):
        _append(path, range(start, min(start + 20, lines.stop)))
        time.sleep(0.1)


def _kill_inside_transaction(cluster: LocalCluster, worker: ConnectWorker, topic: str) -> None:
    """kill -9 of `worker` while its source task has a transaction open with records in
    `topic` (the high watermark past the last stable offset): the JVM is frozen (SIGSTOP),
    checked, and killed, or let go and tried again."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    tp = TopicPartition(topic, 0)

    def transaction_open() -> bool:
        ends = {
            level: admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=level)[tp]
            .result(10)
            .offset
            for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED)
        }
        return ends[IsolationLevel.READ_UNCOMMITTED] > ends[IsolationLevel.READ_COMMITTED]

    def frozen_inside() -> bool:
        if not transaction_open():
            return False
        worker.signal(signal.SIGSTOP)
        if transaction_open():
            return True
        worker.signal(signal.SIGCONT)
        return False

    wait_for(frozen_inside, 60, f"a transaction of {worker.name} open in {topic}", interval=0.2)
    worker.kill()


def _read(
    cluster: LocalCluster, topic: str, at_least: int, isolation: str = "read_committed"
) -> list[str]:
    """The values of partition 0 of `topic` from its start to its end (the last stable offset
    for read_committed), once it holds at least `at_least` of them."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "test-reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    values: list[str] = []
    try:

        def read_to_end() -> bool:
            values.clear()
            consumer.assign([TopicPartition(topic, 0, 0)])
            while True:
                msg = consumer.poll(5)
                if msg is None:
                    return False
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        return len(values) >= at_least
                    raise RuntimeError(error)
                values.append(present(msg.value()).decode())

        wait_for(read_to_end, 60, f"{at_least} records in {topic}")
    finally:
        consumer.close()
    return values


def _status_code(worker: ConnectWorker, name: str) -> int:
    try:
        worker.status(name)
    except ConnectError as e:
        return e.status
    return 200


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""
