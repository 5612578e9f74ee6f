"""FindCoordinator of a transactional id, and InitProducerId: idempotent and transactional
producers, bad requests, re-initializing with the producer's id and epoch (KIP-360) and
during an ongoing transaction.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from tests.compat.pair import Pair, Side
from tests.compat.transactions.support import (
    FIND_COORDINATOR,
    Ids,
    add,
    ask,
    compare,
    init,
    init_request,
    new_id,
    produce_txn,
)

# -- FindCoordinator --------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 3, 4, 6])
def test_find_transaction_coordinator(pair: Pair, version: int) -> None:
    tid = new_id("find")
    if version >= 4:
        fields: dict[str, Any] = {"key_type": 1, "coordinator_keys": (tid,)}
    else:
        fields = {"key_type": 1, "key": tid}
    compare(
        pair,
        f"FindCoordinator v{version}: a transactional id",
        lambda side: ask(side, FIND_COORDINATOR, version, **fields),
        settle=True,
        masked=["node_id", "coordinators.*.node_id"],
    )


# -- InitProducerId ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(6))
def test_init_idempotent(pair: Pair, version: int) -> None:
    compare(
        pair,
        f"InitProducerId v{version}: idempotent (no transactional id)",
        lambda side: init_request(side, version, None),
        masked=["producer_id"],
    )


@pytest.mark.parametrize("version", range(6))
def test_init_transactional(pair: Pair, version: int) -> None:
    ids = Ids(new_id(f"init-v{version}"))
    init(pair, ids, f"InitProducerId v{version}: a new transactional id", version)
    init(pair, ids, f"InitProducerId v{version}: the same id again (epoch bump)", version)
    compare(
        pair,
        f"InitProducerId v{version}: transaction timeout over transaction.max.timeout.ms",
        lambda side: init_request(
            side, version, ids.tid, timeout=datetime.timedelta(milliseconds=900_001)
        ),
    )


def test_init_bad_requests(pair: Pair) -> None:
    tid = new_id("init-bad")
    cases: list[tuple[str, dict[str, Any]]] = [
        ("an empty transactional id", {"tid": ""}),
        ("a transaction timeout of 0", {"tid": tid, "timeout": datetime.timedelta(0)}),
        ("a producer id without an epoch", {"tid": tid, "producer": (5, -1)}),
        ("an epoch without a producer id", {"tid": tid, "producer": (-1, 3)}),
    ]
    for case, fields in cases:
        compare(
            pair,
            f"InitProducerId v5: {case}",
            partial(init_request, version=5, **fields),
            settle=True,
        )


@pytest.mark.parametrize("version", [3, 4, 5])
def test_init_with_the_producers_id_and_epoch(pair: Pair, version: int) -> None:
    """KIP-360: a producer re-initializing with its current id and epoch keeps its id and gets
    the next epoch; a retry of that call (the epoch before) gets the same answer; an older
    epoch or another producer id is fenced."""
    ids = Ids(new_id(f"kip360-v{version}"))
    init(pair, ids)
    init(pair, ids)  # epoch 1

    def with_producer(producer: Callable[[Side], tuple[int, int]]) -> Callable[[Side], Any]:
        return lambda side: init_request(side, version, ids.tid, producer=producer(side))

    first = ids.epoch
    compare(
        pair,
        f"InitProducerId v{version}: with the current producer id and epoch",
        with_producer(ids.of),
        [ids],
        settle=True,
    )
    compare(
        pair,
        f"InitProducerId v{version}: the same call again (a retry: same epoch)",
        with_producer(lambda side: (ids.pid[side.name], first)),
        [ids],
        settle=True,
    )
    compare(
        pair,
        f"InitProducerId v{version}: an older epoch (fenced)",
        with_producer(lambda side: (ids.pid[side.name], first - 1)),
        [ids],
        settle=True,
    )
    compare(
        pair,
        f"InitProducerId v{version}: another producer id",
        with_producer(lambda side: (ids.pid[side.name] + 1000, first + 1)),
        [ids],
        settle=True,
    )
    compare(
        pair,
        f"InitProducerId v{version}: a producer id for a new transactional id",
        lambda side: init_request(side, version, new_id("kip360-new"), producer=(4242, 7)),
        masked=["producer_id"],
        settle=True,
    )


def test_init_while_a_transaction_is_ongoing(pair: Pair) -> None:
    """A new incarnation's InitProducerId aborts the ongoing transaction first
    (CONCURRENT_TRANSACTIONS), then gets the epoch bumped a second time."""
    ids = Ids(new_id("init-ongoing"))
    init(pair, ids)
    add(pair, ids, [1])
    produce_txn(pair, ids, 0, partition=1)
    compare(
        pair,
        "InitProducerId v5: while a transaction is ongoing (its abort first)",
        lambda side: init_request(side, 5, ids.tid),
        [ids],
    )
    compare(
        pair,
        "InitProducerId v5: retried after the abort (epoch bumped twice)",
        lambda side: init_request(side, 5, ids.tid),
        [ids],
        settle=True,
    )
