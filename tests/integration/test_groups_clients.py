"""Consumer groups through every client with a group consumer: confluent-kafka (librdkafka),
kafka-python, aiokafka, KafkaJS 2.2.4, the Java client (4.3.0, and 3.9.1), franz-go and IBM
Sarama, each through its driver's ``group-consume`` (tests/integration/clients/README.md,
"Consumer groups").

- three members of one group share a 6-partition topic, each partition owned by exactly one
  member; a member that stops hands its partitions over within the session timeout, one that
  is killed (kill -9) once the session timeout expires; every record produced is processed at
  least once and the committed offsets end at the log end;
- kill -9 of the group coordinator's broker (``__consumer_offsets`` has RF 3): the group goes
  on, and its committed offsets are intact (no record below them is processed again);
- static membership (group.instance.id): a restarted member gets its partitions back without
  a rebalance of the others;
- KIP-848 (group.protocol=consumer) with confluent-kafka, Java 4.3.0 and franz-go, in one group
  while members come and go;
- the consumer flows of the seeds with each client: the rebalance callbacks get the right
  partitions (eager, and cooperative where the client has it), seek forward and back, pause
  while new records arrive and resume, a manual commit of chosen offsets is what OffsetFetch
  returns;
- bad input through real clients: a commit with a stale generation (ILLEGAL_GENERATION), from
  a member the group no longer knows (UNKNOWN_MEMBER_ID), a join with an empty group id
  (INVALID_GROUP_ID; a commit to it is taken, as Kafka does).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from tests.integration.clients.drivers import ensure_setup, run_driver
from tests.integration.clients.group_member import (
    CONSUMER_GROUP_HEARTBEAT,
    FAST,
    GROUP_DRIVERS,
    SESSION_TIMEOUT_S,
    External,
    GroupCluster,
    Member,
    broker_has_api,
    check_paused,
    committed,
    coordinator_log,
    describe,
    end_offsets,
    group_cluster,
    keys,
    names,
    new_topic,
    overlaps,
    processed_keys,
    produce,
    topic_replicas,
    wait_committed,
    wait_exclusive,
    wait_processed,
)
from tests.integration.conftest import wait_for

PARTITIONS = 6

# Members that commit what they processed (sync after each poll); KafkaJS commits the offsets
# it resolved after each processed message (its default autoCommit).
AT_LEAST_ONCE = {d: ("--commit", "sync") for d in GROUP_DRIVERS} | {"kafkajs": ()}


@pytest.fixture(scope="module", autouse=True)
def _clients_installed() -> None:
    ensure_setup()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GroupCluster]:
    with group_cluster(tmp_path_factory.mktemp("groups")) as c:
        yield c


def replication(cluster: GroupCluster) -> int:
    return 1 if isinstance(cluster, External) else 3


def fresh(cluster: GroupCluster, prefix: str, count: int = 0) -> tuple[str, str, set[str]]:
    """A fresh topic with ``count`` records, a fresh group name, and the records' keys."""
    topic, group, produced = new_topic(
        cluster.bootstrap, prefix, PARTITIONS, count, replication(cluster)
    )
    return topic, group, set(produced)


def start(
    driver: str, cluster: GroupCluster, topic: str, group: str, n: int, *opts: str, tag: str = ""
) -> list[Member]:
    """``n`` members of ``group``, named ``<driver><tag>-<i>``."""
    return [
        Member(driver, cluster.bootstrap, topic, group, *opts, name=f"{driver}{tag}-{i}")
        for i in range(n)
    ]


def stop_all(members: list[Member]) -> None:
    for m in members:
        if m.alive():
            assert m.stop() == 0, m.describe()


def check_group_outcome(
    cluster: GroupCluster, topic: str, group: str, members: list[Member], produced: set[str]
) -> None:
    """Every produced record processed at least once, committed offsets at the log end, and
    no partition owned by two members at once."""
    missing = produced - processed_keys(members)
    assert not missing, f"{len(missing)} records never processed, e.g. {sorted(missing)[:5]}"
    ends = end_offsets(cluster.bootstrap, topic)
    got = committed(cluster.bootstrap, topic, group)
    if got != ends:
        trail = sorted(
            (e["t"], m.name, e["via"], e["offsets"], e["error"])
            for m in members
            for e in m.of("commit")
            if any(int(p) in {q for q in ends if got[q] != ends[q]} for p in e["offsets"])
        )
        raise AssertionError(f"committed {got} != log end {ends}; commits of those: {trail[-8:]}")
    assert not overlaps(members), overlaps(members)


def finish(
    cluster: GroupCluster,
    topic: str,
    group: str,
    everyone: list[Member],
    produced: set[str],
    timeout: float = 90,
) -> None:
    """The end of a group's run: every produced record processed, the commits reach the log
    end, the members still running stop cleanly, and check_group_outcome."""
    wait_processed(everyone, produced, timeout)
    ends = end_offsets(cluster.bootstrap, topic)
    wait_committed(cluster.bootstrap, topic, group, ends, 60, everyone)
    try:
        stop_all(everyone)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{coordinator_log(cluster, group)}") from None
    check_group_outcome(cluster, topic, group, everyone, produced)


# -- three members: ownership, hand-over, nothing lost ------------------------------------------


@pytest.mark.parametrize("driver", GROUP_DRIVERS)
def test_members_share_hand_over_and_lose_nothing(cluster: GroupCluster, driver: str) -> None:
    topic, group, _ = fresh(cluster, f"share-{driver}")
    members = start(
        driver, cluster, topic, group, 3, *FAST, *AT_LEAST_ONCE[driver], "--process-ms", "10"
    )
    try:
        owned = wait_exclusive(members, PARTITIONS, timeout=60, balanced=True)
        assert sorted(len(p) for p in owned.values()) == [2, 2, 2], owned
        # Records only now, with all three in the group (they do not start at once).
        produced = set(produce(cluster.bootstrap, topic, keys(0, 300)))

        # A clean stop mid-way: its partitions move to the other two within the session
        # timeout (LeaveGroup makes it immediate in practice).
        first, second, third = members
        first.wait_records(10, 30)
        t0 = time.monotonic()
        assert first.stop() == 0, first.describe()
        wait_exclusive([second, third], PARTITIONS, timeout=SESSION_TIMEOUT_S)
        handover = time.monotonic() - t0
        assert handover <= SESSION_TIMEOUT_S, handover

        # More records, then kill -9 of a member while it works: the last one gets everything
        # once the coordinator expires the dead member's session.
        produced |= set(produce(cluster.bootstrap, topic, keys(300, 300)))
        before = len(second.records())
        second.wait_records(before + 10, 30)
        if isinstance(cluster, External):  # noida-db, for one, never expires a session
            second.stop()
        else:
            second.kill()
        wait_exclusive([third], PARTITIONS, timeout=SESSION_TIMEOUT_S + 15)
        finish(cluster, topic, group, members, produced)
    finally:
        for m in members:
            m.close()


# -- coordinator failover -------------------------------------------------------------------------


# KafkaJS heartbeats the coordinator it joined through until its retries run out (about 12 s
# with the driver's retry settings), never looking for a new one, then restarts as a new member.
# With a session shorter than that, the new coordinator rightly expires a member that still
# consumes its old partitions (a zombie, which Kafka allows), and the member they go to overlaps
# with it. A session longer than KafkaJS's retries keeps every member alive until it restarts.
COORDINATOR_KILL_TIMING = {d: FAST for d in GROUP_DRIVERS} | {
    "kafkajs": ("--session-timeout", "30", "--heartbeat-interval", "1")
}


# Sarama is left out for CI time (14 s): franz-go stands for the Go clients here.
COORDINATOR_KILL_DRIVERS = [d for d in GROUP_DRIVERS if d != "sarama"]


@pytest.mark.parametrize("driver", COORDINATOR_KILL_DRIVERS)
def test_group_survives_coordinator_kill(cluster: GroupCluster, driver: str) -> None:
    if isinstance(cluster, External):
        pytest.skip("needs a Rafka cluster to kill a broker of")
    topic, group, produced = fresh(cluster, f"coord-{driver}", 200)
    timing = COORDINATOR_KILL_TIMING[driver]
    members = start(driver, cluster, topic, group, 2, *timing, *AT_LEAST_ONCE[driver])
    coordinator = None
    try:
        wait_exclusive(members, PARTITIONS, timeout=60)
        wait_processed(members, produced, 60)
        before = wait_committed(
            cluster.bootstrap, topic, group, end_offsets(cluster.bootstrap, topic), 30, members
        )
        coordinator = describe(cluster.bootstrap, group).coordinator.id
        offsets_topic = topic_replicas(cluster.bootstrap, "__consumer_offsets")
        assert offsets_topic, offsets_topic
        assert all(len(r) == 3 for r in offsets_topic.values()), offsets_topic
        killed_at = int(time.time() * 1000)
        cluster.kill(f"broker-{coordinator}")

        more = set(produce(cluster.bootstrap, topic, keys(200, 200)))
        wait_processed(members, more, 90)
        for m in members:
            assert m.alive(), m.describe()
        finish(cluster, topic, group, members, produced | more)
        assert describe(cluster.bootstrap, group).coordinator.id != coordinator
        # Offsets intact: nothing below what was committed before the kill is read again.
        again = [
            (m.name, r["partition"], r["offset"])
            for m in members
            for r in m.records()
            if r["t"] >= killed_at and r["offset"] < before[r["partition"]]
        ]
        assert not again, f"re-read below the committed offsets: {again[:5]}"
    finally:
        for m in members:
            m.close()
        if coordinator is not None:
            cluster.start_node(f"broker-{coordinator}")
            cluster.wait_ready(names=[f"broker-{coordinator}"])


# -- static membership -------------------------------------------------------------------------

STATIC_DRIVERS = ["confluent", "kafka-python", "aiokafka", "java-4.3.0", "franz-go", "sarama"]
# franz-go's default balancer is cooperative-sticky. A restarted static leader computes a plan
# of its own from the members' metadata of their last JoinGroup (KIP-814: SkipAssignment) and
# rejoins, forcing a rebalance, when its part differs from the assignment the broker kept: with
# cooperative-sticky that metadata (owned partitions) can be a round behind, on any broker.
# Range sorts members by group.instance.id, so its plan comes out the same.
STATIC_OPTIONS = {"franz-go": ("--assignor", "range")}


@pytest.mark.parametrize("driver", STATIC_DRIVERS)
def test_static_member_restart_does_not_rebalance(cluster: GroupCluster, driver: str) -> None:
    topic, group, _ = fresh(cluster, f"static-{driver}", 60)

    def static(i: int) -> Member:
        return Member(
            driver,
            cluster.bootstrap,
            topic,
            group,
            *FAST,
            "--commit",
            "sync",
            "--instance-id",
            f"instance-{i}",
            *STATIC_OPTIONS.get(driver, ()),
            name=f"{driver}-static-{i}",
        )

    members = [static(i) for i in range(3)]
    restarted = None
    try:
        owned = wait_exclusive(members, PARTITIONS, timeout=60, balanced=True)
        wait_for(lambda: len(processed_keys(members)) == 60, 60, "the first records")
        others = members[1:]
        seen = {m.name: len(m.events) for m in others}
        generation = members[0].of("assigned")[-1]["generation"]

        # A static member's close() does not leave the group; its replacement, with the same
        # group.instance.id, is given the same partitions without a rebalance.
        assert members[0].stop() == 0, members[0].describe()
        restarted = static(0)
        got = restarted.wait_event("assigned", timeout=SESSION_TIMEOUT_S)
        assert set(got["owned"]) == owned[members[0].name], (got, owned)
        if generation is not None and got["generation"] is not None:
            assert got["generation"] == generation, (got, generation)

        # The others keep working (new records reach them) and see no rebalance: no
        # assignment callback at all for three heartbeat intervals.
        produce(cluster.bootstrap, topic, keys(60, 60))
        wait_for(lambda: len(processed_keys([*members, restarted])) == 120, 60, "new records")

        def rebalanced() -> list[dict]:
            return [
                e
                for m in others
                for e in m.events[seen[m.name] :]
                if e["event"] in ("assigned", "revoked", "lost")
            ]

        # A window of three heartbeat intervals in which a rebalance, had one started, shows.
        quiet_until = time.monotonic() + 3
        while time.monotonic() < quiet_until:
            assert not rebalanced(), f"the others were rebalanced: {rebalanced()}"
            time.sleep(0.1)
        desc = describe(cluster.bootstrap, group)
        assert sorted(x.group_instance_id for x in desc.members) == [
            "instance-0",
            "instance-1",
            "instance-2",
        ]
    finally:
        for m in [*members, *([restarted] if restarted else [])]:
            m.close()


# -- KIP-848 ------------------------------------------------------------------------------------

KIP848_DRIVERS = ["confluent", "java-4.3.0", "franz-go"]


def needs_kip848(cluster: GroupCluster) -> None:
    """Rafka lists ConsumerGroupHeartbeat in ApiVersions: without it librdkafka would wait for
    it silently and Java fail at once, so a missing one fails here, saying so. A broker started
    elsewhere (External) may lack KIP-848: those tests skip there."""
    if broker_has_api(cluster.bootstrap, CONSUMER_GROUP_HEARTBEAT):
        return
    if isinstance(cluster, External):
        pytest.skip(f"{cluster.bootstrap} has no ConsumerGroupHeartbeat (KIP-848)")
    raise AssertionError(
        "ApiVersions does not list ConsumerGroupHeartbeat (API key 68): Rafka's KIP-848 "
        "handlers are not advertised"
    )


@pytest.mark.parametrize("driver", KIP848_DRIVERS)
def test_kip848_members_share_and_hand_over(cluster: GroupCluster, driver: str) -> None:
    needs_kip848(cluster)
    topic, group, _ = fresh(cluster, f"kip848-{driver}")
    opts = ("--protocol", "consumer", "--commit", "sync", "--process-ms", "10")
    members = start(driver, cluster, topic, group, 3, *opts, tag="-848")
    try:
        owned = wait_exclusive(members, PARTITIONS, timeout=60, balanced=True)
        assert sorted(len(p) for p in owned.values()) == [2, 2, 2], owned
        produced = set(produce(cluster.bootstrap, topic, keys(0, 300)))
        desc = describe(cluster.bootstrap, group)
        assert desc.type.name == "CONSUMER", desc.type
        members[0].wait_records(10, 30)
        t0 = time.monotonic()
        assert members[0].stop() == 0, members[0].describe()
        wait_exclusive(members[1:], PARTITIONS, timeout=SESSION_TIMEOUT_S)
        assert time.monotonic() - t0 <= SESSION_TIMEOUT_S
        finish(cluster, topic, group, members, produced)
    finally:
        for m in members:
            m.close()


# Clients mixed in one group: classic members agree on the range assignor.
CHURN = {
    "classic": (
        ["confluent", "java-4.3.0", "kafka-python", "aiokafka", "franz-go", "sarama"],
        ("--assignor", "range"),
    ),
    "consumer": (["confluent", "java-4.3.0", "franz-go"], ("--protocol", "consumer")),
}


@pytest.mark.parametrize("protocol", list(CHURN))
def test_members_joining_while_others_leave(cluster: GroupCluster, protocol: str) -> None:
    """Different clients in one group (KIP-848: confluent-kafka, Java 4.3.0 and franz-go); two
    start, then members join while others leave (clean stops and a kill -9) without waiting for the
    group to settle, records flowing all along: in the end three members share the partitions
    and nothing was lost."""
    if protocol == "consumer":
        needs_kip848(cluster)
    topic, group, _ = fresh(cluster, f"churn-{protocol}")
    drivers, protocol_opts = CHURN[protocol]
    timing = FAST if protocol == "classic" else ()
    opts = (*protocol_opts, *timing, "--commit", "sync", "--process-ms", "5")
    produced: set[str] = set()
    everyone: list[Member] = []
    next_driver = itertools.cycle(drivers)

    def join() -> Member:
        driver = next(next_driver)
        m = Member(driver, cluster.bootstrap, topic, group, *opts, name=f"{driver}-{len(everyone)}")
        everyone.append(m)
        return m

    try:
        live = [join(), join()]
        produced |= set(produce(cluster.bootstrap, topic, keys(0, 200)))
        wait_exclusive(live, PARTITIONS, timeout=60)
        steps = [("join", 0), ("join", 0), ("stop", 0), ("join", 0), ("kill", 1), ("join", 0)]
        batch = 200
        for action, index in [*steps, ("stop", 0)]:
            if action == "join":
                live.append(join())
            else:
                leaving = live.pop(index)
                leaving.stop() if action == "stop" else leaving.kill()
            produced |= set(produce(cluster.bootstrap, topic, keys(batch, 100)))
            batch += 100
        # The killed member is noticed once its session expires (KIP-848: the broker's
        # group.consumer.session.timeout.ms).
        owned = wait_exclusive(live, PARTITIONS, timeout=60, balanced=True)
        assert sorted(len(p) for p in owned.values()) == [2, 2, 2], owned
        # A killed member's records come again to their new owner, which commits them.
        finish(cluster, topic, group, everyone, produced)
    finally:
        for m in everyone:
            m.close()


# -- the consumer flows of the seeds, with every client -------------------------------------

FLOW_RECORDS = 120
# Eager rebalancing: the range assignor (KafkaJS has roundrobin only). Incremental
# (cooperative-sticky) where the client has it: not aiokafka, not KafkaJS.
EAGER = {d: "range" for d in GROUP_DRIVERS} | {"kafkajs": "roundrobin"}
COOPERATIVE_DRIVERS = ["confluent", "kafka-python", "java-4.3.0", "franz-go", "sarama"]


# Sarama's cooperative member takes a clean leaver's partitions back slowly, on Apache Kafka 4.4
# as on Rafka: its fetchers keep running through the rejoin, and Sarama holds a broker's lock for
# a whole Fetch long-poll (500 ms). The leader's metadata refresh before it assigns
# (LeastLoadedBroker takes every broker's lock, a goroutine dump shows it waiting there), its
# SyncGroup and its offset fetches each wait behind one or more of those. Measured with two CPU
# hogs beside the cluster: 4-10 s on Kafka, 7-12 s on Rafka (eager: 1.5 s on both, its fetchers
# stop first). A loaded CI machine doubles that, so the budget is 45 s: a member that never
# takes them back still fails.
HAND_BACK_S = {"sarama": 45}


@pytest.fixture(scope="module")
def flow_topic(cluster: GroupCluster) -> tuple[str, dict[int, int]]:
    """One topic of FLOW_RECORDS records that the flows below read, each test in a group of its
    own; and its end offsets."""
    topic, _, _ = fresh(cluster, "flows", FLOW_RECORDS)
    return topic, end_offsets(cluster.bootstrap, topic)


def flow_member(driver: str, cluster: GroupCluster, topic: str, group: str, *opts: str) -> Member:
    return Member(driver, cluster.bootstrap, topic, group, *FAST, *opts, name=driver)


@pytest.mark.parametrize(
    ("driver", "rebalancing"),
    [(d, "eager") for d in GROUP_DRIVERS] + [(d, "cooperative") for d in COOPERATIVE_DRIVERS],
)
def test_rebalance_callbacks_get_the_partitions(
    cluster: GroupCluster, flow_topic: tuple, driver: str, rebalancing: str
) -> None:
    """The rebalance callbacks (on assign / on revoke; KafkaJS: around its join, see the
    driver) get the partitions that move. Member a alone is assigned all six. b joins: eager,
    all of a's are revoked and the new split assigned; cooperative, a gives up only what goes
    to b, and b is assigned just that. b leaves: a is assigned b's partitions (eager: all six
    again)."""
    topic, _ = flow_topic
    _, group = names(f"cb-{driver}")
    assignor = EAGER[driver] if rebalancing == "eager" else "cooperative-sticky"
    opts = (*AT_LEAST_ONCE[driver], "--assignor", assignor)
    a = Member(driver, cluster.bootstrap, topic, group, *FAST, *opts, name="a")
    b = None
    try:
        # (kafka-python may join before it knows the topic: an empty assignment, then a rejoin)
        wait_exclusive([a], PARTITIONS, timeout=60)
        assert a.of("assigned")[-1]["partitions"] == list(range(PARTITIONS)), a.of("assigned")
        b = Member(driver, cluster.bootstrap, topic, group, *FAST, *opts, name="b")
        owned = wait_exclusive([a, b], PARTITIONS, timeout=60, balanced=True)
        revoked = {p for e in a.of("revoked") for p in e["partitions"]}
        if rebalancing == "eager":
            assert revoked == set(range(PARTITIONS)), a.of("revoked")
            assert set(a.of("assigned")[-1]["partitions"]) == owned["a"], a.of("assigned")
            assert set(b.of("assigned")[-1]["partitions"]) == owned["b"], b.of("assigned")
        else:
            assert revoked == owned["b"], (a.of("revoked"), owned)
            assert {p for e in b.of("assigned") for p in e["partitions"]} == owned["b"]
        seen, seen_revoked = len(a.of("assigned")), len(a.of("revoked"))
        assert b.stop() == 0, b.describe()
        wait_exclusive([a], PARTITIONS, timeout=HAND_BACK_S.get(driver, SESSION_TIMEOUT_S))
        back = {p for e in a.of("assigned")[seen:] for p in e["partitions"]}
        want = set(range(PARTITIONS)) if rebalancing == "eager" else owned["b"]
        restarted = {p for e in a.of("revoked")[seen_revoked:] for p in e["partitions"]}
        if driver == "sarama" and restarted == owned["a"]:
            # Sarama has no rebalance listener: when its client ends the session (Cleanup, all
            # of a's revoked) and starts another, Setup reports the whole assignment again
            want = set(range(PARTITIONS))
        assert back == want, (a.of("assigned")[seen:], a.of("revoked")[seen_revoked:])
    finally:
        for m in (a, b):
            if m:
                m.close()


# Sarama's consumer group cannot seek a claimed partition (its claims read from where they
# started; ResetOffset only changes what is committed).
SEEK_DRIVERS = [d for d in GROUP_DRIVERS if d != "sarama"]


@pytest.mark.parametrize("driver", SEEK_DRIVERS)
def test_seek_forward_and_back(cluster: GroupCluster, flow_topic: tuple, driver: str) -> None:
    """seek() at partition 2's first record to offset 5: it is read from 5 on. At partition
    4's record ``back``, seek() back to offset 2: records 2 .. back - 1 come again, then the
    rest. The other partitions are read once from the start."""
    topic, ends = flow_topic
    _, group = names(f"seek-{driver}")
    back = ends[4] // 2
    assert ends[2] > 5, ends
    assert back > 2, ends
    want = {p: list(range(end)) for p, end in ends.items() if end}
    want[2] = list(range(5, ends[2]))
    want[4] = [*range(back), *range(2, ends[4])]
    seek = f"2:5,4:2@{back}"
    m = flow_member(driver, cluster, topic, group, *AT_LEAST_ONCE[driver], "--seek", seek)
    try:
        m.wait_records(sum(map(len, want.values())), 60)
        assert m.offsets() == want
        seeks = sorted((e["partition"], e["offset"], e["at"]) for e in m.of("seek"))
        assert seeks == [(2, 5, 0), (4, 2, back)], seeks
    finally:
        m.close()


@pytest.mark.parametrize("driver", GROUP_DRIVERS)
def test_paused_partition_holds_new_records_until_resumed(
    cluster: GroupCluster, driver: str
) -> None:
    """pause() partition 1 once it is assigned (KafkaJS: at its first message, the docs' way:
    that message comes again after the resume). Records produced while it is paused reach the
    other partitions, none of partition 1's is processed; after resume() (when the test says
    so) all of partition 1 comes, once each, in order."""
    topic, group, first = new_topic(
        cluster.bootstrap, f"pause-{driver}", PARTITIONS, 60, replication(cluster)
    )
    m = flow_member(driver, cluster, topic, group, *AT_LEAST_ONCE[driver], "--pause", "1")
    try:
        m.wait_event("paused", timeout=60)
        more = produce(cluster.bootstrap, topic, keys(60, 60))
        produced = first | more
        assert any(p == 1 for p, _ in more.values()), more  # new records held back
        wait_processed([m], [k for k, (p, _) in produced.items() if p != 1], 60)
        assert 1 not in m.offsets(), m.offsets()[1]
        m.tell("resume")
        wait_processed([m], produced, 60)
        check_paused(m, 1, end_offsets(cluster.bootstrap, topic)[1])
    finally:
        m.close()


@pytest.mark.parametrize("driver", GROUP_DRIVERS)
def test_manual_commit_is_what_offset_fetch_returns(
    cluster: GroupCluster, flow_topic: tuple, driver: str
) -> None:
    """Auto-commit off, every 7th record's offset + 1 committed by hand (a synchronous commit of
    chosen offsets; KafkaJS commitOffsets): OffsetFetch returns exactly those, not the
    positions, and a clean close adds nothing."""
    topic, ends = flow_topic
    _, group = names(f"manual-{driver}")
    m = flow_member(driver, cluster, topic, group, "--commit", "offsets", "--commit-every", "7")
    count = FLOW_RECORDS // 7

    def manual(evs: list[dict]) -> list[dict] | None:
        got = [e for e in evs if e["event"] == "commit" and e["via"] == "offsets"]
        return got if len(got) >= count else None

    try:
        commits = m.wait_for(manual, 60, f"{count} manual commits")
        assert len(commits) == count, commits
        assert all(e["error"] is None for e in commits), commits
        want = {p: -1 for p in range(PARTITIONS)}
        for e in commits:
            for p, o in e["offsets"].items():
                want[int(p)] = max(want[int(p)], o)
        assert want != ends  # chosen offsets, not the positions
        assert committed(cluster.bootstrap, topic, group) == want
        assert m.stop() == 0, m.describe()
        assert committed(cluster.bootstrap, topic, group) == want
    finally:
        m.close()


# -- the drivers' admin commands ----------------------------------------------------------------


@pytest.mark.parametrize("driver", ["confluent", "java-4.3.0", "kafkajs", "franz-go", "sarama"])
def test_describe_group_and_committed(cluster: GroupCluster, driver: str) -> None:
    """describe-group and committed through each client's admin API agree with the group: one
    member owning every partition, the coordinator FindCoordinator names, the offsets the
    member committed."""
    topic, group, _ = fresh(cluster, f"admin-{driver}", 60)
    m = Member("confluent", cluster.bootstrap, topic, group, *FAST, "--commit", "sync")
    try:
        wait_exclusive([m], PARTITIONS, timeout=60)
        ends = end_offsets(cluster.bootstrap, topic)
        wait_committed(cluster.bootstrap, topic, group, ends, 30, [m])
        args = ("--bootstrap", cluster.bootstrap, "--group", group, "--timeout", "20")
        got = run_driver(driver, "describe-group", *args, timeout=90)
        assert got.returncode == 0, got.stderr[-2000:]
        d = got.lines[0]
        assert d["error"] is None, d
        assert d["state"] == "Stable", d
        assert d["coordinator"] == describe(cluster.bootstrap, group).coordinator.id
        assert [x["partitions"] for x in d["members"]] == [[[topic, p] for p in range(6)]], d
        got = run_driver(driver, "committed", *args, "--topic", topic, timeout=90)
        assert got.returncode == 0, got.stderr[-2000:]
        assert got.lines[0] == {str(p): o for p, o in ends.items()}
    finally:
        m.close()


# -- bad input through real clients ---------------------------------------------------------------


def commit(driver: str, cluster: GroupCluster, topic: str, group: str, offsets: str, *extra: str):
    res = run_driver(
        driver,
        "commit",
        "--bootstrap",
        cluster.bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--offsets",
        offsets,
        "--timeout",
        "20",
        *extra,
        timeout=90,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.lines[0]


@pytest.mark.parametrize("driver", ["kafka-python", "kafkajs", "franz-go", "sarama"])
def test_commit_with_stale_generation_or_unknown_member(cluster: GroupCluster, driver: str) -> None:
    """A member's id with the generation it had before a rebalance: ILLEGAL_GENERATION; with
    its current generation: accepted; an id the group never saw: UNKNOWN_MEMBER_ID. The
    OffsetCommit is built and sent by the client library's own protocol layer."""
    topic, group, _ = fresh(cluster, f"stale-{driver}")
    a = Member(driver, cluster.bootstrap, topic, group, *FAST, name=f"{driver}-a")
    b = None
    try:
        first = a.wait_event("assigned", timeout=60)
        member_id, old = first["member_id"], first["generation"]
        b = Member(driver, cluster.bootstrap, topic, group, *FAST, name=f"{driver}-b")
        wait_exclusive([a, b], PARTITIONS, timeout=60)
        new = a.of("assigned")[-1]["generation"]
        assert new > old, (old, new)

        got = commit(
            driver, cluster, topic, group, "0:1", "--member-id", member_id, "--generation", str(old)
        )
        assert got["error"] == "ILLEGAL_GENERATION", got
        got = commit(
            driver, cluster, topic, group, "0:1", "--member-id", member_id, "--generation", str(new)
        )
        assert got["error"] is None, got
        got = commit(
            driver,
            cluster,
            topic,
            group,
            "0:1",
            "--member-id",
            "no-such-member",
            "--generation",
            str(new),
        )
        assert got["error"] == "UNKNOWN_MEMBER_ID", got
    finally:
        for m in (a, b):
            if m:
                m.close()


@pytest.mark.parametrize(
    "driver", ["confluent", "kafka-python", "kafkajs", "java-4.3.0", "franz-go", "sarama"]
)
def test_commit_from_outside_an_active_group(cluster: GroupCluster, driver: str) -> None:
    """A client that is not a member (generation -1, no member id: an admin client or an
    assign()ing consumer) commits to a group with members: UNKNOWN_MEMBER_ID. Once the group
    is empty the same commit is accepted."""
    topic, group, _ = fresh(cluster, f"outside-{driver}")
    m = Member("confluent", cluster.bootstrap, topic, group, *FAST, name="member")
    try:
        m.wait_event("assigned", timeout=60)
        got = commit(driver, cluster, topic, group, "0:7")
        assert got["error"] == "UNKNOWN_MEMBER_ID", got
        assert m.stop() == 0
        got = commit(driver, cluster, topic, group, "0:7")
        assert got["error"] is None, got
        assert committed(cluster.bootstrap, topic, group)[0] == 7
    finally:
        m.close()


def test_member_kicked_out_then_commits_gets_unknown_member(cluster: GroupCluster) -> None:
    """KafkaJS heartbeats between messages only: a member stuck in one message for longer
    than the session timeout is removed by the coordinator, and its commit afterwards is
    refused with UNKNOWN_MEMBER_ID (then KafkaJS rejoins and goes on)."""
    topic, group, produced = fresh(cluster, "kicked", 60)
    stall_ms = str((SESSION_TIMEOUT_S + 3) * 1000)
    m = Member(
        "kafkajs",
        cluster.bootstrap,
        topic,
        group,
        *FAST,
        "--commit",
        "offsets",
        "--stall-at",
        "5",
        "--stall-ms",
        stall_ms,
        name="kafkajs-stuck",
    )
    try:
        bad = m.wait_for(
            lambda evs: [e for e in evs if e["event"] == "commit" and e["error"]],
            SESSION_TIMEOUT_S + 30,
            "a refused commit",
        )
        assert bad[0]["error"] == "UNKNOWN_MEMBER_ID", bad
        # It rejoins as a new member and finishes the work.
        wait_processed([m], produced, 60)
        ids = {e["member_id"] for e in m.of("assigned")}
        assert len(ids) == 2, ids
    finally:
        m.close()


@pytest.mark.parametrize("driver", ["kafka-python", "kafkajs", "java-4.3.0", "franz-go", "sarama"])
def test_commit_with_empty_group_id(cluster: GroupCluster, driver: str) -> None:
    """As Kafka keeps it for pre-0.9 clients, the empty group id takes offsets (the clients
    that send it get them committed)."""
    topic, _, _ = fresh(cluster, f"nogroup-{driver}")
    got = commit(driver, cluster, topic, "", "0:1")
    assert got == {"error": None, "partitions": {"0": None}}, got


@pytest.mark.parametrize("driver", ["kafka-python", "aiokafka"])
def test_join_with_empty_group_id(cluster: GroupCluster, driver: str) -> None:
    """kafka-python and aiokafka send an empty group id as it is (librdkafka, Java and KafkaJS
    refuse it locally): the broker answers INVALID_GROUP_ID and the consumer fails."""
    topic, _, _ = fresh(cluster, f"nogroup-join-{driver}")
    m = Member(driver, cluster.bootstrap, topic, "", *FAST, name=f"{driver}-nogroup")
    try:
        err = m.wait_event("error", timeout=60)
        assert err["error"] == "INVALID_GROUP_ID", err
        m.proc.wait(30)
        assert m.proc.returncode != 0
    finally:
        m.close()
