"""The verdict on consume-transform-produce (``rafka verify --workload ctp``, workload/ctp.py),
from the final read_committed read and the group's committed offsets at the end (each input
record's transform must be in the output exactly when its offset was committed: they commit in
one transaction). The transactions' own checks are checker/txn.py's; cycles, checker/cycles.py.

Checks, per record of hop < HOPS in the final read_committed read (an input of the transform):

- offsets without writes   its offset is below the group's committed offset and no transform
                           of it is visible (Jepsen: a committed offset without its write - a
                           record lost to the pipeline)
- writes without offsets   a transform of it is visible but its offset is not committed (the
                           output committed, the offset commit lost: it would be transformed
                           again)
- duplicated transform     more than one transform of it visible (not exactly once)

and per visible transform: **orphan** - made from a record the read_committed read never
returned (the transformer was handed an aborted or lost record).
"""

from __future__ import annotations

from collections import defaultdict

from cluster.verify.checker.cycles import cycles, describe
from cluster.verify.checker.txn import Verdict, examples
from cluster.verify.history import History, head, hop_of, source_of
from cluster.verify.workload.ctp import HOPS


def check_ctp(history: History, final: str, group: str) -> Verdict:
    """Every check of the module docstring, then the dependency cycles."""
    v = Verdict()
    visible = {
        head(rd.value): (rd.partition, rd.offset, rd.value)
        for rd in history.reads
        if rd.consumer == final and rd.value is not None
    }
    transforms: dict[str, list[str]] = defaultdict(list)
    for h, (_p, _o, value) in visible.items():
        if hop_of(value) > 0:
            transforms[source_of(value)].append(h)
    snaps = [s for s in history.snapshots if s.group == group]
    if not snaps:
        v.failures.append(f"group {group}: its committed offsets were not read at the end")
    offsets = dict(snaps[-1].offsets) if snaps else {}

    without_writes, without_offsets, duplicated, orphans = [], [], [], []
    done = unprocessed = 0
    for h, (p, o, value) in sorted(visible.items(), key=lambda kv: kv[1][:2]):
        if hop_of(value) >= HOPS:
            continue
        out = transforms.get(h, [])
        below = o < offsets.get(p, -1)
        if below and not out:
            without_writes.append(
                f"{h!r} at {p}/{o}: offset {offsets[p]} committed, no transform visible"
            )
        elif out and not below:
            without_offsets.append(
                f"{h!r} at {p}/{o} transformed into {out}, committed offset {offsets.get(p)}"
            )
        if len(out) > 1:
            duplicated.append(f"{h!r} at {p}/{o} transformed into {out}")
        done += bool(out)
        unprocessed += not out and not below
    for src, outs in transforms.items():
        if src not in visible:
            orphans.append(f"{outs} made from {src!r}, which read_committed never returned")

    found = cycles(history, final)
    for name, items in (
        ("committed offsets without their transforms (lost to the pipeline)", without_writes),
        ("transforms committed without their offsets", without_offsets),
        ("records transformed more than once", duplicated),
        ("transforms of records read_committed never returned", orphans),
        ("dependency cycles between transactions", [describe(c) for c in found]),
    ):
        if items:
            v.failures.append(f"{len(items)} {name}: {examples(items)}")
    g0 = sum(1 for c in found if all(e.kind == "ww" for e in c))
    v.figures.update(
        ctp_transformed=done,
        ctp_unprocessed=unprocessed,
        ctp_offsets_without_writes=len(without_writes),
        ctp_writes_without_offsets=len(without_offsets),
        ctp_duplicated=len(duplicated),
        ctp_orphans=len(orphans),
        cycles_g0=g0,
        cycles_g1c=len(found) - g0,
    )
    v.lines.append(
        f"consume-transform-produce: {done} records transformed, {unprocessed} left unprocessed; "
        f"offsets without writes {len(without_writes)}, writes without offsets "
        f"{len(without_offsets)}, duplicated {len(duplicated)}, orphans {len(orphans)}; cycles "
        f"G0 {g0}, G1c {len(found) - g0}"
    )
    return v
