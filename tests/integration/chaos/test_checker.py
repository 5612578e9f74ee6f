"""The checker against hand-made histories and replica logs: each anomaly it must catch, caught;
a clean history, passed. No cluster: these run in milliseconds."""

from __future__ import annotations

from pathlib import Path

from cluster.verify.checker.produce import (
    FinalRead,
    ReplicaLog,
    check,
    read_replica_logs,
)
from cluster.verify.history import History, ProducerInfo, record_value
from tests.unit.log.batches import make_batch


def _history(idempotent: bool = True, n: int = 10) -> tuple[History, FinalRead]:
    """Producer "p" wrote records 0..n-1, all acked at offsets 0..n-1 of partition 0, and the
    live consumer and the final read saw exactly that."""
    h = History()
    h.add_producer(ProducerInfo("p", "test", idempotent, "all"))
    records: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
    for i in range(n):
        a = h.send("p", i)
        h.ack(a.value, 0, i)
        h.read("live", 0, i, a.key, a.value)
        records[(0, i)] = (a.key, a.value)
    final = FinalRead(records, {0: 0}, {0: n}, {0: (1,)}, True)
    return h, final


def _failures(h: History, final: FinalRead, replicas: dict | None = None) -> str:
    report = check(h, final, replicas)
    return "\n".join(report.failures)


def test_clean_history_passes() -> None:
    h, final = _history()
    report = check(h, final)
    assert report.ok, report.text()
    assert report.figures["acknowledged"] == 10
    assert report.figures["lost"] == 0


def test_lost_and_moved_writes() -> None:
    h, final = _history()
    del final.records[(0, 3)]
    final.records[(0, 3)] = final.records.pop((0, 4))  # record 4 now sits at offset 3
    failures = _failures(h, final)
    assert "acknowledged records lost" in failures  # record 3: nowhere
    assert "not at their acknowledged offset" in failures  # record 4: at offset 3
    assert "offsets hold different records" in failures  # offset 3: record 3 (ack) vs 4 (read)


def test_duplicates_fail_only_for_idempotent_producers() -> None:
    for idempotent in (True, False):
        h, final = _history(idempotent)
        final.records[(0, 10)] = final.records[(0, 2)]
        final.high[0] = 11
        report = check(h, final)
        assert report.figures["duplicated"] == 1
        assert ("idempotent producers duplicated" in "\n".join(report.failures)) == idempotent


def test_reordered_acks_of_an_idempotent_producer() -> None:
    h, final = _history()
    a, b = h.attempts[record_value("p", 1)], h.attempts[record_value("p", 2)]
    a.offset, b.offset = 2, 1
    final.records[(0, 1)], final.records[(0, 2)] = final.records[(0, 2)], final.records[(0, 1)]
    assert "out of send order" in _failures(h, final)


def test_consumer_anomalies() -> None:
    h, final = _history()
    h.read("live", 0, 4, b"k", record_value("p", 4))  # backwards after offset 9
    assert "offsets went backwards" in _failures(h, final)

    h, final = _history()
    h.reads = [r for r in h.reads if r.offset != 5]  # the live consumer jumped 4 -> 6
    assert "skipped offsets" in _failures(h, final)


def test_aborted_and_phantom_reads() -> None:
    h, final = _history()
    failed = h.send("p", 99)
    h.fail(failed.value, "_PURGE_QUEUE", definite=True)
    h.read("live", 0, 10, failed.key, failed.value)
    h.read("live", 0, 11, b"x", b"nobody 1")
    failures = _failures(h, final)
    assert "definitely failed" in failures
    assert "nobody sent" in failures


def test_indeterminate_writes_may_or_may_not_appear() -> None:
    h, final = _history()
    maybe = h.send("p", 10)
    h.fail(maybe.value, "_MSG_TIMED_OUT", definite=False)
    never = h.send("p", 11)
    h.finish()  # no answer at all: indeterminate
    final.records[(0, 10)] = (maybe.key, maybe.value)
    final.high[0] = 11
    h.read("live", 0, 10, maybe.key, maybe.value)
    report = check(h, final)
    assert report.ok, report.text()
    assert report.figures["indeterminate"] == 2
    assert report.figures["indeterminate_in_log"] == 1
    assert h.attempts[never.value].error == "no answer"


def test_holes_in_the_final_read() -> None:
    h, final = _history()
    final.high[0] = 12  # the log claims 12 records, 2 never came back
    assert "holes below the high watermark" in _failures(h, final)


def _write_log(root: Path, broker: str, partition: int, batches: list[bytes]) -> None:
    d = root / broker / f"chaos-{partition}"
    d.mkdir(parents=True)
    (d / f"{0:020d}.log").write_bytes(b"".join(batches))


def _replicated(tmp_path: Path, diverge: bool) -> tuple[dict[int, dict[str, ReplicaLog]], list]:
    values = [record_value("p", i) for i in range(10)]
    first = make_batch(values[:5], base_offset=0, partition_leader_epoch=0)
    second = make_batch(values[5:], base_offset=5, partition_leader_epoch=0)
    other = make_batch([b"p 5", *values[6:9], b"p 77"], base_offset=5, partition_leader_epoch=1)
    _write_log(tmp_path, "broker-1", 0, [first, second])
    _write_log(tmp_path, "broker-2", 0, [first, other if diverge else second])
    _write_log(tmp_path, "broker-3", 0, [first])  # a lagging replica: not a divergence
    return read_replica_logs(tmp_path, "chaos"), values


def test_replicas_that_agree(tmp_path: Path) -> None:
    replicas, _ = _replicated(tmp_path, diverge=False)
    assert {b: lg.log_end for b, lg in replicas[0].items()} == {
        "broker-1": 10,
        "broker-2": 10,
        "broker-3": 5,
    }
    h, final = _history()
    final.isr[0] = (1, 2)
    report = check(h, final, replicas)
    assert report.ok, report.text()


def test_missing_replicas(tmp_path: Path) -> None:
    replicas, _ = _replicated(tmp_path, diverge=False)
    h, final = _history()
    assert check(h, final, replicas, replication_factor=3).ok
    del replicas[0]["broker-3"]
    report = check(h, final, replicas, replication_factor=3)
    assert "fewer than 3 replicas on disk" in "\n".join(report.failures)


def test_replicas_that_diverge_below_the_high_watermark(tmp_path: Path) -> None:
    replicas, _ = _replicated(tmp_path, diverge=True)
    h, final = _history()
    failures = _failures(h, final, replicas)
    assert "replica batches diverge" in failures
    assert "offsets hold different records" in failures  # offset 9: "p 9" vs "p 77"


def test_short_isr_replica_and_torn_or_corrupt_batches(tmp_path: Path) -> None:
    replicas, _ = _replicated(tmp_path, diverge=False)
    h, final = _history()
    final.isr[0] = (1, 3)  # broker-3 ends at 5 < high watermark 10
    assert "in-sync replicas ending before the high watermark" in _failures(h, final, replicas)

    seg = tmp_path / "broker-1" / "chaos-0" / f"{0:020d}.log"
    data = bytearray(seg.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's records: CRC mismatch
    seg.write_bytes(bytes(data) + data[:30])  # plus a torn tail
    replicas = read_replica_logs(tmp_path, "chaos")
    assert replicas[0]["broker-1"].torn_bytes == 30
    assert "corrupt batches on disk" in _failures(h, final, replicas)


def test_history_round_trips_through_json(tmp_path: Path) -> None:
    h, _ = _history()
    h.fault("kill-leader", "broker-1", (0,), "leader of 0")
    h.note("hello")
    h.dump(tmp_path / "h.jsonl")
    back = History.load(tmp_path / "h.jsonl")
    assert back.attempts.keys() == h.attempts.keys()
    assert back.reads == h.reads
    assert back.faults[0].partitions == (0,)
    assert back.producers == h.producers
