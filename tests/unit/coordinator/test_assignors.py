"""Server-side assignors: balance, stickiness, heterogeneous subscriptions, co-partitioning,
determinism."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.coordinator.assignors import (
    ASSIGNORS,
    MemberSubscription,
    TopicMetadata,
    range_assign,
    uniform_assign,
)


def topic(name: str, n: int, racks=None) -> TopicMetadata:
    return TopicMetadata(name.encode().ljust(16, b"\x00"), name, n, racks)


def topics_of(*ts: TopicMetadata) -> dict[str, TopicMetadata]:
    return {t.name: t for t in ts}


def subs(members: dict[str, tuple[str, ...]]) -> dict[str, MemberSubscription]:
    return {m: MemberSubscription(frozenset(ts)) for m, ts in members.items()}


def flat(assignment) -> dict[tuple[bytes, int], str]:
    """partition -> member, asserting no partition has two members."""
    out: dict[tuple[bytes, int], str] = {}
    for m, parts in assignment.items():
        for t, ps in parts.items():
            for p in ps:
                assert (t, p) not in out, f"{t}-{p} assigned to {out[(t, p)]} and {m}"
                out[(t, p)] = m
    return out


def sizes(assignment) -> dict[str, int]:
    return {m: sum(len(ps) for ps in parts.values()) for m, parts in assignment.items()}


def check_complete(assignment, members, topics) -> None:
    """Every partition of every subscribed existing topic assigned once, to a subscriber."""
    owners = flat(assignment)
    by_id = {t.topic_id: t for t in topics.values()}
    wanted = {
        (topics[n].topic_id, p)
        for s in members.values()
        for n in s.topics
        if n in topics
        for p in range(topics[n].num_partitions)
    }
    assert set(owners) == wanted
    for (t, _), m in owners.items():
        assert by_id[t].name in members[m].topics
    assert set(assignment) == set(members)


# -- strategies ------------------------------------------------------------------------------

TOPIC_NAMES = ["a", "b", "c", "d"]


@st.composite
def homogeneous(draw):
    ts = {
        n: topic(n, draw(st.integers(0, 12)))
        for n in draw(st.lists(st.sampled_from(TOPIC_NAMES), min_size=1, max_size=4, unique=True))
    }
    names = tuple(ts)
    members = {f"m{i}": names for i in range(draw(st.integers(1, 9)))}
    return subs(members), ts


@st.composite
def heterogeneous(draw):
    ts = {n: topic(n, draw(st.integers(0, 10))) for n in TOPIC_NAMES}
    members = {
        f"m{i}": tuple(
            draw(st.lists(st.sampled_from([*TOPIC_NAMES, "missing"]), max_size=4, unique=True))
        )
        for i in range(draw(st.integers(1, 8)))
    }
    return subs(members), ts


def random_current(draw, members, topics):
    """A plausible current target assignment: disjoint, maybe stale (deleted topics, too-high
    partitions, members that left)."""
    all_parts = [(t.topic_id, p) for t in topics.values() for p in range(t.num_partitions + 2)]
    holders = [*members, "gone"]
    current: dict[str, dict[bytes, set[int]]] = {}
    for tp in all_parts:
        if draw(st.booleans()):
            m = draw(st.sampled_from(holders))
            current.setdefault(m, {}).setdefault(tp[0], set()).add(tp[1])
    return current


# -- uniform, homogeneous ----------------------------------------------------------------------


@settings(deadline=None)
@given(homogeneous(), st.data())
def test_uniform_homogeneous_is_balanced_and_complete(case, data) -> None:
    members, topics = case
    current = random_current(data.draw, members, topics)
    result = uniform_assign(members, topics, current)
    check_complete(result, members, topics)
    counts = sizes(result).values()
    assert max(counts) - min(counts) <= 1


@settings(deadline=None)
@given(homogeneous(), st.data())
def test_uniform_homogeneous_is_stable(case, data) -> None:
    members, topics = case
    first = uniform_assign(members, topics, random_current(data.draw, members, topics))
    assert uniform_assign(members, topics, first) == first


@settings(deadline=None)
@given(homogeneous())
def test_uniform_adding_a_member_only_moves_partitions_to_it(case) -> None:
    members, topics = case
    before = uniform_assign(members, topics, {})
    names = next(iter(members.values())).topics
    grown = {**members, "zz-new": MemberSubscription(names)}
    after = uniform_assign(grown, topics, before)
    check_complete(after, grown, topics)
    old_owner = flat(before)
    moved = [tp for tp, m in flat(after).items() if old_owner.get(tp) != m]
    # Old members only lose partitions, and only what the new member gets moves.
    assert all(flat(after)[tp] == "zz-new" for tp in moved)
    total = sum(topics[n].num_partitions for n in names)
    assert len(moved) == total // len(grown) or len(moved) == -(-total // len(grown))


@settings(deadline=None)
@given(homogeneous(), st.data())
def test_uniform_removing_a_member_only_moves_its_partitions(case, data) -> None:
    members, topics = case
    if len(members) < 2:
        return
    before = uniform_assign(members, topics, {})
    gone = data.draw(st.sampled_from(sorted(members)))
    shrunk = {m: s for m, s in members.items() if m != gone}
    after = uniform_assign(shrunk, topics, before)
    check_complete(after, shrunk, topics)
    for m in shrunk:
        for t, ps in before[m].items():
            assert ps <= after[m].get(t, set()), "a remaining member lost a partition"


def test_uniform_homogeneous_example() -> None:
    topics = topics_of(topic("a", 3), topic("b", 3))
    members = subs({"m1": ("a", "b"), "m2": ("a", "b"), "m3": ("a", "b")})
    result = uniform_assign(members, topics, {})
    assert sizes(result) == {"m1": 2, "m2": 2, "m3": 2}
    check_complete(result, members, topics)


def test_uniform_extra_partitions_go_to_members_that_have_them() -> None:
    # 7 partitions over 3 members: the one holding 3 keeps them all rather than losing one.
    topics = topics_of(topic("a", 7))
    a = topics["a"].topic_id
    members = subs({"m1": ("a",), "m2": ("a",), "m3": ("a",)})
    current = {"m1": {a: {0, 1}}, "m2": {a: {2, 3}}, "m3": {a: {4, 5, 6}}}
    result = uniform_assign(members, topics, current)
    assert result["m3"] == {a: {4, 5, 6}}
    assert result["m1"][a] >= {0, 1} or result["m2"][a] >= {2, 3}
    assert sum(sizes(result).values()) == 7


# -- uniform, heterogeneous --------------------------------------------------------------------


def assert_no_improving_move(result, members, topics) -> None:
    """No member could hand one of its partitions to another subscriber of that topic holding
    at least two fewer partitions."""
    count = sizes(result)
    by_id = {t.topic_id: t for t in topics.values()}
    for m, parts in result.items():
        for t, ps in parts.items():
            if not ps:
                continue
            for other, s in members.items():
                if other != m and by_id[t].name in s.topics:
                    assert count[other] >= count[m] - 1, (m, other, by_id[t].name, count)


@settings(max_examples=300, deadline=None)
@given(heterogeneous(), st.data())
def test_uniform_heterogeneous_is_complete_and_balanced(case, data) -> None:
    members, topics = case
    current = random_current(data.draw, members, topics)
    result = uniform_assign(members, topics, current)
    check_complete(result, members, topics)
    assert_no_improving_move(result, members, topics)
    assert uniform_assign(members, topics, result) == result


def test_uniform_heterogeneous_balances_through_chains() -> None:
    # m1 only x, m2 x and y, m3 only y. From 3/3/0, y moves m2 -> m3 (3/2/1); then only a chain
    # evens it out: an x partition m1 -> m2 and a y partition m2 -> m3 (2/2/2).
    topics = topics_of(topic("x", 4), topic("y", 2))
    x, y = topics["x"].topic_id, topics["y"].topic_id
    members = subs({"m1": ("x",), "m2": ("x", "y"), "m3": ("y",)})
    current = {"m1": {x: {0, 1, 2}}, "m2": {x: {3}, y: {0, 1}}}
    result = uniform_assign(members, topics, current)
    check_complete(result, members, topics)
    assert sizes(result) == {"m1": 2, "m2": 2, "m3": 2}
    assert result["m3"] == {y: {0, 1}}
    assert result["m1"][x] < {0, 1, 2}


def test_uniform_heterogeneous_example() -> None:
    topics = topics_of(topic("a", 4), topic("b", 2))
    a, b = topics["a"].topic_id, topics["b"].topic_id
    members = subs({"m1": ("a",), "m2": ("a", "b"), "m3": ("b",)})
    result = uniform_assign(members, topics, {})
    check_complete(result, members, topics)
    assert sorted(sizes(result).values()) == [2, 2, 2]
    assert set(result["m1"]) == {a}
    assert set(result["m3"]) == {b}


@settings(deadline=None)
@given(heterogeneous(), st.data())
def test_uniform_heterogeneous_new_member_moves_only_to_it(case, data) -> None:
    members, topics = case
    before = uniform_assign(members, topics, {})
    names = frozenset(data.draw(st.lists(st.sampled_from(TOPIC_NAMES), unique=True)))
    grown = {**members, "zz-new": MemberSubscription(names)}
    after = uniform_assign(grown, topics, before)
    check_complete(after, grown, topics)
    assert_no_improving_move(after, grown, topics)
    # Old members may pass partitions along a chain, but never gain from nothing: every old
    # member ends with at most one more partition than it had.
    for m in members:
        assert sizes(after)[m] <= sizes(before)[m] + 1


def test_uniform_prefers_rack_local_partitions() -> None:
    racks = (frozenset({"r1"}), frozenset({"r2"}), frozenset({"r1"}), frozenset({"r2"}))
    topics = topics_of(topic("a", 4, racks))
    a = topics["a"].topic_id
    members = {
        "m1": MemberSubscription(frozenset({"a"}), "r2"),
        "m2": MemberSubscription(frozenset({"a"}), "r1"),
    }
    result = uniform_assign(members, topics, {})
    assert result == {"m1": {a: {1, 3}}, "m2": {a: {0, 2}}}


def test_uniform_edge_cases() -> None:
    topics = topics_of(topic("a", 2))
    assert uniform_assign({}, topics, {}) == {}
    members = subs({"m1": ("missing",), "m2": ()})
    assert uniform_assign(members, topics, {}) == {"m1": {}, "m2": {}}
    many = subs({f"m{i}": ("a",) for i in range(5)})
    result = uniform_assign(many, topics, {})
    assert sorted(sizes(result).values()) == [0, 0, 0, 1, 1]


# -- range -------------------------------------------------------------------------------------


def test_range_fresh_assignment_is_co_partitioned_ranges() -> None:
    topics = topics_of(topic("a", 7), topic("b", 7), topic("c", 3))
    a, b, c = (topics[n].topic_id for n in "abc")
    members = subs({"m1": ("a", "b", "c"), "m2": ("a", "b", "c"), "m3": ("a", "b", "c")})
    result = range_assign(members, topics, {})
    assert result["m1"] == {a: {0, 1, 2}, b: {0, 1, 2}, c: {0}}
    assert result["m2"] == {a: {3, 4}, b: {3, 4}, c: {1}}
    assert result["m3"] == {a: {5, 6}, b: {5, 6}, c: {2}}


@settings(deadline=None)
@given(st.integers(1, 8), st.integers(0, 20))
def test_range_co_partitions_same_sized_topics(n_members, n_parts) -> None:
    topics = topics_of(topic("a", n_parts), topic("b", n_parts))
    a, b = topics["a"].topic_id, topics["b"].topic_id
    members = subs({f"m{i}": ("a", "b") for i in range(n_members)})
    result = range_assign(members, topics, {})
    check_complete(result, members, topics)
    for parts in result.values():
        pa, pb = parts.get(a, set()), parts.get(b, set())
        assert pa == pb
        if pa:
            assert max(pa) - min(pa) + 1 == len(pa), "not a contiguous range"
    counts = sizes(result).values()
    assert max(counts) - min(counts) <= 2


@settings(deadline=None)
@given(heterogeneous(), st.data())
def test_range_is_complete_per_topic_balanced_and_stable(case, data) -> None:
    members, topics = case
    current = random_current(data.draw, members, topics)
    result = range_assign(members, topics, current)
    check_complete(result, members, topics)
    for name, t in topics.items():
        subscribers = [m for m, s in members.items() if name in s.topics]
        if subscribers:
            got = [len(result[m].get(t.topic_id, ())) for m in subscribers]
            assert max(got) - min(got) <= 1
    assert range_assign(members, topics, result) == result


def test_range_is_sticky_like_kafka() -> None:
    topics = topics_of(topic("a", 6))
    a = topics["a"].topic_id
    members = subs({"m1": ("a",), "m2": ("a",), "m3": ("a",)})
    before = range_assign(subs({"m1": ("a",), "m2": ("a",)}), topics, {})
    assert before == {"m1": {a: {0, 1, 2}}, "m2": {a: {3, 4, 5}}}
    after = range_assign(members, topics, before)
    # Each old member keeps its lowest two; the new one gets what they gave up.
    assert after == {"m1": {a: {0, 1}}, "m2": {a: {3, 4}}, "m3": {a: {2, 5}}}


# -- both --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
@settings(deadline=None)
@given(case=heterogeneous(), seed=st.integers(0, 2**32))
def test_deterministic_whatever_the_dict_order(name, case, seed) -> None:
    members, topics = case
    assign = ASSIGNORS[name]
    first = assign(members, topics, {})
    rnd = random.Random(seed)
    shuffled_members = dict(rnd.sample(list(members.items()), len(members)))
    shuffled_topics = dict(rnd.sample(list(topics.items()), len(topics)))
    assert assign(shuffled_members, shuffled_topics, {}) == first
    current = {m: dict(rnd.sample(list(p.items()), len(p))) for m, p in first.items()}
    assert assign(members, topics, current) == assign(members, topics, first)


def test_large_group_is_fast_enough() -> None:
    topics = topics_of(*(topic(f"t{i}", 50) for i in range(20)))
    names = tuple(topics)
    members = subs({f"m{i:03}": names for i in range(200)})
    result = uniform_assign(members, topics, {})
    assert Counter(sizes(result).values()) == {5: 200}
    hetero = subs({f"m{i:03}": names[: 1 + i % 20] for i in range(100)})
    result = uniform_assign(hetero, topics, {})
    check_complete(result, hetero, topics)
