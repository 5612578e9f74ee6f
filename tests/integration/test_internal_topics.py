"""The internal topics (`__consumer_offsets`, `__transaction_state`, `__share_group_state`)
against hostile clients, damaged records and small clusters (issue 25), on real processes.

- A client's Produce to an internal topic is refused (INVALID_TOPIC_EXCEPTION), as Kafka does:
  only the coordinators write there.
- A record there that the group coordinator cannot read (a header key that is not UTF-8, a
  truncated record) no longer takes the broker down when it loads the partition: a one-broker
  cluster restarts over it, keeps the group's offsets and serves groups.
- A Metadata request naming an internal topic creates it as its coordinators would (50
  partitions, compacted), not as an ordinary one-partition topic they could not use.
- The internal topics are created with their configured replication factor only once that many
  brokers are alive: until then FindCoordinator answers COORDINATOR_NOT_AVAILABLE and the broker
  log says why and what to do.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster, free_base_port
from dataplane.coordinator.record_schemas import OffsetCommitValue
from dataplane.coordinator.records import offset_commit_record
from dataplane.coordinator.runtime import partition_for
from dataplane.log import LogConfig, PartitionLog, StateStore
from dataplane.log.batch import encode_batch
from dataplane.log.log_dirs import STATE_DIR
from dataplane.log.records import build_batch, bytes_field, encode_record, zigzag_varint
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.groups import produce
from tests.integration.kafka_wire import WireClient, builder

PRODUCE, METADATA, FIND_COORDINATOR = 0, 3, 10
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, Kafka's default


def assert_internal_topics_refuse_produce(cluster: LocalCluster) -> None:
    """The attack: a plain client appends a batch to each internal topic (created first, as a
    group, a transactional id and a share-partition would), through every broker; each append
    is refused with INVALID_TOPIC_EXCEPTION and nothing is written."""
    ports = [n.port for n in cluster.nodes.values() if n.kind == "broker" and n.proc is not None]
    for key_type, key in enumerate(("g", "tx", "g:AAAAAAAAAAAAAAAAAAAAAA:0")):
        wait_for(
            partial(_has_coordinator, ports[0], key_type, key),
            what=f"the coordinator of key type {key_type}",
        )
    b = builder(PRODUCE, 9)
    batch = build_batch([(b"\x00\x01evil", b"\x00\x03\xff\xff")], int(time.time() * 1000))
    for port in ports:
        with WireClient(port) as w:
            for topic in INTERNAL_TOPICS:
                data = b.TopicProduceData(
                    name=topic, partition_data=(b.PartitionProduceData(index=0, records=batch),)
                )
                r = w.call(PRODUCE, 9, acks=-1, timeout=10_000, topic_data=(data,))
                (answer,) = r.responses[0].partition_responses
                assert answer.error_code == ErrorCode.invalid_topic_exception, (topic, answer)
                assert answer.error_message == f"Cannot append to internal topic {topic}"


def _has_coordinator(port: int, key_type: int, key: str) -> bool:
    with WireClient(port) as w:
        r = w.call(FIND_COORDINATOR, 6, key_type=key_type, coordinator_keys=(key,))
    return bool(r.coordinators[0].error_code == ErrorCode.none)


def _metadata(port: int, topic: str, auto_create: bool) -> Any:
    b = builder(METADATA, 12)
    with WireClient(port) as w:
        r = w.call(
            METADATA,
            12,
            topics=(b.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=auto_create,
            include_topic_authorized_operations=False,
        )
    (t,) = r.topics
    return t


def _consumer(cluster: LocalCluster, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def _committed(cluster: LocalCluster, group: str, partitions: int) -> dict[int, int] | None:
    consumer = _consumer(cluster, group)
    try:
        found = consumer.committed([TopicPartition("t", p) for p in range(partitions)], 10)
    except Exception:  # the coordinator is still loading: asked again
        return None
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


def _with_bad_header_key(group: str, partition: int, offset: int) -> bytes:
    """An OffsetCommit record of the group whose one header's key is not UTF-8."""
    now = int(time.time() * 1000)  # a commit of now: not expired by offsets.retention.minutes
    key, value = offset_commit_record(group, "t", partition, OffsetCommitValue(offset, -1, "", now))
    body = bytes_field(key) + bytes_field(value) + zigzag_varint(1)
    body += bytes_field(b"\xff\xfe\x80") + bytes_field(b"v")
    return _batch(encode_record(0, 0, body), 1)


def _truncated() -> bytes:
    record = encode_record(0, 0, bytes_field(b"\x00\x01key") + bytes_field(b"value" * 10))
    return _batch(record[:12], 1)


def _batch(records: bytes, count: int) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch(
        records,
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=0,
        last_offset_delta=count - 1,
        base_timestamp=now,
        max_timestamp=now,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=count,
    )


def _append_on_disk(broker_dir: Path, topic: str, index: int, *batches: bytes) -> None:
    """Append batches to a partition's log in the broker's data directory while the broker is
    stopped (the produce path is closed to them), as a damaged disk or a rogue tool would."""
    directory = broker_dir / f"{topic}-{index}"
    topic_id = (directory / "partition.metadata").read_text().strip()
    store = StateStore(broker_dir / STATE_DIR)
    try:
        plog = PartitionLog.open(directory, LogConfig(), store, f"{topic_id}-{index}")
        try:
            for batch in batches:
                plog.append_as_leader(batch, plog.latest_epoch, int(time.time() * 1000))
        finally:
            plog.close()
    finally:
        store.close()


def test_bad_records_in_consumer_offsets_do_not_stop_the_broker(tmp_path: Path) -> None:
    with running_cluster(tmp_path, brokers=1, metas=1) as cluster:
        port = cluster.nodes["broker-1"].port
        # Metadata for the name creates the topic the group coordinators use (today: an
        # ordinary one-partition topic, and every group's FindCoordinator then fails)
        offsets = wait_for(
            lambda: (t := _metadata(port, "__consumer_offsets", True)).error_code == 0 and t,
            what="__consumer_offsets auto-created",
        )
        assert offsets.is_internal
        assert len(offsets.partitions) == OFFSETS_PARTITIONS

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("t", 2, 1)])["t"].result(30)
        produce(cluster, "t", [b"a", b"b", b"c"])
        consumer = _consumer(cluster, "g")
        consumer.subscribe(["t"])
        wait_for(lambda: consumer.poll(0.2) is not None, what="a record for group g")
        consumer.commit(offsets=[TopicPartition("t", 0, 2)], asynchronous=False)
        consumer.close()

        assert_internal_topics_refuse_produce(cluster)

        cluster.stop_node("broker-1")
        # into the partition that holds group g: a record the loader used to die on (the
        # group's offset of t-1, readable but for its header), then one it cannot read
        index = partition_for("g", OFFSETS_PARTITIONS)
        bad = (_with_bad_header_key("g", 1, 42), _truncated())
        _append_on_disk(tmp_path / "broker-1", "__consumer_offsets", index, *bad)
        cluster.start_node("broker-1")
        cluster.wait_ready(names=["broker-1"])

        # the broker serves on: the group's offsets (the header's record read as Kafka reads
        # it), and a new group consumes
        assert wait_for(lambda: _committed(cluster, "g", 2), what="group g's offsets") == {
            0: 2,
            1: 42,
        }
        fresh = _consumer(cluster, "g2")
        fresh.subscribe(["t"])
        wait_for(lambda: fresh.poll(0.2) is not None, what="a record for group g2")
        fresh.close()
        log = cluster.nodes["broker-1"].log_file.read_text()
        assert f"__consumer_offsets-{index}: skipped the unreadable records at offset" in log
        assert cluster.nodes["broker-1"].proc.poll() is None  # type: ignore[union-attr]


def test_coordinators_wait_for_their_replication_factor(tmp_path: Path) -> None:
    """A 3-broker cluster (internal topics' replication factor 3) with one broker up: no
    coordinator (Kafka's answer) rather than internal topics of one replica for ever."""
    cluster = LocalCluster(3, 1, tmp_path, free_base_port(3, 1))
    try:
        cluster.start_node("meta-1")
        cluster.start_node("broker-1")
        cluster.wait_ready(names=["meta-1", "broker-1"])
        log_file = cluster.nodes["broker-1"].log_file
        why = "offsets.topic.replication.factor=3 needs 3 live brokers, 1 are up"

        def find() -> tuple[int, str | None]:
            with WireClient(cluster.nodes["broker-1"].port) as w:
                (c,) = w.call(FIND_COORDINATOR, 4, key_type=0, coordinator_keys=("g",)).coordinators
            return c.error_code, c.error_message

        # Kafka's answer (v4+: a key's error has an empty message); the broker log says why
        wait_for(
            lambda: (
                find() == (ErrorCode.coordinator_not_available, "") and why in log_file.read_text()
            ),
            what="COORDINATOR_NOT_AVAILABLE and the log line saying why",
        )
        text = log_file.read_text()
        assert "__consumer_offsets is not created until 3 brokers are up" in text
        assert "lower offsets.topic.replication.factor" in text

        for name in ("broker-2", "broker-3"):
            cluster.start_node(name)
        cluster.wait_ready()
        wait_for(lambda: find()[0] == ErrorCode.none, timeout=60, what="a group coordinator")
        offsets = _metadata(cluster.nodes["broker-1"].port, "__consumer_offsets", False)
        assert {len(p.replica_nodes) for p in offsets.partitions} == {3}
    finally:
        cluster.stop()
