"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs with confluent-kafka's AdminClient on
a 3-broker cluster: a topic's dynamic retention.ms and the cluster-wide message.max.bytes take
effect on every broker without a restart (segments go, oversized batches are refused by every
leader) and survive a full cluster restart; `rafka configs` and BROKER_LOGGER."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from cluster import admin_operations as cluster_admin
from cluster.admin import AdminError, Brokers
from cluster.kafka_client import KafkaConnection
from cluster.local import LocalCluster
from tests.integration.conftest import running_cluster, wait_for
from tests.integration.kafka_wire import WireClient, builder

SETTINGS: dict[str, Any] = {  # broker settings, for running_cluster(**SETTINGS)
    "log_retention_check_interval_ms": 300,
    "delegation_token_secret_key": "not-for-your-eyes",
    "log_retention_hours": 100,
    "leader_imbalance_check_interval_seconds": 1,  # leaders back on every broker after restart
}
BIG = 5000  # bytes of a record that a 2000-byte message.max.bytes refuses
DESCRIBE_CONFIGS = 32


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with running_cluster(tmp_path_factory.mktemp("configs"), **SETTINGS) as c:
        yield c


def brokers(cluster: LocalCluster) -> Brokers:
    return Brokers(cluster.bootstrap)


def admin(cluster: LocalCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def create(
    cluster: LocalCluster, topic: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    a = admin(cluster)
    a.create_topics([NewTopic(topic, partitions, 3, config=configs or {})])[topic].result(30)


def describe(cluster: LocalCluster, kind: ResourceType, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(kind, name)
    a = admin(cluster)  # kept alive until the result is in
    return a.describe_configs([resource])[resource].result(30)


def incremental(cluster: LocalCluster, kind: ResourceType, name: str, **ops: str | None) -> None:
    entries = [
        ConfigEntry(
            k.replace("_", "."),
            v,
            incremental_operation=AlterConfigOpType.SET
            if v is not None
            else AlterConfigOpType.DELETE,
        )
        for k, v in ops.items()
    ]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    a = admin(cluster)
    a.incremental_alter_configs([resource])[resource].result(30)


def leaders(cluster: LocalCluster, topic: str) -> dict[int, int]:
    meta = admin(cluster).list_topics(topic, timeout=10).topics[topic]
    return {p: info.leader for p, info in meta.partitions.items()}


def produce(cluster: LocalCluster, topic: str, partition: int, size: int) -> KafkaError | None:
    """The error of one record of `size` bytes to the partition (None: written)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "message.max.bytes": 1_000_000})
    outcome: list[KafkaError | None] = []
    producer.produce(
        topic, b"x" * size, partition=partition, on_delivery=lambda e, _m: outcome.append(e)
    )
    producer.flush(30)
    assert outcome, "no delivery report"
    return outcome[0]


def segments(cluster: LocalCluster, broker: int, topic: str) -> list[Path]:
    directory = next((cluster.data_dir / f"broker-{broker}").rglob(f"{topic}-0"))
    return sorted(directory.glob("*.log"))


def test_describe_topic_configs_with_sources_and_synonyms(cluster: LocalCluster) -> None:
    create(cluster, "described", configs={"retention.ms": "123456"})
    configs = describe(cluster, ResourceType.TOPIC, "described")
    retention = configs["retention.ms"]
    assert (retention.value, retention.source) == (
        "123456",
        ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
    )
    assert not retention.is_read_only
    assert not retention.is_sensitive
    # Kafka lists a topic config's broker synonyms from its first (log.retention.ms) on: the
    # static log.retention.hours gives the default but is not a synonym of retention.ms
    assert list(retention.synonyms) == ["retention.ms"]
    assert list(configs["segment.bytes"].synonyms) == ["log.segment.bytes"]
    assert configs["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["cleanup.policy"].value == "delete"
    with pytest.raises(KafkaException) as e:
        describe(cluster, ResourceType.TOPIC, "no-such-topic")
    assert e.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_configs_v0(cluster: LocalCluster) -> None:
    """DescribeConfigs v0 (clients from before Kafka 2.0): IsDefault in place of the source."""
    create(cluster, "described-v0", configs={"retention.ms": "654321"})
    port = int(cluster.bootstrap.split(",")[0].rsplit(":", 1)[1])
    b = builder(DESCRIBE_CONFIGS, 0)
    with WireClient(port, timeout=10) as wire:
        response = wire.call(
            DESCRIBE_CONFIGS,
            0,
            resources=(
                b.DescribeConfigsResource(
                    resource_type=2,
                    resource_name="described-v0",
                    configuration_keys=("retention.ms", "segment.bytes"),
                ),
            ),
        )
    (result,) = response.results
    assert result.error_code == ErrorCode.none
    assert {c.name: (c.value, c.is_default) for c in result.configs} == {
        "retention.ms": ("654321", False),
        "segment.bytes": ("1073741824", True),
    }


def test_describe_broker_configs(cluster: LocalCluster) -> None:
    configs = describe(cluster, ResourceType.BROKER, "2")
    assert configs["node.id"].value == "2"
    assert configs["node.id"].is_read_only
    assert configs["log.retention.hours"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["message.max.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["message.max.bytes"].is_read_only
    secret = configs["delegation.token.secret.key"]
    assert secret.is_sensitive
    assert secret.value is None
    # a broker answers for itself or the cluster default only (the admin client routes)
    with KafkaConnection(cluster.nodes["broker-1"].port) as c:
        r = c.call(32, 4, resources=(_describe_resource(c, "3"),), include_synonyms=False)
    assert r.results[0].error_code == 42  # INVALID_REQUEST
    assert "expected 1 or empty string" in r.results[0].error_message


def _describe_resource(c: KafkaConnection, name: str) -> object:
    from cluster.kafka_client import builder

    return builder(32, 4).DescribeConfigsResource(
        resource_type=4, resource_name=name, configuration_keys=None
    )


def test_refused_changes_name_the_setting(cluster: LocalCluster) -> None:
    create(cluster, "refusals")
    with pytest.raises(KafkaException) as e:
        incremental(cluster, ResourceType.TOPIC, "refusals", retention_ms="soon")
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert "retention.ms" in e.value.args[0].str()
    with pytest.raises(KafkaException) as e:
        incremental(cluster, ResourceType.BROKER, "1", log_dirs="/tmp/elsewhere")
    assert e.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: [log.dirs]" in e.value.args[0].str()
    with pytest.raises(AdminError) as refused:  # librdkafka cannot name the cluster default
        cluster_admin.alter_configs(brokers(cluster), "broker", "", {"message.max.bytes": "x"}, [])
    assert refused.value.code == ErrorCode.invalid_request
    assert "message.max.bytes: Not a number of type INT" in str(refused.value)


def test_topic_retention_applies_on_every_broker_without_restart(cluster: LocalCluster) -> None:
    create(cluster, "retained", configs={"segment.bytes": "1024"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "acks": "all"})
    for i in range(60):
        producer.produce("retained", b"%04d" % i + b"r" * 200, partition=0)
        producer.flush(10)
    wait_for(lambda: all(len(segments(cluster, b, "retained")) > 5 for b in (1, 2, 3)), 30)
    incremental(cluster, ResourceType.TOPIC, "retained", retention_ms="1")
    configs = describe(cluster, ResourceType.TOPIC, "retained")
    assert configs["retention.ms"].value == "1"
    wait_for(lambda: all(len(segments(cluster, b, "retained")) == 1 for b in (1, 2, 3)), 30)


def test_cluster_wide_message_max_bytes_applies_on_every_broker(cluster: LocalCluster) -> None:
    create(cluster, "sized", partitions=6)
    assert set(leaders(cluster, "sized").values()) == {1, 2, 3}
    # the cluster-wide default (resource name ""), which librdkafka cannot name: rafka's client
    cluster_admin.alter_configs(brokers(cluster), "broker", "", {"message.max.bytes": "2000"}, [])
    (default,) = cluster_admin.describe_configs(brokers(cluster), "broker", "")
    assert (default.name, default.value) == ("message.max.bytes", "2000")
    assert default.source == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    on_broker = describe(cluster, ResourceType.BROKER, "2")["message.max.bytes"]
    assert on_broker.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    topic = describe(cluster, ResourceType.TOPIC, "sized")["max.message.bytes"]
    assert (topic.value, topic.source) == ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    _assert_max_enforced(cluster, "sized")
    # the topic's own value wins over the cluster default
    incremental(cluster, ResourceType.TOPIC, "sized", max_message_bytes="100000")
    assert produce(cluster, "sized", 0, BIG) is None
    incremental(cluster, ResourceType.TOPIC, "sized", max_message_bytes=None)


def _assert_max_enforced(cluster: LocalCluster, topic: str) -> None:
    """Every partition (their leaders are on every broker) refuses a BIG record, takes a small."""
    for partition in leaders(cluster, topic):
        error = produce(cluster, topic, partition, BIG)
        assert error is not None, error
        assert error.code() == KafkaError.MSG_SIZE_TOO_LARGE, error
        assert produce(cluster, topic, partition, 100) is None


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_per_broker_config_and_legacy_alter_configs(cluster: LocalCluster) -> None:
    incremental(cluster, ResourceType.BROKER, "3", log_cleaner_backoff_ms="1234")
    configs = describe(cluster, ResourceType.BROKER, "3")
    backoff = configs["log.cleaner.backoff.ms"]
    assert (backoff.value, backoff.source) == ("1234", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert describe(cluster, ResourceType.BROKER, "1")["log.cleaner.backoff.ms"].value == "15000"
    # AlterConfigs replaces the whole set of the resource
    create(cluster, "replaced", configs={"retention.ms": "999", "segment.bytes": "100000"})
    resource = ConfigResource(ResourceType.TOPIC, "replaced", set_config={"retention.bytes": "5"})
    a = admin(cluster)
    a.alter_configs([resource])[resource].result(30)
    configs = describe(cluster, ResourceType.TOPIC, "replaced")
    assert configs["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    incremental(cluster, ResourceType.BROKER, "3", log_cleaner_backoff_ms=None)


def rafka(cluster: LocalCluster, *args: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "configs", *args, "-b", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_rafka_configs_and_broker_logger(cluster: LocalCluster) -> None:
    create(cluster, "cli")
    rafka(
        cluster,
        "alter",
        "--topic",
        "cli",
        "--add-config",
        "cleanup.policy=[compact,delete],retention.ms=5000",
    )
    out = rafka(cluster, "describe", "--topic", "cli")
    assert "compact,delete" in out
    assert "retention.ms" in out
    assert "segment.bytes" not in out
    rafka(cluster, "alter", "--topic", "cli", "--delete-config", "retention.ms")
    assert "retention.ms" not in rafka(cluster, "describe", "--topic", "cli")
    rafka(cluster, "alter", "--broker-logger", "2", "--add-config", "rafka.replicas=DEBUG")
    loggers = rafka(cluster, "describe", "--broker-logger", "2")
    assert any(line.split()[:2] == ["rafka.replicas", "DEBUG"] for line in loggers.splitlines())
    # a group's configs (kafka-configs.sh --entity-type groups)
    rafka(cluster, "alter", "--group", "cli-g", "--add-config", "share.auto.offset.reset=earliest")
    group = rafka(cluster, "describe", "--group", "cli-g").splitlines()
    assert any(
        line.split()[:3] == ["share.auto.offset.reset", "earliest", "GROUP_CONFIG"]
        for line in group
    ), group
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "cluster.cli",
            "configs",
            "alter",
            "--broker",
            "1",
            "--add-config",
            "node.id=7",
            "-b",
            cluster.bootstrap,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert "INVALID_REQUEST" in r.stderr
    assert "node.id" in r.stderr


def test_dynamic_configs_survive_a_full_restart(cluster: LocalCluster) -> None:
    cluster.stop()
    cluster.start()
    wait_for(lambda: len(admin(cluster).list_topics(timeout=10).brokers) == 3, 60)
    topic = describe(cluster, ResourceType.TOPIC, "retained")["retention.ms"]
    assert (topic.value, topic.source) == ("1", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    wait_for(lambda: set(leaders(cluster, "sized").values()) == {1, 2, 3}, 60)
    _assert_max_enforced(cluster, "sized")
    for broker in ("1", "2", "3"):
        mmb = describe(cluster, ResourceType.BROKER, broker)["message.max.bytes"]
        assert (mmb.value, mmb.source) == ("2000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
