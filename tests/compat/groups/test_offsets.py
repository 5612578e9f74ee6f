"""Committed offsets: OffsetCommit (simple and member commits, and a commit as a classic
heartbeat), OffsetFetch (single and batched), OffsetDelete."""

from __future__ import annotations

import time
from typing import Any

import pytest

from cluster.kafka_client import builder
from tests.compat import flows
from tests.compat.flows import Broker
from tests.compat.groups.support import (
    ALL,
    OFFSET_DELETE,
    OTHER,
    TOPIC,
    commit,
    fetch_groups,
    fetch_offsets,
    heartbeat,
    join,
    join_new,
    leave,
    stable_member,
    sync,
)
from tests.compat.pair import Pair


@pytest.mark.parametrize("version", range(2, 10))
def test_offset_commit_simple_group(pair: Pair, version: int) -> None:
    """A commit outside any membership (generation -1): the group exists for its offsets."""
    group = f"compat-commit-v{version}"

    def flow(b: Broker) -> None:
        b.step(
            "two partitions",
            commit(
                b, group, {(TOPIC, 0): 10, (TOPIC, 1): 20}, version, metadata="m", leader_epoch=0
            ),
        )
        b.step(
            "unknown topic and partition",
            commit(b, group, {("compat-groups-nope", 0): 1, (TOPIC, 7): 1}, version),
        )
        b.step(
            "metadata of 4097 bytes",
            commit(b, group, {(TOPIC, 2): 1}, version, metadata="x" * 4097),
        )
        b.step(
            "metadata of 4096 bytes",
            commit(b, group, {(TOPIC, 2): 2}, version, metadata="x" * 4096),
        )
        b.step("null metadata", commit(b, group, {(TOPIC, 2): 3}, version, metadata=None))
        b.step("read back", fetch_offsets(b, group, {TOPIC: [0, 1, 2]}, 7))

    flows.run(pair, f"OffsetCommit v{version}", flow)


def test_offset_commit_membership_checks(pair: Pair) -> None:
    group = "compat-commit-members"

    def flow(b: Broker) -> None:
        member, gen = stable_member(b, group)
        for version in (2, 5, 7, 9):
            b.step(
                f"v{version} of the member",
                commit(b, group, {(TOPIC, 0): version}, version, gen, member),
            )
            b.step(
                f"v{version} of a wrong generation",
                commit(b, group, {(TOPIC, 0): 1}, version, gen + 1, member),
            )
            b.step(
                f"v{version} of an unknown member",
                commit(b, group, {(TOPIC, 0): 1}, version, gen, "compat-nobody"),
            )
            b.step(
                f"v{version} outside the membership (generation -1)",
                commit(b, group, {(TOPIC, 0): 1}, version),
            )
        b.step("a commit while rebalancing: join of a second member", join(b, group, conn="b"))

    flows.run(pair, "OffsetCommit to a live classic group", flow)


def test_offset_commits_keep_a_classic_session_alive(pair: Pair) -> None:
    """A classic member that commits every 2 s but sends no heartbeat for 1.5 session timeouts
    is still a member: Kafka counts an accepted OffsetCommit as a heartbeat while the group is
    Stable or PreparingRebalance."""
    group = "compat-commit-session"

    def flow(b: Broker) -> None:
        j = join_new(b, group, session_ms=6000)
        s = sync(b, group, j.generation_id, j.member_id, {j.member_id: ALL})
        assert j.error_code == 0, j
        assert s.error_code == 0, s
        for i in range(1, 5):
            time.sleep(2)  # the time that passes without a heartbeat is what is tested
            b.step(
                f"commit {i}, {2 * i} s after SyncGroup",
                commit(b, group, {(TOPIC, 0): i}, generation=j.generation_id, member=j.member_id),
            )
        b.step(
            "the first heartbeat, 8 s after SyncGroup",
            heartbeat(b, group, j.generation_id, j.member_id),
        )

    flows.run(pair, "OffsetCommit as a classic heartbeat", flow)


@pytest.mark.parametrize("version", range(1, 10))
def test_offset_fetch(pair: Pair, version: int) -> None:
    group = "compat-fetch-offsets"

    def flow(b: Broker) -> None:
        commit(b, group, {(TOPIC, 0): 10, (TOPIC, 1): 20}, 9, metadata="m", leader_epoch=0)
        b.step(
            "committed, not committed, unknown topic and partition",
            fetch_offsets(b, group, {TOPIC: [0, 1, 2, 9], "compat-groups-nope": [0]}, version),
        )
        b.step(
            "an unknown group", fetch_offsets(b, "compat-fetch-offsets-nope", {TOPIC: [0]}, version)
        )
        if version >= 2:
            b.step("every topic", fetch_offsets(b, group, None, version))
            b.step(
                "every topic of an unknown group",
                fetch_offsets(b, "compat-fetch-nope", None, version),
            )
        if version >= 7:
            b.step("require_stable", fetch_offsets(b, group, {TOPIC: [0]}, version, True))

    flows.run(pair, f"OffsetFetch v{version}", flow)


@pytest.mark.parametrize("version", [8, 9])
def test_offset_fetch_batched(pair: Pair, version: int) -> None:
    group = "compat-fetch-batched"

    def flow(b: Broker) -> None:
        commit(b, group, {(TOPIC, 0): 10}, 9)
        b.step(
            "three groups",
            fetch_groups(
                b,
                {group: {TOPIC: [0, 1]}, "compat-fetch-batched-nope": None, OTHER: {TOPIC: [0]}},
                version,
                require_stable=True,
            ),
        )

    flows.run(pair, f"OffsetFetch v{version}: batched groups", flow)


def test_offset_delete(pair: Pair) -> None:
    group = "compat-offset-delete"

    def fields(group: str, parts: dict[str, list[int]]) -> dict[str, Any]:
        ob = builder(OFFSET_DELETE, 0)
        return dict(
            group_id=group,
            topics=tuple(
                ob.OffsetDeleteRequestTopic(
                    name=t,
                    partitions=tuple(
                        ob.OffsetDeleteRequestPartition(partition_index=p) for p in ps
                    ),
                )
                for t, ps in parts.items()
            ),
        )

    def flow(b: Broker) -> None:
        member, gen = stable_member(b, group)
        commit(b, group, {(TOPIC, 0): 1, (OTHER, 0): 1}, 9, gen, member)
        b.step(
            "a subscribed topic, another one, an unknown one",
            b.call(
                OFFSET_DELETE,
                0,
                **fields(group, {TOPIC: [0], OTHER: [0], "compat-groups-nope": [0]}),
            ),
        )
        b.step("offsets after", fetch_offsets(b, group, {TOPIC: [0], OTHER: [0]}))
        leave(b, group, [(member, None)])
        b.step(
            "the subscribed topic once the group is empty",
            b.call(OFFSET_DELETE, 0, **fields(group, {TOPIC: [0, 1]})),
        )
        b.step(
            "an unknown group", b.call(OFFSET_DELETE, 0, **fields("compat-od-nope", {TOPIC: [0]}))
        )
        b.step(
            "an unknown partition of a known topic",
            b.call(OFFSET_DELETE, 0, **fields(group, {OTHER: [0, 5], "compat-groups-nope": [1]})),
        )

    flows.run(pair, "OffsetDelete", flow)
