"""What read_committed and read_uncommitted consumers get (Fetch and ListOffsets) of aborted,
committed and open transactions: the last stable offset and the aborted transactions.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from cluster.kafka_client import builder
from dataplane.log.batch import header_at
from dataplane.log.control import read_marker
from tests.compat import diff
from tests.compat.conftest import create_topics
from tests.compat.pair import Pair, Side
from tests.compat.transactions.support import (
    FETCH,
    LIST_OFFSETS,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    Ids,
    add_request,
    codes,
    end,
    init,
    named,
    new_id,
    produce_request,
    produce_txn,
    topic_id,
    until_settled,
)
from tests.unit.log.batches import make_batch

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
