"""Stand-ins for the broker around the Fetch handler: partitions whose high watermark a test
moves (waking watchers as `Partition` does) and whose log counts reads, a metadata cache, and
the request and response of Fetch v12 (topic names) and v13 (topic ids)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

from kio.schema.fetch.v12 import request as v12
from kio.schema.fetch.v12.response import FetchResponse as FetchResponseV12
from kio.schema.fetch.v13 import request as v13
from kio.schema.fetch.v13.response import FetchResponse as FetchResponseV13
from kio.serial import entity_reader

from dataplane.connection import Connection
from dataplane.fetch_session import FetchSessionCache
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.quota import QuotaManagers, WindowConfig
from dataplane.request_context import RequestContext

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=0x1234)


class FakeLog:
    def __init__(self, reads: list[tuple[int, int]], index: int) -> None:
        self.log_start_offset = 0
        self.reads = reads
        self.index = index

    def read(self, offset: int, max_bytes: int, upper_bound: int, first: bool) -> bytes:
        self.reads.append((self.index, offset))
        n = min(upper_bound - offset, max_bytes // 10 or (1 if first else 0))
        return b"r" * 10 * n if n > 0 else b""


class FakePartition:
    """A leader replica: `produce` moves its high watermark and wakes its watchers."""

    def __init__(self, index: int, reads: list[tuple[int, int]]) -> None:
        self.index = index
        self.high_watermark = 0
        self.is_leader = True
        self.isr = (1,)
        self.log = FakeLog(reads, index)
        self.waiters: set[Any] = set()

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark

    def watch(self, event: Any) -> None:
        self.waiters.add(event)

    def unwatch(self, event: Any) -> None:
        self.waiters.discard(event)

    def wake(self) -> None:
        for event in list(self.waiters):
            event.set()
        self.waiters.clear()

    def produce(self, records: int) -> None:
        self.high_watermark += records
        self.wake()

    def lose_leadership(self) -> None:
        self.is_leader = False
        self.wake()


class FakeReplicas:
    def __init__(self, count: int) -> None:
        self.reads: list[tuple[int, int]] = []
        self.partitions = {i: FakePartition(i, self.reads) for i in range(count)}

    def readable_partition(self, topic: str, index: int, epoch: int, follower: bool) -> Any:
        partition = self.partitions.get(index)
        if topic != TOPIC or partition is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        if not partition.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        return partition


def context(
    replicas: FakeReplicas, version: int = 12, sessions: FetchSessionCache | None = None
) -> Any:
    info = SimpleNamespace(name=TOPIC, topic_id=TOPIC_ID.bytes)
    services = SimpleNamespace(
        replicas=replicas,
        cache=SimpleNamespace(
            topics={TOPIC: info}, topics_by_id={TOPIC_ID.bytes: info}, brokers={}
        ),
        authorizer=SimpleNamespace(enabled=False),
        config=SimpleNamespace(
            replica_selector_class="", broker_rack=None, fetch_max_bytes=57_671_680
        ),
        quotas=QuotaManagers(WindowConfig(), WindowConfig()),
        fetch_sessions=FetchSessionCache(10, 120_000) if sessions is None else sessions,
    )
    header = SimpleNamespace(api_version=version, client_id="test")
    return RequestContext(services, header, Connection(peer="1.2.3.4:5"), {})  # type: ignore[arg-type]


def request(
    version: int,
    offsets: dict[int, int],
    session_id: int = 0,
    epoch: int = 0,
    forgotten: Iterable[int] = (),
    max_wait_ms: int = 0,
    max_bytes: int = 1_000_000,
) -> Any:
    """A consumer's Fetch listing `offsets` (partition: fetch offset), 1,000 bytes each."""
    m = v13 if version == 13 else v12
    topic = {"topic_id": TOPIC_ID} if version == 13 else {"topic": TOPIC}
    parts = tuple(
        m.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1000)
        for p, o in offsets.items()
    )
    forget = tuple(forgotten)
    return m.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=max_bytes,
        session_id=session_id,
        session_epoch=epoch,
        topics=(m.FetchTopic(partitions=parts, **topic),) if parts else (),  # type: ignore[arg-type]
        forgotten_topics_data=(m.ForgottenTopic(partitions=forget, **topic),) if forget else (),  # type: ignore[arg-type]
    )


def decode(version: int, buffers: list) -> Any:
    cls = FetchResponseV13 if version == 13 else FetchResponseV12
    return entity_reader(cls)(b"".join(bytes(b) for b in buffers), 0)[0]  # type: ignore[type-var]


def answered(response: Any) -> dict[int, Any]:
    """The response's partitions by index (one topic here)."""
    return {p.partition_index: p for t in response.responses for p in t.partitions}
