"""The group admin APIs: DescribeGroups, ListGroups, DeleteGroups, and the empty group id."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.compat import flows
from tests.compat.flows import Broker
from tests.compat.groups.support import (
    BY_GROUP,
    DELETE,
    LIST,
    OFFSET_DELETE,
    TOPIC,
    commit,
    describe,
    fetch_groups,
    fetch_offsets,
    stable_member,
)
from tests.compat.pair import Pair


def only(prefix: str) -> Callable[[Any], list[Any]]:
    """ListGroups' groups whose id starts with `prefix`, sorted (other cases' groups live on
    the same brokers)."""

    def pick(r: Any) -> list[Any]:
        return sorted(
            (g for g in r.groups if g.group_id.startswith(prefix)), key=lambda g: g.group_id
        )

    return pick


@pytest.mark.parametrize("version", range(6))
def test_describe_groups(pair: Pair, version: int) -> None:
    group = f"compat-describe-v{version}"

    def flow(b: Broker) -> None:
        stable_member(b, group)
        b.step(
            "a stable group and an unknown one",
            describe(b, group, "compat-describe-nope", version=version, ops=version >= 3),
        )

    flows.run(pair, f"DescribeGroups v{version}", flow, sort=BY_GROUP)


def test_list_groups(pair: Pair) -> None:
    prefix = "compat-list-"

    def flow(b: Broker) -> None:
        stable_member(b, prefix + "stable")
        commit(b, prefix + "empty", {(TOPIC, 0): 5}, 2)
        pick = only(prefix)
        for version in range(6):
            r = b.call(LIST, version, states_filter=(), types_filter=())
            b.step(f"v{version}", {"error_code": r.error_code, "groups": pick(r)})
        for states in (("Stable",), ("Empty",), ("stable", "EMPTY"), ("Dead",), ("nope",)):
            r = b.call(LIST, 4, states_filter=states, types_filter=())
            b.step(f"v4 states {states}", {"error_code": r.error_code, "groups": pick(r)})
        for types in (("classic",), ("consumer",), ("Classic", "share"), ("nope",)):
            r = b.call(LIST, 5, states_filter=(), types_filter=types)
            b.step(f"v5 types {types}", {"error_code": r.error_code, "groups": pick(r)})

    flows.run(pair, "ListGroups", flow)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_groups(pair: Pair, version: int) -> None:
    prefix = f"compat-delete-v{version}-"

    def flow(b: Broker) -> None:
        stable_member(b, prefix + "live")
        commit(b, prefix + "empty", {(TOPIC, 0): 5}, 2)
        r = b.call(
            DELETE,
            version,
            groups_names=(prefix + "live", prefix + "empty", prefix + "nope"),
        )
        b.step("a live group, an empty one, an unknown one", r)
        b.step(
            "the empty group's offsets after",
            fetch_offsets(b, prefix + "empty", {TOPIC: [0]}, 7),
        )
        b.step("delete again", b.call(DELETE, version, groups_names=(prefix + "empty",)))

    flows.run(pair, f"DeleteGroups v{version}", flow, sort=["results"])


def test_the_empty_group_id(pair: Pair) -> None:
    """Kafka keeps the empty group id working where pre-0.9 clients used it: offsets commit
    and fetch, DescribeGroups and DeleteGroups; the membership APIs refuse it."""

    def flow(b: Broker) -> None:
        b.step("OffsetCommit", commit(b, "", {(TOPIC, 0): 7}, 9))
        b.step("OffsetFetch v1", fetch_offsets(b, "", {TOPIC: [0]}, 1))
        b.step("OffsetFetch v8", fetch_groups(b, {"": None}, 8))
        b.step("DescribeGroups", describe(b, "", ops=True))
        b.step("OffsetDelete", b.call(OFFSET_DELETE, 0, group_id="", topics=()))
        b.step("DeleteGroups", b.call(DELETE, 2, groups_names=("",)))
        b.step("OffsetFetch after", fetch_offsets(b, "", {TOPIC: [0]}, 7))
        b.step("DeleteGroups again", b.call(DELETE, 2, groups_names=("",)))

    flows.run(pair, "The empty group id", flow)
