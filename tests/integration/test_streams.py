"""Kafka Streams 4.4 on a 3-broker Rafka: a stateful exactly-once application survives the
loss of one of its two instances with every count exact.

The application (tests/integration/clients/streams/StreamsApp.java) re-keys clicks by user (a
repartition topic), counts them per user (a KTable store with a changelog, one standby
replica) and joins each count with the users table (a KStream-KTable join) into the output,
with ``processing.guarantee=exactly_once_v2``. Two instances run in separate JVMs; one is
killed with SIGKILL while clicks flow, the other takes over its tasks (restoring the stores
from the changelogs, or from its standbys), and the output read with read_committed holds,
for every user, the counts 1..n exactly once each: nothing lost, nothing repeated.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.local import LocalCluster
from tests.expect import present
from tests.integration.clients.drivers import Running, ensure_setup
from tests.integration.conftest import running_cluster, wait_for

PARTITIONS = 3
USERS = 12
# Each sub-topology has one task per partition: 0_x reads the users table and the repartition
# topic (the stateful tasks, with standbys), 1_x reads clicks.
TASKS = {f"{sub}_{p}" for sub in (0, 1) for p in range(PARTITIONS)}
BEFORE_KILL = 1500  # clicks sent while both instances run
AFTER_KILL = 1500  # clicks sent once the survivor owns every task


@pytest.fixture(scope="module", autouse=True)
def _clients_installed() -> None:
    ensure_setup()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Streams groups (group.protocol=streams) take their timings and standby replicas from
    the broker: a killed instance's tasks move after 6 s (Kafka's default: 45 s)."""
    with running_cluster(
        tmp_path_factory.mktemp("streams"),
        group_streams_session_timeout_ms=6000,
        group_streams_min_session_timeout_ms=6000,
        group_streams_heartbeat_interval_ms=1000,
        group_streams_min_heartbeat_interval_ms=1000,
        group_streams_num_standby_replicas=1,
    ) as c:
        yield c


def _region(user: str) -> str:
    return f"region-{int(user.split('-')[1]) % 4}"


def _user(i: int) -> str:
    """The user of click i: users get different numbers of clicks."""
    return f"user-{(i * i + i // 7) % USERS}"


class Clicks:
    """Sends clicks click-<i> -> user in the background, idempotently, while the test waits."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer, self.topic, self.sent = producer, topic, 0

    def send(self, n: int) -> threading.Thread:
        first, self.sent = self.sent, self.sent + n

        def run() -> None:
            for i in range(first, first + n):
                self.producer.produce(self.topic, key=f"click-{i}", value=_user(i))
                self.producer.poll(0)
                if i % 50 == 0:
                    self.producer.flush(30)  # a steady flow, not one burst
            assert self.producer.flush(60) == 0

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def expected(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for i in range(self.sent):
            counts[_user(i)] = counts.get(_user(i), 0) + 1
        return counts


class Output:
    """The output topic read with read_committed from the start: each user's values in order."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        self.consumer = Consumer(
            cluster.client_config
            | {"group.id": f"check-{uuid.uuid4().hex[:6]}", "isolation.level": "read_committed"}
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
        self.values: dict[str, list[str]] = {}

    def read(self) -> int:
        """Take what has been committed so far; the number of records read in all."""
        for msg in self.consumer.consume(1000, timeout=0.5):
            assert not msg.error(), msg.error()
            key, value = present(msg.key()).decode(), present(msg.value()).decode()
            self.values.setdefault(key, []).append(value)
        return sum(len(v) for v in self.values.values())


def _app(cluster: LocalCluster, app_id: str, state: Path, protocol: str) -> Running:
    return Running(
        "streams",
        *("--bootstrap", cluster.bootstrap, "--app-id", app_id, "--state-dir", str(state)),
        *("--protocol", protocol, "--clicks", f"{app_id}-clicks", "--users", f"{app_id}-users"),
        *("--output", f"{app_id}-out"),
    )


def _tasks(app: Running) -> dict:
    """The instance's last word on its tasks: {"active": [...], "standby": [...]}."""
    lines = [line for line in app.lines if line.get("event") == "tasks"]
    return lines[-1] if lines else {"active": [], "standby": []}


@pytest.mark.parametrize("protocol", ["classic", "streams"])
def test_exactly_once_counts_survive_a_killed_instance(
    cluster: LocalCluster, tmp_path: Path, protocol: str
) -> None:
    app_id = f"counts-{protocol}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({**cluster.client_config})  # a dict of the stub's value type
    topics = [f"{app_id}-{t}" for t in ("clicks", "users", "out")]
    for fut in admin.create_topics([NewTopic(t, PARTITIONS, 3) for t in topics]).values():
        fut.result(30)
    # Streams partitions the repartition topic as the Java client does (murmur2): the users
    # table must be partitioned the same way for the join to find each user.
    producer = Producer(
        cluster.client_config
        | {"enable.idempotence": True, "linger.ms": 5, "partitioner": "murmur2_random"}
    )
    for u in range(USERS):
        producer.produce(f"{app_id}-users", key=f"user-{u}", value=_region(f"user-{u}"))
    assert producer.flush(30) == 0

    apps = [_app(cluster, app_id, tmp_path / f"state-{n}", protocol) for n in (0, 1)]
    try:
        for app in apps:
            app.wait_line(lambda ln: ln.get("state") == "RUNNING", 120, "instance RUNNING")

        def balanced() -> bool:
            """Every task active on one instance, and each instance has some."""
            active = [set(_tasks(a)["active"]) for a in apps]
            return all(active) and active[0] | active[1] == TASKS and not active[0] & active[1]

        wait_for(balanced, 120, "the tasks spread over both instances")
        # and each stateful task of the one has a standby on the other
        wait_for(lambda: all(_tasks(a)["standby"] for a in apps), 60, "standby tasks")
        output = Output(cluster, f"{app_id}-out")
        clicks = Clicks(producer, f"{app_id}-clicks")
        sending = clicks.send(BEFORE_KILL)
        wait_for(lambda: output.read() >= BEFORE_KILL // 3, 120, "output while both run")
        victim, survivor = apps
        victim.kill()  # SIGKILL, mid-run: its open transaction is left to time out
        sending.join(120)
        survivor.wait_line(
            lambda ln: ln.get("event") == "tasks" and set(ln["active"]) == TASKS,
            120,
            "the survivor owning every task",
        )
        clicks.send(AFTER_KILL).join(120)
        expected = clicks.expected()

        def complete() -> bool:
            output.read()
            last = {u: int(v[-1].split(":")[1]) for u, v in output.values.items()}
            return all(last.get(u, 0) >= n for u, n in expected.items())

        wait_for(complete, 180, "every click counted in the output")
        for user, n in expected.items():
            assert output.values[user] == [f"{_region(user)}:{c}" for c in range(1, n + 1)], user
        assert output.read() == clicks.sent  # and nothing after
        errors = [ln for a in apps for ln in a.lines if ln.get("event") == "error"]
        assert not errors, errors
        assert survivor.finish(60).returncode == 0
        output.consumer.close()
    finally:
        for n, app in enumerate(apps):
            app.kill()
            print(f"--- instance {n}: {app.lines[-3:]}\n{app.stderr()[-4000:]}")
