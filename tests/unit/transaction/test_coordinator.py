"""The transaction coordinator's flows (Kafka's TransactionCoordinator semantics) on an
in-memory `__transaction_state` with a fake marker sender."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from dataplane.protocol.errors import ErrorCode
from dataplane.transaction import state_manager
from dataplane.transaction.state import MAX_EPOCH, TransactionState

from .harness import Counter, FakeMarkers, Log, coordinator, settle

E = ErrorCode
S = TransactionState
TID = "txn-1"
TP = [("out", 0), ("out", 1)]


def age(runtime, *transactional_ids: str, ms: int = 10) -> None:
    """Move the transactions' clocks back `ms` (as if that much time had passed)."""
    for tid in transactional_ids:
        meta = runtime.shard(tid).transactions[tid]
        meta.txn_start_timestamp -= ms
        meta.txn_last_update_timestamp -= ms


def run(test: Callable[..., Awaitable[None]], **kwargs) -> None:
    async def main() -> None:
        c, runtime, markers = coordinator(**kwargs)
        async with anyio.create_task_group() as tg:
            tg.start_soon(c.run)
            await test(c, runtime, markers)
            tg.cancel_scope.cancel()

    anyio.run(main)


def test_init_commit_abort_tv1() -> None:
    async def test(c, runtime, markers) -> None:
        code, pid, epoch = await c.init_producer_id(TID, 60_000)
        assert (code, pid, epoch) == (E.none, 1000, 0)
        assert await c.add_partitions(TID, pid, epoch, TP) == dict.fromkeys(TP, E.none)
        assert await c.add_offsets(TID, pid, epoch, "group") == E.none
        meta = runtime.shard(TID).transactions[TID]
        assert meta.state == S.ONGOING
        assert len(meta.partitions) == 3
        assert await c.end_txn(TID, pid, epoch, commit=True, tv2=False) == (E.none, -1, -1)
        await settle()
        assert markers.written[-1][:4] == (1000, 0, True, 5)
        assert {tp[0] for tp in markers.written[-1][4]} == {"out", "__consumer_offsets"}
        assert meta.state == S.COMPLETE_COMMIT
        assert not meta.partitions
        # a retried commit is fine; an abort of it is not
        assert await c.end_txn(TID, pid, epoch, commit=True, tv2=False) == (E.none, -1, -1)
        assert (await c.end_txn(TID, pid, epoch, commit=False, tv2=False))[0] == (
            E.invalid_txn_state
        )
        # next transaction, aborted
        await c.add_partitions(TID, pid, epoch, TP[:1])
        assert (await c.end_txn(TID, pid, epoch, commit=False, tv2=False))[0] == E.none
        await settle()
        assert markers.written[-1][2] is False
        assert meta.state == S.COMPLETE_ABORT

    run(test)


def test_tv2_bumps_epoch_each_transaction() -> None:
    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 60_000)
        await c.add_partitions(TID, pid, epoch, TP)
        assert await c.end_txn(TID, pid, epoch, commit=True, tv2=True) == (E.none, pid, 1)
        await settle()
        assert markers.written[-1][:3] == (pid, 1, True)  # markers at the bumped epoch
        # a retry (old epoch) answers the current id and epoch
        assert await c.end_txn(TID, pid, 0, commit=True, tv2=True) == (E.none, pid, 1)
        # abort with nothing open still bumps (TV2)
        assert await c.end_txn(TID, pid, 1, commit=False, tv2=True) == (E.none, pid, 2)
        await settle()
        assert markers.written[-1][4] == ()
        # the old epoch is fenced now
        assert (await c.add_partitions(TID, pid, 1, TP))[TP[0]] == E.producer_fenced
        assert runtime.shard(TID).transactions[TID].client_transaction_version == 2

    run(test)


def test_tv2_abort_right_after_commit_waits_for_its_markers() -> None:
    """TV2: the producer's next EndTxn (an abort of a transaction it sent nothing in) comes
    at the epoch the commit answered, while that commit's markers are being written. It is
    answered once they are, with the epoch bumped again; it used to be PRODUCER_FENCED
    (PrepareCommit admits only a retry, one epoch lower; Kafka's KAFKA-18464)."""

    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 60_000)
        await c.add_partitions(TID, pid, epoch, TP)
        markers.gate = anyio.Event()
        assert await c.end_txn(TID, pid, epoch, commit=True, tv2=True) == (E.none, pid, 1)
        await settle()
        results: list[tuple[int, int, int]] = []

        async def abort() -> None:
            results.append(await c.end_txn(TID, pid, 1, commit=False, tv2=True))

        async with anyio.create_task_group() as tg:
            tg.start_soon(abort)
            await settle()
            assert not results  # parked while PrepareCommit waits for its markers
            markers.gate.set()
        assert results == [(E.none, pid, 2)]
        await settle()
        meta = runtime.shard(TID).transactions[TID]
        assert (meta.state, meta.producer_epoch) == (S.COMPLETE_ABORT, 2)
        assert markers.written[-1][:3] == (pid, 2, False)
        assert markers.written[-1][4] == ()

    run(test)


def test_tv2_end_txn_checks_a_pending_transition_first(monkeypatch) -> None:
    """A pending transition (CONCURRENT_TRANSACTIONS, the client retries) is checked before the
    epoch (Kafka's KAFKA-18464) and the producer id. While PrepareCommit's markers are written
    beyond the wait, the next EndTxn at the new epoch is told to retry, not fenced; once it
    completes, only the EndTxn's retry (the epoch before the bump) and the current epoch pass,
    anything older is PRODUCER_FENCED, another producer id INVALID_PRODUCER_ID_MAPPING."""
    monkeypatch.setattr(state_manager, "_SETTLE_WAIT_S", 0.01)

    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 60_000)
        await c.add_partitions(TID, pid, epoch, TP)
        markers.gate = anyio.Event()
        assert await c.end_txn(TID, pid, epoch, commit=True, tv2=True) == (E.none, pid, 1)
        await settle()
        for commit, at in ((False, 1), (True, 1), (True, 0), (False, 0)):
            code = (await c.end_txn(TID, pid, at, commit=commit, tv2=True))[0]
            assert code == E.concurrent_transactions, (commit, at)
        markers.gate.set()
        await settle()
        assert await c.end_txn(TID, pid, 0, commit=True, tv2=True) == (E.none, pid, 1)  # retry
        assert await c.end_txn(TID, pid, 1, commit=False, tv2=True) == (E.none, pid, 2)
        await settle()
        assert (await c.end_txn(TID, pid, 0, commit=False, tv2=True))[0] == E.producer_fenced
        assert (await c.end_txn(TID, pid + 1, 2, commit=False, tv2=True))[0] == (
            E.invalid_producer_id_mapping
        )

    run(test)


def test_tv2_next_end_txn_after_the_epochs_ran_out(monkeypatch) -> None:
    """The EndTxn that exhausts the epochs answers a new producer id at epoch 0, which
    CompleteCommit installs once the markers are written. The producer's next EndTxn with it
    (an abort with nothing sent) meanwhile is told to retry, not INVALID_PRODUCER_ID_MAPPING."""
    monkeypatch.setattr(state_manager, "_SETTLE_WAIT_S", 0.01)

    async def test(c, runtime, markers) -> None:
        _, pid, _ = await c.init_producer_id(TID, 60_000)
        runtime.shard(TID).transactions[TID].producer_epoch = MAX_EPOCH - 1
        await c.add_partitions(TID, pid, MAX_EPOCH - 1, TP)
        markers.gate = anyio.Event()
        code, new_pid, epoch = await c.end_txn(TID, pid, MAX_EPOCH - 1, commit=True, tv2=True)
        assert (code, epoch) == (E.none, 0)
        assert new_pid != pid
        await settle()
        code = (await c.end_txn(TID, new_pid, 0, commit=False, tv2=True))[0]
        assert code == E.concurrent_transactions
        markers.gate.set()
        await settle()
        assert await c.end_txn(TID, new_pid, 0, commit=False, tv2=True) == (E.none, new_pid, 1)

    run(test)


def test_fencing_decisions_are_logged(caplog) -> None:
    """Every refusal of a producer's epoch or id says which transactional id, which epochs were
    seen and expected, and why, for the operator (the client only sees the code)."""

    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 60_000)
        await c.init_producer_id(TID, 60_000)  # a new incarnation: epoch + 1
        with caplog.at_level(logging.INFO, logger="rafka.transaction"):
            assert (await c.add_partitions(TID, pid, epoch, TP))[TP[0]] == E.producer_fenced
            assert (await c.end_txn(TID, pid, epoch, False, True))[0] == E.producer_fenced
            assert (await c.end_txn(TID, pid + 1, epoch, False, True))[0] == (
                E.invalid_producer_id_mapping
            )
            code = (await c.init_producer_id(TID, 60_000, pid, epoch + 5))[0]
            assert code == E.producer_fenced
        refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert len(refusals) == 4, refusals
        assert all(repr(TID) in m and "expects" in m and "Likely cause" in m for m in refusals)
        seen = f"producer {pid} epoch {epoch}; the coordinator has producer {pid} epoch 1"
        assert seen in refusals[0]
        assert "EndTxn (abort, transaction version 2)" in refusals[1]
        assert "INVALID_PRODUCER_ID_MAPPING" in refusals[2]
        assert refusals[3].startswith("InitProducerId")
        assert "expects epoch 1." in refusals[3]

    run(test)


def test_tv2_epoch_overflow_gives_new_producer_id() -> None:
    async def test(c, runtime, markers) -> None:
        _, pid, _ = await c.init_producer_id(TID, 60_000)
        meta = runtime.shard(TID).transactions[TID]
        meta.producer_epoch = MAX_EPOCH - 1
        await c.add_partitions(TID, pid, MAX_EPOCH - 1, TP)
        code, new_pid, epoch = await c.end_txn(TID, pid, MAX_EPOCH - 1, commit=True, tv2=True)
        assert (code, epoch) == (E.none, 0)
        assert new_pid != pid
        await settle()
        assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (
            new_pid,
            0,
            pid,
        )
        # the retry of the overflowing EndTxn is recognized
        assert await c.end_txn(TID, pid, MAX_EPOCH - 1, commit=True, tv2=True) == (
            E.none,
            new_pid,
            0,
        )

    run(test)


def test_errors_of_add_and_end() -> None:
    async def test(c, runtime, markers) -> None:
        assert (await c.add_partitions(TID, 1, 0, TP))[TP[0]] == E.invalid_producer_id_mapping
        _, pid, epoch = await c.init_producer_id(TID, 60_000)
        assert (await c.add_partitions(TID, pid + 1, epoch, TP))[TP[0]] == (
            E.invalid_producer_id_mapping
        )
        assert (await c.add_partitions(TID, pid, epoch + 1, TP))[TP[0]] == E.producer_fenced
        assert (await c.end_txn(TID, pid, epoch, True, False))[0] == E.invalid_txn_state  # Empty
        assert (await c.add_partitions("", pid, epoch, TP))[TP[0]] == E.invalid_request
        # verify-only (KIP-890 part 1): TRANSACTION_ABORTABLE for a partition not in it, as
        # Kafka's coordinator answers (the leader maps it for older producers)
        await c.add_partitions(TID, pid, epoch, TP[:1])
        assert await c.add_partitions(TID, pid, epoch, TP, verify_only=True) == {
            TP[0]: E.none,
            TP[1]: E.transaction_abortable,
        }
        # while PrepareCommit waits for its markers: CONCURRENT_TRANSACTIONS
        markers.gate = anyio.Event()
        assert (await c.end_txn(TID, pid, epoch, True, False))[0] == E.none
        await settle()
        assert (await c.add_partitions(TID, pid, epoch, TP))[TP[0]] == E.concurrent_transactions
        assert (await c.end_txn(TID, pid, epoch, True, False))[0] == E.concurrent_transactions
        # the Complete* write is pending meanwhile: even an abort is told to wait (as Kafka)
        assert (await c.end_txn(TID, pid, epoch, False, False))[0] == E.concurrent_transactions
        assert (await c.init_producer_id(TID, 60_000))[0] == E.concurrent_transactions
        markers.gate.set()
        await settle()
        assert runtime.shard(TID).transactions[TID].state == S.COMPLETE_COMMIT

    run(test)


def test_add_partitions_waits_for_the_previous_transaction_to_complete() -> None:
    """A producer that starts its next transaction while the markers of the last one are being
    written is answered when they are (not CONCURRENT_TRANSACTIONS and a client backoff)."""

    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 60_000)
        await c.add_partitions(TID, pid, epoch, TP)
        markers.gate = anyio.Event()
        assert (await c.end_txn(TID, pid, epoch, True, False))[0] == E.none
        await settle()
        results: list[dict] = []

        async def add() -> None:
            results.append(await c.add_partitions(TID, pid, epoch, TP[:1]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(add)
            await settle()
            assert not results  # parked while PrepareCommit waits for its markers
            markers.gate.set()
        assert results == [{TP[0]: E.none}]
        assert runtime.shard(TID).transactions[TID].state == S.ONGOING

    run(test)


def test_write_failure_leaves_state_unchanged() -> None:
    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 60_000)
        runtime.fail = E.not_enough_replicas
        assert (await c.add_partitions(TID, pid, epoch, TP))[TP[0]] == E.coordinator_not_available
        meta = runtime.shard(TID).transactions[TID]
        assert meta.state == S.EMPTY
        assert meta.pending_state is None
        runtime.fail = None
        assert (await c.add_partitions(TID, pid, epoch, TP))[TP[0]] == E.none

    run(test)


def test_init_fences_and_aborts_the_previous_incarnation() -> None:
    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 60_000)
        await c.add_partitions(TID, pid, epoch, TP)
        # a new incarnation: its ongoing transaction is aborted first
        assert (await c.init_producer_id(TID, 60_000))[0] == E.concurrent_transactions
        await settle()
        assert markers.written[-1][2] is False
        meta = runtime.shard(TID).transactions[TID]
        assert meta.state == S.COMPLETE_ABORT
        code, pid2, epoch2 = await c.init_producer_id(TID, 60_000)
        assert code == E.none
        assert pid2 == pid
        assert epoch2 > markers.written[-1][1]
        # the zombie is fenced
        assert (await c.add_partitions(TID, pid, epoch, TP))[TP[0]] == E.producer_fenced
        assert (await c.end_txn(TID, pid, epoch, True, False))[0] == E.producer_fenced

    run(test)


def test_init_errors_and_kip360() -> None:
    async def test(c, runtime, markers) -> None:
        assert (await c.init_producer_id(TID, 0))[0] == E.invalid_transaction_timeout
        assert (await c.init_producer_id(TID, 900_001))[0] == E.invalid_transaction_timeout
        assert (await c.init_producer_id("", 1000))[0] == E.invalid_request
        assert (await c.init_producer_id(TID, 1000, 5, -1))[0] == E.invalid_request
        _, pid, epoch = await c.init_producer_id(TID, 1000)
        # KIP-360: the producer continues with its own id after an error
        assert await c.init_producer_id(TID, 1000, pid, epoch) == (E.none, pid, epoch + 1)
        # a retry of that call answers the same
        assert await c.init_producer_id(TID, 1000, pid, epoch) == (E.none, pid, epoch + 1)
        assert (await c.init_producer_id(TID, 1000, pid + 50, 0))[0] == E.producer_fenced
        # exhausted epochs: a new producer id
        runtime.shard(TID).transactions[TID].producer_epoch = MAX_EPOCH - 1
        code, new_pid, new_epoch = await c.init_producer_id(TID, 1000)
        assert code == E.none
        assert new_pid != pid
        assert new_epoch == 0

    run(test)


def test_not_coordinator() -> None:
    async def test(c, runtime, markers) -> None:
        runtime.unload()
        assert (await c.init_producer_id(TID, 1000))[0] == E.not_coordinator
        assert (await c.describe([TID]))[0].error_code == E.not_coordinator

    run(test)


def test_failover_in_prepare_commit_completes_on_the_new_leader() -> None:
    log = Log()
    markers = FakeMarkers()

    async def main() -> None:
        old, old_runtime, _ = coordinator(log, markers=markers, epoch=5)
        async with anyio.create_task_group() as tg:
            tg.start_soon(old.run)
            _, pid, epoch = await old.init_producer_id(TID, 60_000)
            await old.add_partitions(TID, pid, epoch, TP)
            markers.gate = anyio.Event()  # the markers hang: the broker dies meanwhile
            assert (await old.end_txn(TID, pid, epoch, True, False))[0] == E.none
            await settle()
            old_runtime.unload()
            markers.gate.set()
            await settle()
            assert markers.written == []  # the old leader's completion was cancelled
            new, new_runtime, _ = coordinator(log, markers=markers, epoch=6, ids=Counter(2000))
            tg.start_soon(new.run)
            await settle()
            assert markers.written == [(pid, epoch, True, 6, tuple(sorted(TP)))]
            assert new_runtime.shard(TID).transactions[TID].state == S.COMPLETE_COMMIT
            # and a third leader loads the completed state
            _, third_runtime, _ = coordinator(log, epoch=7)
            assert third_runtime.shard(TID).transactions[TID].state == S.COMPLETE_COMMIT
            tg.cancel_scope.cancel()

    anyio.run(main)


def test_timed_out_transaction_is_aborted_with_fenced_epoch() -> None:
    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 1)
        await c.add_partitions(TID, pid, epoch, TP)
        age(runtime, TID)
        assert c.expiry.abort_timed_out() == 1
        await settle()
        meta = runtime.shard(TID).transactions[TID]
        assert meta.state == S.COMPLETE_ABORT
        assert markers.written[-1][2] is False
        assert markers.written[-1][1] > epoch
        # the producer that timed out is fenced
        assert (await c.end_txn(TID, pid, epoch, True, False))[0] == E.producer_fenced

    run(test)


def test_expired_ids_are_removed() -> None:
    async def test(c, runtime, markers) -> None:
        await c.init_producer_id(TID, 1000)
        await c.init_producer_id("other", 1000)
        _, pid, epoch = await c.init_producer_id("busy", 1000)
        await c.add_partitions("busy", pid, epoch, TP)
        age(runtime, TID, "other", "busy")
        assert c.expiry.remove_expired() == 2
        await settle()
        assert [d.error_code for d in await c.describe([TID, "other", "busy"])] == [
            E.transactional_id_not_found,
            E.transactional_id_not_found,
            E.none,
        ]

    run(test, transactional_id_expiration_ms=1)


def test_describe_and_list() -> None:
    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 60_000)
        await c.add_partitions(TID, pid, epoch, [("b", 1), ("a", 0), ("a", 2)])
        await c.init_producer_id("idle", 1000)
        (d,) = await c.describe([TID])
        assert (d.state, d.producer_id, d.producer_epoch, d.timeout_ms) == (
            "Ongoing",
            pid,
            epoch,
            60_000,
        )
        assert d.partitions == (("a", (0, 2)), ("b", (1,)))
        assert d.start_time_ms > 0
        everything = {t.transactional_id for t in await c.list()}
        assert everything == {TID, "idle"}
        assert [t.transactional_id for t in await c.list(states=["Ongoing"])] == [TID]
        assert [t.transactional_id for t in await c.list(producer_ids=[pid])] == [TID]
        assert await c.list(states=["Ongoing"], duration_filter_ms=3_600_000) == []
        age(runtime, TID)
        assert len(await c.list(states=["Ongoing"], duration_filter_ms=0)) == 1
        assert [t.transactional_id for t in await c.list(pattern="txn-.*")] == [TID]
        assert await c.list(pattern="txn") == []  # the whole id must match

    run(test)


def test_tv2_fence_bumps_the_epoch_once() -> None:
    """Transaction version 2: the abort of a fenced transaction bumps the epoch itself, once
    (Kafka does not apply the fence's bump, KAFKA-19367): InitProducerId of a new incarnation
    during a transaction ends at epoch 2, not 3."""

    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 60_000)
        await c.add_partitions(TID, pid, epoch, TP)
        assert (await c.init_producer_id(TID, 60_000))[0] == E.concurrent_transactions
        await settle()
        assert markers.written[-1][:3] == (pid, 1, False)  # the abort, at the bumped epoch
        assert await c.init_producer_id(TID, 60_000) == (E.none, pid, 2)

    run(test)


def test_tv2_commit_racing_the_timeout_abort_is_fenced() -> None:
    """KAFKA-20785: with transaction version 2 the coordinator's timeout abort bumps the
    epoch once, so the producer's commit (sent before it learnt of the abort) comes at the
    epoch just below, as a retry would. It is PRODUCER_FENCED (the client recovers), not
    INVALID_TXN_STATE (fatal); a retry of an abort at that epoch still succeeds."""

    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 1)
        await c.add_partitions(TID, pid, epoch, TP)
        age(runtime, TID)
        assert c.expiry.abort_timed_out() == 1
        await settle()
        meta = runtime.shard(TID).transactions[TID]
        assert (meta.state, meta.producer_epoch) == (S.COMPLETE_ABORT, epoch + 1)
        assert (await c.end_txn(TID, pid, epoch, commit=True, tv2=True))[0] == E.producer_fenced
        assert await c.end_txn(TID, pid, epoch, commit=False, tv2=True) == (
            E.none,
            pid,
            epoch + 1,
        )

    run(test)


def test_kip360_after_a_tv2_abort_keeps_the_aborts_epoch() -> None:
    """Complete* keeps the last epoch Prepare* recorded (the one the client had), as Kafka's
    prepareComplete does: a producer re-initializing with its id and that epoch after the
    coordinator's abort gets the abort's epoch (a retry), not PRODUCER_FENCED."""

    async def test(c, runtime, markers) -> None:
        _, pid, epoch = await c.init_producer_id(TID, 1)
        await c.add_partitions(TID, pid, epoch, TP)
        age(runtime, TID)
        c.expiry.abort_timed_out()
        await settle()
        meta = runtime.shard(TID).transactions[TID]
        assert (meta.producer_epoch, meta.last_producer_epoch) == (epoch + 1, epoch)
        assert await c.init_producer_id(TID, 1000, pid, epoch) == (E.none, pid, epoch + 1)

    run(test)
