"""What a client cannot make a broker do: Kafka's bounds on one topic-creating request; a broker
out of file descriptors fails what needs one (its log directory stays online, it keeps running)
and hosts the replicas it could not open once descriptors are free; Fetch and ShareFetch
answers within the broker's fetch.max.bytes; Kafka's connection limits (max.connections.per.ip,
max.connections, connections.max.idle.ms). One meta node and one broker, driven with
confluent-kafka and raw sockets."""

from __future__ import annotations

import datetime
import os
import resource
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewPartitions,
    NewTopic,
)

from cluster.local import LocalCluster
from meta.model import ConfigAlteration
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.kafka_wire import WireClient, builder, request_bytes, topic_metadata

POLICY_VIOLATION = KafkaError.POLICY_VIOLATION
FETCH, API_VERSIONS, SHARE_FETCH = 1, 18, 78
FETCH_MAX_BYTES = 100_000  # the broker's fetch.max.bytes here (Kafka's default: 55 MiB)
IDLE_MS = 4_000  # connections.max.idle.ms here (Kafka's default: 10 minutes)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("limits"),
        brokers=1,
        metas=1,
        fetch_max_bytes=str(FETCH_MAX_BYTES),
        connections_max_idle_ms=str(IDLE_MS),
    ) as c:
        yield c


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def broker_log(cluster: LocalCluster) -> str:
    return cluster.nodes["broker-1"].log_file.read_text(errors="replace")


def produce(cluster: LocalCluster, topic: str, partitions: int = 1) -> None:
    """A record to each partition, every one acknowledged."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    failed: list[str] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failed.append(error.str())

    for partition in range(partitions):
        producer.produce(topic, b"v", partition=partition, on_delivery=delivered)
    assert producer.flush(60) == 0
    assert not failed


def produce_one(cluster: LocalCluster, topic: str) -> None:
    """The broker still serves: a topic is created and a record acknowledged."""
    a = admin(cluster)  # kept until the result: a destroyed client fails its futures
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    produce(cluster, topic)


def test_a_huge_create_topics_is_refused_and_the_broker_keeps_serving(
    cluster: LocalCluster,
) -> None:
    # librdkafka lets one NewTopic ask for 100,000 partitions; Kafka's controller refuses a
    # request over 10,000 partitions in all, and one over 10,000 metadata records.
    a = admin(cluster)
    for topic, partitions, message in (
        (unique("huge"), 100_000, "Excessively large number of partitions per request."),
        (unique("edge"), 10_000, "Unable to perform excessively large batch operation."),
    ):
        with pytest.raises(KafkaException) as refused:
            a.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
        error = refused.value.args[0]
        assert error.code() == POLICY_VIOLATION
        assert error.str() == message
        assert topic not in a.list_topics(timeout=10).topics
    assert cluster.nodes["broker-1"].proc.poll() is None  # type: ignore[union-attr]
    produce_one(cluster, unique("after"))


def test_create_partitions_counts_its_records_over_the_whole_request(
    cluster: LocalCluster,
) -> None:
    a = admin(cluster)
    first, second = unique("grow"), unique("grow")
    for topic in (first, second):
        a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    results = a.create_partitions(
        [NewPartitions(first, 6_001), NewPartitions(second, 6_001)], validate_only=True
    )
    results[first].result(30)  # 6,000 records: within the bound
    with pytest.raises(KafkaException) as refused:
        results[second].result(30)  # 12,000 in the request: over it
    error = refused.value.args[0]
    assert error.code() == POLICY_VIOLATION
    assert "excessively large batch" in error.str()
    assert "refused" in broker_log(cluster)


def test_a_broker_out_of_descriptors_keeps_serving_and_hosts_the_rest_later(
    cluster: LocalCluster,
) -> None:
    proc = cluster.nodes["broker-1"].proc
    assert proc is not None
    assert "broker runs with an open-files limit of" in broker_log(cluster)
    soft, hard = resource.prlimit(proc.pid, resource.RLIMIT_NOFILE)
    assert soft == hard  # raised to the hard limit at start
    topic, after = unique("many"), unique("after")
    a = admin(cluster)

    def leaders() -> list[int]:
        return [
            p.leader for p in a.list_topics(topic, timeout=10).topics[topic].partitions.values()
        ]

    in_use = len(os.listdir(f"/proc/{proc.pid}/fd"))
    resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (in_use + 100, hard))
    try:
        # 300 partitions on a broker with about 100 descriptors to spare: the topic exists,
        # the replicas the broker could not open are offline, the broker runs on.
        a.create_topics([NewTopic(topic, 300, 1)])[topic].result(60)
        wait_for(lambda: -1 in leaders(), what="replicas reported offline")
        assert "ulimit -n" in broker_log(cluster)
        assert proc.poll() is None
    finally:
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (soft, hard))
    assert "its partitions are offline on this broker" not in broker_log(cluster)  # no dir failed
    # Descriptors free again: every replica is hosted and leads; the broker serves them all.
    wait_for(lambda: leaders() == [1] * 300, timeout=60, what="every partition led again")
    produce(cluster, topic, 300)
    produce_one(cluster, after)


def test_a_fetch_answer_is_capped_by_the_brokers_fetch_max_bytes(cluster: LocalCluster) -> None:
    topic = unique("big")
    a = admin(cluster)
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
    for _ in range(50):  # 50 batches of 10 KB: 500 KB, five times fetch.max.bytes
        producer.produce(topic, os.urandom(10_000))
        producer.flush(30)
    with WireClient(cluster.nodes["broker-1"].port) as w:
        b = builder(FETCH, 12)
        partition = b.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=2**31 - 1)
        response = w.call(
            FETCH,
            12,
            max_wait=0,
            min_bytes=2**31 - 1,  # capped too (Kafka's fetchMinBytes): no wait for it
            max_bytes=2**31 - 1,
            topics=(b.FetchTopic(topic=topic, partitions=(partition,)),),
            forgotten_topics_data=(),
        )
    records = response.responses[0].partitions[0].records
    assert 10_000 < len(records) <= FETCH_MAX_BYTES


def test_a_share_fetch_answer_is_capped_by_the_brokers_fetch_max_bytes(
    cluster: LocalCluster,
) -> None:
    """Kafka's handleShareFetchRequest caps a ShareFetch as a Fetch: min(max_bytes,
    fetch.max.bytes, a consumer_byte_rate window); the records it acquires fit the answer."""
    topic, group, member = unique("shared"), unique("share"), uuid.uuid4().hex
    a = admin(cluster)
    a.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    with WireClient(cluster.nodes["broker-1"].port) as w:
        b = builder(SHARE_FETCH, 1)
        partition = b.FetchPartition(partition_index=0, acknowledgement_batches=())
        topic_id = topic_metadata(w, topic).topic_id
        fetch_topic = b.FetchTopic(topic_id=topic_id, partitions=(partition,))

        def share_fetch(epoch: int, wait_s: float) -> Any:
            response = w.call(
                SHARE_FETCH,
                1,
                group_id=group,
                member_id=member,
                share_session_epoch=epoch,
                max_wait=datetime.timedelta(seconds=wait_s),
                min_bytes=1,
                max_bytes=2**31 - 1,
                max_records=10_000,
                batch_size=500,
                topics=(fetch_topic,),
                forgotten_topics_data=(),
            )
            assert response.error_code == 0, response
            (answer,) = response.responses[0].partitions
            assert answer.error_code == 0, answer
            return answer

        share_fetch(0, 0)  # opens the session; the group starts at the log end (Kafka's default)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
        for _ in range(50):  # 50 batches of 10 KB: 500 KB, five times fetch.max.bytes
            producer.produce(topic, os.urandom(10_000))
            producer.flush(30)
        answer = share_fetch(1, 5)
    assert 10_000 < len(answer.records) <= FETCH_MAX_BYTES
    acquired = sum(r.last_offset - r.first_offset + 1 for r in answer.acquired_records)
    assert acquired == len(answer.records) // 10_000  # a record per batch: all of them sent


def set_broker_configs(cluster: LocalCluster, **configs: str | None) -> None:
    """Dynamic configs of broker 1 (None deletes one), through the meta service (a broker at
    max.connections could not take an admin client's call), applied without a restart."""
    names = {name.replace("_", "."): value for name, value in configs.items()}
    change = ConfigAlteration(
        "broker",
        "1",
        {n: v for n, v in names.items() if v is not None},
        tuple(n for n, v in names.items() if v is None),
    )

    async def alter() -> None:
        client = cluster.meta_client()
        try:
            assert [code for code, _ in await client.alter_configs([change])] == [0]
        finally:
            await client.close()

    applied = "dynamic broker configs now in force"
    before = broker_log(cluster).count(applied)
    anyio.run(alter)
    wait_for(lambda: broker_log(cluster).count(applied) > before, what=applied)


def connect(cluster: LocalCluster) -> socket.socket:
    return socket.create_connection(("127.0.0.1", cluster.nodes["broker-1"].port), timeout=20)


def served(sock: socket.socket) -> bool:
    """Whether the broker answers an ApiVersions on ``sock`` (False: it closed it)."""
    request = request_bytes(API_VERSIONS, 0, 7, b"", b"flood")
    try:
        sock.sendall(request)
        return len(sock.recv(4)) == 4 and bool(sock.recv(1 << 16))
    except OSError:
        return False


def closed_by_broker(sock: socket.socket) -> bool:
    try:
        return sock.recv(1 << 16) == b""
    except OSError:
        return True


def test_a_connection_flood_from_one_ip_is_cut_at_max_connections_per_ip(
    cluster: LocalCluster,
) -> None:
    set_broker_configs(cluster, max_connections_per_ip="10")
    held: list[socket.socket] = []
    try:
        held = [connect(cluster) for _ in range(20)]
        answered = [served(sock) for sock in held]
        # Ten are served; the others are closed right after the accept.
        assert answered == [True] * 10 + [False] * 10
        assert "address already has the configured maximum of 10" in broker_log(cluster)
    finally:
        for sock in held:
            sock.close()
    set_broker_configs(cluster, max_connections_per_ip=None)
    fresh = [connect(cluster) for _ in range(20)]
    try:
        assert all(served(sock) for sock in fresh)
    finally:
        for sock in fresh:
            sock.close()


def test_max_connections_blocks_accepts_and_lowering_it_closes_the_least_recent(
    cluster: LocalCluster,
) -> None:
    old, new = connect(cluster), connect(cluster)
    waiting: socket.socket | None = None
    try:
        assert served(old)
        assert served(new)
        set_broker_configs(cluster, max_connections="1")
        # Over the limit: the least recently used close until one is left (`new`, used last).
        wait_for(lambda: closed_by_broker(old), what="the least recent connection closed")
        assert served(new)
        waiting = connect(cluster)  # queued by the kernel: the broker accepts no more for now
        waiting.settimeout(1)
        with pytest.raises(TimeoutError):
            waiting.recv(1)
        new.close()  # a slot frees: the waiting connection is accepted and served
        waiting.settimeout(20)
        assert served(waiting)
    finally:
        for sock in (old, new, waiting):
            if sock is not None:
                sock.close()
        set_broker_configs(cluster, max_connections=None)


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(cluster: LocalCluster) -> None:
    with connect(cluster) as idle:
        assert served(idle)
        idle.settimeout(IDLE_MS / 1000 * 5)
        assert idle.recv(1) == b""  # closed by the broker, not by the timeout
    assert "idle for over connections.max.idle.ms=4000" in broker_log(cluster)
