"""Random interleavings of producers, retries, fenced and out-of-order batches, snapshots,
truncations, restarts (clean or not) and failovers, on a leader and a follower fed the same
batches: every answer matches an independent model of Kafka's rules, and the live state, the
follower's state and any rebuild all equal the model's fold over the batches in the log."""

from __future__ import annotations

import tempfile
from collections import deque
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dataplane.log import LogConfig, StateStore
from dataplane.protocol.errors import ErrorCode
from dataplane.replica.producer_state import ProducerStateError, ProducerStateManager
from tests.unit.replica.producers import NEVER, NOW, Replica, export, headers, idem, plain

INT32_MAX = 2**31 - 1
PIDS = (1, 2, 3)


def wrap(seq: int) -> int:
    return seq - 2**31 if seq > INT32_MAX else seq


def model_fold(batches: list) -> dict[int, tuple]:
    """Producer state as a plain fold over the log's batch headers."""
    state: dict[int, list[Any]] = {}
    for b in batches:
        if b.producer_id < 0:
            continue
        entry = state.setdefault(b.producer_id, [-1, deque(maxlen=5), -1])
        if b.producer_epoch != entry[0]:
            entry[0], entry[1] = b.producer_epoch, deque(maxlen=5)
        last_seq = wrap(b.base_sequence + b.last_offset_delta)
        entry[1].append((b.base_sequence, last_seq, b.base_offset, b.last_offset, b.max_timestamp))
        entry[2] = b.max_timestamp
    return {pid: (e[0], tuple(e[1]), e[2], -1) for pid, e in state.items()}


def model_answer(state: dict[int, tuple], pid: int, epoch: int, first: int, count: int) -> Any:
    """Kafka's answer to a one-batch produce: "ok", ("dup", batch) or an error code."""
    entry = state.get(pid)
    if entry is None:
        return "ok"  # nothing known of the producer: any epoch, any sequence
    known_epoch, batches, _, _ = entry
    last = wrap(first + count - 1)
    if epoch == known_epoch:
        for b in batches:
            if (b[0], b[1]) == (first, last):
                return ("dup", b)
    if epoch < known_epoch:
        return ErrorCode.invalid_producer_epoch
    if epoch > known_epoch:
        return "ok" if first == 0 else ErrorCode.out_of_order_sequence_number
    prev = batches[-1][1] if batches else -1
    expected = 0 if prev == INT32_MAX else prev + 1
    return "ok" if first == expected else ErrorCode.out_of_order_sequence_number


produce_op = st.tuples(
    st.just("produce"),
    st.sampled_from(PIDS),
    st.sampled_from(["same", "same", "same", "bump", "older", "any"]),
    st.sampled_from(["next", "next", "next", "dup", "dup", "zero", "gap", "near_wrap"]),
    st.integers(1, 3),  # records
    st.integers(0, 7),  # which retry (0: the last batch) / epoch / wrap distance
)
ops = st.lists(
    st.one_of(
        produce_op,
        produce_op,
        produce_op,
        st.tuples(st.just("plain"), st.integers(1, 3)),
        st.tuples(st.just("snapshot")),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("reopen"), st.booleans(), st.booleans()),
        st.tuples(st.just("failover")),
    ),
    min_size=15,
    max_size=80,
)


class Scenario:
    def __init__(self, root: Path, store: StateStore) -> None:
        config = LogConfig(segment_bytes=900, index_interval_bytes=200)
        self.leader = Replica(root / "a", store, "a", config)
        self.follower = Replica(root / "b", store, "b", config)
        self.batches: list = []  # headers of what the log holds, in order
        self.clock = NOW

    def history(self, pid: int) -> list:
        return [b for b in self.batches if b.producer_id == pid]

    def produce(self, pid: int, epoch_how: str, seq_how: str, count: int, k: int) -> None:
        model = model_fold(self.batches)
        entry = model.get(pid)
        epoch = entry[0] if entry else 0
        last = entry[1][-1][1] if entry and entry[1] else -1
        history = self.history(pid)
        if seq_how == "dup" and history:
            b = history[-1 - k % len(history)]  # may be older than the last five
            epoch, first, count = b.producer_epoch, b.base_sequence, b.last_offset_delta + 1
        else:
            epoch = {
                "same": epoch,
                "bump": epoch + 1,
                "older": max(epoch - 1, 0),
                "any": k % 4,
            }[epoch_how]
            first = {
                "next": 0 if last == INT32_MAX else last + 1,
                "zero": 0,
                "dup": 0,
                "gap": wrap(last + 2 + k),
                "near_wrap": INT32_MAX - k % 4,
            }[seq_how]
        self.clock += 1
        expected = model_answer(model, pid, epoch, first, count)
        records = idem(pid, epoch, first, count, ts=self.clock)
        try:
            produced = self.leader.produce(records, self.clock)
        except ProducerStateError as e:  # the model says whether this produce is refused
            assert e.code == expected  # noqa: PT017
            event(f"refused {e.code.name}")
            return
        if produced.duplicate:
            assert expected[0] == "dup"
            original = expected[1]
            assert (produced.base_offset, produced.last_offset) == (original[2], original[3])
            event("duplicate")
            return
        assert expected == "ok"
        self.append_to_follower(produced.written)

    def append_to_follower(self, written: bytes) -> None:
        self.follower.replicate(written)
        self.batches.extend(headers(written))

    def plain(self, count: int) -> None:
        self.clock += 1
        self.append_to_follower(self.leader.produce(plain(count, self.clock)).written)

    def truncate(self, fraction: float) -> None:
        log = self.leader.log
        offset = log.log_start_offset + int(fraction * (log.log_end_offset - log.log_start_offset))
        for replica in (self.leader, self.follower):
            replica.truncate_to(offset)
        if self.leader.log.log_end_offset > self.leader.log.log_start_offset:
            event(f"truncated, {len(self.leader.producers.snapshot_offsets)} snapshots left")
        self.batches = [b for b in self.batches if b.last_offset < offset]

    def run(self, op: tuple) -> None:
        name, *args = op
        if name == "produce":
            self.produce(*args)
        elif name == "plain":
            self.plain(*args)
        elif name == "snapshot":
            self.leader.producers.snapshot()
        elif name == "truncate":
            self.truncate(*args)
        elif name == "reopen":
            clean, which = args
            (self.leader if which else self.follower).reopen(clean=clean)
        elif name == "failover":
            self.leader, self.follower = self.follower, self.leader

    def check(self) -> None:
        model = model_fold(self.batches)
        for replica in (self.leader, self.follower):
            assert [(b.base_offset, b.last_offset) for b in replica.log_batches()] == [
                (b.base_offset, b.last_offset) for b in self.batches
            ]
            assert replica.state() == model
            assert replica.producers.end_offset == replica.log.log_end_offset

    def check_rebuilds(self) -> None:
        model = model_fold(self.batches)
        for replica in (self.leader, self.follower):
            assert export(ProducerStateManager.load(replica.log, NEVER, now_ms=NOW)) == model
            replica.reopen(clean=False)
            assert replica.state() == model

    def close(self) -> None:
        self.leader.close()
        self.follower.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops)
def test_matches_the_model(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp, StateStore(Path(tmp) / "state") as store:
        scenario = Scenario(Path(tmp), store)
        try:
            for op in ops:
                scenario.run(op)
                scenario.check()
            scenario.check_rebuilds()
        finally:
            scenario.close()
