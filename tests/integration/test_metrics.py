"""The broker's and the meta node's Prometheus endpoints during a produce/consume run: every
family the operator dashboards read, with values that match what the clients did."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.polling import wait_for
from tests.integration.conftest import running_cluster

RECORDS = 2000
FIRST_READ = 1500
VALUE = b"x" * 100

FAMILIES = [
    # RequestMetrics, per API
    'kafka_network_request_metrics_requests_total{request="Produce"}',
    'kafka_network_request_metrics_total_time_ms_bucket{le="1.0",request="Produce"}',
    'kafka_network_request_metrics_request_queue_time_ms_count{request="Fetch"}',
    'kafka_network_request_metrics_local_time_ms_count{request="Produce"}',
    'kafka_network_request_metrics_remote_time_ms_count{request="Fetch"}',
    'kafka_network_request_metrics_throttle_time_ms_count{request="Produce"}',
    'kafka_network_request_metrics_response_send_time_ms_count{request="Fetch"}',
    # BrokerTopicMetrics, purgatories
    'kafka_server_broker_topic_metrics_bytes_in_total{topic="m"}',
    'kafka_server_broker_topic_metrics_bytes_out_total{topic="m"}',
    'kafka_server_broker_topic_metrics_messages_in_total{topic="m"}',
    'kafka_server_delayed_operation_purgatory_purgatory_size{delayed_operation="Produce"}',
    'kafka_server_delayed_operation_purgatory_purgatory_size{delayed_operation="Fetch"}',
    # replicas, logs, controller
    "kafka_server_replica_manager_under_replicated_partitions",
    "kafka_server_replica_manager_under_min_isr_partition_count",
    "kafka_controller_kafka_controller_offline_partitions_count",
    "kafka_server_replica_manager_isr_shrinks_total",
    "kafka_server_replica_manager_isr_expands_total",
    "kafka_server_replica_manager_leader_count",
    'kafka_log_log_size{partition="0",topic="m"}',
    'kafka_log_log_end_offset{partition="1",topic="m"}',
    # groups, connections, authentication, quotas
    'kafka_consumergroup_lag{consumergroup="g",partition="0",topic="m"}',
    'kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"}',
    'kafka_server_socket_server_metrics_successful_authentication_total{listener="PLAINTEXT"}',
    'kafka_server_socket_server_metrics_failed_authentication_total{listener="PLAINTEXT"}',
    'kafka_server_quota_throttle_time_ms_count{quota_type="produce"}',
]
META_FAMILIES = [
    "kafka_server_raft_metrics_current_epoch",
    "kafka_server_raft_metrics_current_leader",
    "kafka_server_raft_metrics_high_watermark",
    "kafka_server_raft_metrics_apply_lag",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def _samples(text: str, prefix: str) -> list[float]:
    """Values of the samples whose line starts with `prefix` (a name and maybe labels)."""
    return [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)]


def _value(text: str, sample: str) -> float:
    found = _samples(text, sample + " ")
    assert found, f"no sample {sample} in the scrape"
    return found[0]


def _poll(port: int, check: Callable[[str], bool], what: str, timeout: float = 30) -> str:
    """The first scrape that passes `check`."""

    def passing() -> str:
        text = _scrape(port)
        return text if check(text) else ""

    return wait_for(passing, timeout, what, 0.2)


def _consume(consumer: Consumer, count: int) -> None:
    got, deadline = 0, time.monotonic() + 60
    while got < count:
        assert time.monotonic() < deadline, f"consumed {got} of {count} records"
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            got += 1


def test_metrics_during_produce_and_consume(tmp_path: Path) -> None:
    port, meta_port = _free_port(), _free_port()
    with running_cluster(
        tmp_path, brokers=1, metas=1, metrics_port=str(port), meta_metrics_port=str(meta_port)
    ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("m", 2, 1)])["m"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(RECORDS):
            producer.produce("m", VALUE, partition=i % 2)
        assert producer.flush(30) == 0

        consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "group.id": "g",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe(["m"])
        # 3/4 of the records: more than one partition holds, so both get a committed offset
        _consume(consumer, FIRST_READ)
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition("m", 0), TopicPartition("m", 1)], 10)
        assert sum(tp.offset for tp in committed) == FIRST_READ
        text = _poll(
            port,
            lambda t: len(_samples(t, 'kafka_consumergroup_lag{consumergroup="g"')) == 2,
            "the lag of group g",
        )
        for family in FAMILIES:
            assert _samples(text, family), f"{family} missing from /metrics"

        # bytes in: the records' values plus their batch and record framing, nothing else
        bytes_in = _value(text, 'kafka_server_broker_topic_metrics_bytes_in_total{topic="m"}')
        assert RECORDS * len(VALUE) < bytes_in < RECORDS * len(VALUE) * 1.5
        assert _value(text, 'kafka_server_broker_topic_metrics_messages_in_total{topic="m"}') == (
            RECORDS
        )
        assert sum(_samples(text, 'kafka_log_log_end_offset{partition="')) >= RECORDS
        sizes = [_value(text, f'kafka_log_log_size{{partition="{p}",topic="m"}}') for p in (0, 1)]
        assert sum(sizes) == bytes_in  # one batch per append, stored as received
        assert _value(text, 'kafka_server_broker_topic_metrics_bytes_out_total{topic="m"}') > 0
        assert _value(text, 'kafka_network_request_metrics_requests_total{request="Produce"}') >= 1
        assert _value(text, "kafka_server_replica_manager_leader_count") >= 2
        assert _value(text, "kafka_server_replica_manager_under_replicated_partitions") == 0
        assert _value(text, "kafka_controller_kafka_controller_offline_partitions_count") == 0
        assert (
            _value(
                text, 'kafka_server_socket_server_metrics_connection_count{listener="PLAINTEXT"}'
            )
            >= 2
        )
        lag = _value(text, 'kafka_consumergroup_lag_sum{consumergroup="g"}')
        assert lag == RECORDS - FIRST_READ

        # the group catches up: its lag drops to 0
        _consume(consumer, RECORDS - FIRST_READ)
        consumer.commit(asynchronous=False)
        _poll(
            port,
            lambda t: _samples(t, 'kafka_consumergroup_lag_sum{consumergroup="g"} ') == [0.0],
            "the lag of group g dropping to 0",
        )
        consumer.close()

        meta = _scrape(meta_port)
        for family in META_FAMILIES:
            assert _samples(meta, family), f"{family} missing from the meta node's /metrics"
        assert _value(meta, "kafka_server_raft_metrics_current_epoch") >= 1
        assert _value(meta, "kafka_server_raft_metrics_current_leader") == 1
        assert _value(meta, "kafka_server_raft_metrics_high_watermark") > 0
        assert _value(meta, "kafka_server_raft_metrics_apply_lag") >= 0
        assert re.search(r"kafka_controller_kafka_controller_active_controller_count 1\.0", meta)
