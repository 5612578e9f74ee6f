"""A streams group's topology (KIP-1071): what the first member sends when it joins
(StreamsGroupHeartbeat's Topology), checked as Kafka checks it, and kept as the
StreamsGroupTopology record's value (`rec.TopologyValue`): subtopologies with their source
topics, the repartition topics they read and write and their state changelog topics. How it is
configured against the cluster's topics is `internal_topics`.
"""

from __future__ import annotations

from typing import Any

from dataplane.coordinator.streams import records as rec
from dataplane.protocol.errors import ErrorCode, KafkaError

Subtopology = rec.TopologyValue.Subtopology
TopicInfo = rec.TopologyValue.Subtopology.TopicInfo


def invalid_topology(message: str) -> KafkaError:
    return KafkaError(ErrorCode.streams_invalid_topology, message)


def from_request(topology: Any) -> rec.TopologyValue:
    """The StreamsGroupTopology record value of a heartbeat's Topology (Kafka's
    `convertToStreamsGroupTopologyRecord`)."""

    def info(t: Any) -> TopicInfo:
        configs = tuple(TopicInfo.TopicConfig(c.key, c.value) for c in t.topic_configs)
        return TopicInfo(t.name, int(t.partitions), int(t.replication_factor), configs)

    return rec.TopologyValue(
        int(topology.epoch),
        tuple(
            Subtopology(
                s.subtopology_id,
                tuple(s.source_topics),
                tuple(s.source_topic_regex),
                tuple(info(t) for t in s.state_changelog_topics),
                tuple(s.repartition_sink_topics),
                tuple(info(t) for t in s.repartition_source_topics),
                tuple(
                    Subtopology.CopartitionGroup(
                        tuple(int(i) for i in g.source_topics),
                        tuple(int(i) for i in g.source_topic_regex),
                        tuple(int(i) for i in g.repartition_source_topics),
                    )
                    for g in s.copartition_groups
                ),
            )
            for s in topology.subtopologies
        ),
    )


def validate_request_topology(topology: Any) -> None:
    """Kafka's `throwIfInvalidTopology`: changelog topics have no partition count of their own."""
    for s in topology.subtopologies:
        for t in s.state_changelog_topics:
            if t.partitions != 0:
                raise invalid_topology(
                    f"Changelog topic {t.name} must have an undefined partition count, but it "
                    f"is set to {t.partitions}."
                )


def required_topics(topology: rec.TopologyValue) -> set[str]:
    """Every topic the topology reads or writes (Kafka's `StreamsTopology.requiredTopics`)."""
    out: set[str] = set()
    for s in topology.subtopologies:
        out.update(s.source_topics, s.repartition_sink_topics)
        out.update(t.name for t in (*s.repartition_source_topics, *s.state_changelog_topics))
    return out


def source_topic_subtopologies(topology: rec.TopologyValue) -> dict[str, str]:
    """Source and repartition source topic -> the subtopology reading it."""
    out: dict[str, str] = {}
    for s in topology.subtopologies:
        for name in (*s.source_topics, *(t.name for t in s.repartition_source_topics)):
            out[name] = s.subtopology_id
    return out
