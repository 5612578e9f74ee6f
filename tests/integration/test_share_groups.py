"""Share groups (KIP-932) end to end with the real share consumers: confluent-kafka's
ShareConsumer (librdkafka 2.16) and Java's KafkaShareConsumer (kafka-clients 4.3.0), each run
as a `share-consume` driver process in explicit acknowledgement mode.

- 4 members of one group on a 1-partition topic together read 10,000 records, each record
  delivered exactly once when every member accepts;
- a released record is redelivered to another member (delivery count 2);
- a rejected record is never delivered again;
- the records a member holds without acknowledging them are delivered to another member, with
  delivery count 2, once their acquisition lock is gone; those of a member killed (-9) as soon
  as its connection closes;
- a record released over and over is archived after `share.delivery.count.limit` deliveries;
- a read_committed group gets a committed transaction's records, never an aborted one's.

Group configs (share.auto.offset.reset, share.record.lock.duration.ms,
share.delivery.count.limit) are set through each client's admin API (IncrementalAlterConfigs
on the GROUP resource). One single-broker cluster serves the module.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from cluster.local import LocalCluster
from tests.integration.clients.drivers import ensure_setup
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.share_members import (
    CLIENTS,
    Member,
    alter_group,
    assigned_members,
    create_topic,
    duplicates,
    produce,
    running,
    wait_confirmed,
)

LOCK_MS = 2000  # share.record.lock.duration.ms of the hold test's group
LONG_LOCK_MS = 60_000  # the kill test's: its records must come back long before
DELIVERY_LIMIT = 3  # share.delivery.count.limit of the poison-record test's group


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    ensure_setup()
    with running_cluster(
        tmp_path_factory.mktemp("share"),
        brokers=1,
        metas=1,
        group_share_min_record_lock_duration_ms="1000",
        group_share_heartbeat_interval_ms="1000",
    ) as c:
        yield c


def names(what: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:6]
    return f"share-{what}-{tag}", f"g-{what}-{tag}"


def new_group(client: str, bootstrap: str, what: str, **configs: object) -> tuple[str, str]:
    """A fresh 1-partition topic and a group reading it from its start."""
    topic, group = names(what)
    create_topic(bootstrap, topic)
    alter_group(client, bootstrap, group, share_auto_offset_reset="earliest", **configs)
    return topic, group


@pytest.mark.parametrize("client", CLIENTS)
def test_four_members_read_each_record_once(cluster: LocalCluster, client: str) -> None:
    n = 10_000
    b = cluster.bootstrap
    topic, group = new_group(client, b, "four")
    members = [Member(client, b, topic, group) for _ in range(4)]
    with running(*members):
        wait_for(lambda: assigned_members(b, group) == 4, 90, "4 members with partition 0")
        produce(b, topic, 0, n)
        wait_confirmed(members, set(range(n)), 180, f"{n} records accepted")
    records = [r for m in members for r in m.records()]
    offsets = [r["offset"] for r in records]
    assert set(offsets) == set(range(n))
    assert not duplicates(offsets), f"delivered more than once: {list(duplicates(offsets))[:10]}"
    assert {r["delivery_count"] for r in records} == {1}
    assert {r["key"] for r in records} == {f"key-{i}" for i in range(n)}
    counts = [len(m.records()) for m in members]
    assert sum(1 for c in counts if c) >= 2, f"records per member {counts}: not shared"


@pytest.mark.parametrize("client", CLIENTS)
def test_released_records_go_to_another_member(cluster: LocalCluster, client: str) -> None:
    n = 20
    b = cluster.bootstrap
    topic, group = new_group(client, b, "release")
    produce(b, topic, 0, n)
    releaser = Member(client, b, topic, group, "--ack", "release", "--max-records", "5")
    with running(releaser):
        releaser.wait("closed")
    released = Counter(r["offset"] for r in releaser.records())  # it may get one back itself
    assert released
    assert {r["ack"] for r in releaser.records()} == {"release"}
    assert set(released) <= releaser.confirmed(), "the releases were not confirmed"

    taker = Member(client, b, topic, group)
    with running(taker):
        wait_confirmed([taker], set(range(n)), 60, "every record accepted by the second member")
    got = taker.records()
    assert not duplicates(r["offset"] for r in got)
    counts = {r["offset"]: r["delivery_count"] for r in got}
    # The delivery count counts acquisitions: each release the releaser's application saw, plus
    # any record a client prefetched again and released unseen when it closed (a busy machine
    # lets the Java client fetch once more before its fifth record is handed over).
    assert all(counts.get(o, 0) >= k + 1 for o, k in released.items()), (released, counts)


@pytest.mark.parametrize("client", CLIENTS)
def test_rejected_records_are_never_redelivered(cluster: LocalCluster, client: str) -> None:
    b = cluster.bootstrap
    topic, group = new_group(client, b, "reject")
    produce(b, topic, 0, 20)
    rejected = {0, 3, 7, 19}
    first = Member(client, b, topic, group, "--reject", ",".join(map(str, sorted(rejected))))
    with running(first):
        wait_confirmed([first], set(range(20)), 60, "20 records acknowledged")
        produce(b, topic, 20, 20)  # later records: a redelivery of 0..19 would come first
        second = Member(client, b, topic, group)
        with running(second):
            wait_confirmed([first, second], set(range(40)), 60, "records 20..39 accepted")
    records = first.records() + second.records()
    acks = {r["offset"]: r["ack"] for r in first.records()}
    assert {o for o, a in acks.items() if a == "reject"} == rejected
    offsets = [r["offset"] for r in records]
    assert not duplicates(offsets), f"redelivered: {duplicates(offsets)}"
    assert set(offsets) == set(range(40))


@pytest.mark.parametrize("client", CLIENTS)
def test_held_records_redelivered_after_their_lock(cluster: LocalCluster, client: str) -> None:
    """A member that holds its records without acknowledging them (connected, heartbeating)
    loses them when their acquisition lock expires."""
    n = 20
    b = cluster.bootstrap
    topic, group = new_group(client, b, "hold", share_record_lock_duration_ms=LOCK_MS)
    produce(b, topic, 0, n)
    holder = Member(client, b, topic, group, "--hold", "true")
    with running(holder):
        holder.wait("hold")
        held = {r["offset"] for r in holder.records()}
        assert held
        assert {r["delivery_count"] for r in holder.records()} == {1}
        taker = Member(client, b, topic, group)
        with running(taker):
            wait_confirmed([taker], set(range(n)), 60, "every record accepted by the taker")
    counts = {r["offset"]: r["delivery_count"] for r in taker.records()}
    assert {o: counts.get(o) for o in held} == dict.fromkeys(held, 2)


@pytest.mark.parametrize("client", CLIENTS)
def test_killed_member_records_back_with_its_connection(cluster: LocalCluster, client: str) -> None:
    """kill -9 of a member holding records: they come back when its connection closes (Kafka's
    share session disconnect listener), long before their 60 s lock would expire."""
    n = 20
    b = cluster.bootstrap
    topic, group = new_group(client, b, "kill", share_record_lock_duration_ms=LONG_LOCK_MS)
    produce(b, topic, 0, n)
    holder = Member(client, b, topic, group, "--hold", "true")
    try:
        holder.wait("hold")
    finally:
        holder.kill()  # kill -9 while its records are acquired
    held = {r["offset"] for r in holder.records()}
    assert held
    assert {r["delivery_count"] for r in holder.records()} == {1}

    taker = Member(client, b, topic, group)
    with running(taker):
        wait_confirmed(
            [taker], set(range(n)), LONG_LOCK_MS / 2000, "every record accepted after the kill"
        )
    got = taker.records()
    assert not duplicates(r["offset"] for r in got)
    counts = {r["offset"]: r["delivery_count"] for r in got}
    assert {o: counts.get(o) for o in held} == dict.fromkeys(held, 2)


@pytest.mark.parametrize("client", CLIENTS)
def test_delivery_limit_archives_a_poison_record(cluster: LocalCluster, client: str) -> None:
    b = cluster.bootstrap
    topic, group = new_group(client, b, "poison", share_delivery_count_limit=DELIVERY_LIMIT)
    produce(b, topic, 0, 10)
    poison = 4
    member = Member(client, b, topic, group, "--release", str(poison))
    with running(member):
        member.run.wait_line(
            lambda x: x.get("offset") == poison and x.get("delivery_count") == DELIVERY_LIMIT,
            60,
            f"the poison record's delivery {DELIVERY_LIMIT}",
        )
        produce(b, topic, 10, 10)  # an available poison record would come before these
        wait_confirmed([member], set(range(20)), 60, "every record acknowledged")
    deliveries = [r for r in member.records() if r["offset"] == poison]
    assert [r["delivery_count"] for r in deliveries] == list(range(1, DELIVERY_LIMIT + 1))
    assert {r["ack"] for r in deliveries} == {"release"}
    others = [r["offset"] for r in member.records() if r["offset"] != poison]
    assert sorted(others) == [o for o in range(20) if o != poison]


@pytest.mark.parametrize("client", CLIENTS)
def test_read_committed_group_never_gets_aborted_records(
    cluster: LocalCluster, client: str
) -> None:
    """share.isolation.level=read_committed: a transaction's records are delivered once it
    commits, an aborted transaction's never (nor the transaction markers)."""
    b = cluster.bootstrap
    topic, group = new_group(client, b, "txn", share_isolation_level="read_committed")
    p = Producer({"bootstrap.servers": b, "transactional.id": f"{group}-tx"})
    p.init_transactions(30)
    for i, commit in enumerate((True, False, True)):
        p.begin_transaction()
        for j in range(5):
            p.produce(topic, key=f"key-{i}-{j}", value=b"v", partition=0)
        p.flush(30)  # in the log before the abort (an abort drops what is still unsent)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    # offsets: 0-4 committed, 5 marker, 6-10 aborted, 11 marker, 12-16 committed, 17 marker
    committed = set(range(5)) | set(range(12, 17))
    member = Member(client, b, topic, group)
    with running(member):
        wait_confirmed([member], committed, 60, "the committed records accepted")
    got = member.records()
    assert sorted(r["offset"] for r in got) == sorted(committed)
    assert {r["key"] for r in got} == {f"key-{i}-{j}" for i in (0, 2) for j in range(5)}
