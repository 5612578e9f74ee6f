"""Streams groups (KIP-1071) in the group coordinator: StreamsGroupHeartbeat through a shard
(records written and replayed as the broker does), the topology's configuration against the
cluster's topics, the sticky task assignor, reconciliation (a task is never active on two
members), the initial rebalance delay, leaving, session expiry, static members, offset commit
checks, deletion and a group rebuilt from its records."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.kafka_client import builder
from dataplane.coordinator.base import GroupConfig
from dataplane.coordinator.offsets import CommitPartition
from dataplane.coordinator.streams import records as rec
from dataplane.coordinator.streams import topology as topo
from dataplane.coordinator.streams.adapter import StreamsGroupAdapter
from dataplane.coordinator.streams.assignor import MemberSpec, SubtopologySpec, assign
from dataplane.coordinator.streams.group import StreamsGroup
from dataplane.coordinator.streams.internal_topics import ConfiguredTopology, configure
from dataplane.coordinator.streams.member import MemberState, TasksTuple
from dataplane.coordinator.streams.requests import (
    HeartbeatRequest,
    HeartbeatResponse,
    Status,
    validate_heartbeat,
)
from dataplane.coordinator.streams.state import GroupState, StreamsGroupConfig
from dataplane.log.records import Record
from dataplane.protocol.errors import ErrorCode, KafkaError
from tests.expect import present

from .harness import GROUP, Harness, topic
from .support import local_shard

E = ErrorCode
B = builder(88, 1)
SOURCE, REPARTITION, CHANGELOG = "clicks", "app-by-user-repartition", "app-counts-changelog"


def topology(epoch: int = 0, changelog_partitions: int = 0) -> Any:
    """Kafka Streams' shape of a count by a re-keyed field: subtopology 0 reads the source
    and writes the repartition topic; 1 reads it, counts into a store with a changelog."""

    def info(name: str, partitions: int = 0) -> Any:
        return B.TopicInfo(name=name, partitions=partitions, replication_factor=0, topic_configs=())

    return B.Topology(
        epoch=epoch,
        subtopologies=(
            B.Subtopology(
                subtopology_id="0",
                source_topics=(SOURCE,),
                source_topic_regex=(),
                state_changelog_topics=(),
                repartition_sink_topics=(REPARTITION,),
                repartition_source_topics=(),
                copartition_groups=(),
            ),
            B.Subtopology(
                subtopology_id="1",
                source_topics=(),
                source_topic_regex=(),
                state_changelog_topics=(info(CHANGELOG, changelog_partitions),),
                repartition_sink_topics=(),
                repartition_source_topics=(info(REPARTITION),),
                copartition_groups=(),
            ),
        ),
    )


ALL_TASKS = {(s, p) for s in ("0", "1") for p in range(3)}


def tasks(response_tasks: Any) -> set[tuple[str, int]]:
    return {(s, p) for s, ps in (response_tasks or {}).items() for p in ps}


class StreamsHarness(Harness):
    def __init__(
        self, *, topics: tuple[str, ...] = (SOURCE, REPARTITION, CHANGELOG), **streams: int
    ):
        super().__init__([topic(t, 3) for t in topics])
        config = GroupConfig(
            min_session_timeout_ms=1,
            streams=StreamsGroupConfig(**({"initial_rebalance_delay_ms": 0} | streams)),
        )
        self.services.config = config
        self.shard.config = config
        self.owned: dict[str, TasksTuple] = {}  # what each member last said it owns

    def hb(self, member: str, epoch: int | None = None, **fields: Any) -> HeartbeatResponse:
        """A heartbeat as Streams sends it: a full join at epoch 0, else the tasks it owns
        (what it was last given, minus what it was asked to revoke: it revokes at once)."""
        if epoch is None:
            epoch = self.group().members[member].member_epoch
        joining = epoch == 0
        owned = self.owned.get(member, TasksTuple())
        values: dict[str, Any] = {
            "endpoint_information_epoch": -1,
            "rebalance_timeout_ms": 60_000 if joining else -1,
            "topology": topology() if joining else None,
            "active_tasks": dict(owned.active),
            "standby_tasks": dict(owned.standby),
            "warmup_tasks": {},
            "process_id": f"process-{member}" if joining else None,
            "client_tags": () if joining else None,
        }
        req = HeartbeatRequest(GROUP, member, epoch, **(values | fields))
        validate_heartbeat(req)
        reply, _ = self.shard.streams_group_heartbeat(req, "client", "/127.0.0.1")
        self.settle()
        response = reply.value
        if response.error_code:
            raise KafkaError(response.error_code, response.error_message)
        if response.tasks is not None:
            self.owned[member] = response.tasks
        return response

    def group(self) -> StreamsGroup:
        g = self.shard.groups[GROUP]
        assert isinstance(g, StreamsGroupAdapter)
        return g.group

    def active_owners(self) -> dict[tuple[str, int], list[str]]:
        """Who owns each active task, counting the tasks being revoked."""
        out: dict[tuple[str, int], list[str]] = {}
        for m in self.group().members.values():
            for held in (m.assigned, m.pending_revocation):
                for s, parts in held.active.items():
                    for p in parts:
                        out.setdefault((s, p), []).append(m.member_id)
        return out


# -- the topology against the cluster's topics --------------------------------------------------


def configured(topics: dict[str, int], **kw: int) -> ConfiguredTopology:
    metadata = {name: topic(name, n) for name, n in topics.items()}
    return configure(GROUP, topo.from_request(topology(**kw)), metadata, 0)


def test_internal_topics_take_their_partition_counts_from_the_sources() -> None:
    c = configured({SOURCE: 4})
    assert c.problem is not None
    assert c.problem[0] == Status.MISSING_INTERNAL_TOPICS
    assert {t.name: t.partitions for t in c.to_create.values()} == {REPARTITION: 4, CHANGELOG: 4}
    assert c.subtopologies is not None
    assert {s: sub.tasks for s, sub in c.subtopologies.items()} == {"0": 4, "1": 4}
    assert c.subtopologies["1"].stateful
    assert not c.subtopologies["0"].stateful
    ready = configured({SOURCE: 4, REPARTITION: 4, CHANGELOG: 4})
    assert ready.ready
    assert not ready.to_create


def test_topology_problems_are_statuses() -> None:
    missing = configured({})
    assert missing.problem == (
        Status.MISSING_SOURCE_TOPICS,
        f"Source topics {SOURCE} are missing.",
    )
    assert missing.subtopologies is None
    wrong = configured({SOURCE: 4, REPARTITION: 2, CHANGELOG: 4})
    assert wrong.problem is not None
    assert wrong.problem[0] == Status.INCORRECTLY_PARTITIONED_TOPICS
    assert "expected 4, found 2" in wrong.problem[1]


def test_a_changelog_with_a_partition_count_is_an_invalid_topology() -> None:
    with pytest.raises(KafkaError) as e:
        validate_heartbeat(
            HeartbeatRequest(
                GROUP,
                "m",
                0,
                rebalance_timeout_ms=1,
                topology=topology(changelog_partitions=3),
                active_tasks={},
                standby_tasks={},
                warmup_tasks={},
            )
        )
    assert e.value.code == E.streams_invalid_topology


# -- the sticky task assignor ------------------------------------------------------------------


SUBS = {"0": SubtopologySpec(3, False), "1": SubtopologySpec(3, True)}


def test_assignor_spreads_actives_and_puts_standbys_on_other_processes() -> None:
    members = {"a": MemberSpec("p1", {}, {}), "b": MemberSpec("p2", {}, {})}
    result = assign(members, SUBS, standby_replicas=1)
    actives = [(s, p) for a in result.values() for s, ps in a.active.items() for p in ps]
    assert sorted(actives) == sorted(ALL_TASKS)  # each task once
    assert {len(tasks(a.active)) for a in result.values()} == {3}
    for a in result.values():
        assert not tasks(a.active) & tasks(a.standby)
        assert all(s == "1" for s in a.standby)  # only stateful tasks have standbys
    standbys = [t for a in result.values() for t in tasks(a.standby)]
    assert sorted(standbys) == sorted((s, p) for s, p in ALL_TASKS if s == "1")


def test_assignor_is_sticky_and_prefers_a_standby_for_a_freed_active() -> None:
    first = assign({"a": MemberSpec("p1", {}, {}), "b": MemberSpec("p2", {}, {})}, SUBS, 1)
    specs = {
        m: MemberSpec(f"p{i}", a.active, a.standby) for i, (m, a) in enumerate(first.items(), 1)
    }
    again = assign(specs, SUBS, 1)
    assert {m: tasks(a.active) for m, a in again.items()} == {
        m: tasks(a.active) for m, a in first.items()
    }
    # b is gone: a takes everything; its standbys become actives
    alone = assign({"a": specs["a"]}, SUBS, 1)
    assert tasks(alone["a"].active) == ALL_TASKS
    assert not alone["a"].standby


def test_assignor_balances_by_process_and_its_threads() -> None:
    members = {
        "a1": MemberSpec("p1", {}, {}),
        "a2": MemberSpec("p1", {}, {}),
        "b": MemberSpec("p2", {}, {}),
    }
    result = assign(members, SUBS, 0)
    assert sorted(len(tasks(a.active)) for a in result.values()) == [2, 2, 2]


# -- heartbeats ------------------------------------------------------------------------------------


def test_join_creates_the_group_and_its_internal_topics_are_asked_for() -> None:
    h = StreamsHarness(topics=(SOURCE,))
    req = HeartbeatRequest(
        GROUP,
        "a",
        0,
        rebalance_timeout_ms=1,
        topology=topology(),
        active_tasks={},
        standby_tasks={},
        warmup_tasks={},
        process_id="p",
    )
    reply, result = h.shard.streams_group_heartbeat(req, "c", "/h")
    h.settle()
    assert result is not None
    assert {t.name for t in result.to_create} == {REPARTITION, CHANGELOG}
    assert (
        Status.MISSING_INTERNAL_TOPICS,
        f"Internal topics are missing: {REPARTITION}, {CHANGELOG}",
    ) in reply.value.status
    assert reply.value.member_epoch == 1
    assert reply.value.tasks == TasksTuple()
    assert h.group().state == GroupState.NOT_READY
    h.set_topics([topic(t, 3) for t in (SOURCE, REPARTITION, CHANGELOG)])
    response = h.hb("a")
    assert response.status == ()
    assert tasks(response.tasks.active if response.tasks else {}) == ALL_TASKS
    assert h.group().state == GroupState.STABLE


def test_a_second_member_gets_tasks_only_once_the_first_revoked_them() -> None:
    h = StreamsHarness(num_standby_replicas=1)
    h.hb("a", 0)
    assert tasks(h.owned["a"].active) == ALL_TASKS
    joined = h.hb("b", 0)
    assert tasks(present(joined.tasks).active) == set()  # all still held by a
    assert h.group().members["b"].state == MemberState.UNRELEASED_TASKS
    # a is asked to give some up; it stays at its epoch until it reports them gone
    before = h.group().members["a"].member_epoch
    revoke = h.hb("a", active_tasks=dict(h.owned["a"].active))
    assert h.group().members["a"].state == MemberState.UNREVOKED_TASKS
    assert revoke.member_epoch == before
    h.owned["a"] = revoke.tasks or h.owned["a"]
    for owners in h.active_owners().values():
        assert len(owners) == 1
    h.hb("a")  # reports the smaller set: the revocation is done, a moves to the target epoch
    h.hb("b")
    h.hb("a")
    a, b = (h.group().members[m] for m in "ab")
    assert a.state == b.state == MemberState.STABLE
    assert a.member_epoch == b.member_epoch
    assert tasks(a.assigned.active_tasks()) | tasks(b.assigned.active_tasks()) == ALL_TASKS
    assert not tasks(a.assigned.active_tasks()) & tasks(b.assigned.active_tasks())
    # each stateful task has its standby on the other process
    for m, other in ((a, b), (b, a)):
        assert tasks(m.assigned.standby) == {
            t for t in tasks(other.assigned.active_tasks()) if t[0] == "1"
        }


def test_a_member_that_leaves_or_expires_hands_its_tasks_over() -> None:
    h = StreamsHarness(session_timeout_ms=6000)
    for m in ("a", "b", "c"):
        h.hb(m, 0)
    for _ in range(3):
        for m in ("a", "b", "c"):
            h.hb(m)
    epoch = h.group().group_epoch
    left = h.hb("c", -1)
    assert left.member_epoch == -1
    assert "c" not in h.group().members
    assert h.group().group_epoch == epoch + 1
    assert h.group().assignment_epoch == epoch + 1  # the others' new target at once
    h.advance(3000)
    h.hb("a")
    h.advance(4000)  # b sent nothing for 7 s: fenced
    assert set(h.group().members) == {"a"}
    for _ in range(2):
        h.hb("a")
    assert tasks(h.group().members["a"].assigned.active_tasks()) == ALL_TASKS


def test_the_initial_rebalance_delay_holds_the_first_assignment() -> None:
    h = StreamsHarness(initial_rebalance_delay_ms=3000)
    joined = h.hb("a", 0)
    assert joined.member_epoch == 1
    assert joined.tasks == TasksTuple()
    assert (
        Status.ASSIGNMENT_DELAYED,
        "Assignment delayed due to the configured initial rebalance delay.",
    ) in joined.status
    assert (h.group().group_epoch, h.group().assignment_epoch) == (2, 1)
    h.hb("b", 0)
    h.advance(3000)
    assert h.group().assignment_epoch == h.group().group_epoch
    for _ in range(3):
        h.hb("a")
        h.hb("b")
    assert tasks(h.owned["a"].active) | tasks(h.owned["b"].active) == ALL_TASKS


def test_heartbeat_errors() -> None:
    h = StreamsHarness()
    with pytest.raises(KafkaError) as e:
        h.hb("a", 1)
    assert (e.value.code, e.value.message) == (
        E.group_id_not_found,
        f"Streams group {GROUP} not found.",
    )
    h.hb("a", 0)
    with pytest.raises(KafkaError) as e:
        h.hb("nobody", 1)
    assert e.value.code == E.unknown_member_id
    with pytest.raises(KafkaError) as e:
        h.hb("a", h.group().members["a"].member_epoch + 1)
    assert e.value.code == E.fenced_member_epoch
    other = topology(epoch=0)
    other = B.Topology(epoch=0, subtopologies=other.subtopologies[:1])
    with pytest.raises(KafkaError) as e:
        h.hb("b", 0, topology=other)
    assert (e.value.code, e.value.message) == (
        E.invalid_request,
        "Topology updates are not supported yet.",
    )


def test_task_offsets_are_taken_and_described() -> None:
    h = StreamsHarness()
    h.hb("a", 0)
    h.hb("a", task_offsets=(("1", 0, 42),), task_end_offsets=(("1", 0, 50),))
    assert h.group().task_offsets["a"] == ((("1", 0, 42),), (("1", 0, 50),))


def test_a_static_member_comes_back_under_a_new_member_id_with_its_tasks() -> None:
    h = StreamsHarness()
    h.hb("a", 0, instance_id="i1")
    h.hb("a", instance_id="i1")
    held = tasks(h.group().members["a"].assigned.active_tasks())
    assert held == ALL_TASKS
    h.hb("a", -2, instance_id="i1")
    assert h.group().members["a"].member_epoch == -2
    h.owned.pop("a", None)
    back = h.hb("a2", 0, instance_id="i1")
    assert "a" not in h.group().members
    assert tasks(h.group().members["a2"].assigned.active_tasks()) <= held
    assert back.member_id == "a2"
    with pytest.raises(KafkaError) as e:
        h.hb("a3", 0, instance_id="i1")
    assert e.value.code == E.unreleased_instance_id


# -- offsets and deletion ------------------------------------------------------------------


def test_offset_commits_check_the_member_epoch_per_task() -> None:
    h = StreamsHarness()
    h.hb("a", 0)
    group = h.group()
    epoch = group.members["a"].member_epoch
    group.validate_offset_commit("a", None, epoch)
    with pytest.raises(KafkaError) as e:
        group.validate_offset_commit("a", None, epoch + 1)
    assert e.value.code == E.stale_member_epoch
    group.validate_offset_commit("", None, -1, is_transactional=True)
    with pytest.raises(KafkaError) as e:
        group.validate_offset_commit("a", None, epoch, api_version=8)
    assert e.value.code == E.unsupported_version


def test_a_member_commits_at_an_older_epoch_the_tasks_it_still_has() -> None:
    """Streams commits with the epoch it processed the records at, which a rebalance may have
    moved on since: OffsetCommit and TxnOffsetCommit take, as Kafka's assignment epoch
    validator, the partitions of tasks assigned at or before that epoch, and refuse the
    whole commit for any other."""
    h = StreamsHarness()
    h.hb("a", 0)
    old = h.group().members["a"].member_epoch
    h.hb("b", 0)
    for _ in range(3):
        h.hb("a")
        h.hb("b")
    member = h.group().members["a"]
    assert member.member_epoch > old
    kept = sorted(member.assigned.active["0"])
    lost = sorted(set(range(3)) - set(kept))
    assert kept
    assert lost
    assert h.commit("a", old, {(SOURCE, p): 5 for p in kept})[0] == E.none
    assert h.committed(GROUP) == {(SOURCE, p): 5 for p in kept}
    both = {(SOURCE, kept[0]): 6, (SOURCE, lost[0]): 6}
    assert h.commit("a", old, both)[0] == E.stale_member_epoch
    assert h.commit("a", old - 1, {(SOURCE, kept[0]): 6})[0] == E.stale_member_epoch
    assert h.commit("a", old, {("other", 0): 6})[0] == E.stale_member_epoch
    txn = h.shard.validate_txn_offset_commit
    assert txn(GROUP, "a", None, old, [(SOURCE, kept[0])]) == E.none
    assert txn(GROUP, "a", None, old, [(SOURCE, lost[0])]) == E.illegal_generation
    # a partition whose metadata is too large gets its own error and escapes the check
    too_large = "x" * (h.services.config.offset_metadata_max_bytes + 1)
    error, errors, _ = h.shard.commit_offsets(
        GROUP,
        "a",
        None,
        old,
        9,
        [
            CommitPartition(SOURCE, kept[0], 7, -1, ""),
            CommitPartition(SOURCE, lost[0], 7, -1, too_large),
        ],
    )
    assert error == E.none
    assert errors == {(SOURCE, kept[0]): E.none, (SOURCE, lost[0]): E.offset_metadata_too_large}


def test_delete_needs_an_empty_group() -> None:
    h = StreamsHarness()
    h.hb("a", 0)
    errors, _ = h.shard.delete_groups([GROUP])
    assert errors[GROUP] == E.non_empty_group
    h.hb("a", -1)
    errors, records = h.shard.delete_groups([GROUP])
    assert errors[GROUP] == E.none
    h.services.append(GROUP, records, replay=True)
    assert GROUP not in h.shard.groups


def test_the_group_rebuilt_from_its_records_is_the_same() -> None:
    h = StreamsHarness(num_standby_replicas=1)
    for m in ("a", "b"):
        h.hb(m, 0)
    for _ in range(3):
        for m in ("a", "b"):
            h.hb(m)
    shard, _ = local_shard(h.services.config)
    for offset, (key, value) in enumerate(h.services.log):
        shard.replay(Record(offset, 0, key, value, ()))
    shard.on_loaded()
    rebuilt = shard.groups[GROUP]
    assert isinstance(rebuilt, StreamsGroupAdapter)
    assert isinstance(rebuilt.group, StreamsGroup)
    original = h.group()
    for attr in (
        "group_epoch",
        "assignment_epoch",
        "validated_topology_epoch",
        "metadata_hash",
        "members",
        "target",
        "topology",
        "last_assignment_configs",
    ):
        assert getattr(rebuilt.group, attr) == getattr(original, attr), attr


def test_records_round_trip() -> None:
    h = StreamsHarness(num_standby_replicas=1)
    h.hb("a", 0)
    h.hb("b", 0)
    types = set()
    for key, value in h.services.log:
        decoded = rec.decode(key, value)
        assert decoded is not None
        k, v = decoded
        types.add(k.type)
        assert rec.encode(k, v) == (key, value)
    assert types == {17, 19, 20, 21, 22, 23}


def test_an_empty_classic_group_id_becomes_a_streams_group() -> None:
    h = StreamsHarness()
    h.shard.validate_txn_offset_commit(GROUP, "", None, -1)  # a simple (classic) group
    h.hb("a", 0)
    assert isinstance(h.shard.groups[GROUP], StreamsGroupAdapter)


def test_list_groups_filters_a_streams_group_by_kafkas_state_names() -> None:
    h = StreamsHarness(topics=(SOURCE,))  # internal topics missing: NotReady
    h.hb("a", 0)
    (listed,) = h.shard.list_groups(states=["not_ready"], types=["streams"])
    assert (listed.state, listed.type, listed.protocol_type) == ("NotReady", "streams", "streams")
    assert h.shard.list_groups(states=["notready"]) == []
