"""Streams groups (KIP-1071): heartbeat, leaving and fencing, as Kafka 4.4's group coordinator
(`GroupMetadataManager.streamsGroupHeartbeat` on a `StreamsGroup`).

Pure logic, no I/O and no clock of its own, driven like a KIP-848 consumer group (see
consumer/group.py): an operation computes `(response, records)` without changing the group; the
caller appends the records to `__consumer_offsets` and applies them with `replay` (the state the
records build: `state.StreamsGroupState`), exactly as on load. `adapter.StreamsGroupAdapter` is
that caller.

A heartbeat: (1) creates or updates the member (a MemberMetadata record bumps the group
epoch); (2) initializes the group's topology from the first member's (StreamsGroupTopology
record; a different topology of the same epoch is INVALID_REQUEST, a member with an older one
gets the STALE_TOPOLOGY status); (3) configures the topology against the cluster's topics
(`internal_topics.configure`): a change of the required topics' metadata hash, of the
validated topology epoch or of the assignment configs (num.standby.replicas) bumps the group
epoch; (4) when the group epoch is past the assignment epoch, computes a new target
assignment (`target_assignment`), unless the group's initial rebalance delay still runs
(ASSIGNMENT_DELAYED); (5) reconciles the member towards its target (`member.reconcile`).
Tasks are sent back when the member joins or its tasks changed, with the source partitions of
every member's endpoint (`endpoints`) when the member's endpoint epoch is behind; the statuses
say why there are none yet (missing source or internal topics, incorrectly partitioned topics,
a requested shutdown).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from dataplane.coordinator.assignors import TopicMetadata
from dataplane.coordinator.deadlines import MemberDeadlines
from dataplane.coordinator.streams import records as rec
from dataplane.coordinator.streams import topology as topo
from dataplane.coordinator.streams.endpoints import partitions_by_endpoint
from dataplane.coordinator.streams.internal_topics import (
    ConfiguredSubtopology,
    InternalTopic,
    configure,
)
from dataplane.coordinator.streams.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    NO_TASKS,
    Member,
    MemberState,
    Tasks,
    TasksTuple,
    reconcile,
)
from dataplane.coordinator.streams.requests import (
    HeartbeatRequest,
    HeartbeatResponse,
    HeartbeatResult,
    Status,
    TaskOffsets,
    invalid_request,
)
from dataplane.coordinator.streams.state import (
    MEMBER_RECORDS,
    Settings,
    StreamsGroupConfig,
    StreamsGroupState,
    metadata_value,
)
from dataplane.coordinator.streams.target_assignment import compute_assignment
from dataplane.coordinator.subscriptions import metadata_hash
from dataplane.protocol.errors import ErrorCode, KafkaError

NUM_STANDBY_REPLICAS = "num.standby.replicas"
# What Kafka 4.4's heartbeat answers carry: the lag a member may have on a task's changelog to be
# given the task as active, and how often members report their task offsets.
ACCEPTABLE_RECOVERY_LAG = 10_000
TASK_OFFSET_INTERVAL_MS = 60_000


class StreamsGroup(StreamsGroupState):
    """One streams group. Hard state (`StreamsGroupState`) changes only through `replay`; the
    rest (deadlines, the settings of the last heartbeat, the endpoint epoch, a shutdown
    request, the reported task offsets) is soft state."""

    def __init__(self, group_id: str, config: StreamsGroupConfig | None = None) -> None:
        super().__init__(group_id, config or StreamsGroupConfig())
        self.settings: Settings | None = None  # of the last heartbeat (for fencing's assignment)
        self.endpoint_information_epoch = 0
        self.shutdown_requested_by: str | None = None
        # member -> (task offsets, task end offsets) last reported (StreamsGroupDescribe's)
        self.task_offsets: dict[str, tuple[TaskOffsets, TaskOffsets]] = {}
        self.deadlines = MemberDeadlines()

    # -- deadlines (soft state) -----------------------------------------------------------------

    def on_loaded(self, now_ms: int) -> None:
        for m in self.members.values():
            self.deadlines.session(m.member_id, now_ms + self.config.session_timeout_ms)
            if m.state == MemberState.UNREVOKED_TASKS:
                self.deadlines.revoking(
                    m.member_id, m.member_epoch, now_ms + m.rebalance_timeout_ms
                )

    def _prune_deadlines(self) -> None:
        """The task offsets of a member gone go with its deadlines."""
        for m in self.deadlines.prune(self.members):
            self.task_offsets.pop(m, None)

    def next_deadline_ms(self) -> int | None:
        self._prune_deadlines()
        return self.deadlines.next_ms(self.members)

    def expired_members(self, now_ms: int) -> list[str]:
        self._prune_deadlines()
        return self.deadlines.expired(self.members, now_ms)

    def postpone_expiry(self, member_id: str, deadline_ms: int) -> None:
        self.deadlines.postpone(self.members, member_id, deadline_ms)

    # -- heartbeat ------------------------------------------------------------------------------

    def heartbeat(  # noqa: C901 - Kafka's streamsGroupHeartbeat, step by step
        self,
        req: HeartbeatRequest,
        now_ms: int,
        topics: Mapping[str, TopicMetadata],
        settings: Settings,
        *,
        assignment_delayed: bool = False,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        """A StreamsGroupHeartbeat (validated with `validate_heartbeat`): the response, the
        records to write and replay, the internal topics to create. `assignment_delayed`: the
        group's initial rebalance delay runs. Raises KafkaError for an error response."""
        self.settings = settings
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req, now_ms)
        joining = req.member_epoch == 0
        exists = self.has_records
        if not joining and not exists:
            raise KafkaError(
                ErrorCode.group_id_not_found, f"Streams group {self.group_id} not found."
            )
        if joining and len(self.members) >= self.config.max_size:
            raise KafkaError(
                ErrorCode.group_max_size_reached,
                "The streams group has reached its maximum capacity of "
                f"{self.config.max_size} members.",
            )
        owned = req.owned()
        records: list[rec.Record] = []
        statuses: list[tuple[int, str]] = []
        gid, mid = self.group_id, req.member_id
        replaced = None
        if req.instance_id is None:
            member = self.members.get(mid) or Member(mid) if joining else self._member(mid)
            self._check_epoch(member, req.member_epoch, owned)
        else:
            member, replaced = self._static_member(req, joining, owned, records)

        # 1. the member
        updated = dataclasses.replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                req.rebalance_timeout_ms
                if req.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            topology_epoch=(
                req.topology.epoch if req.topology is not None else member.topology_epoch
            ),
            client_id=client_id,
            client_host=client_host,
            process_id=req.process_id if req.process_id is not None else member.process_id,
            client_tags=req.client_tags if req.client_tags is not None else member.client_tags,
            user_endpoint=(
                req.user_endpoint if req.user_endpoint is not None else member.user_endpoint
            ),
        )
        bump = False
        if updated.metadata() != member.metadata() or (mid not in self.members and not replaced):
            value = updated.metadata_value()
            records.append(rec.encode(rec.Key(rec.MEMBER_METADATA, gid, mid), value))
            bump = True

        # 2. the topology
        topology = self._update_topology(req, records)
        if updated.topology_epoch < topology.epoch:
            statuses.append(
                (
                    Status.STALE_TOPOLOGY,
                    f"The member's topology epoch {updated.topology_epoch} is behind the "
                    f"group's topology epoch {topology.epoch}.",
                )
            )

        # 3. the topology against the cluster's topics
        new_hash = metadata_hash(topo.required_topics(topology), topics)
        if new_hash != self.metadata_hash:
            bump = True
        configured = self.configured
        if (
            configured is None
            or configured.epoch != topology.epoch
            or configured.metadata_hash != new_hash
        ):
            configured = configure(gid, topology, topics, new_hash)
            self.configured = configured
        validated = topology.epoch if configured.ready else -1
        if configured.ready and configured.subtopologies is not None:
            for reported in (req.active_tasks, req.standby_tasks, req.warmup_tasks):
                _check_tasks(configured.subtopologies, reported)
        if validated != self.validated_topology_epoch:
            bump = True
        configs = {NUM_STANDBY_REPLICAS: str(settings.num_standby_replicas)}
        if configs != self.last_assignment_configs:
            bump = True

        group_epoch = self.group_epoch
        if bump:
            group_epoch += 1
            records.append(
                rec.encode(
                    rec.Key(rec.GROUP_METADATA, gid),
                    metadata_value(group_epoch, new_hash, validated, configs),
                )
            )

        # 4. the target assignment
        members = {**self.members, mid: updated}
        if replaced is not None:
            members.pop(replaced.member_id, None)
        if assignment_delayed:
            statuses.append(
                (
                    Status.ASSIGNMENT_DELAYED,
                    "Assignment delayed due to the configured initial rebalance delay.",
                )
            )
            if bump:
                # As Kafka 4.4: meanwhile the members get no tasks at this epoch, and the group
                # epoch moves on for the assignment once the delay is over.
                records += compute_assignment(self, members, None, settings, now_ms, group_epoch)[1]
                records.append(
                    rec.encode(
                        rec.Key(rec.GROUP_METADATA, gid),
                        metadata_value(group_epoch + 1, new_hash, validated, configs),
                    )
                )
                target_epoch, target = group_epoch, NO_TASKS
            else:
                target_epoch, target = self.assignment_epoch, self.target.get(mid, NO_TASKS)
        elif self.assignment_epoch >= group_epoch:
            target_epoch, target = self.assignment_epoch, self.target.get(mid, NO_TASKS)
        else:
            assignment = compute_assignment(
                self, members, configured, settings, now_ms, group_epoch
            )
            records += assignment[1]
            target_epoch, target = group_epoch, assignment[0].get(mid, NO_TASKS)

        # 5. reconciliation
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            holders = self._holders()

            def held(s: str, p: int) -> tuple[str | None, frozenset[str], frozenset[str]]:
                active, standby, warmup = holders.get((s, p), (None, set(), set()))
                return active, frozenset(standby), frozenset(warmup)

            reconciled = reconcile(updated, target_epoch, target, owned, held)
            if reconciled != updated:
                records.append(
                    rec.encode(
                        rec.Key(rec.CURRENT_MEMBER_ASSIGNMENT, gid, mid),
                        reconciled.assignment_value(),
                    )
                )
        if reconciled.state == MemberState.UNREVOKED_TASKS:
            self.deadlines.revoking(
                mid, reconciled.member_epoch, now_ms + reconciled.rebalance_timeout_ms
            )
        else:
            self.deadlines.revoked(mid)
        self.deadlines.session(mid, now_ms + settings.session_timeout_ms)
        if req.shutdown_application and self.shutdown_requested_by is None:
            self.shutdown_requested_by = mid
        if req.task_offsets is not None or req.task_end_offsets is not None:
            offsets, end_offsets = self.task_offsets.get(mid, ((), ()))
            self.task_offsets[mid] = (
                offsets if req.task_offsets is None else req.task_offsets,
                end_offsets if req.task_end_offsets is None else req.task_end_offsets,
            )

        # the response
        tasks: TasksTuple | None = None
        if joining or reconciled.assigned != member.assigned:
            tasks = TasksTuple(
                reconciled.assigned.active_tasks(),
                reconciled.assigned.standby,
                reconciled.assigned.warmup,
            )
            if reconciled.user_endpoint is not None:
                self.endpoint_information_epoch += 1
        endpoints = None
        if self.endpoint_information_epoch != req.endpoint_information_epoch:
            endpoints = partitions_by_endpoint(self.members, reconciled, configured)
        to_create: tuple[InternalTopic, ...] = ()
        if configured.problem is not None:
            statuses.append((configured.problem[0], configured.problem[1]))
            to_create = tuple(configured.to_create.values())
        if self.shutdown_requested_by is not None:
            statuses.append(
                (
                    Status.SHUTDOWN_APPLICATION,
                    f"Streams group member {self.shutdown_requested_by} encountered a fatal "
                    "error and requested a shutdown for the entire application.",
                )
            )
        response = HeartbeatResponse(
            member_id=mid,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            tasks=tasks,
            status=tuple((int(c), d) for c, d in statuses),
            endpoint_information_epoch=self.endpoint_information_epoch if exists else 0,
            partitions_by_user_endpoint=endpoints,
            acceptable_recovery_lag=ACCEPTABLE_RECOVERY_LAG,
            task_offset_interval_ms=TASK_OFFSET_INTERVAL_MS,
        )
        return HeartbeatResult(response, records, to_create)

    def _check_epoch(self, member: Member, received: int, owned: TasksTuple | None) -> None:
        """Kafka's throwIfStreamsGroupMemberEpochIsInvalid."""
        if received == 0:
            return
        if received > member.member_epoch:
            raise KafkaError(
                ErrorCode.fenced_member_epoch,
                f"The streams group member has a greater member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )
        if received < member.member_epoch and (
            received != member.previous_member_epoch or not _within(owned, member)
        ):
            raise KafkaError(
                ErrorCode.fenced_member_epoch,
                f"The streams group member has a smaller member epoch ({received}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )

    def _static_member(
        self,
        req: HeartbeatRequest,
        joining: bool,
        owned: TasksTuple | None,
        records: list[rec.Record],
    ) -> tuple[Member, Member | None]:
        """The member of a static member's heartbeat, and the member it replaces: a new member
        id of an instance that left for a while (epoch -2) takes over its tasks (Kafka's
        getOrMaybeCreateStaticStreamsGroupMember)."""
        instance, mid = req.instance_id, req.member_id
        existing = self._static_owner(instance)
        if joining:
            if existing is None:
                return self.members.get(mid) or Member(mid), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise KafkaError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {mid} with instance id {instance} cannot join the group "
                    f"because the instance id is owned by {existing.member_id} member.",
                )
            new = dataclasses.replace(
                existing, member_id=mid, member_epoch=0, previous_member_epoch=0
            )
            gid, old = self.group_id, existing.member_id
            records += [rec.encode(rec.Key(kind, gid, old), None) for kind in MEMBER_RECORDS]
            records.append(rec.encode(rec.Key(rec.MEMBER_METADATA, gid, mid), new.metadata_value()))
            target = self.target.get(old, NO_TASKS)
            records.append(
                rec.encode(rec.Key(rec.TARGET_ASSIGNMENT_MEMBER, gid, mid), target.value())
            )
            records.append(
                rec.encode(rec.Key(rec.CURRENT_MEMBER_ASSIGNMENT, gid, mid), new.assignment_value())
            )
            return new, existing
        if existing is None:
            raise KafkaError(ErrorCode.unknown_member_id, f"Instance id {instance} is unknown.")
        if existing.member_id != mid:
            raise KafkaError(
                ErrorCode.fenced_instance_id,
                f"Static member {mid} with instance id {instance} was fenced by member "
                f"{existing.member_id}.",
            )
        self._check_epoch(existing, req.member_epoch, owned)
        return existing, None

    def _update_topology(
        self, req: HeartbeatRequest, records: list[rec.Record]
    ) -> rec.TopologyValue:
        """Kafka's maybeUpdateTopology."""
        if req.topology is None:
            if self.topology is None:
                raise invalid_request("The group has no topology and the heartbeat sent none.")
            return self.topology
        sent = topo.from_request(req.topology)
        if self.topology is None:
            records.append(rec.encode(rec.Key(rec.TOPOLOGY, self.group_id), sent))
            return sent
        if self.topology.epoch > sent.epoch:
            return self.topology
        if _comparable(self.topology) != _comparable(sent):
            raise invalid_request("Topology updates are not supported yet.")
        return self.topology

    # -- leaving and fencing --------------------------------------------------------------------

    def _leave(self, req: HeartbeatRequest, now_ms: int) -> HeartbeatResult:
        if not self.has_records:
            raise KafkaError(
                ErrorCode.group_id_not_found, f"Streams group {self.group_id} not found."
            )
        if req.shutdown_application and self.shutdown_requested_by is None:
            self.shutdown_requested_by = req.member_id
        response = HeartbeatResponse(req.member_id, req.member_epoch)
        if req.instance_id is None:
            self._member(req.member_id)
            return HeartbeatResult(response, self.fence_members([req.member_id], now_ms, {}))
        member = self._static_owner(req.instance_id)
        if member is None:
            raise KafkaError(
                ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown."
            )
        if member.member_id != req.member_id:
            raise KafkaError(
                ErrorCode.fenced_instance_id,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced "
                f"by member {member.member_id}.",
            )
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return HeartbeatResult(response, self.fence_members([member.member_id], now_ms, {}))
        # a temporary leave: the member keeps its tasks until its session expires
        leaving = dataclasses.replace(
            member,
            member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            pending_revocation=Member("").pending_revocation,
        )
        key = rec.Key(rec.CURRENT_MEMBER_ASSIGNMENT, self.group_id, member.member_id)
        return HeartbeatResult(response, [rec.encode(key, leaving.assignment_value())])

    def fence_members(
        self, member_ids: Sequence[str], now_ms: int, topics: Mapping[str, TopicMetadata]
    ) -> list[rec.Record]:
        """The records removing members (they left, or their session or rebalance timeout
        expired), bumping the group epoch once and, as Kafka 4.4, giving the others their
        new target assignment at once (Kafka's streamsGroupFenceMember)."""
        leaving = [self._member(m).member_id for m in dict.fromkeys(member_ids)]
        gid, epoch = self.group_id, self.group_epoch + 1
        records = [
            rec.encode(rec.Key(kind, gid, member_id), None)
            for member_id in leaving
            for kind in MEMBER_RECORDS
        ]
        records.append(
            rec.encode(
                rec.Key(rec.GROUP_METADATA, gid),
                metadata_value(
                    epoch,
                    self.metadata_hash,
                    self.validated_topology_epoch,
                    self.last_assignment_configs,
                ),
            )
        )
        others = {m: member for m, member in self.members.items() if m not in leaving}
        settings = self.settings or self.config.settings()
        records += compute_assignment(self, others, self.configured, settings, now_ms, epoch)[1]
        for member_id in leaving:
            self.deadlines.forget(member_id)
        return records


def _comparable(topology: rec.TopologyValue) -> tuple[object, ...]:
    """A topology without its order of subtopologies (Kafka keeps them in a map)."""
    return (topology.epoch, tuple(sorted(topology.subtopologies, key=lambda s: s.subtopology_id)))


def _within(owned: TasksTuple | None, member: Member) -> bool:
    """Whether the reported tasks are all among the member's (Kafka's
    areOwnedTasksContainedInAssignedTasks, for each kind)."""
    if owned is None:
        return False
    mine = member.assigned
    pairs = (
        (owned.active, mine.active_tasks()),
        (owned.standby, mine.standby),
        (owned.warmup, mine.warmup),
    )
    for reported, assigned in pairs:
        for s, parts in reported.items():
            if s not in assigned or not parts <= assigned[s]:
                return False
    return True


def _check_tasks(subtopologies: Mapping[str, ConfiguredSubtopology], tasks: Tasks | None) -> None:
    """Kafka's throwIfRequestContainsInvalidTasks."""
    for s, parts in (tasks or {}).items():
        sub = subtopologies.get(s)
        if sub is None:
            raise invalid_request(f"Subtopology {s} does not exist in the topology.")
        for p in sorted(parts):
            if p < 0 or p >= sub.tasks:
                raise invalid_request(
                    f"Task {p} for subtopology {s} is invalid. Number of tasks for this "
                    f"subtopology: {sub.tasks}"
                )
