"""Protocol conformance: every supported version of every API, decoded with kio (generated from
Kafka's own schemas), plus the semantics clients rely on — error codes, long polling, fetch
limits (KIP-74), ListOffsets specials, topic admin."""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from dataplane.handlers import SUPPORTED_VERSIONS
from dataplane.handlers.api_versions import ADVERTISED_MIN_VERSIONS
from dataplane.log.batch import HEADER
from tests.integration.conftest import running_cluster
from tests.integration.kafka_wire import WireClient, builder
from tests.unit.log.batches import make_batch, values_of

PRODUCE, FETCH, LIST_OFFSETS, METADATA, EPOCH, API_VERSIONS, CREATE, DELETE = (
    0,
    1,
    2,
    3,
    23,
    18,
    19,
    20,
)


def versions(api_key: int) -> range:
    lo, hi = SUPPORTED_VERSIONS[api_key]
    return range(lo, hi + 1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("protocol"), brokers=2, metas=1, num_partitions=2
    ) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        for f in admin.create_topics([NewTopic("conf", 2, 1), NewTopic("limits", 2, 1)]).values():
            f.result(30)
        yield c


def leader_port(cluster: LocalCluster, topic: str, partition: int) -> tuple[int, int]:
    """(port of the partition's leader, port of the other broker)."""
    with WireClient(cluster.nodes["broker-1"].port) as w:
        md = w.call(
            METADATA,
            12,
            topics=(builder(METADATA, 12).MetadataRequestTopic(name=topic, topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    leader = next(p.leader_id for p in md.topics[0].partitions if p.partition_index == partition)
    ports = {b.node_id: b.port for b in md.brokers}
    other = next(port for node, port in ports.items() if node != leader)
    return ports[leader], other


def topic_id(cluster: LocalCluster, topic: str) -> bytes:
    with WireClient(cluster.nodes["broker-1"].port) as w:
        md = w.call(
            METADATA,
            12,
            topics=(builder(METADATA, 12).MetadataRequestTopic(name=topic, topic_id=None),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    return md.topics[0].topic_id.bytes


def produce(
    w: WireClient,
    version: int,
    topic: str,
    partition: int,
    records: bytes,
    acks: int = -1,
    tid: bytes | None = None,
) -> Any:  # the kio response of that version
    """By name, or from v13 by id (`tid`)."""
    b = builder(PRODUCE, version)
    data = b.TopicProduceData(
        name=topic,
        topic_id=None if tid is None else uuid.UUID(bytes=tid),
        partition_data=(b.PartitionProduceData(index=partition, records=records),),
    )
    return w.call(PRODUCE, version, acks=acks, timeout=10000, topic_data=(data,))


def fetch(
    w: WireClient,
    version: int,
    topic: str,
    tid: bytes,
    partitions: dict[int, int],
    *,
    max_wait: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 1 << 20,
) -> Any:  # the kio response of that version
    b = builder(FETCH, version)
    parts = tuple(
        b.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes)
        for p, o in partitions.items()
    )
    topic_fields = {"topic_id": tid} if version >= 13 else {"topic": topic}
    return w.call(
        FETCH,
        version,
        max_wait=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        topics=(b.FetchTopic(**topic_fields, partitions=parts),),
        forgotten_topics_data=(),
    )


def test_api_versions_every_version(cluster: LocalCluster) -> None:
    with WireClient(cluster.nodes["broker-1"].port) as w:
        for v in versions(API_VERSIONS):
            resp = w.call(API_VERSIONS, v, client_software_name="wire", client_software_version="1")
            assert resp.error_code == ErrorCode.none
            advertised = {
                k: (ADVERTISED_MIN_VERSIONS.get(k, lo), hi)
                for k, (lo, hi) in SUPPORTED_VERSIONS.items()
            }
            assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == advertised


def test_metadata_every_version(cluster: LocalCluster) -> None:
    tid = topic_id(cluster, "conf")
    with WireClient(cluster.nodes["broker-2"].port) as w:
        for v in versions(METADATA):
            b = builder(METADATA, v)
            topics = (b.MetadataRequestTopic(name="conf", topic_id=None),)
            resp = w.call(
                METADATA,
                v,
                topics=topics,
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
            assert sorted(br.node_id for br in resp.brokers) == [1, 2]
            (topic,) = resp.topics
            assert topic.error_code == ErrorCode.none
            assert topic.name == "conf"
            assert sorted(p.partition_index for p in topic.partitions) == [0, 1]
            if v >= 10:
                assert topic.topic_id.bytes == tid
            if v >= 2:
                assert resp.cluster_id


def test_metadata_auto_creates_only_when_allowed(cluster: LocalCluster) -> None:
    with WireClient(cluster.nodes["broker-1"].port) as w:
        b = builder(METADATA, 9)
        resp = w.call(
            METADATA,
            9,
            topics=(b.MetadataRequestTopic(name="auto-no"),),
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        assert resp.topics[0].error_code == ErrorCode.unknown_topic_or_partition
        resp = w.call(
            METADATA,
            9,
            topics=(b.MetadataRequestTopic(name="auto-yes"),),
            allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        assert resp.topics[0].error_code == ErrorCode.none
        assert len(resp.topics[0].partitions) == 2  # num.partitions=2 on this cluster
        resp = w.call(
            METADATA,
            9,
            topics=(b.MetadataRequestTopic(name="bad name!"),),
            allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        assert resp.topics[0].error_code == ErrorCode.invalid_topic_exception


def test_produce_and_fetch_every_version(cluster: LocalCluster) -> None:
    port, _ = leader_port(cluster, "conf", 0)
    tid = topic_id(cluster, "conf")
    sent = []
    with WireClient(port) as w:
        for v in versions(PRODUCE):
            batch = make_batch(
                values_of(3, 50, start=v * 10), timestamps=[int(time.time() * 1000)] * 3
            )
            resp = produce(w, v, "conf", 0, batch, tid=tid)
            (part,) = resp.responses[0].partition_responses
            assert part.error_code == ErrorCode.none, (v, part)
            sent.append((part.base_offset, batch))
        for v in versions(FETCH):
            resp = fetch(w, v, "conf", tid, {0: 0})
            (part,) = resp.responses[0].partitions
            assert part.error_code == ErrorCode.none, (v, part)
            data = part.records
            assert part.high_watermark == sent[-1][0] + 3
            for base, batch in sent:  # stored verbatim but for base offset and leader epoch
                start = data.index(batch[HEADER.size - 40 :])
                assert (
                    int.from_bytes(
                        data[start - (HEADER.size - 40) : start - (HEADER.size - 40) + 8]
                    )
                    == base
                )


def test_produce_errors(cluster: LocalCluster) -> None:
    leader, other = leader_port(cluster, "conf", 0)
    batch = make_batch(values_of(1))
    with WireClient(other) as w:
        part = produce(w, 9, "conf", 0, batch).responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.not_leader_or_follower
        part = produce(w, 9, "no-such-topic", 0, batch).responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.unknown_topic_or_partition
    with WireClient(leader) as w:
        part = produce(w, 9, "conf", 7, batch).responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.unknown_topic_or_partition
        corrupt = bytearray(batch)
        corrupt[-1] ^= 0xFF
        part = produce(w, 9, "conf", 0, bytes(corrupt)).responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.corrupt_message
        big = make_batch([b"x" * 2_000_000])
        part = produce(w, 9, "conf", 0, big).responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.message_too_large


def test_fetch_errors(cluster: LocalCluster) -> None:
    leader, other = leader_port(cluster, "conf", 0)
    tid = topic_id(cluster, "conf")
    with WireClient(other) as w:
        assert (
            fetch(w, 12, "conf", tid, {0: 0}).responses[0].partitions[0].error_code
            == ErrorCode.not_leader_or_follower
        )
    with WireClient(leader) as w:
        assert (
            fetch(w, 16, "x", bytes(range(16)), {0: 0}).responses[0].partitions[0].error_code
            == ErrorCode.unknown_topic_id
        )
        assert (
            fetch(w, 12, "nope", tid, {0: 0}).responses[0].partitions[0].error_code
            == ErrorCode.unknown_topic_or_partition
        )
        part = fetch(w, 12, "conf", tid, {0: 10**9}).responses[0].partitions[0]
        # As Kafka: a partition answered with an error carries no offsets (-1).
        assert part.error_code == ErrorCode.offset_out_of_range
        assert part.high_watermark == -1


def test_fetch_long_poll_waits_then_wakes_on_data(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("poll", 1, 1)])["poll"].result(30)
    port, _ = leader_port(cluster, "poll", 0)
    tid = topic_id(cluster, "poll")
    with WireClient(port) as w:
        start = time.monotonic()
        part = fetch(w, 12, "poll", tid, {0: 0}, max_wait=1500).responses[0].partitions[0]
        waited = time.monotonic() - start
        assert part.error_code == ErrorCode.none
        assert not part.records
        assert 1.3 < waited < 5, (
            f"an empty long poll returned after {waited:.2f}s, max_wait is 1.5s"
        )

        def later() -> None:
            time.sleep(0.3)  # the fetch below must be parked when this arrives
            with WireClient(port) as p:
                produce(p, 9, "poll", 0, make_batch(values_of(1)))

        threading.Thread(target=later).start()
        start = time.monotonic()
        part = fetch(w, 12, "poll", tid, {0: 0}, max_wait=10000).responses[0].partitions[0]
        assert part.records
        assert time.monotonic() - start < 5


def test_fetch_size_limits(cluster: LocalCluster) -> None:
    """partition_max_bytes and max_bytes are honoured, but a first batch always fits (KIP-74)."""
    port, _ = leader_port(cluster, "limits", 0)
    tid = topic_id(cluster, "limits")
    by_leader: dict[int, list[int]] = {}
    for p in (0, 1):
        by_leader.setdefault(leader_port(cluster, "limits", p)[0], []).append(p)
    partitions = by_leader[port]
    batch = make_batch(values_of(10, 1000))
    with WireClient(port) as w:
        for p in partitions:
            for _ in range(5):
                produce(w, 9, "limits", p, batch)
        parts = (
            fetch(w, 12, "limits", tid, dict.fromkeys(partitions, 0), partition_max_bytes=1)
            .responses[0]
            .partitions
        )
        assert all(len(p.records) == len(batch) for p in parts)  # one whole batch despite the limit
        parts = (
            fetch(
                w,
                12,
                "limits",
                tid,
                dict.fromkeys(partitions, 0),
                partition_max_bytes=3 * len(batch),
            )
            .responses[0]
            .partitions
        )
        assert all(len(p.records) == 3 * len(batch) for p in parts)
        parts = (
            fetch(w, 12, "limits", tid, dict.fromkeys(partitions, 0), max_bytes=len(batch) * 2 + 10)
            .responses[0]
            .partitions
        )
        assert len(parts[0].records) == 2 * len(batch)
        assert all(len(p.records) == 0 for p in parts[1:])  # response budget spent


def test_list_offsets_every_version(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("times", 1, 1)])["times"].result(30)
    port, _ = leader_port(cluster, "times", 0)
    with WireClient(port) as w:
        for ts in ([1000, 5000, 3000], [2000, 9000]):
            produce(w, 9, "times", 0, make_batch(values_of(len(ts)), timestamps=ts))
        for v in versions(LIST_OFFSETS):
            assert list_offset(w, v, -2)[0] == 0
            assert list_offset(w, v, -1)[0] == 5
            assert list_offset(w, v, 2500) == (1, 5000)  # first record with timestamp >= 2500
            assert list_offset(w, v, 9001)[0] == -1
            if v >= 7:  # KIP-734: the record with the largest timestamp
                assert list_offset(w, v, -3) == (4, 9000)


def list_offset(w: WireClient, version: int, ts: int) -> tuple[int, int]:
    b = builder(LIST_OFFSETS, version)
    topic = b.ListOffsetsTopic(
        name="times", partitions=(b.ListOffsetsPartition(partition_index=0, timestamp=ts),)
    )
    resp = w.call(
        LIST_OFFSETS,
        version,
        replica_id=-1,
        isolation_level=0,
        topics=(topic,),
        timeout=datetime.timedelta(seconds=30),  # v10+
    )
    (part,) = resp.topics[0].partitions
    assert part.error_code == ErrorCode.none, (version, ts, part)
    return part.offset, part.timestamp


def test_offset_for_leader_epoch(cluster: LocalCluster) -> None:
    port, _ = leader_port(cluster, "times", 0)
    with WireClient(port) as w:
        for v in versions(EPOCH):
            b = builder(EPOCH, v)
            topic = b.OffsetForLeaderTopic(
                topic="times", partitions=(b.OffsetForLeaderPartition(partition=0, leader_epoch=0),)
            )
            (part,) = w.call(EPOCH, v, replica_id=-1, topics=(topic,)).topics[0].partitions
            assert part.error_code == ErrorCode.none
            assert (part.leader_epoch, part.end_offset) == (
                0,
                5,
            )


def test_create_and_delete_topics_every_version(cluster: LocalCluster) -> None:
    with WireClient(cluster.nodes["broker-1"].port) as w:
        for v in versions(CREATE):
            name = f"created-v{v}"
            assert create_topic(w, v, name, validate_only=True).error_code == ErrorCode.none
            bad = create_topic(w, v, name, configs={"retention.mss": "1"})
            assert bad.error_code == ErrorCode.invalid_config
            bad = create_topic(w, v, name, rf=5)
            assert bad.error_code == ErrorCode.invalid_replication_factor
            ok = create_topic(w, v, name, configs={"retention.ms": "1234"})
            assert ok.error_code == ErrorCode.none
            if v >= 5:
                # the defaults
                assert ok.num_partitions == 2
                assert ok.replication_factor == 2
                assert {c.name: c.value for c in ok.configs}["retention.ms"] == "1234"
            assert create_topic(w, v, name).error_code == ErrorCode.topic_already_exists
        for v in versions(DELETE):
            b = builder(DELETE, v)
            name = f"created-v{v + 1}"
            if v >= 6:
                tid = topic_id(cluster, name)
                resp = w.call(
                    DELETE, v, topics=(b.DeleteTopicState(name=None, topic_id=tid),), timeout=30000
                )
            else:
                resp = w.call(DELETE, v, topic_names=(name,), timeout=30000)
            assert [r.error_code for r in resp.responses] == [ErrorCode.none]
            again = w.call(DELETE, 5, topic_names=(name,), timeout=30000)
            assert again.responses[0].error_code == ErrorCode.unknown_topic_or_partition


def create_topic(
    w: WireClient,
    version: int,
    name: str,
    *,
    validate_only: bool = False,
    rf: int = -1,
    configs: dict[str, str] | None = None,
) -> Any:  # the kio response of that version
    b = builder(CREATE, version)
    topic = b.CreatableTopic(
        name=name,
        num_partitions=-1,
        replication_factor=rf,
        assignments=(),
        configs=tuple(b.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()),
    )
    resp = w.call(CREATE, version, topics=(topic,), timeout=30000, validate_only=validate_only)
    return resp.topics[0]
