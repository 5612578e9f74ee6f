"""A streams group's members as their records describe them (Kafka's StreamsGroupMember), and
their reconciliation towards the target assignment (Kafka's streams CurrentAssignmentBuilder).

A member owns three kinds of tasks: active (each with the epoch it was assigned at: an
OffsetCommit of an older epoch for that task's partitions is refused), standby and warm-up.
Reconciliation is the KIP-848 one applied to each kind: tasks leaving the member are first
revoked (UNREVOKED_TASKS, at its current epoch, until its heartbeat no longer reports them),
then the member moves to the target epoch with the tasks nobody else holds; a task still held
elsewhere comes later (UNRELEASED_TASKS). An active task is unreleased while any process holds
it as active, or this member's process holds it as standby or warm-up; a standby or warm-up
task while this member's process holds it in any role.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from dataplane.coordinator.streams import records as rec
from dataplane.protocol.errors import ErrorCode, KafkaError

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

Tasks = Mapping[str, frozenset[int]]
"""subtopology -> partitions; never an empty set."""
ActiveTasks = Mapping[str, Mapping[int, int]]
"""subtopology -> {partition: the epoch it was assigned at}."""
OwnedTasks = Sequence[tuple[str, Sequence[int]]]
"""What a heartbeat says the member owns: ((subtopology, partitions), ...)."""


_TaskIds = rec.CurrentMemberAssignmentValue.TaskIds


class MemberState(IntEnum):
    """The int8 of the CurrentMemberAssignment record."""

    STABLE = 0
    UNREVOKED_TASKS = 1
    UNRELEASED_TASKS = 2
    UNKNOWN = 127

    @classmethod
    def from_value(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class TasksTuple:
    """A target assignment (Kafka's TasksTuple)."""

    active: Tasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def value(self) -> rec.TargetAssignmentMemberValue:
        ids = rec.TargetAssignmentMemberValue.TaskIds

        def of(tasks: Tasks) -> tuple[rec.TargetAssignmentMemberValue.TaskIds, ...]:
            return tuple(ids(s, ps) for s, ps in rec.sorted_tasks(tasks))

        return rec.TargetAssignmentMemberValue(of(self.active), of(self.standby), of(self.warmup))

    @classmethod
    def from_value(cls, value: rec.TargetAssignmentMemberValue) -> TasksTuple:
        def tasks(ids: Sequence[rec.TargetAssignmentMemberValue.TaskIds]) -> Tasks:
            return {t.subtopology_id: frozenset(t.partitions) for t in ids if t.partitions}

        return cls(tasks(value.active_tasks), tasks(value.standby_tasks), tasks(value.warmup_tasks))


NO_TASKS = TasksTuple()


@dataclass(frozen=True, slots=True)
class Assigned:
    """A member's current tasks, or the tasks it must revoke (Kafka's TasksTupleWithEpochs)."""

    active: ActiveTasks = field(default_factory=dict)
    standby: Tasks = field(default_factory=dict)
    warmup: Tasks = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def active_tasks(self) -> Tasks:
        return {s: frozenset(ps) for s, ps in self.active.items()}

    def owns_any(self, owned: TasksTuple | None) -> bool:
        """Whether `owned` (None: unknown, so yes) still holds one of these tasks."""
        if owned is None:
            return True
        pairs = ((self.active_tasks(), owned.active), (self.standby, owned.standby))
        return any(
            mine.get(s, frozenset()) & theirs[s]
            for mine, theirs in (*pairs, (self.warmup, owned.warmup))
            for s in theirs
        )


NOTHING = Assigned()


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple[str, int] | None = None
    client_tags: tuple[tuple[str, str], ...] = ()
    assigned: Assigned = NOTHING
    pending_revocation: Assigned = NOTHING

    def metadata(self) -> tuple[object, ...]:
        """What the MemberMetadata record holds: a change of it is written and bumps the group
        epoch."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.topology_epoch,
            self.process_id,
            self.user_endpoint,
            self.client_tags,
        )

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch

    # -- records ----------------------------------------------------------------------------

    def metadata_value(self) -> rec.MemberMetadataValue:
        v = rec.MemberMetadataValue
        endpoint = None if self.user_endpoint is None else v.Endpoint(*self.user_endpoint)
        return v(
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.topology_epoch,
            self.process_id,
            endpoint,
            tuple(v.KeyValue(k, val) for k, val in self.client_tags),
        )

    def with_metadata(self, value: rec.MemberMetadataValue) -> Member:
        endpoint = value.user_endpoint
        return dataclasses.replace(
            self,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            topology_epoch=value.topology_epoch,
            process_id=value.process_id,
            user_endpoint=None if endpoint is None else (endpoint.host, endpoint.port),
            client_tags=tuple(sorted((kv.key, kv.value) for kv in value.client_tags)),
        )

    def assignment_value(self) -> rec.CurrentMemberAssignmentValue:
        v = rec.CurrentMemberAssignmentValue

        def active(tasks: ActiveTasks) -> tuple[_TaskIds, ...]:
            out = []
            for s in sorted(tasks):
                parts = tuple(sorted(tasks[s]))
                out.append(v.TaskIds(s, parts, tuple(tasks[s][p] for p in parts)))
            return tuple(out)

        def plain(tasks: Tasks) -> tuple[_TaskIds, ...]:
            return tuple(v.TaskIds(s, ps) for s, ps in rec.sorted_tasks(tasks))

        a, r = self.assigned, self.pending_revocation
        return v(
            self.member_epoch,
            self.previous_member_epoch,
            int(self.state),
            active(a.active),
            plain(a.standby),
            plain(a.warmup),
            active(r.active),
            plain(r.standby),
            plain(r.warmup),
        )

    def with_assignment(self, value: rec.CurrentMemberAssignmentValue) -> Member:
        def active(ids: Sequence[rec.CurrentMemberAssignmentValue.TaskIds]) -> ActiveTasks:
            out: dict[str, dict[int, int]] = {}
            for t in ids:
                epochs = t.assignment_epochs or (value.member_epoch,) * len(t.partitions)
                if t.partitions:
                    out[t.subtopology_id] = dict(zip(t.partitions, epochs, strict=False))
            return out

        def plain(ids: Sequence[rec.CurrentMemberAssignmentValue.TaskIds]) -> Tasks:
            return {t.subtopology_id: frozenset(t.partitions) for t in ids if t.partitions}

        return dataclasses.replace(
            self,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState.from_value(value.state),
            assigned=Assigned(
                active(value.active_tasks), plain(value.standby_tasks), plain(value.warmup_tasks)
            ),
            pending_revocation=Assigned(
                active(value.active_tasks_pending_revocation),
                plain(value.standby_tasks_pending_revocation),
                plain(value.warmup_tasks_pending_revocation),
            ),
        )


# -- reconciliation ----------------------------------------------------------------------------

Holders = Callable[[str, int], tuple[str | None, frozenset[str], frozenset[str]]]
"""(subtopology, partition) -> (the process holding it active, the processes holding it as a
standby, as a warm-up), counting tasks pending revocation."""


def reconcile(
    member: Member,
    target_epoch: int,
    target: TasksTuple,
    owned: TasksTuple | None,
    holders: Holders,
) -> Member:
    """One step of Kafka's streams `CurrentAssignmentBuilder`: the member's next state towards
    its target. `owned` is what its heartbeat reports (None: not sent)."""
    if member.state == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, owned, holders)
        return member
    if member.state == MemberState.UNREVOKED_TASKS:
        if member.pending_revocation.owns_any(owned):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, owned, holders)
    if member.state == MemberState.UNRELEASED_TASKS:
        return _next(member, member.member_epoch, target_epoch, target, owned, holders)
    if owned is None or not owned.is_empty():
        raise KafkaError(
            ErrorCode.fenced_member_epoch,
            "The streams group member is in a unknown state. The member must abandon all its "
            "tasks and rejoin.",
        )
    return _next(member, target_epoch, target_epoch, target, owned, holders)


def _next(
    member: Member,
    member_epoch: int,
    target_epoch: int,
    target: TasksTuple,
    owned: TasksTuple | None,
    holders: Holders,
) -> Member:
    process = member.process_id
    unreleased = False

    def split(
        current: Mapping[str, object], want: Tasks, is_unreleased: Callable[[str, int], bool]
    ) -> tuple[dict[str, set[int]], dict[str, set[int]], dict[str, set[int]]]:
        nonlocal unreleased
        keep: dict[str, set[int]] = {}
        revoke: dict[str, set[int]] = {}
        add: dict[str, set[int]] = {}
        for s in sorted(set(current) | set(want)):
            have = set(current.get(s, ()))  # type: ignore[call-overload]
            wanted = want.get(s, frozenset())
            if k := have & wanted:
                keep[s] = k
            if r := have - wanted:
                revoke[s] = r
            new = set()
            for p in wanted - have:
                if is_unreleased(s, p):
                    unreleased = True
                else:
                    new.add(p)
            if new:
                add[s] = new
        return keep, revoke, add

    def active_unreleased(s: str, p: int) -> bool:
        active, standby, warmup = holders(s, p)
        return active is not None or process in standby or process in warmup

    def other_unreleased(s: str, p: int) -> bool:
        active, standby, warmup = holders(s, p)
        return active == process or process in standby or process in warmup

    cur = member.assigned
    a_keep, a_revoke, a_add = split(cur.active, target.active, active_unreleased)
    s_keep, s_revoke, s_add = split(cur.standby, target.standby, other_unreleased)
    w_keep, w_revoke, w_add = split(cur.warmup, target.warmup, other_unreleased)

    def with_epochs(tasks: dict[str, set[int]]) -> ActiveTasks:
        """The tasks with the epochs the member got them at."""
        return {s: {p: cur.active[s][p] for p in ps} for s, ps in tasks.items()}

    def frozen(tasks: dict[str, set[int]]) -> Tasks:
        return {s: frozenset(ps) for s, ps in tasks.items()}

    kept = Assigned(with_epochs(a_keep), frozen(s_keep), frozen(w_keep))
    revoking = Assigned(with_epochs(a_revoke), frozen(s_revoke), frozen(w_revoke))
    if not revoking.is_empty() and revoking.owns_any(owned):
        return dataclasses.replace(
            member,
            state=MemberState.UNREVOKED_TASKS,
            member_epoch=member_epoch,
            previous_member_epoch=member.member_epoch,
            assigned=kept,
            pending_revocation=revoking,
        )
    state = MemberState.UNRELEASED_TASKS if unreleased else MemberState.STABLE
    assigned = kept
    if a_add or s_add or w_add:
        active = {s: dict(ps) for s, ps in kept.active.items()}
        for s, ps in a_add.items():
            active.setdefault(s, {}).update(dict.fromkeys(ps, target_epoch))
        assigned = Assigned(active, _merge(kept.standby, s_add), _merge(kept.warmup, w_add))
    return dataclasses.replace(
        member,
        state=state,
        member_epoch=target_epoch,
        previous_member_epoch=member.member_epoch,
        assigned=assigned,
        pending_revocation=NOTHING,
    )


def _merge(kept: Tasks, added: Mapping[str, set[int]]) -> Tasks:
    return {s: kept.get(s, frozenset()) | added.get(s, set()) for s in {*kept, *added}}
