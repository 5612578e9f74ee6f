"""The Grafana dashboard (deploy/grafana/rafka-dashboard.json) charts only metric families the
broker and the meta nodes export, and every family the issue asks an operator to watch."""

from __future__ import annotations

import json
import re
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[3] / "deploy" / "grafana" / "rafka-dashboard.json"

EXPORTED = {
    "kafka_network_request_metrics_requests_total",
    *(
        f"kafka_network_request_metrics_{phase}_time_ms_bucket"
        for phase in ("total", "request_queue", "local", "remote", "throttle", "response_send")
    ),
    "kafka_server_broker_topic_metrics_bytes_in_total",
    "kafka_server_broker_topic_metrics_bytes_out_total",
    "kafka_server_broker_topic_metrics_messages_in_total",
    "kafka_server_delayed_operation_purgatory_purgatory_size",
    "kafka_server_replica_manager_under_replicated_partitions",
    "kafka_server_replica_manager_under_min_isr_partition_count",
    "kafka_controller_kafka_controller_offline_partitions_count",
    "kafka_server_replica_manager_isr_shrinks_total",
    "kafka_server_replica_manager_isr_expands_total",
    "kafka_server_replica_manager_leader_count",
    "kafka_log_log_size",
    "kafka_consumergroup_lag",
    "kafka_server_socket_server_metrics_connection_count",
    "kafka_server_socket_server_metrics_successful_authentication_total",
    "kafka_server_socket_server_metrics_failed_authentication_total",
    "kafka_server_quota_throttle_time_ms_bucket",
    "kafka_server_raft_metrics_current_epoch",
    "kafka_server_raft_metrics_current_leader",
    "kafka_server_raft_metrics_high_watermark",
    "kafka_server_raft_metrics_apply_lag",
}


def test_dashboard_charts_the_exported_families() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {name for e in exprs for name in re.findall(r"\b(kafka_[a-z_]+)", e)}
    assert used <= EXPORTED, f"not exported: {sorted(used - EXPORTED)}"
    assert used == EXPORTED, f"not charted: {sorted(EXPORTED - used)}"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24
