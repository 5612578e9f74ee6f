"""Transactions: the coordinator's APIs (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, TxnOffsetCommit, DescribeTransactions, ListTransactions), DescribeProducers, and what a
transactional or idempotent producer provokes with Produce and a read_committed consumer sees,
compared between the compat session's Apache Kafka 4.4 and Rafka (the session's `pair`).

Each case runs the same steps on both brokers. Producer ids differ between the two clusters, so
each side's ids are replaced by names before the answers are compared (`Ids.named`); epochs,
sequences and offsets must be the same. A step that may answer "not yet" (a coordinator that is
still loading, markers still being written) is retried on each side until it does not, and only
its final answer is compared: the two brokers' timing is not behaviour.

The topic every module writes to is made, and the coordinators found, once for the whole package
(a package-scoped autouse fixture). No case depends on what another left: each takes transactional
ids of its own (`new_id`), and the cases that need a topic of their own create it, so the modules'
(name) order does not matter.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from tests.compat.conftest import create_topics
from tests.compat.pair import Pair, Side
from tests.compat.transactions.support import (
    FIND_COORDINATOR,
    TOPIC,
    ask,
    init_request,
    until_settled,
)


@pytest.fixture(scope="package", autouse=True)
def topics(pair: Pair) -> None:
    create_topics(pair, NewTopic(TOPIC, 3, 1))
    coordinators(pair)


def coordinators(pair: Pair) -> None:
    """FindCoordinator of a group and of a transactional id on each side until they answer
    (as clients do first: it creates `__consumer_offsets` and `__transaction_state` on a
    broker that has none yet), and an idempotent producer id (the first one may wait for the
    broker's block of ids)."""
    for key_type in (0, 1):

        def find(side: Side, key_type: int = key_type) -> Any:
            return until_settled(
                lambda: ask(side, FIND_COORDINATOR, 6, key_type=key_type, coordinator_keys=("t",)),
                f"the coordinator (key type {key_type}) of {side.name}",
            )

        pair.both(find)
    pair.both(lambda side: until_settled(lambda: init_request(side, 5, None), "a producer id"))
