"""Transactions: the coordinator's APIs (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, TxnOffsetCommit, DescribeTransactions, ListTransactions), DescribeProducers, and what a
transactional or idempotent producer provokes with Produce and a read_committed consumer sees.

Each case runs the same steps on both brokers. Producer ids differ between the two clusters, so
each side's ids are replaced by names before the answers are compared (`Ids.named`); epochs,
sequences and offsets must be the same. A step that may answer "not yet" (a coordinator that is
still loading, markers still being written) is retried on each side until it does not, and only
its final answer is compared: the two brokers' timing is not behaviour.
"""

from __future__ import annotations

import datetime
import itertools
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from cluster.admin_transactions import (
    _DESCRIBE_TRANSACTIONS_RESPONSE as DESCRIBE_TRANSACTIONS_RESPONSE,
)
from cluster.kafka_client import builder
from cluster.polling import wait_for
from dataplane.log.batch import ATTR_TRANSACTIONAL, header_at
from dataplane.log.control import read_marker
from tests.compat import diff
from tests.compat.conftest import create_topics
from tests.compat.pair import Pair, Side
from tests.unit.log.batches import make_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, JOIN_GROUP = 0, 1, 2, 3, 10, 11
INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
DELETE_RECORDS = 21
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
TOPIC = "compat-txn"
MINUTE = datetime.timedelta(minutes=1)

# Answers that only mean "not yet": a coordinator loading, markers still being written.
NOT_YET = {
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
    ErrorCode.concurrent_transactions,
}
_names = itertools.count()


@pytest.fixture(scope="module", autouse=True)
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


def new_id(what: str) -> str:
    """A transactional id of its own for each case (both brokers keep every id they saw)."""
    return f"compat-txn-{what}-{next(_names)}-{uuid.uuid4().hex[:6]}"


@dataclass
class Ids:
    """A transactional id's producer on each broker: producer ids differ between the clusters
    (named `<pid>`, `<pid 2>` ... in compared answers), epochs must not."""

    tid: str
    pid: dict[str, int] = field(default_factory=dict)
    epoch: int = -1
    extra: dict[str, list[int]] = field(default_factory=dict)  # later producer ids, in order

    def of(self, side: Side) -> tuple[int, int]:
        return self.pid[side.name], self.epoch

    def names(self, side: Side) -> dict[int, str]:
        found = {self.pid[side.name]: "<pid>"} if side.name in self.pid else {}
        for i, pid in enumerate(self.extra.get(side.name, []), 2):
            found[pid] = f"<pid {i}>"
        return found

    def learn(self, side: Side, pid: int) -> None:
        """A producer id a side answered: the first one, or a new one (the epochs ran out)."""
        if pid < 0 or pid in self.names(side):
            return
        if side.name not in self.pid:
            self.pid[side.name] = pid
        else:
            self.extra.setdefault(side.name, []).append(pid)


def named(tree: diff.Plain, names: dict[int, str]) -> diff.Plain:
    """`tree` with each known producer id (in a field whose name says producer id) named,
    and error codes by name (our own decoders leave them numbers)."""
    if isinstance(tree, dict):
        out = {}
        for k, v in tree.items():
            if "producer_id" in k and isinstance(v, int):
                out[k] = names.get(v, v)
            elif k.endswith("error_code") and isinstance(v, int):
                out[k] = ErrorCode(v).name
            else:
                out[k] = named(v, names)
        return out
    if isinstance(tree, list):
        return [named(v, names) for v in tree]
    return tree


def ask(side: Side, api_key: int, version: int, **fields: Any) -> Any:
    try:
        return side.conn().call(api_key, version, **fields)
    except (ConnectionError, OSError):
        side.reset()
        return "<connection closed>"


def codes(answer: Any) -> set[ErrorCode]:
    """Every error code in an answer."""
    found: set[ErrorCode] = set()

    def walk(node: Any) -> None:
        if isinstance(node, ErrorCode):
            found.add(node)
        elif isinstance(node, tuple | list):
            for v in node:
                walk(v)
        elif hasattr(node, "__dataclass_fields__"):
            for name in node.__dataclass_fields__:
                walk(getattr(node, name))

    walk(answer)
    return found


def until_settled(call: Callable[[], Any], what: str) -> Any:
    """`call()` again while its answer only says "not yet"."""
    return wait_for(lambda: None if codes(r := call()) & NOT_YET else r, what=what)


def compare(
    pair: Pair,
    case: str,
    request: Callable[[Side], Any],
    ids: Iterable[Ids] = (),
    masked: Iterable[str] = (),
    sort: Iterable[str] = (),
    settle: bool = False,
) -> tuple[diff.Plain, diff.Plain]:
    """`request(side)` on both brokers (with `settle`, repeated while it answers "not yet"),
    the answers compared with each side's producer ids named."""
    ids = list(ids)

    def one(side: Side) -> diff.Plain:
        answer = until_settled(lambda: request(side), case) if settle else request(side)
        names: dict[int, str] = {}
        for i in ids:
            names |= i.names(side)
        return named(diff.plain(answer), names)

    k, r = pair.both(one)
    return pair.compare(case, k, r, masked=masked, sort=sort)


# -- the requests, one side at a time ---------------------------------------------------------


def init_request(
    side: Side,
    version: int,
    tid: str | None,
    timeout: datetime.timedelta = MINUTE,
    producer: tuple[int, int] = (-1, -1),
) -> Any:
    return ask(
        side,
        INIT_PRODUCER_ID,
        version,
        transactional_id=tid,
        transaction_timeout=timeout,
        producer_id=producer[0],
        producer_epoch=producer[1],
    )


def init(pair: Pair, ids: Ids, case: str | None = None, version: int = 5, **kw: Any) -> None:
    """InitProducerId of `ids` on both brokers (until its coordinator is ready; compared when
    `case` is given); `ids` learns the answers."""

    def request(side: Side) -> Any:
        return init_request(side, version, ids.tid, **kw)

    if case is not None:
        compare(pair, case, request, [ids], settle=True, masked=["producer_id"])

    def one(side: Side) -> Any:
        r = until_settled(lambda: request(side), f"InitProducerId from {side.name}")
        assert r.error_code == ErrorCode.none, r
        return r

    if case is None:
        k, r = pair.both(one)
    else:  # the compared call did it: read the id and epoch back
        k, r = pair.both(lambda side: describe_one(side, ids.tid))
    ids.learn(pair.kafka, k.producer_id)
    ids.learn(pair.rafka, r.producer_id)
    assert k.producer_epoch == r.producer_epoch, (k, r)
    ids.epoch = k.producer_epoch


def describe_request(side: Side, tids: Iterable[str]) -> Any:
    """DescribeTransactions, read with our schema (kio refuses the start time -1 of an id
    with no transaction)."""
    body = side.conn().call_raw(DESCRIBE_TRANSACTIONS, 0, transactional_ids=tuple(tids))
    return DESCRIBE_TRANSACTIONS_RESPONSE.decode(body, 0)[0]


def describe_one(side: Side, tid: str) -> Any:
    """DescribeTransactions of one id on one side (its producer id and epoch now)."""
    (state,) = describe_request(side, [tid]).transaction_states
    return state


def describe(pair: Pair, case: str, *ids: Ids) -> tuple[diff.Plain, diff.Plain]:
    """DescribeTransactions of `ids` compared (a start time only as whether there is one)."""
    k, r = compare(
        pair,
        case,
        lambda side: describe_request(side, [i.tid for i in ids]),
        ids,
        masked=["transaction_states.*.transaction_start_time_ms"],
        sort=["transaction_states.*.topics.*.partitions"],  # Kafka's: a hash set's order
    )
    started = [
        [
            s.transaction_start_time_ms >= 0
            for s in describe_request(side, [i.tid for i in ids]).transaction_states
        ]
        for side in pair.sides
    ]
    pair.compare(f"{case} (start time set)", *started)
    return k, r


def add_request(
    side: Side, ids: Ids, partitions: Iterable[int] = (0,), topic: str = TOPIC, version: int = 3
) -> Any:
    pid, epoch = ids.of(side)
    b = builder(ADD_PARTITIONS, version)
    t = b.AddPartitionsToTxnTopic(name=topic, partitions=tuple(partitions))
    return ask(
        side,
        ADD_PARTITIONS,
        version,
        v3_and_below_transactional_id=ids.tid,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(t,),
    )


def add(pair: Pair, ids: Ids, partitions: Iterable[int] = (0,)) -> None:
    partitions = list(partitions)

    def one(side: Side) -> None:
        r = until_settled(lambda: add_request(side, ids, partitions), "AddPartitionsToTxn")
        assert codes(r) <= {ErrorCode.none}, r

    pair.both(one)


def end_request(side: Side, ids: Ids, commit: bool, version: int = 3) -> Any:
    pid, epoch = ids.of(side)
    return ask(
        side,
        END_TXN,
        version,
        transactional_id=ids.tid,
        producer_id=pid,
        producer_epoch=epoch,
        committed=commit,
    )


def end(pair: Pair, ids: Ids, commit: bool, version: int = 3, case: str | None = None) -> None:
    """EndTxn on both sides (compared when `case` is given), then until the markers are
    written; with transaction version 2 (v5) `ids` takes the bumped epoch."""

    def request(side: Side) -> Any:
        return end_request(side, ids, commit, version)

    if case is None:
        k, r = pair.both(lambda side: until_settled(lambda: request(side), "EndTxn"))
    else:
        pair_answers: dict[str, Any] = {}

        def keep(side: Side) -> Any:
            pair_answers[side.name] = until_settled(lambda: request(side), case)
            return pair_answers[side.name]

        compare(pair, case, keep, [ids])
        k, r = pair_answers["kafka"], pair_answers["rafka"]
    assert k.error_code == r.error_code == ErrorCode.none, (k, r)
    if version >= 5:
        ids.learn(pair.kafka, k.producer_id)
        ids.learn(pair.rafka, r.producer_id)
        assert k.producer_epoch == r.producer_epoch, (k, r)
        ids.epoch = k.producer_epoch
    settled(pair, ids)


def settled(pair: Pair, ids: Ids) -> None:
    """Until neither side is still writing the markers of `ids`' last transaction."""

    def one(side: Side) -> None:
        wait_for(
            lambda: (
                describe_one(side, ids.tid).transaction_state
                not in ("PrepareCommit", "PrepareAbort")
            ),
            what=f"the markers of {ids.tid} on {side.name}",
        )

    pair.both(one)


def txn_batch(pid: int, epoch: int, sequence: int, n: int, timestamp: int) -> bytes:
    return make_batch(
        [b"t%d" % (sequence + i) for i in range(n)],
        timestamps=[timestamp + i for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        extra_attributes=ATTR_TRANSACTIONAL,
    )


def produce_request(
    side: Side,
    records: bytes,
    partition: int = 0,
    topic: str = TOPIC,
    tid: str | None = None,
    version: int = 11,
) -> Any:
    b = builder(PRODUCE, version)
    data = b.TopicProduceData(
        name=topic, partition_data=(b.PartitionProduceData(index=partition, records=records),)
    )
    return ask(
        side, PRODUCE, version, transactional_id=tid, acks=-1, timeout=10000, topic_data=(data,)
    )


APPEND = [
    "responses.*.partition_responses.*.log_append_time",
    "responses.*.partition_responses.*.base_offset",
    "responses.*.partition_responses.*.log_start_offset",
]


def produce_txn(
    pair: Pair,
    ids: Ids,
    sequence: int,
    partition: int = 0,
    n: int = 2,
    case: str | None = None,
    version: int = 11,
    topic: str = TOPIC,
) -> tuple[diff.Plain, diff.Plain] | None:
    """A transactional batch of `ids` on each side (compared when `case` is given, else it
    must succeed)."""

    now = int(time.time() * 1000)  # the same on both sides (retention keeps recent batches)

    def request(side: Side) -> Any:
        pid, epoch = ids.of(side)
        return produce_request(
            side, txn_batch(pid, epoch, sequence, n, now), partition, topic, ids.tid, version
        )

    if case is not None:
        return compare(pair, case, request, [ids], masked=APPEND)
    for answer in pair.both(request):
        assert codes(answer) <= {ErrorCode.none}, answer
    return None


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


# -- AddPartitionsToTxn -----------------------------------------------------------------------


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


# -- AddOffsetsToTxn --------------------------------------------------------------------------


def add_offsets_request(side: Side, ids: Ids, group: str, version: int, epoch: int = 0) -> Any:
    pid, current = ids.of(side)
    return ask(
        side,
        ADD_OFFSETS,
        version,
        transactional_id=ids.tid,
        producer_id=pid,
        producer_epoch=current + epoch,
        group_id=group,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_add_offsets(pair: Pair, version: int) -> None:
    ids = Ids(new_id(f"offsets-v{version}"))
    init(pair, ids)
    group = new_id("group")
    v = f"AddOffsetsToTxn v{version}"

    def call(case: str, who: Ids = ids, epoch: int = 0, settle: bool = False) -> None:
        compare(
            pair,
            f"{v}: {case}",
            lambda side: add_offsets_request(side, who, group, version, epoch),
            [ids],
            settle=settle,
        )

    call("a group", settle=True)
    call("the same group again")
    call("an older epoch", epoch=-1)
    other = Ids(ids.tid, {s: p + 1000 for s, p in ids.pid.items()}, ids.epoch)
    call("another producer id", who=other)
    unknown = Ids(new_id("offsets-unknown"), {"kafka": 1, "rafka": 1}, 0)
    call("a transactional id never initialized", who=unknown)
    describe(pair, f"{v}: DescribeTransactions after it", ids)


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


# -- TxnOffsetCommit --------------------------------------------------------------------------

SYNC_GROUP = 14


def stable_group(side: Side, group: str) -> tuple[str, int]:
    """A classic group with one member, Stable (JoinGroup twice: KIP-394, then SyncGroup):
    the member id and generation."""
    b = builder(JOIN_GROUP, 9)

    def join(member: str) -> Any:
        return ask(
            side,
            JOIN_GROUP,
            9,
            group_id=group,
            session_timeout=datetime.timedelta(seconds=30),
            rebalance_timeout=datetime.timedelta(seconds=30),
            member_id=member,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=(b.JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None,
        )

    first = until_settled(lambda: join(""), f"JoinGroup on {side.name}")
    joined = join(first.member_id)
    assert joined.error_code == ErrorCode.none, joined
    s = builder(SYNC_GROUP, 5)
    synced = ask(
        side,
        SYNC_GROUP,
        5,
        group_id=group,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(s.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b""),),
    )
    assert synced.error_code == ErrorCode.none, synced
    return joined.member_id, joined.generation_id


def topic_id(side: Side, name: str) -> uuid.UUID:
    """The topic's id on this side (a random one for a topic that does not exist)."""
    b = builder(METADATA, 12)
    r = ask(
        side,
        METADATA,
        12,
        topics=(b.MetadataRequestTopic(topic_id=None, name=name),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (t,) = r.topics
    return t.topic_id if t.error_code == ErrorCode.none else uuid.uuid4()


def txn_commit_request(
    side: Side,
    ids: Ids,
    group: str,
    version: int,
    member: tuple[str, int] = ("", -1),
    topic: str = TOPIC,
    partition: int = 0,
) -> Any:
    pid, epoch = ids.of(side)
    b = builder(TXN_OFFSET_COMMIT, version)
    t = b.TxnOffsetCommitRequestTopic(
        name=topic,  # up to v5
        topic_id=topic_id(side, topic) if version >= 6 else None,  # v6
        partitions=(
            b.TxnOffsetCommitRequestPartition(
                partition_index=partition,
                committed_offset=5,
                committed_leader_epoch=-1,
                committed_metadata="m",
            ),
        ),
    )
    return ask(
        side,
        TXN_OFFSET_COMMIT,
        version,
        transactional_id=ids.tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=member[1],
        member_id=member[0],
        group_instance_id=None,
        topics=(t,),
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5, 6])
def test_txn_offset_commit(pair: Pair, version: int) -> None:
    """After AddOffsetsToTxn (below v5) or not (v5+ adds the group's partition itself); v6
    names topics by id (KIP-1319)."""
    ids = Ids(new_id(f"toc-v{version}"))
    init(pair, ids)
    group = new_id("toc-group")
    v = f"TxnOffsetCommit v{version}"

    def call(case: str, settle: bool = False, **kw: Any) -> None:
        compare(
            pair,
            f"{v}: {case}",
            lambda side: txn_commit_request(
                side,
                ids,
                kw.get("group", group),
                version,
                **{k: val for k, val in kw.items() if k != "group"},
            ),
            [ids],
            settle=settle,
        )

    call("before AddOffsetsToTxn", settle=True)  # the group's coordinator may be loading
    pair.both(
        lambda side: until_settled(
            lambda: add_offsets_request(side, ids, group, 3), "AddOffsetsToTxn"
        )
    )
    call("an empty group", settle=True)
    call("an unknown topic" + (" id" if version >= 6 else ""), topic="compat-txn-nope")
    call("an unknown partition", partition=9)
    call("an empty group id", group="")
    if version >= 3:
        call("a member id and generation of a group that has none", member=("m-1", 3))
    end(pair, ids, True)


def test_txn_offset_commit_members(pair: Pair) -> None:
    """v3+ checks the member and generation (KIP-447) against a Stable classic group."""
    ids = Ids(new_id("toc-members"))
    init(pair, ids)
    group = new_id("toc-members-group")
    members = dict(
        zip(("kafka", "rafka"), pair.both(lambda side: stable_group(side, group)), strict=True)
    )
    pair.both(
        lambda side: until_settled(
            lambda: add_offsets_request(side, ids, group, 3), "AddOffsetsToTxn"
        )
    )
    for case, member in [
        ("the group's member and generation", lambda m: m),
        ("an older generation", lambda m: (m[0], m[1] - 1)),
        ("a newer generation", lambda m: (m[0], m[1] + 1)),
        ("an unknown member id", lambda m: ("nobody", m[1])),
        ("no member id, generation -1", lambda m: ("", -1)),
    ]:

        def commit_as(side: Side, member: Callable[[Any], Any] = member) -> Any:
            return txn_commit_request(side, ids, group, 4, member=member(members[side.name]))

        compare(pair, f"TxnOffsetCommit v4: {case}", commit_as, [ids])
    end(pair, ids, False)


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


# -- Produce of transactional batches ---------------------------------------------------------


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


# -- read_committed Fetch ---------------------------------------------------------------------

FETCH_TOPIC = "compat-txn-fetch"


def batches(records: bytes | None, names: dict[int, str]) -> list[tuple[Any, ...]]:
    """The batches of a fetched record set, by their headers and a marker's type (the
    timestamps of markers and the CRCs differ, so neither is compared)."""
    out = []
    pos, data = 0, records or b""
    while pos + 61 <= len(data):
        h = header_at(data, pos)
        out.append(
            (
                h.base_offset,
                h.last_offset_delta,
                h.attributes,
                names.get(h.producer_id, h.producer_id),
                h.producer_epoch,
                h.base_sequence,
                h.record_count,
                marker(data[pos : pos + h.size]) if h.is_control else "",
            )
        )
        pos += h.size
    return out


def marker(batch: bytes) -> str:
    """A control batch's marker and coordinator epoch."""
    commit, coordinator_epoch = read_marker(batch)
    return f"{'COMMIT' if commit else 'ABORT'} (coordinator epoch {coordinator_epoch})"


def fetch_compare(pair: Pair, case: str, version: int, isolation: int, *ids: Ids) -> None:
    b = builder(FETCH, version)

    def one(side: Side) -> diff.Plain:
        tid = topic_id(side, FETCH_TOPIC) if version >= 13 else None
        part = b.FetchPartition(
            partition=0,
            current_leader_epoch=-1,
            fetch_offset=0,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=1 << 20,
            replica_directory_id=None,
            high_watermark=None,
        )
        r = side.conn().call(
            FETCH,
            version,
            cluster_id=None,
            replica_id=-1,
            replica_state=b.ReplicaState(replica_id=-1, replica_epoch=-1),
            max_wait=datetime.timedelta(0),
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=isolation,
            session_id=0,
            session_epoch=-1,
            topics=(b.FetchTopic(topic=FETCH_TOPIC, topic_id=tid, partitions=(part,)),),
            forgotten_topics_data=(),
            rack_id="",
        )
        names: dict[int, str] = {}
        for i in ids:
            names |= i.names(side)
        tree = named(diff.plain(r), names)
        for p in tree["responses"][0]["partitions"]:
            p["records"] = batches(bytes.fromhex(p["records"] or ""), names)
        return tree

    k, r = pair.both(one)
    pair.compare(case, k, r, masked=["session_id", "responses.*.topic_id"])


def list_offsets_compare(pair: Pair, case: str, isolation: int) -> None:
    b = builder(LIST_OFFSETS, 8)
    t = b.ListOffsetsTopic(
        name=FETCH_TOPIC,
        partitions=(
            b.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1),
        ),
    )
    pair.call(case, LIST_OFFSETS, 8, replica_id=-1, isolation_level=isolation, topics=(t,))


def test_read_committed(pair: Pair) -> None:
    """An aborted transaction, a committed one, one still open and a plain batch: what
    read_committed and read_uncommitted consumers get, the last stable offset and the
    aborted transactions list."""
    create_topics(pair, NewTopic(FETCH_TOPIC, 1, 1))
    aborted, committed = Ids(new_id("fetch-a")), Ids(new_id("fetch-b"))
    for ids in (aborted, committed):
        init(pair, ids)

    def produce_to(ids: Ids, sequence: int) -> None:
        pair.both(
            lambda side: until_settled(
                lambda: add_request(side, ids, [0], FETCH_TOPIC), "AddPartitionsToTxn"
            )
        )
        produce_txn(pair, ids, sequence, topic=FETCH_TOPIC)

    produce_to(aborted, 0)
    end(pair, aborted, False)
    produce_to(committed, 0)
    end(pair, committed, True)
    produce_to(aborted, 2)
    for side in pair.sides:
        plain = make_batch([b"plain"], timestamps=[int(time.time() * 1000)])
        assert codes(produce_request(side, plain, 0, FETCH_TOPIC)) <= {ErrorCode.none}
    for version in (4, 11, 12, 16):
        fetch_compare(
            pair,
            f"Fetch v{version} read_committed: a transaction still open",
            version,
            READ_COMMITTED,
            aborted,
            committed,
        )
    fetch_compare(
        pair,
        "Fetch v12 read_uncommitted: a transaction still open",
        12,
        READ_UNCOMMITTED,
        aborted,
        committed,
    )
    list_offsets_compare(pair, "ListOffsets v8 read_committed: a transaction open", READ_COMMITTED)
    list_offsets_compare(
        pair, "ListOffsets v8 read_uncommitted: a transaction open", READ_UNCOMMITTED
    )
    end(pair, aborted, False)
    for version in (4, 12):
        fetch_compare(
            pair,
            f"Fetch v{version} read_committed: after the second abort",
            version,
            READ_COMMITTED,
            aborted,
            committed,
        )
    list_offsets_compare(pair, "ListOffsets v8 read_committed: nothing open", READ_COMMITTED)


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
