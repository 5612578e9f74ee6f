"""Broker metrics: request phases, per-topic counters that follow the hosted topics, replica
and lag gauges read at scrape time, the meta node's Raft gauges."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.registry import Collector

from dataplane.metrics import topics
from dataplane.metrics.groups import GroupLagCollector
from dataplane.metrics.quotas import throttled
from dataplane.metrics.replicas import ReplicaCollector, isr_changed
from dataplane.metrics.requests import BY_API, RequestCollector, request_name
from dataplane.metrics.topics import TopicCollector
from meta.metrics import RaftCollector


def _scrape(*collectors: Collector) -> str:
    registry = CollectorRegistry()
    for c in collectors:
        registry.register(c)
    return generate_latest(registry).decode()


def _value(name: str, labels: dict[str, str] | None = None) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_request_phases_are_observed_per_api() -> None:
    assert request_name(18) == "ApiVersions"
    assert request_name(0) == "Produce"
    assert request_name(94) == "UnregisterController"  # an API kio lacks
    registry = CollectorRegistry()
    registry.register(RequestCollector())
    labels = {"request": "Metadata"}

    def value(name: str, extra: dict[str, str] | None = None) -> float:
        return registry.get_sample_value(name, {**labels, **(extra or {})}) or 0.0

    before = value("kafka_network_request_metrics_total_time_ms_count")
    BY_API[3].requests += 1
    # read at 10.000 s, handler 10.001-10.003, parked until 10.013, sent 10.013-10.014
    BY_API[3].observe(10.0, 10.001, 10.003, 10.013, 10.014, 10.013, 5)
    assert value("kafka_network_request_metrics_total_time_ms_count") == before + 1
    assert value("kafka_network_request_metrics_requests_total") >= 1
    assert round(value("kafka_network_request_metrics_remote_time_ms_sum"), 3) >= 10.0
    assert value("kafka_network_request_metrics_throttle_time_ms_sum") >= 5
    # 14 ms in total: in the 25 ms bucket, not the 10 ms one
    total = "kafka_network_request_metrics_total_time_ms_bucket"
    assert value(total, {"le": "25.0"}) - value(total, {"le": "10.0"}) >= 1


def _partition(leader: bool, isr: int, replicas: int, min_isr: int = 1, **log: int) -> Any:
    return SimpleNamespace(
        is_leader=leader,
        isr=tuple(range(isr)),
        replicas=tuple(range(replicas)),
        min_insync_replicas=min_isr,
        high_watermark=log.get("hw", 0),
        log=SimpleNamespace(
            size=log.get("size", 0),
            log_end_offset=log.get("end", 0),
            log_start_offset=0,
        ),
    )


def test_topic_counters_follow_the_hosted_topics() -> None:
    hosted = {"a", "b"}
    stats = topics.topic("a")  # as Produce counts a partition's batches
    stats.bytes_in += 1000
    stats.messages_in += 10
    topics.fetched([("a", 400), ("b", 0), (None, 5)])
    text = _scrape(TopicCollector(lambda: hosted))
    assert 'kafka_server_broker_topic_metrics_bytes_in_total{topic="a"} 1000.0' in text
    assert 'kafka_server_broker_topic_metrics_messages_in_total{topic="a"} 10.0' in text
    assert 'kafka_server_broker_topic_metrics_bytes_out_total{topic="a"} 400.0' in text
    hosted.clear()  # the topic was deleted: its series go
    assert 'topic="a"' not in _scrape(TopicCollector(lambda: hosted))


def test_replica_gauges() -> None:
    partitions = {
        ("t", 0): _partition(True, 1, 3, min_isr=2, size=500, end=7),
        ("t", 1): _partition(True, 3, 3),
        ("t", 2): _partition(False, 3, 3),
    }
    cache = SimpleNamespace(
        topics={
            "t": SimpleNamespace(partitions=[SimpleNamespace(leader=-1), SimpleNamespace(leader=1)])
        }
    )
    text = _scrape(ReplicaCollector(partitions, cache))  # type: ignore[arg-type]
    assert "kafka_server_replica_manager_leader_count 2.0" in text
    assert "kafka_server_replica_manager_partition_count 3.0" in text
    assert "kafka_server_replica_manager_under_replicated_partitions 1.0" in text
    assert "kafka_server_replica_manager_under_min_isr_partition_count 1.0" in text
    assert 'kafka_log_log_size{partition="0",topic="t"} 500.0' in text
    assert 'kafka_log_log_end_offset{partition="0",topic="t"} 7.0' in text
    assert "kafka_controller_kafka_controller_offline_partitions_count 1.0" in text
    shrinks = _value("kafka_server_replica_manager_isr_shrinks_total")
    isr_changed(3, 2)
    assert _value("kafka_server_replica_manager_isr_shrinks_total") == shrinks + 1


def test_lag_from_committed_offsets_and_high_watermarks() -> None:
    partitions = {("t", 0): _partition(True, 1, 1, hw=100), ("t", 1): _partition(True, 1, 1, hw=5)}
    committed = {
        "g": {
            "t": {
                0: SimpleNamespace(offset=60),
                1: SimpleNamespace(offset=5),
                9: SimpleNamespace(offset=1),
            }
        }
    }
    text = _scrape(GroupLagCollector(lambda: [committed], partitions))  # type: ignore[arg-type,list-item]
    assert 'kafka_consumergroup_lag{consumergroup="g",partition="0",topic="t"} 40.0' in text
    assert 'kafka_consumergroup_lag{consumergroup="g",partition="1",topic="t"} 0.0' in text
    assert 'partition="9"' not in text  # not hosted here: unknown high watermark
    assert 'kafka_consumergroup_lag_sum{consumergroup="g"} 40.0' in text


def test_quota_throttle_time() -> None:
    before = _value("kafka_server_quota_throttle_time_ms_count", {"quota_type": "produce"})
    throttled("produce", 120)
    throttled("produce", 0)  # not throttled: not recorded
    assert (
        _value("kafka_server_quota_throttle_time_ms_count", {"quota_type": "produce"}) == before + 1
    )


def test_raft_gauges() -> None:
    status = {
        "raft_term": 4,
        "commit_idx": 120,
        "last_applied": 117,
        "leader": SimpleNamespace(address="h2:9001"),
        "state": 0,
    }
    text = _scrape(RaftCollector(lambda: status, {1: "h1:9001", 2: "h2:9001"}))
    assert "kafka_server_raft_metrics_current_epoch 4.0" in text
    assert "kafka_server_raft_metrics_current_leader 2.0" in text
    assert "kafka_server_raft_metrics_high_watermark 120.0" in text
    assert "kafka_server_raft_metrics_apply_lag 3.0" in text
    assert "kafka_controller_kafka_controller_active_controller_count 0.0" in text


def test_raft_leader_added_since_start_up_is_named_by_its_node() -> None:
    """A voter added with AddRaftVoter is not in meta.quorum.voters: its pysyncobj node (made
    by meta.quorum.node_of) names its id."""
    from meta import quorum

    leader = quorum.node_of(quorum.Member(4, "h4:9001", "h4:9192", "dir"))
    status = {"raft_term": 5, "commit_idx": 1, "last_applied": 1, "leader": leader, "state": 0}
    text = _scrape(RaftCollector(lambda: status, {1: "h1:9001"}))
    assert "kafka_server_raft_metrics_current_leader 4.0" in text
