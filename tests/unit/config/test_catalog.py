"""The catalog of settings (dataplane/config_catalog.py): every broker field and topic config is
described with Kafka's type, and values resolve through Kafka's layers in Kafka's order."""

from __future__ import annotations

import pytest

from dataplane.config import BrokerConfig
from dataplane.config_catalog import (
    BROKER_KEYS,
    CLUSTER_DEFAULT,
    TOPIC_KEYS,
    ConfigLayers,
    ConfigSource,
    ConfigType,
    broker_key,
    broker_synonyms,
    type_problem,
)
from dataplane.log.log_config import LogConfig
from dataplane.topic_configs import effective_topic_configs
from meta.topic_config import TOPIC_CONFIGS

S = ConfigSource


def static(**settings: str) -> BrokerConfig:
    return BrokerConfig.load(overrides=settings)


def test_every_broker_field_and_topic_config_is_described() -> None:
    fields = {f.replace("_", ".") for f in BrokerConfig.model_fields} - {"prefixed"}
    assert set(BROKER_KEYS) == fields
    assert set(TOPIC_KEYS) == set(TOPIC_CONFIGS)
    for key in [*BROKER_KEYS.values(), *TOPIC_KEYS.values()]:
        assert key.type is not ConfigType.UNKNOWN, key.name
        assert key.doc, key.name
        assert not key.doc.startswith(key.name + ":"), key.name


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("message.max.bytes", ConfigType.INT),
        ("log.retention.ms", ConfigType.LONG),
        ("offsets.topic.replication.factor", ConfigType.SHORT),
        ("log.cleaner.min.cleanable.ratio", ConfigType.DOUBLE),
        ("auto.create.topics.enable", ConfigType.BOOLEAN),
        ("sasl.enabled.mechanisms", ConfigType.LIST),
        ("sasl.jaas.config", ConfigType.PASSWORD),
        ("internal.secret", ConfigType.PASSWORD),
        ("listeners", ConfigType.LIST),
        ("share.coordinator.state.topic.min.isr", ConfigType.SHORT),
        ("log.segment.delete.delay.ms", ConfigType.LONG),
    ],
)
def test_broker_types_are_kafkas(name: str, kind: ConfigType) -> None:
    assert BROKER_KEYS[name].type is kind


def test_dynamic_settings_are_the_ones_applied_live() -> None:
    dynamic = {n for n, k in BROKER_KEYS.items() if k.dynamic}
    assert {
        "message.max.bytes",
        "log.retention.ms",
        "log.segment.bytes",
        "min.insync.replicas",
    } <= dynamic
    assert {"leader.replication.throttled.rate", "log.cleaner.backoff.ms"} <= dynamic
    # read at start-up only: Kafka would reject them too, or Rafka cannot apply them live
    assert not dynamic & {
        "node.id",
        "log.dirs",
        "listeners",
        "log.retention.hours",
        "num.partitions",
    }
    assert BROKER_KEYS["node.id"].read_only
    assert not BROKER_KEYS["message.max.bytes"].read_only


def test_topic_synonyms_follow_kafka() -> None:
    assert TOPIC_KEYS["retention.ms"].synonyms == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert TOPIC_KEYS["max.message.bytes"].synonyms == ("message.max.bytes",)
    assert TOPIC_KEYS["cleanup.policy"].synonyms == ("log.cleanup.policy",)
    assert TOPIC_KEYS["preallocate"].synonyms == ("log.preallocate",)
    assert TOPIC_KEYS["leader.replication.throttled.replicas"].synonyms == ()
    assert broker_synonyms("log.roll.hours") == ("log.roll.ms", "log.roll.hours")


def test_listener_overrides_take_the_type_of_what_they_override() -> None:
    key = broker_key("listener.name.sasl_ssl.plain.sasl.jaas.config")
    assert key is not None
    assert key.sensitive
    assert key.read_only
    assert broker_synonyms("listener.name.ssl.ssl.keystore.location") == (
        "listener.name.ssl.ssl.keystore.location",
        "ssl.keystore.location",
    )
    assert broker_key("no.such.setting") is None


def test_type_problems_read_as_kafkas() -> None:
    assert type_problem(ConfigType.INT, "12") is None
    assert type_problem(ConfigType.INT, str(2**31)) == "Not a number of type INT"
    assert type_problem(ConfigType.LONG, "x") == "Not a number of type LONG"
    assert type_problem(ConfigType.DOUBLE, "0.25") is None
    assert type_problem(ConfigType.BOOLEAN, "yes") == "Expected value to be either true or false"
    assert BROKER_KEYS["log.retention.ms"].problem("-2") == (
        "Invalid value -2 for configuration log.retention.ms: Value must be at least -1"
    )
    assert type_problem(ConfigType.INT, "1_000") == "Not a number of type INT"
    assert BROKER_KEYS["message.max.bytes"].problem("1000") is None


def test_per_broker_over_cluster_default_over_static_over_default() -> None:
    layers = ConfigLayers(
        static(message_max_bytes="3000", log_segment_bytes="5000"),
        per_broker={"message.max.bytes": "1000"},
        cluster={"message.max.bytes": "2000", "log.retention.bytes": "77"},
    )
    effective = layers.effective
    assert (effective.message_max_bytes, effective.log_retention_bytes) == (1000, 77)
    assert effective.log_segment_bytes == 5000
    entry = {e.key.name: e for e in layers.broker_entries(cluster_default=False)}
    mmb = entry["message.max.bytes"]
    assert (mmb.value, mmb.source) == ("1000", S.DYNAMIC_BROKER_CONFIG)
    assert [(s.value, s.source) for s in mmb.synonyms] == [
        ("1000", S.DYNAMIC_BROKER_CONFIG),
        ("2000", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("3000", S.STATIC_BROKER_CONFIG),
        ("1048588", S.DEFAULT_CONFIG),
    ]
    assert entry["num.partitions"].source is S.DEFAULT_CONFIG
    assert entry["log.segment.bytes"].source is S.STATIC_BROKER_CONFIG


def test_cluster_default_describes_only_its_own_configs() -> None:
    layers = ConfigLayers(
        static(), per_broker={"log.segment.bytes": "9000"}, cluster={"message.max.bytes": "2000"}
    )
    entries = layers.broker_entries(cluster_default=True)
    assert [(e.key.name, e.value, e.source) for e in entries] == [
        ("message.max.bytes", "2000", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]
    assert [s.source for s in entries[0].synonyms] == [S.DYNAMIC_DEFAULT_BROKER_CONFIG]


def test_sensitive_values_are_never_described() -> None:
    layers = ConfigLayers(static(sasl_jaas_config="secret", ssl_key_password="pw"))
    entries = {e.key.name: e for e in layers.broker_entries(cluster_default=False)}
    for name in ("sasl.jaas.config", "ssl.key.password", "internal.secret"):
        assert entries[name].value is None
        assert entries[name].key.sensitive
        assert all(s.value is None for s in entries[name].synonyms)


def test_retention_in_other_units_resolves_into_ms() -> None:
    assert ConfigLayers(static(log_retention_hours="2")).effective.log_retention_ms == 7_200_000
    minutes = ConfigLayers(static(log_retention_hours="2", log_retention_minutes="3"))
    assert minutes.effective.log_retention_ms == 180_000
    ms_wins = ConfigLayers(static(log_retention_ms="5"), cluster={"log.retention.ms": "6"})
    assert ms_wins.effective.log_retention_ms == 6
    assert ConfigLayers(static(log_roll_hours="1")).effective.log_roll_ms == 3_600_000
    assert ConfigLayers(static()).effective.log_retention_ms == 604_800_000


def test_dynamic_configs_that_cannot_apply_are_ignored() -> None:
    layers = ConfigLayers(
        static(),
        per_broker={"num.partitions": "9", "message.max.bytes": "lots"},
        cluster={"log.segment.bytes": "4096", "made.up": "1"},
    )
    assert layers.applied == {"log.segment.bytes": "4096"}
    assert sorted(layers.ignored) == [
        ("made.up", "1"),
        ("message.max.bytes", "lots"),
        ("num.partitions", "9"),
    ]
    assert layers.effective.num_partitions == 1
    assert layers.effective.message_max_bytes == 1048588


def test_topic_entries_and_the_log_config_agree() -> None:
    layers = ConfigLayers(static(log_retention_hours="1"), cluster={"log.segment.bytes": "4096"})
    entries = {e.key.name: e for e in layers.topic_entries({"max.message.bytes": "500"})}
    assert (entries["max.message.bytes"].value, entries["max.message.bytes"].source) == (
        "500",
        S.DYNAMIC_TOPIC_CONFIG,
    )
    assert entries["max.message.bytes"].synonyms[0].name == "max.message.bytes"
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == (
        "4096",
        S.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    # Kafka's synonyms of a topic config start at its first broker synonym (log.retention.ms,
    # unset here): log.retention.hours gives the value but is not listed, the source is DEFAULT
    retention = entries["retention.ms"]
    assert (retention.value, retention.source, retention.synonyms) == (
        "3600000",
        S.DEFAULT_CONFIG,
        (),
    )
    assert entries["flush.ms"].synonyms == ()  # log.flush.interval.ms has no default in Kafka
    assert [s.name for s in entries["preallocate"].synonyms] == ["log.preallocate"]
    log_config = LogConfig.from_configs(layers.effective, {"max.message.bytes": "500"})
    assert (log_config.max_message_bytes, log_config.segment_bytes) == (500, 4096)
    assert log_config.retention_ms == 3_600_000


def test_effective_topic_configs_of_a_static_broker() -> None:
    configs = effective_topic_configs(
        static(min_insync_replicas="2"), {"cleanup.policy": "compact"}
    )
    assert configs["min.insync.replicas"] == ("2", S.STATIC_BROKER_CONFIG)
    assert configs["cleanup.policy"] == ("compact", S.DYNAMIC_TOPIC_CONFIG)
    assert configs["retention.ms"] == ("604800000", S.DEFAULT_CONFIG)


def test_layers_of_the_metadata() -> None:
    config = static(node_id="2")
    layers = ConfigLayers.of(config, {2: {"a": "1"}, 3: {"b": "2"}, CLUSTER_DEFAULT: {"c": "3"}})
    assert (layers.per_broker, layers.cluster) == ({"a": "1"}, {"c": "3"})


def test_settings_kafka_has_no_default_for_read_as_null() -> None:
    """Kafka describes these as null when unset; what applies comes from their synonyms."""
    layers = ConfigLayers(static())
    entries = {e.key.name: e for e in layers.broker_entries(cluster_default=False)}
    for name in (
        "log.retention.ms",
        "log.roll.ms",
        "log.roll.jitter.ms",
        "log.flush.interval.ms",
        "advertised.listeners",
        "replica.selector.class",
        "ssl.keystore.location",
    ):
        assert (entries[name].value, entries[name].source) == (None, S.DEFAULT_CONFIG), name
    assert layers.effective.log_retention_ms == 168 * 3_600_000
    assert layers.effective.log_roll_jitter_ms == 0


def test_settings_outside_kafkas_broker_config_are_listed_once_set() -> None:
    def listed(layers: ConfigLayers) -> set[str]:
        return {e.key.name for e in layers.broker_entries(cluster_default=False)}

    quiet = listed(ConfigLayers(static()))
    assert not quiet & {"leader.replication.throttled.rate", "super.users"}
    assert "message.max.bytes" in quiet
    set_ = listed(
        ConfigLayers(
            static(super_users="User:admin"), cluster={"leader.replication.throttled.rate": "10"}
        )
    )
    assert {"leader.replication.throttled.rate", "super.users"} <= set_


def test_topic_configs_are_kafka_4s() -> None:
    assert not {"message.downconversion.enable", "message.timestamp.difference.max.ms"} & set(
        TOPIC_KEYS
    )
    assert TOPIC_KEYS["message.timestamp.after.max.ms"].default == "3600000"
    assert TOPIC_KEYS["retention.ms"].doc.startswith(
        "This configuration controls the maximum time we will retain a log"
    )
    assert BROKER_KEYS["group.share.max.partition.max.record.locks"].default == "4000"
