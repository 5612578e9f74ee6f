"""Group flows played the same way on both brokers (groups/, test_share_groups).

A group case is a sequence of requests whose later steps use what earlier answers said (a member
id, a generation), some of them parked (a JoinGroup waiting for the rebalance) while others go
on other connections. `run(pair, case, flow)` plays `flow` against Kafka, then against Rafka,
each on connections of its own, and compares the answers step by step. The ids a broker makes
up (classic member ids are the client id and a random UUID) are compared by shape:
`generated_ids` replaces the UUID inside them.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from cluster.kafka_client import KafkaConnection, builder
from cluster.polling import wait_for
from tests.compat import diff
from tests.compat.pair import CompatClient, Pair, Side

METADATA, FIND_COORDINATOR = 3, 10
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def generated_ids(tree: diff.Plain) -> diff.Plain:
    """`tree` (plain data) with every UUID inside a string replaced by "<uuid>"."""
    if isinstance(tree, dict):
        return {k: generated_ids(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [generated_ids(v) for v in tree]
    if isinstance(tree, str):
        return _UUID.sub("<uuid>", tree)
    return tree


@dataclass
class Pending:
    """A request sent and not yet answered (a parked JoinGroup or SyncGroup)."""

    conn: KafkaConnection
    api_key: int
    version: int
    correlation_id: int


@dataclass
class Broker:
    """One side's connections (by name, opened on first use) and the steps a flow recorded."""

    side: Side
    steps: list[tuple[str, Any]] = field(default_factory=list)
    _conns: dict[str, KafkaConnection] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.side.name

    def conn(self, name: str = "main") -> KafkaConnection:
        if name not in self._conns:
            self._conns[name] = CompatClient.to_any(self.side.bootstrap, timeout=60)
        return self._conns[name]

    def call(self, api_key: int, version: int, conn: str = "main", **fields: Any) -> Any:
        return self.conn(conn).call(api_key, version, **fields)

    def send(self, api_key: int, version: int, conn: str, **fields: Any) -> Pending:
        c = self.conn(conn)
        return Pending(c, api_key, version, c.send(api_key, version, **fields))

    def receive(self, pending: Pending) -> Any:
        return pending.conn.receive(pending.api_key, pending.version, pending.correlation_id)

    def step(self, label: str, answer: Any) -> Any:
        """Record `answer` as the flow's step `label` (compared with the other side's)."""
        self.steps.append((label, answer))
        return answer

    def topic_id(self, topic: str) -> uuid.UUID:
        b = builder(METADATA, 12)
        r = self.call(
            METADATA,
            12,
            topics=(b.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        return r.topics[0].topic_id

    def close(self) -> None:
        for c in self._conns.values():
            c.sock.close()
        self._conns.clear()


def wait_for_coordinators(pair: Pair) -> None:
    """Until both brokers coordinate groups and transactional ids: each creates
    __consumer_offsets and __transaction_state on first use, answering
    COORDINATOR_NOT_AVAILABLE until then."""
    for side in pair.sides:
        for key_type in (0, 1):

            def ready(side: Side = side, key_type: int = key_type) -> bool:
                r = side.conn().call(
                    FIND_COORDINATOR, 4, key_type=key_type, coordinator_keys=("compat-warm-up",)
                )
                return r.coordinators[0].error_code == 0

            wait_for(ready, 120, f"{side.name}'s coordinator for key type {key_type}")


def run(
    pair: Pair,
    case: str,
    flow: Callable[[Broker], None],
    masked: Iterable[str] = (),
    sort: Iterable[str] = (),
) -> list[tuple[diff.Plain, diff.Plain]]:
    """Play `flow` on Kafka then on Rafka and compare their steps (each a case "<case>:
    <step>"); the masked answers of every step."""
    played = []
    for side in pair.sides:
        broker = Broker(side)
        try:
            flow(broker)
        finally:
            broker.close()
        played.append(broker.steps)
    kafka, rafka = played
    labels = [label for label, _ in kafka]
    assert labels == [label for label, _ in rafka], f"{case}: the flows took different steps"
    masked = list(masked)
    return [
        pair.compare(
            f"{case}: {label}",
            generated_ids(diff.plain(k)),
            generated_ids(diff.plain(r)),
            masked,
            sort,
        )
        for (label, k), (_, r) in zip(kafka, rafka, strict=True)
    ]


# -- the consumer protocol's embedded formats (ConsumerProtocolSubscription/Assignment v0) ------


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def subscription(*topics: str, user_data: bytes | None = None) -> bytes:
    """The member metadata of the classic "consumer" protocol: the topics it subscribes to."""
    out = struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics)
    return out + _bytes(user_data)


def assignment(partitions: dict[str, list[int]], user_data: bytes | None = None) -> bytes:
    """A member's assignment in the classic "consumer" protocol."""
    out = struct.pack(">hi", 0, len(partitions))
    for topic, indexes in partitions.items():
        out += _string(topic) + struct.pack(">i", len(indexes))
        out += b"".join(struct.pack(">i", i) for i in indexes)
    return out + _bytes(user_data)


def _bytes(data: bytes | None) -> bytes:
    return struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data
