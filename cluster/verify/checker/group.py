"""The verdict on a consumer group (``rafka verify --workload group``), from the `History`: the
members' reads, assignments and commits, judged against the final read of the log.

Checks:

- unconsumed      a record of the log (below the final high watermark) that no member of the
                  group was ever handed - an acknowledged one is a lost acknowledged write for the
                  group, any one a skip
- commit ahead    a member committed offset N of a partition while some record below N had not
                  yet been handed to any member (a crash right then would skip it)
- double owner    two members owning one partition at once: an ownership runs from the member's
                  assignment to its revocation (or loss, or its leaving or being killed), as the
                  member's own callbacks saw them, so with the eager protocol a partition is
                  revoked everywhere before it is assigned anywhere
- stale owner     (a figure within double owner) an overlap where one of the two had, by the
                  end of it, been told it was out of the group (the partitions lost, or a commit
                  refused as from an unknown or fenced member) and had no commit accepted during
                  it: a client that had not yet heard it was removed - the classic protocol's
                  own window (an answer late on the wire), or a coordinator that kept answering
                  a member another had removed (a split brain, the bug the zombie-leader nemesis
                  found). The history of the clients cannot tell the two apart, so both count.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

from cluster.verify.checker.produce import FinalRead
from cluster.verify.checker.txn import Verdict, examples
from cluster.verify.history import OK, History

_ENDS = ("left", "killed", "exit")
# A commit refused with one of these: the coordinator no longer counts the client a member
# (classic: unknown member, stale generation; KIP-848: fenced or stale member epoch).
_FENCED = ("UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "FENCED_MEMBER_EPOCH", "STALE_MEMBER_EPOCH")


def ownerships(history: History, group: str) -> list[tuple[int, str, float, float]]:
    """(partition, member, from, to) for every time a member owned a partition."""
    held: dict[tuple[str, int], float] = {}
    out: list[tuple[int, str, float, float]] = []
    ended: set[str] = set()
    for e in sorted((e for e in history.events if e.group == group), key=lambda e: e.t):
        if e.member in ended:
            continue  # a killed member's late callbacks: it did nothing after
        if e.kind == "assigned":
            for p in e.partitions:
                held.setdefault((e.member, p), e.t)
        elif e.kind in ("revoked", "lost", *_ENDS):
            gone = e.partitions if e.kind in ("revoked", "lost") else ()
            for (member, p), since in list(held.items()):
                if member == e.member and (not gone or p in gone):
                    out.append((p, member, since, e.t))
                    del held[(member, p)]
            if e.kind in _ENDS:
                ended.add(e.member)
    end = max((e.t for e in history.events), default=0.0)
    out += [(p, m, since, end) for (m, p), since in held.items()]
    return out


def check_group(history: History, final: FinalRead, group: str) -> Verdict:
    """Every check of the module docstring for ``group``."""
    v = Verdict()
    members = {e.member for e in history.events if e.group == group}
    first_read: dict[tuple[int, int], float] = {}
    for rd in history.reads:
        if rd.consumer in members:
            po = (rd.partition, rd.offset)
            first_read[po] = min(first_read.get(po, rd.t), rd.t)
    rel = history.rel

    acked = {(a.partition, a.offset) for a in history.attempts.values() if a.outcome == OK}
    unconsumed = sorted(po for po in final.records if po not in first_read)
    unconsumed_acked = [po for po in unconsumed if po in acked]
    unconsumed_other = [po for po in unconsumed if po not in acked]

    # Per partition, offsets in order with the latest first-read time up to each.
    ahead: list[str] = []
    offsets: dict[int, list[int]] = defaultdict(list)
    for p, o in sorted(final.records):
        offsets[p].append(o)
    prefix: dict[int, list[float]] = {}
    for p, os in offsets.items():
        worst, times = 0.0, []
        for o in os:
            worst = max(worst, first_read.get((p, o), float("inf")))
            times.append(worst)
        prefix[p] = times
    for e in history.events:
        if e.group != group or e.kind != "commit":
            continue
        for p, n in e.offsets:
            i = bisect.bisect_left(offsets.get(p, []), n)
            if i and prefix[p][i - 1] > e.t:
                below = offsets[p][:i]
                unread = next(o for o in below if first_read.get((p, o), float("inf")) > e.t)
                ahead.append(
                    f"{e.member} committed {p}/{n} @{rel(e.t)} before {p}/{unread} was handed "
                    f"to any member"
                )

    double, stale = owner_overlaps(history, group)

    for name, items in (
        ("acknowledged records the group never consumed", unconsumed_acked),
        ("other records of the log the group never consumed (skipped)", unconsumed_other),
        ("offsets committed ahead of what the group had processed", ahead),
        (
            f"times two members owned one partition at once ({len(stale)} with a stale owner, "
            "fenced)",
            double,
        ),
    ):
        if items:
            v.failures.append(f"{len(items)} {name}: {examples(items)}")
    commits = sum(1 for e in history.events if e.group == group and e.kind == "commit")
    kinds: dict[str, int] = defaultdict(int)
    for e in history.events:
        if e.group == group:
            kinds[e.kind] += 1
    v.figures.update(
        group_members=len(members),
        group_killed=kinds["killed"],
        group_consumed=len(first_read),
        group_unconsumed=len(unconsumed),
        group_commits=commits,
        group_commit_ahead=len(ahead),
        group_double_owner=len(double),
        group_stale_owner=len(stale),
    )
    events = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    v.lines.append(
        f"group {group}: {len(members)} members ({events}); "
        f"consumed {len(first_read)} of {len(final.records)} records, unconsumed {len(unconsumed)} "
        f"({len(unconsumed_acked)} acknowledged), commits ahead {len(ahead)}, double owners "
        f"{len(double)} ({len(stale)} with a stale owner)"
    )
    return v


def owner_overlaps(history: History, group: str) -> tuple[list[str], list[str]]:
    """The overlapping ownerships of one partition by two members: (all of them, those with a
    stale owner) - see the module docstring."""
    fenced: dict[str, list[float]] = defaultdict(list)  # member -> when it was told it was out
    accepted: dict[str, list[float]] = defaultdict(list)  # member -> its accepted commits
    for e in history.events:
        if e.group != group:
            continue
        if e.kind == "lost" or (e.kind == "commit-failed" and any(f in e.detail for f in _FENCED)):
            fenced[e.member].append(e.t)
        elif e.kind == "commit":
            accepted[e.member].append(e.t)

    def was_out(member: str, since: float, until: float) -> bool:
        """Told it was out by ``until`` (its ownership's end) and no commit of it accepted from
        ``since`` (the other's assignment) until then."""
        told = [t for t in fenced[member] if since <= t <= until]
        return bool(told) and not any(since <= t <= min(told) for t in accepted[member])

    double: list[str] = []
    stale: list[str] = []
    by_partition: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for p, member, since, until in ownerships(history, group):
        by_partition[p].append((since, until, member))
    rel = history.rel
    for p, spans in sorted(by_partition.items()):
        spans.sort()
        for i, (since, until, member) in enumerate(spans):
            for since2, until2, member2 in spans[i + 1 :]:
                if since2 >= until:
                    break
                if member2 == member:
                    continue
                what = (
                    f"partition {p}: {member} owned it {rel(since)}-{rel(until)}, {member2} "
                    f"from {rel(since2)}"
                )
                double.append(what)
                if was_out(member, since2, until) or was_out(member2, since2, until2):
                    stale.append(what)
    return double, stale
