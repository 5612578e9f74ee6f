"""The meta quorum's membership on pysyncobj (meta.raft with meta.quorum): an observer added as a
voter, and the membership kept by the Raft log and the state dump across restarts of every
node, whatever meta.quorum.voters says."""

from __future__ import annotations

from pathlib import Path

from pysyncobj import FAIL_REASON

from meta import quorum
from meta.commands import RegisterGroups
from meta.feed import ChangeFeed
from meta.quorum import Member
from meta.raft import MetaRaft
from tests.integration.conftest import wait_for
from tests.integration.meta.harness import free_ports


def _node(root: Path, members: list[Member], bootstrap: list[Member], i: int) -> MetaRaft:
    me = members[i]
    (root / str(i)).mkdir(exist_ok=True)
    return MetaRaft(
        me.raft_address,
        [m.raft_address for m in bootstrap if m != me],
        root / str(i),
        ChangeFeed(100),
        10,
        lambda: None,
        "pw",
        identity=me,
        bootstrap=bootstrap,
    )


def test_an_added_voter_is_kept_by_the_log_and_the_dump_across_restarts(tmp_path: Path) -> None:
    members = [
        Member(i + 1, f"127.0.0.1:{port}", f"127.0.0.1:{i}", f"dir{i + 1}")
        for i, port in enumerate(free_ports(4))
    ]
    bootstrap = members[:3]  # meta.quorum.voters, on every node, before and after
    rafts = {i: _node(tmp_path, members, bootstrap, i) for i in range(4)}
    try:
        assert rafts[3].observer
        assert not rafts[0].observer
        leader = wait_for(
            lambda: next((r for r in rafts.values() if r.is_leader()), None), 15, "a leader"
        )
        leader.submit(RegisterGroups((("before", 0),)))
        wait_for(lambda: "before" in rafts[3].machine.state.groups, 15, "the observer following")
        assert not rafts[3].is_leader()
        outcome = leader.change_membership(quorum.change_request(quorum.ADD, members[3]), 10)
        assert outcome == FAIL_REASON.SUCCESS
        wait_for(lambda: not rafts[3].observer, 15, "the observer turned voter")
        assert [m.node_id for m in leader.members()] == [1, 2, 3, 4]
        leader.submit(RegisterGroups((("after", 0),)))
        # Every node applies the change before its dump is forced: a node still behind would
        # compact without it and hold it only as an uncommitted journal entry at the restart.
        wait_for(
            lambda: all("after" in r.machine.state.groups for r in rafts.values()),
            15,
            "every node applying the change",
        )
        for raft in rafts.values():
            raft._sync.forceLogCompaction()
        wait_for(
            lambda: all(r.status()["log_len"] <= 2 for r in rafts.values()), 15, "compacted logs"
        )
    finally:
        for raft in rafts.values():
            raft.destroy()

    rafts = {i: _node(tmp_path, members, bootstrap, i) for i in range(4)}
    try:
        for raft in rafts.values():
            assert not raft.observer
            assert raft.members() == members  # ids, gRPC addresses and directory ids too
        leader = wait_for(
            lambda: next((r for r in rafts.values() if r.is_leader()), None), 15, "a leader"
        )
        leader.submit(RegisterGroups((("restarted", 0),)))
        wait_for(
            lambda: all("restarted" in r.machine.state.groups for r in rafts.values()),
            15,
            "every node applying writes",
        )
    finally:
        for raft in rafts.values():
            raft.destroy()
