"""The dependency-cycle checker (cluster/verify/checker/cycles.py) and the consume-transform-produce
checker (checker/ctp.py) on hand-written histories: a G0 cycle, a G1c cycle, clean histories
(concurrent transactions interleaving is not a cycle), and each pipeline anomaly."""

from __future__ import annotations

from cluster.verify.checker.ctp import check_ctp
from cluster.verify.checker.cycles import (
    WR,
    Edge,
    cycles,
    describe,
    example_cycle,
    strongly_connected,
)
from cluster.verify.history import COMMITTED, History, Txn

FINAL = "final-rc"
GROUP = "g"


def _txn(
    h: History,
    txn_id: str,
    t: tuple[float, float],
    writes: list[tuple[int, int]],
    reads: list[tuple[int, int, str]] | None = None,
    payload: str = "",
) -> Txn:
    """A committed transaction begun at t[0], its commit answered at t[1], whose writes are
    seen by the final read at (partition, offset)."""
    txn = h.begin(txn_id, txn_id.split("#")[0])
    txn.t_begin, txn.t_commit = t[0], t[1]
    txn.reads = list(reads or [])
    for seq, (p, o) in enumerate(writes):
        attempt = h.send(txn_id, seq, t=t[0], txn=txn_id, payload=payload)
        h.ack(attempt.value, p, o, t=t[1])
        txn.writes.append(attempt.value.decode("latin-1"))
        h.read(FINAL, p, o, attempt.key, attempt.value, t=10.0)
    h.end(txn, COMMITTED)
    txn.t_end = t[1]
    return txn


def test_tarjan_finds_components() -> None:
    def e(a: str, b: str) -> Edge:
        return Edge(a, b, WR, "")

    graph = {"a": [e("a", "b")], "b": [e("b", "c")], "c": [e("c", "a"), e("c", "d")], "d": []}
    assert sorted(sorted(c) for c in strongly_connected(graph)) == [["a", "b", "c"], ["d"]]
    cycle = example_cycle(graph, ["a", "b", "c"])
    assert [(x.src, x.dst) for x in cycle] == [("a", "b"), ("b", "c"), ("c", "a")]


def test_g0_write_cycle() -> None:
    """T1 committed before T2 began, yet T2's record precedes T1's on partition 1."""
    h = History(t0=0.0)
    _txn(h, "t1#1", (1.0, 2.0), [(0, 0), (1, 1)])
    _txn(h, "t2#1", (3.0, 4.0), [(0, 1), (1, 0)])
    found = cycles(h, FINAL)
    assert len(found) == 1
    text = describe(found[0])
    assert text.startswith("G0: t1#1 -ww-> t2#1 (partition 0: t1#1 at 0, t2#1 at 1) -ww-> t1#1")


def test_concurrent_transactions_interleaving_is_no_cycle() -> None:
    """The same log, but the two transactions overlapped in time: Kafka orders their records
    in no particular way."""
    h = History(t0=0.0)
    _txn(h, "t1#1", (1.0, 4.0), [(0, 0), (1, 1)])
    _txn(h, "t2#1", (2.0, 5.0), [(0, 1), (1, 0)])
    assert cycles(h, FINAL) == []


def test_g1c_circular_information_flow() -> None:
    """Each transaction consumed a record the other wrote."""
    h = History(t0=0.0)
    t1 = _txn(h, "t1#1", (1.0, 2.0), [(0, 0)])
    t2 = _txn(h, "t2#1", (1.5, 2.5), [(1, 0)], reads=[(0, 0, "t1#1 0")])
    t1.reads.append((1, 0, t2.writes[0]))
    found = cycles(h, FINAL)
    assert len(found) == 1
    assert describe(found[0]).startswith("G1c: t1#1 -wr-> t2#1 (t2#1 read 't1#1 0' at 0/0)")


def test_clean_pipeline() -> None:
    """A seed, its transform and the transform's transform (hop 2: not transformed again),
    each committed with the offset of what it was made from: exactly once, no cycle."""
    h = History(t0=0.0)
    _txn(h, "seed#1", (1.0, 2.0), [(0, 0)])
    _txn(h, "ctp#1", (3.0, 4.0), [(1, 0)], reads=[(0, 0, "seed#1 0")], payload="1:seed#1 0")
    _txn(
        h, "ctp#2", (5.0, 6.0), [(2, 0)], reads=[(1, 0, "ctp#1 0|1:seed#1 0")], payload="2:ctp#1 0"
    )
    h.snapshot(GROUP, {0: 1, 1: 1, 2: 1}, t=7.0)
    v = check_ctp(h, FINAL, GROUP)
    assert v.failures == []
    assert v.figures["ctp_transformed"] == 2
    assert v.figures["cycles_g1c"] == 0


def test_pipeline_anomalies() -> None:
    """Offset committed without the transform, a transform without its offset, a record
    transformed twice, a transform of a record never committed."""
    h = History(t0=0.0)
    _txn(h, "seed#1", (1.0, 2.0), [(0, 0), (0, 1), (1, 0)])
    _txn(h, "ctp#1", (3.0, 4.0), [(2, 0), (2, 1)], payload="1:seed#1 2")
    _txn(h, "ctp#2", (5.0, 6.0), [(2, 2)], payload="1:seed#1 9")
    h.snapshot(GROUP, {0: 2}, t=7.0)
    v = check_ctp(h, FINAL, GROUP)
    assert [f.split(":")[0] for f in v.failures] == [
        "2 committed offsets without their transforms (lost to the pipeline)",
        "1 transforms committed without their offsets",
        "1 records transformed more than once",
        "1 transforms of records read_committed never returned",
    ]
