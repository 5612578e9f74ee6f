"""Fetch answers as Kafka's: a partition answered with an error has unknown (-1) offsets, and
aborted_transactions [] when Kafka's request handling refused it (unknown topic or partition,
authorization) or null when the read failed; a fetch naming its last fetched epoch (v12+, any
fetcher) is checked against the leader's epochs first (Kafka's Partition.readRecords)."""

from __future__ import annotations

import datetime
from typing import Any

import anyio
import pytest
from kio.schema.fetch.v12 import request as v12
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from dataplane.handlers import fetch
from dataplane.log.errors import LogError
from dataplane.protocol.errors import ErrorCode
from tests.unit.fetch_session.fakes import TOPIC, FakeLog, FakeReplicas, answered, context, decode

LOG_END = 6  # the log of partition 0: offsets 0-5, all in leader epoch 0


class EpochLog(FakeLog):
    """Six records of epoch 0; a read past them is out of range, as the real log's."""

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return (0, LOG_END) if epoch == 0 else (-1, -1)

    def read(self, offset: int, max_bytes: int, upper_bound: int, first: bool) -> bytes:
        if not 0 <= offset <= LOG_END:
            raise LogError(ErrorCode.offset_out_of_range)
        return super().read(offset, max_bytes, upper_bound, first)


def fetch_one(partition: int = 0, offset: int = 0, last_epoch: int = -1, topic: str = TOPIC) -> Any:
    replicas = FakeReplicas(2)
    replicas.partitions[0].high_watermark = LOG_END
    replicas.partitions[0].log = EpochLog(replicas.reads, 0)
    replicas.partitions[1].lose_leadership()
    part = v12.FetchPartition(
        partition=i32(partition),
        fetch_offset=i64(offset),
        last_fetched_epoch=i32(last_epoch),
        partition_max_bytes=i32(1000),
    )
    req = v12.FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        max_bytes=i32(1_000_000),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(v12.FetchTopic(topic=TopicName(topic), partitions=(part,)),),
        forgotten_topics_data=(),
    )

    async def call() -> Any:
        return await fetch.handle(context(replicas, 12), req)

    (answer,) = answered(decode(12, anyio.run(call))).values()
    return answer


def offsets(answer: Any) -> tuple[int, int, int]:
    return answer.high_watermark, answer.last_stable_offset, answer.log_start_offset


@pytest.mark.parametrize(
    ("what", "kwargs", "code", "aborted"),
    [
        ("unknown topic", {"topic": "nope"}, ErrorCode.unknown_topic_or_partition, ()),
        ("unknown partition", {"partition": 9}, ErrorCode.unknown_topic_or_partition, ()),
        ("not the leader", {"partition": 1}, ErrorCode.not_leader_or_follower, None),
        ("past the log end", {"offset": 100}, ErrorCode.offset_out_of_range, None),
    ],
)
def test_an_error_has_unknown_offsets(
    what: str, kwargs: dict[str, Any], code: ErrorCode, aborted: tuple | None
) -> None:
    answer = fetch_one(**kwargs)
    assert answer.error_code == code, what
    assert offsets(answer) == (-1, -1, -1)
    assert answer.aborted_transactions == aborted


def test_an_epoch_newer_than_the_leaders_is_out_of_range() -> None:
    """The end of epoch 3 cannot be found here: Kafka answers OFFSET_OUT_OF_RANGE."""
    answer = fetch_one(offset=6, last_epoch=3)
    assert answer.error_code == ErrorCode.offset_out_of_range
    assert offsets(answer) == (-1, -1, -1)


def test_a_fetcher_past_its_epochs_end_diverged() -> None:
    """Epoch 0 ends at 6 here: a fetcher at 100 of epoch 0 is told where its log diverged, and
    gets no records."""
    answer = fetch_one(offset=100, last_epoch=0)
    assert answer.error_code == ErrorCode.none
    assert (answer.diverging_epoch.epoch, answer.diverging_epoch.end_offset) == (0, LOG_END)
    assert offsets(answer) == (LOG_END, LOG_END, 0)
    assert not answer.records


def test_a_fetcher_whose_epoch_agrees_reads() -> None:
    answer = fetch_one(offset=3, last_epoch=0)
    assert answer.error_code == ErrorCode.none
    assert answer.records
    assert answer.diverging_epoch.epoch == -1
