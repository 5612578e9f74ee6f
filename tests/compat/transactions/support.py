"""What the modules of tests/compat/transactions share: the API keys, each case's own
transactional ids (`new_id`) and their producers on each broker (`Ids`, `named`), the requests one
side at a time, and `compare` (each side's answer with its producer ids named, retried while it
only says "not yet").
"""

from __future__ import annotations

import datetime
import itertools
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.admin_transactions import (
    _DESCRIBE_TRANSACTIONS_RESPONSE as DESCRIBE_TRANSACTIONS_RESPONSE,
)
from cluster.kafka_client import builder
from cluster.polling import wait_for
from dataplane.log.batch import ATTR_TRANSACTIONAL
from tests.compat import diff
from tests.compat.pair import Pair, Side
from tests.unit.log.batches import make_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, JOIN_GROUP = 0, 1, 2, 3, 10, 11
INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
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
