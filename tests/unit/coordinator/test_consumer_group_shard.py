"""KIP-848 consumer groups inside the group coordinator shard: one registry of groups with the
classic type (ListGroups, DescribeGroups, DeleteGroups, offsets and their expiry), a group id
passing between the two types by Kafka's rules, deadlines on the shard's timer, failed writes,
loading."""

from __future__ import annotations

import struct
from functools import partial

import anyio
import pytest

from dataplane.config import BrokerConfig
from dataplane.coordinator.base import JoinRequest, JoinResult, Reply
from dataplane.coordinator.classic.group import ClassicGroup
from dataplane.coordinator.consumer import records as rec
from dataplane.coordinator.consumer.adapter import ConsumerGroupAdapter
from dataplane.coordinator.consumer.group import GroupState, HeartbeatRequest
from dataplane.coordinator.offsets import CommitPartition
from dataplane.coordinator.records import decode_record
from dataplane.coordinator.service import ClusterTopics, consumer_assignors, group_config
from dataplane.metadata_cache import MetadataCache
from dataplane.protocol.errors import ErrorCode, KafkaError
from proto import meta_pb2
from tests.expect import present

from .harness import GROUP, Client, Harness, consumer_group, tid, topic

E = ErrorCode


def settle(clients, rounds: int = 6) -> None:
    for _ in range(rounds):
        for c in clients:
            c.heartbeat()


def commit(h: Harness, member_id: str, epoch: int, offsets: dict, version: int = 9) -> ErrorCode:
    error, _errors, records = h.shard.commit_offsets(
        GROUP,
        member_id,
        None,
        epoch,
        version,
        [CommitPartition(t, p, o, -1, "") for (t, p), o in offsets.items()],
    )
    if records:
        h.apply(records)
    return error


def classic_join(h: Harness, member_id: str = "", version: int = 3) -> Reply[JoinResult]:
    protocol = struct.pack(">hi", 0, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
    reply = h.shard.join_group(
        JoinRequest(
            GROUP,
            member_id,
            None,
            "classic",
            "/127.0.0.1",
            10_000,
            10_000,
            "consumer",
            (("range", protocol),),
            version,
        )
    )
    h.services.run_pending()
    h.now += h.shard.config.initial_rebalance_delay_ms  # a new group's first join waits
    h.shard.timer.fire_due()
    h.services.run_pending()
    return reply


def record_types(records) -> list[int]:
    return [struct.unpack_from(">h", key)[0] for key, _ in records]


def test_a_consumer_group_is_a_group_of_the_shard() -> None:
    h = Harness([topic("t", 4)])
    a, b = Client(h, "a"), Client(h, "b")
    settle([a, b])
    group = h.shard.groups[GROUP]
    assert isinstance(group, ConsumerGroupAdapter)
    assert group.group is h.consumer_group()
    assert h.services.created == [GROUP]  # registered with the meta service's registry
    (listed,) = h.shard.list_groups()
    assert (listed.type, listed.protocol_type, listed.state) == ("consumer", "consumer", "Stable")
    assert h.shard.list_groups(types=["classic"]) == []
    assert [g.group_id for g in h.shard.list_groups(states=["stable"], types=["CONSUMER"])] == [
        GROUP
    ]
    # DescribeGroups (classic groups only): Kafka says Dead; ConsumerGroupDescribe describes it
    assert h.shard.describe_group(GROUP).state == "Dead"
    (described,) = h.shard.consumer_group_describe([GROUP])
    assert described.group_state == "Stable"
    assert described.error_code == 0
    assert {m.member_id for m in described.members} == {"a", "b"}
    assert all(m.client_host == "/h" and m.client_id == "cli" for m in described.members)
    (missing,) = h.shard.consumer_group_describe(["nope"])
    assert missing.error_code == E.group_id_not_found
    assert missing.error_message == "Group nope not found."


def test_offsets_of_a_consumer_group_use_member_epochs() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a")
    settle([a])
    epoch = a.epoch
    assert commit(h, "a", epoch, {("t", 0): 5}) == E.none
    assert commit(h, "a", epoch - 1, {("t", 0): 6}) == E.stale_member_epoch
    assert commit(h, "ghost", epoch, {("t", 0): 6}) == E.unknown_member_id
    assert commit(h, "a", epoch, {("t", 0): 6}, version=8) == E.unsupported_version
    assert commit(h, "", -1, {("t", 0): 6}) == E.unknown_member_id  # not while it has members
    error, fetched = h.shard.fetch_offsets(GROUP, [("t", [0])], "a", epoch)
    assert error == E.none
    assert present(fetched[0].partitions[0][1]).offset == 5
    assert h.shard.fetch_offsets(GROUP, [("t", [0])], "a", epoch + 1)[0] == E.stale_member_epoch
    assert h.shard.fetch_offsets(GROUP, [("t", [0])], "x", epoch)[0] == E.unknown_member_id
    assert h.shard.fetch_offsets(GROUP, [("t", [0])])[0] == E.none  # not from a member
    # OffsetDelete: offsets of subscribed topics stay
    error, errors, records = h.shard.delete_offsets(GROUP, [("t", [0]), ("u", [0])])
    assert error == E.none
    assert errors[("t", 0)] == E.group_subscribed_to_topic
    assert errors[("u", 0)] == E.none
    assert records == []
    # once everyone left, a commit from outside the group is fine again
    a.leave()
    assert h.consumer_group().state == GroupState.EMPTY
    assert commit(h, "", -1, {("t", 0): 7}) == E.none


def test_empty_consumer_group_is_deleted_with_its_offsets() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a")
    settle([a])
    commit(h, "a", a.epoch, {("t", 1): 3})
    errors, records = h.shard.delete_groups([GROUP])
    assert errors == {GROUP: E.non_empty_group}
    assert records == []
    a.leave()
    errors, records = h.shard.delete_groups([GROUP])
    assert errors == {GROUP: E.none}
    assert record_types(records)[0] == 1
    assert record_types(records)[-1] == rec.GROUP_METADATA
    h.apply(records)
    assert GROUP not in h.shard.groups
    assert GROUP not in h.shard.offsets.committed
    assert not h.shard.timer.is_scheduled(f"consumer-expiry-{GROUP}")
    assert GROUP not in h.replayed(loaded=False).groups


def test_offsets_expiry_deletes_an_empty_consumer_group() -> None:
    h = Harness([topic("t", 2), topic("old", 1)])
    a = Client(h, "a")
    settle([a])
    commit(h, "a", a.epoch, {("t", 0): 3, ("old", 0): 1})
    h.now += h.shard.config.offsets_retention_ms
    by_group, deleted = h.shard.expire_offsets()
    # only the topic nobody subscribes to expires while the group has members
    assert deleted == []
    assert [present(decode_record(k, v)).key.topic for k, v in by_group[GROUP]] == ["old"]
    h.apply(by_group[GROUP])
    a.leave()
    by_group, deleted = h.shard.expire_offsets()
    assert deleted == [GROUP]
    h.apply(by_group[GROUP])
    assert GROUP not in h.shard.groups
    assert GROUP not in h.shard.offsets.committed


def test_a_joining_heartbeat_takes_over_an_empty_classic_group() -> None:
    h = Harness([topic("t", 2)])
    assert commit(h, "", -1, {("t", 0): 9}) == E.none  # a "simple" classic group
    assert isinstance(h.shard.groups[GROUP], ClassicGroup)
    before = len(h.log)
    r = h.consumer_join("a")
    assert r.member_epoch == 2
    assert isinstance(h.shard.groups[GROUP], ConsumerGroupAdapter)
    # the classic group's tombstone first, then the consumer group's records
    key, value = h.log[before]
    assert present(decode_record(key, value)).type_id == 2
    assert value is None
    assert present(h.shard.fetch_offsets(GROUP, [("t", [0])])[1][0].partitions[0][1]).offset == 9
    rebuilt = h.replayed(loaded=False)
    assert present(consumer_group(rebuilt)).snapshot() == h.consumer_group().snapshot()
    assert rebuilt.offsets.committed[GROUP]["t"][0].offset == 9


def test_a_classic_group_with_members_is_not_a_consumer_group() -> None:
    h = Harness([topic("t", 2)])
    reply = classic_join(h)
    assert reply.value.error == E.none
    assert h.shard.groups[GROUP].state_name != "Empty"
    message = f"Group {GROUP} is not a consumer group."
    # joining: Kafka would upgrade the group online, which Rafka does not do
    no_upgrade = (
        f"Cannot upgrade classic group {GROUP} to consumer group because online upgrade is "
        "disabled."
    )
    for epoch in (0, 3, -1):
        if epoch == 0:
            call = partial(h.consumer_join, "a")
        else:
            call = partial(h.consumer_group_heartbeat, member_id="a", member_epoch=epoch)
        with pytest.raises(KafkaError) as info:
            call()
        expected = no_upgrade if epoch == 0 else message
        assert (info.value.code, info.value.message) == (E.group_id_not_found, expected), epoch
    (described,) = h.shard.consumer_group_describe([GROUP])
    assert (described.error_code, described.error_message) == (E.group_id_not_found, message)
    assert isinstance(h.shard.groups[GROUP], ClassicGroup)


def test_a_heartbeat_that_does_not_join_never_creates_a_group() -> None:
    h = Harness([topic("t", 2)])
    commit(h, "", -1, {("t", 0): 1})  # an empty (simple) classic group
    with pytest.raises(KafkaError) as info:
        h.consumer_group_heartbeat(member_id="a", member_epoch=2)
    assert info.value.code == E.group_id_not_found
    assert isinstance(h.shard.groups[GROUP], ClassicGroup)


def test_join_group_takes_over_an_empty_consumer_group_only() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a")
    settle([a])
    # a classic member cannot join a consumer group that has members
    assert classic_join(h).value.error == E.inconsistent_group_protocol
    a.leave()
    commit(h, "", -1, {("t", 1): 4})
    tombstones = h.consumer_group().tombstones()
    before = len(h.log)
    reply = classic_join(h, version=3)
    assert reply.value.error == E.none
    assert isinstance(h.shard.groups[GROUP], ClassicGroup)
    assert not h.shard.timer.is_scheduled(f"consumer-expiry-{GROUP}")
    assert h.log[before : before + len(tombstones)] == tombstones
    assert h.shard.offsets.committed[GROUP]["t"][1].offset == 4
    assert GROUP not in {
        g for g, x in h.replayed(loaded=False).groups.items() if x.TYPE == "consumer"
    }


def test_leave_group_removes_members_of_a_consumer_group() -> None:
    """LeaveGroup (the admin's removeMembersFromConsumerGroup) removes consumer-protocol
    members as Kafka does: by member id, or by instance id with no member id or the right
    one; each unknown member or fenced instance gets its error, the rest leave at once."""
    h = Harness([topic("t", 2)])
    h.consumer_join("a")
    h.consumer_join("s", instance_id="i-1")
    h.consumer_join("c")
    epoch = h.consumer_group().group_epoch
    leaving = [("a", None, "bye"), ("nobody", None, None), ("x", "i-1", None), ("", "i-9", None)]
    assert h.shard.leave_group(GROUP, leaving) == (
        ErrorCode.none,
        [
            ErrorCode.none,
            ErrorCode.unknown_member_id,
            ErrorCode.fenced_instance_id,
            ErrorCode.unknown_member_id,
        ],
    )
    h.settle()
    g = h.consumer_group()
    assert set(g.members) == {"s", "c"}
    assert g.group_epoch == epoch + 1
    assert h.shard.leave_group(GROUP, [("", "i-1", None), ("c", None, None)]) == (
        ErrorCode.none,
        [ErrorCode.none, ErrorCode.none],
    )
    h.settle()
    g = h.consumer_group()
    assert g.members == {}
    assert g.group_epoch == g.assignment_epoch == epoch + 2


def test_session_expiry_fires_on_the_shard_timer() -> None:
    h = Harness([topic("t", 4)])
    a, b = Client(h, "a"), Client(h, "b")
    settle([a, b])
    epoch = h.consumer_group().group_epoch
    deadline = present(h.consumer_group().next_deadline_ms())
    # the timer may be set earlier (a deadline since dropped): it then finds nobody expired
    assert present(h.shard.timer.next_deadline()) <= deadline
    h.now = deadline - 1
    b.heartbeat()  # b stays alive; a does not
    h.shard.timer.fire_due()
    assert set(h.consumer_group().members) == {"a", "b"}
    assert h.shard.timer.next_deadline() == deadline
    h.now = deadline
    assert h.shard.timer.fire_due() == 1
    h.services.run_pending()
    assert set(h.consumer_group().members) == {"b"}
    assert h.consumer_group().group_epoch == epoch + 1
    settle([b])
    assert len(b.owned) == 4
    # the timer moved on to (at the latest) b's deadline
    assert present(h.shard.timer.next_deadline()) <= present(h.consumer_group().next_deadline_ms())
    assert present(h.replayed_consumer_group()).snapshot() == h.consumer_group().snapshot()


def test_fencing_that_cannot_be_written_is_tried_again() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a")
    settle([a])
    h.now = present(h.consumer_group().next_deadline_ms())
    h.services.fail_with = E.not_enough_replicas
    assert h.shard.timer.fire_due() == 1
    h.services.run_pending()
    assert "a" in h.consumer_group().members
    assert h.shard.timer.next_deadline() == h.now + 1000
    h.services.fail_with = None
    h.now += 1000
    h.shard.timer.fire_due()
    assert h.consumer_group().members == {}
    assert h.consumer_group().state == GroupState.EMPTY


def test_failed_writes_answer_with_the_error_and_create_nothing() -> None:
    h = Harness([topic("t", 2)])
    commit(h, "", -1, {("t", 0): 1})
    classic = h.shard.groups[GROUP]
    h.services.fail_with = E.not_enough_replicas
    reply = h.shard.consumer_group_heartbeat(joining("a"), 1, "cli", "/h")
    h.services.run_pending()
    assert reply.value.error_code == E.coordinator_not_available
    assert h.shard.groups[GROUP] is classic
    assert h.services.created == [GROUP]  # by the commit
    h.services.fail_with = E.not_leader_or_follower
    reply = h.shard.consumer_group_heartbeat(joining("a"), 1, "cli", "/h")
    h.services.run_pending()
    assert reply.value.error_code == E.not_coordinator
    h.services.fail_with = None
    assert h.consumer_join("a").member_epoch == 2


def joining(member_id: str) -> HeartbeatRequest:
    return HeartbeatRequest(
        GROUP,
        member_id,
        0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",),
        topic_partitions=(),
    )


def test_loading_starts_the_deadlines_and_unloading_stops_them() -> None:
    h = Harness([topic("t", 2)])
    a = Client(h, "a")
    settle([a])
    commit(h, "a", a.epoch, {("t", 0): 2})
    shard = h.replayed(loaded=False, now=h.now + 10)
    assert isinstance(shard.groups[GROUP], ConsumerGroupAdapter)
    assert shard.offsets.committed[GROUP]["t"][0].offset == 2
    assert shard.timer.next_deadline() is None
    shard.on_loaded()
    assert shard.timer.next_deadline() == h.now + 10 + 45_000
    shard.on_unloaded()
    assert shard.timer.next_deadline() is None


def test_records_of_every_type_route_to_the_consumer_group() -> None:
    h = Harness([topic("t", 2), topic("u", 1)])
    a = Client(h, "a", topics=("t",))
    settle([a])
    h.consumer_group_heartbeat(member_id="a", member_epoch=a.epoch, subscribed_topic_regex="u.*")
    kinds = set(record_types(h.log))
    assert {3, 5, 6, 7, 8, 16} <= kinds
    legacy = rec.PartitionMetadataValue((rec.TopicMetadataEntry(tid("t"), "t", 2),))
    h.apply([rec.encode(rec.GroupKey(rec.PARTITION_METADATA, GROUP), legacy)])
    assert h.consumer_group().legacy_partition_metadata == legacy
    assert present(h.replayed_consumer_group()).snapshot() == h.consumer_group().snapshot()


UNIFORM_CLASS = "org.apache.kafka.coordinator.group.assignor.UniformAssignor"


def test_group_consumer_settings() -> None:
    config = group_config(
        BrokerConfig(
            group_consumer_session_timeout_ms=10_000,
            group_consumer_heartbeat_interval_ms=500,
            group_consumer_max_size=7,
            group_consumer_assignors="range, " + UNIFORM_CLASS,
        )
    ).consumer
    assert (config.session_timeout_ms, config.heartbeat_interval_ms, config.max_size) == (
        10_000,
        500,
        7,
    )
    assert config.assignors == ("range", "uniform")
    defaults = group_config(BrokerConfig()).consumer
    assert (defaults.session_timeout_ms, defaults.heartbeat_interval_ms) == (45_000, 5_000)
    assert defaults.assignors == ("uniform", "range")
    assert defaults.max_size == 2**31 - 1
    with pytest.raises(ValueError, match="unknown assignor 'sticky'"):
        consumer_assignors("uniform,sticky")


def test_cluster_topics_follow_the_metadata_cache() -> None:
    def event(name: str, topic_id: bytes, partitions: int, leader: int = 1) -> meta_pb2.WatchEvent:
        parts = [
            meta_pb2.Partition(index=i, replicas=[1, 2], isr=[1, 2], leader=leader)
            for i in range(partitions)
        ]
        return meta_pb2.WatchEvent(
            topic=meta_pb2.Topic(name=name, topic_id=topic_id, partitions=parts)
        )

    async def main() -> None:
        cache = MetadataCache()
        cache.apply(event("t", tid("t"), 2))
        topics = ClusterTopics(cache)
        first = topics.by_name["t"]
        assert (first.topic_id, first.num_partitions) == (tid("t"), 2)
        cache.apply(event("t", tid("t"), 2, leader=2))  # a leader change: the same object
        assert topics.by_name["t"] is first
        cache.apply(event("t", tid("t"), 3))  # more partitions
        assert topics.by_name["t"].num_partitions == 3
        cache.apply(event("u", tid("u"), 1))
        cache.apply(
            meta_pb2.WatchEvent(topic_deleted=meta_pb2.TopicDeleted(name="t", topic_id=tid("t")))
        )
        assert set(topics.by_name) == {"u"}

    anyio.run(main)
