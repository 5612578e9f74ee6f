"""The consumer-group checker (cluster/verify/checker/group.py) on hand-written histories: each
anomaly found with its example, and a clean history passing."""

from __future__ import annotations

from cluster.verify.checker.group import check_group, ownerships
from cluster.verify.checker.produce import FinalRead, Report
from cluster.verify.history import History, MemberEvent
from cluster.verify.run import table

G = "g"


def _history(records: int = 4) -> tuple[History, FinalRead]:
    """``records`` acknowledged records at 0/0.. of partition 0, and the final read of them."""
    h = History(t0=0.0)
    final = FinalRead({}, {0: 0}, {0: records}, {}, True)
    for o in range(records):
        a = h.send("p", o, t=0.0)
        h.ack(a.value, 0, o, t=0.0)
        final.records[(0, o)] = (a.key, a.value)
    return h, final


def _event(
    h: History,
    member: str,
    kind: str,
    t: float,
    *parts: int,
    offsets: tuple[tuple[int, int], ...] = (),
    detail: str = "",
) -> None:
    h.event(MemberEvent(G, member, kind, t, tuple(parts), offsets, detail))


def _read(h: History, member: str, offset: int, t: float) -> None:
    h.read(member, 0, offset, None, f"p {offset}".encode(), t=t)


def test_clean_history_passes() -> None:
    h, final = _history()
    _event(h, "a", "assigned", 1.0, 0)
    _read(h, "a", 0, 2.0)
    _read(h, "a", 1, 2.0)
    _event(h, "a", "commit", 3.0, offsets=((0, 2),))
    _event(h, "a", "revoked", 4.0, 0)
    _event(h, "b", "assigned", 5.0, 0)
    _read(h, "b", 2, 6.0)
    _read(h, "b", 3, 6.0)
    _event(h, "b", "commit", 7.0, offsets=((0, 4),))
    v = check_group(h, final, G)
    assert v.failures == []
    assert v.figures["group_consumed"] == 4


def test_unconsumed_record() -> None:
    h, final = _history(3)
    _event(h, "a", "assigned", 1.0, 0)
    _read(h, "a", 0, 2.0)
    _read(h, "a", 2, 2.0)
    v = check_group(h, final, G)
    assert v.failures == ["1 acknowledged records the group never consumed: (0, 1)"]


def test_commit_ahead_of_processing() -> None:
    h, final = _history(3)
    _event(h, "a", "assigned", 1.0, 0)
    _read(h, "a", 0, 2.0)
    _event(h, "a", "commit", 3.0, offsets=((0, 3),))  # 0/1 and 0/2 not handed over yet
    _read(h, "a", 1, 4.0)
    _read(h, "a", 2, 4.0)
    v = check_group(h, final, G)
    assert v.figures["group_commit_ahead"] == 1
    assert "a committed 0/3 @3.00s before 0/1 was handed to any member" in v.failures[0]


def test_two_owners_at_once() -> None:
    h, final = _history(1)
    _event(h, "a", "assigned", 1.0, 0)
    _event(h, "b", "assigned", 2.0, 0)  # before a's revocation
    _event(h, "a", "revoked", 3.0, 0)
    _read(h, "b", 0, 4.0)
    v = check_group(h, final, G)
    assert v.failures == [
        "1 times two members owned one partition at once (0 with a stale owner, fenced): "
        "partition 0: a owned it 1.00s-3.00s, b from 2.00s"
    ]


UNKNOWN_MEMBER = 'KafkaError{code=UNKNOWN_MEMBER_ID,val=25,str="Commit failed: Unknown member"}'


def test_a_member_the_coordinator_had_removed_is_a_stale_owner() -> None:
    """The packet-loss case: b's SyncGroup answer of an old generation arrives after a took the
    partition in the next one; b's first commit is refused, and it reports the partition lost.
    Still two owners (the clients' history cannot tell it from a split-brain coordinator), shown
    as one with a stale owner."""
    h, final = _history(1)
    _event(h, "a", "assigned", 1.0, 0)
    _read(h, "a", 0, 1.5)
    _event(h, "a", "commit", 1.6, offsets=((0, 1),))
    _event(h, "b", "assigned", 2.0, 0)
    _read(h, "b", 0, 2.1)
    _event(h, "b", "commit-failed", 2.5, 0, detail=UNKNOWN_MEMBER)
    _event(h, "b", "lost", 2.5, 0)
    v = check_group(h, final, G)
    assert v.failures == [
        "1 times two members owned one partition at once (1 with a stale owner, fenced): "
        "partition 0: a owned it 1.00s-2.50s, b from 2.00s"
    ]
    assert (v.figures["group_double_owner"], v.figures["group_stale_owner"]) == (1, 1)


def test_an_owner_whose_commit_was_accepted_was_not_stale() -> None:
    """A commit the coordinator accepted during the overlap proves it still counted the member:
    its later refusal does not make it a stale owner."""
    h, final = _history(1)
    _event(h, "a", "assigned", 1.0, 0)
    _event(h, "b", "assigned", 2.0, 0)
    _event(h, "a", "commit", 2.2, offsets=((0, 1),))
    _event(h, "a", "commit-failed", 2.5, 0, detail=UNKNOWN_MEMBER)
    _event(h, "a", "lost", 2.5, 0)
    _read(h, "b", 0, 3.0)
    v = check_group(h, final, G)
    assert (v.figures["group_double_owner"], v.figures["group_stale_owner"]) == (1, 0)


def test_a_killed_member_owns_nothing_after_its_death() -> None:
    h, _final = _history(1)
    _event(h, "a", "assigned", 1.0, 0)
    _event(h, "a", "killed", 2.0)
    _event(h, "b", "assigned", 3.0, 0)
    _event(h, "a", "revoked", 9.0, 0)  # its client noticed late: ignored
    assert sorted(ownerships(h, G)) == [(0, "a", 1.0, 2.0), (0, "b", 3.0, 9.0)]


def test_table_has_the_group_columns() -> None:
    r = Report(figures={"attempted": 9, "acknowledged": 9, "seconds": 60})
    r.figures |= {"group_members": 7, "group_killed": 2, "group_commits": 40}
    r.figures |= {"group_unconsumed": 0, "group_commit_ahead": 0, "group_double_owner": 0}
    r.figures |= {"group_stale_owner": 1}
    rows = table([("kill-leader", r)]).splitlines()
    assert (
        "| members (killed) | commits | never consumed | commits ahead | two owners "
        "| stale owners fenced |" in rows[0]
    )
    assert rows[2] == (
        "| kill-leader | 1.0 | 0 | 9 | 9 | 0 | 0 | 0.0s | 7 (2) | 40 | 0 | 0 | 0 | 1 | 0 |"
    )
