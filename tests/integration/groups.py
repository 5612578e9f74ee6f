"""What the consumer group tests share: the coordinator of a group, producing values, and
draining a set of consumers."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer, Producer
from kio.schema.errors import ErrorCode

from cluster.local import LocalCluster
from tests.integration.conftest import wait_for
from tests.integration.kafka_wire import WireClient

FIND_COORDINATOR = 10
RETRIABLE = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
}


def broker_ports(cluster: LocalCluster) -> list[int]:
    return [n.port for n in cluster.nodes.values() if n.kind == "broker" and n.proc is not None]


def coordinator(
    cluster: LocalCluster, group: str, probe: Callable[[WireClient, str], int]
) -> tuple[int, int]:
    """(node id, port) of the group's coordinator, once it serves the group: `probe` sends
    the coordinator a request about the group and returns its error code."""

    def find() -> tuple[int, int] | None:
        for port in broker_ports(cluster):
            try:
                with WireClient(port, timeout=5) as w:
                    r = w.call(FIND_COORDINATOR, 3, key=group, key_type=0)
                if r.error_code != ErrorCode.none:
                    return None
                with WireClient(r.port, timeout=5) as w:  # loaded yet?
                    if probe(w, group) in RETRIABLE:
                        return None
            except OSError:
                continue
            return r.node_id, r.port
        return None

    return wait_for(find, what=f"the coordinator of {group}")


def produce(cluster: LocalCluster, topic: str, values: list[bytes]) -> None:
    """acks=all, each value also its key."""
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for v in values:
        p.produce(topic, key=v, value=v)
    assert p.flush(30) == 0


def drain(consumers: list[Consumer], want: int, timeout: float = 60) -> list[list[bytes]]:
    """What each consumer reads until `want` distinct values arrived (a record read again
    after a rebalance, from the last committed offset, counts once)."""
    got: list[list[bytes]] = [[] for _ in consumers]
    seen: set[bytes] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                value = m.value()
                assert value is not None, "produce() never writes a null value"
                got[i].append(value)
                seen.add(value)
    return got
