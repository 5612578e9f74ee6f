"""Kafka's sticky task assignor of streams groups (`StickyTaskAssignor`, group.streams.assignors'
"sticky"): every task of every subtopology goes to one member as an active task, and each task
of a stateful subtopology to `num_standby_replicas` more members of *other* processes as standby
tasks.

Load is counted per process (a Streams instance; its stream threads are its members): an
active task stays with the member that had it when that member is under its quota, else goes to
a member holding it as a standby, else to the least loaded process (and its least loaded
member). Standbys stay where they were, or with the task's previous active owner, else go to
the least loaded process that has no copy of the task. A standby that fits nowhere is logged
and left out, as Kafka does. Warm-up tasks are never assigned (as Kafka 4.3/4.4's sticky
assignor). Ties are broken by process and member id, so the result is deterministic.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

log = logging.getLogger("rafka.coordinator.streams_group")

TaskId = tuple[str, int]  # (subtopology id, partition)


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """A member as the assignor sees it: its process and its previous target assignment."""

    process_id: str
    active: Mapping[str, frozenset[int]]
    standby: Mapping[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class SubtopologySpec:
    tasks: int
    stateful: bool


@dataclass
class _Process:
    process_id: str
    counts: dict[str, int] = field(default_factory=dict)  # member -> tasks
    active: dict[str, set[TaskId]] = field(default_factory=dict)
    standby: dict[str, set[TaskId]] = field(default_factory=dict)
    tasks: set[TaskId] = field(default_factory=set)

    @property
    def load(self) -> float:
        """Tasks per member (Kafka's ProcessState.load: task count / capacity)."""
        return sum(self.counts.values()) / len(self.counts) if self.counts else -1.0

    def add(self, member: str, task: TaskId, active: bool) -> int:
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member, set()).add(task)
        self.counts[member] += 1
        return self.counts[member]

    def add_to_least_loaded(self, task: TaskId, active: bool) -> int:
        member = min(self.counts, key=lambda m: (self.counts[m], m))
        return self.add(member, task, active)


class _Assignment:
    def __init__(
        self,
        members: Mapping[str, MemberSpec],
        subtopologies: Mapping[str, SubtopologySpec],
        standby_replicas: int,
    ) -> None:
        self.standby_replicas = standby_replicas
        self.processes: dict[str, _Process] = {}
        self.prev_active: dict[TaskId, tuple[str, str]] = {}  # task -> (process, member)
        self.prev_standby: dict[TaskId, list[tuple[str, str]]] = {}
        for member_id in sorted(members):
            spec = members[member_id]
            process = self.processes.setdefault(spec.process_id, _Process(spec.process_id))
            process.counts[member_id] = 0
            owner = (spec.process_id, member_id)
            for sub, parts in spec.active.items():
                for p in parts:
                    self.prev_active[(sub, p)] = owner
            for sub, parts in spec.standby.items():
                for p in parts:
                    self.prev_standby.setdefault((sub, p), []).append(owner)
        total_active = sum(s.tasks for s in subtopologies.values())
        total = total_active + sum(
            s.tasks * standby_replicas for s in subtopologies.values() if s.stateful
        )
        self.active_left, self.active_members = total_active, len(members)
        self.total_left, self.total_members = total, len(members)
        self.active_quota = _per_member(total_active, len(members))
        self.total_quota = _per_member(total, len(members))

    def _added_active(self, count: int) -> None:
        if count == self.active_quota:
            self.active_members -= 1
            self.active_left -= count
            self.active_quota = _per_member(self.active_left, self.active_members)
        self._added(count)

    def _added(self, count: int) -> None:
        if count == self.total_quota:
            self.total_members -= 1
            self.total_left -= count
            self.total_quota = _per_member(self.total_left, self.total_members)

    def _least_loaded_prev(
        self, owners: list[tuple[str, str]] | None, task: TaskId | None
    ) -> tuple[str, str] | None:
        """Kafka's findPrevMemberWithLeastLoad."""
        if not owners:
            return None
        candidate = owners[0]
        process = self.processes[candidate[0]]
        best_load, best_member_load = process.load, process.counts[candidate[1]]
        for owner in owners[1:]:
            other = self.processes[owner[0]]
            load = other.load
            if load < best_load and (task is None or task not in other.tasks):
                member_load = other.counts[owner[1]]
                if member_load < best_member_load:
                    candidate, best_load, best_member_load = owner, load, member_load
        if task is None or task not in self.processes[candidate[0]].tasks:
            return candidate
        return None

    def assign_active(self, tasks: list[TaskId]) -> None:
        left = []
        for task in sorted(tasks, key=lambda t: (t[1], t[0])):
            owner = self.prev_active.get(task)
            if owner and self.processes[owner[0]].counts[owner[1]] < self.active_quota:
                self._added_active(self.processes[owner[0]].add(owner[1], task, True))
            else:
                left.append(task)
        rest = []
        for task in left:
            owner = self._least_loaded_prev(self.prev_standby.get(task), None)
            if owner and self.processes[owner[0]].counts[owner[1]] < self.active_quota:
                self._added_active(self.processes[owner[0]].add(owner[1], task, True))
            else:
                rest.append(task)
        heap = [(p.load, pid) for pid, p in self.processes.items()]
        heapq.heapify(heap)
        for task in sorted(rest):
            _, pid = heapq.heappop(heap)
            process = self.processes[pid]
            self._added_active(process.add_to_least_loaded(task, True))
            heapq.heappush(heap, (process.load, pid))

    def assign_standby(self, tasks: list[TaskId]) -> None:
        to_least_loaded: list[tuple[TaskId, int]] = []
        for task in sorted(tasks, key=lambda t: (t[1], t[0]), reverse=True):
            for i in range(self.standby_replicas):
                owner = self.prev_active.get(task)
                if owner is not None:
                    process = self.processes[owner[0]]
                    if task not in process.tasks and process.counts[owner[1]] < self.total_quota:
                        self._added(process.add(owner[1], task, False))
                        continue
                prev = self._least_loaded_prev(self.prev_standby.get(task), task)
                if prev is not None:
                    process = self.processes[prev[0]]
                    if process.counts[prev[1]] < self.total_quota:
                        self._added(process.add(prev[1], task, False))
                        continue
                to_least_loaded.append((task, self.standby_replicas - i))
                break
        for task, remaining in sorted(to_least_loaded, reverse=True):
            for i in range(remaining):
                if not self._standby_to_least_loaded(task):
                    log.warning(
                        "Unable to assign %d of %d standby tasks for task [%s_%d]. There is "
                        "not enough available capacity. You should increase the number of "
                        "threads and/or application instances to maintain the requested "
                        "number of standby replicas.",
                        self.standby_replicas - i,
                        self.standby_replicas,
                        task[0],
                        task[1],
                    )
                    break

    def _standby_to_least_loaded(self, task: TaskId) -> bool:
        """Kafka's assignStandbyToMemberWithLeastLoad: the least loaded process without the task."""
        for pid in sorted(self.processes, key=lambda pid: (self.processes[pid].load, pid)):
            process = self.processes[pid]
            if task not in process.tasks:
                self._added(process.add_to_least_loaded(task, False))
                return True
        return False


def _per_member(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    active: dict[str, frozenset[int]]
    standby: dict[str, frozenset[int]]
    warmup: dict[str, frozenset[int]]


def assign(
    members: Mapping[str, MemberSpec],
    subtopologies: Mapping[str, SubtopologySpec],
    standby_replicas: int,
) -> dict[str, MemberAssignment]:
    """The target assignment of every member (Kafka's StickyTaskAssignor.assign)."""
    state = _Assignment(members, subtopologies, standby_replicas)
    active = [(s, p) for s, spec in subtopologies.items() for p in range(spec.tasks)]
    state.assign_active(active)
    if standby_replicas > 0:
        stateful = [
            (s, p) for s, spec in subtopologies.items() if spec.stateful for p in range(spec.tasks)
        ]
        state.assign_standby(stateful)
    out: dict[str, MemberAssignment] = {}
    for member_id, spec in members.items():
        process = state.processes[spec.process_id]
        out[member_id] = MemberAssignment(
            _compact(process.active.get(member_id, set())),
            _compact(process.standby.get(member_id, set())),
            {},
        )
    return out


def _compact(tasks: set[TaskId]) -> dict[str, frozenset[int]]:
    out: dict[str, set[int]] = {}
    for sub, p in tasks:
        out.setdefault(sub, set()).add(p)
    return {s: frozenset(ps) for s, ps in out.items()}
