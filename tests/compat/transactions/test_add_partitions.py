"""AddPartitionsToTxn: the clients' path (v0-v3, one transaction) and the brokers' (v4+,
several transactions and verify_only, KIP-890).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

from cluster.kafka_client import builder
from tests.compat.pair import Pair, Side
from tests.compat.transactions.support import (
    ADD_PARTITIONS,
    TOPIC,
    Ids,
    add_request,
    ask,
    compare,
    init,
    new_id,
)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_add_partitions(pair: Pair, version: int) -> None:
    """The client path (v0-v3, one transaction): partitions join, errors per partition."""
    ids = Ids(new_id(f"add-v{version}"))
    unknown = Ids("compat-txn-never-initialized", {"kafka": 1, "rafka": 1}, 0)
    init(pair, ids)

    def adding(
        who: Ids = ids, partitions: Iterable[int] = (0,), topic: str = TOPIC, epoch: int = 0
    ) -> Callable[[Side], Any]:
        def request(side: Side) -> Any:
            stale = Ids(who.tid, who.pid, who.epoch + epoch)
            return add_request(side, stale, partitions, topic, version)

        return request

    v = f"AddPartitionsToTxn v{version}"
    compare(pair, f"{v}: two partitions", adding(partitions=(0, 1)), [ids], settle=True)
    compare(pair, f"{v}: the same partitions again", adding(partitions=(0, 1)), [ids])
    compare(pair, f"{v}: one more partition", adding(partitions=(2,)), [ids])
    compare(pair, f"{v}: an unknown partition", adding(partitions=(1, 7)), [ids])
    compare(pair, f"{v}: an unknown topic", adding(topic="compat-txn-nope"), [ids])
    compare(pair, f"{v}: an internal topic", adding(topic="__consumer_offsets"), [ids])
    compare(pair, f"{v}: an older epoch", adding(epoch=-1), [ids])
    compare(pair, f"{v}: a newer epoch", adding(epoch=1), [ids])
    other = Ids(ids.tid, {s: p + 1000 for s, p in ids.pid.items()}, ids.epoch)
    compare(pair, f"{v}: another producer id", adding(who=other), [ids])
    compare(pair, f"{v}: a transactional id never initialized", adding(who=unknown), [ids])


def batched_request(side: Side, version: int, *txns: tuple[Ids, bool, str, Iterable[int]]) -> Any:
    """AddPartitionsToTxn v4+ (several transactions; `verify_only` as a broker's KIP-890
    check sends it)."""
    b = builder(ADD_PARTITIONS, version)
    transactions = []
    for ids, verify_only, topic, partitions in txns:
        pid, epoch = ids.of(side)
        transactions.append(
            b.AddPartitionsToTxnTransaction(
                transactional_id=ids.tid,
                producer_id=pid,
                producer_epoch=epoch,
                verify_only=verify_only,
                topics=(b.AddPartitionsToTxnTopic(name=topic, partitions=tuple(partitions)),),
            )
        )
    return ask(side, ADD_PARTITIONS, version, transactions=tuple(transactions))


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_batched(pair: Pair, version: int) -> None:
    """The brokers' path (v4+): several transactions at once, and verify_only (KIP-890: is
    the partition in the ongoing transaction?)."""
    ids = Ids(new_id(f"batch-v{version}"))
    idle = Ids(new_id(f"batch-idle-v{version}"))
    init(pair, ids)
    init(pair, idle)
    v = f"AddPartitionsToTxn v{version}"
    # Kafka's order of transactions and partitions is a hash map's
    sort = [
        "results_by_transaction",
        "results_by_transaction.*.topic_results.*.results_by_partition",
    ]

    def call(case: str, *txns: tuple[Ids, bool, str, Iterable[int]]) -> None:
        compare(
            pair,
            f"{v}: {case}",
            lambda side: batched_request(side, version, *txns),
            [ids, idle],
            sort=sort,
        )

    call("verify_only, a transaction not begun", (ids, True, TOPIC, [0]))
    call("add two partitions", (ids, False, TOPIC, [0, 1]))
    call("verify_only, one partition in and one not", (ids, True, TOPIC, [0, 2]))
    call(
        "two transactions, one ongoing and one not begun",
        (ids, True, TOPIC, [1]),
        (idle, True, TOPIC, [1]),
    )
    call("verify_only, an unknown topic", (ids, True, "compat-txn-nope", [0]))
    call("verify_only, an unknown partition", (ids, True, TOPIC, [9]))
    stale = Ids(ids.tid, ids.pid, ids.epoch - 1)
    call("verify_only, an older epoch", (stale, True, TOPIC, [0]))
    other = Ids(ids.tid, {s: p + 1000 for s, p in ids.pid.items()}, ids.epoch)
    call("verify_only, another producer id", (other, True, TOPIC, [0]))
    unknown = Ids(new_id("batch-unknown"), {"kafka": 1, "rafka": 1}, 0)
    call("verify_only, an unknown transactional id", (unknown, True, TOPIC, [0]))
