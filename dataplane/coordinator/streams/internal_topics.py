"""A streams group's topology configured against the cluster's topics: Kafka's
`InternalTopicManager.configureTopics`. It checks that the source topics exist, decides the
partition count of every internal topic (repartition topics from the subtopologies writing them,
co-partition groups made equal, changelogs as many as their subtopology's tasks), lists the
internal topics to create, and gives each subtopology its number of tasks (its largest source
topic). A problem is a heartbeat *status*, not an error: MISSING_SOURCE_TOPICS,
INCORRECTLY_PARTITIONED_TOPICS or MISSING_INTERNAL_TOPICS (the broker creates those, the
StreamsGroupHeartbeat handler); the group assigns no tasks until the topology is ready.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.streams import records as rec
from dataplane.coordinator.streams.requests import Status
from dataplane.coordinator.streams.topology import TopicInfo, invalid_topology, required_topics

log = logging.getLogger("rafka.coordinator.streams_group")


class TopicConfigurationError(Exception):
    """Kafka's TopicConfigurationException: the topology cannot be configured yet."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """A repartition or changelog topic as it must exist (replication factor None: the
    broker's default)."""

    name: str
    partitions: int
    replication_factor: int | None
    configs: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class ConfiguredSubtopology:
    tasks: int
    source_topics: tuple[str, ...]
    repartition_source_topics: tuple[InternalTopic, ...]
    repartition_sink_topics: tuple[str, ...]
    state_changelog_topics: tuple[InternalTopic, ...]

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)


@dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    """The topology checked against the cluster: `subtopologies` None when it cannot be
    configured; `problem` the status to report (the topology is ready when there is none)."""

    epoch: int
    metadata_hash: int
    subtopologies: Mapping[str, ConfiguredSubtopology] | None
    to_create: Mapping[str, InternalTopic]
    problem: tuple[Status, str] | None

    @property
    def ready(self) -> bool:
        return self.problem is None


def summarize(topics: Iterable[str]) -> str:
    """Kafka's summarizeTopics: the first three names and how many more."""
    names = list(topics)
    if not names:
        return "<none>"
    more = f" and {len(names) - 3} additional topics" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def configure(
    group_id: str,
    topology: rec.TopologyValue,
    topics: Mapping[str, TopicMetadata],
    metadata_hash: int,
) -> ConfiguredTopology:
    """Kafka's `InternalTopicManager.configureTopics` (the topology's internal topics and tasks
    against the cluster's `topics`). Raises KafkaError(STREAMS_INVALID_TOPOLOGY) for a topology
    that cannot work whatever the cluster holds."""
    try:
        missing = sorted({t for s in topology.subtopologies for t in s.source_topics} - set(topics))
        if missing:
            raise TopicConfigurationError(
                Status.MISSING_SOURCE_TOPICS, f"Source topics {summarize(missing)} are missing."
            )
        decided = _decide_partition_counts(topology, topics)

        def count(name: str) -> int:
            return topics[name].num_partitions if name in topics else decided[name]

        def internal(t: TopicInfo) -> InternalTopic:
            return InternalTopic(
                t.name,
                t.partitions or decided[t.name],
                t.replication_factor or None,
                tuple((c.key, c.value) for c in t.topic_configs),
            )

        configured = {
            s.subtopology_id: ConfiguredSubtopology(
                max(
                    count(t)
                    for t in (*s.source_topics, *(r.name for r in s.repartition_source_topics))
                ),
                tuple(s.source_topics),
                tuple(internal(t) for t in s.repartition_source_topics),
                tuple(s.repartition_sink_topics),
                tuple(internal(t) for t in s.state_changelog_topics),
            )
            for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id)
        }
        to_create: dict[str, InternalTopic] = {}
        for sub in configured.values():
            for t in (*sub.repartition_source_topics, *sub.state_changelog_topics):
                to_create[t.name] = t
        for name in sorted(required_topics(topology)):
            existing = topics.get(name)
            expected = to_create.pop(name, None) if existing is not None else None
            if (
                existing is not None
                and expected is not None
                and existing.num_partitions != expected.partitions
            ):
                raise TopicConfigurationError(
                    Status.INCORRECTLY_PARTITIONED_TOPICS,
                    f"Existing topic {name} has different number of partitions: expected "
                    f"{expected.partitions}, found {existing.num_partitions}",
                )
        problem = None
        if to_create:
            problem = (
                Status.MISSING_INTERNAL_TOPICS,
                f"Internal topics are missing: {summarize(to_create)}",
            )
            log.info(
                "streams group %s: valid topic configuration for topology epoch %d, but "
                "internal topics are missing: %s",
                group_id,
                topology.epoch,
                summarize(to_create),
            )
        return ConfiguredTopology(topology.epoch, metadata_hash, configured, to_create, problem)
    except TopicConfigurationError as e:
        log.warning(
            "streams group %s: topic configuration failed for topology epoch %d: %s",
            group_id,
            topology.epoch,
            e.message,
        )
        return ConfiguredTopology(topology.epoch, metadata_hash, None, {}, (e.status, e.message))


def _decide_partition_counts(  # noqa: C901 - Kafka's three steps, in turn
    topology: rec.TopologyValue, topics: Mapping[str, TopicMetadata]
) -> dict[str, int]:
    """Partition counts of the internal topics: repartition topics (Kafka's RepartitionTopics),
    co-partitioning (CopartitionedTopicsEnforcer), then changelogs (ChangelogTopics)."""
    decided: dict[str, int] = {}

    def count(name: str) -> int | None:
        if name in topics:
            return topics[name].num_partitions
        return decided.get(name)

    subs = topology.subtopologies
    # repartition topics: a fixed count, else the largest source count of the writing subtopology
    for s in subs:
        for t in s.repartition_source_topics:
            if t.partitions:
                decided[t.name] = t.partitions
    while True:
        needed = progress = False
        for s in subs:
            for sink in s.repartition_sink_topics:
                if sink in decided:
                    continue
                candidates = [decided.get(t.name) for t in s.repartition_source_topics]
                candidates += [count(t) for t in s.source_topics]
                known = [c for c in candidates if c is not None]
                if known:
                    decided[sink], progress = max(known), True
                else:
                    needed = True
        if not needed:
            break
        if not progress:
            raise invalid_topology(
                "Failed to compute number of partitions for all repartition topics. There may "
                "be loops in the topology that cannot be resolved."
            )
    for s in subs:
        if any(t.name not in decided for t in s.repartition_source_topics):
            raise invalid_topology(
                "Failed to compute number of partitions for all repartition topics, because a "
                "repartition source topic is never used as a sink topic."
            )
    # co-partition groups
    fixed = {t.name for s in subs for t in s.repartition_source_topics if t.partitions}
    flexible = {t.name for s in subs for t in s.repartition_source_topics if not t.partitions}
    for s in subs:
        for group in s.copartition_groups:
            names = {s.source_topics[i] for i in group.source_topics}
            names |= {s.repartition_source_topics[i].name for i in group.repartition_source_topics}
            decided.update(_copartition(names, fixed, flexible, _known(count)))
    # changelogs: as many partitions as the subtopology has tasks
    for s in subs:
        sources = [*s.source_topics, *(t.name for t in s.repartition_source_topics)]
        if not sources:
            raise invalid_topology(f"No source topics found for subtopology {s.subtopology_id}")
        tasks = max(_known(count)(t) for t in sources)
        for t in s.state_changelog_topics:
            decided[t.name] = tasks
    return decided


def _known(count: Callable[[str], int | None]) -> Callable[[str], int]:
    def get(name: str) -> int:
        value = count(name)
        if value is None:
            raise invalid_topology(f"Number of partitions is not set for topic: {name}")
        return value

    return get


def _copartition(
    names: set[str], fixed: set[str], flexible: set[str], count: Callable[[str], int]
) -> dict[str, int]:
    """Kafka's CopartitionedTopicsEnforcer.enforce: the repartition topics of a co-partition
    group get the group's partition count."""
    if not names:
        return {}
    repartition = {n: count(n) for n in names if n in fixed or n in flexible}
    others = {n: count(n) for n in names if n not in repartition}
    if set(repartition) == names:
        if fixed:
            first = count(next(iter(sorted(fixed))))
            if any(count(n) != first for n in fixed):
                raise TopicConfigurationError(
                    Status.INCORRECTLY_PARTITIONED_TOPICS,
                    "Following topics do not have the same number of partitions: "
                    f"[{_java_map(repartition)}]",
                )
            partitions = first
        else:
            partitions = max(repartition.values(), default=0)
            if partitions == 0:
                raise invalid_topology(
                    "All topics in the copartition group had undefined partition number: "
                    f"{sorted(repartition)}"
                )
    else:
        partitions = next(iter(others.values()))
        if any(p != partitions for p in others.values()):
            raise TopicConfigurationError(
                Status.INCORRECTLY_PARTITIONED_TOPICS,
                "Following topics do not have the same number of partitions: "
                f"[{_java_map(others)}]",
            )
    for name, p in repartition.items():
        if name in fixed and p != partitions:
            raise TopicConfigurationError(
                Status.INCORRECTLY_PARTITIONED_TOPICS,
                f"Number of partitions [{p}] of repartition topic [{name}] doesn't match number "
                f"of partitions [{partitions}] of the source topic.",
            )
    return dict.fromkeys(repartition, partitions)


def _java_map(values: Mapping[str, int]) -> str:
    """A sorted map as Java prints a TreeMap: {a=1, b=2}."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(values.items())) + "}"
