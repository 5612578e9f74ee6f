"""Share groups through the failure of the share-partition's leader (3 brokers, RF 3,
min.insync.replicas=2), with confluent-kafka's ShareConsumer and Java's KafkaShareConsumer.

Two members of one share group (driver processes, explicit acknowledgement, each poll's
acceptances committed with commitSync) read a 1-partition topic while an idempotent producer
writes it at a steady rate; a third member acquires its first records and never acknowledges
them. A third of the way in, the partition's leader — the broker that holds the
share-partition's in-flight state — is killed with SIGKILL, and restarted once the members have
moved on without it. Afterwards:

- every record produced was accepted, its acceptance confirmed by the broker, except those
  whose acknowledgement was in flight when the leader died (the client cannot know whether it
  was applied: those may or may not come back);
- the third member's records, never acknowledged, were delivered again to the others as soon
  as the leadership moved (acquisition locks are not durable), long before their lock's end;
- no record was delivered again after its acceptance was confirmed (the new leader loaded the
  share-partition's durable state from `__share_group_state`: nothing acknowledged comes back).

Confirmation is what the clients report: the acknowledgement commit callback (librdkafka's
`set_acknowledgement_commit_callback`, Java's `AcknowledgementCommitCallback`) with no error.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from cluster.local import LocalCluster
from tests.integration.clients.drivers import ensure_setup
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.share_members import (
    CLIENTS,
    Member,
    alter_group,
    assigned_members,
    confirmed,
    create_topic,
    running,
    wait_confirmed,
)

FAST: dict[str, Any] = {  # broker settings, for running_cluster(**FAST)
    "broker_session_timeout_ms": "2000",
    "broker_heartbeat_interval_ms": "300",
    "replica_lag_time_max_ms": "2000",
    "leader_imbalance_check_interval_seconds": "1",
}
RECORDS = 2000
RATE = 200  # records/s: the run lasts about 10 s, the failure and the restart within it
LOCK_MS = 60_000  # share.record.lock.duration.ms: longer than the run (locks die with a leader)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    ensure_setup()
    with running_cluster(
        tmp_path_factory.mktemp("share-failover"),
        min_insync_replicas="2",
        group_share_min_record_lock_duration_ms="1000",
        group_share_heartbeat_interval_ms="1000",
        **FAST,
    ) as c:
        yield c


@pytest.fixture(autouse=True)
def _all_brokers_up(cluster: LocalCluster) -> Iterator[None]:
    """Each test starts and ends with every node running."""
    yield
    cluster.start()  # starts again whatever a test killed
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    wait_for(lambda: len(admin.list_topics(timeout=5).brokers) == 3, what="3 live brokers")


class Feeder:
    """`n` records key-<i> at `rate` records/s to partition 0 by an idempotent producer in a
    thread; `join` gives each acknowledged record's offset -> key."""

    def __init__(self, bootstrap: str, topic: str, n: int, rate: float) -> None:
        self.written: dict[int, str] = {}
        self.failed: list[str] = []
        self._args = (bootstrap, topic, n, rate)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, err: object, msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.written[msg.offset()] = msg.key().decode()  # type: ignore[attr-defined]

    def _run(self) -> None:
        bootstrap, topic, n, rate = self._args
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        start = time.monotonic()
        for i in range(n):
            while (ahead := start + i / rate - time.monotonic()) > 0:
                p.poll(ahead)  # pacing: serves delivery reports meanwhile
            p.produce(topic, b"v%d" % i, key=f"key-{i}", partition=0, on_delivery=self._delivered)
        p.flush(120)

    def join(self) -> dict[int, str]:
        self._thread.join(180)
        assert not self._thread.is_alive(), "the producer did not finish"
        assert not self.failed, self.failed[:3]
        assert len(self.written) == self._args[2], self.failed[:3]
        return self.written


def leader_of(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return md.topics[topic].partitions[0].leader


@pytest.mark.parametrize("client", CLIENTS)
def test_share_partition_leader_killed_mid_consumption(cluster: LocalCluster, client: str) -> None:
    b = cluster.bootstrap
    tag = uuid.uuid4().hex[:6]
    topic, group = f"share-failover-{tag}", f"g-failover-{tag}"
    create_topic(b, topic, 1, 3)
    alter_group(
        client,
        b,
        group,
        share_auto_offset_reset="earliest",
        share_record_lock_duration_ms=LOCK_MS,
    )
    members = [Member(client, b, topic, group) for _ in range(2)]
    holder = Member(client, b, topic, group, "--hold", "true")  # never acknowledges
    try:
        with running(*members):
            wait_for(lambda: assigned_members(b, group) == 3, 90, "3 members with partition 0")
            feeder = Feeder(b, topic, RECORDS, RATE)
            hold = holder.wait("hold")
            wait_for(lambda: len(confirmed(members)) >= RECORDS // 3, 120, "a third accepted")
            leader = leader_of(b, topic)
            before = len(confirmed(members))
            cluster.kill(f"broker-{leader}")
            wait_for(
                lambda: len(confirmed(members)) >= before + 100,
                120,
                f"acceptances confirmed without broker {leader}",
            )
            cluster.start_node(f"broker-{leader}")
            cluster.wait_ready()
            written = feeder.join()
            held = {r["offset"] for r in holder.records()}
            wait_confirmed(members, held, 90, "the held records accepted by the others")
            wait_confirmed(members, set(written), 90, "every record settled", True)
    finally:
        holder.kill()

    keys = {r["offset"]: r["key"] for m in members for r in m.records()}
    assert {o: keys.get(o) for o in written} == written
    # Never acknowledged, they came back when the leader changed, not at their lock's expiry.
    first_confirmed: dict[int, int] = {}
    for m in members:
        for o, t in m.confirmed_at().items():
            first_confirmed[o] = min(t, first_confirmed.get(o, t))
    expiry = hold["t"] + LOCK_MS
    late = {o: first_confirmed[o] - hold["t"] for o in held if first_confirmed[o] > expiry}
    assert not late, f"held records back only after their lock (ms after the hold): {late}"
    again = [
        (r["offset"], r["delivery_count"], r["t"] - first_confirmed[r["offset"]])
        for m in members
        for r in m.records()
        if r["offset"] in first_confirmed and r["t"] > first_confirmed[r["offset"]]
    ]
    assert not again, f"delivered after its acceptance was confirmed (ms later): {again[:10]}"
