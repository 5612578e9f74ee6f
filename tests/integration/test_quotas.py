"""Client quotas end to end on one SASL_PLAINTEXT broker (users are PLAIN principals): a
confluent-kafka producer held to its user's producer_byte_rate and a consumer to its client id's
consumer_byte_rate, measured over 20 s while another client runs unthrottled; the lifted quota
applying within a second; CreateTopics over controller_mutation_rate; `rafka quotas`.

Kafka measures a quota over quota.window.num windows of quota.window.size.seconds and counts a
young sensor as if it had seen all but one of them: a greedy client first bursts that many
windows' worth, and again whenever the burst's sample leaves the window. At the default 11 windows
that echo (10 s of quota every 11 s) swings any 20 s average by up to half the quota (see
tests/unit/quota for the default's figures), so this broker measures over 2 windows of 1 s:
a burst of one second's worth, and 20 s averages within a few percent.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from cluster import admin
from cluster.admin_quotas import alter_quotas, describe_quotas
from cluster.client_security import ClientSecurity
from cluster.local import LocalCluster, free_base_port
from tests.integration.clients.drivers import run_driver, security_env
from tests.integration.conftest import wait_for
from tests.integration.kafka_wire import WireClient, builder

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "c-pw"}
PRODUCE_QUOTA = 2_000_000  # alice's producer_byte_rate
CONSUME_QUOTA = 4_000_000  # the "metered" client id's consumer_byte_rate
WARM_UP_S, MEASURE_S = 3.0, 20.0
VALUE = b"x" * 1024
CREATE_TOPICS = 19


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    tmp = tmp_path_factory.mktemp("quotas")
    base = free_base_port(1, 1)
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    overrides = {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{base}",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f"{PLAIN_MODULE} required {users};",
        "quota.window.num": "2",
    }
    c = LocalCluster(1, 1, tmp, base, overrides, security_protocol="SASL_PLAINTEXT")
    try:
        c.start()
        yield c
    finally:
        c.stop()


def security(user: str) -> ClientSecurity:
    return ClientSecurity("SASL_PLAINTEXT", "PLAIN", user, USERS[user])


def brokers(cluster: LocalCluster) -> admin.Brokers:
    return admin.Brokers(cluster.bootstrap, security("admin"))


def client_config(cluster: LocalCluster, user: str, client_id: str) -> dict:
    return {
        "bootstrap.servers": cluster.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
        "client.id": client_id,
    }


def set_quota(cluster: LocalCluster, entity: tuple, **values: float | None) -> None:
    add = {k: v for k, v in values.items() if v is not None}
    delete = [k for k, v in values.items() if v is None]
    assert alter_quotas(brokers(cluster), entity, add, delete) is None


class Meter:
    """Bytes a client moved, with the time each delivery or message arrived."""

    def __init__(self) -> None:
        self.events: list[tuple[float, int]] = []
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        with self.lock:
            self.events.append((time.monotonic(), n))

    def rate(self, start: float, end: float) -> float:
        with self.lock:
            moved = sum(n for t, n in self.events if start <= t < end)
        return moved / (end - start)


def produce_until(config: dict, topic: str, stop: threading.Event, meter: Meter) -> None:
    producer = Producer(config | {"linger.ms": 5, "queue.buffering.max.kbytes": 8192, "acks": 1})

    def delivered(err: object, msg: object) -> None:
        if err is None:
            meter.add(len(VALUE))

    while not stop.is_set():
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()
    producer.flush(5)


def consume_until(config: dict, topic: str, stop: threading.Event, meter: Meter) -> None:
    # A throttled fetch answers nothing and costs a round trip, and the quota is granted in
    # whole fetches: fetches of 256 KiB (1/16 of a second's quota) keep that loss small.
    consumer = Consumer(
        config
        | {
            "group.id": "quota-meter",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 262144,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        while not stop.is_set():
            for msg in consumer.consume(1000, 0.2):
                if msg.error() is None:
                    meter.add(len(msg.value() or b""))
    finally:
        consumer.close()


def fill(cluster: LocalCluster, topic: str, megabytes: int) -> float:
    """Produce `megabytes` MB as carol (no quota); her rate in bytes/s."""
    # batches of 64 KiB: a fetch returns whole batches, so they set the consumer's fetch sizes
    filler = client_config(cluster, "carol", "filler")
    producer = Producer(filler | {"linger.ms": 20, "batch.size": 65536})
    started, count = time.monotonic(), megabytes * 1_000_000 // len(VALUE)
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    return count * len(VALUE) / (time.monotonic() - started)


def test_producer_and_consumer_held_to_their_quotas_others_free_and_lifted_at_once(
    cluster: LocalCluster,
) -> None:
    for topic in ("quota-in", "quota-out"):
        admin.create_topic(brokers(cluster), topic, 1, 1, {})
    set_quota(cluster, (("user", "alice"),), producer_byte_rate=PRODUCE_QUOTA)
    set_quota(cluster, (("client-id", "metered"),), consumer_byte_rate=CONSUME_QUOTA)
    # other clients unaffected: carol, with no quota, fills the consumer's topic far faster
    needed_mb = int(CONSUME_QUOTA * (WARM_UP_S + MEASURE_S + 4) / 1_000_000)
    assert fill(cluster, "quota-in", needed_mb) > 4 * PRODUCE_QUOTA

    stop, produced, consumed = threading.Event(), Meter(), Meter()
    workers = [
        threading.Thread(
            target=produce_until,
            args=(client_config(cluster, "alice", "writer"), "quota-out", stop, produced),
        ),
        threading.Thread(
            target=consume_until,
            args=(client_config(cluster, "bob", "metered"), "quota-in", stop, consumed),
        ),
    ]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    try:
        time.sleep(WARM_UP_S + MEASURE_S)  # the measurement itself: nothing to poll for
        window = (started + WARM_UP_S, started + WARM_UP_S + MEASURE_S)
        produce_rate, consume_rate = produced.rate(*window), consumed.rate(*window)
        assert abs(produce_rate - PRODUCE_QUOTA) <= 0.15 * PRODUCE_QUOTA, produce_rate
        assert abs(consume_rate - CONSUME_QUOTA) <= 0.15 * CONSUME_QUOTA, consume_rate

        set_quota(cluster, (("user", "alice"),), producer_byte_rate=None)
        lifted = time.monotonic()
        wait_for(lambda: time.monotonic() > lifted + 2.0, 5, "two seconds after the lift")
        # within a second of the lift the producer runs far above its old quota
        assert produced.rate(lifted + 1.0, lifted + 2.0) > 3 * PRODUCE_QUOTA
    finally:
        stop.set()
        for worker in workers:
            worker.join(30)


def test_create_topics_over_the_mutation_rate_is_throttled(cluster: LocalCluster) -> None:
    # 1 partition/s: the token bucket holds 11 (controller.quota.window.num windows of 1 s)
    set_quota(cluster, (("client-id", "wire"),), controller_mutation_rate=1.0)
    wait_for(
        lambda: describe_quotas(brokers(cluster), (("client-id", "wire"),)), 5, "quota applied"
    )
    port = cluster.nodes["broker-1"].port

    def create(version: int, name: str, partitions: int) -> Any:
        b = builder(CREATE_TOPICS, version)
        topic = b.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=(), configs=()
        )
        with WireClient(port, security=security("admin")) as w:
            return w.call(
                CREATE_TOPICS, version, topics=(topic,), timeout=10_000, validate_only=False
            )

    accepted = create(7, "burst", 20)  # within the bucket: accepted, the bucket in debt by 9
    assert accepted.topics[0].error_code == 0
    refused = create(7, "refused", 1)
    assert refused.topics[0].error_code == 89  # THROTTLING_QUOTA_EXCEEDED
    assert refused.topics[0].error_message == "The throttling quota has been exceeded."
    assert 7_000 < refused.throttle_time.total_seconds() * 1000 <= 9_000
    # before v6 (KIP-599) the mutation is made and the client only throttled
    permissive = create(5, "permissive", 1)
    assert permissive.topics[0].error_code == 0
    assert permissive.throttle_time.total_seconds() > 0
    names = {t.name for t in admin.metadata(brokers(cluster)).topics}
    assert {"burst", "permissive"} <= names
    assert "refused" not in names
    set_quota(cluster, (("client-id", "wire"),), controller_mutation_rate=None)


def test_rafka_quotas_alter_and_describe(cluster: LocalCluster, tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        f'sasl.jaas.config={PLAIN_MODULE} required username="admin" password="admin-secret";\n'
    )

    def rafka(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "cluster.cli", "quotas", *args, "-b", cluster.bootstrap,
             "--command-config", str(config)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip

    r = rafka("alter", "--user", "dave", "--client-id", "<default>", "--add-config",
              "producer_byte_rate=1048576,request_percentage=12.5")  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = rafka("describe", "--user", "dave")
    assert r.returncode == 0, r.stderr
    rows = sorted(line.split() for line in r.stdout.splitlines()[1:] if line.strip())
    assert rows == [
        ["dave", "<default>", "producer_byte_rate", "1048576"],
        ["dave", "<default>", "request_percentage", "12.5"],
    ]
    r = rafka("alter", "--user", "dave", "--add-config", "producer_byte_rate=0.5")
    assert r.returncode == 1
    assert "producer_byte_rate cannot be a fractional value." in r.stderr
    r = rafka("alter", "--user", "dave", "--client-id", "<default>", "--delete-config",
              "producer_byte_rate,request_percentage")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert describe_quotas(brokers(cluster), (("user", "dave"),)) == []


def test_java_admin_alters_and_describes_client_quotas(cluster: LocalCluster) -> None:
    """confluent-kafka 2.16 has no client quota API: Kafka's own Admin client (4.3.0) it is."""
    env = security_env(
        "SASL_PLAINTEXT", mechanism="PLAIN", username="admin", password=USERS["admin"]
    )

    def java_admin(action: str, *args: str) -> dict:
        res = run_driver(
            "java-4.3.0", "admin", action, *args, "--bootstrap", cluster.bootstrap, env=env
        )
        assert res.returncode == 0, res.stderr[-3000:]
        return res.lines[-1]

    assert java_admin(
        "alter-client-quotas", "--user", "erin", "--client-id", "<default>",
        "--set", "consumer_byte_rate=3000000", "--set", "controller_mutation_rate=2.5",
    ) == {"error": None}  # fmt: skip
    described = java_admin("describe-client-quotas", "--user", "erin", "--strict", "false")
    assert described["entries"] == [
        {
            "entity": {"client-id": None, "user": "erin"},
            "values": {"consumer_byte_rate": 3000000.0, "controller_mutation_rate": 2.5},
        }
    ]
    # Kafka's validation reaches the Java client as its error
    refused = java_admin(
        "alter-client-quotas", "--ip", "nowhere", "--set", "connection_creation_rate=5"
    )
    assert refused == {"error": "INVALID_REQUEST"}
    assert java_admin(
        "alter-client-quotas", "--user", "erin", "--client-id", "<default>",
        "--delete", "consumer_byte_rate", "--delete", "controller_mutation_rate",
    ) == {"error": None}  # fmt: skip
    assert java_admin("describe-client-quotas", "--user", "erin")["entries"] == []
