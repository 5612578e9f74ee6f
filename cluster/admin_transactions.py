"""Transactions over the Kafka protocol, as `rafka transactions` and kafka-transactions.sh
list and describe them (ListTransactions from every broker, DescribeTransactions at each
transactional id's coordinator)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from cluster.admin import (
    TRANSACTION_KEY,
    AdminError,
    BrokerInfo,
    Brokers,
    check,
    find_coordinators,
    metadata,
    refusal,
)
from dataplane.protocol.message_codec import ArrayOf, Field, Message, Struct, Tags

# ---------------------------------------------------------------- transactions (APIs 65, 66)

DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
# States in which a transaction is open: it holds back the LSO of its partitions.
OPEN_TRANSACTION_STATES = frozenset(
    {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
)
# Worth asking again shortly: the coordinator is loading its partition, or has just moved.
_COORDINATOR_MOVING = frozenset(
    {
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
    }
)
_RETRY_BACKOFF_S = 0.2


@dataclass
class TransactionListing:
    transactional_id: str
    coordinator: int  # the broker that answered for it
    producer_id: int
    state: str


@dataclass
class TransactionList:
    transactions: list[TransactionListing]
    failed: dict[int, Exception]  # broker id -> why it did not answer
    unknown_states: list[str]  # state filters the coordinators do not know


def list_transactions(
    brokers: Brokers,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    duration_ms: int = -1,
    retry_s: float = 10,
) -> TransactionList:
    """ListTransactions at every broker, as Kafka's Admin.listTransactions does: each broker
    answers for the `__transaction_state` partitions it leads. v1 (KIP-994) carries the
    duration filter; a broker still loading a partition is asked again for `retry_s`."""
    info = metadata(brokers, [])
    version = 1 if duration_ms >= 0 else 0
    fields = {
        "state_filters": tuple(states),
        "producer_id_filters": tuple(producer_ids),
        "duration_filter": duration_ms,
    }
    out = TransactionList([], {}, [])
    for node, broker in info.brokers.items():

        def ask(broker: BrokerInfo = broker) -> Any:
            with brokers.at(broker.host, broker.port, timeout=10) as c:
                return c.call(LIST_TRANSACTIONS, version, **fields)

        try:
            r = _retrying(ask, lambda r: r.error_code in _COORDINATOR_MOVING, retry_s)
            check(f"list the transactions of broker {node}", r.error_code)
        except (OSError, AdminError) as e:
            out.failed[node] = e
            continue
        out.unknown_states += [s for s in r.unknown_state_filters if s not in out.unknown_states]
        out.transactions += [
            TransactionListing(t.transactional_id, node, t.producer_id, t.transaction_state)
            for t in r.transaction_states
        ]
    out.transactions.sort(key=lambda t: t.transactional_id)
    return out


def _retrying(ask: Any, again: Any, timeout: float) -> Any:
    """`ask()` until `again(result)` is false or `timeout` seconds have passed (a client's
    retry with backoff, as Kafka's admin client does on retriable errors)."""
    deadline = time.monotonic() + timeout
    result = ask()
    while again(result) and time.monotonic() < deadline:
        time.sleep(_RETRY_BACKOFF_S)
        result = ask()
    return result


@dataclass
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1: no transaction started yet
    partitions: list[tuple[str, int]]  # in a Prepare* state: those still without a marker

    def age_ms(self, now_ms: int) -> int | None:
        """How long the open transaction has been running; None when none is open."""
        if self.state not in OPEN_TRANSACTION_STATES or self.start_time_ms < 0:
            return None
        return max(0, now_ms - self.start_time_ms)


def describe_transactions(
    brokers: Brokers, transactional_ids: list[str], retry_s: float = 10
) -> dict[str, TransactionDescription | AdminError]:
    """Each transactional id at its coordinator (FindCoordinator key type 1, then
    DescribeTransactions), as kafka-transactions.sh describe; ids whose coordinator is loading
    or moving are asked again for `retry_s`. Unknown ids get TRANSACTIONAL_ID_NOT_FOUND."""
    out: dict[str, TransactionDescription | AdminError] = {}
    pending = list(dict.fromkeys(transactional_ids))
    deadline = time.monotonic() + retry_s
    while pending:
        moving: dict[str, AdminError] = {}
        at: dict[tuple[int, str, int], list[str]] = {}
        for tid, found in find_coordinators(brokers, pending, TRANSACTION_KEY).items():
            if isinstance(found, AdminError):
                (moving if found.code in _COORDINATOR_MOVING else out)[tid] = found
            else:
                at.setdefault(found, []).append(tid)
        for (node, host, port), tids in at.items():
            try:
                with brokers.at(host, port, timeout=10) as c:
                    body = c.call_raw(DESCRIBE_TRANSACTIONS, 0, transactional_ids=tuple(tids))
            except OSError as e:  # the coordinator died and metadata does not say so yet
                for tid in tids:
                    moving[tid] = AdminError(
                        f"describe transaction {tid}",
                        ErrorCode.coordinator_not_available,
                        f"coordinator broker {node} at {host}:{port} unreachable: {e}",
                    )
                continue
            response, _ = _DESCRIBE_TRANSACTIONS_RESPONSE.decode(body, 0)
            for t in response.transaction_states:
                error = refusal(f"describe transaction {t.transactional_id}", t.error_code, None)
                if error is None:
                    out[t.transactional_id] = _description(t, node)
                else:
                    (moving if error.code in _COORDINATOR_MOVING else out)[t.transactional_id] = (
                        error
                    )
        if moving and time.monotonic() < deadline:
            time.sleep(_RETRY_BACKOFF_S)
        else:
            out.update(moving)
            moving = {}
        pending = list(moving)
    return {tid: out[tid] for tid in dict.fromkeys(transactional_ids)}


def _description(t: _DescribedTransaction, node: int) -> TransactionDescription:
    return TransactionDescription(
        t.transactional_id,
        node,
        t.transaction_state,
        t.producer_id,
        t.producer_epoch,
        t.transaction_timeout_ms,
        t.transaction_start_time_ms,
        sorted((topic.topic, p) for topic in t.topics for p in topic.partitions),
    )


# DescribeTransactionsResponse v0 (Kafka's DescribeTransactionsResponse.json), decoded with our
# schema-driven codec rather than kio's: kio refuses the start time -1 Kafka sends for a
# transactional id with no transaction yet.


@dataclass(frozen=True, slots=True)
class _TransactionTopic:
    topic: str
    partitions: tuple[int, ...]
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class _DescribedTransaction:
    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: tuple[_TransactionTopic, ...]
    unknown_tags: Tags = ()


@dataclass(frozen=True, slots=True)
class _DescribeTransactionsResponse:
    throttle_time_ms: int
    transaction_states: tuple[_DescribedTransaction, ...]
    unknown_tags: Tags = ()


_DESCRIBE_TRANSACTIONS_RESPONSE = Message(
    "DescribeTransactionsResponse",
    (0, 0),
    (0, 0),
    Struct(
        _DescribeTransactionsResponse,
        (
            Field("throttle_time_ms", "int32"),
            Field(
                "transaction_states",
                ArrayOf(
                    Struct(
                        _DescribedTransaction,
                        (
                            Field("error_code", "int16"),
                            Field("transactional_id", "string"),
                            Field("transaction_state", "string"),
                            Field("transaction_timeout_ms", "int32"),
                            Field("transaction_start_time_ms", "int64"),
                            Field("producer_id", "int64"),
                            Field("producer_epoch", "int16"),
                            Field(
                                "topics",
                                ArrayOf(
                                    Struct(
                                        _TransactionTopic,
                                        (
                                            Field("topic", "string"),
                                            Field("partitions", ArrayOf("int32")),
                                        ),
                                        keeps_tags=True,
                                    )
                                ),
                            ),
                        ),
                        keeps_tags=True,
                    )
                ),
            ),
        ),
        keeps_tags=True,
    ),
)
