"""Produce refuses client appends to the internal topics (issue 25), as Kafka's ReplicaManager
does: INVALID_TOPIC_EXCEPTION "Cannot append to internal topic <name>", nothing appended, not
even a transactional batch's partition verified (the coordinators write these topics through
their partitions, never through Produce). The other topics of the request are appended. A
partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION, as Kafka 4.4 answers it (checked
against it: its answer carries no error message, see the report of issue 25)."""

from __future__ import annotations

import datetime
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from kio.schema.produce import v12
from kio.serial import entity_reader

from dataplane.handlers import produce
from dataplane.protocol.errors import ConnectionClosed, ErrorCode
from tests.unit.handlers.test_txn_dataplane import (
    FakePartition,
    FakeReplicas,
    FakeVerifier,
    batch,
    context,
)

INTERNAL = ["__consumer_offsets", "__transaction_state", "__share_group_state"]


def _request(topics: list[str], transactional: bool, acks: int) -> Any:
    return SimpleNamespace(
        acks=acks,
        transactional_id="tid" if transactional else None,
        timeout=datetime.timedelta(seconds=1),
        topic_data=[
            SimpleNamespace(
                name=name, partition_data=[SimpleNamespace(index=0, records=batch(transactional))]
            )
            for name in topics
        ],
    )


def _replicas(internal: str, *partitions: FakePartition) -> FakeReplicas:
    """Partition 0 of `internal` (2 partitions) and of "t" lead here."""
    replicas = FakeReplicas({(internal, 0): partitions[0], ("t", 0): partitions[1]})
    replicas.cache.topics[internal] = SimpleNamespace(partitions=[0, 1])
    return replicas


def _produce(req: Any, replicas: FakeReplicas, verifier: FakeVerifier) -> Any:
    ctx = context(12, replicas, verifier=verifier)

    async def main() -> Any:
        return await produce.handle(ctx, req)

    return anyio.run(main)


@pytest.mark.parametrize("internal", INTERNAL)
@pytest.mark.parametrize("transactional", [False, True])
def test_clients_cannot_append_to_internal_topics(internal: str, transactional: bool) -> None:
    refused, regular = FakePartition(0), FakePartition(0, open_txn=True)
    replicas = _replicas(internal, refused, regular)
    verifier = FakeVerifier()
    answers = _answers(
        _produce(_request([internal, "t"], transactional, acks=1), replicas, verifier)
    )

    assert answers[internal, 0].error_code == ErrorCode.invalid_topic_exception
    assert answers[internal, 0].error_message == f"Cannot append to internal topic {internal}"
    assert answers["t", 0].error_code == ErrorCode.none
    assert refused.appended == []
    assert len(regular.appended) == 1
    assert verifier.calls == []  # no transaction verification on the coordinator either


def _answers(body: bytes) -> dict[tuple[str, int], Any]:
    response: Any = entity_reader(v12.response.ProduceResponse)(body, 0)[0]
    return {(t.name, p.index): p for t in response.responses for p in t.partition_responses}


def test_a_partition_that_does_not_exist_is_unknown() -> None:
    replicas = _replicas("__consumer_offsets", FakePartition(0), FakePartition(0))
    req = _request(["__consumer_offsets", "__transaction_state"], False, acks=1)
    req.topic_data[0].partition_data[0].index = 7  # __consumer_offsets has 2 partitions here
    answers = _answers(_produce(req, replicas, FakeVerifier()))
    # __transaction_state does not exist yet
    assert answers["__consumer_offsets", 7].error_code == ErrorCode.unknown_topic_or_partition
    assert answers["__transaction_state", 0].error_code == ErrorCode.unknown_topic_or_partition


def test_acks_0_to_an_internal_topic_closes_the_connection() -> None:
    """No answer carries the error at acks=0: Kafka closes the connection instead."""
    refused = FakePartition(0)
    replicas = _replicas("__consumer_offsets", refused, FakePartition(0))
    with pytest.raises(ConnectionClosed):
        _produce(_request(["__consumer_offsets"], False, acks=0), replicas, FakeVerifier())
    assert refused.appended == []
