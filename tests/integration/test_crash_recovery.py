"""kill -9 of every process, a torn log tail, a broker killed under a producer: after restart
everything that was acknowledged is served, at the offset it was acknowledged with."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.local import LocalCluster
from tests.expect import present
from tests.integration.conftest import running_cluster

PARTITIONS = 6


def _create(cluster: LocalCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def _produce(
    cluster: LocalCluster,
    topic: str,
    count: int,
    acked: dict,
    prefix: str = "k",
    conf: dict[str, object] | None = None,
) -> Producer:
    """Produce `count` keyed records; each acknowledged one goes in `acked` as key -> (p, o, v);
    `conf`: producer settings (Kafka's names)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 2, **(conf or {})})

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked[msg.key()] = (msg.partition(), msg.offset(), msg.value())

    for i in range(count):
        producer.produce(
            topic,
            value=f"value-{i}".encode() * 5,
            key=f"{prefix}{i}".encode(),
            on_delivery=on_delivery,
        )
        producer.poll(0)
    return producer


def _read_all(
    cluster: LocalCluster, topic: str, timeout: float = 60, partitions: int = PARTITIONS
) -> dict:
    """(partition, offset) -> (key, value) of every record, read from the earliest offset up
    to each partition's high watermark (not up to a record count: a non-idempotent retry can
    leave a record twice in the log, and a count would stop short of some partition's end)."""
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
        for p in range(partitions)
    }
    consumer.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
    seen: dict = {}
    left = {p for p, end in ends.items() if end > 0}
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        for m in consumer.consume(1000, 0.5):
            assert m.error() is None, m.error()
            seen[(m.partition(), m.offset())] = (m.key(), m.value())
            partition = present(m.partition())
            if present(m.offset()) + 1 >= ends[partition]:
                left.discard(partition)
    consumer.close()
    assert not left, f"partitions {sorted(left)} not read to their end {ends} in {timeout}s"
    return seen


def _assert_all_acked_present(acked: dict, seen: dict) -> None:
    missing = [k for k, (p, o, v) in acked.items() if seen.get((p, o)) != (k, v)]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {missing[:5]}"


def _active_segment(cluster: LocalCluster, topic: str) -> Path:
    """The newest segment file of a partition of `topic` that holds data."""
    logs = sorted(
        (
            p
            for p in Path(cluster.data_dir).glob(f"broker-*/{topic}-*/*.log")
            if p.stat().st_size > 0
        ),
        key=lambda p: p.stat().st_size,
    )
    return logs[-1]


def test_kill_every_process_and_a_torn_tail(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cluster:
        _create(cluster, "durable")
        acked: dict = {}
        for codec in ("none", "gzip"):
            producer = _produce(
                cluster, "durable", 2000, acked, codec, {"acks": "all", "compression.type": codec}
            )
            assert producer.flush(30) == 0
        assert len(acked) == 4000

        for name in cluster.nodes:
            cluster.kill(name)
        segment = _active_segment(cluster, "durable")
        with segment.open("ab") as f:  # a batch the crash cut short: header only, no body
            f.write(b"\x00\x00\x00\x00\x00\x00\x0f\xa0\x00\x00\x04\x00\x00\x00\x00\x00\x02")

        cluster.start()
        _assert_all_acked_present(acked, _read_all(cluster, "durable"))
        logs = "".join(
            Path(n.log_file).read_text() for n in cluster.nodes.values() if n.kind == "broker"
        )
        assert "torn or corrupt batch" in logs, "recovery did not report the torn tail it dropped"

        # The log still takes appends after recovery, at the offsets that follow.
        producer = _produce(cluster, "durable", 100, acked, "after", {"acks": "all"})
        assert producer.flush(30) == 0
        _assert_all_acked_present(acked, _read_all(cluster, "durable"))


def test_broker_killed_under_a_producer(tmp_path: Path) -> None:
    """The producer keeps retrying while a broker is down; nothing acknowledged goes missing."""
    with running_cluster(tmp_path) as cluster:
        _create(cluster, "busy")
        acked: dict = {}
        done = threading.Event()
        holder: list[Producer] = []

        def run() -> None:
            holder.append(
                _produce(
                    cluster, "busy", 20000, acked, conf={"acks": 1, "message.timeout.ms": 60000}
                )
            )
            done.set()

        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 30
        while len(acked) < 2000 and time.monotonic() < deadline:
            time.sleep(0.01)
        cluster.kill("broker-2")
        cluster.start_node("broker-2")
        cluster.wait_ready(names=["broker-2"])
        thread.join(60)
        assert done.is_set()
        assert holder[0].flush(60) == 0
        assert len(acked) == 20000
        _assert_all_acked_present(acked, _read_all(cluster, "busy"))


_SCANNED = re.compile(
    r"segmented-0 \(partition \S+\): recovering after an unclean shutdown: scanning (\d+) "
    r"of (\d+) segment\(s\) \(\d+ bytes\) from offset (\d+), after the recovery point (\d+)"
)


def test_recovery_scans_only_segments_after_the_recovery_point(tmp_path: Path) -> None:
    """kill -9 of the broker holding a log of many segments: the sealed segments were fsynced
    when they rolled (the recovery point moved past them), so only the newest are scanned
    again; a torn tail is still cut, and every acknowledged record is served."""
    with running_cluster(tmp_path) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topic = NewTopic("segmented", 1, 1, config={"segment.bytes": "16384"})
        admin.create_topics([topic])["segmented"].result(30)
        acked: dict = {}
        # Small batches, so that the log rolls many times.
        producer = _produce(
            cluster, "segmented", 6000, acked, conf={"acks": "all", "batch.size": 4096}
        )
        assert producer.flush(30) == 0
        (directory,) = Path(cluster.data_dir).glob("broker-*/segmented-0")
        segments = sorted(directory.glob("*.log"))
        assert len(segments) >= 20, f"only {len(segments)} segments"
        broker = directory.parent.name
        cluster.kill(broker)
        with max(segments, key=lambda p: int(p.stem)).open("ab") as f:  # a torn batch header
            f.write(b"\x00\x00\x00\x00\x00\x00\x0f\xa0\x00\x00\x04\x00\x00\x00\x00\x00\x02")

        cluster.start_node(broker)
        cluster.wait_ready(names=[broker])
        _assert_all_acked_present(acked, _read_all(cluster, "segmented", partitions=1))
        log_text = cluster.nodes[broker].log_file.read_text()
        scans = [tuple(map(int, found)) for found in _SCANNED.findall(log_text)]
        assert scans, "recovery did not report what it scanned"
        scanned, total, start, recovery_point = scans[-1]
        bases = sorted(int(p.stem) for p in segments)
        assert total == len(segments)
        # Sealed segments are fsynced in the background as they roll, so the recovery point
        # may trail the log end by a few segments at the kill; the scan starts at the segment
        # that holds it, and the segments before it are not read.
        first = bases.index(start)
        assert scanned == total - first, (scanned, total, start, recovery_point)
        assert first > 0, (scanned, total, start, recovery_point)
        assert start <= recovery_point
        assert first + 1 == total or recovery_point < bases[first + 1]
        assert "torn or corrupt batch" in log_text, "recovery did not report the torn tail"
