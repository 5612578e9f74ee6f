"""The transaction checker (cluster/verify/checker/txn.py) on hand-written histories: each anomaly
found with its example, and a clean history passing."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import KafkaError, KafkaException

from cluster.verify.checker.produce import FinalRead, Report, check
from cluster.verify.checker.txn import check_txns
from cluster.verify.history import ABORTED, COMMITTED, INFO, History, Txn
from cluster.verify.run import headline, table
from cluster.verify.workload.txn import TxnProducer

RC, FINAL = "live-rc", "final-rc"


def _txn(
    h: History,
    n: int,
    partitions: list[int],
    intent: str = COMMITTED,
    outcome: str | None = COMMITTED,
    t_commit: float = 10.0,
) -> Txn:
    """A transaction of producer ``p`` writing record ``p <n*10+i>`` to each partition."""
    txn = h.begin(f"p#{n}", "p")
    for i, part in enumerate(partitions):
        a = h.send("p", n * 10 + i, t=t_commit - 1, txn=txn.id)
        h.ack(a.value, part, n)
        txn.writes.append(a.value.decode())
    txn.intent, txn.t_commit = intent, h.t0 + t_commit
    if outcome is not None:
        h.end(txn, outcome)
    return txn


def _read(h: History, consumer: str, txn: Txn, index: int, offset: int, t: float = 20.0) -> None:
    value = txn.writes[index].encode()
    h.read(consumer, int(offset), offset, None, value, t=h.t0 + t)


def _check(h: History) -> tuple[list[str], dict[str, int]]:
    v = check_txns(h, {RC, FINAL}, FINAL)
    return v.failures, v.figures


def test_clean_history_passes() -> None:
    h = History()
    ok = _txn(h, 1, [0, 1])
    gone = _txn(h, 2, [0, 1], intent=ABORTED, outcome=ABORTED)
    unknown = _txn(h, 3, [2, 3], outcome=INFO)  # indeterminate and invisible: aborted
    for i in range(2):
        _read(h, FINAL, ok, i, i)
        _read(h, "live", gone, i, 5 + i)  # read_uncommitted may see aborted records
    assert unknown.writes
    failures, figures = _check(h)
    assert failures == []
    assert figures["txns_committed"] == 1
    assert figures["txns_aborted"] == 1
    assert figures["txns_indeterminate"] == 1


def test_aborted_read() -> None:
    h = History()
    deliberate = _txn(h, 1, [0, 1], intent=ABORTED, outcome=INFO)  # abort asked, no answer
    told = _txn(h, 2, [2, 3], outcome=ABORTED)  # commit asked, told aborted
    _read(h, RC, deliberate, 1, 7)
    _read(h, FINAL, told, 0, 8)
    failures, figures = _check(h)
    assert figures["txn_aborted_reads"] == 2
    assert failures[0].startswith("2 aborted reads")
    assert "live-rc read 'p 11' at 7/7" in failures[0]
    assert "txn p#1 (abort" in failures[0]


def test_dirty_read_before_the_commit_was_asked() -> None:
    h = History()
    txn = _txn(h, 1, [0], t_commit=30.0)
    _read(h, RC, txn, 0, 0, t=20.0)
    _read(h, FINAL, txn, 0, 0, t=40.0)
    failures, figures = _check(h)
    assert figures["txn_dirty_reads"] == 1
    assert len(failures) == 1
    assert "dirty reads" in failures[0]
    assert "'p 10' at 0/0 @20.00s" in failures[0]


def test_lost_committed_write_and_partial_visibility() -> None:
    h = History()
    txn = _txn(h, 1, [0, 1, 2])
    _read(h, FINAL, txn, 0, 0)
    _read(h, FINAL, txn, 2, 2)
    failures, figures = _check(h)
    assert figures["txn_lost"] == 1
    assert figures["txn_partial"] == 1
    assert any("lost" in f and "['p 11'] never read" in f for f in failures)
    assert any("in part" in f and "read ['p 10', 'p 12'], not ['p 11']" in f for f in failures)


def test_indeterminate_transaction_must_be_all_or_nothing() -> None:
    h = History()
    txn = _txn(h, 1, [0, 1], outcome=INFO)
    _read(h, FINAL, txn, 0, 0)
    failures, figures = _check(h)
    assert figures["txn_partial"] == 1
    assert figures["txn_lost"] == 0
    assert len(failures) == 1
    assert "txn p#1 (info)" in failures[0]


def test_duplicated_committed_write() -> None:
    h = History()
    txn = _txn(h, 1, [0])
    _read(h, FINAL, txn, 0, 0)
    _read(h, FINAL, txn, 0, 3)
    failures, figures = _check(h)
    assert figures["txn_duplicated"] == 1
    assert failures == [
        "1 transactions' records duplicated: final-rc read 'p 10' at [(0, 0), (3, 3)]"
    ]


def test_history_round_trip_keeps_transactions(tmp_path: Path) -> None:
    h = History()
    txn = _txn(h, 1, [0, 1], intent=ABORTED, outcome=ABORTED)
    _read(h, RC, txn, 0, 0)
    h.dump(tmp_path / "h.jsonl")
    failures, _ = _check(History.load(tmp_path / "h.jsonl"))
    assert len(failures) == 1
    assert "aborted reads" in failures[0]


def test_produce_checks_allow_transaction_markers_when_not_dense() -> None:
    """A commit marker takes an offset no consumer is handed: skipped / holes only when dense."""
    h = History()
    txn = _txn(h, 0, [0])  # 'p 0' acknowledged at 0/0; its marker at 0/1
    second = h.send("p", 1, txn="p#9")
    h.ack(second.value, 0, 2)
    final = FinalRead({(0, 0): (None, b"p 0"), (0, 2): (None, b"p 1")}, {0: 0}, {0: 3}, {}, True)
    _read(h, RC, txn, 0, 0)
    h.read(RC, 0, 2, None, b"p 1")
    assert check(h, final, dense=False).failures == []
    dense = check(h, final).failures
    assert any("skipped" in f for f in dense)
    assert any("holes" in f for f in dense)


def test_table_counts_transactions() -> None:
    r = Report(figures={"attempted": 9, "acknowledged": 9, "seconds": 60})
    r.figures |= {"txns": 5, "txns_committed": 3, "txns_aborted": 1, "txns_indeterminate": 1}
    rows = table([("kill-leader", r)]).splitlines()
    assert "| txns committed / aborted / indeterminate |" in rows[0]
    assert rows[2] == "| kill-leader | 1.0 | 0 | 9 | 9 | 0 | 0 | 0.0s | 3 / 1 / 1 | 0 |"
    assert headline(r).endswith("(committed 3, aborted 1, indeterminate 1)")


class _FatalProducer:
    """A producer in a fatal state: flush raises, as librdkafka's does (found in a ctp run: the
    worker's thread died in the flush, and the history's lock with it)."""

    def __init__(self) -> None:
        self.purged = False

    def purge(self) -> None:
        self.purged = True

    def flush(self, _timeout: float) -> int:
        raise KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, "invalid state", fatal=True))

    def abort_transaction(self, _timeout: float) -> None:
        raise KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, "invalid state", fatal=True))


def test_a_failed_transaction_drops_its_producer_without_flushing() -> None:
    """A fatal error, or an abort that fails: the producer is purged and dropped, no flush (its
    records stay indeterminate), and the worker goes on with a new producer."""
    for error in (
        KafkaError(KafkaError._FENCED, "fenced", fatal=True),
        KafkaError(KafkaError.REQUEST_TIMED_OUT, "timed out"),
    ):
        h = History()
        worker = TxnProducer(
            h, "127.0.0.1:1", "t", "w", partitions=2, rate=1.0, abort_ratio=0.0, seed=0
        )
        stub = _FatalProducer()
        worker._producer = stub  # type: ignore[assignment]
        txn = h.begin("w#1", "w")
        txn.t_commit = h.t0 + 1
        worker._failed(txn, KafkaException(error))
        assert stub.purged
        assert worker._producer is None
        assert txn.outcome == INFO  # a commit was asked: it may have happened
