"""Moving partitions between brokers and electing leaders on a 4-broker cluster: a reassignment
from brokers 1,2,3 to 2,3,4 under an idempotent acks=all producer (nothing lost or duplicated,
the old replica's files gone), ListPartitionReassignments while one is in progress, cancellation,
replication throttles, and preferred / unclean ElectLeaders (confluent-kafka's AdminClient and
`rafka partitions`)."""

from __future__ import annotations

import datetime
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ElectionType,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from cluster import admin, admin_operations
from cluster.admin import AdminError, Brokers
from cluster.admin_operations import Reassignment
from cluster.kafka_client import KafkaConnection, builder
from cluster.local import LocalCluster
from tests.expect import present
from tests.integration.conftest import running_cluster, wait_for

SETTINGS: dict[str, Any] = {  # broker settings, for running_cluster(**SETTINGS)
    "broker_session_timeout_ms": 2000,
    "broker_heartbeat_interval_ms": 300,
    "replica_lag_time_max_ms": 5000,
    "auto_leader_rebalance_enable": "false",  # leaders stay where a test moved them
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(
        tmp_path_factory.mktemp("reassignment"), brokers=4, metas=1, **SETTINGS
    ) as c:
        yield c


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: LocalCluster) -> Iterator[None]:
    """Each test starts and ends with every broker running."""
    yield
    cluster.start()
    wait_for(lambda: len(live_brokers(cluster)) == 4, what="4 live brokers")


def live_brokers(cluster: LocalCluster) -> list[int]:
    return sorted(admin.metadata(brokers(cluster)).brokers)


def brokers(cluster: LocalCluster) -> Brokers:
    return Brokers(cluster.bootstrap)


def admin_client(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def create(cluster: LocalCluster, topic: str, replicas: list[int], **configs: str) -> None:
    new = NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config=configs)
    a = admin_client(cluster)  # kept: the futures fail if the client is collected first
    a.create_topics([new])[topic].result(30)
    wait_for(lambda: partition(cluster, topic).leader == replicas[0], what=f"{topic} leader")


def partition(cluster: LocalCluster, topic: str, index: int = 0) -> admin.PartitionInfo:
    return admin.metadata(brokers(cluster), [topic]).topics[0].partitions[index]


def replica_dir(cluster: LocalCluster, broker: int, topic: str, index: int = 0) -> Path:
    return cluster.data_dir / f"broker-{broker}" / f"{topic}-{index}"


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.log")) if path.exists() else 0


REASSIGN = ("partitions", "reassign", "--topic")
ELECT = ("partitions", "elect", "--type")


def set_config(
    cluster: LocalCluster, kind: ResourceType, name: str, key: str, value: str | None
) -> None:
    """IncrementalAlterConfigs: set `key` of the resource (None: delete it)."""
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    entry = ConfigEntry(key, value, incremental_operation=op)
    resource = ConfigResource(kind, name, incremental_configs=[entry])
    a = admin_client(cluster)
    a.incremental_alter_configs([resource])[resource].result(30)


def rafka(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cluster.cli", *args, "-b", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )


def fill(cluster: LocalCluster, topic: str, count: int, size: int = 100) -> list[bytes]:
    """Produce `count` records of `size` bytes (acks=all) and return their values."""
    values = [str(i).encode().ljust(size, b".") for i in range(count)]
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    failed: list[KafkaError] = []

    def report(e: KafkaError | None, _m: Message) -> None:
        if e is not None:
            failed.append(e)

    for v in values:
        while True:
            try:
                p.produce(topic, v, on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0, failed
    assert not failed, failed
    return values


def consume_all(cluster: LocalCluster, topic: str, expected: int) -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": f"check-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []

    def read() -> bool:
        got.extend(present(m.value()) for m in c.consume(1000, 1) if not m.error())
        return len(got) >= expected

    try:
        wait_for(read, timeout=60, what=f"{expected} records of {topic}")
        read()  # anything extra
    finally:
        c.close()
    return got


class Load:
    """An idempotent acks=all producer writing numbered records until stopped; every delivery
    report is kept."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
            }
        )
        self.topic = topic
        self.delivered: list[bytes] = []
        self.errors: list[KafkaError] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def _report(self, err: KafkaError | None, msg: object) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.delivered.append(msg.value())  # type: ignore[attr-defined]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, b"load-%d" % self.sent, on_delivery=self._report)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0.001 if self.sent % 50 else 0.01)
        self.producer.flush(60)

    def wait_delivered(self, more: int) -> None:
        target = len(self.delivered) + more
        wait_for(lambda: len(self.delivered) >= target, timeout=60, what=f"{more} deliveries")


# -- reassignment ------------------------------------------------------------------------------


def test_move_a_partition_under_idempotent_acks_all_load(cluster: LocalCluster) -> None:
    """Brokers 1,2,3 -> 2,3,4 while an idempotent acks=all producer writes: broker 4 copies the
    log, joins the ISR, the leader moves off broker 1 and broker 1's replica is deleted; every
    acknowledged record is there exactly once, in order."""
    create(cluster, "moving", [1, 2, 3])
    backlog = fill(cluster, "moving", 20_000)
    with Load(cluster, "moving") as load:
        load.wait_delivered(500)
        assert admin_operations.reassign_partitions(
            brokers(cluster), [("moving", 0, [2, 3, 4])]
        ) == {"moving-0": None}
        wait_for(
            lambda: (
                partition(cluster, "moving").replicas == [2, 3, 4]
                and not admin_operations.list_reassignments(brokers(cluster))
            ),
            timeout=90,
            what="the reassignment to complete",
        )
        load.wait_delivered(500)  # the producer goes on with the new leader
    assert not load.errors, load.errors
    done = partition(cluster, "moving")
    assert done.leader in (2, 3, 4)
    assert sorted(done.isr) == [2, 3, 4]
    records = consume_all(cluster, "moving", len(backlog) + len(load.delivered))
    assert records == backlog + load.delivered  # nothing lost, nothing twice, in order
    wait_for(
        lambda: not replica_dir(cluster, 1, "moving").exists(),
        what="broker 1's replica of moving-0 to be deleted",
    )
    assert dir_size(replica_dir(cluster, 4, "moving")) > 20_000 * 100


def test_list_and_cancel_a_reassignment_that_cannot_finish(cluster: LocalCluster) -> None:
    """With broker 4 down the new replica cannot catch up: the reassignment stays listed with
    its adding and removing replicas (API and `rafka partitions list-reassignments`) until it
    is cancelled, which restores the old replicas."""
    create(cluster, "stuck", [1, 2, 3])
    fill(cluster, "stuck", 100)
    cluster.stop_node("broker-4")
    out = rafka(cluster, *REASSIGN, "stuck", "--partition", "0", "--replicas", "2,3,4")
    assert out.returncode == 0, out.stderr
    assert "stuck-0" in out.stdout
    expected = Reassignment("stuck", 0, [2, 3, 4, 1], [4], [1])
    assert admin_operations.list_reassignments(brokers(cluster)) == [expected]
    assert admin_operations.list_reassignments(brokers(cluster), [("stuck", 0), ("nope", 0)]) == [
        expected
    ]
    listed = rafka(cluster, "partitions", "list-reassignments")
    assert listed.returncode == 0, listed.stderr
    assert ["stuck", "0", "2,3,4,1", "4", "1"] in [
        line.split() for line in listed.stdout.splitlines()
    ]
    state = partition(cluster, "stuck")
    assert sorted(state.replicas) == [1, 2, 3, 4]
    assert state.leader == 1
    assert fill(cluster, "stuck", 10)  # still served meanwhile

    cancelled = rafka(cluster, *REASSIGN, "stuck", "--partition", "0", "--cancel")
    assert cancelled.returncode == 0, cancelled.stderr
    assert admin_operations.list_reassignments(brokers(cluster)) == []
    # Kafka's revert drops the adding replicas and keeps the order the reassignment gave.
    assert partition(cluster, "stuck").replicas == [2, 3, 1]
    again = admin_operations.reassign_partitions(brokers(cluster), [("stuck", 0, None)])["stuck-0"]
    assert again is not None
    assert again.code == KafkaError.NO_REASSIGNMENT_IN_PROGRESS
    cluster.start()
    wait_for(lambda: len(live_brokers(cluster)) == 4, what="broker 4 back")
    assert not replica_dir(cluster, 4, "stuck").exists()


def test_invalid_reassignments(cluster: LocalCluster) -> None:
    create(cluster, "invalid", [1, 2, 3])
    for change, code in (
        (("invalid", 0, [2, 2, 3]), KafkaError.INVALID_REPLICA_ASSIGNMENT),  # broker twice
        (("invalid", 0, [1, 2, 9]), KafkaError.INVALID_REPLICA_ASSIGNMENT),  # no broker 9
        (("invalid", 0, []), KafkaError.INVALID_REPLICA_ASSIGNMENT),
        (("invalid", 3, [1, 2, 3]), KafkaError.UNKNOWN_TOPIC_OR_PART),
        (("nope", 0, [1, 2, 3]), KafkaError.UNKNOWN_TOPIC_OR_PART),
    ):
        (error,) = admin_operations.reassign_partitions(brokers(cluster), [change]).values()
        assert _code(error) == code, (change, error)
    bad = rafka(cluster, *REASSIGN, "invalid", "--partition", "0", "--replicas", "1,1")
    assert bad.returncode == 1
    assert "INVALID_REPLICA_ASSIGNMENT" in bad.stderr
    assert partition(cluster, "invalid").replicas == [1, 2, 3]


@pytest.mark.parametrize(
    ("side", "broker", "replicas"),
    [
        ("follower", "4", "0:4"),  # broker 4's fetches of the partition
        ("leader", "1", "0:1"),  # broker 1's (the leader's) answers to broker 4
    ],
)
def test_throttled_reassignment_in_progress_then_cancelled(
    cluster: LocalCluster, side: str, broker: str, replicas: str
) -> None:
    """A replication throttle (`side`.replication.throttled.rate, a dynamic broker config) with
    the topic's `side`.replication.throttled.replicas naming the replica: the copy
    to broker 4 stops after one fetch (1 MiB) and waits for the 10 kB/s rate, so the
    reassignment stays in progress; cancelling it deletes broker 4's partial copy. Without the
    throttle the same move completes."""
    topic = f"slow-{side}"
    create(cluster, topic, [1, 2, 3])
    set_config(
        cluster,
        ConfigResource.Type.TOPIC,
        topic,
        f"{side}.replication.throttled.replicas",
        replicas,
    )
    fill(cluster, topic, 3000, size=1000)  # 3 MB: three fetches' worth
    rate = f"{side}.replication.throttled.rate"
    set_config(cluster, ConfigResource.Type.BROKER, broker, rate, "10000")
    try:
        assert admin_operations.reassign_partitions(brokers(cluster), [(topic, 0, [2, 3, 4])]) == {
            f"{topic}-0": None
        }
        copy = replica_dir(cluster, 4, topic)
        wait_for(lambda: dir_size(copy) > 0, what="broker 4 to start copying")
        # Unthrottled, 3 MB are copied in well under a second; here the copy stays at one
        # fetch for the ~100 s the rate needs to pay it back.
        holds(
            lambda: (
                dir_size(copy) <= (1 << 20) + 100_000
                and admin_operations.list_reassignments(brokers(cluster))
                == [Reassignment(topic, 0, [2, 3, 4, 1], [4], [1])]
            ),
            seconds=3,
            what="the throttled copy to stay at one fetch and the reassignment in progress",
        )
        assert admin_operations.reassign_partitions(brokers(cluster), [(topic, 0, None)]) == {
            f"{topic}-0": None
        }
        wait_for(lambda: not copy.exists(), what="broker 4's partial copy to be deleted")
        assert partition(cluster, topic).replicas == [2, 3, 1]
    finally:
        set_config(cluster, ConfigResource.Type.BROKER, broker, rate, None)
    assert admin_operations.reassign_partitions(brokers(cluster), [(topic, 0, [2, 3, 4])]) == {
        f"{topic}-0": None
    }
    wait_for(
        lambda: partition(cluster, topic).replicas == [2, 3, 4],
        timeout=60,
        what="the unthrottled reassignment to complete",
    )


def holds(check: Callable[[], object], seconds: float, what: str) -> None:
    """Assert `check` stays true for `seconds` (polled): a state that must not change."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert check(), what
        time.sleep(0.2)


# -- leader elections --------------------------------------------------------------------------


def test_preferred_election_after_the_leader_moved(cluster: LocalCluster) -> None:
    """Broker 1 restarts: broker 2 leads and stays leader (no automatic rebalance here) until a
    preferred election (confluent-kafka's AdminClient.elect_leaders) gives it back to 1."""
    create(cluster, "elect", [1, 2, 3])
    cluster.stop_node("broker-1")
    wait_for(lambda: partition(cluster, "elect").leader == 2, what="broker 2 to take over")
    cluster.start()
    wait_for(lambda: sorted(partition(cluster, "elect").isr) == [1, 2, 3], what="1 in the ISR")
    assert partition(cluster, "elect").leader == 2
    a = admin_client(cluster)
    tp = TopicPartition("elect", 0)
    result = a.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert result == {tp: None}
    assert partition(cluster, "elect").leader == 1

    again = a.elect_leaders(ElectionType.PREFERRED, [tp, TopicPartition("elect", 7)]).result(30)
    codes = {(k.topic, k.partition): _code(e) for k, e in again.items()}
    assert codes == {
        ("elect", 0): KafkaError.ELECTION_NOT_NEEDED,
        ("elect", 7): KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    out = rafka(cluster, "partitions", "elect", "--topic", "elect")
    assert out.returncode == 0, out.stderr
    assert "Valid replica already elected for: elect-0" in out.stdout


def test_unclean_election_of_an_offline_partition(cluster: LocalCluster) -> None:
    """Replicas 3,4 with only 3 in the ISR, then 3 down: the partition is offline and stays so
    when 4 returns (unclean.leader.election.enable=false) until an unclean election makes 4 the
    leader; a preferred election cannot help it (PREFERRED_LEADER_NOT_AVAILABLE)."""
    create(cluster, "unclean", [3, 4])
    fill(cluster, "unclean", 10)
    cluster.stop_node("broker-4")
    wait_for(lambda: partition(cluster, "unclean").isr == [3], what="ISR [3]")
    cluster.stop_node("broker-3")
    wait_for(lambda: partition(cluster, "unclean").leader == -1, what="offline partition")
    cluster.start_node("broker-4")
    cluster.wait_ready(names=["broker-4"])
    wait_for(lambda: 4 in live_brokers(cluster), what="broker 4 registered")
    preferred = admin_operations.elect_leaders(brokers(cluster), "preferred", [("unclean", 0)])
    assert preferred["unclean-0"] is not None
    assert preferred["unclean-0"].code == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    out = rafka(cluster, *ELECT, "unclean", "--topic", "unclean", "--partition", "0")
    assert out.returncode == 0, out.stderr
    assert "Elected unclean leaders of: unclean-0." in out.stdout
    state = partition(cluster, "unclean")
    assert (state.leader, state.isr) == (4, [4])
    assert fill(cluster, "unclean", 5)


def test_elect_every_partition_reports_only_elections(cluster: LocalCluster) -> None:
    """ElectLeaders with null partitions elects every partition whose preferred replica is an
    in-sync live broker and reports only those that needed an election: repeated until the
    answer is empty (replicas the previous tests restarted rejoin their ISRs meanwhile), every
    partition is then led by its preferred replica."""
    a = admin_client(cluster)
    wait_for(
        lambda: a.elect_leaders(ElectionType.PREFERRED, None).result(30) == {},
        what="no partition left to elect",
        interval=0.5,
    )
    for t in admin.metadata(brokers(cluster)).topics:
        for p in t.partitions:
            assert p.leader == p.replicas[0], (t.name, p)


def _code(error: object) -> int:
    if error is None:
        return KafkaError.NO_ERROR
    if isinstance(error, KafkaException):
        return error.args[0].code()
    if isinstance(error, AdminError):
        return int(error.code)
    return error.code()  # type: ignore[attr-defined]


REASSIGN_API, UNREGISTER_BROKER = 45, 64


def test_a_reassignment_that_must_keep_the_replication_factor(cluster: LocalCluster) -> None:
    """AlterPartitionReassignments v1 with allow_replication_factor_change=false (KIP-860, what
    kafka-reassign-partitions.sh --disallow-replication-factor-change sends): a target of
    another size is refused by the controller, one of the same size moves the partition."""
    create(cluster, "kept-factor", [1, 2])

    def reassign(replicas: tuple[int, ...]) -> Any:
        b = builder(REASSIGN_API, 1)
        partition_change = b.ReassignablePartition(partition_index=0, replicas=replicas)
        with KafkaConnection.to_any(cluster.bootstrap) as c:
            answer = c.call(
                REASSIGN_API,
                1,
                timeout=datetime.timedelta(seconds=30),
                allow_replication_factor_change=False,
                topics=(b.ReassignableTopic(name="kept-factor", partitions=(partition_change,)),),
            )
        assert answer.allow_replication_factor_change is False
        return answer.responses[0].partitions[0]

    refused = reassign((1, 2, 3))
    assert refused.error_code == ErrorCode.invalid_replication_factor
    assert refused.error_message == "The replication factor is changed from 2 to 3"
    assert partition(cluster, "kept-factor").replicas == [1, 2]
    assert reassign((3, 4)).error_code == ErrorCode.none
    wait_for(lambda: partition(cluster, "kept-factor").replicas == [3, 4], what="replicas 3,4")


def test_unregister_a_live_broker(cluster: LocalCluster) -> None:
    """UnregisterBroker (Kafka's Admin.unregisterBroker) of a broker that is running: it leaves
    ISRs and leaderships, its next heartbeat tells it so and it registers again, then leads and
    serves again; nothing acknowledged is lost. An unknown id is BROKER_ID_NOT_REGISTERED."""
    create(cluster, "unregistered", [4, 1])
    values = fill(cluster, "unregistered", 50)
    log = cluster.nodes["broker-4"].log_file
    registrations = log.read_text().count("registered with the meta service as broker 4")
    with KafkaConnection.to_any(cluster.bootstrap) as c:
        assert c.call(UNREGISTER_BROKER, 0, broker_id=4).error_code == ErrorCode.none
        unknown = c.call(UNREGISTER_BROKER, 0, broker_id=99)
    assert unknown.error_code == ErrorCode.broker_id_not_registered
    assert unknown.error_message == "Broker ID 99 is not currently registered"
    wait_for(
        lambda: (
            log.read_text().count("registered with the meta service as broker 4") > registrations
        ),
        what="broker 4 registered again",
    )
    wait_for(lambda: 4 in live_brokers(cluster), what="broker 4 live again")
    wait_for(lambda: 4 in partition(cluster, "unregistered").isr, what="broker 4 in the ISR")
    values += fill(cluster, "unregistered", 50)
    assert sorted(consume_all(cluster, "unregistered", 100)) == sorted(values)
