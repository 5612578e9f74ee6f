"""Prometheus metrics of a meta node, served on meta.metrics.port (0: off): its Raft term,
commit index, applied index, apply lag and the leader it knows, in the names of Kafka's KRaft
metrics (kafka.server:type=raft-metrics, kafka.controller:type=KafkaController).

Read from pysyncobj's status when scraped, so the Raft thread does no extra work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import REGISTRY, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger("rafka.meta.metrics")

_STATE_LEADER = 2  # pysyncobj's _RAFT_STATE.LEADER


class RaftCollector(Collector):
    """`status()`: pysyncobj's status dict; `voters`: node id -> Raft address, to name the
    leader by its node id."""

    def __init__(self, status: Callable[[], Mapping[str, Any]], voters: Mapping[int, str]):
        self._status = status
        self._ids = {address: node for node, address in voters.items()}

    def collect(self) -> Iterable[Metric]:
        status = self._status()
        leader = status.get("leader")
        address = getattr(leader, "address", None)
        commit, applied = int(status["commit_idx"]), int(status["last_applied"])
        values = (
            ("kafka_server_raft_metrics_current_epoch", "Raft term (current-epoch)", None),
            (
                "kafka_server_raft_metrics_current_leader",
                "Node id of the Raft leader, -1: none known (current-leader)",
                # a voter added since start-up: its pysyncobj node carries its id (meta.quorum)
                self._ids.get(address, getattr(leader, "node_id", -1)) if address else -1,
            ),
            (
                "kafka_server_raft_metrics_high_watermark",
                "Raft commit index (high-watermark)",
                commit,
            ),
            (
                "kafka_controller_kafka_controller_last_committed_record_offset",
                "Raft commit index (LastCommittedRecordOffset)",
                commit,
            ),
            (
                "kafka_controller_kafka_controller_last_applied_record_offset",
                "Raft index applied to this node's state (LastAppliedRecordOffset)",
                applied,
            ),
            (
                "kafka_server_raft_metrics_apply_lag",
                "Committed Raft entries not yet applied to this node's state",
                max(0, commit - applied),
            ),
            (
                "kafka_controller_kafka_controller_active_controller_count",
                "1 on the Raft leader, which runs the controller (ActiveControllerCount)",
                int(status.get("state") == _STATE_LEADER),
            ),
        )
        for name, doc, value in values:
            yield GaugeMetricFamily(
                name, doc, value=int(status["raft_term"]) if value is None else value
            )


def serve(port: int, status: Callable[[], Mapping[str, Any]], voters: Mapping[int, str]) -> None:
    """Serve the meta node's metrics on `port` (0: none)."""
    if port <= 0:
        return
    REGISTRY.register(RaftCollector(status, voters))
    start_http_server(port)
    log.info("serving Prometheus metrics on :%d/metrics", port)
