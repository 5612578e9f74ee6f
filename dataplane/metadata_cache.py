"""The broker's view of the cluster metadata, fed by the meta service's watch stream.

Every broker holds the whole (small) metadata state, so Metadata requests and leadership
checks on the produce path never leave the process. Entries are immutable: a change replaces
an entry, and readers holding the old one see a consistent snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio

from proto import meta_pb2

log = logging.getLogger("rafka.metadata")


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    index: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: bytes
    partitions: tuple[PartitionInfo, ...]
    configs: Mapping[str, str]
    internal: bool


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    host: str
    port: int
    rack: str | None
    fenced: bool
    epoch: int
    replication_endpoint: str


def partition_info(p: meta_pb2.Partition) -> PartitionInfo:
    return PartitionInfo(
        p.index, tuple(p.replicas), tuple(p.isr), p.leader, p.leader_epoch, p.partition_epoch
    )


def _topic(t: meta_pb2.Topic) -> TopicInfo:
    return TopicInfo(
        name=t.name,
        topic_id=bytes(t.topic_id),
        partitions=tuple(partition_info(p) for p in sorted(t.partitions, key=lambda p: p.index)),
        configs=dict(t.configs),
        internal=t.internal,
    )


def _broker(b: meta_pb2.Broker) -> BrokerInfo:
    return BrokerInfo(
        b.id, b.host, b.port, b.rack or None, b.fenced, b.epoch, b.replication_endpoint
    )


TopicListener = Callable[[TopicInfo | None, TopicInfo | None], None]
BrokerListener = Callable[[BrokerInfo | None, BrokerInfo | None], None]


class MetadataCache:
    """Applies watch events and tells listeners which topics and brokers changed."""

    def __init__(self) -> None:
        self.cluster_id = ""
        self.offset = -1
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[bytes, TopicInfo] = {}
        self.brokers: dict[int, BrokerInfo] = {}
        self.topic_listeners: list[TopicListener] = []
        self.broker_listeners: list[BrokerListener] = []
        self._changed = anyio.Event()
        self.ready = anyio.Event()  # set once the first snapshot (or change) has been applied

    # -- reads -------------------------------------------------------------------------------

    def live_brokers(self) -> list[BrokerInfo]:
        return sorted((b for b in self.brokers.values() if not b.fenced), key=lambda b: b.id)

    def controller_id(self) -> int:
        """Clients need some broker to send admin requests to; Kafka (KRaft) names a live one."""
        live = self.live_brokers()
        return live[0].id if live else -1

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait for a metadata change that makes `predicate` true; False on timeout."""
        with anyio.move_on_after(timeout):
            while not predicate():
                await self._changed.wait()
            return True
        return False

    # -- writes (from the watch stream) --------------------------------------------------------

    def apply(self, event: meta_pb2.WatchEvent) -> None:
        kind = event.WhichOneof("kind")
        if kind == "snapshot":
            self._apply_snapshot(event.snapshot)
        elif kind == "topic":
            self._set_topic(_topic(event.topic))
        elif kind == "topic_deleted":
            old = self.topics.get(event.topic_deleted.name)
            if old is not None and old.topic_id == bytes(event.topic_deleted.topic_id):
                self._remove_topic(old)
        elif kind == "broker":
            self._set_broker(_broker(event.broker))
        self.offset = event.offset
        self.ready.set()
        self._changed.set()
        self._changed = anyio.Event()

    def _apply_snapshot(self, snap: meta_pb2.Snapshot) -> None:
        self.cluster_id = snap.cluster_id
        new_topics = {t.name: _topic(t) for t in snap.topics}
        for old in list(self.topics.values()):
            if new_topics.get(old.name) is None or new_topics[old.name].topic_id != old.topic_id:
                self._remove_topic(old)
        for topic in new_topics.values():
            self._set_topic(topic)
        new_brokers = {b.id: _broker(b) for b in snap.brokers}
        for old_b in list(self.brokers.values()):
            if old_b.id not in new_brokers:
                del self.brokers[old_b.id]
                self._notify_broker(old_b, None)
        for broker in new_brokers.values():
            self._set_broker(broker)

    def _set_topic(self, topic: TopicInfo) -> None:
        old = self.topics.get(topic.name)
        if old is not None and old.topic_id != topic.topic_id:
            self._remove_topic(old)
            old = None
        if old == topic:
            return
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic
        for listener in self.topic_listeners:
            listener(old, topic)

    def _remove_topic(self, topic: TopicInfo) -> None:
        del self.topics[topic.name]
        self.topics_by_id.pop(topic.topic_id, None)
        for listener in self.topic_listeners:
            listener(topic, None)

    def _set_broker(self, broker: BrokerInfo) -> None:
        old = self.brokers.get(broker.id)
        if old != broker:
            self.brokers[broker.id] = broker
            self._notify_broker(old, broker)

    def _notify_broker(self, old: BrokerInfo | None, new: BrokerInfo | None) -> None:
        for listener in self.broker_listeners:
            listener(old, new)
