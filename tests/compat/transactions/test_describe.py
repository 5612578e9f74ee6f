"""What the admin APIs show of transactions and producers: DescribeTransactions,
ListTransactions (by state, duration and id pattern) and DescribeProducers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka.admin import NewTopic

from cluster.kafka_client import builder
from tests.compat.conftest import create_topics
from tests.compat.pair import Pair, Side
from tests.compat.transactions.support import (
    DESCRIBE_PRODUCERS,
    LIST_TRANSACTIONS,
    Ids,
    add,
    add_request,
    ask,
    compare,
    describe,
    describe_request,
    end,
    init,
    new_id,
    produce_txn,
    until_settled,
)

# -- DescribeTransactions, ListTransactions ---------------------------------------------------


def test_describe_transactions(pair: Pair) -> None:
    ids = Ids(new_id("describe"))
    init(pair, ids)
    describe(pair, "DescribeTransactions: Empty", ids)
    add(pair, ids, [0, 2])
    describe(pair, "DescribeTransactions: Ongoing with two partitions", ids)
    end(pair, ids, True)
    describe(pair, "DescribeTransactions: CompleteCommit", ids)
    compare(
        pair,
        "DescribeTransactions: an unknown id, an empty id and a known one",
        lambda side: describe_request(side, ["compat-txn-nobody", "", ids.tid]),
        [ids],
        masked=["transaction_states.*.transaction_start_time_ms"],
    )


def list_request(
    side: Side,
    version: int,
    ids: Iterable[Ids],
    states: Iterable[str] = (),
    duration: int = -1,
    pattern: str | None = None,
) -> Any:
    """ListTransactions of these ids' producers only (the brokers hold every case's ids)."""
    return ask(
        side,
        LIST_TRANSACTIONS,
        version,
        state_filters=tuple(states),
        producer_id_filters=tuple(i.pid[side.name] for i in ids),
        duration_filter=duration,
        transactional_id_pattern=pattern,
    )


def test_list_transactions(pair: Pair) -> None:
    ongoing, empty = Ids(new_id("list-ongoing")), Ids(new_id("list-empty"))
    for ids in (ongoing, empty):
        init(pair, ids)
    add(pair, ongoing, [1])
    both = [ongoing, empty]
    sort = ["transaction_states"]

    def call(case: str, version: int, **kw: Any) -> None:
        compare(
            pair,
            f"ListTransactions v{version}: {case}",
            lambda side: list_request(side, version, both, **kw),
            both,
            sort=sort,
        )

    call("by producer id", 0)
    call("Ongoing only", 0, states=["Ongoing"])
    call("Empty and CompleteCommit", 0, states=["Empty", "CompleteCommit"])
    call("an unknown state", 0, states=["Bogus", "Ongoing"])
    call("open longer than an hour", 1, duration=3_600_000)
    call("open longer than 0 ms", 1, duration=0)
    call("ids matching a pattern", 2, pattern=f"{ongoing.tid[:-6]}.*")
    call("an invalid pattern", 2, pattern="(")
    end(pair, ongoing, False)
    call("after the abort", 0, states=["CompleteAbort"])


# -- DescribeProducers ------------------------------------------------------------------------


def producers_request(side: Side, topic: str, partitions: Iterable[int]) -> Any:
    b = builder(DESCRIBE_PRODUCERS, 0)
    return ask(
        side,
        DESCRIBE_PRODUCERS,
        0,
        topics=(b.TopicRequest(name=topic, partition_indexes=tuple(partitions)),),
    )


def test_describe_producers(pair: Pair) -> None:
    topic = "compat-txn-producers"
    create_topics(pair, NewTopic(topic, 2, 1))
    ids = Ids(new_id("producers"))
    init(pair, ids)
    add(pair, ids, [0])
    pair.both(
        lambda side: until_settled(lambda: add_request(side, ids, [0], topic), "AddPartitionsToTxn")
    )
    produce_txn(pair, ids, 0, n=3, topic=topic)
    produce_txn(pair, ids, 3, n=2, topic=topic)
    sort = ["topics.*.partitions.*.active_producers"]
    compare(
        pair,
        "DescribeProducers: a partition with an open transaction, and an empty one",
        lambda side: producers_request(side, topic, [0, 1]),
        [ids],
        sort=sort,
    )
    end(pair, ids, True)
    compare(
        pair,
        "DescribeProducers: after the commit",
        lambda side: producers_request(side, topic, [0]),
        [ids],
        sort=sort,
        masked=["topics.*.partitions.*.active_producers.*.last_timestamp"],  # the marker's
    )
    compare(
        pair,
        "DescribeProducers: an unknown partition",
        lambda side: producers_request(side, topic, [5]),
    )
    compare(
        pair,
        "DescribeProducers: an unknown topic",
        lambda side: producers_request(side, "compat-txn-nope", [0]),
    )
    compare(
        pair,
        "DescribeProducers: an invalid topic name",
        lambda side: producers_request(side, "compat txn!", [0]),
    )
