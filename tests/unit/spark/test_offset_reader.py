"""OffsetReader.assigned (spark/connector/client.py): the partitions a strategy covers and their
offsets are retried together, so a topic deleted between the two is dropped, not retried."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from spark.connector.client import OffsetReader
from spark.connector.options import SUBSCRIBE_PATTERN, Strategy


class StaleAdmin:
    """An AdminClient whose first metadata answer still lists a deleted topic (a broker's cache
    that has not caught up yet); ListOffsets for that topic fails as Kafka's does."""

    def __init__(self, stale_answers: int) -> None:
        self.stale_answers = stale_answers
        self.listings = 0
        self.list_offsets_calls = 0

    def list_topics(self, timeout: float) -> Any:
        self.listings += 1
        names = ["t-kept"] + (["t-gone"] if self.listings <= self.stale_answers else [])
        topic = SimpleNamespace(error=None, partitions={0: None})
        return SimpleNamespace(topics=dict.fromkeys(names, topic))

    def list_offsets(self, specs: dict, request_timeout: float) -> dict:
        self.list_offsets_calls += 1
        out = {}
        for tp in specs:
            f: Future = Future()
            if tp.topic == "t-gone":
                f.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            else:
                f.set_result(SimpleNamespace(offset=7))
            out[tp] = f
        return out


def reader(admin: StaleAdmin) -> OffsetReader:
    r = OffsetReader({"bootstrap.servers": "unused:9092"}, retries=3, retry_interval_ms=0)
    r._admin = admin
    return r


PATTERN = Strategy(SUBSCRIBE_PATTERN, pattern="t-.*")


def test_a_deleted_topic_is_listed_again_not_retried() -> None:
    admin = StaleAdmin(stale_answers=1)
    r = reader(admin)
    assert r.assigned(PATTERN, r.latest) == {("t-kept", 0): 7}
    assert (admin.listings, admin.list_offsets_calls) == (2, 2)


def test_retries_are_counted_once_not_per_nested_call() -> None:
    """`retries` bounds the whole: the inner ListOffsets does not retry on its own."""
    admin = StaleAdmin(stale_answers=100)
    r = reader(admin)
    with pytest.raises(KafkaException):
        r.assigned(PATTERN, r.latest)
    assert (admin.listings, admin.list_offsets_calls) == (4, 4)
    # The reader retries again after a failure of the whole.
    admin.stale_answers = 0
    assert r.assigned(PATTERN, r.latest) == {("t-kept", 0): 7}
