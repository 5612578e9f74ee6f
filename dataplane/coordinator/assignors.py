"""Server-side partition assignors of the consumer group protocol (KIP-848): `uniform`, Kafka's
default, and `range`.

An assignor maps the group's members to partitions of the topics they subscribe to::

    assign(members, topics, current) -> {member id: {topic id: {partition, ...}}}

* `members`: member id -> MemberSubscription (subscribed topic *names*, optional rack);
* `topics`: topic name -> TopicMetadata (topic id, partition count, optional partition racks);
  subscribed names missing here are ignored (the topic does not exist, or not yet);
* `current`: the group's current *target* assignment, member id -> {topic id: partitions},
  which the assignors keep as much as they can (stickiness).

Every member of `members` is in the result (possibly with an empty dict), every partition of a
subscribed topic goes to exactly one member subscribed to it, and the result depends only on the
inputs (members, topics and partitions are visited in sorted order), never on dict order or
randomness. Topic ids are 16 raw bytes.

`uniform` (Kafka's `UniformAssignor`): balance first, stickiness second.
  * homogeneous subscriptions (every member subscribes to the same existing topics): every
    member gets `P // M` or `P // M + 1` partitions; the members with the most partitions they
    can keep get the extra ones, and each member keeps as many of its partitions as its quota
    allows, so only the partitions that must move do.
  * heterogeneous subscriptions: members keep what they own and are still subscribed to, free
    partitions go to the least-loaded eligible member (most constrained topics first), then
    partitions move along chains of eligible members until no member could hand a partition,
    directly or through others, to a member with at least two fewer partitions (so the counts
    are as even as the subscriptions allow; with identical subscriptions that is max-min <= 1).
    Partitions that were free are moved before partitions a member already had.
  * racks: when both a member and the partition racks are known, free partitions prefer a
    member on a rack holding a replica (a tie-breaker only: it never costs balance).

`range` (Kafka's server-side `RangeAssignor`): per topic, the subscribed members in member id
order get contiguous ranges; `P % M` members get one extra partition. Topics with the same
partition count and the same subscribers are therefore co-partitioned on a fresh assignment.
It is sticky as Kafka's is: a member keeps its lowest `P // M` partitions of the topic (and one
more if it had more and extras remain); the remaining partitions are handed out in ranges.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass

__all__ = [
    "ASSIGNORS",
    "DEFAULT_ASSIGNOR",
    "Assignment",
    "AssignorError",
    "MemberSubscription",
    "TopicMetadata",
    "range_assign",
    "uniform_assign",
]

Assignment = dict[bytes, set[int]]
"""One member's partitions: topic id -> partitions."""


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """What the group needs to know of a topic. `partition_racks`, if known, is the set of racks
    holding a replica of each partition, indexed by partition."""

    topic_id: bytes
    name: str
    num_partitions: int
    partition_racks: tuple[frozenset[str], ...] | None = None


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    """A member as the assignor sees it: the topic names it subscribes to (regular expressions
    already resolved to names) and its rack."""

    topics: frozenset[str]
    rack: str | None = None


class AssignorError(Exception):
    """The assignor cannot compute an assignment (Kafka's PartitionAssignorException)."""


Assignor = Callable[
    [
        Mapping[str, MemberSubscription],
        Mapping[str, TopicMetadata],
        Mapping[str, Mapping[bytes, Set[int]]],
    ],
    dict[str, Assignment],
]

TP = tuple[bytes, int]


def _subscribed(
    members: Mapping[str, MemberSubscription], topics: Mapping[str, TopicMetadata]
) -> dict[str, tuple[str, ...]]:
    """Each member's existing subscribed topics, sorted by name."""
    return {m: tuple(sorted(t for t in s.topics if t in topics)) for m, s in members.items()}


def _prefers(topic: TopicMetadata, partition: int, rack: str | None) -> bool:
    racks = topic.partition_racks
    return (
        rack is not None
        and racks is not None
        and partition < len(racks)
        and rack in racks[partition]
    )


# -- uniform -------------------------------------------------------------------------------


def uniform_assign(
    members: Mapping[str, MemberSubscription],
    topics: Mapping[str, TopicMetadata],
    current: Mapping[str, Mapping[bytes, Set[int]]],
) -> dict[str, Assignment]:
    """Kafka's `uniform` assignor (see the module docstring)."""
    if not members:
        return {}
    subs = _subscribed(members, topics)
    if len(set(subs.values())) == 1:
        return _uniform_homogeneous(members, subs, topics, current)
    return _uniform_heterogeneous(members, subs, topics, current)


def _uniform_homogeneous(
    members: Mapping[str, MemberSubscription],
    subs: Mapping[str, tuple[str, ...]],
    topics: Mapping[str, TopicMetadata],
    current: Mapping[str, Mapping[bytes, Set[int]]],
) -> dict[str, Assignment]:
    names = next(iter(subs.values()))
    by_id = {topics[n].topic_id: topics[n] for n in names}
    order = sorted(members)
    result: dict[str, Assignment] = {m: {} for m in order}
    if not names:
        return result

    # What each member could keep: its current partitions of subscribed, existing topics,
    # each partition claimed once (a valid target assignment is disjoint anyway).
    claimed: set[TP] = set()
    keepable: dict[str, list[TP]] = {}
    for m in order:
        mine: list[TP] = []
        mine_topics = [t for t in current.get(m, {}) if t in by_id]
        for topic_id in sorted(mine_topics, key=lambda t: by_id[t].name):
            topic = by_id[topic_id]
            for p in sorted(current[m][topic_id]):
                tp = (topic_id, p)
                if 0 <= p < topic.num_partitions and tp not in claimed:
                    claimed.add(tp)
                    mine.append(tp)
        keepable[m] = mine

    total = sum(topics[n].num_partitions for n in names)
    base, extra = divmod(total, len(order))
    quota = {m: base for m in order}
    # The members able to keep the most get the extra partitions: that keeps the most in place.
    for m in sorted(order, key=lambda m: (-len(keepable[m]), m))[:extra]:
        quota[m] += 1

    kept: set[TP] = set()
    for m in order:
        for topic_id, p in keepable[m][: quota[m]]:
            result[m].setdefault(topic_id, set()).add(p)
            kept.add((topic_id, p))

    free = [
        (topics[n].topic_id, p)
        for n in names
        for p in range(topics[n].num_partitions)
        if (topics[n].topic_id, p) not in kept
    ]
    needs = {m: quota[m] - min(quota[m], len(keepable[m])) for m in order}
    _fill(free, order, needs, members, by_id, result)
    return result


def _fill(
    free: list[TP],
    order: list[str],
    needs: dict[str, int],
    members: Mapping[str, MemberSubscription],
    by_id: Mapping[bytes, TopicMetadata],
    result: dict[str, Assignment],
) -> None:
    """Hand out `free` partitions: each member in `order` takes `needs[m]` of them, first those
    with a replica on its rack (when racks are known), else the next ones in order."""
    racked = any(t.partition_racks is not None for t in by_id.values()) and any(
        members[m].rack is not None for m in order
    )
    taken = [False] * len(free)
    by_rack: dict[str, deque[int]] = {}
    if racked:
        for i, (topic_id, p) in enumerate(free):
            racks = by_id[topic_id].partition_racks
            if racks is not None and p < len(racks):
                for rack in sorted(racks[p]):
                    by_rack.setdefault(rack, deque()).append(i)
    cursor = 0
    for m in order:
        need = needs[m]
        member_rack = members[m].rack
        queue = by_rack.get(member_rack) if member_rack is not None else None
        while need and queue:
            i = queue.popleft()
            if not taken[i]:
                taken[i] = True
                topic_id, p = free[i]
                result[m].setdefault(topic_id, set()).add(p)
                need -= 1
        while need:
            while cursor < len(free) and taken[cursor]:
                cursor += 1
            if cursor == len(free):
                raise AssignorError("Partitions were left unassigned")
            taken[cursor] = True
            topic_id, p = free[cursor]
            result[m].setdefault(topic_id, set()).add(p)
            need -= 1
    if not all(taken):
        raise AssignorError("Partitions were left unassigned")


def _uniform_heterogeneous(
    members: Mapping[str, MemberSubscription],
    subs: Mapping[str, tuple[str, ...]],
    topics: Mapping[str, TopicMetadata],
    current: Mapping[str, Mapping[bytes, Set[int]]],
) -> dict[str, Assignment]:
    order = sorted(members)
    names = sorted({n for s in subs.values() for n in s})
    by_id = {topics[n].topic_id: topics[n] for n in names}
    subscribers: dict[bytes, list[str]] = {topics[n].topic_id: [] for n in names}
    for m in order:
        for n in subs[m]:
            subscribers[topics[n].topic_id].append(m)
    subscribed_ids = {m: {topics[n].topic_id for n in subs[m]} for m in order}

    # owned[m][topic id] = partitions; fresh = partitions not kept from the current assignment.
    owned: dict[str, dict[bytes, set[int]]] = {m: {} for m in order}
    count = dict.fromkeys(order, 0)
    owner: dict[TP, str] = {}
    for m in order:
        for topic_id in sorted(current.get(m, {})):
            if topic_id not in subscribed_ids[m]:
                continue
            topic = by_id[topic_id]
            for p in sorted(current[m][topic_id]):
                if 0 <= p < topic.num_partitions and (topic_id, p) not in owner:
                    owner[(topic_id, p)] = m
                    owned[m].setdefault(topic_id, set()).add(p)
                    count[m] += 1
    fresh: set[TP] = set()

    # Free partitions, most constrained topics first, to the least-loaded eligible member.
    free_topics = sorted(names, key=lambda n: (len(subscribers[topics[n].topic_id]), n))
    for n in free_topics:
        topic = topics[n]
        eligible = subscribers[topic.topic_id]
        for p in range(topic.num_partitions):
            if (topic.topic_id, p) in owner:
                continue

            def rank(m: str, topic: TopicMetadata = topic, p: int = p) -> tuple[int, bool, str]:
                return count[m], not _prefers(topic, p, members[m].rack), m

            m = min(eligible, key=rank)
            owner[(topic.topic_id, p)] = m
            owned[m].setdefault(topic.topic_id, set()).add(p)
            count[m] += 1
            fresh.add((topic.topic_id, p))

    _balance(order, owned, count, subscribers, fresh)
    return {m: {t: set(ps) for t, ps in owned[m].items() if ps} for m in order}


def _balance(
    order: list[str],
    owned: dict[str, dict[bytes, set[int]]],
    count: dict[str, int],
    subscribers: Mapping[bytes, list[str]],
    fresh: set[TP],
) -> None:
    """Move partitions along chains of eligible members until no member reaches, through
    members able to take a partition of a topic the previous one owns, a member with at least
    two fewer partitions. Every move lowers the sum of squared counts, so this ends."""
    while True:
        for source in sorted(order, key=lambda m: (-count[m], m)):
            path = _find_path(source, owned, count, subscribers)
            if path is not None:
                for giver, topic_id, taker in path:
                    _move(giver, topic_id, taker, owned, fresh)
                count[source] -= 1
                count[path[-1][2]] += 1
                break
        else:
            return


def _find_path(
    source: str,
    owned: dict[str, dict[bytes, set[int]]],
    count: dict[str, int],
    subscribers: Mapping[bytes, list[str]],
) -> list[tuple[str, bytes, str]] | None:
    """Breadth-first from `source` over "can take a partition of a topic u owns" edges: the
    hops to the first member with at most count[source] - 2 partitions, or None."""
    limit = count[source] - 2
    if limit < 0:
        return None
    parent: dict[str, tuple[str, bytes]] = {}
    seen = {source}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for topic_id in sorted(owned[u]):
            if not owned[u][topic_id]:
                continue
            for v in subscribers[topic_id]:
                if v in seen:
                    continue
                seen.add(v)
                parent[v] = (u, topic_id)
                if count[v] <= limit:
                    path = []
                    while v != source:
                        u2, t2 = parent[v]
                        path.append((u2, t2, v))
                        v = u2
                    return path[::-1]
                queue.append(v)
    return None


def _move(
    giver: str,
    topic_id: bytes,
    taker: str,
    owned: dict[str, dict[bytes, set[int]]],
    fresh: set[TP],
) -> None:
    parts = owned[giver][topic_id]
    # Move a partition nobody had before if possible, else the highest one.
    newly = [p for p in parts if (topic_id, p) in fresh]
    p = max(newly) if newly else max(parts)
    parts.discard(p)
    if not parts:
        del owned[giver][topic_id]
    owned[taker].setdefault(topic_id, set()).add(p)
    fresh.add((topic_id, p))


# -- range ---------------------------------------------------------------------------------


def range_assign(
    members: Mapping[str, MemberSubscription],
    topics: Mapping[str, TopicMetadata],
    current: Mapping[str, Mapping[bytes, Set[int]]],
) -> dict[str, Assignment]:
    """Kafka's server-side `range` assignor (see the module docstring)."""
    order = sorted(members)
    subs = _subscribed(members, topics)
    result: dict[str, Assignment] = {m: {} for m in order}
    per_topic: dict[str, list[str]] = {}
    for m in order:
        for n in subs[m]:
            per_topic.setdefault(n, []).append(m)

    for name in sorted(per_topic):
        topic = topics[name]
        topic_id, num = topic.topic_id, topic.num_partitions
        subscribed = per_topic[name]
        base, extra = divmod(num, len(subscribed))
        retained: set[int] = set()
        unfilled: list[tuple[str, int]] = []
        for m in subscribed:
            mine = sorted(
                p
                for p in current.get(m, {}).get(topic_id, ())
                if 0 <= p < num and p not in retained
            )
            for p in mine[:base]:
                retained.add(p)
                result[m].setdefault(topic_id, set()).add(p)
            remaining = base - len(mine)
            if remaining < 0 and extra > 0:
                extra -= 1
                retained.add(mine[base])
                result[m].setdefault(topic_id, set()).add(mine[base])
            else:
                unfilled.append((m, remaining))
        free = [p for p in range(num) if p not in retained]
        start = 0
        for m, remaining in unfilled:
            if extra > 0:
                remaining += 1
                extra -= 1
            if remaining > 0:
                result[m].setdefault(topic_id, set()).update(free[start : start + remaining])
                start += remaining
    return result


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
"""Server assignors by name, the default first (Kafka's `group.consumer.assignors`)."""

DEFAULT_ASSIGNOR = "uniform"
