"""UnregisterController on the Raft leader (meta.quorum_service.QuorumAdmin.unregister, KIP-1312):
Kafka's refusals, and a registration that goes and comes back as Kafka's controllers' do: a
running voter registers again with its next Raft acknowledgement, an observer with its next
report, a stopped one when it is back."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from meta.protocol import ErrorCode
from meta.quorum import Member, Refusal
from meta.quorum_service import QuorumAdmin
from meta.raft import QuorumProgress, ReplicaProgress
from proto import meta_pb2

VOTERS = [Member(n, f"127.0.0.1:{9000 + n}", f"127.0.0.1:{8000 + n}", f"dir{n}") for n in (1, 2, 3)]
OBSERVER = Member(4, "127.0.0.1:9004", "127.0.0.1:8004", "dir4")


@dataclass
class FakeRaft:
    """The leader's MetaRaft as QuorumAdmin reads it: node 1 leads, 2 and 3 follow."""

    fetched_ms: dict[int, int] = field(default_factory=dict)  # voter -> its last fetch
    identity: Member = VOTERS[0]

    def members(self) -> list[Member]:
        return VOTERS

    def log_end(self) -> int:
        return 10

    def progress(self) -> QuorumProgress:
        voters = {
            m.raft_address: ReplicaProgress(10, self.fetched_ms[m.node_id], -1)
            for m in VOTERS[1:]
            if m.node_id in self.fetched_ms
        }
        return QuorumProgress(2, 10, 10, now_ms(), voters)


def now_ms() -> int:
    return int(time.time() * 1000)


def report(admin: QuorumAdmin, member: Member) -> None:
    admin.report(
        meta_pb2.ReportObserverRequest(
            node_id=member.node_id,
            directory_id=member.directory_id,
            raft_address=member.raft_address,
            grpc_address=member.grpc_address,
            log_end_offset=10,
        )
    )


def observers(admin: QuorumAdmin) -> list[int]:
    return [o.node_id for o in admin.describe("cluster").observers]


def not_registered(node_id: int) -> Refusal:
    return Refusal(
        ErrorCode.CONTROLLER_ID_NOT_REGISTERED,
        f"Controller ID {node_id} is not currently registered.",
    )


def test_the_active_controller_and_unknown_ids_are_refused() -> None:
    admin = QuorumAdmin(FakeRaft(), 1, 10)  # type: ignore[arg-type]
    assert admin.unregister(1) == Refusal(
        ErrorCode.INVALID_REQUEST, "Controller cannot unregister itself while it is active."
    )
    assert admin.unregister(42) == not_registered(42)
    assert admin.unregister(-1) == not_registered(-1)


def test_a_running_voter_registers_again_with_its_next_acknowledgement() -> None:
    raft = FakeRaft({2: now_ms() - 1_000})
    admin = QuorumAdmin(raft, 1, 10)  # type: ignore[arg-type]
    assert admin.unregister(2) is None
    assert admin.unregister(2) == not_registered(2)  # not heard from since
    raft.fetched_ms[2] = now_ms() + 1  # its next AppendEntries answer
    assert admin.unregister(2) is None
    assert [v.node_id for v in admin.describe("cluster").voters] == [1, 2, 3]  # still voters


def test_a_stopped_voter_stays_unregistered_until_it_is_back() -> None:
    raft = FakeRaft()  # voter 3 never answered this leader
    admin = QuorumAdmin(raft, 1, 10)  # type: ignore[arg-type]
    assert admin.unregister(3) is None  # registered, down or not, until unregistered
    assert admin.unregister(3) == not_registered(3)
    raft.fetched_ms[3] = now_ms() + 1
    assert admin.unregister(3) is None


def test_an_observer_registers_again_with_its_next_report() -> None:
    admin = QuorumAdmin(FakeRaft(), 1, 10)  # type: ignore[arg-type]
    assert admin.unregister(4) == not_registered(4)  # it has not reported yet
    report(admin, OBSERVER)
    assert observers(admin) == [4]
    assert admin.unregister(4) is None
    assert observers(admin) == []
    assert admin.unregister(4) == not_registered(4)
    report(admin, OBSERVER)
    assert observers(admin) == [4]
    assert admin.unregister(4) is None
