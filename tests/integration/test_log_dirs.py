"""Several log directories per broker (log.dirs): placement, DescribeLogDirs, AlterReplicaLogDirs
while a producer writes, and a failed directory whose replicas go offline while the broker
keeps serving the others. Broker 1 of a 3-broker cluster has two log directories.

confluent-kafka's AdminClient has no DescribeLogDirs/AlterReplicaLogDirs (librdkafka lacks
them), so those requests go over the wire at each version; the Java Admin client's are in
test_admin_clients.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.local import LocalCluster, free_base_port
from tests.expect import present
from tests.integration.conftest import wait_for
from tests.integration.kafka_wire import WireClient, builder, topic_metadata

DESCRIBE_LOG_DIRS, ALTER_REPLICA_LOG_DIRS = 35, 34
NONE, KAFKA_STORAGE_ERROR, LOG_DIR_NOT_FOUND, REPLICA_NOT_AVAILABLE = 0, 56, 57, 9


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    tmp = tmp_path_factory.mktemp("logdirs")
    c = LocalCluster(3, 1, tmp, free_base_port(3, 1), {"default.replication.factor": "3"})
    config = c.nodes["broker-1"].config_file
    dirs = f"{tmp / 'broker-1-a'},{tmp / 'broker-1-b'}"
    config.write_text(
        "".join(
            f"log.dirs={dirs}\n" if line.startswith("log.dirs=") else line + "\n"
            for line in config.read_text().splitlines()
        )
    )
    try:
        c.start()
        yield c
    finally:
        c.stop()


def dir_a(cluster: LocalCluster) -> Path:
    return cluster.data_dir / "broker-1-a"


def dir_b(cluster: LocalCluster) -> Path:
    return cluster.data_dir / "broker-1-b"


def broker_1(cluster: LocalCluster) -> WireClient:
    return WireClient(cluster.nodes["broker-1"].port)


def describe(cluster: LocalCluster, version: int = 4) -> dict[str, Any]:
    """log dir -> its DescribeLogDirsResult, from broker 1."""
    with broker_1(cluster) as c:
        r = c.call(DESCRIBE_LOG_DIRS, version, topics=None)
    if version >= 3:
        assert r.error_code == NONE
    return {d.log_dir: d for d in r.results}


def replicas_in(result: Any, topic: str) -> dict[int, Any]:
    return {p.partition_index: p for t in result.topics if t.name == topic for p in t.partitions}


def create_topic(cluster: LocalCluster, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config=configs)], operation_timeout=30)[
        name
    ].result(60)
    wait_for(
        lambda: (
            len([p for d in describe(cluster).values() for p in replicas_in(d, name).values()])
            == partitions
        ),
        what=f"broker 1 to open the {partitions} replicas of {name}",
    )


def produce(
    cluster: LocalCluster, topic: str, count: int, size: int = 100, rounds: int = 1, **where: Any
) -> None:
    """``count`` records in ``rounds`` flushes (so in at least that many batches)."""
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    errors: list[Any] = []
    for i in range(count):
        producer.produce(
            topic,
            value=b"x" * size,
            key=str(i).encode(),
            on_delivery=lambda e, _m: errors.append(e) if e else None,
            **where,
        )
        producer.poll(0)
        if (i + 1) % max(count // rounds, 1) == 0:
            assert producer.flush(60) == 0
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def test_partitions_spread_over_both_dirs_and_described_at_every_version(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "spread", 6)
    produce(cluster, "spread", 600)
    a, b = str(dir_a(cluster)), str(dir_b(cluster))
    dirs = describe(cluster)
    assert set(dirs) == {a, b}
    in_a, in_b = replicas_in(dirs[a], "spread"), replicas_in(dirs[b], "spread")
    # new logs go to the directory with the fewest: both get some, none is in both
    assert in_a
    assert in_b
    assert not set(in_a) & set(in_b)
    assert set(in_a) | set(in_b) == set(range(6))
    for d in (dirs[a], dirs[b]):
        assert d.error_code == NONE
        assert d.total_bytes > 0
        assert 0 < d.usable_bytes <= d.total_bytes
    sizes = [p.partition_size for p in [*in_a.values(), *in_b.values()]]
    assert sum(sizes) > 600 * 100
    assert all(p.offset_lag == 0 for p in in_a.values())
    assert not any(p.is_future_key for p in [*in_a.values(), *in_b.values()])
    for partition in in_a:  # on disk where it is described
        assert (dir_a(cluster) / f"spread-{partition}").is_dir()
        assert not (dir_b(cluster) / f"spread-{partition}").exists()
    for version in range(4):
        old = describe(cluster, version)
        assert set(old) == {a, b}
        assert replicas_in(old[a], "spread").keys() == in_a.keys()
    # only the partitions asked for
    with broker_1(cluster) as c:
        b35 = builder(DESCRIBE_LOG_DIRS, 4)
        r = c.call(
            DESCRIBE_LOG_DIRS,
            4,
            topics=(b35.DescribableLogDirTopic(topic="spread", partitions=(0,)),),
        )
    assert [
        (t.name, [p.partition_index for p in t.partitions]) for d in r.results for t in d.topics
    ] == [("spread", [0])]
    # the command line says the same
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cluster.cli",
            "logdirs",
            "describe",
            "--broker",
            "1",
            "-b",
            cluster.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert a in out
    assert b in out
    assert "spread-0" in out


def alter(
    cluster: LocalCluster, path: str, topic: str, partitions: list[int], version: int = 2
) -> dict[int, int]:
    b34 = builder(ALTER_REPLICA_LOG_DIRS, version)
    with broker_1(cluster) as c:
        r = c.call(
            ALTER_REPLICA_LOG_DIRS,
            version,
            dirs=(
                b34.AlterReplicaLogDir(
                    path=path,
                    topics=(b34.AlterReplicaLogDirTopic(name=topic, partitions=tuple(partitions)),),
                ),
            ),
        )
    return {p.partition_index: p.error_code for t in r.results for p in t.partitions}


def test_alter_replica_log_dirs_moves_a_replica_while_a_producer_writes(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "moving", 1)
    a, b = str(dir_a(cluster)), str(dir_b(cluster))
    source = a if 0 in replicas_in(describe(cluster)[a], "moving") else b
    dest = b if source == a else a
    produce(cluster, "moving", 1500, size=10_000)  # 15 MB: the copy takes several rounds
    stop = threading.Event()
    produced = [0]

    def keep_producing() -> None:
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
        )
        while not stop.is_set():
            producer.produce("moving", value=b"y" * 1000, key=b"k")
            produced[0] += 1
            producer.poll(0.001)
        assert producer.flush(60) == 0

    writer = threading.Thread(target=keep_producing)
    writer.start()
    try:
        wait_for(lambda: produced[0] > 200, what="the producer to be writing")
        assert alter(cluster, dest, "moving", [0]) == {0: NONE}
        wait_for(
            lambda: (
                0 in replicas_in(describe(cluster)[dest], "moving")
                and not replicas_in(describe(cluster)[dest], "moving")[0].is_future_key
                and 0 not in replicas_in(describe(cluster)[source], "moving")
            ),
            timeout=60,
            what="the replica to move",
        )
        moved_at = produced[0]
        wait_for(lambda: produced[0] > moved_at + 200, what="writes after the move")
    finally:
        stop.set()
        writer.join(90)
    assert not (Path(source) / "moving-0").exists()
    assert (Path(dest) / "moving-0").is_dir()
    # everything written is there, once, in order: read from broker 1's replica as well
    total = 1500 + produced[0]
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "mover", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("moving", 0, 0)])
    offsets: list[int] = []
    while len(offsets) < total:
        batch = consumer.consume(1000, 10)
        assert batch, f"read {len(offsets)} of {total}"
        for m in batch:
            assert m.error() is None, m.error()
            offsets.append(present(m.offset()))
    consumer.close()
    assert offsets == list(range(total))
    # the errors Kafka gives
    assert alter(cluster, "/nowhere", "moving", [0]) == {0: LOG_DIR_NOT_FOUND}
    assert alter(cluster, dest, "moving", [7]) == {7: REPLICA_NOT_AVAILABLE}
    assert alter(cluster, dest, "moving", [0], version=0) == {0: NONE}  # already there


def metadata(cluster: LocalCluster, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, ISR)."""
    with WireClient(cluster.nodes["broker-2"].port) as c:
        t = topic_metadata(c, topic)
    return {p.partition_index: (p.leader_id, list(p.isr_nodes)) for p in t.partitions}


def test_a_failed_dir_takes_its_replicas_offline_and_the_rest_keeps_serving(
    cluster: LocalCluster,
) -> None:
    create_topic(cluster, "fragile", 6, **{"segment.bytes": "16384"})
    a, b = str(dir_a(cluster)), str(dir_b(cluster))
    dirs = describe(cluster)
    on_b = set(replicas_in(dirs[b], "fragile"))
    on_a = set(replicas_in(dirs[a], "fragile"))
    assert on_a
    assert on_b
    # The disk under dir b goes away: its logs can no longer create files (the next segment).
    gone = dir_b(cluster).with_name("broker-1-b.gone")
    dir_b(cluster).rename(gone)
    dir_b(cluster).write_text("not a directory any more\n")
    try:
        produce(cluster, "fragile", 600, size=1000, rounds=10)  # every partition rolls
        wait_for(
            lambda: describe(cluster)[b].error_code == KAFKA_STORAGE_ERROR,
            what="dir b to be reported offline",
        )
        dirs = describe(cluster)
        assert dirs[a].error_code == NONE
        assert replicas_in(dirs[a], "fragile").keys() == on_a
        assert dirs[b].topics == ()

        def moved() -> bool:
            state = metadata(cluster, "fragile")
            return all(state[p][0] != 1 and 1 not in state[p][1] for p in on_b)

        wait_for(moved, what="leadership and ISR of dir b's partitions to leave broker 1")
        state = metadata(cluster, "fragile")
        assert all(1 in state[p][1] for p in on_a), state  # dir a's replicas still in sync
        # every partition keeps taking writes (those of dir b on the other replicas)
        for partition in range(6):
            produce(cluster, "fragile", 20, partition=partition)
        produce(cluster, "spread", 60)
        assert present(cluster.nodes["broker-1"].proc).poll() is None  # the broker still runs
        log = cluster.nodes["broker-1"].log_file.read_text()
        assert f"log directory {b} failed" in log
    finally:
        dir_b(cluster).unlink()
        gone.rename(dir_b(cluster))
        shutil.rmtree(gone, ignore_errors=True)
