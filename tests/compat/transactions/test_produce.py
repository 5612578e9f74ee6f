"""Produce of transactional batches: to a partition not added (transaction version 1,
KIP-890 part 1) or one the batch adds (version 2, Produce v12), and the batches refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from dataplane.log.batch import ATTR_TRANSACTIONAL
from tests.compat.pair import Pair, Side
from tests.compat.transactions.support import (
    APPEND,
    TOPIC,
    Ids,
    add,
    compare,
    describe,
    end,
    init,
    new_id,
    produce_request,
    produce_txn,
)
from tests.unit.log.batches import make_batch


@pytest.mark.parametrize("version", [3, 7, 10, 11])
def test_produce_outside_the_transaction_tv1(pair: Pair, version: int) -> None:
    """Transaction version 1 (Produce below v12): a batch for a partition the producer did
    not add is refused after asking the coordinator (KIP-890 part 1)."""
    ids = Ids(new_id(f"produce-tv1-v{version}"))
    init(pair, ids)
    add(pair, ids, [0])
    produce_txn(
        pair,
        ids,
        0,
        partition=1,
        version=version,
        case=f"Produce v{version}: a transactional batch to a partition not added",
    )
    produce_txn(
        pair,
        ids,
        0,
        partition=0,
        version=version,
        case=f"Produce v{version}: a transactional batch to the added partition",
    )
    describe(pair, f"Produce v{version}: DescribeTransactions after it", ids)
    end(pair, ids, False)


def test_produce_adds_the_partition_tv2(pair: Pair) -> None:
    """Transaction version 2 (Produce v12): the batch's partition joins the transaction."""
    ids = Ids(new_id("produce-tv2"))
    init(pair, ids)
    produce_txn(
        pair,
        ids,
        0,
        partition=1,
        version=12,
        case="Produce v12: a transactional batch with no AddPartitionsToTxn",
    )
    describe(pair, "Produce v12: DescribeTransactions after it", ids)
    produce_txn(
        pair, ids, 2, partition=2, version=12, case="Produce v12: a batch to a second partition"
    )
    end(pair, ids, True, 5, "EndTxn v5: commit of the partitions the produce added")
    stale = Ids(ids.tid, ids.pid, ids.epoch - 1)
    produce_txn(
        pair,
        stale,
        4,
        partition=1,
        version=12,
        case="Produce v12: a batch at the epoch before the commit's bump",
    )
    describe(pair, "Produce v12: DescribeTransactions after the commit", ids)


def test_produce_transactional_errors(pair: Pair) -> None:
    ids = Ids(new_id("produce-errors"))
    init(pair, ids)
    add(pair, ids, [2])

    def send(case: str, records: Callable[[Side], bytes], tid: str | None = ids.tid) -> None:
        compare(
            pair,
            f"Produce v11: {case}",
            lambda side: produce_request(side, records(side), 2, TOPIC, tid),
            [ids],
            masked=APPEND,
        )

    def batch(
        epoch: int = 0, sequence: int = 0, transactional: bool = True
    ) -> Callable[[Side], bytes]:
        def build(side: Side) -> bytes:
            pid, current = ids.of(side)
            return make_batch(
                [b"x"],
                timestamps=[int(time.time() * 1000)],
                producer_id=pid,
                producer_epoch=current + epoch,
                base_sequence=sequence,
                extra_attributes=ATTR_TRANSACTIONAL if transactional else 0,
            )

        return build

    send("a transactional batch without a transactional id", batch(), tid=None)
    send("a transactional batch at an older epoch", batch(epoch=-1))
    send("the first transactional batch at sequence 5", batch(sequence=5))
    send("the first transactional batch", batch())
    send("a non-transactional batch of the same producer", batch(sequence=1, transactional=False))
    end(pair, ids, False)
