"""WriteTxnMarkers on the client listener (what `kafka-transactions.sh abort` sends), against
stand-in partitions: each partition's own answer, grouped per marker and topic, and nothing
written without ALTER or CLUSTER_ACTION on the cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import anyio

from dataplane.connection import Connection
from dataplane.handlers import write_txn_markers
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.request_context import RequestContext


@dataclass
class MarkerPartition:
    """A replica the marker is written to: `error` is why an acks=all write cannot be done
    now (NOT_LEADER_OR_FOLLOWER on a follower), `refuse` the producer-state check's error."""

    error: ErrorCode = ErrorCode.none
    refuse: ErrorCode | None = None
    leader_epoch: int = 1
    written: list[tuple[int, int, bool, int]] = field(default_factory=list)

    def replication_error(self) -> ErrorCode:
        return self.error

    def write_marker(self, pid: int, epoch: int, commit: bool, coordinator: int, now: int) -> Any:
        if self.refuse is not None:
            raise KafkaError(self.refuse)
        self.written.append((pid, epoch, commit, coordinator))
        return SimpleNamespace(last_offset=10)

    async def wait_for_replication(self, offset: int, epoch: int, timeout: float) -> ErrorCode:
        return ErrorCode.none


def run(partitions: dict[tuple[str, int], MarkerPartition], allowed: bool, markers: list) -> Any:
    authorizer = SimpleNamespace(authorize=lambda *args, **kwargs: allowed)
    services = SimpleNamespace(
        replicas=SimpleNamespace(partitions=partitions),
        group_coordinator=SimpleNamespace(
            runtime=SimpleNamespace(topic=SimpleNamespace(name="__consumer_offsets"))
        ),
        authorizer=authorizer,
    )
    header = SimpleNamespace(api_version=1, client_id="kafka-transactions")
    ctx = RequestContext(services, header, Connection(peer="1.2.3.4:5"), {})  # type: ignore[arg-type]

    async def main() -> Any:
        return await write_txn_markers.handle(ctx, SimpleNamespace(markers=markers))

    return anyio.run(main)


def marker(pid: int, *topics: tuple[str, list[int]]) -> Any:
    return SimpleNamespace(
        producer_id=pid,
        producer_epoch=0,
        transaction_result=False,
        coordinator_epoch=0,
        topics=[SimpleNamespace(name=n, partition_indexes=ps) for n, ps in topics],
    )


def answers(response: Any) -> list[tuple[int, dict[str, dict[int, int]]]]:
    return [
        (
            m.producer_id,
            {t.name: {p.partition_index: p.error_code for p in t.partitions} for t in m.topics},
        )
        for m in response.markers
    ]


def test_each_partition_answers_for_itself() -> None:
    leader, follower = MarkerPartition(), MarkerPartition(ErrorCode.not_leader_or_follower)
    fenced = MarkerPartition(refuse=ErrorCode.invalid_producer_epoch)
    partitions = {("t", 0): leader, ("t", 1): follower, ("t", 2): fenced, ("u", 0): leader}
    response = run(partitions, True, [marker(7, ("t", [0, 1, 2, 5])), marker(8, ("u", [0]))])
    assert answers(response) == [
        (
            7,
            {
                "t": {
                    0: ErrorCode.none,
                    1: ErrorCode.not_leader_or_follower,
                    2: ErrorCode.invalid_producer_epoch,
                    5: ErrorCode.unknown_topic_or_partition,
                }
            },
        ),
        (8, {"u": {0: ErrorCode.none}}),
    ]
    assert leader.written == [(7, 0, False, 0), (8, 0, False, 0)]  # ABORT markers
    assert follower.written == fenced.written == []


def test_nothing_is_written_without_cluster_permission() -> None:
    leader = MarkerPartition()
    response = run({("t", 0): leader}, False, [marker(7, ("t", [0, 1]))])
    denied = ErrorCode.cluster_authorization_failed
    assert answers(response) == [(7, {"t": {0: denied, 1: denied}})]
    assert leader.written == []
