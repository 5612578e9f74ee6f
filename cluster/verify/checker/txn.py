"""The verdict on the transactions of a run (``rafka verify --workload txn``), from the `History`
alone: every transaction's writes, its outcome as the client was told it, and what the
read_committed readers were handed (a live one throughout, and a final read after the run).

Checks (Jepsen's names for Kafka transactions):

- aborted read    a read_committed reader was handed a record of an aborted transaction (one the
                  client asked to abort, or was told was aborted)
- dirty read      a read_committed reader was handed a transaction's record before the client
                  even asked to commit it (the last stable offset ran ahead of the transaction)
- lost write      a committed transaction's record missing from the final read_committed read
- duplicated      a transaction's record at more than one offset in a read_committed read
- partial         the final read_committed read holds some but not all records of a transaction
                  that may have committed (committed, or indeterminate: all or nothing)

A record the reader sees of an indeterminate transaction means it committed; then it must be
whole. Reads of a read_uncommitted reader are judged only by the produce checker (an aborted
transaction's records stay in the log, at their acknowledged offsets).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from cluster.verify.history import ABORTED, COMMITTED, INFO, History, Txn


@dataclass
class Verdict:
    """A checker's part of the report: its failures, figures and summary lines."""

    failures: list[str] = field(default_factory=list)
    figures: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)


def aborted(txn: Txn) -> bool:
    """Certainly aborted: the client asked for an abort (the coordinator can then only abort),
    or was told the transaction was aborted."""
    return txn.intent == ABORTED or txn.outcome == ABORTED


def examples(items: list, n: int = 3) -> str:
    return "; ".join(str(i) for i in items[:n]) + (" ..." if len(items) > n else "")


def check_txns(history: History, committed_readers: set[str], final: str) -> Verdict:
    """Judge every transaction of ``history``; ``committed_readers`` names the read_committed
    consumers (``final`` among them: the read after the run, which must see every committed
    transaction whole)."""
    v = Verdict()
    txns = list(history.txns.values())
    txn_of: dict[str, Txn] = {w: t for t in txns for w in t.writes}
    rel = history.rel

    aborted_reads: list[str] = []
    dirty: list[str] = []
    at: dict[tuple[str, str], set[tuple[int, int]]] = defaultdict(set)  # (reader, value) -> po
    for rd in history.reads:
        if rd.consumer not in committed_readers or rd.value is None:
            continue
        value = rd.value.decode("latin-1")
        txn = txn_of.get(value)
        if txn is None:
            continue
        at[(rd.consumer, value)].add((rd.partition, rd.offset))
        where = f"{rd.consumer} read {value!r} at {rd.partition}/{rd.offset} @{rel(rd.t)}"
        if aborted(txn):
            aborted_reads.append(
                f"{where} of txn {txn.id} ({txn.intent} asked @{rel(txn.t_commit)}, told "
                f"{txn.outcome} {txn.error})".rstrip()
            )
        elif txn.t_commit is None or rd.t < txn.t_commit:
            dirty.append(f"{where}; txn {txn.id} asked to commit only @{rel(txn.t_commit)}")
    duplicated = [
        f"{reader} read {value!r} at {sorted(pos)}"
        for (reader, value), pos in at.items()
        if len(pos) > 1
    ]

    lost: list[str] = []
    partial: list[str] = []
    for txn in txns:
        if aborted(txn) or not txn.writes:
            continue
        seen = [w for w in txn.writes if (final, w) in at]
        missing = [w for w in txn.writes if (final, w) not in at]
        if txn.outcome == COMMITTED and missing:
            lost.append(f"txn {txn.id} committed @{rel(txn.t_end)}: {missing} never read")
        if seen and missing:
            partial.append(f"txn {txn.id} ({txn.outcome}): read {seen}, not {missing}")

    for name, items in (
        (
            "aborted reads (a read_committed reader saw an aborted transaction's record)",
            aborted_reads,
        ),
        ("dirty reads (a record read before its transaction's commit was asked)", dirty),
        ("committed transactions' records lost (not in the final read_committed read)", lost),
        ("transactions' records duplicated", duplicated),
        ("transactions visible in part at the end", partial),
    ):
        if items:
            v.failures.append(f"{len(items)} {name}: {examples(items)}")

    outcomes = Counter(
        "aborted" if aborted(t) else "committed" if t.outcome == COMMITTED else "indeterminate"
        for t in txns
    )
    deliberate = sum(1 for t in txns if t.intent == ABORTED)
    info_seen = sum(
        1
        for t in txns
        if t.outcome == INFO and not aborted(t) and any((final, w) in at for w in t.writes)
    )
    v.figures.update(
        txns=len(txns),
        txns_committed=outcomes["committed"],
        txns_aborted=outcomes["aborted"],
        txns_aborted_deliberately=deliberate,
        txns_indeterminate=outcomes["indeterminate"],
        txn_aborted_reads=len(aborted_reads),
        txn_dirty_reads=len(dirty),
        txn_lost=len(lost),
        txn_duplicated=len(duplicated),
        txn_partial=len(partial),
    )
    v.lines.append(
        f"transactions: {len(txns)}  committed {outcomes['committed']}  aborted "
        f"{outcomes['aborted']} ({deliberate} deliberately)  indeterminate "
        f"{outcomes['indeterminate']} ({info_seen} of them visible, i.e. committed)  aborted "
        f"reads {len(aborted_reads)}  dirty reads {len(dirty)}  lost {len(lost)}  duplicated "
        f"{len(duplicated)}  partial {len(partial)}"
    )
    return v
