"""Produce answers a batch refused for some of its records with those records (KIP-467): the
partition's ``record_errors`` (batch index and message) and its error message, from Produce v8,
which is how librdkafka fails the records at fault with INVALID_RECORD and the others of the
batch with "a different record failed"."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from kio.schema.produce import v8, v12
from kio.serial import entity_reader

from dataplane.handlers import produce
from dataplane.log.batch import RecordError
from dataplane.protocol.errors import ErrorCode
from tests.unit.handlers.answers import settled
from tests.unit.handlers.test_txn_dataplane import (
    FakePartition,
    FakeReplicas,
    batch,
    context,
    produce_request,
)

RECORD_ERRORS = ((0, "no key"), (10, "no key"))


class RefusingPartition(FakePartition):
    def append(self, records: bytes, now: int, guard: object = None) -> Any:
        raise RecordError(ErrorCode.invalid_record, "One or more records...", RECORD_ERRORS)


@pytest.mark.parametrize("version", [8, 12])
def test_record_errors_reach_the_response(version: int) -> None:
    replicas = FakeReplicas({("t", 0): RefusingPartition(0), ("t", 1): FakePartition(1)})
    ctx = context(version, replicas)

    async def main() -> Any:
        return await produce.handle(ctx, produce_request({0: batch(False), 1: batch(False)}, None))

    body = anyio.run(main)
    cls = {8: v8.response.ProduceResponse, 12: v12.response.ProduceResponse}[version]
    response: Any = entity_reader(cls)(body, 0)[0]
    (topic,) = response.responses
    refused, appended = topic.partition_responses
    assert refused.error_code == ErrorCode.invalid_record
    assert refused.error_message == "One or more records..."
    assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [
        (0, "no key"),
        (10, "no key"),
    ]
    assert appended.error_code == ErrorCode.none
    assert appended.record_errors == ()


class ReplicatingPartition(FakePartition):
    """acks=all: the batch is replicated at once."""

    def await_replication(self, offset: int, epoch: int, wait: Any, slot: int) -> None:
        wait.settle(slot, ErrorCode.none)


def test_an_acks_all_answer_carries_the_throttle_the_server_adds() -> None:
    """request_percentage throttles a Produce once its handler has run: the deferred acks=all
    answer, encoded later, carries it (Kafka answers the larger of its two throttles)."""
    ctx = context(12, FakeReplicas({("t", 0): ReplicatingPartition(0)}))

    async def main() -> Any:
        deferred = await produce.handle(ctx, produce_request({0: batch(False)}, None, acks=-1))
        ctx.throttle_ms = 250.0  # as quota.request_time sets it after the handler
        return await settled(deferred)

    answer: Any = entity_reader(v12.response.ProduceResponse)(anyio.run(main), 0)[0]
    assert answer.throttle_time.total_seconds() * 1000 == 250
