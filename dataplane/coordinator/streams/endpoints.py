"""Which member serves which source partitions, for Interactive Queries: the heartbeat answer's
PartitionsByUserEndpoint (Kafka's EndpointToPartitionsManager), sent when the member's
endpoint information epoch is behind the group's.
"""

from __future__ import annotations

from collections.abc import Mapping

from dataplane.coordinator.streams.internal_topics import ConfiguredTopology
from dataplane.coordinator.streams.member import Member, Tasks
from dataplane.coordinator.streams.requests import EndpointPartitions


def partitions_by_endpoint(
    members: Mapping[str, Member], member: Member, configured: ConfiguredTopology
) -> tuple[EndpointPartitions, ...]:
    """Kafka's buildEndpointToPartitions: per member with an endpoint (`members`, with `member`
    as it is after this heartbeat), the source partitions of its active and of its standby and
    warm-up tasks."""
    subs = configured.subtopologies or {}
    everyone = {**members, member.member_id: member}

    def partitions(tasks: Tasks) -> tuple[tuple[str, tuple[int, ...]], ...]:
        by_topic: dict[str, set[int]] = {}
        for s, parts in tasks.items():
            sub = subs.get(s)
            if sub is None:
                continue
            for t in (*sub.source_topics, *(r.name for r in sub.repartition_source_topics)):
                by_topic.setdefault(t, set()).update(parts)
        return tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))

    out = []
    for m in sorted(everyone.values(), key=lambda m: m.member_id):
        if m.user_endpoint is None:
            continue
        standby = {**m.assigned.standby}
        for s, ps in m.assigned.warmup.items():
            standby[s] = standby.get(s, frozenset()) | ps
        out.append(
            EndpointPartitions(
                m.user_endpoint, partitions(m.assigned.active_tasks()), partitions(standby)
            )
        )
    return tuple(out)
