"""The change buffer behind Watch, and the events it holds."""

from __future__ import annotations

import threading

from meta import wire
from meta.commands import Change
from meta.entity_proto import configs_from_proto
from meta.feed import ChangeFeed
from meta.model import Broker, Partition, Topic
from meta.state import MetaState
from proto import meta_pb2


def events(*offsets: int) -> list[meta_pb2.WatchEvent]:
    return [meta_pb2.WatchEvent(offset=o) for o in offsets]


def offsets(found: list[meta_pb2.WatchEvent] | None) -> list[int] | None:
    return None if found is None else [e.offset for e in found]


def test_since_returns_the_buffered_tail() -> None:
    feed = ChangeFeed(capacity=10)
    feed.publish(events(1, 2, 3))
    assert offsets(feed.since(0)) == [1, 2, 3]
    assert offsets(feed.since(2)) == [3]
    assert offsets(feed.since(3)) == []
    assert offsets(feed.since(7)) == []  # ahead of this node: wait for it to catch up


def test_evicted_changes_need_a_snapshot() -> None:
    feed = ChangeFeed(capacity=2)
    feed.publish(events(1, 2, 3))
    assert feed.since(0) is None
    assert offsets(feed.since(1)) == [2, 3]


def test_reset_after_a_snapshot_install() -> None:
    feed = ChangeFeed(capacity=10)
    feed.publish(events(1, 2))
    feed.reset(40)
    assert feed.since(2) is None
    assert offsets(feed.since(40)) == []
    feed.publish(events(41))
    assert offsets(feed.since(40)) == [41]


def test_wait_returns_when_a_later_event_is_published() -> None:
    feed = ChangeFeed(capacity=10)
    feed.publish(events(1))
    feed.wait(0, timeout=10)  # already there: no wait
    publisher = threading.Timer(0.05, feed.publish, [events(2)])
    publisher.start()
    feed.wait(1, timeout=10)
    assert offsets(feed.since(1)) == [2]
    feed.close()
    feed.wait(2, timeout=10)  # closed: returns at once
    assert feed.closed


def test_change_events_carry_the_current_entity() -> None:
    state = MetaState(cluster_id="c", offset=3)
    partition = Partition(0, (1,), (1,), 1, leader_epoch=2)
    state.topics["t"] = Topic("t", b"\x07" * 16, (partition,), {"retention.ms": "1"})
    state.brokers[1] = Broker(1, "h", 9092, None, "h:9392", b"i", epoch=1)

    topic_event = wire.change_event(state, Change(2, "topic", "t"))
    assert topic_event.offset == 2
    assert topic_event.topic.partitions[0].leader_epoch == 2
    assert configs_from_proto(topic_event.topic.configs) == {"retention.ms": "1"}
    deleted = wire.change_event(state, Change(3, "topic_deleted", "gone", b"\x01" * 16))
    assert deleted.topic_deleted == meta_pb2.TopicDeleted(name="gone", topic_id=b"\x01" * 16)
    broker_event = wire.change_event(state, Change(1, "broker", 1))
    assert broker_event.broker.rack == ""
    assert broker_event.broker.epoch == 1

    snapshot = wire.snapshot_event(state)
    assert snapshot.offset == 3
    assert snapshot.snapshot.cluster_id == "c"
    assert [t.name for t in snapshot.snapshot.topics] == ["t"]
