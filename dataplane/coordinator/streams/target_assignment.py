"""A streams group's target assignment (Kafka's streams TargetAssignmentBuilder): computed when a
heartbeat moves the group epoch past the assignment epoch, when members are fenced, or once the
group's initial rebalance delay is over, with the sticky assignor (`assignor`) from the members'
previous targets. Like the rest of the group's logic it only computes records; replaying them
changes the group.
"""

from __future__ import annotations

from collections.abc import Mapping

from dataplane.coordinator.streams import records as rec
from dataplane.coordinator.streams.assignor import MemberSpec, SubtopologySpec, assign
from dataplane.coordinator.streams.internal_topics import ConfiguredTopology
from dataplane.coordinator.streams.member import NO_TASKS, Member, TasksTuple
from dataplane.coordinator.streams.state import Settings, StreamsGroupState


def compute_assignment(
    group: StreamsGroupState,
    members: Mapping[str, Member],
    configured: ConfiguredTopology | None,
    settings: Settings,
    now_ms: int,
    group_epoch: int,
) -> tuple[dict[str, TasksTuple], list[rec.Record]]:
    """Kafka's streams TargetAssignmentBuilder: the new target of every member (from their
    previous targets, for stickiness) and the records of what changed."""
    specs = {
        m: MemberSpec(
            member.process_id,
            group.target.get(m, NO_TASKS).active,
            group.target.get(m, NO_TASKS).standby,
        )
        for m, member in members.items()
    }
    new: dict[str, TasksTuple] = {}
    if configured is not None and configured.ready and configured.subtopologies:
        subs = {
            s: SubtopologySpec(c.tasks, c.stateful) for s, c in configured.subtopologies.items()
        }
        for m, a in assign(specs, subs, settings.num_standby_replicas).items():
            new[m] = TasksTuple(a.active, a.standby, a.warmup)
    else:
        new = dict.fromkeys(specs, NO_TASKS)
    records = [
        rec.encode(rec.Key(rec.TARGET_ASSIGNMENT_MEMBER, group.group_id, m), t.value())
        for m, t in sorted(new.items())
        if group.target.get(m) != t
    ]
    records.append(
        rec.encode(
            rec.Key(rec.TARGET_ASSIGNMENT_METADATA, group.group_id),
            rec.TargetAssignmentMetadataValue(group_epoch, now_ms),
        )
    )
    return new, records


def delayed_assignment(
    group: StreamsGroupState, settings: Settings, now_ms: int
) -> list[rec.Record]:
    """Kafka's computeDelayedTargetAssignment: the target assignment once the initial
    rebalance delay is over. Nothing for an empty group or a topology not ready yet (the
    members' next heartbeats compute it once the topics are there)."""
    configured = group.configured
    if not group.members or group.group_epoch <= group.assignment_epoch:
        return []
    if configured is None or not configured.ready:
        return []
    return compute_assignment(
        group, group.members, configured, settings, now_ms, group.group_epoch
    )[1]
