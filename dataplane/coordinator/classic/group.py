"""Kafka's classic group protocol: one group's membership state machine.

A port of the classic half of Kafka's GroupMetadataManager, on the state of
`membership.ClassicMembership` (Kafka's ClassicGroup):

    Empty ─join─► PreparingRebalance ─all joined / rebalance timeout─► CompletingRebalance
      ▲                  ▲                                                  │ leader's
      │                  └──── join, leave, member expiry ◄──── Stable ◄────┘ SyncGroup
      └── last member gone (generation bumped, GroupMetadata written)

JoinGroup is a long poll: a join parks (`Reply`) until every known member has rejoined or the
rebalance timeout removes the dynamic members that did not; then the generation is bumped, a
protocol every member supports is chosen by the members' preference votes, and the leader
receives the member list. A new group waits group.initial.rebalance.delay.ms (extended while
members keep arriving, up to the rebalance timeout) before completing its first join. v4+
joins without a member id get MEMBER_ID_REQUIRED with a generated id (KIP-394). Static members
(group.instance.id, KIP-345) rejoin after a restart under a new member id without a rebalance
when their protocols are unchanged; the old id is fenced (FENCED_INSTANCE_ID). Members that stop
heartbeating for their session timeout are removed and a rebalance starts.

Everything here is synchronous and deterministic: time comes from the context's `Timer` and
clock, persistence goes through `ShardServices.write` whose completion is a callback.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from dataplane.coordinator.base import (
    JoinRequest,
    JoinResult,
    Reply,
    SyncResult,
    map_append_error,
)
from dataplane.coordinator.classic.membership import (
    ClassicMember,
    ClassicMembership,
    GroupState,
    heartbeat_key,
    join_error,
    join_key,
    sync_key,
)
from dataplane.protocol.errors import ErrorCode

__all__ = ["ClassicGroup"]

log = logging.getLogger("rafka.coordinator.group")


class ClassicGroup(ClassicMembership):
    """A classic group: JoinGroup, SyncGroup, Heartbeat and LeaveGroup on its membership."""

    # ==================================================================== JoinGroup

    def join(self, req: JoinRequest, reply: Reply[JoinResult]) -> None:
        """A JoinGroup for this (existing or just created) group. Validation of the group id
        and the session timeout happened before."""
        if not self._accept_joining_member(req.member_id):
            self._remove(req.member_id)
            reply.complete(join_error("", ErrorCode.group_max_size_reached))
        elif not req.member_id:
            self._join_new_member(req, reply)
        else:
            self._join_existing_member(req, reply)

    def _accept_joining_member(self, member_id: str) -> bool:
        max_size = self.ctx.config.max_size
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if self.state is GroupState.PREPARING_REBALANCE:
            member = self.members.get(member_id)
            return (member is not None and member.awaiting_join) or (
                self.num_awaiting_join() < max_size
            )
        return member_id in self.members or len(self.members) < max_size

    def _join_new_member(self, req: JoinRequest, reply: Reply[JoinResult]) -> None:
        if self.state is GroupState.DEAD:
            reply.complete(join_error("", ErrorCode.coordinator_not_available))
        elif not self.supports_protocols(req.protocol_type, req.protocols):
            reply.complete(join_error("", ErrorCode.inconsistent_group_protocol))
        else:
            new_id = self.ctx.new_member_id(req.group_instance_id or req.client_id)
            if req.group_instance_id is not None:
                existing = self.static_members.get(req.group_instance_id)
                if existing is not None:
                    log.info(
                        "static member %s of group %s rejoins in %s: replacing member %s by %s",
                        req.group_instance_id,
                        self.group_id,
                        self.state.value,
                        existing,
                        new_id,
                    )
                    self._update_static_member_and_rebalance(req, existing, new_id, reply)
                else:
                    self._add_member_and_rebalance(req, new_id, reply)
            elif req.api_version >= 4:
                # KIP-394: the member must come back with this id (proving it got the answer)
                self.pending_members.add(new_id)
                self.ctx.timer.schedule(
                    heartbeat_key(self.group_id, new_id),
                    req.session_timeout_ms,
                    lambda: self._expire_heartbeat(new_id),
                )
                reply.complete(join_error(new_id, ErrorCode.member_id_required))
            else:
                self._add_member_and_rebalance(req, new_id, reply)

    def _join_existing_member(self, req: JoinRequest, reply: Reply[JoinResult]) -> None:
        member_id = req.member_id
        if self.state is GroupState.DEAD:
            reply.complete(join_error(member_id, ErrorCode.coordinator_not_available))
            return
        if not self.supports_protocols(req.protocol_type, req.protocols):
            reply.complete(join_error(member_id, ErrorCode.inconsistent_group_protocol))
            return
        if member_id in self.pending_members:
            self._add_member_and_rebalance(req, member_id, reply)
            return
        error = self.validate_member(member_id, req.group_instance_id)
        if error != ErrorCode.none:
            reply.complete(join_error(member_id, error))
            return
        member = self.members[member_id]
        reason = f"member {member_id} rejoins during {self.state.value} (reason: {req.reason})"
        if self.state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(member, req, reply, reason)
        elif self.state is GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # it lost the JoinGroup response: answer again for the current generation
                reply.complete(self._join_result(member_id, with_members=self.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(member, req, reply, reason)
        elif self.state is GroupState.STABLE:
            if self.is_leader(member_id) or not member.matches(req.protocols):
                # the leader rejoining asks for a new assignment (e.g. topics changed)
                self._update_member_and_rebalance(member, req, reply, reason)
            else:
                reply.complete(self._join_result(member_id, with_members=False))
        else:
            log.warning(
                "member %s rejoins group %s in unexpected state %s",
                member_id,
                self.group_id,
                self.state.value,
            )
            reply.complete(join_error(member_id, ErrorCode.unknown_member_id))

    def _join_result(self, member_id: str, *, with_members: bool) -> JoinResult:
        return JoinResult(
            ErrorCode.none,
            member_id,
            self.generation,
            self.protocol_type,
            self.protocol_name,
            self.leader_id or "",
            False,
            self.current_members() if with_members else (),
        )

    def _add_member_and_rebalance(
        self, req: JoinRequest, member_id: str, reply: Reply[JoinResult]
    ) -> None:
        member = ClassicMember(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            tuple(req.protocols),
            is_new=True,
        )
        if self.state is GroupState.PREPARING_REBALANCE and self.previous_state is GroupState.EMPTY:
            self.new_member_added = True  # lets the initial delay extend
        self._add(member, reply)
        # a new member parked in JoinGroup cannot heartbeat; drop it if it never completes
        self._schedule_heartbeat(member, self.ctx.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(
            f"adding new member {member_id} with group instance id {req.group_instance_id} "
            f"(reason: {req.reason})"
        )

    def _update_member_and_rebalance(
        self, member: ClassicMember, req: JoinRequest, reply: Reply[JoinResult], reason: str
    ) -> None:
        self._update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, reply
        )
        self._maybe_prepare_rebalance_or_complete_join(reason)

    def _update_static_member_and_rebalance(
        self, req: JoinRequest, old_id: str, new_id: str, reply: Reply[JoinResult]
    ) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        current_leader = self.leader_id
        member = self._replace_static_member(instance_id, old_id, new_id)
        self.ctx.timer.cancel(heartbeat_key(self.group_id, old_id))
        self._schedule_heartbeat(member)
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        old_protocols = member.protocols
        self._update_member(
            member, req.protocols, req.rebalance_timeout_ms, req.session_timeout_ms, reply
        )
        if self.state is GroupState.STABLE:
            if (self.protocol_name or "") == self.select_protocol():
                # KIP-345: same protocol, so the restarted member keeps its assignment and the
                # others are not disturbed; persist the new member id
                log.info(
                    "static member %s of group %s rejoined during Stable: no rebalance",
                    instance_id,
                    self.group_id,
                )
                generation = self.generation

                def done(error: ErrorCode) -> None:
                    if error != ErrorCode.none:
                        log.warning(
                            "could not persist member %s of group %s (%s); reverting to %s",
                            new_id,
                            self.group_id,
                            error.name,
                            old_id,
                        )
                        if new_id in self.members:
                            self._update_member(
                                member, old_protocols, old_rebalance, old_session, None
                            )
                            reverted = self._replace_static_member(instance_id, new_id, old_id)
                            self._schedule_heartbeat(reverted)
                        reply.complete(
                            JoinResult(
                                map_append_error(error),
                                "",
                                generation,
                                self.protocol_type,
                                self.protocol_name,
                                current_leader or "",
                            )
                        )
                    elif req.api_version >= 9:  # KIP-814: the leader skips the assignment
                        leader = self.is_leader(new_id)
                        self._complete_join(
                            member,
                            JoinResult(
                                ErrorCode.none,
                                new_id,
                                self.generation,
                                self.protocol_type,
                                self.protocol_name,
                                self.leader_id or "",
                                leader,
                                self.current_members() if leader else (),
                            ),
                        )
                    else:
                        # the old leader id keeps a restarted leader from assigning
                        self._complete_join(
                            member,
                            JoinResult(
                                ErrorCode.none,
                                new_id,
                                self.generation,
                                self.protocol_type,
                                self.protocol_name,
                                current_leader or "",
                            ),
                        )

                self._write_metadata(self.assignments(), done)
                return
            self._maybe_prepare_rebalance_or_complete_join(
                f"static member {instance_id} rejoined with other protocols"
            )
            return
        if self.state is GroupState.COMPLETING_REBALANCE:
            # the leader may be assigning to the old member id: start over
            self._prepare_rebalance(f"static member {instance_id} rejoined during a rebalance")
            return
        self._maybe_complete_join_phase()

    # ==================================================================== rebalancing

    def _maybe_prepare_rebalance_or_complete_join(self, reason: str) -> None:
        if self.can_rebalance():
            self._prepare_rebalance(reason)
        else:
            self._maybe_complete_join_phase()

    def _prepare_rebalance(self, reason: str) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(ErrorCode.rebalance_in_progress)
        self._remove_sync_expiration()
        initial = self.state is GroupState.EMPTY
        if initial:
            delay = self.ctx.config.initial_rebalance_delay_ms
            remaining = max(self.rebalance_timeout_ms() - delay, 0)
            self.ctx.timer.schedule(
                join_key(self.group_id),
                delay,
                lambda: self._try_complete_initial_rebalance(delay, remaining),
            )
        self._transition(GroupState.PREPARING_REBALANCE)
        log.info(
            "preparing to rebalance group %s with old generation %d (%s)",
            self.group_id,
            self.generation,
            reason,
        )
        if not initial:
            self._maybe_complete_join_else_schedule()

    def _maybe_complete_join_else_schedule(self) -> None:
        if self.has_all_members_joined():
            self._complete_join_phase()
        else:
            self.ctx.timer.schedule(
                join_key(self.group_id), self.rebalance_timeout_ms(), self._complete_join_phase
            )

    def _try_complete_initial_rebalance(self, delay: int, remaining: int) -> None:
        if self.new_member_added and remaining != 0:
            self.new_member_added = False
            new_delay = min(self.ctx.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.ctx.timer.schedule(
                join_key(self.group_id),
                new_delay,
                lambda: self._try_complete_initial_rebalance(new_delay, new_remaining),
            )
        else:
            self._complete_join_phase()

    def _maybe_complete_join_phase(self) -> None:
        if (
            self.state is GroupState.PREPARING_REBALANCE
            and self.previous_state is not GroupState.EMPTY  # the initial delay decides
            and self.has_all_members_joined()
        ):
            self._complete_join_phase()

    def _maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def _complete_join_phase(self) -> None:
        self.ctx.timer.cancel(join_key(self.group_id))
        gone = [m for m in self.members.values() if not m.awaiting_join and not m.is_static]
        for member in gone:
            self._remove(member.member_id)
            self.ctx.timer.cancel(heartbeat_key(self.group_id, member.member_id))
        if gone:
            log.info(
                "group %s removed members that did not rejoin in time: %s",
                self.group_id,
                [m.member_id for m in gone],
            )
        if self.state is GroupState.DEAD:
            return
        if not self._maybe_elect_new_joined_leader() and self.members:
            # only static members that did not rejoin: wait until they do or expire
            log.warning("group %s could not complete its rebalance: nobody rejoined", self.group_id)
            self.ctx.timer.schedule(
                join_key(self.group_id), self.rebalance_timeout_ms(), self._complete_join_phase
            )
            return
        self._init_next_generation()
        if self.state is GroupState.EMPTY:
            log.info("group %s with generation %d is now empty", self.group_id, self.generation)
            self._write_metadata({})
            return
        log.info(
            "stabilized group %s generation %d (protocol %s) with %d members",
            self.group_id,
            self.generation,
            self.protocol_name,
            len(self.members),
        )
        for member in self.members.values():
            leader = self.is_leader(member.member_id)
            self._complete_join(member, self._join_result(member.member_id, with_members=leader))
            self._schedule_heartbeat(member)
            member.is_new = False
            self.pending_sync_members.add(member.member_id)
        self.ctx.timer.schedule(
            sync_key(self.group_id),
            self.rebalance_timeout_ms(),
            functools.partial(self._expire_pending_sync, self.generation),
        )

    def _remove_sync_expiration(self) -> None:
        self.pending_sync_members.clear()
        self.ctx.timer.cancel(sync_key(self.group_id))

    def _remove_pending_sync_member(self, member_id: str) -> None:
        self.pending_sync_members.discard(member_id)
        if (
            self.state
            in (
                GroupState.DEAD,
                GroupState.EMPTY,
                GroupState.PREPARING_REBALANCE,
            )
            or not self.pending_sync_members
        ):
            self.ctx.timer.cancel(sync_key(self.group_id))

    def _expire_pending_sync(self, generation: int) -> None:
        if generation != self.generation:
            return
        if (
            self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            and self.pending_sync_members
        ):
            late = sorted(self.pending_sync_members)
            for member_id in late:
                self._remove(member_id)
                self.ctx.timer.cancel(heartbeat_key(self.group_id, member_id))
            self._prepare_rebalance(f"members {late} sent no SyncGroup in time")

    def _reset_and_propagate_assignment_error(self, error: ErrorCode) -> None:
        for member in self.members.values():
            member.assignment = b""
        self._propagate_assignment(error)

    def _set_and_propagate_assignment(self, assignments: dict[str, bytes]) -> None:
        for member in self.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        self._propagate_assignment(ErrorCode.none)

    def _propagate_assignment(self, error: ErrorCode) -> None:
        ok = error == ErrorCode.none
        for member in self.members.values():
            result = SyncResult(
                error,
                self.protocol_type if ok else None,
                self.protocol_name if ok else None,
                member.assignment,
            )
            if self._complete_sync(member, result):
                # restart the session: it may have run out while we waited for the leader
                self._schedule_heartbeat(member)

    # ==================================================================== heartbeats and expiry

    def _schedule_heartbeat(self, member: ClassicMember, timeout_ms: int | None = None) -> None:
        member_id = member.member_id
        self.ctx.timer.schedule(
            heartbeat_key(self.group_id, member_id),
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            lambda: self._expire_heartbeat(member_id),
        )

    def offset_commit_accepted(self, member_id: str) -> None:
        """As Kafka's commitOffset: in the classic protocol a member's accepted OffsetCommit
        keeps its session alive while the group is Stable or PreparingRebalance, so a member
        whose heartbeats are late but whose commits arrive is not expired."""
        member = self.members.get(member_id)
        if member is not None and self.state in (
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
        ):
            self._schedule_heartbeat(member)

    def _expire_heartbeat(self, member_id: str) -> None:
        if self.state is GroupState.DEAD:
            return
        if member_id in self.pending_members:
            log.info("pending member %s of group %s expired", member_id, self.group_id)
            self._remove(member_id)
            if self.state is GroupState.PREPARING_REBALANCE and self.has_all_members_joined():
                self._complete_join_phase()
            return
        member = self.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            return  # parked in a rebalance: the rebalance timeouts govern it
        log.info(
            "member %s of group %s failed (no heartbeat within %d ms): removing it",
            member_id,
            self.group_id,
            member.session_timeout_ms,
        )
        self._remove_member_and_update_group(member, f"member {member_id} expired")

    def _remove_member_and_update_group(self, member: ClassicMember, reason: str) -> None:
        self._complete_join(member, join_error("", ErrorCode.unknown_member_id))
        self._remove(member.member_id)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(reason)
        elif self.state is GroupState.PREPARING_REBALANCE and self.has_all_members_joined():
            self._complete_join_phase()

    # ==================================================================== SyncGroup

    def sync(
        self,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        reply: Reply[SyncResult],
    ) -> None:
        if self.state is GroupState.EMPTY:
            reply.complete(SyncResult(ErrorCode.unknown_member_id))
            return
        error = self._validate_sync(
            member_id, instance_id, generation, protocol_type, protocol_name
        )
        if error != ErrorCode.none:
            reply.complete(SyncResult(error))
        elif self.state is GroupState.PREPARING_REBALANCE:
            reply.complete(SyncResult(ErrorCode.rebalance_in_progress))
        elif self.state is GroupState.COMPLETING_REBALANCE:
            member = self.members[member_id]
            reply.chain(member.sync_reply)
            member.sync_reply = reply
            self._remove_pending_sync_member(member_id)
            if self.is_leader(member_id):
                self._leader_sync(member_id, generation, assignments)
        elif self.state is GroupState.STABLE:
            self._remove_pending_sync_member(member_id)
            member = self.members[member_id]
            result = SyncResult(
                ErrorCode.none, self.protocol_type, self.protocol_name, member.assignment
            )
            reply.complete(result)

    def _validate_sync(
        self,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        error = self.validate_member(member_id, instance_id)
        if error != ErrorCode.none:
            return error
        if generation != self.generation:
            return ErrorCode.illegal_generation
        if _inconsistent(protocol_type, self.protocol_type) or _inconsistent(
            protocol_name, self.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol
        return ErrorCode.none

    def _leader_sync(self, member_id: str, generation: int, given: dict[str, bytes]) -> None:
        log.info(
            "assignment received from leader %s of group %s for generation %d (%d members)",
            member_id,
            self.group_id,
            self.generation,
            len(self.members),
        )
        assignments = {m: given.get(m, b"") for m in self.members}
        missing = [m for m in self.members if m not in given]
        if missing:
            log.warning(
                "group %s generation %d: no assignment for %s", self.group_id, generation, missing
            )

        def done(error: ErrorCode) -> None:
            # another member may have joined meanwhile: only the same rebalance may complete
            if self.state is not GroupState.COMPLETING_REBALANCE or generation != self.generation:
                return
            if error != ErrorCode.none:
                mapped = map_append_error(error)
                self._reset_and_propagate_assignment_error(mapped)
                self._maybe_prepare_rebalance_or_complete_join(
                    f"error {mapped.name} storing the assignment of member {member_id}"
                )
            else:
                self._set_and_propagate_assignment(assignments)
                self._transition(GroupState.STABLE)

        self._write_metadata(assignments, done)

    # ==================================================================== the shard's entry points

    def classic_join(self, req: JoinRequest, reply: Reply[JoinResult]) -> None:
        self.join(req, reply)

    def classic_sync(
        self,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        reply: Reply[SyncResult],
    ) -> None:
        self.sync(
            member_id, instance_id, generation, protocol_type, protocol_name, assignments, reply
        )

    def classic_heartbeat(
        self, member_id: str, instance_id: str | None, generation: int
    ) -> ErrorCode:
        return self.heartbeat(member_id, instance_id, generation)

    def classic_leave(
        self, members: Sequence[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available, []
        return ErrorCode.none, self.leave(members)

    # ==================================================================== Heartbeat, LeaveGroup

    def heartbeat(self, member_id: str, instance_id: str | None, generation: int) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        error = self.validate_member(member_id, instance_id)
        if error != ErrorCode.none:
            return error
        if generation != self.generation:
            return ErrorCode.illegal_generation
        if self.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        self._schedule_heartbeat(self.members[member_id])
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none  # CompletingRebalance (heartbeats after the join) or Stable

    def leave(self, members: Sequence[tuple[str, str | None, str | None]]) -> list[ErrorCode]:
        """LeaveGroup of (member id, group instance id, reason) each; one error per member."""
        if self.state is GroupState.DEAD:
            return [ErrorCode.coordinator_not_available for _ in members]
        errors = []
        for member_id, instance_id, reason in members:
            if not member_id:
                # an administrator removing a static member by its instance id (KIP-345)
                existing = self.static_members.get(instance_id) if instance_id else None
                if existing is None:
                    errors.append(ErrorCode.unknown_member_id)
                    continue
                self._remove_current_member(existing, reason)
                errors.append(ErrorCode.none)
            elif member_id in self.pending_members:
                self._remove(member_id)
                self.ctx.timer.cancel(heartbeat_key(self.group_id, member_id))
                errors.append(ErrorCode.none)
            else:
                error = self.validate_member(member_id, instance_id)
                if error == ErrorCode.none:
                    self._remove_current_member(member_id, reason)
                errors.append(error)
        if any(e == ErrorCode.none for e in errors):
            if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join("members left the group")
            elif self.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase()
        return errors

    def _remove_current_member(self, member_id: str, reason: str | None) -> None:
        member = self.members[member_id]
        self.ctx.timer.cancel(heartbeat_key(self.group_id, member_id))
        log.info("member %s left group %s (reason: %s)", member_id, self.group_id, reason or "none")
        self._complete_join(member, join_error("", ErrorCode.unknown_member_id))
        self._remove(member_id)

    # ==================================================================== loading

    def on_loaded(self) -> None:
        """After the shard replayed its partition: members must heartbeat again in time."""
        for member in self.members.values():
            self._schedule_heartbeat(member)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
