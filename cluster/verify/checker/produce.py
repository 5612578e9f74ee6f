"""The verdict on a run of the produce workload: Kafka's promise for acks=all
(min.insync.replicas=2, unclean leader election off), checked against the `History`, a final
read and every replica's disk.

Inputs:

- `final_read` (cluster up): every partition read from the earliest offset to its high watermark
  through a client, i.e. from the leader; recorded in the history as consumer ``final``.
- `read_replica_logs` (cluster stopped): every replica's segment files under each broker's
  ``log.dirs``, walked read-only with the batch helpers of `dataplane.log.batch` (CRC checked,
  records decoded here).

Checks (the names follow Jepsen's Kafka/Redpanda/Bufstream analyses):

- lost            an acknowledged record is not at its acknowledged offset in the final read
                  (``moved`` if it is elsewhere: the broker lied about its offset)
- inconsistent    one (partition, offset) holds two different records across acks, reads of any
                  consumer and the replicas' logs below the high watermark
- replica diverge two replicas hold different batch bytes (attributes..end, the CRC'd part) or
                  different batch boundaries for an offset below the high watermark
- short ISR       a replica in the final ISR whose log ends before the high watermark
- corrupt         a batch with a bad CRC below the high watermark on some replica
- duplicated      a value at more than one offset: a failure for an idempotent producer, counted
                  otherwise
- reordered       an idempotent producer's acked records in one partition with offsets out of
                  its send order (idempotence promises order)
- aborted read    a consumer read a record whose produce *definitely* failed
- phantom         a consumer read a record no producer sent
- nonmonotonic    a consumer was handed offsets that do not strictly increase per partition
- skipped         a consumer jumped over offsets (no transactions, no compaction: offsets are dense)
- holes           the final read misses offsets between the log start and the high watermark

Figures: records attempted / acknowledged / definitely failed / indeterminate (and how many of
those made it into the log) / read / lost / duplicated, and unavailability: the longest gap
between successful acks over the run and, per fault, on the partitions it was expected to hit.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from cluster.verify.history import FAIL, INFO, OK, History, parse_value
from dataplane.log.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    RecordError,
    batch_size_at,
    check_batch,
    header_at,
)
from dataplane.log.records import decode_records

_CRC_PART = 21  # batch bytes from `attributes` on are covered by the CRC
FINAL = "final"


# ---------------------------------------------------------------------------------- final read


@dataclass
class FinalRead:
    records: dict[tuple[int, int], tuple[bytes | None, bytes | None]]  # (p, o) -> (key, value)
    low: dict[int, int]
    high: dict[int, int]  # high watermark per partition, asked before reading
    isr: dict[int, tuple[int, ...]]
    complete: bool  # reached every high watermark before the timeout


def final_read(
    history: History,
    bootstrap: str,
    topic: str,
    partitions: int,
    isr: dict[int, tuple[int, ...]] | None = None,
    timeout_s: float = 60.0,
    isolation: str = "read_uncommitted",
    name: str = FINAL,
    upto: dict[int, int] | None = None,
) -> FinalRead:
    """Everything from the earliest offset up to the high watermark of each partition (or
    ``upto``: read_committed, whose own watermark query answers the last stable offset), at
    ``isolation``, recorded as consumer ``name``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "chaos-final",  # no group is joined: assign only
            "logger": logging.getLogger("verify.rdkafka"),  # its chatter: not to stderr
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "isolation.level": isolation,
        }
    )
    deadline = time.monotonic() + timeout_s
    low: dict[int, int] = {}
    high: dict[int, int] = {}
    for p in range(partitions):
        while True:
            try:
                low[p], high[p] = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=5
                )
                high[p] = (upto or high).get(p, high[p])
                break
            except Exception as e:
                if time.monotonic() > deadline:
                    consumer.close()
                    raise TimeoutError(
                        f"final read: no watermarks of {topic}-{p} within {timeout_s:.0f}s "
                        f"({e}); the partition's leader does not answer ListOffsets"
                    ) from e
                time.sleep(0.2)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    records: dict[tuple[int, int], tuple[bytes | None, bytes | None]] = {}
    position = dict.fromkeys(range(partitions), 0)
    while time.monotonic() < deadline and any(position[p] < high[p] for p in high):
        for m in consumer.consume(1000, 0.5):
            if m.error() is not None:
                continue
            part, o = m.partition(), m.offset()
            assert part is not None and o is not None  # a record, not an error
            history.read(name, part, o, m.key(), m.value())
            records[(part, o)] = (m.key(), m.value())
            position[part] = max(position[part], o + 1)
        for tp in consumer.position(tps):  # also past control records the client skipped
            position[tp.partition] = max(position[tp.partition], tp.offset)
    consumer.close()
    complete = all(position[p] >= high[p] for p in high)
    return FinalRead(records, low, high, isr or {}, complete)


# ------------------------------------------------------------------------------- replica logs


@dataclass
class Batch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    body: bytes  # attributes..end: the bytes the CRC covers
    crc_ok: bool
    records: list[tuple[int, bytes | None, bytes | None]]  # (offset, key, value)


@dataclass
class ReplicaLog:
    broker: str
    partition: int
    batches: list[Batch] = field(default_factory=list)
    torn_bytes: int = 0  # an incomplete batch at a segment's end
    errors: list[str] = field(default_factory=list)

    @property
    def log_end(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0


def read_replica_logs(
    data_dir: Path, topic: str, more_dirs: dict[str, list[Path]] | None = None
) -> dict[int, dict[str, ReplicaLog]]:
    """partition -> broker name -> its replica's log, from ``<data_dir>/broker-*/<topic>-<p>``
    and the other log directories of each broker in ``more_dirs`` (by broker name).

    Read-only: plain reads of the ``.log`` files, nothing opened through PartitionLog (which
    recovers and writes state). Run it on a stopped cluster (or a copy of its data dir).
    """
    dirs: dict[str, list[Path]] = defaultdict(list)
    for broker_dir in sorted(Path(data_dir).glob("broker-*")):
        dirs[broker_dir.name].append(broker_dir)
    for broker, extra in (more_dirs or {}).items():
        dirs[broker] += extra
    out: dict[int, dict[str, ReplicaLog]] = defaultdict(dict)
    for broker, log_dirs in sorted(dirs.items()):
        for pdir in sorted(p for d in log_dirs for p in d.glob(f"{topic}-*")):
            name, _, index = pdir.name.rpartition("-")
            if name != topic or not index.isdigit() or not pdir.is_dir():
                continue
            rlog = ReplicaLog(broker, int(index))
            for segment in sorted(pdir.glob("*.log")):
                _read_segment(segment, rlog)
            out[int(index)][broker] = rlog
    return dict(out)


def _read_segment(path: Path, rlog: ReplicaLog) -> None:
    data = memoryview(path.read_bytes())
    pos = 0
    while pos < len(data):
        if len(data) - pos < LOG_OVERHEAD or pos + batch_size_at(data, pos) > len(data):
            rlog.torn_bytes += len(data) - pos
            return
        size = batch_size_at(data, pos)
        try:
            info = check_batch(data, pos)
            crc_ok = True
        except RecordError as e:
            rlog.errors.append(f"{path.name} @{pos}: {e}")
            if size < HEADER_SIZE:
                return
            info, crc_ok = header_at(data, pos), False
        raw = bytes(data[pos : pos + size])
        try:
            recs = _records(raw) if crc_ok else []
        except Exception as e:  # undecodable records despite a good CRC
            rlog.errors.append(f"{path.name} @{pos}: records: {e}")
            recs = []
        rlog.batches.append(
            Batch(
                info.base_offset,
                info.last_offset,
                info.partition_leader_epoch,
                raw[_CRC_PART:],
                crc_ok,
                recs,
            )
        )
        pos += size


def _records(batch: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of each record of one v2 batch."""
    return [(r.offset, r.key, r.value) for r in decode_records(batch)]


# ------------------------------------------------------------------------------------ verdict


@dataclass
class Report:
    failures: list[str] = field(default_factory=list)
    figures: dict[str, object] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)  # the printable report

    @property
    def ok(self) -> bool:
        return not self.failures

    def text(self) -> str:
        verdict = "OK" if self.ok else f"FAILED ({len(self.failures)} checks)"
        out = [*self.lines, f"verdict: {verdict}"]
        out += [f"  FAIL {f}" for f in self.failures]
        return "\n".join(out)


def _examples(items: list, n: int = 5) -> str:
    return ", ".join(str(i) for i in items[:n]) + (" ..." if len(items) > n else "")


def check(  # noqa: C901 - every check of the module docstring, in one pass
    history: History,
    final: FinalRead,
    replicas: dict[int, dict[str, ReplicaLog]] | None = None,
    replication_factor: int | None = None,
    dense: bool = True,
    resuming: frozenset[str] = frozenset(),
) -> Report:
    """Every check of the module docstring; figures and failures in the returned `Report`.
    With ``replication_factor``, also that every partition has that many replicas on disk (so a
    run that silently went unreplicated cannot pass as a replicated one). ``dense=False``
    (transactions: their markers take offsets no consumer is handed) leaves out the skipped
    and holes checks. ``resuming`` names consumers that start from committed offsets and move
    between partitions (a group's members): left out of the nonmonotonic and skipped checks (the
    group checker judges them)."""
    r = Report()
    attempts = list(history.attempts.values())
    acked = [a for a in attempts if a.outcome == OK]
    idempotent = {n for n, p in history.producers.items() if p.idempotent}

    # Every value the final read holds, with where.
    final_at: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for (p, o), (_k, v) in final.records.items():
        if v is not None:
            final_at[v].append((p, o))

    if not final.complete:
        r.failures.append(
            f"final read did not reach the high watermarks {final.high} before its timeout"
        )

    # -- lost / moved ----------------------------------------------------------------------
    lost: list[tuple] = []
    moved: list[tuple] = []
    for a in acked:
        got = final.records.get((a.partition, a.offset))
        if got is not None and got[1] == a.value:
            continue
        where = final_at.get(a.value)
        item = (a.value.decode(), a.partition, a.offset, where)
        (moved if where else lost).append(item)
    if lost:
        r.failures.append(f"{len(lost)} acknowledged records lost: {_examples(lost)}")
    if moved:
        r.failures.append(
            f"{len(moved)} acknowledged records not at their acknowledged offset: "
            f"{_examples(moved)}"
        )

    # -- one record per (partition, offset) everywhere ----------------------------------------
    seen: dict[tuple[int, int], dict[bytes | None, str]] = defaultdict(dict)
    for a in acked:
        seen[(a.partition, a.offset)].setdefault(a.value, f"ack:{a.producer}")
    for rd in history.reads:
        seen[(rd.partition, rd.offset)].setdefault(rd.value, f"read:{rd.consumer}")
    for po, (_k, v) in final.records.items():
        seen[po].setdefault(v, "read:final")
    for p, logs in (replicas or {}).items():
        hw = final.high.get(p, 0)
        for broker, rlog in logs.items():
            for b in rlog.batches:
                for o, _k, v in b.records:
                    if o < hw:
                        seen[(p, o)].setdefault(v, f"disk:{broker}")
    inconsistent = [(po, list(vs.values())) for po, vs in seen.items() if len(vs) > 1]
    if inconsistent:
        r.failures.append(
            f"{len(inconsistent)} offsets hold different records: {_examples(inconsistent)}"
        )

    # -- replicas agree below the high watermark ---------------------------------------------
    diverge: list[tuple] = []
    corrupt: list[tuple] = []
    short_isr: list[tuple] = []
    replica_ends: dict[int, dict[str, int]] = {}
    for p, logs in sorted((replicas or {}).items()):
        hw = final.high.get(p, 0)
        replica_ends[p] = {b: lg.log_end for b, lg in sorted(logs.items())}
        for broker, rlog in logs.items():
            corrupt += [(broker, p, b.base_offset) for b in rlog.batches if not b.crc_ok]
            corrupt += [(broker, p, e) for e in rlog.errors]
            if int(broker.rpartition("-")[2]) in final.isr.get(p, ()) and rlog.log_end < hw:
                short_isr.append((broker, p, rlog.log_end, hw))
        names = sorted(logs)
        for i, a_name in enumerate(names):
            for b_name in names[i + 1 :]:
                diverge += _diverging(p, hw, logs[a_name], logs[b_name])
    if replicas is not None and replication_factor is not None:
        few = {p: sorted(replicas.get(p, {})) for p in final.high}
        few = {p: b for p, b in few.items() if len(b) < replication_factor}
        if few:
            r.failures.append(
                f"partitions with fewer than {replication_factor} replicas on disk: {few}"
            )
    if diverge:
        r.failures.append(f"{len(diverge)} replica batches diverge: {_examples(diverge)}")
    if corrupt:
        r.failures.append(f"{len(corrupt)} corrupt batches on disk: {_examples(corrupt)}")
    if short_isr:
        r.failures.append(
            f"in-sync replicas ending before the high watermark: {_examples(short_isr)}"
        )

    # -- duplicates, order ------------------------------------------------------------------
    dups = {v: where for v, where in final_at.items() if len(where) > 1}
    dup_by_producer: Counter[str] = Counter()
    for v in dups:
        parsed = parse_value(v)
        dup_by_producer[parsed[0] if parsed else "?"] += 1
    bad_dups = [
        (v.decode(), w) for v, w in dups.items() if (parse_value(v) or ("?",))[0] in idempotent
    ]
    if bad_dups:
        r.failures.append(
            f"{len(bad_dups)} records of idempotent producers duplicated: {_examples(bad_dups)}"
        )
    reordered: Counter[str] = Counter()
    for name in history.producers:
        per_part: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for a in acked:
            if a.producer == name:
                per_part[a.partition].append((a.seq, a.offset))
        for pairs in per_part.values():
            pairs.sort()
            reordered[name] += sum(1 for x, y in itertools.pairwise(pairs) if y[1] < x[1])
    bad_order = {n: c for n, c in reordered.items() if c and n in idempotent}
    if bad_order:
        r.failures.append(f"idempotent producers' acks out of send order: {bad_order}")

    # -- what consumers saw ------------------------------------------------------------------
    by_value = history.attempts
    aborted: set[tuple] = set()
    phantom: set[tuple] = set()
    for rd in history.reads:
        sent = by_value.get(rd.value) if rd.value is not None else None
        if sent is None:
            phantom.add((rd.consumer, rd.partition, rd.offset, rd.value))
        elif sent.outcome == FAIL:
            aborted.add((sent.value.decode(), sent.error))
    if aborted:
        r.failures.append(
            f"{len(aborted)} records read whose produce definitely failed: "
            f"{_examples(sorted(aborted))}"
        )
    if phantom:
        r.failures.append(
            f"{len(phantom)} records read that nobody sent: {_examples(list(phantom))}"
        )
    nonmono: list[tuple] = []
    skips: list[tuple] = []
    last: dict[tuple[str, int], int] = {}
    for rd in history.reads:
        if rd.consumer in resuming:
            continue
        k = (rd.consumer, rd.partition)
        prev = last.get(k)
        if prev is not None and rd.offset <= prev:
            nonmono.append((rd.consumer, rd.partition, prev, rd.offset))
        elif dense and prev is not None and rd.offset > prev + 1:
            skips.append((rd.consumer, rd.partition, prev, rd.offset))
        elif dense and prev is None and rd.offset > final.low.get(rd.partition, 0):
            skips.append((rd.consumer, rd.partition, None, rd.offset))
        last[k] = rd.offset if prev is None else max(prev, rd.offset)
    if nonmono:
        r.failures.append(
            f"{len(nonmono)} times a consumer's offsets went backwards: {_examples(nonmono)}"
        )
    if skips:
        r.failures.append(f"{len(skips)} times a consumer skipped offsets: {_examples(skips)}")
    holes = []
    for p, hw in final.high.items():
        have = {o for (q, o) in final.records if q == p}
        missing = [o for o in range(final.low.get(p, 0), hw) if o not in have]
        if missing:
            holes.append((p, len(missing), missing[:3]))
    if holes and final.complete and dense:
        r.failures.append(f"final read has holes below the high watermark: {_examples(holes)}")

    # -- figures ------------------------------------------------------------------------------
    info = [a for a in attempts if a.outcome == INFO]
    failed = [a for a in attempts if a.outcome == FAIL]
    info_in_log = sum(1 for a in info if a.value in final_at)
    live_values = {rd.value for rd in history.reads if rd.consumer != FINAL}
    unseen_live = sum(1 for a in acked if a.value not in live_values)
    f = r.figures
    f.update(
        attempted=len(attempts),
        acknowledged=len(acked),
        failed=len(failed),
        indeterminate=len(info),
        indeterminate_in_log=info_in_log,
        read_live=len([rd for rd in history.reads if rd.consumer != FINAL]),
        read_final=len(final.records),
        lost=len(lost) + len(moved),
        duplicated=len(dups),
        unseen_by_live_consumer=unseen_live,
        faults=[fault.kind for fault in history.faults],
    )
    lines = r.lines
    lines.append(
        f"records: attempted {len(attempts)}  acknowledged {len(acked)}  definitely failed "
        f"{len(failed)}  indeterminate {len(info)} ({info_in_log} of them in the log)"
    )
    lines.append(
        f"read: live consumer {f['read_live']} (acked but unseen {unseen_live})  final "
        f"{len(final.records)}  lost {f['lost']}  duplicated {len(dups)} "
        f"{dict(dup_by_producer) if dups else ''}"
    )
    for name, prod in history.producers.items():
        mine = [a for a in attempts if a.producer == name]
        c = Counter(a.outcome for a in mine)
        errs = Counter(a.error.split(":")[0] for a in mine if a.outcome in (FAIL, INFO))
        lines.append(
            f"  {name:9} {prod.client}, idempotent={prod.idempotent} {prod.note}: sent "
            f"{len(mine)} ok {c[OK]} fail {c[FAIL]} info {c[INFO]} dup "
            f"{dup_by_producer[name]} reordered {reordered[name]}"
            + (f"  errors {dict(errs.most_common(3))}" if errs else "")
        )
    lines.append("high watermarks: " + " ".join(f"{p}:{h}" for p, h in sorted(final.high.items())))
    if replica_ends:
        lines.append(
            "replica log ends: "
            + "  ".join(
                f"{p}:" + ",".join(f"{b[-1]}={e}" for b, e in ends.items())
                for p, ends in replica_ends.items()
            )
        )
    lines += _availability(history, final, f)
    for n in history.notes[:20]:
        lines.append(f"note {history.rel(n.t)}: {n.text}")
    if len(history.notes) > 20:
        lines.append(f"... {len(history.notes) - 20} more notes")
    return r


def _diverging(p: int, hw: int, a: ReplicaLog, b: ReplicaLog) -> list[tuple]:
    """Batches below ``hw`` that both replicas hold but not identically."""
    out = []
    b_by_base = {x.base_offset: x for x in b.batches}
    b_end = b.log_end
    b_bases = sorted(b_by_base)
    for x in a.batches:
        if x.base_offset >= hw or x.base_offset >= b_end:
            continue
        y = b_by_base.get(x.base_offset)
        if y is None:
            if b_bases and x.base_offset >= b_bases[0]:
                out.append((p, a.broker, b.broker, x.base_offset, "batch boundaries differ"))
            continue
        if x.last_offset != y.last_offset or x.body != y.body:
            out.append((p, a.broker, b.broker, x.base_offset, "bytes differ"))
    return out


def _availability(history: History, final: FinalRead, figures: dict) -> list[str]:
    """Longest gap between acks over the run, and per fault on the partitions it hit."""
    # While the producers were sending: the drain after the stop is not counted.
    stop = history.t_stop if history.t_stop is not None else float("inf")
    acks = sorted(
        (a.t_done, a.partition)
        for a in history.attempts.values()
        if a.outcome == OK and a.t_done is not None and a.t_done <= stop
    )
    if len(acks) < 2:
        return ["availability: fewer than two acks"]
    times = [t for t, _ in acks]
    gaps = [(b - a, a) for a, b in itertools.pairwise(times)]
    longest, at = max(gaps)
    figures["longest_ack_gap_s"] = round(longest, 3)
    out = [
        f"availability: longest gap between any two acks {longest:.2f}s (from {history.rel(at)}),"
        " per fault on the partitions it hit:"
    ]
    per_part: dict[int, list[float]] = defaultdict(list)
    for t, p in acks:
        per_part[p].append(t)
    end = min(times[-1], stop)
    faults = sorted(history.faults, key=lambda f: f.t_start)
    stalls = []
    for i, fault in enumerate(faults):
        window_end = faults[i + 1].t_start if i + 1 < len(faults) else end
        parts = fault.partitions or tuple(sorted(final.high))
        worst = 0.0
        first_after = 0.0
        for p in parts:
            ts = per_part.get(p, [])
            for a, b in itertools.pairwise(ts):
                # the part of each ack-less interval that falls inside this fault's window
                worst = max(worst, min(b, window_end) - max(a, fault.t_start))
            # first ack of a record *sent* after the fault, on this partition
            firsts = [
                at.t_done
                for at in history.attempts.values()
                if at.outcome == OK
                and at.partition == p
                and at.t_send >= fault.t_start
                and at.t_done is not None
                and at.t_done <= stop
            ]
            if firsts:
                first_after = max(first_after, min(firsts) - fault.t_start)
        stalls.append(worst)
        healed = "-" if fault.t_heal is None else f"{fault.t_heal - fault.t_start:.2f}s"
        whole = "-" if fault.t_recovered is None else f"{fault.t_recovered - fault.t_start:.2f}s"
        out.append(
            f"  fault {history.rel(fault.t_start):>8} {fault.kind:16} {fault.target:8} "
            f"partitions {list(parts)}: longest ack gap {worst:.2f}s, first ack of a later send "
            f"{first_after:.2f}s, healed +{healed}, whole +{whole}  ({fault.detail})"
        )
    if stalls:
        figures["fault_ack_gaps_s"] = [round(s, 3) for s in stalls]
    return out
