"""MirrorMaker 2 (4.3.1, dedicated mode) between Apache Kafka 4.4 and Rafka, both ways, in one
MirrorMaker process (tests/peers/connect.py).

- kafka->rafka is a migration: IdentityReplicationPolicy keeps the topic names, so applications
  move by changing bootstrap.servers only and their groups' offsets are translated onto the
  same topics. DefaultReplicationPolicy would name the copy "kafka.orders" and every consumer
  would have to change its subscription; identity cannot replicate one topic both ways, which
  a one-way migration does not need.
- rafka->kafka keeps a copy (disaster recovery, or a way back) with DefaultReplicationPolicy:
  remote topics are "rafka.<topic>".

Both flows are exactly-once (KIP-618): MirrorMaker reads the source read_committed and writes
the records with its source offsets in transactions on the target, so offsets differ across
clusters by the transaction markers; records are compared by content. Groups' offsets are
checkpointed every second and written to the target's groups (`sync.group.offsets.enabled`).

What MirrorMaker guarantees of a translated offset (OffsetSyncStore.translateDownstream): it
never points past the record the group would read next (nothing lost); it is exact for an
offset just past an offset sync (a group at the end of the replicated data is), and otherwise
the record after the latest sync before it, syncs being at most `offset.lag.max` (100) records
apart: a group resumes at most 100 records early. That bound needs the syncs to have been
sent, and MirrorMaker sends a partition's syncs one at a time, each queued one replaced by the
next (OffsetSyncWriter): records replicated in one burst may leave no sync between a group's
offset and 100 records before it, or none before it at all (the group then gets no offset on
the target). So the records come in two parts, the second once the source's offset-syncs topic
holds the sync of the first part's last record, as when a migration starts while the groups'
applications still run.
"""

from __future__ import annotations

import concurrent.futures
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from cluster.local import LocalCluster
from tests.expect import present
from tests.integration.conftest import wait_for
from tests.peers.apache_kafka import ApacheKafka
from tests.peers.connect import MirrorMaker

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
PARTITIONS = 3
RECORDS = 200  # per partition
PARTIAL = 150  # the offset the partly-done group committed in each partition
OFFSET_LAG_MAX = 100  # MirrorMaker's default offset.lag.max
RETENTION_MS = "86400000"  # a topic override, which MirrorMaker copies to the remote topic
FACTORS = {"kafka": 1, "rafka": 3}  # replicas of any topic on each cluster


@dataclass(frozen=True)
class Flow:
    source: str
    target: str
    topic: str
    remote_topic: str
    group_prefix: str

    def __str__(self) -> str:
        return f"{self.source}->{self.target}"


FLOWS = [
    Flow("kafka", "rafka", "orders", "orders", "billing"),
    Flow("rafka", "kafka", "events", "rafka.events", "audit"),
]
_COORDINATOR_MOVING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
}
Record = tuple[bytes | None, bytes | None, list[tuple[str, bytes]], int]  # key, value, headers, ts


def mirror_settings() -> dict[str, str]:
    """mm2.properties beyond the clusters: both flows, their replication factors, and quick
    checkpoints, group offset syncs and topic and group discovery."""
    settings = {
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "refresh.topics.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
    }
    for alias, factor in FACTORS.items():
        # The Connect herder writing into `alias`: its storage topics, its source offsets
        # committed every second, and exactly-once replication into it.
        for topic in ("config", "offset", "status"):
            settings[f"{alias}.{topic}.storage.replication.factor"] = str(factor)
        settings[f"{alias}.offset.flush.interval.ms"] = "1000"
        settings[f"{alias}.exactly.once.source.support"] = "enabled"
        settings[f"{alias}.consumer.isolation.level"] = "read_committed"
    for flow in FLOWS:
        settings |= {
            f"{flow}.enabled": "true",
            f"{flow}.topics": flow.topic,
            f"{flow}.groups": f"{flow.group_prefix}-.*",
            f"{flow}.replication.factor": str(FACTORS[flow.target]),
            f"{flow}.checkpoints.topic.replication.factor": str(FACTORS[flow.target]),
            f"{flow}.heartbeats.topic.replication.factor": str(FACTORS[flow.target]),
            f"{flow}.offset-syncs.topic.replication.factor": str(FACTORS[flow.source]),
        }
    settings["kafka->rafka.replication.policy.class"] = IDENTITY
    return settings


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    node = ApacheKafka(tmp_path_factory.mktemp("apache-kafka"), brokers=FACTORS["kafka"])
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="module")
def bootstrap(cluster: LocalCluster, kafka: ApacheKafka) -> dict[str, str]:
    return {"kafka": kafka.bootstrap, "rafka": cluster.bootstrap}


@pytest.fixture(scope="module")
def mirror_maker(
    bootstrap: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MirrorMaker]:
    mm = MirrorMaker(tmp_path_factory.mktemp("mirror-maker"), bootstrap, mirror_settings())
    mm.start()
    try:
        yield mm
    finally:
        mm.stop()


@pytest.mark.parametrize("flow", FLOWS, ids=str)
def test_topics_records_and_group_offsets_move_across(
    flow: Flow, bootstrap: dict[str, str], mirror_maker: MirrorMaker
) -> None:
    """A topic with records and two groups on the source: "<prefix>-drained" read it all,
    "<prefix>-partial" committed offset 150 of 200 in each partition. On the target, the
    remote topic holds the same records (keys, values, headers, timestamps) and config
    override; the drained group resumes with exactly the records produced after the move,
    the partial one at a translated offset that loses nothing and repeats at most
    offset.lag.max records."""
    source, target = bootstrap[flow.source], bootstrap[flow.target]
    admin = AdminClient({"bootstrap.servers": source})
    new = NewTopic(
        flow.topic, PARTITIONS, FACTORS[flow.source], config={"retention.ms": RETENTION_MS}
    )
    admin.create_topics([new])[flow.topic].result(30)
    _produce(source, flow.topic, range(PARTIAL))
    wait_for(
        lambda: _synced(source, flow, PARTIAL - 1),
        90,
        f"the offset syncs of {flow} at {PARTIAL - 1}",
        interval=0.5,
    )
    _produce(source, flow.topic, range(PARTIAL, RECORDS))
    drained, partial = f"{flow.group_prefix}-drained", f"{flow.group_prefix}-partial"
    _commit(source, drained, flow.topic, RECORDS)
    _commit(source, partial, flow.topic, PARTIAL)
    upstream = _read(source, flow.topic, RECORDS)

    def replicated() -> dict[int, list[tuple[int, Record]]] | None:
        mirror_maker.check_alive()
        copy = _read(target, flow.remote_topic, RECORDS)
        return copy if all(len(copy[p]) == RECORDS for p in copy) else None

    downstream = wait_for(replicated, 90, f"{flow.remote_topic} replicated to {flow.target}")
    for p in range(PARTITIONS):
        assert [r for _, r in downstream[p]] == [r for _, r in upstream[p]], f"partition {p}"
    _assert_topic_copied(target, flow.remote_topic)

    def translated(group: str, settled: int) -> dict[int, int] | None:
        """The group's offsets on the target (as record indexes) once every partition's is
        at least `settled`: MirrorMaker translates with the offset syncs it has read so far,
        so a group's offsets move up as replication and its syncs catch up; every value on
        the way is checked never to skip a record."""
        mirror_maker.check_alive()
        offsets = _group_offsets(target, group, flow.remote_topic)
        if offsets is None:
            return None
        indexes = {p: _index_at(downstream[p], offsets[p]) for p in offsets}
        expected = committed[group]
        assert all(i <= expected for i in indexes.values()), (group, offsets, indexes)
        return indexes if min(indexes.values()) >= settled else None

    committed = {drained: RECORDS, partial: PARTIAL}
    # The drained group: just past the last record replicated, exactly.
    wait_for(lambda: translated(drained, RECORDS), 60, f"{drained} at the end on {flow.target}")
    # The partial group: at or before its offset 150, by at most offset.lag.max records.
    wait_for(
        lambda: translated(partial, PARTIAL - OFFSET_LAG_MAX),
        60,
        f"{partial} within {OFFSET_LAG_MAX} records of its offset on {flow.target}",
    )

    # The applications move: the partial group reads on from its translated offsets.
    read = _consume(target, partial, flow.remote_topic)
    for p in range(PARTITIONS):
        resume = _index_at(downstream[p], read[p][0][0])
        assert PARTIAL - OFFSET_LAG_MAX <= resume <= PARTIAL, (p, resume)
        assert read[p] == downstream[p][resume:], f"partition {p}"
    # The source goes on; the drained group on the target gets exactly what is new.
    _produce(source, flow.topic, range(RECORDS, RECORDS + 5))
    wait_for(
        lambda: all(len(c) == RECORDS + 5 for c in _read(target, flow.remote_topic, 0).values()),
        60,
        "the new records replicated",
    )
    fresh = _consume(target, drained, flow.remote_topic)
    produced = _read(source, flow.topic, RECORDS + 5)
    for p in range(PARTITIONS):
        assert [r for _, r in fresh[p]] == [r for _, r in produced[p][RECORDS:]], f"partition {p}"

    # A partition added on the source is added to the remote topic.
    admin.create_partitions([NewPartitions(flow.topic, PARTITIONS + 1)])[flow.topic].result(30)
    target_admin = AdminClient({"bootstrap.servers": target})
    wait_for(
        lambda: _partitions(target_admin, flow.remote_topic) == PARTITIONS + 1,
        60,
        f"{flow.remote_topic} grown to {PARTITIONS + 1} partitions",
    )


def _produce(bootstrap: str, topic: str, indexes: range) -> None:
    """Records i of each partition, with a key, a header and a timestamp of their own (within
    the last minute: older ones would fall to the topic's retention)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    base = int(time.time() * 1000) - 60_000
    for p in range(PARTITIONS):
        for i in indexes:
            producer.produce(
                topic,
                key=f"key-{p}-{i}",
                value=f"value-{p}-{i}",
                partition=p,
                headers=[("index", str(i).encode())],
                timestamp=base + i,
            )
    assert producer.flush(30) == 0


def _synced(bootstrap: str, flow: Flow, offset: int) -> bool:
    """Whether the offset-syncs topic of `flow` (on its source: MirrorMaker's default
    offset-syncs.topic.location) holds a sync of upstream `offset` in every partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    synced: set[int] = set()
    try:
        consumer.assign([TopicPartition(f"mm2-offset-syncs.{flow.target}.internal", 0, 0)])
        while (msg := consumer.poll(5)) is not None and not msg.error():
            # OffsetSync's schemas: key (topic: int16-length string, partition: int32),
            # value (upstream offset: int64, downstream offset: int64).
            key, value = present(msg.key()), present(msg.value())
            (length,) = struct.unpack_from(">h", key)
            topic = key[2 : 2 + length].decode()
            (partition,) = struct.unpack_from(">i", key, 2 + length)
            (upstream,) = struct.unpack_from(">q", value)
            if topic == flow.topic and upstream == offset:
                synced.add(partition)
    finally:
        consumer.close()
    return len(synced) == PARTITIONS


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """Commit `offset` in every partition, retried while the group's coordinator is not
    there yet (a cluster's first group creates __consumer_offsets)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    offsets = [TopicPartition(topic, p, offset) for p in range(PARTITIONS)]

    def committed() -> bool:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() not in _COORDINATOR_MOVING:
                raise
            return False
        return True

    try:
        wait_for(committed, 30, f"{group}'s offsets committed", interval=0.2)
    finally:
        consumer.close()


def _record(msg: Message) -> Record:
    # the stub's header type is the producer's (a dict too); a consumed record's is a list
    headers = cast(list[tuple[str, bytes]], msg.headers() or [])
    return (msg.key(), msg.value(), list(headers), msg.timestamp()[1])


def _read(bootstrap: str, topic: str, at_least: int) -> dict[int, list[tuple[int, Record]]]:
    """Every partition's committed records with their offsets, once each holds `at_least`
    (an empty answer for a partition that has fewer within a few seconds)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "test-reader",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    records: dict[int, list[tuple[int, Record]]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        at_end: set[int] = set()
        while len(at_end) < PARTITIONS:
            msg = consumer.poll(5)
            if msg is None:
                break
            error, partition = msg.error(), present(msg.partition())
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    break  # the topic is not there yet
                if len(records[partition]) >= at_least:
                    at_end.add(partition)
                continue
            records[partition].append((present(msg.offset()), _record(msg)))
    finally:
        consumer.close()
    return records


def _consume(bootstrap: str, group: str, topic: str) -> dict[int, list[tuple[int, Record]]]:
    """What `group` reads of `topic` from its committed offsets to the end, as a member of
    the group; it commits as it goes."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    records: dict[int, list[tuple[int, Record]]] = {p: [] for p in range(PARTITIONS)}
    at_end: set[int] = set()
    try:
        consumer.subscribe([topic])

        def done() -> bool:
            msg = consumer.poll(0.5)
            if msg is None:
                return False
            error, partition = msg.error(), present(msg.partition())
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                at_end.add(partition)
            else:
                records[partition].append((present(msg.offset()), _record(msg)))
            return len(at_end) == PARTITIONS

        wait_for(done, 60, f"{group} at the end of {topic}", interval=0)
    finally:
        consumer.close()
    return records


def _group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int] | None:
    """The group's committed offsets in every partition of `topic`, or None until it has all
    (or while the group's coordinator does not answer: the caller asks again)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group)]
    try:
        answer = admin.list_consumer_group_offsets(request)[group].result(20)
    except (KafkaException, concurrent.futures.TimeoutError):
        return None
    offsets = {tp.partition: tp.offset for tp in answer.topic_partitions if tp.topic == topic}
    return offsets if len(offsets) == PARTITIONS and min(offsets.values()) >= 0 else None


def _index_at(records: list[tuple[int, Record]], offset: int) -> int:
    """The index of the first record at or after `offset` (records after it are what a group
    there reads next)."""
    return next((i for i, (o, _) in enumerate(records) if o >= offset), len(records))


def _assert_topic_copied(bootstrap: str, topic: str) -> None:
    """The remote topic has the source's partitions and, of its configs, the source's one
    override only (MirrorMaker copies what the source reports as set on the topic)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert _partitions(admin, topic) == PARTITIONS
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    overrides = {
        name: entry.value
        for name, entry in configs.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }
    assert overrides == {"retention.ms": RETENTION_MS}


def _partitions(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
