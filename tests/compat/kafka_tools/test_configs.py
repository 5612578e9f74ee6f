"""kafka-configs: the configs of topics and brokers (one broker, and the cluster's default)
and client quotas.
"""

from __future__ import annotations

from cluster.local import LocalCluster
from tests.compat.kafka_tools.support import Sides, both, both_configs, each, fails, ok


def test_configs_of_topics(cluster: LocalCluster) -> None:
    b = cluster.bootstrap
    ok(b, "kafka-topics --create --topic cfg --partitions 1")
    topic = "kafka-configs --entity-type topics --entity-name cfg"
    assert ok(
        b,
        f"{topic} --alter --add-config "
        "max.message.bytes=20000,retention.bytes=1000000,cleanup.policy=compact",
    ) == ("Completed updating config for topic cfg.\n")
    assert ok(b, f"{topic} --alter --delete-config retention.bytes") == (
        "Completed updating config for topic cfg.\n"
    )
    assert ok(b, f"{topic} --describe") == (
        "Dynamic configs for topic cfg are:\n"
        "  cleanup.policy=compact sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact, DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        "  max.message.bytes=20000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "max.message.bytes=20000, DEFAULT_CONFIG:message.max.bytes=1048588}\n"
    )
    described = ok(b, f"{topic} --describe --all").splitlines()
    assert described[0] == "All configs for topic cfg are:"
    values = dict(line.split()[0].split("=", 1) for line in described[1:])
    assert values["cleanup.policy"] == "compact"
    assert values["max.message.bytes"] == "20000"
    assert values["retention.bytes"] == "-1"
    assert values["min.insync.replicas"] == "1"
    assert values["segment.bytes"] == "1073741824"
    bad = fails(b, f"{topic} --alter --add-config retention.ms=soon")
    assert "Invalid value soon for configuration retention.ms" in bad, bad


def test_configs_of_brokers(sides: Sides, cluster: LocalCluster) -> None:
    default = "kafka-configs --entity-type brokers --entity-default"
    one = "kafka-configs --entity-type brokers --entity-name 1"
    changed = "log.retention.ms,leader.replication.throttled.rate"
    set_default = f"{default} --alter --add-config log.retention.ms=3600000"
    assert both(sides, "configs: alter the broker default", set_default) == (
        "Completed updating default config for brokers in the cluster.\n"
    )
    set_one = (
        f"{one} --alter --add-config log.retention.ms=7200000,leader.replication.throttled.rate=5"
    )
    assert both(sides, "configs: alter broker 1", set_one) == (
        "Completed updating config for broker 1.\n"
    )
    try:
        # (other lines may differ: Kafka's cluster default has min.insync.replicas, which it
        # sets for eligible leader replicas)
        assert both_configs(sides, "configs: describe broker 1", f"{one} --describe", changed) == [
            "  leader.replication.throttled.rate=5 sensitive=false "
            "synonyms={DYNAMIC_BROKER_CONFIG:leader.replication.throttled.rate=5}",
            "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
            "log.retention.ms=7200000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, "
            "DEFAULT_CONFIG:log.retention.hours=168}",
        ]
        both_configs(
            sides, "configs: describe the broker default", f"{default} --describe", changed
        )
    finally:
        each(sides, lambda b: ok(b, f"{one} --alter --delete-config {changed}"))
        each(sides, lambda b: ok(b, f"{default} --alter --delete-config log.retention.ms"))
    # Every broker, then the cluster's default.
    b = cluster.bootstrap
    headers = [
        line
        for line in ok(b, "kafka-configs --describe --entity-type brokers").splitlines()
        if not line.startswith("  ")
    ]
    assert headers == [
        "Dynamic configs for broker 1 are:",
        "Dynamic configs for broker 2 are:",
        "Dynamic configs for broker 3 are:",
        "Default configs for brokers in the cluster are:",
    ]
    assert ok(b, f"{one} --describe") == "Dynamic configs for broker 1 are:\n"
    assert ok(b, f"{default} --describe") == "Default configs for brokers in the cluster are:\n"


def test_configs_of_client_quotas(sides: Sides) -> None:
    user = "kafka-configs --entity-type users --entity-name alice"
    both(
        sides,
        "quotas: alter a user",
        f"{user} --alter --add-config producer_byte_rate=1024,consumer_byte_rate=2048",
    )
    both(
        sides,
        "quotas: alter the default client",
        "kafka-configs --entity-type clients --entity-default --alter "
        "--add-config request_percentage=50",
    )
    both(
        sides,
        "quotas: alter a user's client",
        f"{user} --entity-type clients --entity-name app1 --alter "
        "--add-config producer_byte_rate=512",
    )
    users = both(sides, "quotas: describe users", "kafka-configs --describe --entity-type users")
    assert users == (
        "Quota configs for user-principal 'alice' are "
        "consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n"
    )
    assert both(
        sides, "quotas: describe clients", "kafka-configs --describe --entity-type clients"
    ) == ("Quota configs for the default client-id are request_percentage=50.0\n")
    assert both(
        sides, "quotas: describe a user's clients", f"{user} --entity-type clients --describe"
    ) == (
        "Quota configs for user-principal 'alice', client-id 'app1' are producer_byte_rate=512.0\n"
    )
    both(sides, "quotas: delete", f"{user} --alter --delete-config consumer_byte_rate")
    assert both(sides, "quotas: after the delete", f"{user} --describe") == (
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0\n"
    )
