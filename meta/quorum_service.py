"""The meta quorum's administration (KIP-853 on ``meta.quorum``): what DescribeQuorum,
AddVoter, RemoveVoter and UnregisterController do on the Raft leader, and what each meta node
does on its own.

The leader answers DescribeQuorum from its Raft progress (``MetaRaft.progress``) and the
observers' reports. It adds a voter only once that node follows the log as an observer, with
the directory id and Raft endpoint the request names, and has caught up (Kafka's AddVoterHandler
waits for the same); it removes one by id and directory id. One change at a time: a change
waits for the previous one to commit, as pysyncobj does not check it.

Controller registrations (KIP-919) are the leader's view too: a voter is registered, an
observer while it reports. UnregisterController (KIP-1312) removes one, as Kafka's controller
drops a ControllerRegistration record; and as Kafka's ControllerRegistrationManager registers
its controller again when it sees it gone, a running meta node is registered again by its next
word to the leader (a voter's next Raft acknowledgement, an observer's next report: within a
second), one that is down once it is back.

`QuorumAgent` runs on every node: an observer reports itself to the leader every second; a voter
publishes its directory id and gRPC endpoint to the quorum when the record lacks them or they
changed (Kafka's controllers send UpdateRaftVoter so at start-up); a voter that has seen no
leader for a while asks the quorum whether it is still a voter, and becomes an observer if it
was removed meanwhile (a removed voter is cut off before the entry that removes it reaches it).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from pysyncobj import FAIL_REASON

from common.internal_security import InternalSecurity
from meta import quorum
from meta.client import MetaClient, MetaError
from meta.protocol import ErrorCode
from meta.quorum import Member, Refusal
from meta.raft import MetaRaft
from proto import meta_pb2

log = logging.getLogger("rafka.meta.quorum")

_POLL_S = 0.1  # how often a change checks the new voter's progress or the last change's commit
_MAX_CHANGE_S = 12.0  # a change waits at most this (below MetaClient's attempt timeout)
_OBSERVER_EXPIRY_S = 30.0  # an observer that has not reported this long is not listed
_REPORT_PERIOD_S = 1.0
_ORPHAN_AFTER_S = 10.0  # a voter without a leader this long asks whether it is still a voter


class LeadershipMoved(Exception):
    """The leader handed its leadership away to be removed: the caller retries on the next."""


@dataclass(frozen=True)
class Observed:
    """An observer as it last reported itself."""

    member: Member
    log_end: int
    at: float  # time.monotonic() of the report
    at_ms: int  # the leader's wall clock then
    caught_up_ms: int


class QuorumAdmin:
    """The leader's side of the voter APIs (MetaService's handlers call it)."""

    def __init__(self, raft: MetaRaft, node_id: int, write_timeout_s: float) -> None:
        self._raft = raft
        self._node_id = node_id
        self._timeout_s = min(write_timeout_s, _MAX_CHANGE_S)
        self._change = threading.Lock()  # one voter change at a time
        self._observers: dict[int, Observed] = {}
        self._observers_lock = threading.Lock()
        # voter id -> when (wall clock ms) it was unregistered: not registered again until the
        # leader hears from it after that
        self._unregistered: dict[int, int] = {}

    # ------------------------------------------------------------ DescribeQuorum

    def describe(self, cluster_id: str) -> meta_pb2.DescribeQuorumResponse:
        """The quorum as the leader sees it (call on the leader)."""
        progress = self._raft.progress()
        now_ms = int(time.time() * 1000)
        voters = []
        for member in self._raft.members():
            if member.raft_address == self._raft.identity.raft_address:
                log_end, fetch_ms, caught_up_ms = self._raft.log_end(), now_ms, now_ms
            else:
                seen = progress.voters.get(member.raft_address) if progress else None
                log_end, fetch_ms, caught_up_ms = (
                    (seen.log_end, seen.last_fetch_ms, seen.last_caught_up_ms)
                    if seen
                    else (-1, -1, -1)
                )
            voters.append(_replica(member, log_end, fetch_ms, caught_up_ms))
        voter_ids = {m.node_id for m in self._raft.members()}
        observers = [
            _replica(o.member, o.log_end, o.at_ms, o.caught_up_ms)
            for o in self._fresh_observers()
            if o.member.node_id not in voter_ids
        ]
        return meta_pb2.DescribeQuorumResponse(
            cluster_id=cluster_id,
            leader_id=self._node_id,
            leader_epoch=progress.term if progress else 0,
            high_watermark=progress.commit_index if progress else self._raft.log_end(),
            voters=voters,
            observers=observers,
        )

    def report(self, request: meta_pb2.ReportObserverRequest) -> None:
        """An observer's report (on the leader)."""
        member = Member(
            request.node_id, request.raft_address, request.grpc_address, request.directory_id
        )
        now_ms = int(time.time() * 1000)
        with self._observers_lock:
            before = self._observers.get(request.node_id)
            caught_up = before.caught_up_ms if before else -1
            if request.log_end_offset >= self._raft.log_end():
                caught_up = now_ms
            self._observers[request.node_id] = Observed(
                member, request.log_end_offset, time.monotonic(), now_ms, caught_up
            )

    def _fresh_observers(self) -> list[Observed]:
        horizon = time.monotonic() - _OBSERVER_EXPIRY_S
        with self._observers_lock:
            for node_id in [n for n, o in self._observers.items() if o.at < horizon]:
                del self._observers[node_id]
            return sorted(self._observers.values(), key=lambda o: o.member.node_id)

    # ------------------------------------------------------------ UnregisterController

    def unregister(self, node_id: int) -> Refusal | None:
        """Kafka's QuorumController.unregisterController on the leader: the active controller
        may not unregister itself (INVALID_REQUEST), an id no registered meta node has is
        CONTROLLER_ID_NOT_REGISTERED; else the registration goes (module docstring). None on
        success."""
        if node_id == self._node_id:
            return Refusal(
                ErrorCode.INVALID_REQUEST, "Controller cannot unregister itself while it is active."
            )
        if not self._registered(node_id):
            return Refusal(
                ErrorCode.CONTROLLER_ID_NOT_REGISTERED,
                f"Controller ID {node_id} is not currently registered.",
            )
        with self._observers_lock:
            self._observers.pop(node_id, None)  # registered again by its next report
            if any(m.node_id == node_id for m in self._raft.members()):
                self._unregistered[node_id] = int(time.time() * 1000)
        log.info(
            "Unregistered meta node %d (UnregisterController): a meta node that is still "
            "running registers again within a second; stop it (and remove it from the voters) "
            "for good",
            node_id,
        )
        return None

    def _registered(self, node_id: int) -> bool:
        """A voter, unless unregistered and not heard from since; or an observer that reports."""
        voter = next((m for m in self._raft.members() if m.node_id == node_id), None)
        if voter is None:
            return any(o.member.node_id == node_id for o in self._fresh_observers())
        with self._observers_lock:
            unregistered_ms = self._unregistered.get(node_id)
        if unregistered_ms is None:
            return True
        progress = self._raft.progress()
        seen = progress.voters.get(voter.raft_address) if progress else None
        return seen is not None and seen.last_fetch_ms > unregistered_ms

    # ------------------------------------------------------------ AddVoter / RemoveVoter

    def add(self, request: meta_pb2.AddVoterRequest) -> Refusal | None:
        """Add the voter once it follows the log and has caught up; None on success."""
        new = Member(
            request.voter_id, request.raft_address, request.grpc_address, request.directory_id
        )
        refusal = self._unsupported("adding") or quorum.check_add(self._raft.members(), new)
        if refusal is not None:
            return refusal
        timeout_s = min(request.timeout_ms / 1000, _MAX_CHANGE_S) or self._timeout_s
        deadline = time.monotonic() + timeout_s
        with self._one_change() as busy:
            if busy is not None:
                return busy
            refusal = self._await_commit(deadline)
            if refusal is not None:
                return refusal
            target = self._raft.progress()
            target_index = target.commit_index if target else self._raft.log_end()
            while reason := self._not_ready(new, target_index):
                mismatch = "runs with directory id" in reason or "has the Raft endpoint" in reason
                if mismatch:
                    return Refusal(ErrorCode.INVALID_REQUEST, reason)
                if time.monotonic() >= deadline:
                    return Refusal(ErrorCode.REQUEST_TIMED_OUT, reason)
                time.sleep(_POLL_S)
            refusal = self._commit(quorum.change_request(quorum.ADD, new), deadline, "add")
        if refusal is None:
            log.info("Added %s at %s to the meta quorum's voters", new.key(), new.raft_address)
            with self._observers_lock:
                self._observers.pop(new.node_id, None)
        return refusal

    def remove(self, request: meta_pb2.RemoveVoterRequest) -> Refusal | None:
        """Remove the voter; None on success. Raises LeadershipMoved if it is this node (the
        leader), after handing the leadership to another voter."""
        refusal = self._unsupported("removing")
        if refusal is not None:
            return refusal
        voters = self._raft.members()
        found = quorum.find_voter(voters, request.voter_id, request.directory_id)
        if isinstance(found, Refusal):
            return found
        if len(voters) == 1:
            return Refusal(
                ErrorCode.INVALID_REQUEST, f"Cannot remove {found.key()}, the only voter"
            )
        deadline = time.monotonic() + self._timeout_s
        if found.raft_address == self._raft.identity.raft_address:
            self._hand_over(deadline)
            raise LeadershipMoved(
                f"meta node {self._node_id} handed its Raft leadership over to be removed"
            )
        with self._one_change() as busy:
            if busy is not None:
                return busy
            refusal = self._await_commit(deadline) or self._commit(
                quorum.change_request(quorum.REMOVE, found), deadline, "remove"
            )
        if refusal is None:
            log.info(
                "Removed %s at %s from the meta quorum's voters: stop that meta node, or keep "
                "it as an observer",
                found.key(),
                found.raft_address,
            )
        return refusal

    def _unsupported(self, what: str) -> Refusal | None:
        if self._raft.shared_password:
            return None
        return Refusal(
            ErrorCode.UNSUPPORTED_VERSION,
            f"Cluster doesn't support {what} voter because internal.secret is not set: Raft "
            "peers authenticate with it (set it on every meta node and broker, then restart "
            "them)",
        )

    def _one_change(self) -> _ChangeSlot:
        return _ChangeSlot(self._change)

    def _await_commit(self, deadline: float) -> Refusal | None:
        """Wait for a membership entry of a previous leader or change to commit."""
        while self._raft.uncommitted_change():
            if time.monotonic() >= deadline:
                return Refusal(
                    ErrorCode.REQUEST_TIMED_OUT,
                    "Request timed out waiting for voters to commit the latest voter change",
                )
            time.sleep(_POLL_S)
        return None

    def _not_ready(self, new: Member, target: int) -> str:
        with self._observers_lock:
            seen = self._observers.get(new.node_id)
        fresh = seen is not None and time.monotonic() - seen.at < 5 * _REPORT_PERIOD_S
        if not fresh or seen is None:
            return quorum.check_caught_up(new, None, -1, target)
        return quorum.check_caught_up(new, seen.member, seen.log_end, target)

    def _commit(self, request: list[object], deadline: float, what: str) -> Refusal | None:
        """Append the membership entry and wait for its commit (retrying while the leader has
        not committed an entry of its term yet, which pysyncobj refuses changes before)."""
        while (remaining := deadline - time.monotonic()) > 0:
            if not self._raft.is_leader():
                return Refusal(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    f"This meta node lost the Raft leadership before the {what}; retry",
                )
            outcome = self._raft.change_membership(request, remaining)
            if outcome == FAIL_REASON.SUCCESS:
                return None
            if outcome != FAIL_REASON.REQUEST_DENIED:
                break
            time.sleep(_POLL_S)
        return Refusal(
            ErrorCode.REQUEST_TIMED_OUT,
            f"Request timed out waiting for the voter change ({what}) to commit: a majority of "
            "the voters must be up; DescribeQuorum tells whether it took effect",
        )

    def _hand_over(self, deadline: float) -> None:
        """Hand the leadership to a caught-up voter (pysyncobj's leader cannot remove
        itself); wait until this node no longer leads."""
        while self._raft.is_leader() and time.monotonic() < deadline:
            self._raft.transfer_leadership()
            time.sleep(3 * _POLL_S)


class _ChangeSlot:
    """``with`` the change lock, without waiting: yields a REQUEST_TIMED_OUT refusal if
    another change holds it, else None."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self._held = False

    def __enter__(self) -> Refusal | None:
        self._held = self._lock.acquire(blocking=False)
        if self._held:
            return None
        return Refusal(
            ErrorCode.REQUEST_TIMED_OUT,
            "Request timed out waiting for leader to handle previous voter change request",
        )

    def __exit__(self, *exc_info: object) -> None:
        if self._held:
            self._lock.release()


def _replica(
    member: Member, log_end: int, fetch_ms: int, caught_up_ms: int
) -> meta_pb2.QuorumReplica:
    return meta_pb2.QuorumReplica(
        node_id=member.node_id,
        directory_id=member.directory_id,
        log_end_offset=log_end,
        last_fetch_timestamp=fetch_ms,
        last_caught_up_timestamp=caught_up_ms,
        raft_address=member.raft_address,
        grpc_address=member.grpc_address,
    )


class QuorumAgent:
    """What every meta node does about its own place in the quorum (module docstring), on a
    thread of its own with an asyncio loop for MetaClient."""

    def __init__(
        self, raft: MetaRaft, security: InternalSecurity, bootstrap: Iterable[Member]
    ) -> None:
        self._raft = raft
        self._security = security
        self._bootstrap = [m.grpc_address for m in bootstrap if m.grpc_address]
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="meta-quorum-agent", daemon=True)
        self._next_check = 0.0  # no quorum check before (time.monotonic())
        self._warned = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        asyncio.run(self._loop())

    async def _loop(self) -> None:
        # Reports go to the leader: MetaClient follows the redirects of the nodes it asks.
        async with MetaClient(self._peers(), timeout_s=2, security=self._security) as reporter:
            await self._loop_with(reporter)

    def _peers(self) -> list[str]:
        """The gRPC addresses of the other meta nodes this node knows of."""
        addresses = {m.grpc_address for m in self._raft.members() if m.grpc_address}
        addresses |= set(self._bootstrap)
        addresses.discard(self._raft.identity.grpc_address)
        return sorted(addresses) or [self._raft.identity.grpc_address]

    async def _loop_with(self, reporter: MetaClient) -> None:
        while not self._stopping.is_set():
            try:
                if self._raft.observer:
                    await self._report(reporter)
                else:
                    await self._publish_identity()
                await self._check_quorum()
            except MetaError as exc:
                log.debug("Quorum agent: %s", exc)
            except Exception:
                log.exception("Quorum agent failed; retrying")
            await asyncio.to_thread(self._stopping.wait, _REPORT_PERIOD_S)

    def _leader(self) -> Member | None:
        address = self._raft.leader_address()
        return next((m for m in self._raft.members() if m.raft_address == address), None)

    async def _report(self, reporter: MetaClient) -> None:
        me = self._raft.identity
        await reporter.report_observer(
            meta_pb2.ReportObserverRequest(
                node_id=me.node_id,
                directory_id=me.directory_id,
                raft_address=me.raft_address,
                grpc_address=me.grpc_address,
                log_end_offset=self._raft.log_end(),
            )
        )

    async def _publish_identity(self) -> None:
        """UpdateRaftVoter's part: the quorum's record of this voter gets its directory id and
        gRPC endpoint (a voter of meta.quorum.voters starts without a known directory id)."""
        record, me = self._raft.self_record(), self._raft.identity
        if record.directory_id not in ("", me.directory_id):
            if not self._warned:
                self._warned = True
                log.error(
                    "This meta node's directory id %s is not the one the quorum has for voter "
                    "%d (%s): its meta.data.dir was replaced, and it votes with a log that may "
                    "lack acknowledged entries. Remove voter %d with directory id %s and add "
                    "this node again (`rafka meta-quorum remove`, then `add`)",
                    me.directory_id,
                    me.node_id,
                    record.directory_id,
                    me.node_id,
                    record.directory_id,
                )
            return
        wanted = Member(record.node_id, me.raft_address, me.grpc_address, me.directory_id)
        if wanted == record or self._leader() is None or self._raft.uncommitted_change():
            return
        request = quorum.change_request(quorum.UPDATE, wanted, previous=record)
        outcome = await asyncio.to_thread(self._raft.change_membership, request, 5.0)
        if outcome == FAIL_REASON.SUCCESS:
            log.info(
                "The quorum's record of this voter is now %s at %s",
                wanted.key(),
                wanted.grpc_address,
            )

    async def _check_quorum(self) -> None:
        """After _ORPHAN_AFTER_S without a word from a leader, ask the other meta nodes for the
        quorum (then again after as long): a voter removed meanwhile becomes an observer; an
        observer whose peers do not include the leader learns the voters."""
        now = time.monotonic()
        if self._raft.leaderless_for() < _ORPHAN_AFTER_S or now < self._next_check:
            return
        self._next_check = now + _ORPHAN_AFTER_S
        me = self._raft.identity
        async with MetaClient(self._peers(), timeout_s=5, security=self._security) as c:
            answer = await c.describe_quorum(timeout_s=5)
        voters = [
            Member(v.node_id, v.raft_address, v.grpc_address, v.directory_id) for v in answer.voters
        ]
        if any(v.raft_address == me.raft_address for v in voters) and not self._raft.observer:
            return
        if self._raft.observer:
            log.info(
                "Heard from no Raft leader for %gs: following the voters meta node %d (the "
                "leader) names: %s",
                _ORPHAN_AFTER_S,
                answer.leader_id,
                ", ".join(f"{v.node_id}@{v.raft_address}" for v in voters),
            )
        else:
            log.warning(
                "The meta quorum's leader (node %d) does not list this node (%s) among its "
                "voters: it was removed. It follows the Raft log as an observer from now on; "
                "stop it, or add it again",
                answer.leader_id,
                me.key(),
            )
        self._raft.adopt_quorum(voters)
