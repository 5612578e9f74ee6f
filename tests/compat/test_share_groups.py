"""Share groups (KIP-932): membership (ShareGroupHeartbeat, ShareGroupDescribe), records
acquired and acknowledged (ShareFetch, ShareAcknowledge) with their share sessions, the share
offsets APIs and the group configs, with every error a share consumer or an admin can provoke.
Flows play the same requests on both brokers (flows.py); member ids are the clients' own."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from cluster.kafka_client import builder
from cluster.polling import wait_for
from tests.compat import flows
from tests.compat.conftest import create_topics
from tests.compat.flows import Broker
from tests.compat.pair import Pair
from tests.unit.log.batches import make_batch

PRODUCE, DESCRIBE_CONFIGS, ALTER_CONFIGS = 0, 32, 44
CG_HEARTBEAT, SHARE_HEARTBEAT, SHARE_DESCRIBE, SHARE_FETCH, SHARE_ACK = 68, 76, 77, 78, 79
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
GROUP_RESOURCE, SET, DELETE = 32, 0, 1
TOPIC = "compat-share"  # 1 partition, offsets 0-5 in three batches
TWO = "compat-share-two"  # 2 partitions, empty
MS = datetime.timedelta(milliseconds=1)
# The batches' timestamps: the same on both brokers (so both logs hold the same bytes) and
# recent (Kafka's retention would delete batches older than retention.ms under the test).
T0 = time.time_ns() // 1_000_000
BATCHES = [
    make_batch([b"a0", b"a1"], timestamps=[T0, T0 + 10]),
    make_batch([b"b0", b"b1", b"b2"], timestamps=[T0 + 20, T0 + 30, T0 + 40]),
    make_batch([b"c0"], timestamps=[T0 + 50]),
]
ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.fixture(scope="module", autouse=True)
def topics(pair: Pair) -> None:
    create_topics(pair, NewTopic(TOPIC, 1, 1), NewTopic(TWO, 2, 1))
    b = builder(PRODUCE, 9)
    for batch in BATCHES:
        data = b.TopicProduceData(
            name=TOPIC, partition_data=(b.PartitionProduceData(index=0, records=batch),)
        )
        for answer in pair.send(
            PRODUCE, 9, transactional_id=None, acks=-1, timeout=10000, topic_data=(data,)
        ):
            assert answer.responses[0].partition_responses[0].error_code == 0, answer
    flows.wait_for_coordinators(pair)


# -- requests ------------------------------------------------------------------------------------


def heartbeat(
    b: Broker, group: str, member: str, epoch: int, topics: tuple[str, ...] | None = None
) -> Any:
    return b.call(
        SHARE_HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rack_id=None,
        subscribed_topic_names=topics,
    )


def join(b: Broker, group: str, member: str, topics: tuple[str, ...] = (TOPIC,)) -> int:
    """A member joins and heartbeats until it has its partitions: its epoch then."""
    r = heartbeat(b, group, member, 0, topics)
    assert r.error_code == 0, r
    return settle(b, group, member, r.member_epoch, r.assignment)


def settle(b: Broker, group: str, member: str, epoch: int, assignment: Any = None) -> int:
    """Heartbeat until the member has partitions and its assignment stops changing (Kafka
    assigns a share-partition once its state is initialized): its epoch then."""
    assigned = bool(assignment and assignment.topic_partitions)

    def settled() -> bool:
        nonlocal epoch, assigned
        h = heartbeat(b, group, member, epoch)
        assert h.error_code == 0, h
        epoch = h.member_epoch
        if h.assignment is not None:
            assigned = bool(h.assignment.topic_partitions)
            return False
        return assigned

    wait_for(settled, 30, f"{member}'s assignment", interval=0.2)
    return epoch


def describe(b: Broker, *groups: str) -> Any:
    return b.call(SHARE_DESCRIBE, 1, group_ids=groups, include_authorized_operations=True)


def alter_configs(b: Broker, group: str, *configs: tuple[str, str | None]) -> Any:
    ab = builder(ALTER_CONFIGS, 1)
    return b.call(
        ALTER_CONFIGS,
        1,
        resources=(
            ab.AlterConfigsResource(
                resource_type=GROUP_RESOURCE,
                resource_name=group,
                configs=tuple(
                    ab.AlterableConfig(
                        name=n, config_operation=SET if v is not None else DELETE, value=v
                    )
                    for n, v in configs
                ),
            ),
        ),
        validate_only=False,
    )


def earliest(b: Broker, group: str) -> None:
    r = alter_configs(b, group, ("share.auto.offset.reset", "earliest"))
    assert r.responses[0].error_code == 0, r


def acks(first: int, last: int, *types: int) -> tuple[int, int, tuple[int, ...]]:
    return first, last, types


def share_fetch(
    b: Broker,
    group: str,
    member: str,
    epoch: int,
    partitions: dict[str, dict[int, list[tuple[int, int, tuple[int, ...]]]]] | None = None,
    version: int = 2,
    max_wait_ms: int = 0,
    max_records: int = 500,
    forget: dict[str, list[int]] | None = None,
) -> Any:
    """ShareFetch of `partitions` (topic -> partition -> acknowledgement batches); TOPIC's
    partition 0 by default."""
    fb = builder(SHARE_FETCH, version)
    if partitions is None:
        partitions = {TOPIC: {0: []}}
    return b.call(
        SHARE_FETCH,
        version,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=max_wait_ms * MS,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=max_records,
        batch_size=max_records,
        share_acquire_mode=0,
        is_renew_ack=False,
        topics=tuple(
            fb.FetchTopic(
                topic_id=b.topic_id(topic),
                partitions=tuple(
                    fb.FetchPartition(
                        partition_index=p,
                        acknowledgement_batches=tuple(
                            fb.AcknowledgementBatch(
                                first_offset=f, last_offset=la, acknowledge_types=t
                            )
                            for f, la, t in batches
                        ),
                    )
                    for p, batches in parts.items()
                ),
            )
            for topic, parts in partitions.items()
        ),
        forgotten_topics_data=tuple(
            fb.ForgottenTopic(topic_id=b.topic_id(t), partitions=tuple(ps))
            for t, ps in (forget or {}).items()
        ),
    )


def share_ack(
    b: Broker,
    group: str,
    member: str,
    epoch: int,
    batches: list[tuple[int, int, tuple[int, ...]]],
    version: int = 2,
    topic: str = TOPIC,
) -> Any:
    ab = builder(SHARE_ACK, version)
    return b.call(
        SHARE_ACK,
        version,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        is_renew_ack=False,
        topics=(
            ab.AcknowledgeTopic(
                topic_id=b.topic_id(topic),
                partitions=(
                    ab.AcknowledgePartition(
                        partition_index=0,
                        acknowledgement_batches=tuple(
                            ab.AcknowledgementBatch(
                                first_offset=f, last_offset=la, acknowledge_types=t
                            )
                            for f, la, t in batches
                        ),
                    ),
                ),
            ),
        ),
    )


def first_records(b: Broker, group: str, member: str, version: int = 2) -> tuple[Any, int]:
    """Open a share session and fetch until records come (a share-partition is initialised
    on its first fetch, which may answer nothing yet): the answer with records and the
    session's next epoch."""
    epoch = 0
    got: Any = None

    def fetched() -> bool:
        nonlocal epoch, got
        got = share_fetch(b, group, member, epoch, version=version, max_wait_ms=500)
        assert got.error_code == 0, got
        epoch += 1
        parts = [p for t in got.responses for p in t.partitions]
        return any(p.acquired_records for p in parts)

    wait_for(fetched, 60, "the first records", interval=0.1)
    return got, epoch


def describe_offsets(
    b: Broker, group: str, topics: tuple[str, ...] | None, version: int = 1
) -> Any:
    db = builder(DESCRIBE_OFFSETS, version)
    return b.call(
        DESCRIBE_OFFSETS,
        version,
        groups=(
            db.DescribeShareGroupOffsetsRequestGroup(
                group_id=group,
                topics=None
                if topics is None
                else tuple(
                    db.DescribeShareGroupOffsetsRequestTopic(
                        topic_name=t, partitions=(0, 1) if t == TWO else (0,)
                    )
                    for t in topics
                ),
            ),
        ),
    )


def alter_offsets(b: Broker, group: str, offsets: dict[tuple[str, int], int]) -> Any:
    ab = builder(ALTER_OFFSETS, 0)
    by_topic: dict[str, list[Any]] = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append(
            ab.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
        )
    return b.call(
        ALTER_OFFSETS,
        0,
        group_id=group,
        topics=tuple(
            ab.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
    )


def delete_offsets(b: Broker, group: str, *topics: str) -> Any:
    db = builder(DELETE_OFFSETS, 0)
    return b.call(
        DELETE_OFFSETS,
        0,
        group_id=group,
        topics=tuple(db.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics),
    )


# The share-partitions of a ShareGroupDescribe member or answer, in no particular order.
SORT = ["groups", "groups.*.members", "groups.*.members.*.assignment.topic_partitions"]


# -- ShareGroupHeartbeat, ShareGroupDescribe -----------------------------------------------------


# Kafka assigns a share-partition once its state is initialized (a new member's first answer
# is empty, a later one at a group epoch one higher carries the partitions); Rafka assigns at
# once (allowlisted: "ShareGroupHeartbeat: a member joins"). Later answers are compared with
# the epochs left out, which that shift.
EPOCHS = [
    "member_epoch",
    "groups.*.group_epoch",
    "groups.*.assignment_epoch",
    "groups.*.members.*.member_epoch",
]


def test_membership(pair: Pair) -> None:
    group = "compat-share-members"

    def flow(b: Broker) -> None:
        first = heartbeat(b, group, "compat-share-a", 0, (TOPIC, TWO))
        b.step("a member joins", first)
        epoch = settle(b, group, "compat-share-a", first.member_epoch, first.assignment)
        b.step("its heartbeat once assigned", heartbeat(b, group, "compat-share-a", epoch))
        b.step("describe", describe(b, group, "compat-share-nope"))
        b.step("a second member joins", heartbeat(b, group, "compat-share-b", 0, (TOPIC,)))
        r = heartbeat(b, group, "compat-share-a", epoch)
        b.step("the first member's heartbeat", r)
        b.step("describe both", describe(b, group))
        fenced = heartbeat(b, group, "compat-share-a", r.member_epoch + 7)
        b.step("a fenced epoch", fenced.error_code)
        b.step("the second member leaves", heartbeat(b, group, "compat-share-b", -1))
        b.step("it leaves again", heartbeat(b, group, "compat-share-b", -1))
        b.step("describe after", describe(b, group))

    flows.run(pair, "ShareGroupHeartbeat", flow, masked=EPOCHS, sort=SORT)


@pytest.mark.parametrize(
    ("what", "member", "epoch", "topics", "group"),
    [
        ("an unknown member", "compat-share-x", 1, None, "compat-share-members"),
        ("an empty member id", "", 0, (TOPIC,), "compat-share-members"),
        ("a join without topics", "compat-share-y", 0, None, "compat-share-members"),
        ("an empty group id", "compat-share-y", 0, (TOPIC,), ""),
        ("epoch -2", "compat-share-y", -2, None, "compat-share-members"),
        ("epoch 3 of an unknown group", "compat-share-y", 3, None, "compat-share-nope"),
        ("leaving an unknown group", "compat-share-y", -1, None, "compat-share-nope"),
    ],
)
def test_heartbeat_refused(
    pair: Pair,
    what: str,
    member: str,
    epoch: int,
    topics: tuple[str, ...] | None,
    group: str,
) -> None:
    flows.run(
        pair,
        f"ShareGroupHeartbeat: {what}",
        lambda b: b.step("heartbeat", heartbeat(b, group, member, epoch, topics)),
    )


def test_share_and_other_group_types(pair: Pair) -> None:
    def flow(b: Broker) -> None:
        consumer = "compat-share-vs-consumer"
        r = b.call(
            CG_HEARTBEAT,
            1,
            group_id=consumer,
            member_id="compat-cg-member",
            member_epoch=0,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=30_000 * MS,
            subscribed_topic_names=(TOPIC,),
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=(),
        )
        assert r.error_code == 0, r
        b.step(
            "ShareGroupHeartbeat to a consumer group",
            heartbeat(b, consumer, "compat-share-a", 0, (TOPIC,)),
        )
        b.step("ShareGroupDescribe of a consumer group", describe(b, consumer))
        share = "compat-share-vs"
        join(b, share, "compat-share-a")
        b.step(
            "ConsumerGroupHeartbeat to a share group",
            b.call(
                CG_HEARTBEAT,
                1,
                group_id=share,
                member_id="compat-cg-member",
                member_epoch=0,
                instance_id=None,
                rack_id=None,
                rebalance_timeout=30_000 * MS,
                subscribed_topic_names=(TOPIC,),
                subscribed_topic_regex=None,
                server_assignor=None,
                topic_partitions=(),
            ),
        )
        b.step(
            "ConsumerGroupDescribe of a share group",
            b.call(69, 1, group_ids=(share,), include_authorized_operations=False),
        )
        b.step(
            "DescribeGroups of a share group",
            b.call(15, 5, groups=(share,), include_authorized_operations=False),
        )
        listed = b.call(16, 5, states_filter=(), types_filter=("share",))
        b.step(
            "ListGroups of type share",
            sorted(g.group_id for g in listed.groups if g.group_id.startswith("compat-share-vs")),
        )
        b.step("DeleteGroups of a live share group", b.call(42, 2, groups_names=(share,)))

    flows.run(pair, "Share groups among the other types", flow)


# -- group configs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("what", "configs"),
    [
        ("share.auto.offset.reset=earliest", [("share.auto.offset.reset", "earliest")]),
        (
            "share.auto.offset.reset=by_duration:PT1H",
            [("share.auto.offset.reset", "by_duration:PT1H")],
        ),
        ("share.auto.offset.reset=nope", [("share.auto.offset.reset", "nope")]),
        ("share.auto.offset.reset=by_duration:1h", [("share.auto.offset.reset", "by_duration:1h")]),
        ("share.record.lock.duration.ms=20000", [("share.record.lock.duration.ms", "20000")]),
        ("share.record.lock.duration.ms=3000", [("share.record.lock.duration.ms", "3000")]),
        ("share.record.lock.duration.ms=999", [("share.record.lock.duration.ms", "999")]),
        ("share.record.lock.duration.ms=70000", [("share.record.lock.duration.ms", "70000")]),
        ("share.record.lock.duration.ms=x", [("share.record.lock.duration.ms", "x")]),
        ("share.delivery.count.limit=1", [("share.delivery.count.limit", "1")]),
        ("share.delivery.count.limit=11", [("share.delivery.count.limit", "11")]),
        ("share.partition.max.record.locks=50", [("share.partition.max.record.locks", "50")]),
        ("share.isolation.level=read_committed", [("share.isolation.level", "read_committed")]),
        ("share.isolation.level=nope", [("share.isolation.level", "nope")]),
        ("share.session.timeout.ms=1000", [("share.session.timeout.ms", "1000")]),
        ("share.heartbeat.interval.ms=20000", [("share.heartbeat.interval.ms", "20000")]),
        ("an unknown config", [("share.nope", "1")]),
        ("deleting a config", [("share.record.lock.duration.ms", None)]),
    ],
)
def test_group_configs(pair: Pair, what: str, configs: list[tuple[str, str | None]]) -> None:
    group = "compat-share-configs"
    flows.run(
        pair,
        f"IncrementalAlterConfigs of a group: {what}",
        lambda b: b.step("alter", alter_configs(b, group, *configs)),
    )


def test_group_configs_described(pair: Pair) -> None:
    group = "compat-share-configs-described"

    def flow(b: Broker) -> None:
        alter_configs(
            b,
            group,
            ("share.auto.offset.reset", "earliest"),
            ("share.record.lock.duration.ms", "20000"),
        )
        r = b.call(
            DESCRIBE_CONFIGS,
            4,
            resources=(
                builder(DESCRIBE_CONFIGS, 4).DescribeConfigsResource(
                    resource_type=GROUP_RESOURCE,
                    resource_name=group,
                    configuration_keys=(
                        "share.auto.offset.reset",
                        "share.record.lock.duration.ms",
                        "share.delivery.count.limit",
                    ),
                ),
            ),
            include_synonyms=True,
            include_documentation=False,
        )
        b.step("three share configs", r)

    flows.run(pair, "DescribeConfigs of a group", flow, sort=["results.*.configs"])


# -- ShareFetch, ShareAcknowledge ---------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2])
def test_fetch_and_acknowledge(pair: Pair, version: int) -> None:
    group = f"compat-share-fetch-v{version}"
    member = "compat-share-fetcher"

    def flow(b: Broker) -> None:
        earliest(b, group)
        join(b, group, member)
        got, epoch = first_records(b, group, member, version)
        b.step("the first records", got)
        b.step(
            "ShareAcknowledge: accept 0-1",
            share_ack(b, group, member, epoch, [acks(0, 1, ACCEPT)], version),
        )
        epoch += 1
        b.step(
            "ShareAcknowledge: accept 0-1 again",
            share_ack(b, group, member, epoch, [acks(0, 1, ACCEPT)], version),
        )
        epoch += 1
        b.step(
            "ShareAcknowledge: release 2-4 (per offset), reject 5",
            share_ack(
                b,
                group,
                member,
                epoch,
                [acks(2, 4, RELEASE, RELEASE, RELEASE), acks(5, 5, REJECT)],
                version,
            ),
        )
        epoch += 1
        # (acknowledgements ride on a ShareFetch below only where nothing is to fetch: Kafka
        # applies them and fetches at the same time, Rafka applies them first)
        b.step("ShareFetch: the released records come back", share_fetch(b, group, member, epoch))
        epoch += 1
        b.step(
            "ShareFetch accepting 2-3: nothing else to fetch",
            share_fetch(b, group, member, epoch, {TOPIC: {0: [acks(2, 3, ACCEPT)]}}, version),
        )
        epoch += 1
        b.step(
            "ShareAcknowledge of offsets never fetched",
            share_ack(b, group, member, epoch, [acks(7, 9, ACCEPT)], version),
        )
        epoch += 1
        b.step(
            "ShareAcknowledge: overlapping batches",
            share_ack(b, group, member, epoch, [acks(2, 3, ACCEPT), acks(3, 4, ACCEPT)], version),
        )
        epoch += 1
        b.step(
            "ShareAcknowledge: an unknown acknowledge type",
            share_ack(b, group, member, epoch, [acks(4, 4, 9)], version),
        )
        epoch += 1
        b.step(
            "ShareAcknowledge: types not one per offset",
            share_ack(b, group, member, epoch, [acks(2, 4, ACCEPT, ACCEPT)], version),
        )
        epoch += 1
        b.step(
            "ShareAcknowledge of records already accepted",
            share_ack(b, group, member, epoch, [acks(2, 2, ACCEPT)], version),
        )
        epoch += 1
        b.step("ShareFetch with a wrong session epoch", share_fetch(b, group, member, epoch + 5))
        b.step(
            "ShareAcknowledge with a wrong session epoch",
            share_ack(b, group, member, epoch + 5, [acks(4, 4, ACCEPT)], version),
        )
        b.step(
            "ShareAcknowledge with session epoch 0",
            share_ack(b, group, member, 0, [acks(4, 4, ACCEPT)], version),
        )
        other = "compat-share-other"
        b.step("ShareFetch of a member without a session", share_fetch(b, group, other, 1))
        b.step(
            "ShareAcknowledge of a member without a session",
            share_ack(b, group, other, 1, [acks(4, 4, ACCEPT)], version),
        )
        b.step(
            "ShareFetch opening a session with acknowledgements",
            share_fetch(b, group, other, 0, {TOPIC: {0: [acks(4, 4, ACCEPT)]}}),
        )
        b.step("ShareFetch opening another member's session", share_fetch(b, group, other, 0))
        b.step(
            "ShareAcknowledge of records another member holds",
            share_ack(b, group, other, 1, [acks(4, 4, ACCEPT)], version),
        )
        b.step("describe offsets", describe_offsets(b, group, (TOPIC,)))
        b.step(
            "ShareFetch closing the session, accepting 4",
            share_fetch(b, group, member, -1, {TOPIC: {0: [acks(4, 4, ACCEPT)]}}, version),
        )
        b.step("describe offsets after", describe_offsets(b, group, (TOPIC,)))

    flows.run(pair, f"ShareFetch v{version}", flow)


def test_fetch_errors(pair: Pair) -> None:
    group = "compat-share-fetch-errors"
    member = "compat-share-fetcher"

    def flow(b: Broker) -> None:
        earliest(b, group)
        join(b, group, member, (TOPIC, TWO))
        # (an unknown partition only: Kafka loads a share-partition in the background and
        # leaves it out of the answers until then, Rafka loads it before answering)
        b.step(
            "ShareFetch of an unknown partition",
            share_fetch(b, group, member, 0, {TWO: {7: []}}),
        )
        b.step(
            "ShareFetch forgetting them", share_fetch(b, group, member, 1, {}, forget={TWO: [7]})
        )
        b.step("ShareFetch of an empty group id", share_fetch(b, "", member, 0))
        b.step("ShareFetch of an empty member id", share_fetch(b, group, "", 0))
        b.step(
            "ShareAcknowledge of an empty member id",
            share_ack(b, group, "", 1, [acks(0, 0, ACCEPT)]),
        )

    flows.run(pair, "ShareFetch errors", flow)


# -- DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets ------------------


def test_offsets(pair: Pair) -> None:
    group = "compat-share-offsets"
    member = "compat-share-offsets-m"

    def flow(b: Broker) -> None:
        earliest(b, group)
        epoch = join(b, group, member, (TOPIC, TWO))
        _, session = first_records(b, group, member)
        b.step("describe before any acknowledgement", describe_offsets(b, group, (TOPIC,)))
        b.step(
            "accept 0-4",
            share_ack(b, group, member, session, [acks(0, 4, ACCEPT)]),
        )
        for version in (0, 1):
            b.step(f"describe v{version}", describe_offsets(b, group, (TOPIC, TWO), version))
        b.step("describe every topic", describe_offsets(b, group, None))
        b.step("describe an unknown group", describe_offsets(b, "compat-share-nope", (TOPIC,)))
        b.step("describe an empty group id", describe_offsets(b, "", (TOPIC,)))
        b.step("alter a live group", alter_offsets(b, group, {(TOPIC, 0): 3}))
        b.step("delete of a live group", delete_offsets(b, group, TOPIC))
        heartbeat(b, group, member, epoch)
        heartbeat(b, group, member, -1)
        b.step(
            "alter an empty group",
            alter_offsets(b, group, {(TOPIC, 0): 3, (TWO, 1): 0, ("compat-share-nope", 0): 1}),
        )
        b.step("describe after", describe_offsets(b, group, (TOPIC, TWO)))
        b.step("alter an unknown group", alter_offsets(b, "compat-share-nope", {(TOPIC, 0): 1}))
        b.step("alter an empty group id", alter_offsets(b, "", {(TOPIC, 0): 1}))
        b.step(
            "delete a topic's offsets, and an unknown topic's",
            delete_offsets(b, group, TWO, "compat-share-nope"),
        )
        b.step("describe after the delete", describe_offsets(b, group, None))
        b.step("delete of an unknown group", delete_offsets(b, "compat-share-nope", TOPIC))
        b.step("delete of an empty group id", delete_offsets(b, "", TOPIC))
        b.step("DeleteGroups of the empty share group", b.call(42, 2, groups_names=(group,)))
        b.step("describe the deleted group", describe_offsets(b, group, (TOPIC,)))

    flows.run(pair, "Share group offsets", flow, sort=["groups.*.topics", "responses"])
