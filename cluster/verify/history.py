"""A recorded history of a verify run, Jepsen-style: what every client asked, what it was told,
what every consumer saw and when every fault struck, with wall-clock times (time.time(), s).

- `Attempt`: one produce of one record, from the call to its outcome: ``ok`` (acknowledged, with
  partition and offset), ``fail`` (a *definite* failure: the record cannot have been written, e.g.
  it never left the client), or ``info`` (indeterminate: a timeout, a lost connection, an error
  after a send that may have been appended - or no answer at all by the end of the run). A
  transactional send names its transaction.
- `Txn`: one transaction of a transactional producer: what it consumed, what it wrote, the input
  offsets it committed, and its outcome (committed, aborted, or indeterminate).
- `Read`: one record delivered to a consumer (partition, offset, key, value, which consumer).
- `MemberEvent`: a consumer group member's life: started, partitions assigned / revoked / lost,
  offsets committed, left, killed. `OffsetSnapshot`: a group's committed offsets as the broker
  answered them at some time.
- `Fault`: one nemesis action: when it struck, when it was healed, when the cluster was whole
  again, and which partitions it was expected to hit.

Each record's value is ``b"<producer> <seq>"`` (``|<payload>`` may follow), unique in a run and
self-describing, so a read maps back to its attempt without any other bookkeeping. The history
is thread-safe (producers, consumers and the nemesis write to it from their own threads) and is
dumped to / loaded from JSON lines for a post-mortem.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

OK = "ok"
FAIL = "fail"
INFO = "info"


def record_value(producer: str, seq: int, payload: str = "") -> bytes:
    return f"{producer} {seq}{'|' + payload if payload else ''}".encode()


def record_key(producer: str, seq: int) -> bytes:
    return f"{producer}-{seq}".encode()


def parse_value(value: bytes | None) -> tuple[str, int] | None:
    """(producer, seq) of a value written by the workload, or None for anything else."""
    if value is None:
        return None
    name, _, seq = value.decode("latin-1").partition("|")[0].rpartition(" ")
    return (name, int(seq)) if name and seq.isdigit() else None


def payload_of(value: bytes | None) -> str:
    """The ``|<payload>`` part of a value ("" if none)."""
    return "" if value is None else value.decode("latin-1").partition("|")[2]


def head(value: bytes | None) -> str:
    """A value without its payload: ``<producer> <seq>``, unique in a run."""
    return "" if value is None else value.decode("latin-1").partition("|")[0]


def hop_of(value: bytes | None) -> int:
    """How many transforms made this record (consume-transform-produce: payload ``<hop>:<source
    value>``; 0 for anything else)."""
    hop = payload_of(value).partition(":")[0]
    return int(hop) if hop.isdigit() else 0


def source_of(value: bytes | None) -> str:
    """The value a transformed record was made from ("" for a seed)."""
    return payload_of(value).partition(":")[2]


@dataclass
class Attempt:
    producer: str
    seq: int
    key: bytes
    value: bytes
    t_send: float
    outcome: str | None = None  # OK / FAIL / INFO; None while unanswered
    partition: int = -1
    offset: int = -1
    t_done: float | None = None
    error: str = ""
    txn: str = ""  # the transaction it was sent in ("" for none)


COMMITTED = "commit"
ABORTED = "abort"


@dataclass
class Txn:
    """One transaction: begun, records consumed and written, input offsets committed with it
    (partition -> next offset to consume), then a commit or an abort requested at ``t_commit``
    and answered at ``t_end``. ``outcome``: COMMITTED / ABORTED when the client was told so,
    INFO when it was not (the commit may or may not have happened)."""

    id: str  # "<worker>#<n>"
    worker: str
    t_begin: float
    reads: list[tuple[int, int, str]] = field(default_factory=list)  # (partition, offset, value)
    writes: list[str] = field(default_factory=list)  # values (latin-1), see the attempts
    offsets: dict[int, int] = field(default_factory=dict)
    intent: str = COMMITTED  # what the worker asked for: COMMITTED or ABORTED
    t_commit: float | None = None
    t_end: float | None = None
    outcome: str | None = None
    error: str = ""


@dataclass(frozen=True)
class MemberEvent:
    """``kind``: start, assigned, revoked, lost, commit, commit-failed, left, killed, exit."""

    group: str
    member: str
    kind: str
    t: float
    partitions: tuple[int, ...] = ()
    offsets: tuple[tuple[int, int], ...] = ()  # commit: (partition, next offset)
    detail: str = ""


@dataclass(frozen=True)
class OffsetSnapshot:
    group: str
    t: float  # when the answer came
    offsets: tuple[tuple[int, int], ...]  # (partition, committed offset); absent: none


@dataclass(frozen=True)
class Read:
    consumer: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    t: float


@dataclass
class Fault:
    kind: str  # e.g. "kill-leader", "kill-broker", "pause-follower", "kill-meta-leader"
    target: str  # node name, e.g. "broker-2"
    partitions: tuple[int, ...]  # partitions expected to stall; () = every partition
    t_start: float
    t_heal: float | None = None  # restarted / resumed
    t_recovered: float | None = None  # every partition led by a live broker again
    detail: str = ""


@dataclass(frozen=True)
class ProducerInfo:
    name: str
    client: str  # e.g. "confluent-kafka 2.x", "java 4.3.0"
    idempotent: bool
    acks: str
    note: str = ""


@dataclass(frozen=True)
class Note:
    t: float
    text: str


@dataclass
class History:
    t0: float = field(default_factory=time.time)
    t_stop: float | None = None  # when the producers were told to stop (then they drain)
    producers: dict[str, ProducerInfo] = field(default_factory=dict)
    attempts: dict[bytes, Attempt] = field(default_factory=dict)  # by value
    reads: list[Read] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    txns: dict[str, Txn] = field(default_factory=dict)
    events: list[MemberEvent] = field(default_factory=list)
    snapshots: list[OffsetSnapshot] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    # -- recording ---------------------------------------------------------------------------

    def add_producer(self, info: ProducerInfo) -> None:
        with self._lock:
            self.producers[info.name] = info

    def send(
        self,
        producer: str,
        seq: int,
        t: float | None = None,
        *,
        key: bytes | None = None,
        payload: str = "",
        txn: str = "",
    ) -> Attempt:
        attempt = Attempt(
            producer,
            seq,
            record_key(producer, seq) if key is None else key,
            record_value(producer, seq, payload),
            time.time() if t is None else t,
            txn=txn,
        )
        with self._lock:
            self.attempts[attempt.value] = attempt
        return attempt

    def ack(self, value: bytes, partition: int, offset: int, t: float | None = None) -> None:
        with self._lock:
            attempt = self._attempt(value)
            if attempt.outcome not in (None, OK):
                self._note(f"{value!r}: acknowledged after {attempt.outcome} ({attempt.error})")
            elif attempt.outcome == OK and (attempt.partition, attempt.offset) != (
                partition,
                offset,
            ):
                self._note(
                    f"{value!r}: acknowledged twice, at {attempt.partition}/{attempt.offset} "
                    f"and {partition}/{offset}"
                )
                return
            attempt.outcome, attempt.partition, attempt.offset = OK, partition, offset
            attempt.t_done = time.time() if t is None else t
            attempt.error = ""

    def fail(self, value: bytes, error: str, definite: bool, t: float | None = None) -> None:
        with self._lock:
            attempt = self._attempt(value)
            if attempt.outcome == OK:
                self._note(f"{value!r}: failure ({error}) reported after its ack; kept the ack")
                return
            if attempt.outcome == INFO and definite:
                return  # an earlier maybe-written outcome stands
            attempt.outcome = FAIL if definite else INFO
            attempt.t_done = time.time() if t is None else t
            attempt.error = error

    def read(
        self,
        consumer: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        t: float | None = None,
    ) -> None:
        rec = Read(consumer, partition, offset, key, value, time.time() if t is None else t)
        with self._lock:
            self.reads.append(rec)

    def fault(
        self, kind: str, target: str, partitions: tuple[int, ...] = (), detail: str = ""
    ) -> Fault:
        f = Fault(kind, target, tuple(partitions), time.time(), detail=detail)
        with self._lock:
            self.faults.append(f)
        return f

    def note(self, text: str) -> None:
        with self._lock:
            self._note(text)

    def begin(self, txn_id: str, worker: str) -> Txn:
        txn = Txn(txn_id, worker, time.time())
        with self._lock:
            self.txns[txn_id] = txn
        return txn

    def end(self, txn: Txn, outcome: str, error: str = "") -> None:
        """The client's answer to the commit or abort (INFO: none, or an unknown outcome)."""
        with self._lock:
            txn.outcome, txn.error, txn.t_end = outcome, error, time.time()

    def event(self, event: MemberEvent) -> None:
        with self._lock:
            self.events.append(event)

    def snapshot(self, group: str, offsets: dict[int, int], t: float | None = None) -> None:
        snap = OffsetSnapshot(
            group, time.time() if t is None else t, tuple(sorted(offsets.items()))
        )
        with self._lock:
            self.snapshots.append(snap)

    def finish(self) -> None:
        """End of the run: what never got an answer is indeterminate."""
        now = time.time()
        with self._lock:
            for attempt in self.attempts.values():
                if attempt.outcome is None:
                    attempt.outcome, attempt.t_done, attempt.error = INFO, now, "no answer"
            for txn in self.txns.values():
                if txn.outcome is None:
                    txn.outcome, txn.t_end, txn.error = INFO, now, txn.error or "no answer"

    def _attempt(self, value: bytes) -> Attempt:
        attempt = self.attempts.get(value)
        if attempt is None:  # an outcome for a send we did not see: record it anyway
            parsed = parse_value(value) or (value.decode("latin-1"), -1)
            attempt = Attempt(parsed[0], parsed[1], b"", value, time.time())
            self.attempts[value] = attempt
            self._note(f"{value!r}: outcome without a recorded send")
        return attempt

    def _note(self, text: str) -> None:
        self.notes.append(Note(time.time(), text))

    # -- views -------------------------------------------------------------------------------

    def by_outcome(self, outcome: str) -> list[Attempt]:
        return [a for a in self.attempts.values() if a.outcome == outcome]

    def rel(self, t: float | None) -> str:
        """A time as seconds since the start of the run, for printing."""
        return "-" if t is None else f"{t - self.t0:.2f}s"

    # -- persistence -------------------------------------------------------------------------

    def dump(self, path: Path) -> None:
        """JSON lines: {"type": ..., ...}; bytes as latin-1 strings."""
        with self._lock, path.open("w") as out:
            out.write(json.dumps({"type": "start", "t0": self.t0, "t_stop": self.t_stop}) + "\n")
            for p in self.producers.values():
                out.write(json.dumps({"type": "producer", **asdict(p)}) + "\n")
            for a in self.attempts.values():
                out.write(json.dumps({"type": "attempt", **_strs(asdict(a))}) + "\n")
            for r in self.reads:
                out.write(json.dumps({"type": "read", **_strs(asdict(r))}) + "\n")
            for f in self.faults:
                out.write(json.dumps({"type": "fault", **asdict(f)}) + "\n")
            for n in self.notes:
                out.write(json.dumps({"type": "note", **asdict(n)}) + "\n")
            for t in self.txns.values():
                out.write(json.dumps({"type": "txn", **asdict(t)}) + "\n")
            for e in self.events:
                out.write(json.dumps({"type": "event", **asdict(e)}) + "\n")
            for s in self.snapshots:
                out.write(json.dumps({"type": "offsets", **asdict(s)}) + "\n")

    @classmethod
    def load(cls, path: Path) -> History:
        h = cls()
        for line in path.read_text().split("\n"):
            if not line.strip():
                continue
            obj = json.loads(line)
            kind = obj.pop("type")
            if kind == "start":
                h.t0, h.t_stop = obj["t0"], obj.get("t_stop")
            elif kind == "producer":
                h.producers[obj["name"]] = ProducerInfo(**obj)
            elif kind == "attempt":
                a = Attempt(**_bytes(obj, ("key", "value")))
                h.attempts[a.value] = a
            elif kind == "read":
                h.reads.append(Read(**_bytes(obj, ("key", "value"))))
            elif kind == "fault":
                h.faults.append(Fault(**{**obj, "partitions": tuple(obj["partitions"])}))
            elif kind == "note":
                h.notes.append(Note(**obj))
            elif kind == "txn":
                obj["reads"] = [tuple(r) for r in obj["reads"]]
                obj["offsets"] = {int(p): o for p, o in obj["offsets"].items()}
                h.txns[obj["id"]] = Txn(**obj)
            elif kind == "event":
                obj["partitions"] = tuple(obj["partitions"])
                obj["offsets"] = tuple(tuple(x) for x in obj["offsets"])
                h.events.append(MemberEvent(**obj))
            elif kind == "offsets":
                obj["offsets"] = tuple(tuple(x) for x in obj["offsets"])
                h.snapshots.append(OffsetSnapshot(**obj))
        return h


def _strs(d: dict) -> dict:
    return {k: v.decode("latin-1") if isinstance(v, bytes) else v for k, v in d.items()}


def _bytes(d: dict, keys: tuple[str, ...]) -> dict:
    return {k: (v.encode("latin-1") if k in keys and v is not None else v) for k, v in d.items()}
