"""EndTxn with transaction version 1 (the epoch stays) and 2 (every end bumps it, KIP-890),
and the coordinator's own abort of a timed-out transaction (transaction.timeout.ms).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from cluster.polling import wait_for
from tests.compat.pair import Pair, Side
from tests.compat.transactions.support import (
    Ids,
    add,
    add_request,
    compare,
    describe,
    describe_one,
    end,
    end_request,
    init,
    init_request,
    new_id,
    produce_txn,
    settled,
)

# -- EndTxn -----------------------------------------------------------------------------------


def ending(ids: Ids, commit: bool, version: int, epoch: int = 0) -> Callable[[Side], Any]:
    def request(side: Side) -> Any:
        return end_request(side, Ids(ids.tid, ids.pid, ids.epoch + epoch), commit, version)

    return request


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_end_txn_tv1(pair: Pair, version: int) -> None:
    """Transaction version 1 (EndTxn below v5): the epoch stays; a retry of a completed
    commit or abort succeeds, the opposite of it is INVALID_TXN_STATE."""
    ids = Ids(new_id(f"end-v{version}"))
    init(pair, ids)
    v = f"EndTxn v{version}"

    def call(case: str, commit: bool, epoch: int = 0, who: Ids = ids) -> None:
        compare(pair, f"{v}: {case}", ending(who, commit, version, epoch), [ids], settle=True)

    call("commit with no transaction", True)
    call("abort with no transaction", False)
    add(pair, ids, [0])
    call("commit at an older epoch", True, epoch=-1)
    call("commit at a newer epoch", True, epoch=1)
    other = Ids(ids.tid, {s: p + 1000 for s, p in ids.pid.items()}, ids.epoch)
    call("commit with another producer id", True, who=other)
    unknown = Ids(new_id("end-unknown"), {"kafka": 1, "rafka": 1}, 0)
    call("commit of a transactional id never initialized", True, who=unknown)
    call("commit", True)
    settled(pair, ids)
    describe(pair, f"{v}: DescribeTransactions after the commit", ids)
    call("the same commit again (a retry)", True)
    call("abort after the commit", False)
    add(pair, ids, [1])
    call("abort", False)
    settled(pair, ids)
    call("the same abort again (a retry)", False)
    call("commit after the abort", True)
    describe(pair, f"{v}: DescribeTransactions after the abort", ids)


def test_end_txn_tv2(pair: Pair) -> None:
    """Transaction version 2 (EndTxn v5, KIP-890): every commit or abort bumps the epoch and
    answers it; a retry carries the epoch before the bump (Kafka's `isRetry`)."""
    ids = Ids(new_id("end-v5"))
    init(pair, ids)
    v = "EndTxn v5"

    def call(case: str, commit: bool, epoch: int = 0, settle: bool = True) -> None:
        compare(pair, f"{v}: {case}", ending(ids, commit, 5, epoch), [ids], settle=settle)

    call("commit with no transaction", True)
    add(pair, ids, [0])
    call("commit at an older epoch", True, epoch=-1)
    end(pair, ids, True, 5, f"{v}: commit (epoch bumped)")
    call("the commit again at the epoch before the bump (a retry)", True, epoch=-1)
    call("an abort at the epoch before the bump (not a retry)", False, epoch=-1)
    call("the commit again two epochs back", True, epoch=-2)
    call("commit at the new epoch with no transaction", True)
    end(pair, ids, False, 5, f"{v}: abort with no transaction (bumps the epoch)")
    call("the abort again at the epoch before the bump (a retry)", False, epoch=-1)
    call("a commit at the epoch before the abort's bump", True, epoch=-1)
    describe(pair, f"{v}: DescribeTransactions after the empty abort", ids)
    add(pair, ids, [1])
    end(pair, ids, False, 5, f"{v}: abort (epoch bumped)")
    describe(pair, f"{v}: DescribeTransactions after the abort", ids)


# -- the coordinator's own abort (transaction.timeout.ms) -------------------------------------


def test_transaction_timed_out(pair: Pair) -> None:
    """A transaction open longer than its timeout is aborted by the coordinator with the
    epoch bumped (transaction.abort.timed.out.transaction.cleanup.interval.ms: 10 s on both);
    what the producer's late requests then get. KAFKA-20785: with transaction version 2, a
    commit that raced that abort comes at the epoch just before it, like a retry."""
    ids = Ids(new_id("timeout"))
    init(pair, ids, timeout=datetime.timedelta(seconds=1))
    produce_txn(
        pair,
        ids,
        0,
        partition=2,
        version=12,
        case="Produce v12: a batch in a transaction that will time out",
    )

    def aborted(side: Side) -> bool:
        return describe_one(side, ids.tid).transaction_state == "CompleteAbort"

    for side in pair.sides:
        wait_for(
            partial(aborted, side),
            timeout=90,
            what=f"the coordinator of {side.name} aborting the timed-out transaction",
        )
    describe(pair, "DescribeTransactions: after the coordinator's timeout abort", ids)
    compare(
        pair,
        "EndTxn v5: a commit that raced the timeout abort (KAFKA-20785)",
        ending(ids, True, 5),
        [ids],
    )
    compare(
        pair,
        "EndTxn v3: a commit after the timeout abort (transaction version 1)",
        ending(ids, True, 3),
        [ids],
    )
    compare(
        pair,
        "EndTxn v5: an abort after the timeout abort (a retry of it)",
        ending(ids, False, 5),
        [ids],
    )
    compare(
        pair,
        "AddPartitionsToTxn v3: after the timeout abort",
        lambda side: add_request(side, ids, [2]),
        [ids],
    )
    compare(
        pair,
        "InitProducerId v5: with the producer's id and epoch after the timeout abort",
        lambda side: init_request(side, 5, ids.tid, producer=ids.of(side)),
        [ids],
        settle=True,
    )
